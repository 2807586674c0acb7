"""PettingZoo's parallel API over a multi-agent nitro env: one game, agents named ``player_0`` ... in
seat order.

    env = PettingZooParallelEnv("ConnectFour-v3", device="cpu")
    observations, infos = env.reset(seed=0)
    while env.agents:
        actions = {a: policy(observations[a], infos[a]["action_mask"]) for a in env.agents}
        observations, rewards, terminations, truncations, infos = env.step(actions)

Conventions are PettingZoo 1.x's: ``reset(seed, options)`` returns ``(observations, infos)``, ``step``
returns five dicts keyed by agent, and when the game ends every agent leaves ``agents`` (call ``reset``
for the next one); the observations returned on that step are the game's last. Turn-based games give
every live agent ``infos[agent]["acting"]`` (whether its action is used this step) and
``infos[agent]["action_mask"]`` (legal actions, when the env has masks); an agent that is not acting may
leave its action out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

try:
    from pettingzoo import ParallelEnv
except ImportError as e:  # pragma: no cover - exercised by a test that hides pettingzoo
    raise ImportError("nitro.adapters.pettingzoo needs pettingzoo; install it with: "
                      'pip install "nitro-rl[adapters]"') from e

from nitro.adapters._common import as_vec_env, to_actions, to_numpy
from nitro.core.spaces import Box
from nitro.core.vector import VecEnv


class PettingZooParallelEnv(ParallelEnv):
    """One game of a nitro env (a registered id, or a ``nitro.VecEnv`` of one env) as a PettingZoo
    ``ParallelEnv``."""

    metadata = {"name": "nitro", "render_modes": []}

    def __init__(self, env: str | VecEnv, device: torch.device | str | None = None, seed: int | None = None,
                 **params: Any):
        self.venv = as_vec_env(env, 1, device, seed, params, multi_agent=True)
        self.render_mode = None
        self.possible_agents = [f"player_{i}" for i in range(self.venv.num_agents)]
        self.agents: list[str] = []
        self._obs_space = self.venv.single_observation_space.to_gymnasium()
        self._act_space = self.venv.single_action_space.to_gymnasium()

    def observation_space(self, agent: str):
        return self._obs_space

    def action_space(self, agent: str):
        return self._act_space

    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, _ = self.venv.reset(seed=seed)
        self.agents = list(self.possible_agents)
        return self._per_agent(obs), self._infos()

    def step(self, actions: dict[str, Any]):
        if not self.agents:
            raise RuntimeError("the game is over (no agents left); call reset() to start the next one")
        unknown = sorted(set(actions) - set(self.agents))
        if unknown:
            raise ValueError(f"actions for {unknown}, which are not live agents ({self.agents})")
        acting = self._acting()
        missing = [a for i, a in enumerate(self.possible_agents) if acting[i] and a not in actions]
        if missing:
            raise ValueError(f"no action for {missing}, whose turn it is (infos[agent]['acting'])")
        rows = [np.asarray(actions[a]) if a in actions else self._placeholder() for a in self.possible_agents]
        action = to_actions(np.stack(rows), self.venv.single_action_space, self.venv.device)
        obs, reward, terminated, truncated, info = self.venv.step(action)
        ended = bool(terminated[0] | truncated[0])
        if ended:
            obs = info["final_obs"]  # the game's last observations (the handle has already started a new one)
        rewards = {a: float(r) for a, r in zip(self.possible_agents, to_numpy(reward))}
        terminations = {a: bool(terminated[0]) for a in self.agents}
        truncations = {a: bool(truncated[0]) for a in self.agents}
        observations, infos = self._per_agent(obs), self._infos()
        if ended:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def _placeholder(self) -> np.ndarray:
        """A valid action for an agent that sits a turn out (the env ignores it)."""
        space = self._act_space
        value = np.zeros(space.shape, space.dtype) + getattr(space, "start", 0)
        return np.clip(value, space.low, space.high) if isinstance(self.venv.single_action_space, Box) else value

    def _per_agent(self, obs: torch.Tensor) -> dict[str, np.ndarray]:
        return dict(zip(self.possible_agents, to_numpy(obs)))

    def _acting(self) -> list[bool]:
        acting = self.venv.acting()
        return [True] * len(self.possible_agents) if acting is None else to_numpy(acting).tolist()

    def _infos(self) -> dict[str, dict]:
        mask = self.venv.action_mask()
        acting = self._acting()
        return {a: {"acting": acting[i], **({} if mask is None else {"action_mask": to_numpy(mask[i]).astype(np.int8)})}
                for i, a in enumerate(self.possible_agents)}

    def close(self) -> None:
        pass
