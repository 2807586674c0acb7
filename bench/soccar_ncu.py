"""Where inside the fused soccar stage kernels the warps wait: Nsight Compute's PC sampling of one
tick's stage kernels, each sample placed on the Python source line the kernel's SASS came from.

    python bench/soccar_ncu.py --out OUT [--size 1v1] [--envs 262144] [--kernels pre_tick_kernel,...]
    python bench/soccar_ncu.py --out OUT --source-csv source.csv.gz --cubins DIR [DIR ...]

Runs `bench/soccar_stages_gpu.py` (one timed call) under ``ncu`` (clocks left alone; the SourceCounters,
WarpStateStats, Occupancy and LaunchStats sections) for the stage kernels of one tick past the warm-up,
exports the report's source page (every SASS instruction of each kernel with its warp-state samples,
``ncu --page source --csv --print-source sass``, OUT/source.csv.gz), then places each instruction on
its source line with ``nvdisasm --print-line-info`` over the kernel's cubin (the cubin of that name in
the Triton cache, or in ``--cubins`` folders, whose instructions are the profiled ones). The second form
summarizes an exported page elsewhere (a machine without the GPU, with the same kernels compiled).

Triton inlines every function, so an instruction's line is the innermost one (`kernels/vec.py`'s
``dot`` gathers the samples of all its calls); each sample is also given to its *region*: the last line
before it, in code order, outside `vec.py` and Triton's own library. Writes OUT/soccar_ncu.json: per
kernel, the samples by stall reason, by file and the top regions and lines, and the warp instructions
it executed by region; and OUT/details.txt, the report's details page.
"""

from __future__ import annotations

import argparse
import csv
import glob
import gzip
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = (
    "wheel_rays_kernel,pre_tick_kernel,car_step_kernel,ball_and_rules_kernel,car_events_kernel,collisions_kernel,"
    "car_pairs_kernel,body_solve_kernel,car_world_pairs_kernel,car_world_points_kernel"
)
LAUNCHES_PER_TICK = {"pre_tick_kernel": 2, "car_step_kernel": 2}  # two-pass; the others once
SECTIONS = ("SourceCounters", "WarpStateStats", "Occupancy", "LaunchStats", "SpeedOfLight", "ComputeWorkloadAnalysis")
REASONS = ("stall_long_sb", "stall_short_sb", "stall_lg", "stall_wait", "stall_no_inst", "stall_selected",
           "stall_not_selected", "stall_mio", "stall_math", "stall_drain", "stall_branch_resolving")  # fmt: skip
GENERIC = ("kernels/vec.py", "triton/language/")
"""Helpers every mechanic calls: their samples are also given to the mechanic's line before them."""


def ncu_binary() -> str:
    found = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu")) or ["ncu"]
    return found[-1]


