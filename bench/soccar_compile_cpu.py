"""Compile time of the fused soccar step's stage kernels for an H100/H200 (sm_90), on a machine without
a GPU: Triton's whole pipeline (TTIR, TTGIR, LLVM IR, PTX, cubin) per kernel and team size, stage by
stage, with an empty Triton cache, and each kernel's registers and stack (spills) from its cubin. The
fused step's kernels are compiled at their first launch, so this is the wait a user's first
`Arena(mode="fused")` step pays on the GPU's host (a faster CPU there).

    python bench/soccar_compile_cpu.py OUT [--sizes 0v0,1v0,1v1,2v2,3v3] [--block 32] [--kernels pre_tick_kernel,...]
        [--cache DIR [--strip] [--key-as PKG]]

Writes OUT/soccar_compile_cpu.json and prints a table. Needs Triton (a CUDA build of PyTorch, or the
triton wheel); the kernels' arguments are captured from a real `launch_step_ticks_` on CPU tensors and
bound by the kernels' own launch path (`Sm90Driver`), so each kernel is specialized and keyed as on an
H100/H200 (a two-pass car kernel twice: its first pass, then its "(deferred)" second). With
``--cache DIR`` the compiled kernels stay in DIR, a Triton cache a GPU machine with the same Triton
version loads instead of compiling: carry DIR there with the same source tree (the keys
hash every kernel's and helper's source and first line), run ``python bench/soccar_compile_cpu.py
--relocate DIR`` and set ``TRITON_CACHE_DIR=DIR``. ``--key-as PKG`` keys them for that machine's Python
when it differs from this one's: PKG is the ``triton`` folder of the same Triton version's wheel for
that Python, unpacked (``pip download --no-deps triton==X --python-version 3.12 --only-binary=:all:``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch


def constexprs(kwargs: dict) -> dict:
    """A launch's compile-time arguments (the kernels name them in capitals)."""
    return {k: v for k, v in kwargs.items() if k.isupper()}


def captured_launches(blue: int, orange: int, block: int) -> list:
    """Each stage kernel of one fused step of a ``blue``v``orange`` arena with its launch arguments, on
    both of the car step's paths for its second pass (one car per program, as small batches run it; one
    car per lane after `car_world_pairs_kernel` and `car_world_points_kernel`, as large batches do:
    `CAR_PER_PROGRAM_UP_TO`)."""
    from nitro.envs.soccar import Arena, ArenaEvents
    from nitro.envs.soccar.kernels import arena as arena_kernels

    launches = []

    class Catch:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            def launch(**kwargs):  # once per kernel and constexprs (the two-pass car kernels twice)
                if not any(k is self.kernel and constexprs(w) == constexprs(kwargs) for k, w in launches):
                    launches.append((self.kernel, kwargs))

            return launch

    saved = arena_kernels.wrap_triton, arena_kernels.require_triton, arena_kernels.CAR_PER_PROGRAM_UP_TO
    arena_kernels.wrap_triton, arena_kernels.require_triton = Catch, (lambda: None)
    try:
        for kickoff_after_goal, up_to in ((False, saved[2]), (True, saved[2]), (False, 0)):
            arena_kernels.CAR_PER_PROGRAM_UP_TO = up_to  # (0: the large batches' second pass)
            a = Arena(2, blue=blue, orange=orange, device="cpu", kickoff_after_goal=kickoff_after_goal)
            cars = blue + orange
            arena_kernels.launch_step_ticks_(
                a.state, ArenaEvents.none(2, cars, "cpu"), torch.zeros(2, cars, 8), a.world, 8, block=block
            )
    finally:
        arena_kernels.wrap_triton, arena_kernels.require_triton, arena_kernels.CAR_PER_PROGRAM_UP_TO = saved
    return launches


class Sm90Driver:
    """What a kernel's launch asks of Triton's active driver, answered for an H100/H200 (sm_90) without
    one: a launch with ``warmup=True`` then binds and specializes its arguments and compiles exactly as
    on the GPU (the same cache key), and stops before launching."""

    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        return 0

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)


