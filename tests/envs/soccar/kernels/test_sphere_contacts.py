"""`kernels/sphere_contacts.py` against `sphere_contacts.py`: the sphere-triangle contact, stage by stage."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar import sphere_contacts as reference
from nitro.envs.soccar.kernels import sphere_contacts as twin
from nitro.envs.soccar.kernels.vec import load, store
from tests.envs.soccar.kernels.twins import (
    BLOCK,
    DEVICE,
    NORMAL_TOL,
    VALUE_TOL,
    assert_close,
    assert_same,
    programs,
    runnable,
)

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable
R, GAP = C.BALL_COLLISION_RADIUS_SOCCAR, C.BALL_CONTACT_BREAKING_THRESHOLD


def balls_and_triangles(mesh, n: int, seed: int):
    """n (centre, triangle) pairs: half with the centre within reach of a random triangle (10 UU deep
    to 2 UU beyond the gap, along its normal, shifted sideways so every closest-point region occurs),
    half up to 300 UU away."""
    rng = np.random.default_rng(seed)
    tri = torch.from_numpy(rng.integers(0, mesh.num_triangles, n))
    v = mesh.tri_verts[tri]
    bary = torch.from_numpy(rng.dirichlet((1.0, 1.0, 1.0), n).astype(np.float32))
    on = (bary[:, :, None] * v).sum(1) + torch.from_numpy(rng.normal(0, 30, (n, 3)).astype(np.float32))
    along = torch.from_numpy(rng.uniform(R - 10.0, R + GAP + 2.0, n).astype(np.float32))
    along[n // 2 :] = torch.from_numpy(rng.uniform(-300, 300, n - n // 2).astype(np.float32))
    center = on + mesh.tri_normals[tri] * along[:, None]
    return center, v[:, 0].contiguous(), v[:, 1].contiguous(), v[:, 2].contiguous()


@triton.jit
def sphere_triangle_kernel(
    center_ptr,
    v0_ptr,
    v1_ptr,
    v2_ptr,
    radius,
    reach,
    closest_out,
    has_out,
    point_out,
    normal_out,
    depth_out,
    n,
    DEGENERATE_L2: tl.constexpr,
    SIMD_EPSILON: tl.constexpr,
    BLOCK: tl.constexpr,
):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    center = load(center_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    v0 = load(v0_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    v1 = load(v1_ptr + lane * 3, live, (1.0, 0.0, 0.0))
    v2 = load(v2_ptr + lane * 3, live, (0.0, 1.0, 0.0))
    store(closest_out + lane * 3, twin.closest_point_triangle(center, v0, v1, v2), live)
    has, point, normal, depth = twin.sphere_triangle_contact(
        center, v0, v1, v2, radius, reach, DEGENERATE_L2, SIMD_EPSILON
    )
    tl.store(has_out + lane, has.to(tl.int8), mask=live)
    store(point_out + lane * 3, point, live)
    store(normal_out + lane * 3, normal, live)
    tl.store(depth_out + lane, depth, mask=live)


def test_sphere_triangle_contact(mesh):
    n = 4 * BLOCK
    center, v0, v1, v2 = (x.to(DEVICE) for x in balls_and_triangles(mesh, n, seed=0))
    closest, point, normal = (torch.empty(n, 3, device=DEVICE) for _ in range(3))
    has, depth = torch.empty(n, dtype=torch.int8, device=DEVICE), torch.empty(n, device=DEVICE)
    sphere_triangle_kernel[programs(n)](
        center,
        v0,
        v1,
        v2,
        R,
        R + GAP,
        closest,
        has,
        point,
        normal,
        depth,
        n,
        DEGENERATE_L2=C.DEGENERATE_TRIANGLE_L2,
        SIMD_EPSILON=C.SIMD_EPSILON_UU2,
        BLOCK=BLOCK,
    )
    assert_close(closest, reference.closest_point_triangle(center, v0, v1, v2), atol=VALUE_TOL)
    ref_has, ref_point, ref_normal, ref_depth = reference.sphere_triangle_contact(center, v0, v1, v2, R, GAP)
    same = assert_same(has.bool(), ref_has)
    assert int(ref_has.sum()) >= n // 4  # the sample touches
    rows = same & ref_has.cpu()
    assert_close(point, ref_point, atol=VALUE_TOL, rows=rows)
    assert_close(normal, ref_normal, atol=NORMAL_TOL, rows=rows)
    assert_close(depth, ref_depth, atol=VALUE_TOL, rows=rows)
