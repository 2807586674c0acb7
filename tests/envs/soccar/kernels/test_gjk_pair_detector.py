"""`kernels/gjk_pair_detector.py` against `gjk_pair_detector.py`: btGjkPairDetector's closest points of a
car's box (with its margin) and an arena triangle, with its btVoronoiSimplexSolver, where the
penetration depth solver is left out (``penetration=False``: those lanes are marked, not answered).

Each triangle lies across a random direction from the box, its plane from 0.12 BT inside the box's
surface (past the margin: the lanes Bullet gives to EPA) to 0.15 BT beyond it (beyond the contact
breaking threshold of 0.08 BT grown by the margin: no contact), centred near the box's support point
along that direction or shifted off it, so GJK ends on corners, edges and faces of both shapes. Kernel
and reference evaluate the same float32 operations in the same order; the reference runs with a
correctly rounded sqrt (`twins.exact_sqrt`: PyTorch's CPU sqrt can be an ulp off, numpy's is not), and
then on the interpreter every output is equal to the bit."""

from __future__ import annotations

import math

import pytest
import torch

from nitro.envs.soccar.gjk_pair_detector import ConvexShape, gjk_closest_points
from nitro.envs.soccar.kernels import gjk_pair_detector as twin
from nitro.envs.soccar.rigid_body import basis_from_quat, quat_from_axis_angle
from tests.envs.soccar.kernels.twins import (
    DEVICE,
    NORMAL_TOL,
    assert_close,
    assert_same,
    exact_sqrt,
    runnable,
)

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable
PAIRS = 512
BLOCK = 256
"""Lanes per program: the pairs in two programs (the interpreter's cost is per operation, not per lane)."""
POINT_TOL = 2e-4
"""BT (0.01 UU): on a GPU the simplex's barycentric weights divide by small determinants, a few ulps
apart under contracted multiply-adds; exact on the interpreter (asserted with 0 there)."""


@triton.jit
def gjk_kernel(origin_ptr, basis_ptr, half_ptr, margin_ptr, tri_ptr, max2_ptr, out_ptr, n, BLOCK: tl.constexpr):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    basis = (load_vec(basis_ptr + lane * 9, live), load_vec(basis_ptr + lane * 9 + 3, live))
    basis = basis + (load_vec(basis_ptr + lane * 9 + 6, live),)
    tri = (load_vec(tri_ptr + lane * 9, live), load_vec(tri_ptr + lane * 9 + 3, live))
    tri = tri + (load_vec(tri_ptr + lane * 9 + 6, live),)
    found, normal, point, distance, deep = twin.gjk_closest_points(
        load_vec(origin_ptr + lane * 3, live), basis, load_vec(half_ptr + lane * 3, live),
        tl.load(margin_ptr + lane, mask=live, other=0.0), tri, tl.load(max2_ptr + lane, mask=live, other=0.0), live,
    )  # fmt: skip
    values = (found.to(tl.float32), deep.to(tl.float32)) + normal + point + (distance,)
    for k in tl.static_range(9):
        tl.store(out_ptr + lane * 9 + k, values[k], mask=live)


@triton.jit
def load_vec(ptr, live):
    return tl.load(ptr, mask=live, other=0.0), tl.load(ptr + 1, mask=live, other=0.0), tl.load(ptr + 2, mask=live, other=0.0)


def box_and_triangles(p: int, g: torch.Generator):
    """Octane-to-plank sized boxes (inner half extents, margin 0.04 BT) in any orientation, and one
    triangle each (see the module's docstring), BT."""
    half = torch.tensor([1.1, 0.8, 0.3]) + torch.rand(p, 3, generator=g) * torch.tensor([0.3, 0.1, 0.1])
    margin = torch.full((p,), 0.04)
    axis = torch.nn.functional.normalize(torch.randn(p, 3, generator=g), dim=-1)
    basis = basis_from_quat(quat_from_axis_angle(axis, torch.rand(p, generator=g) * 2 * math.pi))
    origin = torch.randn(p, 3, generator=g) * 20
    # the triangle's plane faces the box across a random direction (some along a box axis: faces lie flat)
    d = torch.nn.functional.normalize(torch.randn(p, 3, generator=g), dim=-1)
    flat = torch.rand(p, generator=g) < 0.25
    d = torch.where(flat[:, None], basis[:, :, 0] * torch.sign(torch.randn(p, 1, generator=g)), d)
    local = torch.einsum("pij,pi->pj", basis, d)
    corner = origin + torch.einsum("pij,pj->pi", basis, torch.where(local >= 0, half, -half))
    surface = corner + d * margin[:, None]
    gap = -0.12 + 0.27 * torch.rand(p, generator=g)
    u = torch.nn.functional.normalize(torch.linalg.cross(d, torch.randn(p, 3, generator=g)), dim=-1)
    v = torch.linalg.cross(d, u)
    centre = surface + d * gap[:, None] + (u * torch.randn(p, 1, generator=g) + v * torch.randn(p, 1, generator=g)) * 0.6
    size = 0.3 + 2.0 * torch.rand(p, 1, generator=g)
    angles = [2 * math.pi * k / 3 + torch.rand(p, 1, generator=g) for k in range(3)]
    tri = torch.stack([centre + (u * torch.cos(a) + v * torch.sin(a)) * size for a in angles], 1)
    # wound either way: the triangle's normal faces the box or away from it
    tri = torch.where((torch.rand(p, generator=g) < 0.5)[:, None, None], tri.flip(1), tri)
    return ConvexShape("box", origin, margin, basis=basis, half=half), tri


def test_box_against_triangles(monkeypatch):
    g = torch.Generator().manual_seed(21)
    box, tri = box_and_triangles(PAIRS, g)
    threshold = torch.full((PAIRS,), 0.08)
    max2 = (box.margin + threshold) ** 2
    triangle = ConvexShape("triangle", torch.zeros_like(tri[:, 0]), torch.zeros_like(tri[:, 0, 0]), tri=tri)
    with monkeypatch.context() as patch:
        patch.setattr(torch, "sqrt", exact_sqrt)
        hit = gjk_closest_points(box, triangle, max2, penetration=False)
    out = torch.empty(PAIRS, 9, device=DEVICE)
    args = (box.origin, box.basis, box.half, box.margin, tri, max2)
    gjk_kernel[(triton.cdiv(PAIRS, BLOCK),)](
        *(x.contiguous().to(DEVICE) for x in args), out, PAIRS, BLOCK=BLOCK, num_warps=BLOCK // 32
    )
    out = out.cpu()
    # the sample: contacts, no contact, and the lanes left to the penetration depth solver
    assert 0.2 * PAIRS < int(hit.found.sum()) < 0.8 * PAIRS
    assert 0.05 * PAIRS < int(hit.needs_penetration.sum()) < 0.4 * PAIRS
    same = assert_same(out[:, :2] != 0, torch.stack((hit.found, hit.needs_penetration), 1))
    rows = same & hit.found
    exact = DEVICE == "cpu"
    assert_close(out[:, 2:5], hit.normal, atol=0.0 if exact else NORMAL_TOL, rows=rows)
    assert_close(out[:, 5:8], hit.point_on_b, atol=0.0 if exact else POINT_TOL, rows=rows)
    assert_close(out[:, 8], hit.distance, atol=0.0 if exact else POINT_TOL, rows=rows)
