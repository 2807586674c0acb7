"""Soccar ball physics on one GPU: ball-ticks/s, query rates, and the kernels' correctness checks.

    python bench/soccar_gpu.py --out bench/results [--meshes DIR] [--budget 540]

Sections, each in its own subprocess with its own share of the time budget (a slow compile, a hang
or a crash costs only its section), most important first:

1. ``fused``: ball-ticks/s of the whole tick in one Triton kernel (K ticks per launch, state in
   registers): 32 envs per program at every size (largest first), then other configurations (64 and
   128 envs per program, a cap of 168 registers per thread) at 262k and 1M envs.
2. ``query``: each query kernel's own rate at 1M queries (queries/s): sphere manifolds, ray casts,
   box contacts.
3. ``checks``: every query kernel against its PyTorch reference at 98,304 random queries, classified
   by `tests/envs/soccar/kernels/kernel_checks.py` (agree / tie decided by the rounding / unexplained), and the
   fused tick against the PyTorch tick pipeline.
4. ``stages``: the per-stage twin tests (tests/envs/soccar/kernels: each kernel stage against its
   reference stage) on the GPU, called directly (no pytest runner needed); the car twins' run in
   bench/soccar_cars_gpu.py.
5. ``eager``: ball-ticks/s of the PyTorch pipeline (with the query kernel), eager.
6. ``compile``: the same pipeline under torch.compile (one tick compiled once for every batch size),
   then K compiled ticks captured in one CUDA graph ("graph"); checked against eager.

Every measurement is printed as one line when it starts and when it ends, and written to
``<out>/soccar_<section>.json`` as soon as it is taken (device, versions, sizes, results, errors,
skips). Each worker stops starting measurements when its time share runs out (the rest are recorded
as skipped); if it must be killed, it first dumps its Python stacks, and the parent records in the
section's JSON how the worker ended (status, seconds, the tail of its output). Times are CUDA-event
medians over repeats after warm-up. The arena meshes must be present (rlgym-rocket-league installed,
$NITRO_MESHES, or ``--meshes``). ``--device cpu`` dry-runs every code path on Triton's interpreter
(it sets TRITON_INTERPRET=1) at 64 envs, 96 checked queries and 2 repeats unless told otherwise.
"""

from __future__ import annotations

import argparse
import collections
import faulthandler
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("fused", "query", "checks", "stages", "eager", "compile")
# Shares of the time budget. Each section gets its share of what is left when it starts, so time a
# section does not use goes to the later ones. "compile" pays for Inductor (about a minute), "checks"
# for the reference at scale and the tie search (CPU), "fused" for up to three kernel compiles.
SHARES = {"fused": 0.20, "query": 0.10, "checks": 0.20, "stages": 0.06, "eager": 0.12, "compile": 0.32}
DEFAULT_SIZES = (1 << 10, 1 << 14, 1 << 18, 1 << 20)
DEVICE = "cuda"  # --device cpu dry-runs the code paths on Triton's interpreter
WRAP_UP_S = 8.0  # a worker stops starting measurements this long before its limit


# --- shared helpers (worker side) -----------------------------------------------------------------


def register_caps(spec: str) -> dict[str, int]:
    """``--maxnreg``'s stage kernel register caps, ``NAME=CAP,...`` (a second pass as ``NAME (deferred)``),
    as `kernels/arena.REGISTER_CAPS` takes them."""
    caps = {}
    for item in filter(None, spec.split(",")):
        name, _, cap = item.rpartition("=")
        if not name or not cap.isdigit():
            raise SystemExit(f"--maxnreg: expected NAME=CAP items such as pre_tick_kernel=168, got {item!r}")
        caps[name] = int(cap)
    return caps


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
                ["git", "rev-parse", "--short", "HEAD"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            ).stdout.strip()
            or None
        )
    except Exception:  # noqa: BLE001 - informational only
        info["commit"] = None
    return info


