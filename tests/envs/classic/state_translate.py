"""Gymnasium env state <-> nitro state, per classic-control env (the field mapping of the parity tests).

Every nitro classic env keeps each entry of Gymnasium's ``self.state`` as a field [N] (float32 instead of
float64) named as Gymnasium's source names it, and the step count of Gymnasium's ``TimeLimit`` wrapper as
``elapsed`` [N]. ``Translation.columns`` lists those fields in Gymnasium's order; ``physics_of`` and
``make_state`` convert between a state and its ``physics`` [N, D] matrix (columns in that order). Gymnasium
envs here are the ``TimeLimit``-wrapped ones that ``gymnasium.make(id)`` returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import gymnasium
import numpy as np
import torch

from nitro.envs.classic.acrobot import AcrobotState
from nitro.envs.classic.cartpole import CartPoleState
from nitro.envs.classic.continuous_mountain_car import Continuous_MountainCarState
from nitro.envs.classic.mountain_car import MountainCarState
from nitro.envs.classic.pendulum import PendulumState


def _margin_any(*fs: float) -> float:
    """How far ``any(f > 0 for f in fs)`` is from flipping (state units)."""
    true = [f for f in fs if f > 0]
    return max(true) if true else min(-f for f in fs)


def _margin_all(*fs: float) -> float:
    """How far ``all(f >= 0 for f in fs)`` is from flipping (state units)."""
    false = [f for f in fs if f < 0]
    return max(-f for f in false) if false else min(fs)


def _cartpole_margin(u, s) -> float:
    x, _, theta, _ = s
    return _margin_any(abs(x) - u.x_threshold, abs(theta) - u.theta_threshold_radians)


def _mountain_car_margin(u, s) -> float:
    position, velocity = s
    return _margin_all(position - u.goal_position, velocity - u.goal_velocity)


def _acrobot_margin(u, s) -> float:
    return abs(-math.cos(s[0]) - math.cos(s[1] + s[0]) - 1.0)


@dataclass(frozen=True)
class Translation:
    state_cls: type
    columns: tuple[str, ...]
    """The state's field names = the entries of Gymnasium's ``self.state``, in its order (the columns of
    ``physics_of``)."""
    termination_margin: Callable[[object, np.ndarray], float]
    """Distance of a Gymnasium state from its env's termination boundary (inf if it never terminates)."""
    termination_bonus: float
    """How much the step reward rises when the same step also terminates (Gymnasium's reward code)."""


TRANSLATIONS: dict[str, Translation] = {
    "CartPole-v1": Translation(CartPoleState, ("x", "x_dot", "theta", "theta_dot"), _cartpole_margin, 0.0),
    "MountainCar-v0": Translation(MountainCarState, ("position", "velocity"), _mountain_car_margin, 0.0),
    "MountainCarContinuous-v0": Translation(
        Continuous_MountainCarState, ("position", "velocity"), _mountain_car_margin, 100.0),
    "Pendulum-v1": Translation(PendulumState, ("th", "thdot"), lambda u, s: math.inf, 0.0),
    "Acrobot-v1": Translation(AcrobotState, ("theta1", "theta2", "dtheta1", "dtheta2"), _acrobot_margin, 1.0),
}


def physics_of(state) -> torch.Tensor:
    """The state's Gymnasium fields as one [N, D] matrix, columns in Gymnasium's order."""
    columns = next(t.columns for t in TRANSLATIONS.values() if isinstance(state, t.state_cls))
    return torch.stack([getattr(state, c) for c in columns], -1)


def make_state(env_id: str, physics: torch.Tensor, elapsed: torch.Tensor):
    """The nitro state of ``env_id`` whose Gymnasium fields are the columns of ``physics`` [N, D]."""
    t = TRANSLATIONS[env_id]
    assert physics.shape[-1] == len(t.columns)
    return t.state_cls(**{c: physics[:, j].contiguous() for j, c in enumerate(t.columns)}, elapsed=elapsed)


def _time_limit(env: gymnasium.Env) -> gymnasium.wrappers.TimeLimit:
    assert isinstance(env, gymnasium.wrappers.TimeLimit), f"expected gymnasium.make's TimeLimit, got {env}"
    return env


def gym_to_nitro(env_id: str, envs: list[gymnasium.Env], device="cpu"):
    """One nitro state whose row ``i`` is Gymnasium env ``envs[i]``'s state."""
    t = TRANSLATIONS[env_id]
    physics = np.stack([np.asarray(e.unwrapped.state, dtype=np.float64) for e in envs])
    assert physics.shape[1] == len(t.columns)
    elapsed = np.array([_time_limit(e)._elapsed_steps for e in envs], dtype=np.int32)
    return make_state(env_id, torch.as_tensor(physics, dtype=torch.float32, device=device),
                      torch.as_tensor(elapsed, device=device))


def nitro_to_gym(env_id: str, state, envs: list[gymnasium.Env]) -> None:
    """Write row ``i`` of the nitro ``state`` into Gymnasium env ``envs[i]`` (as float64, like Gymnasium)."""
    physics = physics_of(state).detach().cpu().double().numpy()
    elapsed = state.elapsed.cpu().numpy()
    for i, e in enumerate(envs):
        e.unwrapped.state = physics[i].copy()
        _time_limit(e)._elapsed_steps = int(elapsed[i])
        if hasattr(e.unwrapped, "steps_beyond_terminated"):  # CartPole's "stepped after termination" guard
            e.unwrapped.steps_beyond_terminated = None


def termination_margin(env_id: str, env: gymnasium.Env) -> float:
    """Distance of Gymnasium env ``env``'s current state from its termination boundary."""
    u = env.unwrapped
    return TRANSLATIONS[env_id].termination_margin(u, np.asarray(u.state, dtype=np.float64))
