"""Checkpoints: safetensors files written atomically, the last K and the best kept.

A checkpoint is ``ckpt_<update>.safetensors`` holding named tensors (policy, optimizer, normalizers,
env state, counters); its metadata (config, counters, score) is stored in the safetensors header.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, safe_open, save_file

_NAME = re.compile(r"ckpt_(\d+)\.safetensors$")


def save(path: Path, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    """Write ``tensors`` and ``meta`` to ``path`` atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    cpu = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
    save_file(cpu, str(tmp), metadata={"nitro": json.dumps(meta)})
    os.replace(tmp, path)


def load(path: Path, device: torch.device | str = "cpu") -> tuple[dict[str, torch.Tensor], dict]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    with safe_open(str(path), framework="pt") as f:
        meta = json.loads(f.metadata()["nitro"])
    return load_file(str(path), device=str(device)), meta


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


def best(run_dir: Path) -> Path:
    path = Path(run_dir) / "checkpoints" / "best.safetensors"
    return path if path.exists() else latest(run_dir)


class Keeper:
    """Saves checkpoints into ``run_dir/checkpoints``, keeping the last ``keep_last`` and the best."""

    def __init__(self, run_dir: Path, keep_last: int):
        self.dir = Path(run_dir) / "checkpoints"
        self.keep_last = max(1, keep_last)
        self.best_score = -float("inf")
        best_path = self.dir / "best.safetensors"
        if best_path.exists():
            self.best_score = load_meta(best_path).get("score", -float("inf")) or -float("inf")

    def save(self, update: int, tensors: dict[str, torch.Tensor], meta: dict, score: float | None) -> Path:
        path = self.dir / f"ckpt_{update:08d}.safetensors"
        save(path, tensors, {**meta, "score": score})
        if score is not None and score > self.best_score:
            self.best_score = score
            tmp = self.dir / "best.tmp"
            shutil.copyfile(path, tmp)
            os.replace(tmp, self.dir / "best.safetensors")
        for old in checkpoints(self.dir.parent)[: -self.keep_last]:
            old.unlink()
        return path


def load_meta(path: Path) -> dict:
    with safe_open(str(path), framework="pt") as f:
        return json.loads(f.metadata()["nitro"])