class Recorder:
    """One section's JSON, rewritten after every result, error or skip, and its progress lines."""

    def __init__(self, path: Path, section: str, extra: dict, deadline: float):
        self.path, self.section, self.deadline = path, section, deadline
        self.data = {
            "bench": f"soccar_{section}",
            **_env_info(),
            **extra,
            "status": "running",
            "results": [],
            "errors": [],
            "skipped": [],
        }
        self.flush()

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def say(self, text: str) -> None:
        print(f"[{self.section} {time.strftime('%H:%M:%S')}] {text}", flush=True)

    def add(self, **row) -> None:
        self.data["results"].append(row)
        self.flush()
        self.say("  -> " + _row_text(row))

    def error(self, what: str, exc: BaseException) -> None:
        self.data["errors"].append(
            {
                "what": what,
                "error": f"{type(exc).__name__}: {exc}"[:4000],
                "trace": traceback.format_exc()[-3000:],
            }
        )
        self.flush()
        self.say(f"  !! {what}: {type(exc).__name__}: {str(exc)[:300]}")

    def measure(self, what: str, fn, needs_s: float = 5.0) -> bool:
        """Run ``fn`` (which records its own results) if the time share allows; record any failure."""
        left = self.time_left()
        if left < needs_s:
            self.data["skipped"].append({"what": what, "why": f"{left:.0f} s left, needs ~{needs_s:.0f} s"})
            self.flush()
            self.say(f"skip {what}: {left:.0f} s left")
            return False
        self.say(f"{what} ...")
        try:
            fn()
            return True
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: the section goes on
            self.error(what, exc)
            return False

    def finish(self) -> None:
        self.data["status"] = "done"
        self.flush()

    def flush(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str))
        os.replace(tmp, self.path)


def _row_text(row: dict) -> str:
    if "env_ticks_per_s" in row:
        return (
            f"{row['mode']} {row['teams']} {row['num_envs']} envs: {row['env_ticks_per_s']:.3e} env-ticks/s "
            f"({row['median_s'] * 1e3:.3f} ms per {row['ticks_per_call']} ticks)"
        )
    if "car_ticks_per_s" in row:
        return (
            f"{row['mode']} {row['num_envs']} envs: {row['car_ticks_per_s']:.3e} car-ticks/s "
            f"({row['median_s'] * 1e3:.3f} ms per {row['ticks_per_call']} ticks)"
        )
    if "ball_ticks_per_s" in row:
        return (
            f"{row['mode']} {row['num_envs']} envs: {row['ball_ticks_per_s']:.3e} ball-ticks/s "
            f"({row['median_s'] * 1e3:.3f} ms per {row['ticks_per_call']} ticks)"
        )
    if "queries_per_s" in row:
        return f"{row['query']}: {row['queries_per_s']:.3e} queries/s at {row['queries']} queries"
    if "check" in row:
        keep = ("ties", "tie_fraction", "unexplained", "median_pos_error_uu", "max_pos_error_uu", "seconds")
        return f"{row['check']} {'PASS' if row.get('passed') else 'FAIL'} " + ", ".join(
            f"{k}={row[k]:.3g}" if isinstance(row[k], float) else f"{k}={row[k]}" for k in keep if k in row
        )
    return json.dumps(row, default=str)


def _sync() -> None:
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _time_calls(fn, repeats: int, warmup: int) -> list[float]:
    """Seconds per call of fn, one CUDA-event pair per call, after warm-up."""
    import torch

    for _ in range(warmup):
        fn()
    if DEVICE != "cuda":  # dry run: wall clock
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


def _timing_row(times: list[float]) -> dict:
    med = statistics.median(times)
    return {"median_s": med, "min_s": min(times), "max_s": max(times), "repeats": len(times)}


