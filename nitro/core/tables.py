"""Constant tables made once per key (typically a device) and only read after: `device_tables`.

`functools.lru_cache` is no use for tensors that compiled code reads: Dynamo ignores its cache and
traces the wrapped function again, so every table is rebuilt from Python data inside the graph, a
host-to-device copy per call on a GPU (a sync, and an error inside CUDA graph capture). A plain dict
lookup is traced as what it is: the tables made earlier become the graph's constants. Build them once
outside compiled code (an env does so in ``reset``), then compiled steps only index them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def device_tables(build: Callable[..., T]) -> Callable[..., T]:
    """Cache ``build(*key)`` by its (hashable) arguments in a dict that compiled code reads."""
    made: dict[tuple, T] = {}

    @functools.wraps(build)
    def tables(*key):
        if key not in made:
            made[key] = build(*key)
        return made[key]

    tables.cache = made  # type: ignore[attr-defined]
    return tables
