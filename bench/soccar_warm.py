"""Compile the fused soccar step's stage kernels for the GPU at hand, every kernel in its own process
at once, into the Triton cache (TRITON_CACHE_DIR), and time each compile.

    python bench/soccar_warm.py OUT [--sizes 1v0,1v1,2v2,3v3] [--blocks 32] [--envs 4096] [--jobs 16]

The fused step compiles its stage kernels one after another at its first launch; a user pays their
sum once per machine (the cache keeps them). A benchmark run pays it before any number comes out, so
it warms the cache first with this script: each (team size, envs per program, stage kernel, pass of a
two-pass car kernel) is one process that builds the arena on the GPU, catches the launches of one fused
step and compiles only its kernel (`JITFunction.warmup`: compiled, not run), with the same arguments,
hence the same cache key, as the step's own launches at any env count, seed and tick count
(`kernels.UNSPECIALIZED`; the keys settled callees first, `kernels.settle_cache_keys`). Writes
OUT/soccar_warm.json: each kernel's compile seconds, cache keys and the parts of its Triton cache key
(`soccar_compile_cpu.record_key_parts`), their sum per size (a cold first step's compile) and this
run's wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))


def stage_kernels(cars: int) -> list[tuple[str, int]]:
    """The stage kernels a fused tick of ``cars`` cars launches, in `kernels/arena.tick`'s order, each
    with its pass (the two-pass car kernels' second pass, ``DEFERRED``, is a kernel of its own; pass 2:
    the car step's second pass one car per program, which small batches run, `CAR_PER_PROGRAM_UP_TO`;
    the car-world pair kernels run on the large batches only)."""
    if not cars:
        return [("ball_and_rules_kernel", 0)]
    pairs = [("car_pairs_kernel", 0)] if cars > 1 else []
    return [("bodies_near_kernel", 0), ("wheel_rays_kernel", 0), ("pre_tick_kernel", 0), ("pre_tick_kernel", 1),
            *pairs,
            ("collisions_kernel", 0), ("body_solve_kernel", 0), ("car_step_kernel", 0),
            ("car_world_pairs_kernel", 0), ("car_world_points_kernel", 0), ("car_step_kernel", 1),
            ("car_step_kernel", 2), ("car_events_kernel", 0), ("ball_and_rules_kernel", 0)]  # fmt: skip


def pass_label(kernel: tuple[str, int]) -> str:
    """A `stage_kernels` entry as the results name it."""
    name, wanted = kernel
    from nitro.envs.soccar.kernels import arena as arena_kernels

    return arena_kernels.pass_name(name, wanted) + (", one car per program" if wanted == 2 else "")


def warm_one(size: str, block: int, kernel: tuple[str, int], envs: int, caps: dict) -> dict:
    """Compile pass ``kernel[1]`` of stage kernel ``kernel[0]`` of a ``size`` arena's fused step
    (``block`` envs per program), the arena built as the speed benchmarks build theirs
    (`soccar_cars_gpu.car_arena` for 1v0, else `soccar_game_gpu.game_arena`), with register ``caps``
    (`kernels/arena.REGISTER_CAPS`)."""
    import torch

    import soccar_cars_gpu as cars_bench
    import soccar_game_gpu as game_bench
    import soccar_gpu as common
    from nitro.envs.soccar import ArenaEvents
    from nitro.envs.soccar.kernels import arena as arena_kernels

    from soccar_compile_cpu import record_key_parts

    arena_kernels.REGISTER_CAPS.update(caps)
    blue, orange = (int(x) for x in size.split("v"))
    kernel_name, wanted = kernel
    label = pass_label(kernel)
    arena_kernels.CAR_PER_PROGRAM_UP_TO = (1 << 62) if wanted == 2 else 0  # which second pass the car step runs
    wanted = min(wanted, 1)
    seconds = []
    passes = []
    parts: dict = {}
    record_key_parts(parts)

    class WarmOnly:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            def launch(**kwargs):
                if self.kernel.fn.__name__ != kernel_name or kwargs.get("DEFERRED", False) in passes:
                    return
                passes.append(kwargs.get("DEFERRED", False))
                if len(passes) - 1 == wanted:
                    start = time.perf_counter()
                    self.kernel.warmup(grid=grid, **kwargs)
                    seconds.append(time.perf_counter() - start)

            return launch

    common.DEVICE = "cuda"
    if orange:
        arena = game_bench.game_arena(envs, blue, orange, "eager", None)
    else:
        arena = cars_bench.car_arena(envs, "eager", None)
    cars, device = blue + orange, arena.device
    saved = arena_kernels.wrap_triton
    arena_kernels.wrap_triton = WarmOnly
    try:
        arena_kernels.launch_step_ticks_(
            arena.state, ArenaEvents.none(envs, cars, device), torch.zeros(envs, cars, 8, device=device),
            arena.world, 1, block=block,
        )  # fmt: skip
    finally:
        arena_kernels.wrap_triton = saved
    if not seconds:
        raise RuntimeError(f"{kernel_name} was not launched by a {size} step: stage_kernels is out of date")
    caches = getattr(arena_kernels, kernel_name).device_caches[torch.cuda.current_device()][0]
    return {"size": size, "block": block, "kernel": label,
            "seconds": round(seconds[0], 2),
            "keys": [str(key) for key in caches], "key_parts": parts}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for soccar_warm.json")
    parser.add_argument("--sizes", default="1v0,1v1,2v2,3v3", help="team sizes, BLUEvORANGE, comma-separated")
    parser.add_argument("--blocks", default="32", help="envs per program, comma-separated (the step's default: 32)")
    parser.add_argument("--envs", type=int, default=4096, help="envs of the arenas (any count compiles the same kernels)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count(), help="processes compiling at once")
    parser.add_argument(
        "--maxnreg", default="", help="register caps of stage kernels, NAME=CAP,... (`soccar_stages_gpu.py`'s)"
    )
    parser.add_argument(
        "--kernels", default="", help="only these stage kernels, comma-separated (a second pass as 'NAME (deferred)')"
    )
    args = parser.parse_args()
    import soccar_gpu as common

    caps = common.register_caps(args.maxnreg)
    only = set(filter(None, args.kernels.split(",")))
    jobs = [
        (size, int(block), kernel, args.envs, caps)
        for size in args.sizes.split(",")
        for block in args.blocks.split(",")
        for kernel in stage_kernels(sum(int(x) for x in size.split("v")))
        if not only or pass_label(kernel) in only
    ]
    start = time.perf_counter()
    rows, errors = [], []
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(warm_one, *job): job for job in jobs}
        for future, job in futures.items():
            try:
                rows.append(future.result())
                print(f"{rows[-1]['size']:>4} block {rows[-1]['block']:>3} {rows[-1]['kernel']:<22} "
                      f"{rows[-1]['seconds']:7.1f} s", flush=True)  # fmt: skip
            except Exception as error:  # noqa: BLE001 - one kernel's failure is reported with the others
                errors.append({"job": job[:3], "error": f"{type(error).__name__}: {error}"[:2000]})
                print(f"FAILED {job[:3]}: {errors[-1]['error']}", flush=True)
    wall = time.perf_counter() - start
    import torch
    import triton

    sums: dict[str, float] = {}
    for row in rows:
        key = f"{row['size']} block {row['block']}"
        sums[key] = round(sums.get(key, 0.0) + row["seconds"], 1)
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__, "triton": triton.__version__, "cpus": os.cpu_count(), "jobs": args.jobs,
        "envs": args.envs, "kernels": rows, "compile_seconds_per_size": sums, "wall_seconds": round(wall, 1),
        "errors": errors, "cache": os.environ.get("TRITON_CACHE_DIR", "Triton's default"), "register_caps": caps,
    }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "soccar_warm.json").write_text(json.dumps(result, indent=1))
    print(f"compile seconds per size (a cold first step): {sums}; wall {wall:.0f} s with {args.jobs} jobs")


if __name__ == "__main__":
    main()
