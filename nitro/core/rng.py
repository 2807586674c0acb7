"""Counter-based random numbers that live on the device and need no generator state.

A key is an int64 tensor of shape [2] holding two 32-bit words (seed, counter). Every draw is a
pure hash of (key, element index), so:

- a run is reproducible from its seed, on any device (integer hashing is exact everywhere);
- env ``i`` draws from element indices ``i * d ... i * d + d - 1``, so its stream does not depend on
  how many other envs there are;
- draws fuse into compiled kernels and CUDA graphs: no generator offsets, no host round-trips.

The mixer is the "lowbias32" integer hash (two xor-shift-multiply rounds), applied twice with the key
folded in between; its avalanche is more than enough for reset noise and random actions.
"""

from __future__ import annotations

import torch

MASK32 = 0xFFFFFFFF
_M1 = 0x7FEB352D
_M2 = 0x846CA68B
_GOLDEN = 0x9E3779B9


def _mix(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 on int64 tensors holding 32-bit values (products stay below 2^63)."""
    x = x & MASK32
    x = ((x ^ (x >> 16)) * _M1) & MASK32
    x = ((x ^ (x >> 15)) * _M2) & MASK32
    return x ^ (x >> 16)


def key(seed: int, device: torch.device | str | None = None) -> torch.Tensor:
    """A fresh key for ``seed`` (any Python int; reduced to 32 bits)."""
    if not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    return torch.tensor([seed & MASK32, 0], dtype=torch.int64, device=device)


def fold_in(key: torch.Tensor, data: int | torch.Tensor) -> torch.Tensor:
    """A new key derived from ``key`` and ``data`` (an int or an int64 scalar tensor)."""
    data = (data * _GOLDEN) & MASK32
    word = _mix(key[1] + _mix(key[0] ^ data))
    return torch.stack([key[0], word])


def split(key: torch.Tensor, n: int = 2) -> list[torch.Tensor]:
    """``n`` independent keys derived from ``key``."""
    return [fold_in(key, i + 1) for i in range(n)]


def bits(key: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Uniform 32-bit words as int64, one per element of ``shape`` (row-major element index)."""
    numel = 1
    for s in shape:
        numel *= s
    index = torch.arange(numel, dtype=torch.int64, device=key.device).view(shape)
    k0 = _mix(key[0] ^ _GOLDEN)
    k1 = _mix(key[1] + k0)
    return _mix(_mix(index ^ k0) + k1)


def uniform(key: torch.Tensor, shape: tuple[int, ...], low=0.0, high=1.0, dtype=torch.float32):
    """Uniform floats in [low, high) from the top 24 bits of each word."""
    u = (bits(key, shape) >> 8).to(dtype) * (1.0 / (1 << 24))
    return low + (high - low) * u


def randint(key: torch.Tensor, shape: tuple[int, ...], high, low=0) -> torch.Tensor:
    """Integers in [low, high) (int64); ``high``/``low`` may be tensors broadcastable to ``shape``."""
    u = (bits(key, shape) >> 8).to(torch.float64) * (1.0 / (1 << 24))
    return (low + torch.floor(u * (high - low))).to(torch.int64)


def normal(key: torch.Tensor, shape: tuple[int, ...], dtype=torch.float32) -> torch.Tensor:
    """Standard normal floats by Box-Muller over two uniform streams."""
    k1, k2 = split(key)
    u1 = 1.0 - uniform(k1, shape, dtype=torch.float32)  # (0, 1]: log is finite
    u2 = uniform(k2, shape, dtype=torch.float32)
    return (torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2 * torch.pi * u2)).to(dtype)