def _random_balls(n: int, seed: int, device):
    """Balls spread over the arena with game-like speeds (up to ~3000 UU/s) and spins."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    lo = torch.tensor([-3800.0, -4800.0, 100.0])
    hi = torch.tensor([3800.0, 4800.0, 1900.0])
    pos = lo + (hi - lo) * torch.rand(n, 3, generator=g)
    vel = torch.randn(n, 3, generator=g) * 1200.0
    ang = torch.randn(n, 3, generator=g) * 2.0
    return pos.to(device), vel.to(device), ang.to(device)


def _arena(n: int, mode: str, meshes, seed: int = 0):
    """A ball-only arena of n balls thrown around the arena."""
    from nitro.envs.soccar.arena import Arena

    arena = Arena(n, blue=0, orange=0, device=DEVICE, mode=mode, meshes=meshes)
    pos, vel, ang = _random_balls(n, seed, arena.device)
    arena.set_ball(pos=pos, vel=vel, ang_vel=ang)
    return arena


def _tick_rate(rec: Recorder, args, mode: str, n: int, step, **extra) -> None:
    """Time ``step`` (args.ticks ticks of n balls) and record its ball-ticks/s."""
    warm = max(2, 60 // args.ticks)  # ~60 ticks: balls reach walls and floors before timing
    times = _time_calls(step, args.repeats, warmup=warm)
    row = {"mode": mode, "num_envs": n, "ticks_per_call": args.ticks, **extra, **_timing_row(times)}
    row["ball_ticks_per_s"] = n * args.ticks / row["median_s"]
    rec.add(**row)


def _sizes_largest_first(args) -> list[int]:
    return sorted(args.sizes, reverse=True)


def _release() -> None:
    import gc

    import torch

    gc.collect()
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


# --- sections -------------------------------------------------------------------------------------


def section_fused(rec: Recorder, args) -> None:
    import torch

    from nitro.envs.soccar.kernels.arena import launch_step_ticks_
    from nitro.envs.soccar.state import ArenaEvents

    rec.data["compile_seconds"] = {}
    for i, config in enumerate(args.fused_configs):
        # envs per program (one per thread) and an optional register cap: occupancy vs spills
        block, _, cap = config.partition(":")
        block, cap = int(block), int(cap or 0)
        name = f"fused_b{block}" + (f"_r{cap}" if cap else "")

        def compile_once(block=block, cap=cap, name=name):
            arena = _arena(min(1024, max(args.sizes)), "fused", args.meshes)
            events = ArenaEvents.none(arena.num_envs, 0, arena.device)
            no_cars = torch.zeros(arena.num_envs, 0, 8, device=arena.device)
            t0 = time.perf_counter()
            launch_step_ticks_(arena.state, events, no_cars, arena.world, 1, block, cap)
            _sync()
            rec.data["compile_seconds"][name] = time.perf_counter() - t0
            rec.say(f"  {name} compiled and ran in {time.perf_counter() - t0:.1f} s")

        if not rec.measure(f"compile {name}", compile_once, needs_s=20):
            continue
        # the first configuration at every size; the others where they can differ, at scale
        sizes = (
            _sizes_largest_first(args) if i == 0 else [n for n in _sizes_largest_first(args) if n >= 1 << 18]
        )
        for n in sizes or _sizes_largest_first(args)[:1]:

            def one(n=n, block=block, cap=cap, name=name):
                arena = _arena(n, "fused", args.meshes)
                events = ArenaEvents.none(n, 0, arena.device)
                no_cars = torch.zeros(n, 0, 8, device=arena.device)
                _tick_rate(
                    rec,
                    args,
                    name,
                    n,
                    lambda: launch_step_ticks_(arena.state, events, no_cars, arena.world, args.ticks, block, cap),
                    block=block,
                    maxnreg=cap,
                )

            rec.measure(f"{name} at {n} envs", one, needs_s=5)
            _release()


def section_query(rec: Recorder, args) -> None:
    import torch

    from nitro.envs.soccar import constants as C
    from nitro.envs.soccar.arena_mesh import load_arena_mesh
    from nitro.envs.soccar.kernels.box_contacts import launch_box_contacts
    from nitro.envs.soccar.kernels.manifolds import launch_sphere_manifolds
    from nitro.envs.soccar.kernels.ray_cast import launch_ray_cast
    from tests.envs.soccar.kernels import kernel_checks

    mesh = load_arena_mesh(args.meshes, DEVICE)
    n = min(1 << 20, max(args.sizes))
    r, gap = C.BALL_COLLISION_RADIUS_SOCCAR, C.BALL_CONTACT_BREAKING_THRESHOLD
    # Two thirds of the queries touching random triangles (real work), a third anywhere in the arena.
    centers = kernel_checks.query_points(mesh, -(-2 * n // 3), 4, r - 2.0, r + gap)[:n].to(DEVICE)
    g = torch.Generator().manual_seed(6)
    ends = centers + torch.nn.functional.normalize(torch.randn(n, 3, generator=g), dim=1).to(DEVICE) * 50.0
    axes = kernel_checks.random_rotations(n, 7).to(DEVICE)
    half = torch.tensor(kernel_checks.OCTANE_HALF_EXTENTS, device=DEVICE)
    rec.data["queries"] = n
    cases = {
        "sphere_manifolds": lambda: launch_sphere_manifolds(mesh, centers, r, gap),
        "ray_cast": lambda: launch_ray_cast(mesh, centers, ends),
        "box_contacts": lambda: launch_box_contacts(mesh, centers, axes, half, 2.0, 8),
    }
    for name, fn in cases.items():

        def one(name=name, fn=fn):
            times = _time_calls(fn, args.repeats, warmup=3)
            row = {"query": name, "queries": n, **_timing_row(times)}
            row["queries_per_s"] = n / row["median_s"]
            rec.add(**row)

        rec.measure(f"query {name} at {n} queries", one, needs_s=15)


def section_checks(rec: Recorder, args) -> None:
    import torch

    from nitro.envs.soccar.arena_mesh import load_arena_mesh
    from tests.envs.soccar.kernels import kernel_checks

    mesh = load_arena_mesh(args.meshes, DEVICE)
    checks = {
        "sphere_manifolds": kernel_checks.check_sphere_manifolds,
        "ray_cast": kernel_checks.check_ray_cast,
        "box_contacts": kernel_checks.check_box_contacts,
    }
    queries = args.check_queries + args.check_queries // 2
    for name, check in checks.items():
        rec.measure(
            f"check {name} ({queries} queries)",
            lambda check=check: rec.add(**check(mesh, args.check_queries, seed=1)),
            needs_s=20,
        )

    def fused_vs_eager():
        m, chunks = min(4096, max(args.sizes)), (8 if DEVICE == "cuda" else 1)
        eager, fused = _arena(m, "eager", args.meshes, seed=3), _arena(m, "fused", args.meshes, seed=3)
        goals_equal = True
        for _ in range(chunks):
            e, f = eager.step(ticks=30), fused.step(ticks=30)
            goals_equal &= bool(torch.equal(e.goal_blue | e.goal_orange, f.goal_blue | f.goal_orange))
        err = (eager.ball.pos - fused.ball.pos).norm(dim=1)
        rec.add(
            check=f"fused_vs_eager_{30 * chunks}_ticks",
            envs=m,
            median_pos_error_uu=float(err.median()),
            p99_pos_error_uu=float(err.quantile(0.99)),
            max_pos_error_uu=float(err.max()),
            goal_events_equal=goals_equal,
            # Contacts amplify ulp differences (FMA) chaotically; the median stays at rounding level.
            passed=bool(err.median() <= 1e-2),
        )

    rec.measure("check fused tick vs PyTorch tick", fused_vs_eager, needs_s=25)


CAR_STAGE_TESTS = ("test_arena", "test_car", "test_rigid_body", "test_vehicle")
"""The car twins' stage tests: bench/soccar_cars_gpu.py runs them."""
GAME_STAGE_TESTS = ("test_boost_pads", "test_ball_hit", "test_car_bump", "test_rules", "test_game")
"""The game rules' twins: bench/soccar_game_gpu.py runs them."""
BODY_STAGE_TESTS = ("test_car_ball", "test_sequential_impulse")
"""The car-body twins' stage tests: bench/soccar_carbody_gpu.py runs them."""


