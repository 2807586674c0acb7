"""MountainCar-v0, batched; the dynamics, reward, limits and reset of Gymnasium 1.x
(``gymnasium/envs/classic_control/mountain_car.py``) with names taken from it."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nitro.core import rng
from nitro.core.env import Env
from nitro.core.spaces import Box, Discrete


@dataclass(frozen=True)
class MountainCarParams:
    min_position: float = -1.2
    max_position: float = 0.6
    max_speed: float = 0.07
    goal_position: float = 0.5
    goal_velocity: float = 0.0
    """The episode terminates once position >= goal_position and velocity >= goal_velocity."""
    force: float = 0.001
    """Acceleration per step of pushing left (action 0) or right (action 2)."""
    gravity: float = 0.0025
    reset_low: float = -0.6
    reset_high: float = -0.4
    """The car starts at rest with position uniform in [reset_low, reset_high]."""
    max_episode_steps: int = 200
    """Truncation limit (Gymnasium's TimeLimit for MountainCar-v0)."""


@dataclass
class MountainCarState:
    """Gymnasium's ``self.state`` (also the observation) split into [N] float32 fields, plus the step count
    of the TimeLimit wrapper."""

    position: torch.Tensor
    velocity: torch.Tensor
    elapsed: torch.Tensor
    """[N] int32: steps taken in the episode."""


class MountainCar(Env[MountainCarState, MountainCarParams]):
    Params = MountainCarParams
    action_space = Discrete(3)
    """0: accelerate left, 1: don't accelerate, 2: accelerate right."""

    def __init__(self, params: MountainCarParams | None = None):
        super().__init__(params)
        p = self.params
        self.observation_space = Box.of([p.min_position, -p.max_speed], [p.max_position, p.max_speed])

    def reset(self, key, num_envs, device):
        p = self.params
        position = rng.uniform(key, (num_envs,), p.reset_low, p.reset_high)
        velocity = torch.zeros_like(position)
        elapsed = torch.zeros(num_envs, dtype=torch.int32, device=position.device)
        return MountainCarState(position, velocity, elapsed)

    def step(self, state, action, key):
        p = self.params
        position, velocity = state.position, state.velocity

        push = (action - 1).to(velocity.dtype)
        velocity = velocity + push * p.force + torch.cos(3 * position) * (-p.gravity)
        velocity = velocity.clamp(-p.max_speed, p.max_speed)
        position = position + velocity
        position = position.clamp(p.min_position, p.max_position)
        # the left wall is inelastic: the car stops there
        velocity = torch.where((position == p.min_position) & (velocity < 0), 0.0, velocity)

        terminated = (position >= p.goal_position) & (velocity >= p.goal_velocity)
        reward = torch.full_like(position, -1.0)

        elapsed = state.elapsed + 1
        truncated = elapsed >= p.max_episode_steps
        next_state = MountainCarState(position, velocity, elapsed)
        return next_state, self.observe(next_state), reward, terminated, truncated

    def observe(self, state):
        return torch.stack([state.position, state.velocity], -1)

