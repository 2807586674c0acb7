"""Small batches on the CPU: the same arithmetic on numpy views of the tensors.

Eager PyTorch pays 1-3 us of dispatch per call whatever the tensor's size; numpy pays a fifth of that.
At the sizes a Python loop over a few envs steps (SB3's 8 envs), that per-call cost is the whole step.
Code written with Python's operators (``+ - * / ** abs() < & | ^ >>``) runs unchanged on numpy arrays,
and integer and float32 ``+ - * /`` round identically in both (IEEE 754, no fused multiply-add in either),
so a step can hand its arithmetic ``views`` of its tensors and wrap the results back with ``tensors``:
bit for bit the same numbers, without a second copy of the code. Only eager CPU tensors take the numpy
route; CUDA tensors and code that ``torch.compile`` or the JIT traces keep PyTorch's.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils._python_dispatch import is_in_torch_dispatch_mode

GRAIN = 32768
"""Elements below which PyTorch runs a CPU kernel on one thread (ATen's GRAIN_SIZE), as numpy always
does: larger tensors keep PyTorch's threads."""


def eager_cpu(x: torch.Tensor) -> bool:
    """Whether ``x`` is a plain CPU tensor with an env axis and fewer than ``GRAIN`` elements, outside
    ``torch.compile``'s and the JIT tracer's tracing and outside any dispatch mode (one that watches or
    fakes the ops, as tests/host_traffic.py does, must see PyTorch's route, the one CUDA takes): where
    numpy views are both possible and worth it."""
    return (type(x) is torch.Tensor and x.is_cpu and 0 < x.ndim and x.numel() < GRAIN
            and not torch.compiler.is_compiling() and not torch._C._is_tracing()
            and not is_in_torch_dispatch_mode())


def views(*xs: torch.Tensor) -> tuple:
    """Numpy views (no copy) of eager CPU tensors (``eager_cpu`` of the first); the tensors themselves
    otherwise."""
    return tuple(x.numpy() for x in xs) if eager_cpu(xs[0]) else xs  # sync-ok: CPU tensors, zero-copy views


def tensors(*xs) -> tuple[torch.Tensor, ...]:
    """Tensors sharing memory with numpy results; tensors pass through."""
    return tuple(torch.from_numpy(x) if isinstance(x, np.ndarray) else x for x in xs)


def where(condition, x, y):
    """``torch.where`` on tensors, ``numpy.where`` on numpy views: the one selection the operators lack.
    Python floats select as float32 on both routes (PyTorch's default dtype; numpy would widen them)."""
    if isinstance(condition, np.ndarray):
        f32 = lambda v: np.float32(v) if isinstance(v, float) else v
        return np.where(condition, f32(x), f32(y))
    return torch.where(condition, x, y)


def stack(xs, dim: int):
    """``torch.stack`` of tensors, ``numpy.stack`` of numpy views."""
    if isinstance(xs[0], np.ndarray):
        return np.stack(xs, axis=dim)
    return torch.stack(xs, dim)