def run_stage_tests(rec: Recorder, meshes, stems) -> None:
    """The stage tests of tests/envs/soccar/kernels named by ``stems`` (file names without .py), called
    directly, one call per parametrized case (no pytest runner needed)."""
    import importlib
    import inspect

    from nitro.envs.soccar.arena_mesh import load_arena_mesh

    mesh = load_arena_mesh(meshes)  # on the CPU, as the tests' fixture: they move what they need
    for stem in stems:
        module = importlib.import_module(f"tests.envs.soccar.kernels.{stem}")
        for name, test in inspect.getmembers(module, inspect.isfunction):
            if not name.startswith("test_") or test.__module__ != module.__name__:
                continue
            for case in _parametrized(test):
                what = f"{stem}.{name}" + (f"[{','.join(map(str, case.values()))}]" if case else "")

                def one(test=test, case=case, what=what):
                    t0 = time.perf_counter()
                    fixture = {"mesh": mesh} if "mesh" in inspect.signature(test).parameters else {}
                    test(**fixture, **case)
                    rec.add(check=f"stage {what}", passed=True, seconds=time.perf_counter() - t0)

                rec.measure(f"stage {what}", one, needs_s=5)


def _parametrized(test) -> list[dict]:
    """A test's ``pytest.mark.parametrize`` cases as keyword dicts ([{}] without any)."""
    cases = [{}]
    for mark in getattr(test, "pytestmark", []):
        if mark.name == "parametrize":
            names, values = mark.args[0], mark.args[1]
            names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
            rows = [v if len(names) > 1 else (v,) for v in values]
            cases = [case | dict(zip(names, row)) for case in cases for row in rows]
    return cases


