"""Run directories: one per run, never shared, written by one process at a time.

A new run gets a directory of its own (``<env>-<time>``, with ``-2``, ``-3``, ... appended when that
name is taken, created atomically so two runs started in the same second cannot share one); a name
given with ``run.name`` that already holds a run is refused. The process that writes a run holds an
exclusive lock on ``<run>/.lock`` for as long as it trains: a second writer (the same run resumed
while it still runs, or a new run pointed at it) is refused with the holder's process id. The lock is
the operating system's (``flock``), so a killed run leaves no stale lock behind.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from nitro.core.errors import NitroError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

LOCK_NAME = ".lock"
RUN_FILES = ("config.yaml", "metrics.jsonl", "checkpoints")
"""What makes a directory hold a run."""


class RunDirError(NitroError):
    """A run directory that cannot be used: taken by another run, or locked by a running process."""


def holds_run(path: Path) -> bool:
    return any((Path(path) / name).exists() for name in RUN_FILES)


def new_run_dir(parent: str | Path, name: str, env_id: str) -> Path:
    """Create the directory of a new run and return it: ``parent/name``, refused if it holds a run, or
    a unique ``parent/<env>-<time>[-k]`` when ``name`` is empty."""
    parent = Path(parent)
    if name:
        path = parent / name
        if holds_run(path):
            raise RunDirError(f"{path} already holds a run; choose another run.name, or continue that run "
                              f"with: nitro train --resume {path}")
        path.mkdir(parents=True, exist_ok=True)
        return path
    parent.mkdir(parents=True, exist_ok=True)
    base = f"{env_id.lower()}-{time.strftime('%Y%m%d-%H%M%S')}"
    for k in range(1, 10_000):
        path = parent / (base if k == 1 else f"{base}-{k}")
        try:
            path.mkdir()  # atomic: exactly one process creates each name
            return path
        except FileExistsError:
            continue
    raise RunDirError(f"could not find a free run directory name under {parent} for {base}")


def discard_if_unused(path: str | Path) -> None:
    """Remove a new run's directory that holds nothing but its lock file (its set-up failed)."""
    path = Path(path)
    if path.is_dir() and {p.name for p in path.iterdir()} <= {LOCK_NAME}:
        (path / LOCK_NAME).unlink(missing_ok=True)
        path.rmdir()


class RunLock:
    """The exclusive writer's lock on a run directory, held from ``acquire`` until ``release``."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / LOCK_NAME
        self.file = None

    @property
    def held(self) -> bool:
        return self.file is not None

    def acquire(self) -> RunLock:
        if self.file is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+")
        try:
            _lock(f)
        except OSError:
            f.seek(0)
            holder = _describe_holder(f.read())
            f.close()
            raise RunDirError(f"{self.path.parent} is in use by {holder}; wait for it to finish or stop it "
                              f"(a stopped run can be continued with nitro train --resume "
                              f"{self.path.parent})") from None
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                            "started": time.strftime("%Y-%m-%d %H:%M:%S")}))
        f.flush()
        self.file = f
        return self

    def release(self) -> None:
        if self.file is not None:
            _unlock(self.file)
            self.file.close()
            self.file = None


def _lock(f) -> None:
    if fcntl is not None:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    else:
        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)


def _unlock(f) -> None:
    if fcntl is not None:
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    else:
        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)


def _describe_holder(text: str) -> str:
    try:
        info = json.loads(text)
        return f"process {info['pid']} on {info['host']} (started {info['started']})"
    except (ValueError, KeyError, TypeError):
        return "another process"
