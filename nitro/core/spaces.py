"""Action and observation spaces of one env, with batched sampling, masks and input checks.

A space describes a single env, as in Gymnasium; the batched tensors have the env axis in front.
``check`` validates a batch of actions: shape, dtype and device always (no sync); values (range, NaN)
raise a ``ValueError`` on CPU and a device-side assert on CUDA, so the hot loop never waits on the host.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from nitro.core import host, rng


def _assert_values(ok: torch.Tensor, message) -> None:
    """Raise ``message()`` if ``ok`` (a tensor, or a numpy view's result) has a false element, without a
    host sync on accelerators."""
    if isinstance(ok, np.ndarray) or ok.device.type == "cpu":
        if not bool(ok.all()):
            raise ValueError(message())
    else:
        torch._assert_async(ok.all(), message())


def _check_meta(name: str, actions, num_envs: int, shape: tuple[int, ...], kinds: str, device) -> None:
    if not isinstance(actions, torch.Tensor):
        raise TypeError(f"{name} actions must be a torch.Tensor, got {type(actions).__name__}")
    want = (num_envs, *shape)
    if tuple(actions.shape) != want:
        raise ValueError(f"{name} actions must have shape {list(want)} (num_envs * num_agents, "
                         f"*action_shape), got {list(actions.shape)}")
    kind = "float" if actions.dtype.is_floating_point else ("bool" if actions.dtype == torch.bool else "integer")
    if kind not in kinds:
        raise TypeError(f"{name} actions must have an {' or '.join(kinds)} dtype, got {actions.dtype}")
    if actions.device != (device if isinstance(device, torch.device) else torch.device(device)):
        raise ValueError(f"{name} actions are on {actions.device} but the env runs on {device}; "
                         f"move them with actions.to({str(device)!r})")


@dataclass(frozen=True)
class Discrete:
    """One of ``n`` actions ``start, ..., start + n - 1``. Batched shape [N]."""

    n: int
    start: int = 0

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    def sample(self, key: torch.Tensor, num_envs: int, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Uniform actions [N] (int64); with ``mask`` [N, n] (bool), uniform over the allowed ones."""
        if mask is None:
            return rng.randint(key, (num_envs,), self.n) + self.start
        scores = torch.where(mask, rng.uniform(key, (num_envs, self.n)), -1.0)
        return scores.argmax(-1) + self.start

    def check(self, actions: torch.Tensor, num_envs: int, device) -> None:
        _check_meta("Discrete", actions, num_envs, (), ("integer",), device)
        lo, hi = self.start, self.start + self.n
        (a,) = host.views(actions)
        _assert_values(
            (a >= lo) & (a < hi),
            lambda: f"Discrete actions must lie in [{lo}, {hi}); got values "
            f"{actions[(actions < lo) | (actions >= hi)][:8].tolist()}"  # sync-ok: CPU error message
            if actions.device.type == "cpu" else f"nitro: Discrete actions must lie in [{lo}, {hi})",
        )

    def to_gymnasium(self):
        import gymnasium

        return gymnasium.spaces.Discrete(self.n, start=self.start)


@dataclass(frozen=True)
class MultiDiscrete:
    """A vector of discrete choices, choice ``i`` in ``[0, nvec[i])``. Batched shape [N, len(nvec)]."""

    nvec: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.nvec),)

    def sample(self, key: torch.Tensor, num_envs: int, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Uniform actions [N, len(nvec)]; ``mask`` is [N, sum(nvec)] (bool), one block per choice."""
        keys = rng.split(key, len(self.nvec))
        if mask is None:
            cols = [rng.randint(k, (num_envs,), n) for k, n in zip(keys, self.nvec)]
        else:
            blocks = mask.split(list(self.nvec), dim=-1)
            cols = [Discrete(n).sample(k, num_envs, m) for k, n, m in zip(keys, self.nvec, blocks)]
        return torch.stack(cols, -1)

    def check(self, actions: torch.Tensor, num_envs: int, device) -> None:
        _check_meta("MultiDiscrete", actions, num_envs, self.shape, ("integer",), device)
        nvec = torch.tensor(self.nvec, device=actions.device)
        _assert_values(
            (actions >= 0) & (actions < nvec),
            lambda: f"MultiDiscrete actions must lie in [0, nvec) with nvec={list(self.nvec)}"
            + (f"; got rows {actions[((actions < 0) | (actions >= nvec)).any(-1)][:4].tolist()}"  # sync-ok: error text
               if actions.device.type == "cpu" else ""),
        )

    def to_gymnasium(self):
        import gymnasium

        return gymnasium.spaces.MultiDiscrete(np.array(self.nvec, dtype=np.int64))


@dataclass(frozen=True)
class Box:
    """Real vectors in ``[low, high]`` (elementwise, may be infinite). Batched shape [N, *shape]."""

    low: tuple[float, ...]
    high: tuple[float, ...]
    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32

    @classmethod
    def of(cls, low, high, shape: tuple[int, ...] | None = None, dtype=torch.float32) -> "Box":
        """Build from scalars or sequences; scalars are broadcast to ``shape``."""
        if shape is None:
            shape = (len(low),)
        numel = 1
        for s in shape:
            numel *= s
        as_tuple = lambda v: tuple(float(x) for x in v) if hasattr(v, "__len__") else (float(v),) * numel
        return cls(as_tuple(low), as_tuple(high), tuple(shape), dtype)

    def bounds(self, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        lo = torch.tensor(self.low, dtype=self.dtype, device=device).view(self.shape)
        hi = torch.tensor(self.high, dtype=self.dtype, device=device).view(self.shape)
        return lo, hi

    def sample(self, key: torch.Tensor, num_envs: int, mask: None = None) -> torch.Tensor:
        """Uniform where bounded, standard normal where unbounded (as Gymnasium)."""
        lo, hi = self.bounds(key.device)
        k1, k2 = rng.split(key)
        shape = (num_envs, *self.shape)
        bounded = torch.isfinite(lo) & torch.isfinite(hi)
        u = rng.uniform(k1, shape, dtype=self.dtype)
        z = rng.normal(k2, shape, dtype=self.dtype)
        lo_f, hi_f = torch.where(bounded, lo, 0), torch.where(bounded, hi, 1)
        return torch.where(bounded, lo_f + (hi_f - lo_f) * u, z)

    def check(self, actions: torch.Tensor, num_envs: int, device) -> None:
        _check_meta("Box", actions, num_envs, self.shape, ("float",), device)
        _assert_values(
            ~torch.isnan(actions),
            lambda: f"Box actions contain NaN (at env rows "
            f"{torch.isnan(actions).reshape(num_envs, -1).any(-1).nonzero().flatten()[:8].tolist()})"  # sync-ok: error text
            if actions.device.type == "cpu" else "nitro: Box actions contain NaN",
        )

    def to_gymnasium(self):
        import gymnasium

        np_dtype = {torch.float32: np.float32, torch.float64: np.float64}[self.dtype]
        lo, hi = (np.array(v, dtype=np_dtype).reshape(self.shape) for v in (self.low, self.high))
        return gymnasium.spaces.Box(lo, hi, self.shape, np_dtype)


Space = Discrete | MultiDiscrete | Box