def run_ncu(out: Path, size: str, envs: int, kernels: list[str], skip_ticks: int) -> Path:
    """One tick's launches of ``kernels``, ``skip_ticks`` ticks past the stage benchmark's start; returns
    the exported source page."""
    per_tick = sum(LAUNCHES_PER_TICK.get(k, 1) for k in kernels)
    report = Path(tempfile.mkdtemp()) / "soccar_ncu"
    command = [
        ncu_binary(), "--clock-control", "none", "--target-processes", "all", "-f", "-o", str(report),
        "-k", "regex:^(" + "|".join(kernels) + ")$", "--launch-skip", str(skip_ticks * per_tick),
        "--launch-count", str(per_tick), *(x for s in SECTIONS for x in ("--section", s)),
        sys.executable, str(ROOT / "bench" / "soccar_stages_gpu.py"), "--out", tempfile.mkdtemp(),
        "--sizes", size, "--envs", str(envs), "--calls", "1",
    ]  # fmt: skip
    print(" ".join(command), flush=True)
    subprocess.run(command, check=True)
    page = subprocess.run(
        [ncu_binary(), "-i", f"{report}.ncu-rep", "--page", "source", "--csv", "--print-source", "sass"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    path = out / "source.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write(page)
    details = subprocess.run(
        [ncu_binary(), "-i", f"{report}.ncu-rep", "--page", "details"], capture_output=True, text=True, check=True
    )
    (out / "details.txt").write_text(details.stdout)
    return path


def read_source_page(path: Path) -> list[tuple[str, list[dict]]]:
    """Each profiled launch of an exported source page: (kernel name, its instructions as dicts)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        rows = list(csv.reader(io.TextIOWrapper(f, "utf-8")))
    launches: list[tuple[str, list[dict]]] = []
    header: list[str] = []
    for row in rows:
        if row and row[0] == "Kernel Name":
            launches.append((row[1], []))
        elif row and row[0] == "Address":
            header = row
        elif row and row[0].startswith("0x") and launches:
            launches[-1][1].append(dict(zip(header, row)))
    return launches


LINE = re.compile(r'//## File "([^"]+)", line (\d+)')
PC = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def disassembled(cubin: str, nvdisasm: str) -> list[tuple[str, str, str]]:
    """Each instruction of a cubin in order: (SASS, "file:line" innermost, its region)."""
    text = subprocess.run([nvdisasm, "-g", "-c", cubin], capture_output=True, text=True, check=True).stdout
    where = region = "?"
    out = []
    for row in text.splitlines():
        m = LINE.search(row)
        if m:
            path = os.path.relpath(m.group(1), ROOT) if m.group(1).startswith(str(ROOT)) else m.group(1)
            where = f"{path}:{m.group(2)}"
            if not any(g in path for g in GENERIC):
                region = where
            continue
        m = PC.search(row)
        if m:
            out.append((" ".join(m.group(2).split()), where, region))
    return out


def nvdisasm_binary() -> str:
    import triton

    found = sorted(glob.glob("/usr/local/cuda*/bin/nvdisasm"))
    found += [str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm")]
    return next((f for f in found if os.path.exists(f)), "nvdisasm")


def matching_cubin(name: str, sass: list[str], folders: list[str], nvdisasm: str) -> list[tuple[str, str, str]]:
    """The disassembly of the cubin named ``name`` whose instructions are the profiled ones (the same
    count, three in four identical: the export prints some operands apart from nvdisasm), or []."""
    for folder in folders:
        for cubin in glob.glob(os.path.join(folder, "**", f"{name}.cubin"), recursive=True):
            code = disassembled(cubin, nvdisasm)
            if len(code) == len(sass) and sum(a == b[0] for a, b in zip(sass, code)) >= 0.75 * len(sass):
                return code
    return []


def summarize(launches: list[tuple[str, list[dict]]], folders: list[str]) -> list[dict]:
    nvdisasm = nvdisasm_binary()
    rows = []
    for name, instructions in launches:
        sass = [" ".join(i["Source"].split()) for i in instructions]
        code = matching_cubin(name, sass, folders, nvdisasm)
        by_reason, by_file, by_line, by_region = Counter(), Counter(), Counter(), Counter()
        executed = Counter()  # warp-level instructions executed, by region
        for k, i in enumerate(instructions):
            n = float(i.get("Warp Stall Sampling (All Samples)") or 0)
            line, region = (code[k][1], code[k][2]) if code else (f"+{k * 16:#x}", f"+{k * 16:#x}")
            by_line[line] += n
            by_region[region] += n
            executed[region] += float(i.get("Instructions Executed") or 0)
            by_file[line.split(":")[0]] += n
            for reason in REASONS:
                by_reason[reason] += float(i.get(reason) or 0)
        total = sum(by_line.values()) or 1.0

        def shares(table: Counter, count: int, total: float = total) -> dict:
            return {where: round(n / total, 4) for where, n in table.most_common(count)}

        rows.append({
            "kernel": name, "instructions": len(instructions), "mapped_to_lines": bool(code), "samples": total,
            "by_reason": shares(by_reason, len(REASONS)), "by_file": shares(by_file, 20),
            "top_regions": shares(by_region, 40), "top_lines": shares(by_line, 40),
            "instructions_executed": sum(executed.values()),
            "executed_by_region": shares(executed, 40, sum(executed.values()) or 1.0),
        })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for soccar_ncu.json and source.csv.gz")
    parser.add_argument("--size", default="1v1", help="team size, BLUEvORANGE")
    parser.add_argument("--envs", type=int, default=1 << 18, help="envs of the arena batch")
    parser.add_argument("--kernels", default=STAGES, help="stage kernels to profile, comma-separated")
    parser.add_argument("--skip-ticks", type=int, default=10, help="ticks before the profiled one")
    parser.add_argument("--source-csv", type=Path, default=None, help="summarize this exported page instead")
    parser.add_argument("--cubins", nargs="*", default=[], help="more folders to find the kernels' cubins in")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    page = args.source_csv or run_ncu(args.out, args.size, args.envs, args.kernels.split(","), args.skip_ticks)
    cache = os.environ.get("TRITON_CACHE_DIR", str(Path.home() / ".triton" / "cache"))
    result = {"size": args.size, "envs": args.envs, "kernels": summarize(read_source_page(page), [cache, *args.cubins])}
    (args.out / "soccar_ncu.json").write_text(json.dumps(result, indent=1))
    for row in result["kernels"]:
        print(f"{row['kernel']} ({row['instructions']} instructions, {row['samples']:.0f} samples): "
              f"{dict(list(row['by_reason'].items())[:5])}", flush=True)  # fmt: skip
        for where, share in list(row["top_regions"].items())[:8]:
            print(f"    {share:6.3f}  {where}")
        print(f"  {row['instructions_executed']:.3g} warp instructions executed, by region:")
        for where, share in list(row["executed_by_region"].items())[:8]:
            print(f"    {share:6.3f}  {where}")


if __name__ == "__main__":
    main()
