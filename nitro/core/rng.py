"""Counter-based random numbers: pure integer hashes of (key, element index), no generator state.

A key is an int32 tensor of 32-bit words: a 0-d key is one stream; a key of shape [N] is one stream
per env (what env steps, resets and policies use). Every draw is a pure function of its key and the
element's index, so:

- a run is reproducible from its seed on any device (integer hashing is exact everywhere);
- env ``i``'s stream depends on its own key only, never on how many envs run beside it;
- draws fuse into the kernels that use them, and CUDA graphs need no generator bookkeeping.

The mixer is the "lowbias32" integer hash (xor-shift-multiply, two rounds) in wrapping int32
arithmetic; right shifts are masked so they act on the unsigned bit pattern.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from nitro.core import host
from nitro.core.errors import as_count

_M1 = 0x7FEB352D
_M2 = 0x846CA68B - (1 << 32)  # as int32
_GOLDEN = 0x9E3779B9 - (1 << 32)
_U_M1, _U_M2, _U15, _U16 = np.uint32(0x7FEB352D), np.uint32(0x846CA68B), np.uint32(15), np.uint32(16)
_U_GOLDEN = np.uint32(0x9E3779B9)


def _as_i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def _mix(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 over int32 bit patterns (multiplication wraps modulo 2^32)."""
    if host.eager_cpu(x):  # the same bits through numpy: a fifth of PyTorch's per-call cost (nitro.core.host)
        return torch.from_numpy(_mix_words(x.numpy().view(np.uint32)).view(np.int32))  # sync-ok: a CPU tensor
    x = x ^ ((x >> 16) & 0xFFFF)
    x = x * _M1
    x = x ^ ((x >> 15) & 0x1FFFF)
    x = x * _M2
    return x ^ ((x >> 16) & 0xFFFF)


def _mix_words(x: np.ndarray) -> np.ndarray:
    """``_mix`` of uint32 words in numpy (unsigned: the shifts need no mask; numpy scalars as operands
    skip the per-call dtype resolution of Python ints)."""
    x = x ^ (x >> _U16)
    x = x * _U_M1
    x = x ^ (x >> _U15)
    x = x * _U_M2
    return x ^ (x >> _U16)


def _mix_int(x: int) -> int:
    """``_mix`` of a Python int, as an int32 value (for constants folded into keys)."""
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * _M1) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * (_M2 & 0xFFFFFFFF)) & 0xFFFFFFFF
    return _as_i32(x ^ (x >> 16))