def section_stages(rec: Recorder, args) -> None:
    folder = ROOT / "tests" / "envs" / "soccar" / "kernels"
    # the classifier's own tests are reference only; the car, game and body twins run in their own benches
    skip = ("test_kernel_checks", *CAR_STAGE_TESTS, *GAME_STAGE_TESTS, *BODY_STAGE_TESTS)
    run_stage_tests(rec, args.meshes, [p.stem for p in sorted(folder.glob("test_*.py")) if p.stem not in skip])


def section_eager(rec: Recorder, args) -> None:
    for n in _sizes_largest_first(args):

        def one(n=n):
            arena = _arena(n, "eager", args.meshes)
            _tick_rate(rec, args, "eager", n, lambda: arena.step(ticks=args.ticks))

        rec.measure(f"eager at {n} envs", one, needs_s=10)
        _release()


def section_compile(rec: Recorder, args) -> None:
    """torch.compile of one tick (a dynamic batch axis: compiled once), then K ticks in a CUDA graph."""
    import torch

    from nitro.core import tree
    from nitro.envs.soccar.arena import fold_tick
    from nitro.envs.soccar.state import ArenaEvents

    def body(state, events, world):  # ball-only arenas: no car controls
        no_controls = torch.zeros(state.tick_count.shape[0], 0, 8, device=state.tick_count.device)
        return fold_tick(state, events, no_controls, world)

    dynamic = torch.compile(body, fullgraph=True)
    per_size: dict = {}

    def run_tick(state, events, world):
        if not per_size.get("fallback"):
            try:
                for t in tree.leaves((state, events)):
                    torch._dynamo.mark_dynamic(t, 0)
                return dynamic(state, events, world)
            except Exception as exc:  # noqa: BLE001
                rec.error("compile with a dynamic batch axis (falling back to one compile per size)", exc)
                per_size["fallback"] = True
        n = state.tick_count.shape[0]
        if n not in per_size:
            per_size[n] = torch.compile(body, fullgraph=True, dynamic=False)
        return per_size[n](state, events, world)

    def first_compile():
        arena = _arena(min(1024, max(args.sizes)), "eager", args.meshes)
        t0 = time.perf_counter()
        run_tick(arena.state, ArenaEvents.none(arena.num_envs, 0, arena.device), arena.world)
        _sync()
        rec.data["compile_seconds"] = time.perf_counter() - t0
        rec.say(f"  first compile took {rec.data['compile_seconds']:.0f} s")

    if not rec.measure("torch.compile of one tick", first_compile, needs_s=60):
        return

    def make_compiled(n):
        arena = _arena(n, "eager", args.meshes)
        carry = [arena.state, ArenaEvents.none(n, 0, arena.device)]

        def step():
            for _ in range(args.ticks):
                carry[0], carry[1] = run_tick(carry[0], carry[1], arena.world)

        return step

    def make_graph(n):
        arena = _arena(n, "eager", args.meshes)
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
        return graph.replay

    for mode, make in (("graph", make_graph), ("compile", make_compiled)):
        if mode == "graph" and DEVICE != "cuda":
            continue
        for n in _sizes_largest_first(args):
            rec.measure(
                f"{mode} at {n} envs",
                lambda n=n, mode=mode, make=make: _tick_rate(rec, args, mode, n, make(n)),
                15,
            )
            _release()

    def compiled_vs_eager():
        m = min(4096, max(args.sizes))
        eager, comp = _arena(m, "eager", args.meshes, seed=3), _arena(m, "eager", args.meshes, seed=3)
        state, events = comp.state, ArenaEvents.none(m, 0, comp.device)
        ticks = 240 if DEVICE == "cuda" else 8
        for _ in range(ticks):
            state, events = run_tick(state, events, comp.world)
        eager.step(ticks=ticks)
        err = (eager.ball.pos - state.ball.pos).norm(dim=1)
        rec.add(
            check=f"compile_vs_eager_{ticks}_ticks",
            envs=m,
            median_pos_error_uu=float(err.median()),
            max_pos_error_uu=float(err.max()),
            passed=bool(err.median() <= 1e-2),
        )

    rec.measure("check compiled tick vs eager", compiled_vs_eager, needs_s=15)


