"""Vector helpers over batched tensors (last axis = x, y, z), in Bullet's order of float operations.

The kernels' twin is `kernels/vec.py` (the same helpers over (x, y, z) tuples of per-lane values).
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from nitro.core.tables import device_tables

# |direction . axis| below which a box axis does not decide its support point (cos 89.9994 deg).
BOX_SUPPORT_TIE = 1e-5


def dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """x*x' + y*y' + z*z', summed in that order (as Bullet's btVector3::dot and the kernels)."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ax, ay, az = a.unbind(-1)
    bx, by, bz = b.unbind(-1)
    return torch.stack((ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx), -1)


def mat_vec(m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """btMatrix3x3 * v: each row dotted with v [..., 3]."""
    return torch.stack([dot(m[..., i, :], v) for i in range(3)], -1)


def vec_mat(v: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """v * btMatrix3x3 (= transpose(m) * v): each column dotted with v [..., 3]."""
    return torch.stack([dot(m[..., :, i], v) for i in range(3)], -1)


# --- btVector3::normalize as Bullet runs it on x86 -------------------------------------------------
# With SSE in its API (every x86-64 build but Windows'), Bullet normalises with the processor's
# reciprocal square root estimate (rsqrtss) and one Newton step, not with 1 / sqrt: the result differs
# from the correctly rounded one by a few ulps, and which of two nearly equal manifold areas wins can
# hinge on that. On Intel processors rsqrtss(x) depends on the parity of x's exponent and the top 10
# bits of its mantissa only; measured over every float32 in [1, 4), its values there are 8190 - ...
# and 5791 - ... times 2^-13 (the steps below), and rsqrtss(4x) = rsqrtss(x) / 2 exactly.
RSQRT_SS_FIRST = (8190, 5791)  # x = 1 and x = 2, in units of 2^-13
RSQRT_SS_STEPS = (  # the table's 2 x 1023 successive decrements, in units of 2^-13
    "444444444444344444444434444443444434444344434443444344344344344344344343443434434343443434343434"
    "343434343343434334343343433433434334334333433433433343334333433334333343333343333343333333433333"
    "333334333333333333333333333333333333333333233333333333233333332333333233333233332333323333233323"
    "332333233323323332332332332332332332332332323323323233232323323232332323232323323232323232323232"
    "323223232323232232323223232232322323223232232232232322322322322322322232232232223222322322232223"
    "222322223222322223222232222322223222223222222322222232222222322222222322222222223222222222222222"
    "232222222222222222222222222222222222222222222222122222222222222221222222222221222222222122222222"
    "122222212222221222222122222122222122221222212222122221222212221222212221222122212221222122212221"
    "221222122122212212221221221221222122122122122122122122121221221221212212212212122121221221212212"
    "122121212212122121212212121221212121221212121212122121212121212121212212121212121212121212112121"
    "212121212121212112121212121211212121211212121121212112121211212"
    " "
    "323333233332333233332332333233233323323323323323323233232332323323232332323232323323232323232232"
    "323232323223232322323223232232232322322322322322322322322232232223222322232223222322223222232222"
    "322222322222322222232222222322222222232222222222222232222222222222222222222222222222222222222221"
    "222222222222221222222222212222222122222221222222122222122222122221222212222122221222212221222122"
    "212221222122212212221221222122122122212212212212212212212212212122122122121221212212212122121221"
    "212122121212212121221212121212212121212121212212121212121212121212121211212121212121212112121212"
    "121121212112121211212121121211212112121121211212112112121121121211211211212112112112112112112112"
    "112112112111211211211211121121112112111211211121121112111211121112111211121112111211121111211121"
    "111211121111211112111121111211112111112111121111121111121111121111121111112111111211111121111112"
    "111111121111111121111111121111111121111111111211111111111211111111111121111111111111112111111111"
    "111111111112111111111111111111111111111111111111111111111111111"
)


@torch.compiler.assume_constant_result  # compiled code holds the table as a constant
@functools.lru_cache(maxsize=8)
def _rsqrt_ss_table(device: str) -> torch.Tensor:
    """rsqrtss over [1, 4) [2048] float32: index (exponent parity) * 1024 + top 10 mantissa bits."""
    halves = RSQRT_SS_STEPS.split(" ")
    rows = [first - np.concatenate(([0], np.cumsum([int(c) for c in steps]))) for first, steps in zip(RSQRT_SS_FIRST, halves)]
    return torch.from_numpy((np.concatenate(rows) / 8192.0).astype(np.float32)).to(device)


def rsqrt_ss(x: torch.Tensor) -> torch.Tensor:
    """The x86 rsqrtss estimate of 1 / sqrt(x) for positive normal float32 ``x`` (Intel's table)."""
    bits = x.view(torch.int32)
    unbiased = ((bits >> 23) & 0xFF) - 127
    parity = unbiased & 1
    estimate = _rsqrt_ss_table(str(x.device))[parity * 1024 + ((bits >> 13) & 1023)]
    # divide by 2^((unbiased - parity) / 2): exact, on the exponent bits
    return (estimate.view(torch.int32) - (((unbiased - parity) >> 1) << 23)).view(torch.float32)


def normalize(v: torch.Tensor) -> torch.Tensor:
    """btVector3::normalize with SSE: v times rsqrtss(|v|^2) refined by one Newton step [..., 3]."""
    length2 = dot(v, v)
    y = rsqrt_ss(length2)
    y = y * (1.5 - ((length2 * 0.5) * y) * y)
    return v * y[..., None]


def rotate(v: torch.Tensor, axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotate ``v`` about ``axis`` (any nonzero length) by ``angle`` rad, right-handed (btQuaternion)."""
    k = axis / torch.linalg.vector_norm(axis, dim=-1, keepdim=True)
    c, s = torch.cos(angle)[..., None], torch.sin(angle)[..., None]
    return v * c + cross(k, v) * s + k * dot(k, v)[..., None] * (1 - c)


def box_support(center, axes, half, direction):
    """The box's points furthest along ``direction`` [..., 3], averaged where a face or edge ties
    (so a face-on contact reports the face centre); ``axes`` [..., 3, 3] has the axes as columns."""
    along = torch.einsum("...ij,...i->...j", axes, direction)  # direction in box coordinates
    signs = torch.where(along.abs() <= BOX_SUPPORT_TIE, 0.0, torch.sign(along))
    return center + torch.einsum("...ij,...j->...i", axes, signs * half)


def constant(values, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A constant tensor of Python ``values`` (numbers or nested tuples) on ``device``, made once per
    (values, device, dtype) and read after: the eager reference's ticks copy nothing from the host, so
    they replay from a CUDA graph. Under torch.compile, a constant of the traced graph. One first asked
    for while a CUDA graph captures (a path the warm-up steps did not take) is copied from pinned host
    memory, which the graph then copies on each replay (that memory is kept alive; the copy, in the
    graph's memory, is not cached)."""
    if torch.compiler.is_compiling():
        return torch.tensor(values, dtype=dtype, device=device)
    device = torch.device(device)
    key = (values, device, dtype)
    if key not in _constant.cache and device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        _PINNED.append(torch.tensor(values, dtype=dtype).pin_memory())  # (the graph's source: kept alive)
        return _PINNED[-1].to(device, non_blocking=True)  # (in the graph's memory: not cached)
    return _constant(values, device, dtype)


_PINNED: list[torch.Tensor] = []


@device_tables
def _constant(values, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


def broadcast(x, like: torch.Tensor) -> torch.Tensor:
    """``x`` (a Python number or a tensor) expanded to ``like``'s shape, a number filled on ``like``'s
    device (no copy from the host)."""
    return (x if isinstance(x, torch.Tensor) else torch.full((), x, device=like.device)).expand_as(like)


def eager_cpu_width(values: torch.Tensor, static: int) -> int:
    """A padding width for ragged per-env lists: ``static`` (the worst case), or on eager CPU runs the
    batch's own maximum, which there costs no device synchronisation and saves most of the work.
    CUDA and compiled code always get the static width, so they never sync or recompile."""
    if values.device.type != "cpu" or torch.compiler.is_compiling() or values.numel() == 0:
        return static
    return min(static, max(1, int(values.max())))


def eager_cpu(x: torch.Tensor) -> bool:
    """Eager CPU runs may size work to the data (no device to synchronise, nothing compiled)."""
    return x.device.type == "cpu" and not torch.compiler.is_compiling()


def may_be_any(mask: torch.Tensor) -> bool:
    """Whether a stage masked by ``mask`` must run: on eager CPU runs, whether any entry is set (which
    there costs no device synchronisation); on CUDA and under compile always True, so nothing syncs
    or recompiles and the stage's masks do the work."""
    return not eager_cpu(mask) or bool(mask.any())


def gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x [B, K, ...] gathered along dim 1 by index [B, J]: [B, J, ...]."""
    return x.gather(1, index.reshape(*index.shape, *([1] * (x.dim() - 2))).expand(*index.shape, *x.shape[2:]))
