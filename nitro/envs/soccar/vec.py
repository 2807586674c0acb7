"""Vector helpers over batched tensors (last axis = x, y, z), in Bullet's order of float operations.

The kernels' twin is `kernels/vec.py` (the same helpers over (x, y, z) tuples of per-lane values).
"""

from __future__ import annotations

import torch

# |direction . axis| below which a box axis does not decide its support point (cos 89.9994 deg).
BOX_SUPPORT_TIE = 1e-5


def dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """x*x' + y*y' + z*z', summed in that order (as Bullet's btVector3::dot and the kernels)."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ax, ay, az = a.unbind(-1)
    bx, by, bz = b.unbind(-1)
    return torch.stack((ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx), -1)


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


def eager_cpu_width(values: torch.Tensor, static: int) -> int:
    """A padding width for ragged per-env lists: ``static`` (the worst case), or on eager CPU runs the
    batch's own maximum, which there costs no device synchronisation and saves most of the work.
    CUDA and compiled code always get the static width, so they never sync or recompile."""
    if values.device.type != "cpu" or torch.compiler.is_compiling() or values.numel() == 0:
        return static
    return min(static, max(1, int(values.max())))


def may_be_any(mask: torch.Tensor) -> bool:
    """Whether a stage masked by ``mask`` must run: on eager CPU runs, whether any entry is set (which
    there costs no device synchronisation); on CUDA and under compile always True, so nothing syncs
    or recompiles and the stage's masks do the work."""
    if mask.device.type != "cpu" or torch.compiler.is_compiling():
        return True
    return bool(mask.any())
