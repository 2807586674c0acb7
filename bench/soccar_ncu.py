"""Where inside the fused soccar stage kernels the warps wait: Nsight Compute's PC sampling of one
tick's stage kernels, each sample placed on the Python source line the kernel's SASS came from.

    python bench/soccar_ncu.py --out OUT [--size 1v1] [--envs 262144] [--kernels pre_tick_kernel,...]

Runs `bench/soccar_stages_gpu.py` (one timed call) under ``ncu`` (clocks left alone, the
SourceCounters, WarpStateStats, Occupancy and LaunchStats sections) for the stage kernels of one tick
past the warm-up, reads the report with Nsight Compute's ``ncu_report`` module (per-PC samples by
stall reason), then places every PC on its source line with ``nvdisasm --print-line-info`` over the
kernel's cubin in the Triton cache (the cubin of that name whose code has the profiled length).
Triton inlines every function, so a line is the innermost one: a helper's line (`kernels/vec.py`'s
``dot``) gathers the samples of all its calls. Writes OUT/soccar_ncu.json (per kernel: duration,
registers, occupancy, samples by stall reason, by file and the top lines) and OUT/soccar_ncu.ncu-rep.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = "pre_tick_kernel,car_step_kernel,ball_and_rules_kernel,collisions_kernel,car_pairs_kernel,body_solve_kernel"
LAUNCHES_PER_TICK = {"pre_tick_kernel": 2, "car_step_kernel": 2}  # the two-pass kernels; the others once
SECTIONS = ("SourceCounters", "WarpStateStats", "Occupancy", "LaunchStats", "SpeedOfLight")


def ncu_binary() -> str:
    found = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu")) or ["ncu"]
    return found[-1]


def run_ncu(out: Path, size: str, envs: int, kernels: list[str], skip_ticks: int) -> Path:
    """One tick's launches of ``kernels``, ``skip_ticks`` ticks past the stage benchmark's start."""
    per_tick = sum(LAUNCHES_PER_TICK.get(k, 1) for k in kernels)
    report = out / "soccar_ncu"
    command = [
        ncu_binary(), "--clock-control", "none", "--target-processes", "all", "-f", "-o", str(report),
        "-k", "regex:^(" + "|".join(kernels) + ")$", "--launch-skip", str(skip_ticks * per_tick),
        "--launch-count", str(per_tick), *(x for s in SECTIONS for x in ("--section", s)),
        sys.executable, str(ROOT / "bench" / "soccar_stages_gpu.py"), "--out", tempfile.mkdtemp(),
        "--sizes", size, "--envs", str(envs), "--calls", "1",
    ]  # fmt: skip
    print(" ".join(command), flush=True)
    subprocess.run(command, check=True)
    return report.with_suffix(".ncu-rep")


def load_ncu_report():
    for folder in sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python")):
        sys.path.insert(0, folder)
    import ncu_report

    return ncu_report


def instanced(metric) -> dict[int, float]:
    """An instanced metric's values by correlation id (the PC offset for the per-PC metrics)."""
    ids = metric.correlation_ids()
    return {int(ids.as_uint64(i)): metric.as_double(i) for i in range(metric.num_instances())}


def read_report(path: Path) -> list[dict]:
    """Each profiled launch: its name, whole-kernel metrics and per-PC samples by stall reason."""
    ncu_report = load_ncu_report()
    context = ncu_report.load_report(str(path))
    launches = []
    for r in range(context.num_ranges()):
        rng = context.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            scalars, per_pc, unread = {}, {}, {}
            for name in action.metric_names():
                metric = action.metric_by_name(name)
                try:
                    if metric.num_instances() > 0 and metric.has_correlation_ids():
                        if "pcsamp" in name or name.startswith("sass__inst_executed"):
                            per_pc[name] = instanced(metric)
                    else:
                        scalars[name] = metric.as_double()
                except Exception as error:  # noqa: BLE001 (string-valued metrics; kept with the reason)
                    unread[name] = repr(error)[:80]
            launches.append({"name": action.name(), "metrics": scalars, "per_pc": per_pc, "unread": unread})
    return launches


LINE = re.compile(r'//## File "([^"]+)", line (\d+)')
PC = re.compile(r"/\*([0-9a-f]{4,})\*/")


GENERIC = ("kernels/vec.py", "triton/language/")
"""Helpers every mechanic calls: their samples are also given to the mechanic's line before them."""


