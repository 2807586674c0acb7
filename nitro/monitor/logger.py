"""Where training metrics go: metrics.jsonl and TensorBoard in the run directory, and a live console
line. The trainer hands over a plain dict; nothing here reads trainer internals."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path


class MetricsWriter:
    """Appends one JSON object per log to ``metrics.jsonl`` and mirrors scalars to TensorBoard."""

    def __init__(self, run_dir: Path, tensorboard: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(Path(run_dir) / "tb"))

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


def _si(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


class Console:
    """A live progress bar with the key numbers (rich), or one plain line per log off a terminal."""

    def __init__(self, total_steps: int, title: str, enabled: bool = True):
        self.enabled = enabled
        self.total = total_steps
        self.progress = None
        if enabled and sys.stdout.isatty():
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                     TextColumn("{task.percentage:>5.1f}%"), TimeRemainingColumn(),
                                     TextColumn("{task.fields[line]}"))
            self.task = self.progress.add_task(title, total=total_steps, line="")
            self.progress.start()

    def line(self, m: dict) -> str:
        ret = m.get("episode/return")
        parts = [f"step {_si(m['global_step'])}", f"SPS {_si(m['perf/sps'])}",
                 f"return {ret:.4g}" if ret is not None and math.isfinite(ret) else "return -",
                 f"len {m.get('episode/length', float('nan')):.4g}",
                 f"kl {m.get('loss/approx_kl', float('nan')):.2g}",
                 f"ent {m.get('loss/entropy', float('nan')):.3g}"]
        return " | ".join(parts)

    def update(self, m: dict) -> None:
        if not self.enabled:
            return
        if self.progress is not None:
            self.progress.update(self.task, completed=min(m["global_step"], self.total), line=self.line(m))
        else:
            print(f"[update {m['update']}] " + self.line(m), flush=True)

    def note(self, text: str) -> None:
        """A one-off line (a curriculum stage change, ...)."""
        if not self.enabled:
            return
        if self.progress is not None:
            self.progress.console.print(text)
        else:
            print(text, flush=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
