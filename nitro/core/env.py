"""The functional environment protocol and same-step auto-reset.

An env is a stateless object holding its ``params`` (a frozen dataclass) and its single-env spaces.
Episode state is a dataclass of batched tensors (env axis first) passed in and out:

    state = env.reset(key, num_envs, device)
    state, obs, reward, terminated, truncated = env.step(state, action, key)

``env.step`` is the raw transition and never resets. ``autoreset_step`` below adds same-step auto-reset
with a ``where`` over the state tree and returns the pre-reset observation as ``final_obs`` so a
trainer can bootstrap truncated episodes. Branches are masks; nothing syncs with the host.

Multi-agent envs set ``num_agents`` (A) and ``agent_team``. Their per-agent tensors are rows, env-major:
agent ``i`` of env ``e`` is row ``e * A + i``, so observations, actions, rewards and action masks are
``[N * A, ...]`` while the state, ``terminated`` and ``truncated`` stay per env (``[N]``: all of an env's
agents end together). Turn-based envs say which rows act each step with ``acting``. The spaces describe
one agent. ``nitro.core.agents`` has the helpers (per-row keys and flags, team checks).
"""

from __future__ import annotations

from typing import Any, Callable, Generic, NamedTuple, TypeVar

import torch

from nitro.core import host, rng, tree
from nitro.core.spaces import Space

S = TypeVar("S")
P = TypeVar("P")


class Env(Generic[S, P]):
    """Base class of batched, functional envs. Subclasses set the class attributes and implement
    ``reset``, ``step`` and ``observe`` (and ``action_mask`` if some actions can be illegal).

    Multi-agent envs also set ``num_agents`` and ``agent_team`` (as class attributes, or in ``__init__``
    where they depend on params), implement ``acting`` if turn-based, and may offer ``result`` (what
    ratings rank) and ``bots`` (scripted players)."""

    Params: type[P]
    """The params dataclass; ``nitro.make(id, **overrides)`` fills it."""
    observation_space: Space
    """One agent's observation space."""
    action_space: Space
    """One agent's action space."""
    num_agents: int = 1
    """Agents per env (A >= 1). Per-agent tensors have N * A rows, agent i of env e at row e * A + i."""
    agent_team: tuple[int, ...] = (0,)
    """The team of each seat (length A), numbered 0, 1, ... in order of first appearance; agents of one
    team play together. A free-for-all gives every seat its own team."""
    capturable: bool = True
    """Whether ``step`` is cheap to compile and to capture in a CUDA graph. Trainers and evaluations whose
    compile / graph setting is auto do both only where it is. An env whose step runs data-dependent loops
    to fixed counts when compiled or captured (far more launches than eager) sets False."""
    truncates: bool = True
    """Whether ``step`` may report truncated episodes (a time limit). Envs whose episodes end only by
    termination set False (``truncated`` is then always false), and trainers skip the bootstrap of
    truncated episodes: a value pass over every row at every step."""

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
        """Legal actions as a bool tensor (Discrete: [N * A, n]; MultiDiscrete: [N * A, sum(nvec)]), or
        None."""
        return None

    def acting(self, state: S) -> torch.Tensor | None:
        """[N * A] bool: the agents whose actions this step uses (turn-based games), or None when all
        act. The env ignores the other rows' actions; a trainer stores no transition for them, and their
        rewards accrue to the agent's next acting step."""
        return None

    def max_decisions(self, steps: int) -> int:
        """The most steps in which one agent acts (``acting``) within any ``steps`` consecutive steps,
        auto-resets included: a bound that a trainer packing each agent's decisions into fixed-size
        buffers (``ppo.decisions``) sizes them by. ``steps`` by default; turn-based envs give a tighter one."""
        return steps

    def result(self, state: S) -> torch.Tensor | None:
        """[N * A] float: each agent's standing in the game so far (goals, points, 1 for a win), read on
        the final state of an episode; ratings rank teams by its sum over their agents. None: teams are
        ranked by their episode return."""
        return None

    def episode_stats(self, state: S) -> dict[str, torch.Tensor]:
        """Per-agent statistics [N * A] of an episode, read on its final state by evaluations (e.g. a
        card game's bid accuracy); none by default."""
        return {}

    def bots(self) -> dict[str, Callable[[S, torch.Tensor], torch.Tensor]]:
        """Scripted players by name: ``bot(state, key [N]) -> actions [N * A]`` (a league's fixed pool
        members; only the rows the bot is given are used)."""
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.params})"


class Transition(NamedTuple):
    """What ``autoreset_step`` returns; tensors have the env axis first (per-agent ones: N * A rows)."""

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
    final_state: Any
    """State before the reset (equals ``state`` where the episode goes on), e.g. for ``env.result``."""


def autoreset_step(env: Env, state, action: torch.Tensor, key: torch.Tensor, lazy: bool = False) -> Transition:
    """Step every env, then start a new episode in those that terminated or were truncated.

    ``key`` [N] holds each env's stream for this step (the caller advances it). Multi-agent envs need
    nothing else: the state and the done flags are per env, observations and rewards per agent row.
    ``lazy`` skips the reset when no episode ended (the same result; it reads the done flags on the
    host, so it is for eager stepping on a CPU, where that costs nothing and the reset's kernels do)."""
    k_step, k_reset = rng.split(key)
    final_state, final_obs, reward, terminated, truncated = env.step(state, action, k_step)
    ended, cut = host.views(terminated, truncated)  # numpy views on small CPU batches (nitro.core.host)
    done = ended | cut
    if lazy and not bool(done.any()):  # sync-ok: only on a CPU (VecEnv)
        return Transition(final_state, final_obs, reward, terminated, truncated, final_obs, final_state)
    (done,) = host.tensors(done)
    num_envs = done.shape[0]
    fresh = env.reset(k_reset, num_envs, done.device)
    next_state = tree.where(done, fresh, final_state)
    return Transition(next_state, env.observe(next_state), reward, terminated, truncated, final_obs,
                      final_state)
