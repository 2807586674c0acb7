"""`kernels/ray_cast.py` against `ray_cast.py`: `ray_triangle_fraction` (btTriangleRaycastCallback) and
the whole query, on the shared grid and on the wheel rays' (on a GPU also by `kernel_checks`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nitro.envs.soccar import ray_cast as reference
from nitro.envs.soccar.arena_mesh import load_arena_mesh
from nitro.envs.soccar.kernels import ray_cast as twin
from nitro.envs.soccar.kernels.arena import RAY_GRID_CELL, RAY_GRID_RADIUS
from nitro.envs.soccar.kernels.arena_mesh import flat_tris, grid_args
from nitro.envs.soccar.kernels.vec import load, store
from tests.envs.soccar.kernels.kernel_checks import query_points
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


@triton.jit
def ray_triangle_kernel(
    start_ptr, end_ptr, v0_ptr, v1_ptr, v2_ptr, hit_out, fraction_out, normal_out, n, BLOCK: tl.constexpr
):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    hit, fraction, normal = twin.ray_triangle_fraction(
        load(start_ptr + lane * 3, live, (0.0, 0.0, 1.0)),
        load(end_ptr + lane * 3, live, (0.0, 0.0, -1.0)),
        load(v0_ptr + lane * 3, live, (0.0, 0.0, 0.0)),
        load(v1_ptr + lane * 3, live, (1.0, 0.0, 0.0)),
        load(v2_ptr + lane * 3, live, (0.0, 1.0, 0.0)),
    )
    tl.store(hit_out + lane, hit.to(tl.int8), mask=live)
    tl.store(fraction_out + lane, fraction, mask=live)
    store(normal_out + lane * 3, normal, live)


def test_ray_triangle_fraction(mesh):
    """Rays from 0-60 UU off random triangles, 100 UU long in random directions, against that triangle."""
    n = 4 * BLOCK
    rng = np.random.default_rng(22)
    tri = torch.from_numpy(rng.integers(0, mesh.num_triangles, n))
    start = query_points(mesh, n, 22, 0.0, 60.0)[:n]
    v = mesh.tri_verts[tri]
    # aim at the triangle's centroid, scattered, so half the rays hit
    aim = v.mean(1) + torch.from_numpy(rng.normal(0, 40, (n, 3)).astype(np.float32)) - start
    end = start + torch.nn.functional.normalize(aim, dim=1) * 100.0
    inputs = [x.contiguous().to(DEVICE) for x in (start, end, v[:, 0], v[:, 1], v[:, 2])]
    hit, fraction = torch.empty(n, dtype=torch.int8, device=DEVICE), torch.empty(n, device=DEVICE)
    normal = torch.empty(n, 3, device=DEVICE)
    ray_triangle_kernel[programs(n)](*inputs, hit, fraction, normal, n, BLOCK=BLOCK)
    ref_hit, ref_fraction, ref_normal = reference.ray_triangle_fraction(start, end, v[:, 0], v[:, 1], v[:, 2])
    same = assert_same(hit.bool(), ref_hit)
    assert int(ref_hit.sum()) >= n // 8 and int((~ref_hit).sum()) >= n // 8
    # fraction of a 100-UU segment: VALUE_TOL UU of it
    assert_close(fraction, ref_fraction, atol=VALUE_TOL / 100, rows=same)
    assert_close(normal, ref_normal, atol=NORMAL_TOL, rows=same & ref_hit)


@pytest.mark.parametrize("grid", ["shared", "wheel rays"])
def test_ray_cast_query(mesh, grid):
    """The whole query (the list of the cell holding the segment's midpoint, then the planes) against
    the reference, on the shared grid and on the wheel rays' (`kernels/arena.ray_grid`): segments from
    near the surfaces, up to twice the grid's query radius long. The lanes walk the same triangles in
    the same order, so hit, feature and fraction are the reference's on the interpreter."""
    if grid == "wheel rays":
        mesh = load_arena_mesh(mesh.folder, query_radius=RAY_GRID_RADIUS, cell_size=RAY_GRID_CELL)
    n = 8 * BLOCK
    rng = np.random.default_rng(23)
    start = query_points(mesh, n, 23, 0.0, 40.0)[:n]
    direction = torch.from_numpy(rng.normal(size=(n, 3)).astype(np.float32))
    direction = direction / direction.norm(dim=1, keepdim=True)
    length = torch.from_numpy(rng.uniform(10, 2 * mesh.query_radius, (n, 1)).astype(np.float32))
    end = start + direction * length
    hit, fraction = torch.empty(n, dtype=torch.int8, device=DEVICE), torch.empty(n, device=DEVICE)
    normal, feature = torch.empty(n, 3, device=DEVICE), torch.empty(n, dtype=torch.int32, device=DEVICE)
    device_mesh = mesh.to(DEVICE)
    ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z = grid_args(device_mesh)
    twin.ray_cast_kernel[programs(n)](
        start.contiguous().to(DEVICE), end.contiguous().to(DEVICE), n, flat_tris(device_mesh),
        device_mesh.plane_normals, device_mesh.plane_offsets, device_mesh.cell_start, device_mesh.cell_tris,
        ox0, oy0, oz0, cell_size, int(dim_x), int(dim_y), int(dim_z), mesh.num_triangles, hit, fraction, normal,
        feature, NUM_PLANES=mesh.num_planes, BLOCK=BLOCK,
    )  # fmt: skip
    ref = reference.ray_cast(mesh, start, end, use_kernels=False)
    assert int(ref.hit.sum()) >= n // 8 and int((~ref.hit).sum()) >= n // 8
    got = torch.stack((hit.long(), feature.long()), 1)
    same = assert_same(got, torch.stack((ref.hit.long(), ref.feature.long()), 1))
    assert_close(fraction, ref.fraction, atol=VALUE_TOL / 100, rows=same)
    assert_close(normal, ref.normal, atol=NORMAL_TOL, rows=same & ref.hit)
