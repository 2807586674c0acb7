"""MountainCarContinuous-v0, batched; the dynamics, reward, limits and reset of Gymnasium 1.x
(``gymnasium/envs/classic_control/continuous_mountain_car.py``) with names taken from it."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nitro.core import rng
from nitro.core.env import Env
from nitro.core.spaces import Box


@dataclass(frozen=True)
class Continuous_MountainCarParams:
    min_action: float = -1.0
    max_action: float = 1.0
    """The force is the action clipped to [min_action, max_action]."""
    min_position: float = -1.2
    max_position: float = 0.6
    max_speed: float = 0.07
    goal_position: float = 0.45
    """0.45 as in Gymnasium (0.5 in the discrete MountainCar-v0)."""
    goal_velocity: float = 0.0
    """The episode terminates once position >= goal_position and velocity >= goal_velocity."""
    power: float = 0.0015
    """Acceleration per unit of force."""
    gravity: float = 0.0025
    """The literal 0.0025 of Gymnasium's step (named as in MountainCar-v0)."""
    reset_low: float = -0.6
    reset_high: float = -0.4
    """The car starts at rest with position uniform in [reset_low, reset_high]."""
    max_episode_steps: int = 999
    """Truncation limit (Gymnasium's TimeLimit for MountainCarContinuous-v0)."""


@dataclass
class Continuous_MountainCarState:
    """Gymnasium's ``self.state`` (also the observation) split into [N] float32 fields, plus the step count
    of the TimeLimit wrapper."""

    position: torch.Tensor
    velocity: torch.Tensor
    elapsed: torch.Tensor
    """[N] int32: steps taken in the episode."""


class Continuous_MountainCar(Env[Continuous_MountainCarState, Continuous_MountainCarParams]):
    Params = Continuous_MountainCarParams

    def __init__(self, params: Continuous_MountainCarParams | None = None):
        super().__init__(params)
        p = self.params
        self.action_space = Box.of([p.min_action], [p.max_action])
        self.observation_space = Box.of([p.min_position, -p.max_speed], [p.max_position, p.max_speed])

    def reset(self, key, num_envs, device):
        p = self.params
        position = rng.uniform(key, (num_envs,), p.reset_low, p.reset_high)
        velocity = torch.zeros_like(position)
        elapsed = torch.zeros(num_envs, dtype=torch.int32, device=position.device)
        return Continuous_MountainCarState(position, velocity, elapsed)

    def step(self, state, action, key):
        p = self.params
        position, velocity = state.position, state.velocity
        action = action[:, 0].to(velocity.dtype)

        force = action.clamp(p.min_action, p.max_action)
        velocity = velocity + force * p.power - p.gravity * torch.cos(3 * position)
        velocity = velocity.clamp(-p.max_speed, p.max_speed)
        position = position + velocity
        position = position.clamp(p.min_position, p.max_position)
        # the left wall is inelastic: the car stops there
        velocity = torch.where((position == p.min_position) & (velocity < 0), 0.0, velocity)

        terminated = (position >= p.goal_position) & (velocity >= p.goal_velocity)
        # Gymnasium charges the action cost on the unclipped action
        reward = torch.where(terminated, 100.0, 0.0) - action**2 * 0.1

        elapsed = state.elapsed + 1
        truncated = elapsed >= p.max_episode_steps
        next_state = Continuous_MountainCarState(position, velocity, elapsed)
        return next_state, self.observe(next_state), reward, terminated, truncated

    def observe(self, state):
        return torch.stack([state.position, state.velocity], -1)
