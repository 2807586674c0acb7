"""The stateful handle users hold: ``reset()`` and ``step(actions)`` over a functional env.

It owns the batched state and the random key, checks actions (shape, dtype, device, range, NaN),
and returns tensors on the env's device. Nothing in ``step`` waits on the host. ``mode`` picks how a
step runs: "eager" (plain PyTorch, the default), "compile" (``torch.compile``), "graph" (compiled and
replayed from a CUDA graph: one launch per call, the fast path for Python loops on a GPU), "auto"
(graph on CUDA, eager elsewhere) or "aot" (the CPU step compiled ahead of time into a C++ library and
cached on disk, ``nitro.core.fast.AotStep``: for small batches stepped from Python, such as SB3's); all
give the same results, to Inductor's rounding (``nitro.core.fast.HandleSteps``). For a multi-agent env
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
        self.env = env

    @property
    def env(self) -> Env:
        return self._env

    @env.setter
    def env(self, env: Env) -> None:
        """The env (a new one keeps the spaces, as SB3's ``set_attr`` of a params field does); steps
        compiled for the one before are dropped."""
        self._env = env
        self._fast = None if self.mode in ("eager", "aot") else fast.HandleSteps(
            env, self.num_rows, self.num_agents, self.mode, self.check_actions, self.device)
        self._aot: fast.AotStep | None = None
        """mode="aot": the compiled step, made at the first step (its actions fix the dtype)."""

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
        if self.mode == "aot":
            return self._aot_step(actions)
        t = autoreset_step(self.env, self.state, actions, self._next_key(), lazy=self.device.type == "cpu")
        self.state = t.state
        return t.obs, t.reward, t.terminated, t.truncated, {"final_obs": t.final_obs}

    def _aot_step(self, actions: torch.Tensor):
        if self._aot is None:
            self._aot = fast.AotStep(self.env, self.state, self._keys, actions)
        elif actions.dtype != self._aot.actions_dtype:
            raise ValueError(f"mode='aot' compiled this env's step for {self._aot.actions_dtype} actions, got "
                             f"{actions.dtype}: pass {self._aot.actions_dtype} actions, or use mode='eager'")
        self.state, self._keys, (obs, reward, terminated, truncated, final_obs) = self._aot(
            self.state, self._keys, actions)
        return obs, reward, terminated, truncated, {"final_obs": final_obs}

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
