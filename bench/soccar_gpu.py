"""Soccar ball physics on one GPU: correctness checks, then ball-ticks/s and query rates.

    python bench/soccar_gpu.py --out bench/results [--meshes DIR] [--budget 360]

Sections, each in its own subprocess with its own time limit (a slow compile or a crash costs only
its section; every measurement is written as soon as it is taken):

1. ``checks``: the Triton kernels against their PyTorch references at 65,536 queries (sphere
   manifolds, ray casts, box contacts) and the fused tick against the PyTorch tick pipeline.
2. ``fused``: ball-ticks/s of the whole tick in one Triton kernel (K ticks per launch), at 32 and
   64 envs per program.
3. ``query``: each query kernel's own rate at 1M queries (queries/s).
4. ``eager``: ball-ticks/s of the PyTorch pipeline (with the query kernel), eager.
5. ``compile``: the same pipeline under torch.compile (one tick compiled, dynamic batch size), then
   K compiled ticks captured in a CUDA graph ("graph"); checked against eager.

Times are CUDA-event medians over repeats after warm-up. Each section writes
``<out>/soccar_<section>.json`` (device, torch / triton versions, sizes, mode, medians) and the
parent prints a table at the end. The arena meshes must be present (rlgym-rocket-league installed,
$NITRO_MESHES, or ``--meshes``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("checks", "fused", "query", "eager", "compile")
# Share of the time budget per section. "checks" runs first and pays for Triton's first compile of
# every kernel (cached on disk for the later sections); "compile" pays for torch.compile.
SHARES = {"checks": 0.22, "fused": 0.14, "query": 0.08, "eager": 0.16, "compile": 0.40}
DEFAULT_SIZES = (1 << 10, 1 << 14, 1 << 18, 1 << 20)
DEVICE = "cuda"  # --device cpu only dry-runs the code paths on Triton's interpreter


# --- shared helpers (worker side) -----------------------------------------------------------------


def _env_info() -> dict:
    import torch

    info = {
        "device": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (dry run)",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    try:
        info["commit"] = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or None
        )
    except Exception:  # noqa: BLE001 - informational only
        info["commit"] = None
    return info


class Recorder:
    """Accumulates one section's results and rewrites its JSON after every measurement."""

    def __init__(self, path: Path, section: str, extra: dict):
        self.path = path
        self.data = {"bench": f"soccar_{section}", **_env_info(), **extra, "results": [], "errors": []}
        self.flush()

    def add(self, **row) -> None:
        self.data["results"].append(row)
        self.flush()
        print(json.dumps(row), flush=True)

    def error(self, what: str, exc: BaseException) -> None:
        self.data["errors"].append(
            {"what": what, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
        )
        self.flush()
        print(f"[error] {what}: {type(exc).__name__}: {exc}", flush=True)

    def flush(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.data, indent=2))


def _time_cuda(fn, repeats: int, warmup: int) -> list[float]:
    """Seconds per call of fn, one CUDA-event pair per call, after warm-up."""
    import torch

    for _ in range(warmup):
        fn()
    if DEVICE != "cuda":  # --device cpu: a dry run of the code paths (TRITON_INTERPRET=1), wall clock
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return times
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return times


