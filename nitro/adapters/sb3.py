"""A Stable-Baselines3 ``VecEnv`` over any nitro env.

    from stable_baselines3 import PPO
    model = PPO("MlpPolicy", SB3VecEnv("CartPole-v1", num_envs=8, device="cpu")).learn(100_000)

SB3 works in numpy on the host, so every step copies observations, rewards and dones off the env's device.
Episodes that end are reset in the same step, as SB3 expects: ``dones[i]`` is ``terminated or truncated``,
``infos[i]["terminal_observation"]`` holds the last observation of the ended episode and
``infos[i]["TimeLimit.truncated"]`` says it ended by the time limit (not by termination), as SB3's
``DummyVecEnv`` reports them.

One nitro env object with one set of params serves every index, so ``get_attr`` returns the shared value
for each index, ``set_attr`` changes it for all envs at once (and refuses a subset), and ``env_method``
calls the method once (``"action_masks"``, for sb3-contrib's MaskablePPO, returns each env's mask row).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np
import torch

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv as _SB3VecEnv
except ImportError as e:  # pragma: no cover - exercised by a test that hides stable_baselines3
    raise ImportError("nitro.adapters.sb3 needs stable-baselines3; install it with: "
                      'pip install "nitro-rl[adapters]"') from e

from nitro.adapters._common import as_vec_env, to_actions, to_numpy
from nitro.core.spaces import Discrete, MultiDiscrete
from nitro.core.vector import VecEnv


class SB3VecEnv(_SB3VecEnv):
    """``num_envs`` copies of a nitro env as one SB3 vectorized env (numpy in and out).

    ``env`` is a registered id (``num_envs``, ``device``, ``seed`` and env ``params`` then go to
    ``nitro.make``) or an existing ``nitro.VecEnv``.
    """

    def __init__(self, env: str | VecEnv, num_envs: int | None = None,
                 device: torch.device | str | None = None, seed: int | None = None, **params: Any):
        self.venv = as_vec_env(env, num_envs, device, seed, params)
        self._actions: torch.Tensor | None = None
        super().__init__(self.venv.num_envs, self.venv.single_observation_space.to_gymnasium(),
                         self.venv.single_action_space.to_gymnasium())

    # ---- stepping ----------------------------------------------------------------------------------------

    def reset(self) -> np.ndarray:
        """Start every env afresh; a seed given to ``seed()`` applies to this reset only (SB3's rule)."""
        if any(self._options):
            raise ValueError("nitro envs take no reset options; set reset ranges through the env's params")
        obs, _ = self.venv.reset(seed=self._seeds[0])
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return to_numpy(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = to_actions(actions, self.venv.single_action_space, self.venv.device)

    def step_wait(self):
        actions, self._actions = self._actions, None
        if actions is None:
            raise RuntimeError("call step_async(actions) before step_wait()")
        obs, reward, terminated, truncated, info = self.venv.step(actions)
        terminated, truncated = to_numpy(terminated, copy=False), to_numpy(truncated, copy=False)
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{"TimeLimit.truncated": t} for t in (truncated & ~terminated).tolist()]
        if dones.any():
            final_obs = to_numpy(info["final_obs"])
            for i in np.flatnonzero(dones):
                infos[i]["terminal_observation"] = final_obs[i]
        return to_numpy(obs), to_numpy(reward), dones, infos

    def close(self) -> None:
        self._actions = None

    # ---- seeding, attributes and methods ------------------------------------------------------------------

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seed the next ``reset()``: the whole batch draws from ``seed``, env ``i`` from its own stream of
        it (so every env reports the same seed). ``None`` picks a random seed, as SB3 does."""
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.uint32).max, dtype=np.uint32))
        self._seeds = [seed] * self.num_envs
        return list(self._seeds)

    def _lookup(self, attr_name: str) -> Any:
        if attr_name == "render_mode":
            return None  # nitro envs do not render
        env = self.venv.env
        for owner in (env, env.params, self.venv):
            if hasattr(owner, attr_name):
                return getattr(owner, attr_name)
        raise AttributeError(f"{type(env).__name__} has no attribute {attr_name!r} (nor its params or its "
                             f"VecEnv handle)")

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        value = self._lookup(attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        """Set an attribute of the env (a params field rebuilds the env with it) for every env at once."""
        if sorted(self._get_indices(indices)) != list(range(self.num_envs)):
            raise ValueError(f"nitro envs are batched: one env object and one params set serve all "
                             f"{self.num_envs} envs, so {attr_name!r} can only be set for all of them "
                             f"(indices=None)")
        env = self.venv.env
        if attr_name in {f.name for f in dataclasses.fields(env.params)}:
            rebuilt = type(env)(dataclasses.replace(env.params, **{attr_name: value}))
            if rebuilt.observation_space != env.observation_space or rebuilt.action_space != env.action_space:
                raise ValueError(f"setting {attr_name}={value!r} changes the env's spaces; "
                                 "make a new env instead")
            self.venv.env = rebuilt
        else:
            setattr(env, attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
        indices = list(self._get_indices(indices))
        if method_name == "action_masks":
            masks = self.action_masks()
            return [masks[i] for i in indices]
        result = getattr(self.venv.env, method_name)(*method_args, **method_kwargs)
        return [result for _ in indices]

    def env_is_wrapped(self, wrapper_class: type, indices=None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def action_masks(self) -> np.ndarray:
        """Legal actions [N, sum of choices] (bool); all True where the env has no mask."""
        mask = self.venv.action_mask()
        if mask is not None:
            return to_numpy(mask)
        space = self.venv.single_action_space
        if isinstance(space, Discrete):
            return np.ones((self.num_envs, space.n), dtype=bool)
        if isinstance(space, MultiDiscrete):
            return np.ones((self.num_envs, sum(space.nvec)), dtype=bool)
        raise AttributeError(f"{type(space).__name__} action spaces have no action masks")

    def __repr__(self) -> str:
        return f"SB3VecEnv({self.venv.env!r}, num_envs={self.num_envs}, device={self.venv.device})"


__all__ = ["SB3VecEnv"]
