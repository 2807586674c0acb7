"""``nitro train ... --monitor``: training with a dashboard beside it.

Inside tmux the dashboard opens in a new pane next to the trainer's. Elsewhere the trainer runs as a
background process of its own session (its output in ``<run dir>.log``) and the dashboard takes the
terminal; quitting the dashboard leaves training running.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path


def monitor_command(run: Path) -> list[str]:
    return [sys.executable, "-m", "nitro.cli", "monitor", str(run), "--wait"]


def in_tmux() -> bool:
    return bool(os.environ.get("TMUX")) and shutil.which("tmux") is not None


def open_tmux_pane(run: Path) -> None:
    """Split the current tmux window; the new pane (right, focus kept here) runs the dashboard."""
    subprocess.run(["tmux", "split-window", "-h", "-d", shlex.join(monitor_command(run))], check=True)


def train_in_background(train_args: list[str], run: Path) -> subprocess.Popen:
    """``nitro train *train_args`` as a process of its own session, writing its output next to ``run``."""
    log = run.with_name(run.name + ".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "nitro.cli", "train", *train_args], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def watch_background(process: subprocess.Popen, run: Path, interval: float = 0.5) -> int:
    """The dashboard in this terminal while ``process`` trains; returns the trainer's exit code if it
    ended, else 0 (it goes on)."""
    from nitro.monitor.dashboard import Dashboard  # textual: imported only where a dashboard is drawn

    if not sys.stdout.isatty():
        process.wait()
        return process.returncode
    Dashboard(run, interval, process=process).run()
    log = run.with_name(run.name + ".log")
    if process.poll() is None:
        print(f"training goes on in pid {process.pid} (output: {log}); watch again with: nitro monitor {run}; "
              f"stop it with: kill {process.pid}")
        return 0
    print(f"the trainer exited with code {process.returncode} (output: {log})")
    return process.returncode