def _random_balls(n: int, seed: int, device):
    """Balls spread over the arena with game-like speeds (up to 3000 UU/s) and spins."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    lo = torch.tensor([-3800.0, -4800.0, 100.0])
    hi = torch.tensor([3800.0, 4800.0, 1900.0])
    pos = lo + (hi - lo) * torch.rand(n, 3, generator=g)
    vel = torch.randn(n, 3, generator=g) * 1200.0
    ang = torch.randn(n, 3, generator=g) * 2.0
    return pos.to(device), vel.to(device), ang.to(device)


def _arena(n: int, mode: str, meshes, seed: int = 0, settle: int = 60):
    """A ball-only arena of n balls, stepped ``settle`` ticks so contacts are in a natural mix."""
    from nitro.envs.soccar.arena import Arena

    arena = Arena(n, blue=0, orange=0, device=DEVICE, mode=mode, meshes=meshes)
    pos, vel, ang = _random_balls(n, seed, DEVICE)
    arena.set_ball(pos=pos, vel=vel, ang_vel=ang)
    return arena, settle


# --- sections -------------------------------------------------------------------------------------


def section_checks(rec: Recorder, args) -> None:
    import torch

    from nitro.envs.soccar import collide, kernels
    from nitro.envs.soccar import constants as C
    from nitro.envs.soccar.mesh import box_contacts, load_arena_mesh, ray_cast

    mesh = load_arena_mesh(args.meshes, DEVICE)
    n = min(1 << 16, max(args.sizes))
    r, gap = C.BALL_COLLISION_RADIUS_SOCCAR, C.BALL_CONTACT_BREAKING_THRESHOLD
    g = torch.Generator().manual_seed(1)
    tri = torch.randint(0, mesh.num_triangles, (n,), generator=g).to(DEVICE)
    bary = torch.rand(n, 2, generator=g)
    bary = torch.where(bary.sum(1, keepdim=True) > 1, 1 - bary, bary).to(DEVICE)
    v = mesh.tri_verts[tri]
    on = v[:, 0] + bary[:, :1] * (v[:, 1] - v[:, 0]) + bary[:, 1:] * (v[:, 2] - v[:, 0])
    normal = mesh.tri_normals[tri]
    anywhere = _random_balls(n // 2, 2, DEVICE)[0]

    try:  # sphere manifolds: balls at -10..+2 UU from random triangles, and anywhere
        centers = torch.cat(
            [on + normal * (r + torch.empty(n, 1, device=DEVICE).uniform_(-10, gap + 2)), anywhere]
        )
        ref = collide.sphere_manifolds(mesh, centers, r, gap, use_kernels=False)
        ker = kernels.sphere_manifolds(mesh, centers, r, gap)
        held = ref.held()
        same = (ref.object == ker.object).all(1) & (ref.count == ker.count).all(1)
        diff = ((ref.depth - ker.depth).abs() * held).amax((1, 2))
        ok_lanes = same & (diff <= 1e-3)
        rec.add(
            check="sphere_manifolds",
            queries=len(centers),
            touching=int((ref.count.sum(1) > 0).sum()),
            mismatched_lane_fraction=1 - ok_lanes.float().mean().item(),
            max_depth_error_uu=float(diff[ok_lanes].max()),
            max_normal_error=float(((ref.normal - ker.normal).abs().amax(-1) * held)[ok_lanes].max()),
            passed=bool(1 - ok_lanes.float().mean().item() <= 1e-3),
        )
    except Exception as exc:  # noqa: BLE001
        rec.error("sphere_manifolds check", exc)

    try:  # ray casts from near the surfaces, 10..112 UU long
        start = torch.cat([on + normal * torch.empty(n, 1, device=DEVICE).uniform_(0, 60), anywhere])
        direction = torch.randn(len(start), 3, device=DEVICE)
        end = start + direction / direction.norm(dim=1, keepdim=True) * torch.empty(
            len(start), 1, device=DEVICE
        ).uniform_(10, mesh.query_radius)
        a, b = ray_cast(mesh, start, end, use_kernels=False), ray_cast(mesh, start, end, use_kernels=True)
        rec.add(
            check="ray_cast",
            queries=len(start),
            hits=int(a.hit.sum()),
            hit_mismatches=int((a.hit != b.hit).sum()),
            feature_mismatch_fraction=(a.feature != b.feature).float().mean().item(),
            max_fraction_error=float((a.fraction - b.fraction).abs().max()),
            passed=bool((a.hit == b.hit).all() and (a.fraction - b.fraction).abs().max() <= 1e-4),
        )
    except Exception as exc:  # noqa: BLE001
        rec.error("ray_cast check", exc)

    try:  # Octane-sized boxes, random orientations, near the surfaces
        centers = torch.cat([on + normal * torch.empty(n, 1, device=DEVICE).uniform_(0, 40), anywhere])
        q, _ = torch.linalg.qr(torch.randn(len(centers), 3, 3, device=DEVICE))
        half = torch.tensor([60.25, 43.35, 19.33], device=DEVICE)
        a = box_contacts(mesh, centers, q, half, 2.0, 8, use_kernels=False)
        b = box_contacts(mesh, centers, q, half, 2.0, 8, use_kernels=True)
        rec.add(
            check="box_contacts",
            queries=len(centers),
            touching=int((a.count > 0).sum()),
            count_mismatches=int((a.count != b.count).sum()),
            feature_mismatch_fraction=1 - (a.feature == b.feature).all(1).float().mean().item(),
            max_depth_error_uu=float((a.depth - b.depth).abs().max()),
            passed=bool((a.count == b.count).all() and (a.depth - b.depth).abs().max() <= 1e-3),
        )
    except Exception as exc:  # noqa: BLE001
        rec.error("box_contacts check", exc)

    m, calls = min(4096, max(args.sizes)), (8 if DEVICE == "cuda" else 1)
    try:  # fused kernel ticks == PyTorch pipeline ticks, 4096 balls x 240 ticks
        eager, settle = _arena(m, "eager", args.meshes, seed=3)
        fused, _ = _arena(m, "fused", args.meshes, seed=3)
        goals_equal = True
        for _ in range(calls):
            e, f = eager.step(ticks=30), fused.step(ticks=30)
            goals_equal &= bool(torch.equal(e.goal_blue | e.goal_orange, f.goal_blue | f.goal_orange))
        err = (eager.ball.pos - fused.ball.pos).norm(dim=1)
        rec.add(
            check=f"fused_vs_eager_{30 * calls}_ticks",
            envs=m,
            median_pos_error_uu=float(err.median()),
            p99_pos_error_uu=float(err.quantile(0.99)),
            max_pos_error_uu=float(err.max()),
            goal_events_equal=goals_equal,
            passed=bool(err.median() <= 1e-2),
        )
    except Exception as exc:  # noqa: BLE001
        rec.error("fused vs eager check", exc)


def section_query(rec: Recorder, args) -> None:
    import torch

    from nitro.envs.soccar import constants as C
    from nitro.envs.soccar import kernels
    from nitro.envs.soccar.mesh import load_arena_mesh

    mesh = load_arena_mesh(args.meshes, DEVICE)
    n = min(1 << 20, max(args.sizes))
    r, gap = C.BALL_COLLISION_RADIUS_SOCCAR, C.BALL_CONTACT_BREAKING_THRESHOLD
    # Half the queries near random triangles (real work), half anywhere in the arena.
    g = torch.Generator().manual_seed(4)
    tri = torch.randint(0, mesh.num_triangles, (n // 2,), generator=g).to(DEVICE)
    v = mesh.tri_verts[tri]
    centers = torch.cat(
        [(v[:, 0] + v[:, 1] + v[:, 2]) / 3 + mesh.tri_normals[tri] * r, _random_balls(n // 2, 5, DEVICE)[0]]
    )
    ends = centers + torch.nn.functional.normalize(torch.randn(n, 3, device=DEVICE), dim=1) * 50.0
    axes, _ = torch.linalg.qr(torch.randn(n, 3, 3, device=DEVICE))
    half = torch.tensor([60.25, 43.35, 19.33], device=DEVICE)
    cases = {
        "sphere_manifolds": lambda: kernels.sphere_manifolds(mesh, centers, r, gap),
        "ray_cast": lambda: kernels.ray_cast(mesh, centers, ends),
        "box_contacts": lambda: kernels.box_contacts(mesh, centers, axes, half, 2.0, 8),
    }
    for name, fn in cases.items():
        try:
            times = _time_cuda(fn, args.repeats, warmup=3)
            med = statistics.median(times)
            rec.add(
                query=name,
                queries=n,
                median_s=med,
                min_s=min(times),
                max_s=max(times),
                repeats=len(times),
                queries_per_s=n / med,
            )
        except Exception as exc:  # noqa: BLE001
            rec.error(f"query {name}", exc)


def _tick_rates(rec: Recorder, args, mode: str, make_step) -> None:
    """Ball-ticks/s of ``mode`` at every size; make_step(n) -> (callable doing args.ticks ticks, arena)."""
    for n in args.sizes:
        try:
            step, _ = make_step(n)
            warm_calls = max(2, 60 // args.ticks)
            times = _time_cuda(step, args.repeats, warmup=warm_calls)
            med = statistics.median(times)
            rec.add(
                mode=mode,
                num_envs=n,
                ticks_per_call=args.ticks,
                median_s=med,
                min_s=min(times),
                max_s=max(times),
                repeats=len(times),
                ball_ticks_per_s=n * args.ticks / med,
            )
        except Exception as exc:  # noqa: BLE001
            rec.error(f"{mode} at {n} envs", exc)
        finally:
            import torch

            torch.cuda.empty_cache()


def section_fused(rec: Recorder, args) -> None:
    from nitro.envs.soccar import kernels
    from nitro.envs.soccar.arena import ArenaEvents

    def make(block):
        def build(n):
            arena, _ = _arena(n, "fused", args.meshes)
            events = ArenaEvents.none(n, 0, arena.device)
            return (lambda: kernels.ball_ticks_(arena.state, events, arena.world, args.ticks, block)), arena

        return build

    for block in (32, 64):  # envs per program: registers per env vs. parallelism
        _tick_rates(rec, args, f"fused_b{block}", make(block))


def section_eager(rec: Recorder, args) -> None:
    def make(n):
        arena, _ = _arena(n, "eager", args.meshes)
        return (lambda: arena.step(ticks=args.ticks)), arena

    _tick_rates(rec, args, "eager", make)


def section_compile(rec: Recorder, args) -> None:
    """torch.compile of one tick (dynamic batch: compiled once), then K ticks in a CUDA graph."""
    import torch

    from nitro.core import tree
    from nitro.envs.soccar.arena import ArenaEvents, fold_tick

    compiled = {}

    def body(state, events, world):
        return fold_tick(state, events, world)

    t0 = time.perf_counter()
    # Scalars (radius, grid) stay static; only the batch axis is dynamic, so one compile serves every
    # size (marked per call below). If that fails, each size compiles on its own (dynamic=False).
    fn = torch.compile(body, fullgraph=True)
    per_size = {}

    def _mark(state, events):
        for t in tree.leaves((state, events)):
            torch._dynamo.mark_dynamic(t, 0)

    def run_tick(state, events, world):
        if not per_size.get("fallback"):
            try:
                _mark(state, events)
                return fn(state, events, world)
            except Exception as exc:  # noqa: BLE001
                rec.error("compile with a dynamic batch axis (falling back to one compile per size)", exc)
                per_size["fallback"] = True
        n = state.tick_count.shape[0]
        if n not in per_size:
            per_size[n] = torch.compile(body, fullgraph=True, dynamic=False)
        return per_size[n](state, events, world)

    def make_compiled(n):
        arena, _ = _arena(n, "eager", args.meshes)
        carry = [arena.state, ArenaEvents.none(n, 0, arena.device)]

        def step():
            for _ in range(args.ticks):
                carry[0], carry[1] = run_tick(carry[0], carry[1], arena.world)

        if not compiled:
            step()
            torch.cuda.synchronize()
            compiled["seconds"] = time.perf_counter() - t0
            rec.data["compile_seconds"] = compiled["seconds"]
            rec.flush()
        return step, arena

    _tick_rates(rec, args, "compile", make_compiled)

    try:  # compiled == eager over 240 ticks
        eager, _ = _arena(4096, "eager", args.meshes, seed=3)
        comp, _ = _arena(4096, "eager", args.meshes, seed=3)
        state, events = comp.state, ArenaEvents.none(4096, 0, comp.device)
        for _ in range(240):
            state, events = run_tick(state, events, comp.world)
        eager.step(ticks=240)
        err = (eager.ball.pos - state.ball.pos).norm(dim=1)
        rec.add(
            check="compile_vs_eager_240_ticks",
            envs=4096,
            median_pos_error_uu=float(err.median()),
            max_pos_error_uu=float(err.max()),
            passed=bool(err.median() <= 1e-2),
        )
    except Exception as exc:  # noqa: BLE001
        rec.error("compile vs eager check", exc)

    def make_graph(n):
        arena, _ = _arena(n, "eager", args.meshes)
        carry = tree.clone((arena.state, ArenaEvents.none(n, 0, arena.device)))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up outside the capture
            c = tree.clone(carry)
            for _ in range(2):
                c = run_tick(c[0], c[1], arena.world)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            c = carry
            for _ in range(args.ticks):  # K ticks in one graph
                c = run_tick(c[0], c[1], arena.world)
            tree.copy_(carry, c)
        return graph.replay, arena

    _tick_rates(rec, args, "graph", make_graph)


# --- orchestration --------------------------------------------------------------------------------


def _worker(section: str, args) -> None:
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(min(16, os.cpu_count() or 1)))
    import torch

    sys.path.insert(0, str(ROOT))
    if DEVICE == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark measures the GPU")
    rec = Recorder(
        Path(args.out) / f"soccar_{section}.json",
        section,
        {"sizes": list(args.sizes), "ticks_per_call": args.ticks, "repeats": args.repeats},
    )
    {
        "checks": section_checks,
        "query": section_query,
        "fused": section_fused,
        "eager": section_eager,
        "compile": section_compile,
    }[section](rec, args)


def _table(out: Path) -> str:
    lines = ["", "soccar GPU benchmark", "=" * 72]
    for section in SECTIONS:
        path = out / f"soccar_{section}.json"
        if not path.exists():
            lines.append(f"{section:8s} (no results)")
            continue
        data = json.loads(path.read_text())
        if section == SECTIONS[0]:
            lines.append(
                f"device {data.get('device')}  torch {data.get('torch')}  triton {data.get('triton')}"
            )
        for row in data["results"]:
            if "ball_ticks_per_s" in row:
                lines.append(
                    f"{row['mode']:8s} {row['num_envs']:>8d} envs  {row['ball_ticks_per_s']:12.3e} ball-ticks/s"
                    f"  ({row['median_s'] * 1e3:8.3f} ms per {row['ticks_per_call']} ticks)"
                )
            elif "queries_per_s" in row:
                lines.append(
                    f"query    {row['query']:16s} {row['queries_per_s']:12.3e} queries/s at {row['queries']}"
                )
            elif "check" in row:
                lines.append(
                    f"check    {row['check']:28s} {'PASS' if row.get('passed') else 'FAIL'}  "
                    + ", ".join(
                        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in row.items()
                        if k not in ("check", "passed")
                    )
                )
        if "compile_seconds" in data:
            lines.append(f"compile  first compile took {data['compile_seconds']:.0f} s")
        for err in data.get("errors", []):
            lines.append(f"ERROR    {err['what']}: {err['error']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"), help="directory for soccar_*.json")
    parser.add_argument(
        "--meshes", default=None, help="folder of soccar/mesh_*.cmf (else $NITRO_MESHES / package)"
    )
    parser.add_argument(
        "--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="comma-separated env counts"
    )
    parser.add_argument(
        "--ticks", type=int, default=8, help="ticks per timed call (captured together in graphs)"
    )
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--budget", type=float, default=360.0, help="seconds for all sections together")
    parser.add_argument("--only", default=",".join(SECTIONS), help="sections to run, comma-separated")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.sizes = tuple(int(s) for s in str(args.sizes).split(","))
    if args.meshes:
        os.environ["NITRO_MESHES"] = str(Path(args.meshes).resolve())
    global DEVICE
    DEVICE = args.device
    if args.worker:
        _worker(args.worker, args)
        return
    out = Path(args.out)
    wanted = [s for s in SECTIONS if s in args.only.split(",")]
    total = sum(SHARES[s] for s in wanted)
    deadline = time.monotonic() + args.budget
    for i, section in enumerate(wanted):
        remaining = deadline - time.monotonic()
        later = sum(SHARES[s] for s in wanted[i + 1 :])
        limit = max(20.0, remaining * SHARES[section] / (SHARES[section] + later)) if remaining > 0 else 20.0
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            section,
            "--out",
            str(out),
            "--device",
            args.device,
            "--sizes",
            ",".join(map(str, args.sizes)),
            "--ticks",
            str(args.ticks),
            "--repeats",
            str(args.repeats),
        ]
        if args.meshes:
            cmd += ["--meshes", args.meshes]
        print(f"== {section} (limit {limit:.0f} s)", flush=True)
        started = time.monotonic()
        try:
            done = subprocess.run(cmd, cwd=ROOT, timeout=limit)
            status = f"exit {done.returncode}"
        except subprocess.TimeoutExpired:
            status = "timed out (partial results kept)"
        print(f"== {section}: {status} after {time.monotonic() - started:.0f} s", flush=True)
        _ = total
    print(_table(out))


if __name__ == "__main__":
    main()
