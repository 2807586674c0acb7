"""Pendulum-v1, batched; the dynamics, reward, limits and reset of Gymnasium 1.x
(``gymnasium/envs/classic_control/pendulum.py``) with names taken from it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from nitro.core import rng
from nitro.core.env import Env
from nitro.core.spaces import Box


@dataclass(frozen=True)
class PendulumParams:
    max_speed: float = 8.0
    """Angular velocity limit (rad/s); thdot is clipped to it every step."""
    max_torque: float = 2.0
    """The torque is the action clipped to [-max_torque, max_torque] (N m)."""
    dt: float = 0.05
    """Seconds per step."""
    g: float = 10.0
    m: float = 1.0
    l: float = 1.0  # noqa: E741  (Gymnasium's name)
    x_init: float = math.pi
    y_init: float = 1.0
    """The episode starts with th uniform in [-x_init, x_init] and thdot in [-y_init, y_init]
    (Gymnasium's DEFAULT_X, DEFAULT_Y reset bounds)."""
    max_episode_steps: int = 200
    """Truncation limit (Gymnasium's TimeLimit for Pendulum-v1)."""


@dataclass
class PendulumState:
    """Gymnasium's ``self.state`` split into [N] float32 fields, plus the step count of the TimeLimit
    wrapper."""

    th: torch.Tensor
    """(rad) not wrapped, as in Gymnasium."""
    thdot: torch.Tensor
    """(rad/s)"""
    elapsed: torch.Tensor
    """[N] int32: steps taken in the episode."""


def angle_normalize(x: torch.Tensor) -> torch.Tensor:
    """The angle in [-pi, pi) (Python's float ``%`` is ``torch.remainder``)."""
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


class Pendulum(Env[PendulumState, PendulumParams]):
    Params = PendulumParams

    def __init__(self, params: PendulumParams | None = None):
        super().__init__(params)
        p = self.params
        self.action_space = Box.of([-p.max_torque], [p.max_torque])
        self.observation_space = Box.of([-1.0, -1.0, -p.max_speed], [1.0, 1.0, p.max_speed])

    def reset(self, key, num_envs, device):
        p = self.params
        k_th, k_thdot = rng.split(key, 2)
        th = rng.uniform(k_th, (num_envs,), -p.x_init, p.x_init)
        thdot = rng.uniform(k_thdot, (num_envs,), -p.y_init, p.y_init)
        return PendulumState(th, thdot, torch.zeros(num_envs, dtype=torch.int32, device=th.device))

    def step(self, state, action, key):
        p = self.params
        th, thdot = state.th, state.thdot

        u = action[:, 0].to(th.dtype).clamp(-p.max_torque, p.max_torque)
        costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * (u**2)

        newthdot = thdot + (3 * p.g / (2 * p.l) * torch.sin(th) + 3.0 / (p.m * p.l**2) * u) * p.dt
        newthdot = newthdot.clamp(-p.max_speed, p.max_speed)
        newth = th + newthdot * p.dt

        elapsed = state.elapsed + 1
        terminated = torch.zeros_like(elapsed, dtype=torch.bool)
        truncated = elapsed >= p.max_episode_steps
        next_state = PendulumState(newth, newthdot, elapsed)
        return next_state, self.observe(next_state), -costs, terminated, truncated

    def observe(self, state):
        return torch.stack([torch.cos(state.th), torch.sin(state.th), state.thdot], -1)