# --- orchestration --------------------------------------------------------------------------------


def _worker(section: str, args) -> None:
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(min(16, os.cpu_count() or 1)))
    faulthandler.enable()  # a crash prints the Python stack
    _watchdog(max(5.0, args.limit - 4.0))
    deadline = time.monotonic() + args.limit - WRAP_UP_S
    import torch

    sys.path.insert(0, str(ROOT))
    if DEVICE == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark measures the GPU")
    rec = Recorder(
        Path(args.out) / f"soccar_{section}.json",
        section,
        {
            "sizes": list(args.sizes),
            "ticks_per_call": args.ticks,
            "repeats": args.repeats,
            "limit_s": args.limit,
        },
        deadline,
    )
    {
        "fused": section_fused,
        "query": section_query,
        "checks": section_checks,
        "stages": section_stages,
        "eager": section_eager,
        "compile": section_compile,
    }[section](rec, args)
    rec.finish()
    rec.say(f"done, {len(rec.data['results'])} results, {len(rec.data['errors'])} errors")


def _watchdog(after_s: float) -> None:
    """Shortly before the parent's hard limit, print where the main thread is (a hang or a slow step
    then shows in the output). A Python thread, not faulthandler's timer, which can crash a process
    that is inside a C extension."""
    main = threading.main_thread().ident

    def bark():
        time.sleep(after_s)
        frame = sys._current_frames().get(main)
        stack = "".join(traceback.format_stack(frame)[-12:]) if frame is not None else "(no frame)\n"
        print(f"[watchdog] still running after {after_s:.0f} s, main thread at:\n{stack}", end="", flush=True)

    threading.Thread(target=bark, daemon=True).start()


def _run_section(section: str, cmd: list[str], limit: float, out: Path) -> str:
    """Run one worker, echoing its output; kill it at ``limit``; record how it ended in its JSON."""
    started = time.monotonic()
    tail: collections.deque = collections.deque(maxlen=40)
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )

    def pump():
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            tail.append(line.rstrip("\n"))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=limit)
        status = f"exit {code}"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        status = f"killed at its {limit:.0f} s limit"
    reader.join(timeout=5)
    seconds = time.monotonic() - started
    path = out / f"soccar_{section}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {"bench": f"soccar_{section}", "results": [], "errors": [], "status": "never started"}
    if data.get("status") != "done" or status != "exit 0":
        data["status"] = f"{status} (worker status: {data.get('status')})"
        data["output_tail"] = list(tail)
    data["seconds"] = seconds
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str))
    return f"{data['status']} after {seconds:.0f} s"


