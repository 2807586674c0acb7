"""Adapters from nitro envs to other RL APIs: Gymnasium's ``VectorEnv`` and Stable-Baselines3's ``VecEnv``
(single-agent envs), PettingZoo's ``ParallelEnv`` (multi-agent envs), both with the ``adapters`` extra
(``pip install "nitro-rl[adapters]"``), and RLGym v2's ``TransitionEngine`` over the soccar arena (the
``soccar`` extra).

Each adapter imports its framework only when first used.

    from nitro.adapters import GymnasiumVectorEnv, NitroEngine, PettingZooParallelEnv, SB3VecEnv
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "GymnasiumVectorEnv": "nitro.adapters.gymnasium",
    "SB3VecEnv": "nitro.adapters.sb3",
    "PettingZooParallelEnv": "nitro.adapters.pettingzoo",
    "NitroEngine": "nitro.adapters.rlgym",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'nitro.adapters' has no attribute {name!r}")