def key(seed: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The 0-d key of ``seed`` (any Python int; reduced to 32 bits)."""
    seed = as_count("seed", seed, minimum=None)
    return _mix(torch.tensor(_as_i32(seed), dtype=torch.int32, device=device) ^ 0x2545F491)


def fold_in(key: torch.Tensor, data: int | torch.Tensor) -> torch.Tensor:
    """A new key (same shape) derived from ``key`` and ``data`` (an int or a broadcastable int tensor)."""
    if isinstance(data, int):
        return _mix(key ^ _mix_int(data * 0x9E3779B9 + 0x6A09E667))
    return _mix(key ^ _mix(data.to(torch.int32) * _GOLDEN + 0x6A09E667))


def split(key: torch.Tensor, n: int = 2) -> list[torch.Tensor]:
    """``n`` independent keys derived from ``key`` (the usual way to advance a stream: use some of
    them now and keep the last for the next step). Key ``i`` is ``fold_in(key, i + 1)``. Eager, all
    ``n`` are hashed at once (fewer kernels: what small eager batches pay for); compiled, each key is
    its own pointwise hash, which Inductor fuses into the kernels that use it (the stacked [n, N] keys
    were kernels and buffers of their own: a graphed CartPole handle step of 1M envs on an H200 took
    83 us, and 73 us with one hash per key, the same keys)."""
    if n == 0:
        return []
    if torch.compiler.is_compiling():
        return [_mix(key ^ _split_salt(i)) for i in range(n)]
    if host.eager_cpu(key):
        words = key.numpy().view(np.uint32)  # sync-ok: a CPU tensor
        mixed = _mix_words(words[None] ^ _split_salts(n, key.dim())).view(np.int32)
        return [torch.from_numpy(row) for row in mixed]
    salted = torch.stack([key ^ _split_salt(i) for i in range(n)])
    return list(_mix(salted).unbind(0))


def _split_salt(i: int) -> int:
    """What ``split`` xors key ``i`` with: ``fold_in``'s salt of ``i + 1``."""
    return _mix_int((i + 1) * 0x9E3779B9 + 0x6A09E667)


@functools.cache
def _split_salts(n: int, dims: int) -> np.ndarray:
    """What ``split`` xors key ``i`` with (as uint32 words [n, 1, ...] for keys of ``dims`` dims), for its
    numpy route (never traced); read-only, as it is shared."""
    salts = np.array([_split_salt(i) for i in range(n)], np.int32).view(np.uint32)
    salts = salts.reshape(n, *(1,) * dims)
    salts.flags.writeable = False
    return salts


def env_keys(key: torch.Tensor, num_envs: int) -> torch.Tensor:
    """Per-env keys [num_envs] from a 0-d key; key ``i`` does not depend on ``num_envs``."""
    return fold_in(key, torch.arange(num_envs, dtype=torch.int32, device=key.device))


def bits(key: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Uniform 32-bit words (int32 bit patterns) of ``shape``: one hash of (key, element index).

    A 0-d key numbers the elements of ``shape`` row-major; a key of shape [N] must lead ``shape`` and
    gives row ``i`` its own stream numbered over the trailing dims."""
    if tuple(key.shape) != tuple(shape[: key.dim()]):
        raise ValueError(f"key of shape {list(key.shape)} must lead the draw shape {list(shape)}")
    trailing = shape[key.dim():]
    if not trailing:  # one word per key: keys are already hashed, one more round decorrelates
        return _mix(key + _GOLDEN)
    numel = 1
    for s in trailing:
        numel *= s
    index = torch.arange(1, numel + 1, dtype=torch.int32, device=key.device).view(trailing)
    return _mix(key.view(*key.shape, *(1,) * len(trailing)) + index * _GOLDEN)


def _unit(words):
    """The top 24 bits as an integer in [0, 2^24) (of int32 tensors or uint32 numpy words)."""
    return (words >> 8) & 0xFFFFFF


def uniform(key: torch.Tensor, shape: tuple[int, ...], low=0.0, high=1.0, dtype=torch.float32):
    """Uniform floats in [low, high) with 24 random bits each."""
    if (dtype == torch.float32 and tuple(key.shape) == tuple(shape) and isinstance(low, (int, float))
            and isinstance(high, (int, float)) and host.eager_cpu(key)):  # one word per key, in numpy
        words = _mix_words(key.numpy().view(np.uint32) + _U_GOLDEN)  # sync-ok: a CPU tensor
        u = _unit(words).astype(np.float32) * np.float32(1.0 / (1 << 24))
        return torch.from_numpy(low + (high - low) * u)
    u = _unit(bits(key, shape)).to(dtype) * (1.0 / (1 << 24))
    return low + (high - low) * u


def randint(key: torch.Tensor, shape: tuple[int, ...], high, low=0) -> torch.Tensor:
    """Integers in [low, high) (int64), exactly floor(u * (high - low)) + low for a 24-bit u;
    ``high``/``low`` may be tensors broadcastable to ``shape``."""
    span = high - low
    return low + ((_unit(bits(key, shape)).to(torch.int64) * span) >> 24)


def normal(key: torch.Tensor, shape: tuple[int, ...], dtype=torch.float32) -> torch.Tensor:
    """Standard normal floats by Box-Muller over two uniform streams."""
    k1, k2 = split(key)
    u1 = 1.0 - uniform(k1, shape)  # (0, 1]: the log stays finite
    u2 = uniform(k2, shape)
    return (torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2 * torch.pi * u2)).to(dtype)