def pc_lines(cubin: str, nvdisasm: str) -> dict[int, tuple[str, str]]:
    """Each instruction's PC offset -> ("file:line" innermost, the last line before it outside the
    `GENERIC` helpers, in code order), from nvdisasm's line annotations."""
    text = subprocess.run([nvdisasm, "-g", "-c", cubin], capture_output=True, text=True, check=True).stdout
    where = region = "?"
    lines = {}
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
            lines[int(m.group(1), 16)] = (where, region)
    return lines


def nvdisasm_binary() -> str:
    found = sorted(glob.glob("/usr/local/cuda*/bin/nvdisasm")) + sorted(glob.glob(
        str(Path(__import__("triton").__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm")))  # fmt: skip
    return found[0] if found else "nvdisasm"


def summarize(launches: list[dict], cache: str) -> list[dict]:
    nvdisasm = nvdisasm_binary()
    rows = []
    for launch in launches:
        name = launch["name"]
        samples = {k: v for k, v in launch["per_pc"].items() if "pcsamp" in k}
        total_key = next((k for k in samples if k.endswith("pcsamp_sample_count")), None)
        pcs = set().union(*(v.keys() for v in samples.values())) if samples else set()
        top_pc = max(pcs) if pcs else 0
        mapping: dict[int, tuple[str, str]] = {}
        for cubin in glob.glob(os.path.join(cache, "*", f"{name}.cubin")):
            lines = pc_lines(cubin, nvdisasm)
            if lines and top_pc in lines and max(lines) - top_pc < 64:
                mapping = lines
                break
        by_reason = Counter()
        by_line: dict[str, Counter] = defaultdict(Counter)
        by_region: dict[str, Counter] = defaultdict(Counter)
        by_file: dict[str, Counter] = defaultdict(Counter)
        for key, values in samples.items():
            reason = key.split("pcsamp_")[-1]
            for pc, n in values.items():
                by_reason[reason] += n
                line, region = mapping.get(pc, (f"pc {pc:#x}", f"pc {pc:#x}"))
                by_line[line][reason] += n
                by_region[region][reason] += n
                by_file[line.split(":")[0]][reason] += n
        total = total_key and sum(samples[total_key].values())
        m = launch["metrics"]
        pick = ("gpu__time_duration.sum", "launch__registers_per_thread", "sm__warps_active.avg.pct_of_peak_sustained_active",
                "launch__occupancy_limit_registers", "smsp__inst_executed.sum", "launch__grid_size",
                "smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio")  # fmt: skip
        rows.append({
            "kernel": name, "mapped_to_lines": bool(mapping), "metrics": {k: m[k] for k in pick if k in m},
            "samples": total, "by_reason": dict(by_reason.most_common()), "by_file": ranked(by_file, 30),
            "top_lines": ranked(by_line, 60), "top_regions": ranked(by_region, 60),
        })  # fmt: skip
    return rows


def ranked(table: dict[str, Counter], count: int) -> list[dict]:
    """The ``count`` places with the most samples (all reasons), each with its eight largest reasons."""
    top = sorted(table.items(), key=lambda kv: -kv[1].get("sample_count", sum(kv[1].values())))[:count]
    return [{"where": where, **dict(c.most_common(8))} for where, c in top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for soccar_ncu.json and the report")
    parser.add_argument("--size", default="1v1", help="team size, BLUEvORANGE")
    parser.add_argument("--envs", type=int, default=1 << 18, help="envs of the arena batch")
    parser.add_argument("--kernels", default=STAGES, help="stage kernels to profile, comma-separated")
    parser.add_argument(
        "--skip-ticks", type=int, default=10, help="ticks past the start before the profiled one"
    )
    parser.add_argument(
        "--report", type=Path, default=None, help="summarize this report instead of profiling"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    kernels = args.kernels.split(",")
    report = args.report or run_ncu(args.out, args.size, args.envs, kernels, args.skip_ticks)
    launches = read_report(report)
    cache = os.environ.get("TRITON_CACHE_DIR", str(Path.home() / ".triton" / "cache"))
    result = {"size": args.size, "envs": args.envs, "kernels": summarize(launches, cache),
              "metric_names": sorted({k for x in launches for k in list(x["metrics"]) + list(x["per_pc"])}),
              "unread": launches[0]["unread"] if launches else {}}  # fmt: skip
    (args.out / "soccar_ncu.json").write_text(json.dumps(result, indent=1))
    for row in result["kernels"]:
        print(f"{row['kernel']}: {row['metrics']}", flush=True)
        print(f"  samples {row['samples']}, by reason {dict(list(row['by_reason'].items())[:6])}")
        for line in row["top_regions"][:12]:
            print(f"    {line}")


if __name__ == "__main__":
    main()
