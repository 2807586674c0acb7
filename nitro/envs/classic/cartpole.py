"""CartPole-v1, batched; the dynamics, reward, limits and reset of Gymnasium 1.x
(``gymnasium/envs/classic_control/cartpole.py``) with names taken from it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from nitro.core import host, rng
from nitro.core.env import Env
from nitro.core.spaces import Box, Discrete


@dataclass(frozen=True)
class CartPoleParams:
    gravity: float = 9.8
    masscart: float = 1.0
    masspole: float = 0.1
    length: float = 0.5
    """Half the pole's length (m)."""
    force_mag: float = 10.0
    tau: float = 0.02
    """Seconds between state updates."""
    kinematics_integrator: str = "euler"
    """"euler" (Gymnasium's default) or "semi-implicit euler"."""
    theta_threshold_radians: float = 12 * 2 * math.pi / 360
    x_threshold: float = 2.4
    reset_low: float = -0.05
    reset_high: float = 0.05
    """Each state variable starts uniform in [reset_low, reset_high]."""
    sutton_barto_reward: bool = False
    """Reward 0 per step and -1 on failure instead of 1 per step."""
    max_episode_steps: int = 500
    """Truncation limit (Gymnasium's TimeLimit for CartPole-v1)."""

    def __post_init__(self):
        if self.kinematics_integrator not in ("euler", "semi-implicit euler"):
            raise ValueError(f"kinematics_integrator must be 'euler' or 'semi-implicit euler', "
                             f"got {self.kinematics_integrator!r}")


@dataclass
class CartPoleState:
    """Gymnasium's ``self.state`` split into [N] float32 fields (one coalesced stream each), plus the
    step count of the TimeLimit wrapper."""

    x: torch.Tensor
    x_dot: torch.Tensor
    theta: torch.Tensor
    theta_dot: torch.Tensor
    elapsed: torch.Tensor
    """[N] int32: steps taken in the episode."""


class CartPole(Env[CartPoleState, CartPoleParams]):
    Params = CartPoleParams
    action_space = Discrete(2)

    def __init__(self, params: CartPoleParams | None = None):
        super().__init__(params)
        p = self.params
        high = (p.x_threshold * 2, math.inf, p.theta_threshold_radians * 2, math.inf)
        self.observation_space = Box.of([-h for h in high], high)

    def reset(self, key, num_envs, device):
        p = self.params
        keys = torch.stack(rng.split(key, 4))  # one draw for the four variables: the same numbers as four
        x, x_dot, theta, theta_dot = rng.uniform(keys, (4, num_envs), p.reset_low, p.reset_high).unbind(0)
        return CartPoleState(x, x_dot, theta, theta_dot, torch.zeros(num_envs, dtype=torch.int32, device=x.device))

    def step(self, state, action, key):
        p = self.params
        total_mass = p.masspole + p.masscart
        polemass_length = p.masspole * p.length
        costheta, sintheta = torch.cos(state.theta), torch.sin(state.theta)
        # operators only from here on: on small CPU batches they run on numpy views (nitro.core.host)
        x, x_dot, theta, theta_dot, elapsed, action, costheta, sintheta = host.views(
            state.x, state.x_dot, state.theta, state.theta_dot, state.elapsed, action, costheta, sintheta)
        force = host.where(action == 1, p.force_mag, -p.force_mag)

        temp = (force + polemass_length * theta_dot**2 * sintheta) / total_mass
        thetaacc = (p.gravity * sintheta - costheta * temp) / (
            p.length * (4.0 / 3.0 - p.masspole * costheta**2 / total_mass)
        )
        xacc = temp - polemass_length * thetaacc * costheta / total_mass

        if p.kinematics_integrator == "euler":
            x, x_dot = x + p.tau * x_dot, x_dot + p.tau * xacc
            theta, theta_dot = theta + p.tau * theta_dot, theta_dot + p.tau * thetaacc
        else:
            x_dot = x_dot + p.tau * xacc
            x = x + p.tau * x_dot
            theta_dot = theta_dot + p.tau * thetaacc
            theta = theta + p.tau * theta_dot

        elapsed = elapsed + 1
        terminated = (abs(x) > p.x_threshold) | (abs(theta) > p.theta_threshold_radians)
        truncated = elapsed >= p.max_episode_steps
        # Gymnasium pays the step reward on the failing step too; only Sutton-Barto's variant differs.
        on_failure, otherwise = (-1.0, 0.0) if p.sutton_barto_reward else (1.0, 1.0)
        reward = host.where(terminated, on_failure, otherwise)
        obs = host.stack((x, x_dot, theta, theta_dot), -1)  # `observe`
        x, x_dot, theta, theta_dot, elapsed, obs, reward, terminated, truncated = host.tensors(
            x, x_dot, theta, theta_dot, elapsed, obs, reward, terminated, truncated)
        return CartPoleState(x, x_dot, theta, theta_dot, elapsed), obs, reward, terminated, truncated

    def observe(self, state):
        return torch.stack([state.x, state.x_dot, state.theta, state.theta_dot], -1)
