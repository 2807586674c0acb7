"""Checkpoints: safetensors files written atomically and durably, the last K and the best kept.

A checkpoint is ``ckpt_<update>.safetensors`` holding named tensors (policy, optimizer, normalizers,
env state, counters); its metadata (config, counters, score) is stored in the safetensors header.
A file is written to ``<name>.tmp``, flushed to disk (fsync), renamed over its final name, and the
folder is flushed too, so a crash at any point leaves either the old file or the new one, never a torn
one. The trainer checks that the training state is finite before it writes, so every checkpoint on disk
is a good one and the newest is the last good one. Loading a run falls back from an unreadable newest
file (truncated by a full disk, say) to the newest readable one, naming what it skipped.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch
from safetensors.torch import load as load_bytes
from safetensors.torch import save as save_bytes

from nitro.core.errors import NitroError

_NAME = re.compile(r"ckpt_(\d+)\.safetensors$")
TMP_SUFFIX = ".tmp"
UNREADABLE_SUFFIX = ".unreadable"
"""Unreadable checkpoints skipped by a resume are renamed with this suffix (kept for inspection, out of
the checkpoint list, so rotation never keeps them instead of good ones)."""


class CheckpointError(NitroError):
    """A checkpoint file that cannot be read (empty, truncated, or not a nitro checkpoint)."""


def save(path: Path, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    """Write ``tensors`` and ``meta`` to ``path`` atomically and durably."""
    write_atomic(Path(path), _serialize(tensors, meta))


def _serialize(tensors: dict[str, torch.Tensor], meta: dict) -> bytes:
    cpu = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    return save_bytes(cpu, metadata={"nitro": json.dumps(meta)})


def write_atomic(path: Path, data: bytes) -> None:
    """``data`` to ``path``: a temporary file fsynced before the rename, the folder fsynced after it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # platforms that cannot open a folder (Windows) make renames durable themselves
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load(path: Path, device: torch.device | str = "cpu") -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors on ``device``, metadata) of one checkpoint; unreadable files raise ``CheckpointError``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        data = path.read_bytes()
        meta = json.loads(_header(data)["__metadata__"]["nitro"])
        tensors = load_bytes(data)
    except Exception as e:  # safetensors, JSON and missing-key errors all mean: not a whole checkpoint
        raise CheckpointError(f"checkpoint {path} cannot be read ({_reason(e, path)})") from None
    return {k: v.to(device) for k, v in tensors.items()}, meta


def _header(data: bytes) -> dict:
    """The safetensors JSON header (8-byte little-endian length, then JSON)."""
    if len(data) < 8:
        raise ValueError("empty or truncated")
    size = int.from_bytes(data[:8], "little")
    if size > len(data) - 8:
        raise ValueError(f"truncated: the header alone needs {size + 8} bytes")
    return json.loads(data[8 : 8 + size])


def _reason(e: Exception, path: Path) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, KeyError):
        text = f"no nitro metadata {text}: not a nitro checkpoint"
    return f"{text}; {path.stat().st_size} bytes on disk" if path.exists() else text


def load_meta(path: Path) -> dict:
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            size = int.from_bytes(head, "little") if len(head) == 8 else -1
            return json.loads(_header(head + f.read(max(size, 0)))["__metadata__"]["nitro"])
    except Exception as e:
        raise CheckpointError(f"checkpoint {path} cannot be read ({_reason(e, path)})") from None


def checkpoints(run_dir: Path) -> list[Path]:
    """Checkpoints of a run, oldest first."""
    found = [(int(m.group(1)), p) for p in (Path(run_dir) / "checkpoints").glob("ckpt_*.safetensors")
             if (m := _NAME.search(p.name))]
    return [p for _, p in sorted(found)]


def latest(run_dir: Path) -> Path:
    found = checkpoints(run_dir)
    if not found:
        raise FileNotFoundError(f"no checkpoints in {Path(run_dir) / 'checkpoints'}")
    return found[-1]


def load_latest(run_dir: Path, device: torch.device | str = "cpu"):
    """The newest readable checkpoint of a run: (path, tensors, meta, skipped), ``skipped`` listing the
    newer files that could not be read as (path, reason)."""
    skipped: list[tuple[Path, str]] = []
    for path in reversed(checkpoints(run_dir)):
        try:
            return (path, *load(path, device), skipped)
        except CheckpointError as e:
            skipped.append((path, str(e).split("(", 1)[-1].rstrip(")")))
    if not skipped:
        raise FileNotFoundError(f"no checkpoints in {Path(run_dir) / 'checkpoints'}")
    raise CheckpointError(f"no readable checkpoint in {Path(run_dir) / 'checkpoints'}: "
                          + "; ".join(f"{p.name}: {why}" for p, why in skipped))


def best(run_dir: Path) -> Path:
    path = Path(run_dir) / "checkpoints" / "best.safetensors"
    return path if path.exists() else latest(run_dir)


def remove_stale_temporaries(run_dir: Path) -> list[Path]:
    """Delete the ``*.tmp`` files a killed writer left (call with the run's lock held)."""
    stale = sorted((Path(run_dir) / "checkpoints").glob(f"*{TMP_SUFFIX}"))
    for p in stale:
        p.unlink()
    return stale


def set_aside(path: Path) -> Path:
    """Rename an unreadable checkpoint out of the checkpoint list (kept for inspection)."""
    target = path.with_name(path.name + UNREADABLE_SUFFIX)
    os.replace(path, target)
    return target


class Keeper:
    """Saves checkpoints into ``run_dir/checkpoints``, keeping the last ``keep_last`` and the best."""

    def __init__(self, run_dir: Path, keep_last: int):
        self.dir = Path(run_dir) / "checkpoints"
        self.keep_last = max(1, keep_last)
        self.best_score = -float("inf")
        best_path = self.dir / "best.safetensors"
        if best_path.exists():
            try:
                self.best_score = load_meta(best_path).get("score", -float("inf")) or -float("inf")
            except CheckpointError:
                pass  # an unreadable best is replaced by the next scored checkpoint

    def save(self, update: int, tensors: dict[str, torch.Tensor], meta: dict, score: float | None) -> Path:
        path = self.dir / f"ckpt_{update:08d}.safetensors"
        data = _serialize(tensors, {**meta, "score": score})
        write_atomic(path, data)
        if score is not None and score > self.best_score:
            self.best_score = score
            write_atomic(self.dir / "best.safetensors", data)
        for old in checkpoints(self.dir.parent)[: -self.keep_last]:
            old.unlink()
        return path
