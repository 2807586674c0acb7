"""Acrobot-v1, batched; the dynamics (RK4 over ``_dsdt``, "book" equations), reward, limits and reset of
Gymnasium 1.x (``gymnasium/envs/classic_control/acrobot.py``) with names taken from it (its upper-case
class attributes become lower-case params fields)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from nitro.core import rng
from nitro.core.env import Env
from nitro.core.spaces import Box, Discrete

pi = math.pi


@dataclass(frozen=True)
class AcrobotParams:
    dt: float = 0.2
    """Integration timestep (s): one RK4 step per env step."""
    link_length_1: float = 1.0
    """(m); the second link's length only matters for rendering, as in Gymnasium."""
    link_length_2: float = 1.0
    link_mass_1: float = 1.0
    """(kg)"""
    link_mass_2: float = 1.0
    link_com_pos_1: float = 0.5
    """Position of the centre of mass of link 1 along it (m)."""
    link_com_pos_2: float = 0.5
    link_moi: float = 1.0
    """Moment of inertia of both links."""
    max_vel_1: float = 4 * pi
    """dtheta1 is bounded to [-max_vel_1, max_vel_1] (rad/s) after each step."""
    max_vel_2: float = 9 * pi
    avail_torque: tuple[float, float, float] = (-1.0, 0.0, 1.0)
    """Torque on the joint between the links for actions 0, 1, 2."""
    torque_noise_max: float = 0.0
    """Uniform noise in [-torque_noise_max, torque_noise_max] added to the torque (0, Gymnasium's default:
    none)."""
    book_or_nips: str = "book"
    """Dynamics equations: "book" (Sutton & Barto, Gymnasium's default) or "nips"."""
    g: float = 9.8
    """Gravity (m/s^2); a local in Gymnasium's ``_dsdt``."""
    reset_low: float = -0.1
    reset_high: float = 0.1
    """Each state variable starts uniform in [reset_low, reset_high]."""
    max_episode_steps: int = 500
    """Truncation limit (Gymnasium's TimeLimit for Acrobot-v1)."""

    def __post_init__(self):
        if self.book_or_nips not in ("book", "nips"):
            raise ValueError(f"book_or_nips must be 'book' or 'nips', got {self.book_or_nips!r}")
        if len(self.avail_torque) != 3:
            raise ValueError(f"avail_torque must hold 3 torques (actions 0, 1, 2), got {self.avail_torque!r}")


@dataclass
class AcrobotState:
    """Gymnasium's ``self.state`` split into [N] float32 fields, plus the step count of the TimeLimit
    wrapper."""

    theta1: torch.Tensor
    """(rad) wrapped to [-pi, pi]."""
    theta2: torch.Tensor
    """(rad) wrapped to [-pi, pi]."""
    dtheta1: torch.Tensor
    """(rad/s)"""
    dtheta2: torch.Tensor
    """(rad/s)"""
    elapsed: torch.Tensor
    """[N] int32: steps taken in the episode."""


def wrap(x: torch.Tensor, m: float, M: float) -> torch.Tensor:
    """Gymnasium's ``wrap``: add or subtract ``M - m`` until ``x`` lies in [m, M] (its loops in closed
    form)."""
    diff = M - m
    x = torch.where(x > M, x - diff * torch.ceil((x - M) / diff), x)
    return torch.where(x < m, x + diff * torch.ceil((m - x) / diff), x)


def bound(x: torch.Tensor, m: float, M: float) -> torch.Tensor:
    """Gymnasium's ``bound``: ``min(max(x, m), M)``."""
    return x.clamp(m, M)


Fields = tuple[torch.Tensor, ...]


def _axpy(y: Fields, a: float, k: Fields) -> Fields:
    """``y + a * k``, component by component."""
    return tuple(yi + a * ki for yi, ki in zip(y, k))


def rk4(derivs, y0: Fields, t: tuple[float, ...]) -> Fields:
    """Gymnasium's ``rk4`` over a batch: integrate ``y0`` (a tuple of [N] components) through the times
    ``t``; the last value's first 4 components (the torque component is carried unchanged)."""
    for this, nxt in zip(t[:-1], t[1:]):
        dt = nxt - this
        dt2 = dt / 2.0
        k1 = derivs(y0)
        k2 = derivs(_axpy(y0, dt2, k1))
        k3 = derivs(_axpy(y0, dt2, k2))
        k4 = derivs(_axpy(y0, dt, k3))
        y0 = tuple(y + dt / 6.0 * (a + 2 * b + 2 * c + d) for y, a, b, c, d in zip(y0, k1, k2, k3, k4))
    return y0[:4]


