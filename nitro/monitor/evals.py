"""What ``nitro eval`` leaves beside a run: RUN/eval/eval.csv (one row per evaluation) and the
per-episode table of each; the curve (eval.png) is drawn by `nitro.monitor.plot.eval_curve`. For
multi-agent runs, RUN/eval/vs_bots.csv (one row per evaluation and bot) and the JSON of each; the
curve (vs_bots.png) is `nitro.monitor.plot.vs_bots_curve`."""

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


VS_BOTS_FIELDS = ("time", "checkpoint", "update", "global_step", "games", "deterministic", "bot")
"""The first columns of RUN/eval/vs_bots.csv; the bot's summary (win_rate, wins, ..., each with its
_ci95) follows."""


def write_vs_bots(run: Path, result: dict) -> dict[str, Path]:
    """Append ``result`` (of `nitro.train.evaluate.evaluate_vs_bots`) to RUN/eval/vs_bots.csv, one row per
    bot, and write it whole to RUN/eval/vs_bots_<checkpoint>.json."""
    folder = Path(run) / "eval"
    folder.mkdir(exist_ok=True)
    table = folder / "vs_bots.csv"
    rows = [{"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "checkpoint": Path(result["checkpoint"]).name,
             **{k: result[k] for k in VS_BOTS_FIELDS[2:6]}, "bot": bot, **summary}
            for bot, summary in result["opponents"].items()]
    fields = list(VS_BOTS_FIELDS) + [k for k in rows[0] if k not in VS_BOTS_FIELDS] if rows else list(VS_BOTS_FIELDS)
    if table.exists():
        with table.open() as f:
            fields = next(csv.reader(f))
    new = not table.exists()
    with table.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows(rows)
    path = folder / f"vs_bots_{Path(result['checkpoint']).stem}.json"
    path.write_text(json.dumps(result, indent=1))
    return {"table": table, "json": path}


def read_vs_bots(run: Path) -> list[dict]:
    """The rows of RUN/eval/vs_bots.csv (strings, as csv reads them)."""
    with (Path(run) / "eval" / "vs_bots.csv").open() as f:
        return list(csv.DictReader(f))


def read(run: Path) -> list[dict]:
    """The rows of RUN/eval/eval.csv (strings, as csv reads them)."""
    with (Path(run) / "eval" / "eval.csv").open() as f:
        return list(csv.DictReader(f))


def dumps(result: dict) -> str:
    """The printed eval summary (per-episode lists stay in the table)."""
    return json.dumps({k: v for k, v in result.items() if k not in ("returns", "lengths", "checkpoint")})
