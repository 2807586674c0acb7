"""Where the fused soccar step's time goes on one GPU: each stage kernel's time per tick (CUDA events
around every launch of `kernels/arena.tick`), with its registers and spills per thread, per team size.

    python bench/soccar_stages_gpu.py --out OUT [--sizes 1v0,1v1,2v2,3v3] [--envs 1048576] [--block 32] [--outside]

The arenas are the speed benchmarks' (`soccar_cars_gpu.car_arena` for 1v0, `soccar_game_gpu.game_arena`
otherwise) stepped 8 ticks per call with their random controls, 3 calls of warm-up, then ``--calls``
timed ones; each kernel's median milliseconds per tick and share of the tick. The timed calls run
with an event pair around every launch, so their sum is slightly above a plain step's time, which is
also given. ``--outside`` also profiles (torch.profiler) the plain steps' kernels: each stage kernel's
device time (without the event pairs, or the host's launch time they take in at one wave), and the
step's kernels around the stages: the car rows packed and unpacked, the car order's sort, the events.
Writes OUT/soccar_stages.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import soccar_cars_gpu as cars_bench
import soccar_game_gpu as game_bench
import soccar_gpu as common

TICKS = 8


def kernel_registers(kernel) -> list[dict]:
    """Registers and spills per thread of ``kernel``'s compiled variants on the current device."""
    import torch

    caches = getattr(kernel, "device_caches", {}).get(torch.cuda.current_device())
    return [{"registers": c.n_regs, "spills": c.n_spills, "shared_bytes": c.metadata.shared, "key": str(key)}
            for key, c in (caches[0].items() if caches else ())]  # fmt: skip