def compile_for_sm90(kernel, kwargs: dict) -> dict:
    """Triton's compile of one launch for sm_90, through the kernel's own launch path: seconds per stage
    and in all, PTX lines, registers and stack; the kernel lands in Triton's cache under the key a
    launch on the GPU computes."""
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.runtime.driver import driver

    stages: dict[str, float] = {}
    add_stages = CUDABackend.add_stages

    def timed_stages(self, table, options, language):
        add_stages(self, table, options, language)
        for key, stage in list(table.items()):

            def timed(src, metadata, stage=stage, key=key):
                start = time.perf_counter()
                out = stage(src, metadata)
                stages[key] = round(time.perf_counter() - start, 2)
                return out

            table[key] = timed

    CUDABackend.add_stages = timed_stages
    driver.set_active(Sm90Driver())  # kept: there is no other driver on this machine
    try:
        start = time.perf_counter()
        compiled = kernel.run(grid=(1,), warmup=True, **kwargs)
        total = time.perf_counter() - start
    finally:
        CUDABackend.add_stages = add_stages
    ptx = compiled.asm.get("ptx", "")
    return {"seconds": round(total, 2), "stages": stages, "ptx_lines": ptx.count("\n"), **resource_usage(compiled.asm["cubin"])}


def resource_usage(cubin: bytes) -> dict:
    """Registers per thread and stack bytes (register spills and local arrays) of a cubin, as
    `cuobjdump -res-usage` (shipped with Triton's CUDA backend) reports them: what sets occupancy,
    without a GPU."""
    import re
    import subprocess

    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([str(tool), "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
    usage = re.search(r"REG:(\d+) STACK:(\d+)", out)
    return {"registers": int(usage[1]), "stack_bytes": int(usage[2])} if usage else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, nargs="?", help="folder for soccar_compile_cpu.json")
    parser.add_argument("--sizes", default="0v0,1v0,1v1,3v3", help="team sizes, BLUEvORANGE, comma-separated")
    parser.add_argument(
        "--block", type=int, default=32, help="lanes per program (the fused step's default: 32)"
    )
    parser.add_argument(
        "--kernels", default="", help="stage kernels to compile, comma-separated (default: all of each size)"
    )
    parser.add_argument(
        "--cache", type=Path, help="keep the compiled kernels in this Triton cache folder (empty: all compiled "
        "cold), to carry to a GPU machine with the same Triton; there run --relocate on it first",
    )
    parser.add_argument("--strip", action="store_true", help="with --cache: keep only what a launch loads")
    parser.add_argument(
        "--key-as", type=Path, help="with --cache: key the kernels as the Triton package at this folder would (the "
        "same version's wheel for the GPU machine's Python, unpacked: only its libtriton differs)",
    )
    parser.add_argument(
        "--relocate", type=Path, help="point a carried --cache folder's entries at where it now lies, then exit"
    )
    parser.add_argument(
        "--keys", action="store_true", help="write each kernel's cache key parts (`record_key_parts`) to "
        "OUT/soccar_compile_keys.json instead of compiling, to compare with `soccar_warm.py`'s on a GPU machine",
    )
    parser.add_argument(
        "--maxnreg", default="", help="register caps of stage kernels, NAME=CAP,... (`soccar_stages_gpu.py`'s)"
    )
    args = parser.parse_args()
    if args.relocate:
        relocate(args.relocate)
        return
    if args.out is None:
        parser.error("give OUT, the folder for soccar_compile_cpu.json (or --relocate DIR)")
    from soccar_gpu import register_caps

    from nitro.envs.soccar.kernels import arena as arena_kernels

    arena_kernels.REGISTER_CAPS.update(register_caps(args.maxnreg))
    only = set(filter(None, args.kernels.split(",")))
    cache = args.cache or Path(tempfile.mkdtemp(prefix="nitro_compile_"))
    if cache.exists() and any(cache.iterdir()):
        parser.error(f"--cache {cache} is not empty; give an empty or new folder, so every kernel compiles cold")
    os.environ["TRITON_CACHE_DIR"] = str(cache.resolve())
    import triton

    if args.key_as:
        key_as(args.key_as)

    parts: dict = {}
    if args.keys:
        record_key_parts(parts, stop=True)
    rows = []
    for size in args.sizes.split(","):
        blue, orange = (int(x) for x in size.split("v"))
        for kernel, kwargs in captured_launches(blue, orange, args.block):
            name = getattr(kernel, "fn", kernel).__name__
            if only and name not in only:
                continue
            if args.keys:
                try:
                    compile_for_sm90(kernel, kwargs)
                except KeysOnly:
                    continue
            name = arena_kernels.pass_name(name, kwargs.get("DEFERRED"))
            row = {"size": size, "kernel": name, **compile_for_sm90(kernel, kwargs)}
            print(
                f"{size:>4} {name:<22} {row['seconds']:7.1f} s  ttgir {row['stages'].get('ttgir', 0):6.1f} s"
                f"  registers {row.get('registers')}  stack {row.get('stack_bytes')} B",
                flush=True,
            )
            rows.append(row)
    result = {
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "target": "cuda sm_90",
        "keyed_as": str(args.key_as) if args.key_as else None,
        "block": args.block,
        "register_caps": arena_kernels.REGISTER_CAPS,
        "kernels": rows,
        "per_size_seconds": {
            s: round(sum(r["seconds"] for r in rows if r["size"] == s), 1) for s in args.sizes.split(",")
        },
    }
    if args.keys:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "soccar_compile_keys.json").write_text(json.dumps(parts, indent=1))
        return
    if args.cache and args.strip:
        for path in cache.rglob("*"):
            if path.is_file() and path.suffix not in (".cubin", ".json"):
                path.unlink()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "soccar_compile_cpu.json").write_text(json.dumps(result, indent=1))
    print("size  seconds (all stage kernels)")
    for size, seconds in result["per_size_seconds"].items():
        print(f"{size:>4}  {seconds}")


