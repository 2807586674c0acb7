"""What a training run streams into its run directory for whoever watches it (``nitro monitor``,
``nitro plot``): one metrics line per log (``metrics.jsonl``, written by `logger.MetricsWriter`) and
``status.json``, a heartbeat naming the trainer's process, its state and its progress.

Everything here runs at a log, after the log's one host sync: `PhaseTimer` records device events
inside the iteration (no sync; they may be captured in a CUDA graph) and is read at the log;
`device_stats` reads the allocator's host-side counters.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import time
from pathlib import Path

import torch

STATUS_FILE = "status.json"
METRICS_FILE = "metrics.jsonl"
STATES = ("running", "finished", "failed", "interrupted")
"""Trainer states in status.json; a watcher adds "stopped" for a running trainer whose process is gone."""


def write_json(path: Path, data: dict) -> None:
    """Replace ``path`` atomically (a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class RunStatus:
    """``status.json`` of a run: written when training starts, at every log and when it ends."""

    def __init__(self, run_dir: Path, info: dict):
        self.path = Path(run_dir) / STATUS_FILE
        now = time.time()
        self.data = {"state": "running", "pid": os.getpid(), "host": socket.gethostname(), "started": now,
                     "updated": now, "update": 0, "global_step": 0, **info}
        write_json(self.path, self.data)

    def beat(self, metrics: dict) -> None:
        self.data.update(updated=time.time(), update=metrics["update"], global_step=metrics["global_step"])
        write_json(self.path, self.data)

    def end(self, error: BaseException | None = None) -> None:
        """Record how training ended: finished, interrupted (Ctrl-C) or failed (with the error)."""
        if error is None:
            self.data["state"] = "finished"
        else:
            self.data["state"] = "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"
            self.data["error"] = f"{type(error).__name__}: {error}"
        self.data["updated"] = time.time()
        write_json(self.path, self.data)


class PhaseTimer:
    """Durations of the phases of one iteration (collect, learn), timed on the device without syncs.

    ``mark(i)`` records boundary i (0 before the first phase, len(names) after the last). On CUDA the
    marks are timing events created ``external`` so that a CUDA graph captures them as event-record
    nodes and every replay re-times its phases; on CPU they are host clock readings (CPU work runs in
    order). `read` gives the last iteration's seconds per phase; call it after a host sync."""

    def __init__(self, device: torch.device, names: tuple[str, ...] = ("collect", "learn")):
        self.names, self.cuda = names, device.type == "cuda"
        self.enabled = True
        if self.cuda:
            try:
                self.marks = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(len(names) + 1)]
            except TypeError:  # a PyTorch without external events: graphs could not re-time the phases
                self.marks, self.enabled = [], False
        else:
            self.times = [0.0] * (len(names) + 1)
        self.recorded = False

    def mark(self, i: int) -> None:
        if not self.enabled:
            return
        if self.cuda:
            self.marks[i].record()
        else:
            self.times[i] = time.perf_counter()
        self.recorded = True

    def read(self) -> dict[str, float]:
        """{phase: seconds} of the last timed iteration ({} before one ran). sync-ok: at a log."""
        if not (self.enabled and self.recorded):
            return {}
        if self.cuda:
            return {n: self.marks[i].elapsed_time(self.marks[i + 1]) / 1e3 for i, n in enumerate(self.names)}
        return {n: self.times[i + 1] - self.times[i] for i, n in enumerate(self.names)}

    def metrics(self, steps: int) -> dict[str, float]:
        """``perf/<phase>_seconds`` of the last iteration and ``perf/collect_sps``, the env steps per
        second of its rollout (policy inference included) for ``steps`` env steps per iteration."""
        phases = self.read()
        out = {f"perf/{name}_seconds": s for name, s in phases.items()}
        if phases.get("collect", 0.0) > 0:
            out["perf/collect_sps"] = steps / phases["collect"]
        return out


def device_stats(device: torch.device) -> dict[str, float]:
    """Memory (and utilisation, where NVML is installed) of the training device; host counters only."""
    gb = 1e9
    if device.type != "cuda":
        return {"cpu/max_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / gb}  # Linux: KiB
    out = {"gpu/mem_allocated_gb": torch.cuda.memory_allocated(device) / gb,
           "gpu/mem_reserved_gb": torch.cuda.memory_reserved(device) / gb,
           "gpu/mem_peak_gb": torch.cuda.max_memory_allocated(device) / gb,
           "gpu/mem_total_gb": torch.cuda.get_device_properties(device).total_memory / gb}
    try:
        out["gpu/utilization"] = float(torch.cuda.utilization(device))  # percent, through NVML (pynvml)
    except (ImportError, RuntimeError):  # no nvidia-ml-py installed, or NVML cannot see the device
        pass
    return out