def step_kernels(step, calls: int, stage_names: list[str]) -> dict:
    """Every GPU kernel of ``calls`` plain calls of ``step`` (torch.profiler's trace, no event pairs
    between the launches): each stage kernel's device milliseconds per tick, a two-pass kernel's passes
    told apart by their order in the tick (``NAME (deferred)`` the second); and the step's own work
    around the stages (packing and unpacking the rows, the car order's sort, the events), each kernel
    name's milliseconds per tick, largest first, and their sum. At one wave the stage timings with
    event pairs include the host's time to launch each kernel; these do not."""
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            step(i)
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as trace:
        prof.export_chrome_trace(trace.name)
        events = json.loads(Path(trace.name).read_text())["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    bases = {name.split()[0] for name in stage_names}
    two_pass = {name.split()[0] for name in stage_names if name.endswith("(deferred)")}
    per_tick = calls * TICKS
    stages: dict[str, float] = {}
    others: dict[str, float] = {}
    launches: dict[str, int] = {}
    for e in kernels:
        ms = e["dur"] / 1e3 / per_tick  # (microseconds)
        stage = next((name for name in bases if name in e["name"]), None)
        if stage is None:
            others[e["name"][:90]] = others.get(e["name"][:90], 0.0) + ms
            continue
        nth = launches[stage] = launches.get(stage, 0) + 1
        name = f"{stage} (deferred)" if stage in two_pass and nth % 2 == 0 else stage
        stages[name] = stages.get(name, 0.0) + ms
    top = dict(sorted(others.items(), key=lambda kv: -kv[1])[:25])
    return {
        "stages_ms_per_tick": dict(sorted(stages.items(), key=lambda kv: -kv[1])),
        "ms_per_tick": sum(others.values()), "kernels": len(others), "largest": top,
    }


CAR_PASSES = ("pre_tick_kernel", "car_step_kernel")
"""The two-pass car kernels (their lists hold cars; the collisions kernel's, envs), which ``--one-pass``
runs as one pass."""


def profile(size: str, envs: int, block: int, calls: int, meshes, one_pass: bool = False,
            outside: bool = False) -> dict:  # fmt: skip
    import torch

    from nitro.envs.soccar.kernels import arena as arena_kernels
    from nitro.envs.soccar.state import ArenaEvents

    blue, orange = (int(x) for x in size.split("v"))
    cars = blue + orange
    if orange == 0:
        arena = cars_bench.car_arena(envs, "eager", meshes)
    else:
        arena = game_bench.game_arena(envs, blue, orange, "eager", meshes)
    events = ArenaEvents.none(envs, cars, arena.device)
    pool = game_bench.control_pool(envs, cars, 1, arena.device)
    plain = arena_kernels.launch
    timings: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []
    every_car = torch.full((cars,), envs, dtype=torch.int32, device=arena.device)

    def one_pass_launch(kernel, envs, per_env, args, *rest, **options):
        """The two-pass car kernels in one pass, every car on the full path (the second pass over
        `car_order`'s full lists; the first pass left out)."""
        if kernel.fn.__name__ in CAR_PASSES:
            if not args["DEFERRED"]:
                return
            args = {**args, "deferred_ptr": args["car_order_ptr"], "deferred_count_ptr": every_car}
        plain(kernel, envs, per_env, args, *rest, **options)

    base = one_pass_launch if one_pass else plain
    arena_kernels.launch = base

    deferred: dict[str, list] = {}  # each two-pass kernel's deferred cars, per tick (`kernels/arena.defer_lanes`)

    def timed_launch(kernel, envs, per_env, args, *rest, **options):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        base(kernel, envs, per_env, args, *rest, **options)
        end.record()
        one_of_one = one_pass and kernel.fn.__name__ in CAR_PASSES
        if one_of_one and not args["DEFERRED"]:
            return
        second_pass = bool(args.get("DEFERRED")) and not one_of_one
        timings.append((arena_kernels.pass_name(kernel.fn.__name__, second_pass), start, end))
        if second_pass or kernel.fn.__name__ == "collisions_kernel":  # (it takes the envs listed as near)
            deferred.setdefault(kernel.fn.__name__, []).append(args["deferred_count_ptr"].sum())

    def step(i: int) -> None:
        arena_kernels.launch_step_ticks_(arena.state, events, pool[i % len(pool)], arena.world, TICKS, block=block)

    for i in range(3):
        step(i)
    step_times = []
    for i in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step(i)
        end.record()
        end.synchronize()
        step_times.append(start.elapsed_time(end) / TICKS)
    per_call: list[dict[str, float]] = []
    arena_kernels.launch = timed_launch
    try:
        for i in range(calls):
            timings.clear()
            step(i)
            torch.cuda.synchronize()
            totals: dict[str, float] = {}
            for name, start, end in timings:
                totals[name] = totals.get(name, 0.0) + start.elapsed_time(end) / TICKS
            per_call.append(totals)
    finally:
        arena_kernels.launch = plain
    kernels = {}
    for name in per_call[0]:
        ms = statistics.median(c[name] for c in per_call)
        kernels[name] = {"ms_per_tick": ms, "registers": kernel_registers(getattr(arena_kernels, name.split()[0]))}
    total = sum(k["ms_per_tick"] for k in kernels.values())
    for k in kernels.values():
        k["share"] = k["ms_per_tick"] / total
    step_ms = statistics.median(step_times)
    around = step_kernels(step, calls, list(kernels)) if outside else None
    return {
        "size": size, "envs": envs, "block": block, "ticks_per_call": TICKS, "calls": calls,
        "step_ms_per_tick": step_ms, "env_ticks_per_s": envs / (step_ms / 1e3),
        "car_ticks_per_s": envs * cars / (step_ms / 1e3), "kernels": kernels,
        "passes": 1 if one_pass else 2, "outside_stage_kernels": around,
        "deferred_share": {  # sync-ok: after timing
            name: float(sum(counts)) / (len(counts) * envs * (cars if name in CAR_PASSES else 1))
            for name, counts in deferred.items()
        },
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for soccar_stages.json")
    parser.add_argument("--sizes", default="1v0,1v1,2v2,3v3", help="team sizes, BLUEvORANGE, comma-separated")
    parser.add_argument("--envs", type=int, default=1 << 20, help="envs per arena batch")
    parser.add_argument("--block", type=int, default=32, help="envs per program")
    parser.add_argument("--calls", type=int, default=5, help="timed calls of 8 ticks")
    parser.add_argument(
        "--car-order", choices=("auto", "sorted", "identity"), default="auto",
        help="the car kernels' lanes (`kernels/arena.car_order`): sorted by the arena each car meets from "
        "`SORT_FROM_LANES` up (auto), always sorted, or always in env order",
    )
    parser.add_argument(
        "--one-pass", action="store_true",
        help="the two-pass car kernels in one pass, every car on the full path (the pre-tick's rays against "
        "the other cars and the ball, the car step's contacts with the arena): their second pass over all cars",
    )
    parser.add_argument(
        "--outside", action="store_true",
        help="also profile (torch.profiler) the plain steps' kernels: the stage kernels' device time, and "
        "the kernels outside the stages: rows packed and unpacked, the car order, the events",
    )
    parser.add_argument(
        "--spread-programs", type=int, default=None,
        help="the programs a list's pass spreads its entries over at least (`kernels/arena.SPREAD_PROGRAMS`)",
    )
    parser.add_argument("--meshes", default=None, help="folder of soccar/mesh_*.cmf (else $NITRO_MESHES / package)")
    parser.add_argument(
        "--maxnreg", default="", help="register caps of stage kernels, NAME=CAP,... (a second pass as 'NAME "
        "(deferred)'): `kernels/arena.REGISTER_CAPS`",
    )
    args = parser.parse_args()
    import torch
    import triton

    from nitro.envs.soccar.kernels import arena as arena_kernels

    common.DEVICE = "cuda"
    arena_kernels.REGISTER_CAPS.update(common.register_caps(args.maxnreg))
    if args.spread_programs is not None:
        arena_kernels.SPREAD_PROGRAMS = args.spread_programs
    if args.car_order != "auto":
        arena_kernels.SORT_FROM_LANES["cuda"] = 0 if args.car_order == "sorted" else sys.maxsize
    rows = []
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "car_order": args.car_order, "spread_programs": arena_kernels.SPREAD_PROGRAMS, "register_caps": arena_kernels.REGISTER_CAPS, "results": rows}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    for size in args.sizes.split(","):
        row = profile(size, args.envs, args.block, args.calls, args.meshes, args.one_pass, args.outside)
        rows.append(row)
        (args.out / "soccar_stages.json").write_text(json.dumps(result, indent=1))  # each size as it comes
        print(f"{size} at {args.envs} envs: {row['step_ms_per_tick']:.3f} ms per tick, "
              f"{row['env_ticks_per_s']:.3g} env-ticks/s, {row['car_ticks_per_s']:.3g} car-ticks/s, "
              f"deferred: {', '.join(f'{k} {100 * v:.1f}%' for k, v in row['deferred_share'].items())}",
              flush=True)  # fmt: skip
        for name, k in sorted(row["kernels"].items(), key=lambda kv: -kv[1]["ms_per_tick"]):
            regs = [(r["registers"], r["spills"]) for r in k["registers"]]
            print(f"  {name:<24} {k['ms_per_tick']:8.3f} ms  {100 * k['share']:5.1f}%  (registers, spills) {regs}", flush=True)
        if row["outside_stage_kernels"]:
            around = row["outside_stage_kernels"]
            print("  stage kernels' device time in plain steps (torch.profiler):")
            for name, ms in around["stages_ms_per_tick"].items():
                print(f"    {ms:8.4f} ms  {name}", flush=True)
            print(f"  outside the stages: {around['ms_per_tick']:.3f} ms per tick in {around['kernels']} kernels")
            for name, ms in around["largest"].items():
                print(f"    {ms:8.4f} ms  {name}", flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
