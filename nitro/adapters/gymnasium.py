"""A Gymnasium ``VectorEnv`` over any nitro env, with same-step auto-reset.

    envs = GymnasiumVectorEnv("CartPole-v1", num_envs=8, device="cpu")            # numpy in and out
    envs = GymnasiumVectorEnv("CartPole-v1", num_envs=4096, device="cuda", array="torch")  # tensors

Conventions are Gymnasium 1.x's for vector envs: batched spaces from ``batch_space``, ``reset(seed=...)``
returning ``(obs, infos)``, ``step(actions)`` returning ``(obs, rewards, terminations, truncations, infos)``
and ``metadata["autoreset_mode"] = AutoresetMode.SAME_STEP``: an env whose episode ends is reset in the same
step, ``obs`` holds its new episode's first observation and ``infos["final_obs"]`` the last one of the old.
With ``array="numpy"`` infos follow ``SyncVectorEnv``: when some env ended, ``final_obs`` is an object array
with the final observation at those envs and None elsewhere, ``_final_obs`` their mask, and ``final_info``
/ ``_final_info`` the same for their (empty) infos. With ``array="torch"`` the outputs stay on the env's
device and nothing waits on the host: ``final_obs`` is a dense [N, ...] tensor (equal to ``obs`` where no
episode ended) and ``_final_obs`` the done mask, both present every step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

try:
    from gymnasium.vector import AutoresetMode, VectorEnv
    from gymnasium.vector.utils import batch_space
except ImportError as e:  # pragma: no cover - exercised by a test that hides gymnasium
    raise ImportError("nitro.adapters.gymnasium needs gymnasium; install it with: "
                      'pip install "nitro-rl[adapters]"') from e

from nitro.adapters._common import as_vec_env, to_actions, to_numpy
from nitro.core.vector import VecEnv

ARRAYS = ("numpy", "torch")


class GymnasiumVectorEnv(VectorEnv):
    """``num_envs`` copies of a nitro env as one Gymnasium vector env.

    ``env`` is a registered id (``num_envs``, ``device``, ``seed`` and env ``params`` then go to
    ``nitro.make``) or an existing ``nitro.VecEnv``. ``array`` picks numpy outputs (copied to the host each
    step) or torch tensors on the env's device (no copies; actions must then be tensors on that device or
    host arrays, which are copied over).
    """

    def __init__(self, env: str | VecEnv, num_envs: int | None = None,
                 device: torch.device | str | None = None, seed: int | None = None, array: str = "numpy",
                 **params: Any):
        if array not in ARRAYS:
            raise ValueError(f"array must be one of {ARRAYS}, got {array!r}")
        self.venv = as_vec_env(env, num_envs, device, seed, params)
        self.array = array
        self.num_envs = self.venv.num_envs
        self.device = self.venv.device
        self.single_observation_space = self.venv.single_observation_space.to_gymnasium()
        self.single_action_space = self.venv.single_action_space.to_gymnasium()
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
        self.render_mode = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start every env afresh. ``seed`` reseeds the whole batch (env ``i`` draws from its own stream of
        it); without one, new episodes continue the current key stream."""
        if options:
            raise ValueError(f"nitro envs take no reset options (got {sorted(options)}); set reset ranges "
                             "through the env's params when making it")
        super().reset(seed=seed)  # seeds self.np_random, as Gymnasium's vector envs do
        obs, _ = self.venv.reset(seed=seed)
        return self._out(obs), {}

    def step(self, actions):
        actions = to_actions(actions, self.venv.single_action_space, self.device)
        obs, reward, terminated, truncated, info = self.venv.step(actions)
        done = terminated | truncated
        if self.array == "torch":
            infos = {"final_obs": info["final_obs"], "_final_obs": done,
                     "final_info": {}, "_final_info": done}
            return obs, reward, terminated, truncated, infos
        done_np = to_numpy(done)
        infos: dict[str, Any] = {}
        if done_np.any():
            final_obs_np = to_numpy(info["final_obs"])
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in np.flatnonzero(done_np):
                final_obs[i] = final_obs_np[i]
            infos = {"final_obs": final_obs, "_final_obs": done_np,
                     "final_info": {}, "_final_info": done_np.copy()}
        # rewards as float64, like Gymnasium's SyncVectorEnv
        rewards = to_numpy(reward).astype(np.float64)
        return to_numpy(obs), rewards, to_numpy(terminated), to_numpy(truncated), infos

    def _out(self, x: torch.Tensor):
        return x if self.array == "torch" else to_numpy(x)

    def action_masks(self):
        """Legal actions [N, n] (bool), or None if every action is always legal."""
        mask = self.venv.action_mask()
        return mask if mask is None or self.array == "torch" else to_numpy(mask)

    def __repr__(self) -> str:
        return f"GymnasiumVectorEnv({self.venv.env!r}, num_envs={self.num_envs}, device={self.device}, " \
               f"array={self.array!r})"


__all__ = ["GymnasiumVectorEnv"]
