"""Where training metrics go: metrics.jsonl and TensorBoard in the run directory, and a live console
display. The trainer hands over a plain dict; nothing here reads trainer internals."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path


class MetricsWriter:
    """Appends one JSON object per log to ``metrics.jsonl`` and mirrors scalars to TensorBoard.

    A run resumed from the checkpoint of update ``resume_update`` (at env step ``resume_step``) first
    drops what was logged after that checkpoint, in both, so every update appears once."""

    def __init__(self, run_dir: Path, tensorboard: bool = True, resume_update: int | None = None,
                 resume_step: int | None = None):
        self.path = Path(run_dir) / "metrics.jsonl"
        if resume_update is not None and self.path.exists():
            _keep_until(self.path, resume_update)
        self.tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            purge = None if resume_step is None else resume_step + 1
            self.tb = SummaryWriter(str(Path(run_dir) / "tb"), purge_step=purge)

    def write(self, step: int, metrics: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, "time": time.time(), **metrics}) + "\n")
        if self.tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and math.isfinite(v):
                    self.tb.add_scalar(k, v, step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


def _keep_until(path: Path, update: int) -> None:
    """Rewrite ``path`` keeping the whole lines logged at updates <= ``update``."""
    kept = []
    for line in path.read_text().splitlines():
        try:
            if json.loads(line)["update"] <= update:
                kept.append(line + "\n")
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a kill
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(kept))
    os.replace(tmp, path)


def _si(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def stats_line(m: dict, width: int = 10_000) -> str:
    """The key numbers of a log, most important first, as many as fit in ``width`` characters."""
    ret = m.get("episode/return_recent", m.get("episode/return"))
    parts = [f"step {_si(m['global_step'])}", f"{_si(m['perf/sps'])} steps/s",
             f"return {ret:.4g}" if ret is not None and math.isfinite(ret) else "return -"]
    if "episode/length" in m:
        parts.append(f"len {m['episode/length']:.4g}")
    for key, label, fmt in (("loss/approx_kl", "kl", ".2g"), ("loss/entropy", "ent", ".3g")):
        if key in m:
            parts.append(f"{label} {m[key]:{fmt}}")
    line = parts[0]
    for part in parts[1:]:
        if len(line) + 3 + len(part) > width:
            break
        line += " | " + part
    return line


class Console:
    """A live progress bar over a line of key numbers (rich) on a terminal, or one plain line per log
    off a terminal. Both fit 80 columns."""

    def __init__(self, total_steps: int, title: str, enabled: bool = True, console=None):
        self.enabled = enabled
        self.live = None
        if enabled and (console is not None or sys.stdout.isatty()):
            from rich.console import Console as RichConsole
            from rich.console import Group
            from rich.live import Live
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
            from rich.text import Text

            self.console = console or RichConsole()
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=None),
                                     TextColumn("{task.percentage:>5.1f}%"), TimeRemainingColumn(),
                                     console=self.console)
            self.task = self.progress.add_task(title[:24], total=total_steps)
            self.total = total_steps
            self.stats = Text("", no_wrap=True, overflow="ellipsis")
            self.live = Live(Group(self.progress, self.stats), console=self.console, refresh_per_second=4,
                             transient=False)
            self.live.start()

    def update(self, m: dict) -> None:
        if not self.enabled:
            return
        if self.live is not None:
            self.progress.update(self.task, completed=min(m["global_step"], self.total))
            self.stats.plain = stats_line(m, self.console.width - 1)
            self.live.refresh()
        else:
            print(f"[update {m['update']}] " + stats_line(m, 66), flush=True)

    def note(self, text: str) -> None:
        """A one-off line (a curriculum stage change, ...)."""
        if not self.enabled:
            return
        if self.progress is not None:
            self.progress.console.print(text)
        else:
            print(text, flush=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
