"""Stopping a run cleanly: the first Ctrl-C or SIGTERM becomes a request that the training loop honours
after the current update (it saves a checkpoint, then raises ``TrainingInterrupted``); a second one acts
as it would have without us (Ctrl-C raises ``KeyboardInterrupt`` at once)."""

from __future__ import annotations

import signal
import threading
from typing import Any

from nitro.core.errors import NitroError
from nitro.train import dist

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(NitroError):
    """Ctrl-C or SIGTERM stopped training (after saving a checkpoint where the run has a directory)."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


class StopSignals:
    """Between ``install`` and ``restore``, records the first SIGINT / SIGTERM instead of dying of it.
    Handlers are installed only in the main thread (Python delivers signals there)."""

    def __init__(self):
        self.signum: int | None = None
        self.previous: dict[int, Any] = {}

    def install(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        self.signum = signum
        for sig, handler in self.previous.items():  # a second signal acts as it would have
            signal.signal(sig, handler)

    def restore(self) -> None:
        """Put the previous handlers back."""
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def agreed(self, d: dist.Dist, logged: bool) -> int | None:
        """The signal to stop on after this update, if any. The processes of a torchrun job agree at
        logs (one all-reduce where the log already synchronizes), so they all stop after the same update."""
        if not d.enabled:
            return self.signum
        if not logged:
            return None
        return dist.max_over_ranks(self.signum or 0, d) or None
