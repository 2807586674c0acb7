"""`kernels/subsimplex_convex_cast.py` against `subsimplex_convex_cast.py`: btSubsimplexConvexCast's ray
against car boxes (rotated, their margins included) and balls, with its btVoronoiSimplexSolver.

The rays start around the shapes and aim near their centres, so they hit faces, edges and corners,
graze, miss, stop short and start inside. Kernel and reference evaluate the same float32 operations in
the same order, and the cast's answer depends on the iteration its loop stops at, which turns on the
last ulp (a step more or less moves a hit by up to 0.25 BT). So the kernel divides and takes square
roots as IEEE does and is compiled without FMA contraction, as the pre-tick's pass that casts is
(`kernels/arena.UNFUSED_PASSES`), and the reference runs with a correctly rounded sqrt (PyTorch's CPU
sqrt can be an ulp off IEEE's, which numpy, and so Triton's interpreter, computes): then the hits,
fractions and normals are equal to the bit, on the interpreter and on a GPU."""

from __future__ import annotations

import math

import pytest
import torch

from nitro.envs.soccar.gjk_pair_detector import ConvexShape
from nitro.envs.soccar.kernels import subsimplex_convex_cast as twin
from nitro.envs.soccar.rigid_body import basis_from_quat, quat_from_axis_angle
from nitro.envs.soccar.subsimplex_convex_cast import ray_cast_convex
from tests.envs.soccar.kernels.twins import DEVICE, exact_sqrt, runnable

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable
RAYS = 512
BLOCK = 256
"""Lanes per program: the rays in two programs (the interpreter's cost is per operation, not per lane)."""


@triton.jit
def ray_cast_convex_kernel(
    start_ptr, end_ptr, origin_ptr, basis_ptr, half_ptr, margin_ptr, is_sphere, out_ptr, n, BLOCK: tl.constexpr
):  # fmt: skip
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    start = load_vec(start_ptr + lane * 3, live)
    end = load_vec(end_ptr + lane * 3, live)
    origin = load_vec(origin_ptr + lane * 3, live)
    basis = (load_vec(basis_ptr + lane * 9, live), load_vec(basis_ptr + lane * 9 + 3, live))
    basis = basis + (load_vec(basis_ptr + lane * 9 + 6, live),)
    shape = (is_sphere != 0, origin, basis, load_vec(half_ptr + lane * 3, live), tl.load(margin_ptr + lane, mask=live))
    hit, fraction, normal = twin.ray_cast_convex(shape, start, end, live)
    values = (hit.to(tl.float32), fraction) + normal
    for k in tl.static_range(5):
        tl.store(out_ptr + lane * 5 + k, values[k], mask=live)


@triton.jit
def load_vec(ptr, live):
    return tl.load(ptr, mask=live, other=0.0), tl.load(ptr + 1, mask=live, other=0.0), tl.load(ptr + 2, mask=live, other=0.0)


def random_rays(shape: ConvexShape, reach: torch.Tensor, g: torch.Generator):
    """Rays from 1.1-1.6 x the shape's reach around it, aimed within +-reach of its centre, 1 to 2
    reaches long (some end short of it); one in 16 starts inside it."""
    p = shape.origin.shape[0]
    direction = torch.nn.functional.normalize(torch.randn(p, 3, generator=g), dim=-1)
    start = shape.origin + direction * (reach * (1.1 + 0.5 * torch.rand(p, generator=g)))[:, None]
    inside = torch.rand(p, generator=g) < 1 / 16
    start = torch.where(inside[:, None], shape.origin + 0.3 * torch.randn(p, 3, generator=g) * 0.1, start)
    aim = shape.origin + (torch.rand(p, 3, generator=g) - 0.5) * 2 * reach[:, None]
    length = reach * (1.0 + torch.rand(p, generator=g))
    end = start + torch.nn.functional.normalize(aim - start, dim=-1) * length[:, None]
    return start, end


def run_kernel(shape: ConvexShape, start, end, is_sphere: bool) -> torch.Tensor:
    p = len(start)
    basis = shape.basis if shape.basis is not None else torch.eye(3).expand(p, 3, 3)
    half = shape.half if shape.half is not None else torch.zeros(p, 3)
    out = torch.empty(p, 5, device=DEVICE)
    args = (start, end, shape.origin, basis, half, shape.margin)
    ray_cast_convex_kernel[(triton.cdiv(p, BLOCK),)](
        *(x.contiguous().to(DEVICE) for x in args), int(is_sphere), out, p, BLOCK=BLOCK, num_warps=BLOCK // 32,
        enable_fp_fusion=False,
    )
    return out.cpu()


def check(shape: ConvexShape, start, end, is_sphere: bool, monkeypatch) -> torch.Tensor:
    with monkeypatch.context() as patch:
        patch.setattr(torch, "sqrt", exact_sqrt)  # `subsimplex_convex_cast.normalized`'s
        hit, fraction, normal = ray_cast_convex(shape, start, end)
    out = run_kernel(shape, start, end, is_sphere)
    assert torch.equal(out[:, 0] != 0, hit)
    assert torch.equal(out[:, 1], fraction)
    assert torch.equal(out[:, 2:], normal)
    return hit


def test_rays_against_car_boxes(monkeypatch):
    """Octane-to-plank sized boxes (BT, inner half extents, margin 0.04) in any orientation."""
    g = torch.Generator().manual_seed(11)
    p = RAYS
    half = torch.tensor([1.1, 0.8, 0.3]) + torch.rand(p, 3, generator=g) * torch.tensor([0.3, 0.1, 0.1])
    margin = torch.full((p,), 0.04)
    axis = torch.nn.functional.normalize(torch.randn(p, 3, generator=g), dim=-1)
    basis = basis_from_quat(quat_from_axis_angle(axis, torch.rand(p, generator=g) * 2 * math.pi))
    origin = torch.randn(p, 3, generator=g) * 20
    box = ConvexShape("box", origin, margin, basis=basis, half=half)
    start, end = random_rays(box, (half + margin[:, None]).norm(dim=-1), g)
    hit = check(box, start, end, False, monkeypatch)
    assert 0.2 * p < int(hit.sum()) < 0.8 * p


def test_rays_against_balls(monkeypatch):
    """Balls of radius 1.825 BT (the soccar ball) and 1.0-3.0 (mutated ones)."""
    g = torch.Generator().manual_seed(12)
    p = RAYS
    radius = torch.where(torch.rand(p, generator=g) < 0.5, 1.825, 1.0 + 2.0 * torch.rand(p, generator=g))
    sphere = ConvexShape("sphere", torch.randn(p, 3, generator=g) * 20, radius)
    start, end = random_rays(sphere, radius, g)
    hit = check(sphere, start, end, True, monkeypatch)
    assert 0.2 * p < int(hit.sum()) < 0.8 * p
