"""The stateful handle users hold: ``reset()`` and ``step(actions)`` over a functional env.

It owns the batched state and the random key, checks actions (shape, dtype, device, range, NaN),
and returns tensors on the env's device. Nothing in ``step`` waits on the host. ``mode`` picks how a
step runs: "eager" (plain PyTorch, the default), "compile" (``torch.compile``), "graph" (compiled and
replayed from a CUDA graph: one launch per call, the fast path for Python loops on a GPU) or "auto"
(graph on CUDA, eager elsewhere); all give the same results (``nitro.core.fast.HandleSteps``). For a multi-agent env
actions, observations, rewards and masks have ``num_envs * num_agents`` rows (env-major) and the done
flags ``num_envs``.
"""

from __future__ import annotations

import torch

from nitro.core import agents, fast, rng
from nitro.core.env import Env, autoreset_step
from nitro.core.errors import as_count


class VecEnv:
    """``num_envs`` copies of ``env`` stepped together on ``device``, reset in the same step."""

    def __init__(self, env: Env, num_envs: int, device: torch.device | str | None = None,
                 seed: int = 0, check_actions: bool = True, mode: str = "eager"):
        num_envs = as_count("num_envs", num_envs)
        agents.check(env)
        self.env = env
        self.num_envs = num_envs
        self.num_agents = env.num_agents
        self.num_rows = num_envs * env.num_agents
        """Rows of per-agent tensors: num_envs * num_agents."""
        self.device = concrete_device(torch.device(device) if device is not None else default_device())
        self.check_actions = check_actions
        self.single_observation_space = env.observation_space
        self.single_action_space = env.action_space
        self.seed = seed
        self.state = None
        self._keys = rng.env_keys(rng.key(seed, self.device), num_envs)
        self.mode = fast.handle_mode(mode, self.device)
        self._fast = None if self.mode == "eager" else fast.HandleSteps(
            env, self.num_rows, self.num_agents, self.mode, check_actions, self.device)

    @property
    def params(self):
        return self.env.params

    def _next_key(self) -> torch.Tensor:
        """Per-env keys for this call; each env's stream advances by one."""
        use, self._keys = rng.split(self._keys)
        return use

    def reset(self, seed: int | None = None):
        """Start every env afresh; returns (obs [N * A, ...], info)."""
        if seed is not None:
            self.seed, self._keys = seed, rng.env_keys(rng.key(seed, self.device), self.num_envs)
        self.state = self.env.reset(self._next_key(), self.num_envs, self.device)
        return self.env.observe(self.state), {}

    def step(self, actions: torch.Tensor):
        """Advance every env one step; returns (obs, reward, terminated, truncated, info).

        Episodes that end are reset in the same step: ``obs`` is then the new episode's first
        observation and ``info["final_obs"]`` holds the last one of the old episode.
        """
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        if self._fast is not None:
            self.state, self._keys, (obs, reward, terminated, truncated, final_obs) = self._fast.step(
                self.state, self._keys, actions)
            return obs, reward, terminated, truncated, {"final_obs": final_obs}
        if self.check_actions:
            self.env.action_space.check(actions, self.num_rows, self.device)
        t = autoreset_step(self.env, self.state, actions, self._next_key(), lazy=self.device.type == "cpu")
        self.state = t.state
        return t.obs, t.reward, t.terminated, t.truncated, {"final_obs": t.final_obs}

    def action_mask(self) -> torch.Tensor | None:
        return self.env.action_mask(self.state)

    def acting(self) -> torch.Tensor | None:
        """[N * A] bool: the agents whose actions the next step uses, or None when all act."""
        return self.env.acting(self.state)

    def sample_actions(self) -> torch.Tensor:
        """Uniform random legal actions for every agent row."""
        if self._fast is not None:
            self._keys, actions = self._fast.sample(self.state, self._keys)
            return actions
        keys = agents.row_keys(self._next_key(), self.num_agents)
        return self.env.action_space.sample(keys, self.num_rows, self.action_mask())

    def __repr__(self) -> str:
        return f"VecEnv({self.env!r}, num_envs={self.num_envs}, device={self.device})"


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def concrete_device(device: torch.device) -> torch.device:
    """'cuda' -> 'cuda:<current>', so device checks compare like with like."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device