def key_as(package: Path) -> None:
    """Key Triton's cache as the Triton package at ``package`` (its ``triton`` folder) would: Triton's own
    key function, run over that package's files."""
    import types

    from triton.runtime import cache

    own = getattr(cache.triton_key, "__wrapped__", cache.triton_key)
    there = types.FunctionType(own.__code__, {**own.__globals__, "__file__": str(package / "runtime" / "cache.py")})
    key = there()
    cache.triton_key = lambda: key
    print(f"cache keys as the Triton at {package}: {hashlib.sha256(key.encode()).hexdigest()[:16]}", flush=True)


def record_key_parts(parts: dict, stop: bool = False) -> None:
    """Record the parts of each cache key Triton computes in this process into ``parts`` (by kernel
    name and compile-time arguments): Triton's own key, the kernel's source key (its code, helpers and
    global constants), its specialization, the backend's and the options' hashes and the environment.
    Two machines that key a kernel differently differ in one of these. With ``stop``, raise
    `KeysOnly` instead of compiling."""
    import triton.compiler.compiler as compiler
    from triton.runtime import cache

    own = compiler.get_cache_key

    def short(text) -> str:
        return hashlib.sha256(str(text).encode()).hexdigest()[:16]

    def recorded(src, backend, options, env_vars):
        constants = sorted((str(k), str(v)) for k, v in src.constants.items())
        parts[f"{src.fn.__name__} {short(constants)}"] = {
            "triton_key": short(cache.triton_key()), "source": short(src.fn.cache_key), "attrs": str(src.attrs),
            "signature": str(sorted(src.signature.items())), "constants": short(constants),
            "backend": backend.hash(), "options": short(options.hash()), "env": str(sorted(env_vars.items())),
        }  # fmt: skip
        if stop:
            raise KeysOnly
        return own(src, backend, options, env_vars)

    compiler.get_cache_key = recorded  # (what `triton.compile` calls)


class KeysOnly(Exception):
    """`record_key_parts`' stop before a compile."""


def relocate(cache: Path) -> None:
    """Rewrite the absolute paths Triton's cache groups hold (``__grp__*.json``) to ``cache``'s own place."""
    cache = cache.resolve()
    for group in cache.glob("*/__grp__*.json"):
        data = json.loads(group.read_text())
        data["child_paths"] = {
            name: str(group.parent / Path(path).name) for name, path in data["child_paths"].items()
        }
        group.write_text(json.dumps(data))


if __name__ == "__main__":
    main()
