"""`kernels/vec.py` against `vec.py` (and torch.atan2)."""

from __future__ import annotations

import pytest
import torch

from nitro.envs.soccar import vec
from nitro.envs.soccar.kernels import vec as kvec
from tests.envs.soccar.kernels.twins import BLOCK, DEVICE, assert_close, programs, runnable

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable


@triton.jit
def vec_kernel(a_ptr, b_ptr, angle_ptr, cross_out, dot_out, rotate_out, atan2_out, n, BLOCK: tl.constexpr):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    a = kvec.load(a_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    b = kvec.load(b_ptr + lane * 3, live, (1.0, 0.0, 0.0))
    angle = tl.load(angle_ptr + lane, mask=live, other=0.0)
    kvec.store(cross_out + lane * 3, kvec.cross(a, b), live)
    tl.store(dot_out + lane, kvec.dot(a, b), mask=live)
    kvec.store(rotate_out + lane * 3, kvec.rotate(a, b, angle), live)
    tl.store(atan2_out + lane, kvec.atan2(a[0], a[1]), mask=live)


def test_vector_helpers():
    g = torch.Generator().manual_seed(0)
    n = 2 * BLOCK
    a = torch.randn(n, 3, generator=g) * 100
    a[:4, 1] = torch.tensor([0.0, -0.0, 1.0, -1.0])  # atan2 on the axes
    a[:4, 0] = torch.tensor([1.0, -1.0, 0.0, 0.0])
    b = torch.randn(n, 3, generator=g)
    angle = (torch.rand(n, generator=g) - 0.5) * 8
    a, b, angle = a.to(DEVICE), b.to(DEVICE), angle.to(DEVICE)
    out = [torch.empty(n, 3, device=DEVICE), torch.empty(n, device=DEVICE)]
    out += [torch.empty(n, 3, device=DEVICE), torch.empty(n, device=DEVICE)]
    vec_kernel[programs(n)](a, b, angle, *out, n, BLOCK=BLOCK)
    cross, dot, rotate, atan2 = out
    # cross and dot: the same float32 operations in the same order (GPU: contracted multiply-adds,
    # within 2 ulps of |a||b| ~ 200)
    assert_close(cross, vec.cross(a, b), atol=1e-4 if DEVICE == "cuda" else 0.0)
    assert_close(dot, vec.dot(a, b), atol=1e-4 if DEVICE == "cuda" else 0.0)
    # rotate: the kernel normalises by 1 / sqrt, the reference divides by the norm; cos and sin are
    # Triton's / PyTorch's own: a few ulps of |a| ~ 200 UU
    assert_close(rotate, vec.rotate(a, b, angle), atol=1e-4 * 200)
    # atan2: Cephes atanf, |error| ~1e-7 rad
    assert_close(atan2, torch.atan2(a[:, 0], a[:, 1]), atol=4e-7)