class Acrobot(Env[AcrobotState, AcrobotParams]):
    Params = AcrobotParams
    action_space = Discrete(3)
    """0, 1, 2: apply avail_torque[action] to the joint between the links."""

    def __init__(self, params: AcrobotParams | None = None):
        super().__init__(params)
        p = self.params
        high = (1.0, 1.0, 1.0, 1.0, p.max_vel_1, p.max_vel_2)
        self.observation_space = Box.of([-h for h in high], high)

    def reset(self, key, num_envs, device):
        p = self.params
        theta1, theta2, dtheta1, dtheta2 = (rng.uniform(k, (num_envs,), p.reset_low, p.reset_high)
                                            for k in rng.split(key, 4))
        elapsed = torch.zeros(num_envs, dtype=torch.int32, device=theta1.device)
        return AcrobotState(theta1, theta2, dtheta1, dtheta2, elapsed)

    def step(self, state, action, key):
        p = self.params
        s = (state.theta1, state.theta2, state.dtheta1, state.dtheta2)
        t0, t1, t2 = p.avail_torque
        torque = torch.where(action == 0, t0, torch.where(action == 1, t1, t2)).to(state.theta1.dtype)
        if p.torque_noise_max > 0:
            torque = torque + rng.uniform(key, torque.shape, -p.torque_noise_max, p.torque_noise_max)

        # augment the state with the torque so it can be passed to _dsdt
        s_augmented = (*s, torque)
        ns = rk4(self._dsdt, s_augmented, (0.0, p.dt))
        next_state = AcrobotState(
            wrap(ns[0], -pi, pi),
            wrap(ns[1], -pi, pi),
            bound(ns[2], -p.max_vel_1, p.max_vel_1),
            bound(ns[3], -p.max_vel_2, p.max_vel_2),
            state.elapsed + 1,
        )
        terminated = self._terminal(next_state)
        reward = torch.where(terminated, 0.0, -1.0)
        truncated = next_state.elapsed >= p.max_episode_steps
        return next_state, self.observe(next_state), reward, terminated, truncated

    def observe(self, state):
        s0, s1, s2, s3 = state.theta1, state.theta2, state.dtheta1, state.dtheta2
        return torch.stack([torch.cos(s0), torch.sin(s0), torch.cos(s1), torch.sin(s1), s2, s3], -1)

    def _terminal(self, state) -> torch.Tensor:
        """The free end is more than one link length above the pivot."""
        s0, s1 = state.theta1, state.theta2
        return -torch.cos(s0) - torch.cos(s1 + s0) > 1.0

    def _dsdt(self, s_augmented: Fields) -> Fields:
        """Time derivative of (theta1, theta2, dtheta1, dtheta2, torque), each [N]."""
        p = self.params
        m1, m2 = p.link_mass_1, p.link_mass_2
        l1 = p.link_length_1
        lc1, lc2 = p.link_com_pos_1, p.link_com_pos_2
        I1 = I2 = p.link_moi
        g = p.g
        theta1, theta2, dtheta1, dtheta2, a = s_augmented
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * torch.cos(theta2)) + I1 + I2
        d2 = m2 * (lc2**2 + l1 * lc2 * torch.cos(theta2)) + I2
        phi2 = m2 * lc2 * g * torch.cos(theta1 + theta2 - pi / 2.0)
        phi1 = (
            -m2 * l1 * lc2 * dtheta2**2 * torch.sin(theta2)
            - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * torch.sin(theta2)
            + (m1 * lc1 + m2 * l1) * g * torch.cos(theta1 - pi / 2)
            + phi2
        )
        if p.book_or_nips == "nips":
            # consistent with the description in the paper
            ddtheta2 = (a + d2 / d1 * phi1 - phi2) / (m2 * lc2**2 + I2 - d2**2 / d1)
        else:
            # consistent with the java implementation and the book
            ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * torch.sin(theta2) - phi2) / (
                m2 * lc2**2 + I2 - d2**2 / d1
            )
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return dtheta1, dtheta2, ddtheta1, ddtheta2, torch.zeros_like(a)