def _table(out: Path, wanted) -> str:
    lines = ["", "soccar GPU benchmark", "=" * 100]
    for section in wanted:
        path = out / f"soccar_{section}.json"
        if not path.exists():
            lines.append(f"{section:8s} (no results)")
            continue
        data = json.loads(path.read_text())
        if len(lines) == 3:
            lines.append(
                f"device {data.get('device')}  torch {data.get('torch')}  triton {data.get('triton')}"
            )
        lines.append(f"-- {section}: {data.get('status')}, {data.get('seconds', 0):.0f} s")
        for row in data["results"]:
            lines.append("   " + _row_text(row))
        compile_s = data.get("compile_seconds")
        if compile_s:
            lines.append(f"   compile: {json.dumps(compile_s)} s")
        for err in data.get("errors", []):
            lines.append(f"   ERROR {err['what']}: {err['error'][:300]}")
        for skip in data.get("skipped", []):
            lines.append(f"   skipped {skip['what']}: {skip['why']}")
    return "\n".join(lines)


def run_sections(script: str, args, sections, shares: dict, worker_args: list[str]) -> list[str]:
    """Each section of ``args.only`` in a worker subprocess of ``script`` (``--worker SECTION``), with
    its share of what is left of ``args.budget``; returns the sections run. ``worker_args``: the
    script's own options, passed on."""
    out = Path(args.out)
    wanted = [s for s in sections if s in args.only.split(",")]
    deadline = time.monotonic() + args.budget
    for i, section in enumerate(wanted):
        remaining = deadline - time.monotonic()
        later = sum(shares[s] for s in wanted[i + 1 :])
        limit = max(15.0, remaining * shares[section] / (shares[section] + later))
        cmd = [sys.executable, str(Path(script).resolve()), "--worker", section, "--limit", f"{limit:.1f}"]
        cmd += ["--out", str(out), "--device", args.device, *worker_args]
        if args.meshes:
            cmd += ["--meshes", args.meshes]
        print(f"== {section} (limit {limit:.0f} s, {remaining:.0f} s of the budget left)", flush=True)
        print(f"== {section}: {_run_section(section, cmd, limit, out)}", flush=True)
    return wanted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"), help="directory for soccar_*.json")
    parser.add_argument(
        "--meshes", default=None, help="folder of soccar/mesh_*.cmf (else $NITRO_MESHES / package)"
    )
    parser.add_argument("--sizes", default=None, help="comma-separated env counts (default 1k,16k,262k,1M)")
    parser.add_argument("--ticks", type=int, default=8, help="ticks per timed call (one launch / one graph)")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per measurement (10; 2 dry)")
    parser.add_argument(
        "--fused-configs",
        default="32,64,32:168,128,64:168",
        help="fused kernel configurations: envs per program[:register cap], comma-separated",
    )
    parser.add_argument("--check-queries", type=int, default=None, help="n: each check runs 1.5 n queries")
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for all sections together")
    parser.add_argument("--only", default=",".join(SECTIONS), help="sections to run, comma-separated")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    args = parser.parse_args()
    dry = args.device == "cpu"
    if dry:  # Triton's interpreter: every code path, at sizes it runs in seconds
        os.environ["TRITON_INTERPRET"] = "1"
    if args.sizes is None:
        args.sizes = (64,) if dry else DEFAULT_SIZES
    else:
        args.sizes = tuple(int(s) for s in args.sizes.split(","))
    args.check_queries = args.check_queries or (64 if dry else 65536)
    args.repeats = args.repeats or (2 if dry else 10)
    args.fused_configs = tuple(str(args.fused_configs).split(","))
    if args.meshes:
        os.environ["NITRO_MESHES"] = str(Path(args.meshes).resolve())
    global DEVICE
    DEVICE = args.device
    if args.worker:
        _worker(args.worker, args)
        return
    wanted = run_sections(__file__, args, SECTIONS, SHARES, [
        "--sizes", ",".join(map(str, args.sizes)), "--ticks", str(args.ticks), "--repeats", str(args.repeats),
        "--fused-configs", ",".join(args.fused_configs), "--check-queries", str(args.check_queries),
    ])
    print(_table(Path(args.out), wanted), flush=True)


if __name__ == "__main__":
    main()
