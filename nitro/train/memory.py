"""Memory a training run needs, estimated before anything large is allocated, so a run too big for the
device is refused in one line at once instead of failing minutes later (or swapping the machine)."""

from __future__ import annotations

import math

import torch

from nitro.core import rng, tree
from nitro.core.spaces import Discrete, MultiDiscrete
from nitro.train.config import ConfigError, TrainConfig


def action_storage(space) -> tuple[tuple[int, ...], torch.dtype]:
    """(per-env shape, dtype) in which a rollout stores actions of ``space``."""
    if isinstance(space, Discrete):
        return (), torch.int64
    if isinstance(space, MultiDiscrete):
        return space.shape, torch.int64
    return space.shape, torch.float32


def estimate(cfg: TrainConfig, env) -> dict[str, int]:
    """Bytes of the large allocations of one process, by part (a lower bound: small tensors and the
    compiler's workspace come on top): rollout buffers, env state (with the auto-reset's copies), and the
    activations of one minibatch's update. A multi-agent env's rollouts hold up to one row per agent."""
    N, T = cfg.env.num_envs, cfg.ppo.num_steps
    rows = N * env.num_agents
    cpu = torch.device("cpu")
    probe = env.reset(rng.env_keys(rng.key(0, cpu), 1), 1, cpu)
    state = sum(x.element_size() * x.numel() for x in tree.leaves(probe))
    mask = env.action_mask(probe)
    a_shape, a_dtype = action_storage(env.action_space)
    obs = 4 * math.prod(env.observation_space.shape)
    # obs, action, mask; logprob, value, reward, advantage, return (fp32); done, first, acting (bool)
    per_row = obs + math.prod(a_shape) * a_dtype.itemsize + (0 if mask is None else mask.shape[-1]) + 4 * 5 + 2 \
        + (env.acting(probe) is not None)
    width = sum(cfg.policy.hidden) + 4 * cfg.policy.lstm
    trunks = 1 if cfg.policy.shared or cfg.policy.lstm else 2
    minibatch = T * rows // cfg.ppo.minibatches
    return {"rollout buffers": T * rows * per_row, "env state": 3 * N * state,
            "update": minibatch * (per_row + 3 * 4 * width * trunks)}


def available(device: torch.device) -> int | None:
    """Free bytes on ``device`` (CUDA: the driver's count; CPU: the kernel's MemAvailable), or None."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check(cfg: TrainConfig, env, device: torch.device) -> None:
    """Refuse, before allocating, a run whose large buffers alone would not fit in ``device``'s free memory."""
    need = estimate(cfg, env)
    free = available(device)
    total = sum(need.values())
    if free is not None and total > free:
        parts = ", ".join(f"{k} {_gb(v)}" for k, v in need.items())
        raise ConfigError(f"env.num_envs={cfg.env.num_envs} with ppo.num_steps={cfg.ppo.num_steps} needs about "
                          f"{_gb(total)} ({parts}) but {device} has {_gb(free)} free; lower env.num_envs or "
                          f"ppo.num_steps")


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"
