"""What ``nitro eval`` leaves beside a run: RUN/eval/eval.csv (one row per evaluation) and the
per-episode table of each; the curve (eval.png) is drawn by `nitro.monitor.plot.eval_curve`."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

EVAL_FIELDS = ("time", "checkpoint", "update", "global_step", "episodes", "deterministic", "mean_return",
               "std_return", "min_return", "max_return", "mean_length")
"""Columns of RUN/eval/eval.csv."""


def write(run: Path, result: dict) -> dict[str, Path]:
    """Append ``result`` (of `nitro.train.evaluate.evaluate`) to RUN/eval/eval.csv and write its
    episodes to RUN/eval/episodes_<checkpoint>_<deterministic|sampled>.csv."""
    folder = Path(run) / "eval"
    folder.mkdir(exist_ok=True)
    table = folder / "eval.csv"
    new = not table.exists()
    with table.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=EVAL_FIELDS)
        if new:
            writer.writeheader()
        writer.writerow({k: (time.strftime("%Y-%m-%dT%H:%M:%S") if k == "time" else result[k]) for k in EVAL_FIELDS})
    mode = "deterministic" if result["deterministic"] else "sampled"
    episodes = folder / f"episodes_{Path(result['checkpoint']).stem}_{mode}.csv"
    with episodes.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["episode", "return", "length"])
        writer.writerows(zip(range(len(result["returns"])), result["returns"], result["lengths"]))
    return {"table": table, "episodes": episodes}


def read(run: Path) -> list[dict]:
    """The rows of RUN/eval/eval.csv (strings, as csv reads them)."""
    with (Path(run) / "eval" / "eval.csv").open() as f:
        return list(csv.DictReader(f))


def dumps(result: dict) -> str:
    """The printed eval summary (per-episode lists stay in the table)."""
    return json.dumps({k: v for k, v in result.items() if k not in ("returns", "lengths", "checkpoint")})
