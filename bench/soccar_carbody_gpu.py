"""Soccar car bodies on one GPU: the body-contact kernels against eager PyTorch, and their speed.

    python bench/soccar_carbody_gpu.py --out OUT [--meshes DIR] [--budget 230]

Sections, each in its own subprocess with its share of the time budget (the machinery of
bench/soccar_gpu.py), most important first:

1. ``body_checks``: 1v1 scenes of the body parity families (`tests/parity/body_harness`: a car into
   the ball on the ground and in the air, the ball onto a car, cars side by side and in the air;
   ``--per-family`` scenes each, 1 s) stepped on the GPU twice: with the body-contact kernels
   (`kernels/car_ball.py`, `kernels/sequential_impulse.py`: what CUDA runs by default) and with
   their PyTorch stages forced; positions after 1 s compared per family (median and max). The
   kernels' run is also compared with the CPU reference on a few scenes per family.
2. ``body_kernels``: each kernel's own rate against its PyTorch stage on the GPU: car-ball contacts
   (lanes/s at 1M (env, car) lanes) and the contact solve (envs/s on rows captured from 1v1 scenes,
   tiled to 64k envs).
3. ``body_eager``: env-ticks/s of the whole eager 1v1 tick on the GPU (`arena.step_ticks`: the car
   bodies against the arena, the ball and each other, with the kernels), smallest size first while
   the next fits, and memory per env.
4. ``body_stages``: the body twins' stage tests (tests/envs/soccar/kernels: test_car_ball,
   test_sequential_impulse) on the GPU.
5. ``body_graph``: ``Arena(mode="graph")`` (the tick compiled, K ticks captured in a CUDA graph) for
   1v0 and 1v1: the first call's compile + capture time, a check against eager (car and ball
   positions after 8 ticks from the same kickoff), then env-ticks/s and car-ticks/s at 4k, 64k,
   256k and 1M envs while they fit, and peak memory per env. The car-world GJK/EPA loops run their
   fixed counts there, so the compile is long: a compile that outlives the share is recorded as such.

The fused K-tick kernel (`kernels/arena.py`) has no car-body stages yet: bench/soccar_cars_gpu.py
measures it. Times are CUDA-event medians over repeats after warm-up. Every result goes to
``OUT/soccar_<section>.json`` as soon as it is taken (device, versions, sizes, results, errors,
skips); a table is printed last. ``--device cpu`` dry-runs every code path on Triton's interpreter.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import soccar_gpu as common  # the section machinery: Recorder, timing, workers, table

SECTIONS = ("body_checks", "body_kernels", "body_eager", "body_stages", "body_graph")
SHARES = {"body_checks": 0.25, "body_kernels": 0.15, "body_eager": 0.2, "body_stages": 0.1, "body_graph": 0.3}
GRAPH_SIZES = (1 << 12, 1 << 16, 1 << 18, 1 << 20)
DEFAULT_SIZES = (1 << 10, 1 << 13, 1 << 16)


def scenes_of(per_family: int, ticks: int):
    """Every body family's scenes as 1v1 line-ups (the car-ball scenes get a second car parked far
    off), one `Scenes` of ``per_family`` per family each."""
    import numpy as np

    from tests.parity import body_harness as H

    out = {}
    for family in (*H.CAR_BALL_FAMILIES, *H.CAR_CAR_FAMILIES):
        s = H.make_scenes(family, per_family, ticks, seed=7)
        if len(s.presets) == 1:  # park a second car behind a goal, out of everything's reach
            n = len(s)
            park = lambda x, v, n=n: np.concatenate([x, np.broadcast_to(v, (n, 1, *x.shape[2:]))], 1)
            s = H.Scenes(
                family=s.family, presets=("octane", "octane"), ball_pos=s.ball_pos, ball_vel=s.ball_vel,
                ball_ang_vel=s.ball_ang_vel, pos=park(s.pos, np.array([0.0, 5600.0, 17.03], np.float32)),
                rot_mat=park(s.rot_mat, np.eye(3, dtype=np.float32)), vel=park(s.vel, np.zeros(3, np.float32)),
                ang_vel=park(s.ang_vel, np.zeros(3, np.float32)), controls=park(s.controls, np.zeros((ticks, 8), np.float32)),
            )  # fmt: skip
        out[family] = s
    return out


def run_scenes(scenes, device: str, kernels: bool):
    """``scenes`` stepped on ``device``: with the body kernels where they run (CUDA), or with their
    PyTorch stages forced. Returns the recording."""
    from nitro.envs.soccar import kernels as kernel_switch
    from tests.parity import body_harness as H

    chosen = kernel_switch.use_kernels
    if not kernels:
        kernel_switch.use_kernels = lambda tensor, requested: False if requested is None else requested
    try:
        return H.run_nitro(scenes, device=device)
    finally:
        kernel_switch.use_kernels = chosen


def section_body_checks(rec, args) -> None:
    import numpy as np

    from tests.parity import body_harness as H

    ticks = 120 if common.DEVICE == "cuda" else 3
    per = args.per_family if common.DEVICE == "cuda" else 2
    for family, scenes in scenes_of(per, ticks).items():

        def check(family=family, scenes=scenes):
            t0 = time.perf_counter()
            fused = run_scenes(scenes, common.DEVICE, kernels=True)
            eager = run_scenes(scenes, common.DEVICE, kernels=False)
            err = H.errors_after(eager, fused, ticks / 120)
            pos = np.concatenate([err["ball"], err["cars"].ravel()])
            rec.add(
                check=f"kernels vs PyTorch stages on the GPU, {family}",
                scenes=len(scenes),
                median_pos_error_uu=float(np.median(pos)),
                max_pos_error_uu=float(pos.max()),
                # kernel and reference differ by float rounding (the closed-form nearest point, fused
                # multiply-adds); 1 s of contacts carries it on, as one ulp does in RocketSim
                passed=bool(np.median(pos) <= 0.05),
                seconds=time.perf_counter() - t0,
            )
            few = H.Scenes.concat([scenes]) if len(scenes) <= 4 else _first(scenes, 4)
            t0 = time.perf_counter()
            cpu = run_scenes(few, "cpu", kernels=False)
            gpu = run_scenes(few, common.DEVICE, kernels=True)
            err = H.errors_after(cpu, gpu, ticks / 120)
            pos = np.concatenate([err["ball"], err["cars"].ravel()])
            rec.add(
                check=f"GPU kernels vs CPU reference, {family}",
                scenes=len(few),
                median_pos_error_uu=float(np.median(pos)),
                max_pos_error_uu=float(pos.max()),
                passed=bool(np.median(pos) <= 0.05),
                seconds=time.perf_counter() - t0,
            )

        rec.measure(f"body check {family}", check, needs_s=20)


def _first(scenes, k: int):
    import dataclasses

    fields = {f.name: getattr(scenes, f.name)[:k] for f in dataclasses.fields(scenes) if f.name not in ("family", "presets")}
    return type(scenes)(family=scenes.family[:k], presets=scenes.presets, **fields)


def section_body_kernels(rec, args) -> None:
    import torch

    from nitro.envs.soccar import car_ball, sequential_impulse
    from nitro.envs.soccar import constants as C
    from nitro.envs.soccar.car_config import CarParams
    from nitro.envs.soccar.mutators import MutatorConfig, TickParams
    from nitro.envs.soccar.rigid_body import angle_to_rot_mat

    device = common.DEVICE
    params = TickParams.from_mutators(MutatorConfig(), 1.0 / 120.0)
    lanes = (1 << 20) if device == "cuda" else 64
    n, c = lanes // 2, 2
    g = torch.Generator().manual_seed(0)
    pos = torch.rand(n, c, 3, generator=g) * torch.tensor([160.0, 200.0, 40.0]) + torch.tensor([0.0, 0.0, 17.0])
    rot = angle_to_rot_mat(torch.rand(n * c, generator=g) * 6.28, torch.zeros(n * c), torch.zeros(n * c)).reshape(n, c, 3, 3)
    ball = torch.rand(n, 3, generator=g) * torch.tensor([160.0, 200.0, 60.0]) + torch.tensor([0.0, 0.0, 93.0])
    hitbox = CarParams.build(["octane"] * c, torch.device(device)).hitbox
    args_ = (ball.to(device), torch.eye(3, device=device).expand(n, 3, 3).contiguous(), (pos * C.UU_TO_BT_F32).to(device), rot.to(device), hitbox, params)

    def contacts():
        for use in (True, False):
            times = common._time_calls(lambda use=use: car_ball.car_ball_contacts(*args_, use_kernels=use), args.repeats, warmup=2)
            row = common._timing_row(times)
            rec.add(stage="car_ball_contacts", kernel=use, lanes=lanes, lanes_per_s=lanes / row["median_s"], **row)

    rec.measure("car-ball contacts", contacts, needs_s=20)

    def solve():
        from tests.envs.soccar.kernels.test_sequential_impulse import captured_solves

        rows, bodies, p = captured_solves()[-1]
        envs = (1 << 16) if device == "cuda" else 16
        reps = -(-envs // rows.active.shape[0])
        tile = lambda x: x.repeat(reps, *([1] * (x.dim() - 1)))[:envs].to(device)
        import dataclasses

        rows = dataclasses.replace(rows, **{f.name: tile(getattr(rows, f.name)) for f in dataclasses.fields(rows)})
        bodies = dataclasses.replace(bodies, **{f.name: tile(getattr(bodies, f.name)) for f in dataclasses.fields(bodies)})
        for use in (True, False):
            times = common._time_calls(lambda use=use: sequential_impulse.solve_contacts(rows, bodies, p, use_kernels=use), args.repeats, warmup=2)
            row = common._timing_row(times)
            rec.add(stage="solve_contacts", kernel=use, envs=envs, rows=rows.active.shape[1], envs_per_s=envs / row["median_s"], **row)

    rec.measure("contact solve", solve, needs_s=30)


def section_body_eager(rec, args) -> None:
    import torch
    from soccar_cars_gpu import control_pool, cycling

    from nitro.envs.soccar.arena import Arena

    for n in sorted(args.sizes):

        def one(n=n):
            arena = Arena(n, blue=1, orange=1, device=common.DEVICE, meshes=args.meshes, seed=0)
            arena.reset_kickoff()
            pool = [c.expand(n, 2, 8).contiguous() for c in control_pool(n, 0, arena.device)]
            call = cycling(lambda controls: arena.step(controls, ticks=args.ticks), pool)
            times = common._time_calls(call, args.repeats, warmup=2)
            row = {"mode": "eager (body kernels)", "num_envs": n, "ticks_per_call": args.ticks, **common._timing_row(times)}
            row["env_ticks_per_s"] = n * args.ticks / row["median_s"]
            rec.add(**row)
            if common.DEVICE == "cuda":
                rec.data.setdefault("memory_bytes_per_env", {})[f"1v1 eager at {n} envs"] = torch.cuda.max_memory_allocated() / n

        if not rec.measure(f"eager 1v1 at {n} envs", one, needs_s=30):
            break


def section_body_stages(rec, args) -> None:
    common.run_stage_tests(rec, args.meshes, common.BODY_STAGE_TESTS)


def section_body_graph(rec, args) -> None:
    import torch
    from soccar_cars_gpu import control_pool

    from nitro.envs.soccar.arena import Arena

    rec.data["compile_capture_seconds"] = {}
    sizes = (8,) if common.DEVICE != "cuda" else GRAPH_SIZES
    mode = "graph" if common.DEVICE == "cuda" else "eager"  # the dry run checks the plumbing, not Inductor
    for blue, orange in ((1, 0), (1, 1)):
        name, cars = f"{blue}v{orange}", blue + orange

        def first_call(n=sizes[0], name=name, blue=blue, orange=orange):
            graph = Arena(n, blue=blue, orange=orange, device=common.DEVICE, meshes=args.meshes, seed=0, mode=mode)
            eager = Arena(n, blue=blue, orange=orange, device=common.DEVICE, meshes=args.meshes, seed=0)
            graph.reset_kickoff()
            eager.reset_kickoff()
            ctl = control_pool(n, 0, graph.device)[0].expand(n, blue + orange, 8).contiguous()
            rec.say(f"  compiling the {name} tick and capturing 8 ticks (long: the GJK/EPA loops unrolled) ...")
            t0 = time.perf_counter()
            graph.step(ctl, ticks=8)
            common._sync()
            rec.data["compile_capture_seconds"][name] = time.perf_counter() - t0
            rec.flush()
            eager.step(ctl, ticks=8)
            # Inductor fuses and may contract a*b+c into FMAs, so positions differ by float32 rounding
            # that 8 ticks of contacts can grow; 1 UU (2 cm) bounds that and is far below a game's scale.
            errs = [(g.pos - e.pos).abs().amax(-1).flatten() for g, e in ((graph.cars, eager.cars), (graph.ball, eager.ball))]
            err = torch.cat(errs).float()
            rec.add(
                check=f"graph_vs_eager_{name}_8_ticks", passed=bool(err.max() <= 1.0), num_envs=n,  # sync-ok: a check
                median_pos_error_uu=float(err.median()), max_pos_error_uu=float(err.max()), tolerance_uu=1.0,
            )

        if not rec.measure(f"{name} compile + capture", first_call, needs_s=60):
            continue
        for n in sizes:

            def timed(n=n, name=name, blue=blue, orange=orange, cars=cars):
                arena = Arena(n, blue=blue, orange=orange, device=common.DEVICE, meshes=args.meshes, seed=0, mode=mode)
                arena.reset_kickoff()
                ctl = control_pool(n, 0, arena.device)[0].expand(n, blue + orange, 8).contiguous()
                if common.DEVICE == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                times = common._time_calls(lambda: arena.step(ctl, ticks=args.ticks), args.repeats, warmup=2)
                row = {"mode": f"graph {name}", "num_envs": n, "ticks_per_call": args.ticks, **common._timing_row(times)}
                row["env_ticks_per_s"] = n * args.ticks / row["median_s"]
                row["car_ticks_per_s"] = row["env_ticks_per_s"] * cars
                if common.DEVICE == "cuda":
                    row["peak_memory_bytes_per_env"] = torch.cuda.max_memory_allocated() / n
                rec.add(**row)

            if not rec.measure(f"graph {name} at {n} envs", timed, needs_s=30):
                break


def _worker(section: str, args) -> None:
    faulthandler.enable()
    common._watchdog(max(5.0, args.limit - 4.0))
    deadline = time.monotonic() + args.limit - common.WRAP_UP_S
    import torch

    if common.DEVICE == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark measures the GPU")
    extra = {"sizes": list(args.sizes), "ticks_per_call": args.ticks, "repeats": args.repeats, "limit_s": args.limit}
    rec = common.Recorder(Path(args.out) / f"soccar_{section}.json", section, extra, deadline)
    {
        "body_checks": section_body_checks,
        "body_kernels": section_body_kernels,
        "body_eager": section_body_eager,
        "body_stages": section_body_stages,
        "body_graph": section_body_graph,
    }[section](rec, args)
    rec.finish()
    rec.say(f"done, {len(rec.data['results'])} results, {len(rec.data['errors'])} errors")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for soccar_body_*.json")
    parser.add_argument("--meshes", default=None, help="folder of soccar/mesh_*.cmf (else $NITRO_MESHES / package)")
    parser.add_argument("--sizes", default=None, help="comma-separated env counts of the eager tick (default 1k,8k,64k)")
    parser.add_argument("--ticks", type=int, default=None, help="ticks per timed call (4; 1 dry)")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per measurement (5; 1 dry)")
    parser.add_argument("--per-family", type=int, default=16, help="scenes per body family in the checks")
    parser.add_argument("--budget", type=float, default=230.0, help="seconds for all sections together")
    parser.add_argument("--only", default=",".join(SECTIONS), help="sections to run, comma-separated")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    args = parser.parse_args()
    dry = args.device == "cpu"
    if dry:
        os.environ["TRITON_INTERPRET"] = "1"
    args.sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else ((8,) if dry else DEFAULT_SIZES)
    args.ticks = args.ticks or (1 if dry else 4)
    args.repeats = args.repeats or (1 if dry else 5)
    if args.meshes:
        os.environ["NITRO_MESHES"] = str(Path(args.meshes).resolve())
    common.DEVICE = args.device
    if args.worker:
        _worker(args.worker, args)
        return
    # a fresh Triton cache shared by the workers: the first compile is timed cold, later ones reuse it
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="nitro_body_triton_")
    wanted = common.run_sections(__file__, args, SECTIONS, SHARES, [
        "--sizes", ",".join(map(str, args.sizes)), "--ticks", str(args.ticks), "--repeats", str(args.repeats),
        "--per-family", str(args.per_family),
    ])
    print(common._table(Path(args.out), wanted), flush=True)


if __name__ == "__main__":
    main()
