"""What the adapters share: building the nitro handle and turning foreign actions into tensors."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from nitro.core.registry import make
from nitro.core.spaces import Box, Space
from nitro.core.vector import VecEnv


def as_vec_env(env: str | VecEnv, num_envs: int | None, device, seed: int | None,
               params: dict[str, Any], multi_agent: bool = False) -> VecEnv:
    """``env`` itself if it is a nitro ``VecEnv``, else ``nitro.make(env, ...)``; single-agent adapters
    refuse multi-agent envs and the multi-agent one single-agent envs."""
    venv = _vec_env(env, num_envs, device, seed, params)
    if multi_agent != (venv.num_agents > 1):
        name = type(venv.env).__name__
        if multi_agent:
            raise ValueError(f"{name} has one agent per env; use nitro.adapters.GymnasiumVectorEnv or SB3VecEnv")
        raise ValueError(f"{name} has {venv.num_agents} agents per env; single-agent adapters cannot drive it: "
                         "use nitro.adapters.PettingZooParallelEnv (or train it with nitro train)")
    return venv


def _vec_env(env: str | VecEnv, num_envs: int | None, device, seed: int | None, params: dict[str, Any]) -> VecEnv:
    if isinstance(env, VecEnv):
        if params:
            raise TypeError(f"params {sorted(params)} apply only when env is an id; pass them to nitro.make")
        if num_envs is not None and num_envs != env.num_envs:
            raise ValueError(f"num_envs={num_envs} but the given VecEnv has {env.num_envs} envs")
        if device is not None and torch.device(device) != env.device:
            raise ValueError(f"device={device!r} but the given VecEnv runs on {env.device}")
        if seed is not None:
            raise ValueError("seed applies only when env is an id; "
                             "seed a given VecEnv through reset(seed=...)")
        return env
    if isinstance(env, str):
        return make(env, num_envs=1 if num_envs is None else num_envs, device=device,
                    seed=0 if seed is None else seed, **params)
    raise TypeError(f"env must be a nitro env id or a nitro.VecEnv, got {type(env).__name__}")


def to_actions(actions: Any, space: Space, device: torch.device) -> torch.Tensor:
    """A batch of actions as a tensor of the space's dtype family. Numpy arrays and lists are copied to
    ``device``; tensors keep theirs (one on the wrong device is an error, raised by the space's check)."""
    if not isinstance(actions, torch.Tensor):
        actions = torch.as_tensor(np.asarray(actions), device=device)
    integer = not actions.dtype.is_floating_point and actions.dtype != torch.bool
    if isinstance(space, Box):
        if integer or (actions.dtype.is_floating_point and actions.dtype != space.dtype):
            actions = actions.to(space.dtype)
    elif integer and actions.dtype != torch.int64:
        actions = actions.to(torch.int64)
    return actions


def to_numpy(x: torch.Tensor, copy: bool = True) -> np.ndarray:
    """A numpy copy (never a view of env state, which nitro may hand out as the observation); with
    ``copy=False`` a CPU tensor's own memory, for arrays that are read and not handed on."""
    if x.device.type == "cpu" and not x.requires_grad:
        return x.numpy().copy() if copy else x.numpy()  # no kernel: what small CPU batches pay for
    return x.detach().to("cpu", copy=True).numpy()
