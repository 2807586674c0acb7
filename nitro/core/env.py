"""The functional environment protocol and same-step auto-reset.

An env is a stateless object holding its ``params`` (a frozen dataclass) and its single-env spaces.
Episode state is a dataclass of batched tensors (env axis first) passed in and out:

    state = env.reset(key, num_envs, device)
    state, obs, reward, terminated, truncated = env.step(state, action, key)

``env.step`` is the raw transition and never resets. ``autoreset_step`` below adds same-step auto-reset
with a ``where`` over the state tree and returns the pre-reset observation as ``final_obs`` so a
trainer can bootstrap truncated episodes. Branches are masks; nothing syncs with the host.
"""

from __future__ import annotations

from typing import Any, Generic, NamedTuple, TypeVar

import torch

from nitro.core import rng, tree
from nitro.core.spaces import Space

S = TypeVar("S")
P = TypeVar("P")


class Env(Generic[S, P]):
    """Base class of batched, functional envs. Subclasses set the class attributes and implement
    ``reset``, ``step`` and ``observe`` (and ``action_mask`` if some actions can be illegal)."""

    Params: type[P]
    """The params dataclass; ``nitro.make(id, **overrides)`` fills it."""
    observation_space: Space
    action_space: Space

    def __init__(self, params: P | None = None):
        self.params: P = params if params is not None else self.Params()

    def reset(self, key: torch.Tensor, num_envs: int, device: torch.device) -> S:
        """Fresh episode states for ``num_envs`` envs; ``key`` holds one stream per env ([N] int32)."""
        raise NotImplementedError

    def step(self, state: S, action: torch.Tensor, key: torch.Tensor):
        """One raw transition: (state, obs, reward, terminated, truncated), no reset; ``key`` [N] is
        there for stochastic dynamics."""
        raise NotImplementedError

    def observe(self, state: S) -> torch.Tensor:
        raise NotImplementedError

    def action_mask(self, state: S) -> torch.Tensor | None:
        """Legal actions as a bool tensor (Discrete: [N, n]; MultiDiscrete: [N, sum(nvec)]), or None."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.params})"


class Transition(NamedTuple):
    """What ``autoreset_step`` returns; tensors have the env axis first."""

    state: Any
    """State after the step, already reset where the episode ended."""
    obs: torch.Tensor
    """Observation of ``state``: the first observation of a new episode where one ended."""
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor
    """Observation before the reset (equals ``obs`` where the episode goes on); bootstrap truncated
    episodes from it."""


def autoreset_step(env: Env, state, action: torch.Tensor, key: torch.Tensor) -> Transition:
    """Step every env, then start a new episode in those that terminated or were truncated.

    ``key`` [N] holds each env's stream for this step (the caller advances it)."""
    k_step, k_reset = rng.split(key)
    next_state, final_obs, reward, terminated, truncated = env.step(state, action, k_step)
    done = terminated | truncated
    num_envs = done.shape[0]
    fresh = env.reset(k_reset, num_envs, done.device)
    next_state = tree.where(done, fresh, next_state)
    return Transition(next_state, env.observe(next_state), reward, terminated, truncated, final_obs)
