"""Reading run directories from outside the trainer: which run, its metrics, whether its trainer lives.

A run directory holds ``config.yaml``, ``metrics.jsonl`` (one JSON object per log) and ``status.json``
(see `nitro.monitor.stream`). Readers never write there and never block the trainer: metrics are
tailed by byte offset, a half-written last line waits for the next poll, and status.json is replaced
atomically by the trainer.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from nitro.monitor.stream import METRICS_FILE, STATUS_FILE

RUN_MARKERS = ("config.yaml", METRICS_FILE, STATUS_FILE)


def find_run(path: str | os.PathLike) -> Path:
    """``path`` if it is a run directory, else a one-line error saying what a run directory holds."""
    run = Path(path)
    if not run.is_dir():
        raise FileNotFoundError(f"no run directory at {run}; give a folder under runs/ (or --latest)")
    if not any((run / m).exists() for m in RUN_MARKERS):
        raise FileNotFoundError(f"{run} is not a run directory (it has none of {', '.join(RUN_MARKERS)}); "
                                "give a folder made by nitro train, or --latest")
    return run


def latest_run(root: str | os.PathLike = "runs") -> Path:
    """The run under ``root`` whose metrics or status changed last."""
    root = Path(root)
    runs = [p for p in root.iterdir() if p.is_dir() and any((p / m).exists() for m in RUN_MARKERS)] \
        if root.is_dir() else []
    if not runs:
        raise FileNotFoundError(f"no runs under {root}/; start one with nitro train, or pass --dir DIR")
    return max(runs, key=lambda p: max((p / m).stat().st_mtime for m in RUN_MARKERS if (p / m).exists()))


def read_status(run: Path) -> dict | None:
    try:
        return json.loads((Path(run) / STATUS_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def read_config(run: Path) -> dict:
    try:
        return yaml.safe_load((Path(run) / "config.yaml").read_text()) or {}
    except (FileNotFoundError, yaml.YAMLError):
        return {}


class MetricsTail:
    """The rows of a growing ``metrics.jsonl``, read incrementally. A row repeating an earlier update
    (a resumed run logging again) replaces the rows from that update on."""

    def __init__(self, run: Path):
        self.path = Path(run) / METRICS_FILE
        self.offset = 0
        self.rows: list[dict] = []

    def poll(self) -> int:
        """Read what was appended since the last poll; returns the number of new rows."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return 0
        if size < self.offset:  # the file was replaced: start over
            self.offset, self.rows = 0, []
        if size == self.offset:
            return 0
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read(size - self.offset)
        end = data.rfind(b"\n") + 1  # a line without its newline is still being written
        self.offset += end
        added = 0
        for line in data[:end].splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if self.rows and "update" in row and row["update"] <= self.rows[-1].get("update", -1):
                self.rows = [r for r in self.rows if r.get("update", -1) < row["update"]]
            self.rows.append(row)
            added += 1
        return added


def read_metrics(run: Path) -> list[dict]:
    tail = MetricsTail(run)
    tail.poll()
    return tail.rows


def series(rows: list[dict], key: str) -> tuple[list[float], list[float]]:
    """(global steps, values) of the rows that logged a finite ``key``."""
    pairs = [(r.get("global_step", r.get("step", 0)), r[key]) for r in rows
             if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@dataclass
class TrainerState:
    state: str
    """running | finished | failed | interrupted | stopped (the process is gone) | starting | unknown."""
    message: str
    since_update: float = field(default=math.nan)
    """Seconds since the trainer last wrote its status."""


def trainer_state(status: dict | None, now: float | None = None) -> TrainerState:
    """What became of the trainer that wrote ``status``."""
    now = time.time() if now is None else now
    if status is None:
        return TrainerState("unknown", "no status.json yet (the trainer has not started, or predates it)")
    age = now - status.get("updated", now)
    state, pid = status.get("state", "unknown"), status.get("pid")
    where = f"update {status.get('update', 0)}, {_ago(age)}"
    if state == "running":
        if status.get("host") == socket.gethostname() and pid is not None and not process_alive(pid):
            return TrainerState("stopped", f"the trainer (pid {pid}) is gone without finishing; last log at "
                                           f"{where}", age)
        if status.get("update", 0) == 0:
            return TrainerState("starting", f"pid {pid}: setting up (compiling, capturing)", age)
        return TrainerState("running", f"pid {pid}, last log at {where}", age)
    if state == "finished":
        return TrainerState("finished", f"finished at {where}", age)
    if state in ("failed", "interrupted"):
        return TrainerState(state, f"{state} at {where}: {status.get('error', '')}", age)
    return TrainerState("unknown", f"status.json says state {state!r}", age)


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"
