"""Soccar cars on one GPU: 1v0 arenas (one car and the ball), the fused kernel and eager PyTorch.

    python bench/soccar_cars_gpu.py --out OUT [--meshes DIR] [--budget 235]

Sections, each in its own subprocess with its share of the time budget (the machinery of
bench/soccar_gpu.py: a slow compile, a hang or a crash costs only its section), most important first:

1. ``cars_fused``: car-ticks/s of 1v0 arenas stepped by the fused K-tick kernel
   (`kernels/arena.launch_step_ticks_`, K = ``--ticks``, controls held for the K ticks): 32 envs per
   program at every size (largest first), then the other ``--fused-configs`` (envs per program
   [:register cap]) at the two largest sizes while another compile fits; each configuration's
   compile time (its first launch, with an empty Triton cache: the parent points TRITON_CACHE_DIR at
   a fresh folder that all sections share); device memory per env (the state and the launch's
   buffers: the peak over a step, divided by the envs).
2. ``cars_checks``: on the GPU, the fused path against eager PyTorch on the car parity rollouts
   (`tests/parity/car_harness`, ``--per-family`` starts of every family, 1 s, one tick per call as
   the parity sweep steps): errors after 1 s and flag agreement per family, apart for the rollouts
   whose car body touched the arena (the fused kernel's body contacts, `car_contacts.car_world_contacts`:
   Bullet's GJK, separating axes where the eager path's Bullet, `car_world`, runs EPA). The fused run's recording of every
   rollout is saved as ``OUT/soccar_cars_fused_parity.npz``; on a machine with RocketSim,
   ``python -m tests.parity.car_sweep --port OUT/soccar_cars_fused_parity.npz --out
   docs/fidelity/cars_h200_fused.md`` compares it with RocketSim (docs/FIDELITY.md).
3. ``cars_eager``: car-ticks/s of the PyTorch tick (`arena.step_ticks`, eager; the wheels' ray casts
   run as the query kernel; the car bodies' arena contacts, Bullet's GJK/EPA, in PyTorch), smallest size first while the next one is predicted to fit, and its memory per env.
4. ``cars_stages``: the car twins' stage tests (tests/envs/soccar/kernels: test_rigid_body,
   test_vehicle, test_car, test_car_world, test_arena) on the GPU, while time allows (each test kernel is a compile;
   ``pytest tests/envs/soccar/kernels`` runs them all without a time limit).

The timed arenas start at RocketSim's kickoff (ball at the centre), then each car is moved to a
random spot on the floor with a random heading, speed and boost, and the balls are thrown about the
field; every timed call draws the controls of its K ticks from a pool of random controls (throttle
and steer uniform, sticks at random, jump held in 10% of calls, boost in 30%, handbrake in 10%), so
cars drive, turn, slide, jump and flip. Times are CUDA-event medians over repeats after ~60 ticks of
warm-up. Every result goes to ``OUT/soccar_<section>.json`` as soon as it is taken (device, versions,
sizes, results, errors, skips); a table is printed last. ``--device cpu`` dry-runs every code path on
Triton's interpreter (it sets TRITON_INTERPRET=1) at 32 envs, 2 ticks per call and 1 repeat.
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

SECTIONS = ("cars_fused", "cars_checks", "cars_eager", "cars_stages")
# Shares of the time budget; each section gets its share of what is left when it starts. "cars_fused"
# pays for the fused kernel's compile (about 80 s of CPU on our machine), the others reuse it from
# the run's Triton cache.
SHARES = {"cars_fused": 0.45, "cars_checks": 0.20, "cars_eager": 0.12, "cars_stages": 0.23}
DEFAULT_SIZES = (1 << 10, 1 << 14, 1 << 18, 1 << 20)
CONTROL_POOL = 8  # random control sets the timed calls cycle through
PARITY_FILE = "soccar_cars_fused_parity.npz"


# --- arenas and controls --------------------------------------------------------------------------


def car_arena(n: int, mode: str, meshes, seed: int = 0):
    """A 1v0 arena of n envs: the kickoff, then each car on the floor at a random spot, heading, speed
    and boost, the ball thrown about the field."""
    import torch

    from nitro.envs.soccar import constants as C
    from nitro.envs.soccar.arena import Arena
    from nitro.envs.soccar.rigid_body import angle_to_rot_mat

    arena = Arena(n, blue=1, orange=0, device=common.DEVICE, mode=mode, meshes=meshes, seed=seed)
    arena.reset_kickoff()
    g = torch.Generator().manual_seed(seed)
    yaw = (torch.rand(n, generator=g) * 2 - 1) * torch.pi
    rot_mat = angle_to_rot_mat(yaw, torch.zeros(n), torch.zeros(n))
    xy = (torch.rand(n, 2, generator=g) * 2 - 1) * torch.tensor([3000.0, 4000.0])
    pos = torch.cat((xy, torch.full((n, 1), C.CAR_SPAWN_REST_Z)), 1)
    vel = rot_mat[:, :, 0] * (torch.rand(n, 1, generator=g) * 1800 - 300)
    vel[:, 2] = 0.0
    device = arena.device
    arena.set_car(
        0,
        pos=pos.to(device),
        rot_mat=rot_mat.to(device),
        vel=vel.to(device),
        boost=(torch.rand(n, generator=g) * 100).to(device),
    )
    ball_pos, ball_vel, ball_ang_vel = common._random_balls(n, seed + 1, device)
    arena.set_ball(pos=ball_pos, vel=ball_vel, ang_vel=ball_ang_vel)
    return arena


def control_pool(n: int, seed: int, device) -> list:
    """`CONTROL_POOL` random [n, 1, 8] control sets (see the module's docstring)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    pool = []
    for _ in range(CONTROL_POOL):
        analog = torch.rand(n, 5, generator=g) * 2 - 1
        analog[:, 2:] = torch.where(torch.rand(n, 3, generator=g) < 0.5, 0.0, analog[:, 2:])
        buttons = (torch.rand(n, 3, generator=g) < torch.tensor([0.1, 0.3, 0.1])).float()
        pool.append(torch.cat((analog, buttons), 1)[:, None].to(device))
    return pool


def cycling(step, pool):
    """A call of ``step(controls)`` with the next control set of the pool each time."""
    at = [0]

    def call():
        step(pool[at[0] % len(pool)])
        at[0] += 1

    return call


def tick_rate(rec, args, mode: str, n: int, call, repeats: int | None = None, warmup: int | None = None, **extra):
    """Time ``call`` (args.ticks ticks of n 1v0 envs) after ``warmup`` calls (default ~60 ticks) and
    record its car-ticks/s; returns the median seconds per call."""
    if warmup is None:
        warmup = max(2, 60 // args.ticks) if common.DEVICE == "cuda" else 1  # the dry run: code paths only
    times = common._time_calls(call, repeats or args.repeats, warmup=warmup)
    row = {"mode": mode, "num_envs": n, "ticks_per_call": args.ticks, **extra, **common._timing_row(times)}
    row["car_ticks_per_s"] = n * args.ticks / row["median_s"]
    rec.add(**row)
    return row["median_s"]


def memory_per_env(rec, name: str, n: int, build_and_step) -> None:
    """Peak device memory of building an n-env arena and stepping it once, per env (bytes)."""
    import torch

    if common.DEVICE != "cuda":
        return
    common._release()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    keep = build_and_step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    rec.data.setdefault("memory_bytes_per_env", {})[f"{name} at {n} envs"] = peak / n
    rec.say(f"  {name}: {peak / n:.0f} B per env at {n} envs")
    del keep


# --- sections -------------------------------------------------------------------------------------


def section_cars_fused(rec, args) -> None:
    from nitro.envs.soccar.kernels.arena import launch_step_ticks_
    from nitro.envs.soccar.state import ArenaEvents

    rec.data["compile_seconds"] = {}
    sizes = common._sizes_largest_first(args)
    for i, config in enumerate(args.fused_configs):
        block, _, cap = config.partition(":")
        block, cap = int(block), int(cap or 0)
        name = f"fused_b{block}" + (f"_r{cap}" if cap else "")

        def launcher(n, block=block, cap=cap):
            arena = car_arena(n, "fused", args.meshes)
            events = ArenaEvents.none(n, 1, arena.device)
            pool = control_pool(n, 1, arena.device)
            step = cycling(lambda c: launch_step_ticks_(arena.state, events, c, arena.world, args.ticks, block, cap), pool)
            return arena, step

        def compile_once(name=name, launcher=launcher):
            _, step = launcher(min(1024, max(args.sizes)))
            t0 = time.perf_counter()
            step()
            common._sync()
            rec.data["compile_seconds"][name] = time.perf_counter() - t0
            rec.data["triton_cache"] = os.environ.get("NITRO_BENCH_CACHE", "cold")
            rec.say(f"  {name} compiled and ran in {time.perf_counter() - t0:.1f} s")

        # another configuration is another compile: started only when one like the first would fit
        first = next(iter(rec.data["compile_seconds"].values()), 60.0)
        if not rec.measure(f"compile {name}", compile_once, needs_s=1.2 * first + 10):
            continue
        for n in sizes if i == 0 else sizes[:2]:

            def one(n=n, name=name, launcher=launcher, block=block, cap=cap):
                _, step = launcher(n)
                tick_rate(rec, args, name, n, step, block=block, maxnreg=cap)

            rec.measure(f"{name} at {n} envs", one, needs_s=8)
            common._release()
        if i == 0:

            def measure_memory(launcher=launcher):
                def build_and_step():
                    arena, step = launcher(sizes[0])
                    step()
                    return arena

                memory_per_env(rec, "fused", sizes[0], build_and_step)

            rec.measure("fused memory per env", measure_memory, needs_s=8)


def section_cars_eager(rec, args) -> None:
    """Smallest size first: each size's time per call predicts the next one's, which is skipped when
    it would not fit the section's time (the PyTorch tick, car bodies included, is slow at scale)."""
    repeats, warmup = max(1, args.repeats // 2), 2
    done, per_call = [], {}
    for n in sorted(args.sizes):
        if done:
            predicted = per_call[done[-1]] * n / done[-1] * (repeats + warmup + 1)
            if predicted > rec.time_left() - 10:
                rec.data["skipped"].append({"what": f"eager at {n} envs", "why": f"~{predicted:.0f} s predicted"})
                rec.flush()
                break

        def one(n=n):
            arena = car_arena(n, "eager", args.meshes)
            step = cycling(lambda c: arena.step(c, ticks=args.ticks), control_pool(n, 1, arena.device))
            per_call[n] = tick_rate(rec, args, "eager", n, step, repeats=repeats, warmup=warmup)
            done.append(n)

        rec.measure(f"eager at {n} envs", one, needs_s=10)
        common._release()
    if not done:
        return

    def measure_memory():
        def build_and_step():
            arena = car_arena(done[-1], "eager", args.meshes)
            arena.step(control_pool(done[-1], 1, arena.device)[0], ticks=1)
            return arena

        memory_per_env(rec, "eager", done[-1], build_and_step)

    rec.measure("eager memory per env", measure_memory, needs_s=15)


def section_cars_checks(rec, args) -> None:
    import numpy as np

    from tests.parity import car_harness as H
    from tests.parity.car_sweep import save_recording

    rollouts = H.make_rollouts(args.per_family, H.TICK_RATE, seed=0)
    if common.DEVICE != "cuda":  # dry run: a few rollouts, a few ticks
        rollouts = rollouts.select(np.arange(0, len(rollouts), max(1, len(rollouts) // 6)))
        rollouts.controls = rollouts.controls[:, : args.ticks]
    recordings = {}

    def run(mode):
        t0 = time.perf_counter()
        recordings[mode] = H.run_nitro(rollouts, device=common.DEVICE, mode=mode)
        rec.say(f"  {mode}: {len(rollouts)} rollouts x {rollouts.ticks} ticks in {time.perf_counter() - t0:.1f} s")

    def record_fused():
        run("fused")
        where = {
            "device": common._env_info()["device"],
            "mode": "fused",
            "torch": common._env_info()["torch"],
            "seed": 0,
            "command": f"python bench/soccar_cars_gpu.py (cars_checks, --per-family {args.per_family})",
        }
        save_recording(Path(args.out) / PARITY_FILE, rollouts, recordings["fused"], where)
        rec.add(check="fused parity recording", file=PARITY_FILE, rollouts=len(rollouts), passed=True)

    if not rec.measure("fused path on the parity rollouts", record_fused, needs_s=30):
        return
    if not rec.measure("eager path on the parity rollouts", lambda: run("eager"), needs_s=30):
        return
    eager, fused = recordings["eager"], recordings["fused"]
    seconds = min(1.0, rollouts.ticks / H.TICK_RATE)
    err = H.errors_at(eager, fused, seconds)
    family = np.array(rollouts.family)
    # Rollouts whose body touched the arena in the eager run are reported apart: there the fused
    # kernel's separating axes stand in for Bullet's EPA (tests/parity/test_fused_body_parity.py: into
    # the walls median 1.3 UU after 1 s on the CPU; landings exact).
    body = eager.world_contact.any(1)
    for name in dict.fromkeys(rollouts.family):
        for touched, label, pos_limit, rot_limit, agree_limit in (
            (False, "", 1e-2, 1e-2, 0.99), (True, ", body touched", 4.0, 3.0, 0.95)
        ):
            rows = (family == name) & (body == touched)
            if not rows.any():
                continue
            agree = (eager.flags[rows] == fused.flags[rows]).mean((0, 1))
            pos, rot = err["pos"][rows], err["rot"][rows]
            rec.add(
                check=f"fused vs eager, {name}{label}",
                rollouts=int(rows.sum()),
                seconds=seconds,
                median_pos_error_uu=float(np.median(pos)),
                p95_pos_error_uu=float(np.percentile(pos, 95)),
                max_pos_error_uu=float(pos.max()),
                median_rot_error_deg=float(np.median(rot)),
                flags_agree=[float(a) for a in agree],
                # rounding (fused multiply-adds) grows chaotically through flips and landings, as in
                # RocketSim against itself one ulp apart; the medians stay at rounding level (without
                # body contacts) or within the body contacts' approximation (the CPU parity test's
                # bounds for the walls: 4 UU, 3 degrees)
                passed=bool(np.median(pos) <= pos_limit and np.median(rot) <= rot_limit and agree.min() >= agree_limit),
            )


def section_cars_stages(rec, args) -> None:
    """The car twins' stage tests, cheapest first; the fused tick's (test_arena) last: its 1v0 case
    reuses the kernel cars_fused compiled, its 1v1 case is a compile of its own."""
    common.run_stage_tests(rec, args.meshes, ("test_rigid_body", "test_vehicle", "test_car", "test_car_world", "test_arena"))


# --- orchestration --------------------------------------------------------------------------------


def _worker(section: str, args) -> None:
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(min(16, os.cpu_count() or 1)))
    faulthandler.enable()
    common._watchdog(max(5.0, args.limit - 4.0))
    deadline = time.monotonic() + args.limit - common.WRAP_UP_S
    import torch

    if common.DEVICE == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark measures the GPU")
    extra = {"sizes": list(args.sizes), "ticks_per_call": args.ticks, "repeats": args.repeats, "limit_s": args.limit}
    rec = common.Recorder(Path(args.out) / f"soccar_{section}.json", section, extra, deadline)
    {
        "cars_fused": section_cars_fused,
        "cars_checks": section_cars_checks,
        "cars_eager": section_cars_eager,
        "cars_stages": section_cars_stages,
    }[section](rec, args)
    rec.finish()
    rec.say(f"done, {len(rec.data['results'])} results, {len(rec.data['errors'])} errors")


def _summary(out: Path) -> str:
    """The best fused rate, compile times and memory per env, under the per-section table."""
    import json

    lines = ["", "summary"]
    best = None
    for section in ("cars_fused", "cars_eager"):
        path = out / f"soccar_{section}.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        rows = [r for r in data["results"] if "car_ticks_per_s" in r]
        if rows:
            top = max(rows, key=lambda r: r["car_ticks_per_s"])
            lines.append(f"  best {section}: {top['car_ticks_per_s']:.3e} car-ticks/s ({top['mode']}, {top['num_envs']} envs)")
            if section == "cars_fused":
                best = top["car_ticks_per_s"]
        for what, per_env in data.get("memory_bytes_per_env", {}).items():
            lines.append(f"  memory {what}: {per_env:.0f} B per env")
    if best is not None:
        lines.append(f"  goal 1e9 car-ticks/s: {'met' if best >= 1e9 else 'not met'} ({best / 1e9:.2f}x)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for soccar_cars_*.json and the parity recording")
    parser.add_argument("--meshes", default=None, help="folder of soccar/mesh_*.cmf (else $NITRO_MESHES / package)")
    parser.add_argument("--sizes", default=None, help="comma-separated env counts (default 1k,16k,262k,1M)")
    parser.add_argument("--ticks", type=int, default=None, help="ticks per timed call (8; 2 dry)")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per measurement (10; 1 dry)")
    parser.add_argument(
        "--fused-configs",
        default="32,64,32:168",
        help="envs per program[:register cap], comma-separated; each is a compile, tried while time allows",
    )
    parser.add_argument("--per-family", type=int, default=40, help="parity rollouts per family (the CPU sweep's)")
    parser.add_argument("--budget", type=float, default=235.0, help="seconds for all sections together")
    parser.add_argument("--only", default=",".join(SECTIONS), help="sections to run, comma-separated")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    args = parser.parse_args()
    dry = args.device == "cpu"
    if dry:
        os.environ["TRITON_INTERPRET"] = "1"
    if args.sizes:
        args.sizes = tuple(int(s) for s in args.sizes.split(","))
    else:
        args.sizes = (32,) if dry else DEFAULT_SIZES
    args.ticks = args.ticks or (2 if dry else 8)
    args.repeats = args.repeats or (1 if dry else 10)
    args.fused_configs = tuple(str(args.fused_configs).split(","))
    if args.meshes:
        os.environ["NITRO_MESHES"] = str(Path(args.meshes).resolve())
    common.DEVICE = args.device
    if args.worker:
        _worker(args.worker, args)
        return
    # a Triton cache warmed by bench/soccar_warm.py is reused (its compile times are that script's)
    os.environ["NITRO_BENCH_CACHE"] = "warm" if "TRITON_CACHE_DIR" in os.environ else "cold"
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="nitro_cars_triton_"))
    wanted = common.run_sections(__file__, args, SECTIONS, SHARES, [
        "--sizes", ",".join(map(str, args.sizes)), "--ticks", str(args.ticks), "--repeats", str(args.repeats),
        "--per-family", str(args.per_family), "--fused-configs", ",".join(args.fused_configs),
    ])
    print(common._table(Path(args.out), wanted) + _summary(Path(args.out)), flush=True)


if __name__ == "__main__":
    main()
