"""Watching training and games: the metrics stream of a run, the terminal dashboard, doctor, plots,
soccar replays and live viewers (docs/MONITOR.md). The dashboard needs textual and the pictures
matplotlib: the ``monitor`` extra."""

from __future__ import annotations

import importlib.util

VIEWERS = ("rlviser", "rocketsimvis")
"""The live viewers nitro streams to (`nitro.monitor.live`)."""


def require(module: str, what: str) -> None:
    """Raise a one-line error naming the extra to install if ``module`` is missing."""
    if importlib.util.find_spec(module) is None:
        raise ValueError(f"{what} needs {module}, which is not installed: pip install 'nitro-rl[monitor]'")
