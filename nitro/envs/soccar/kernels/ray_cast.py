"""The kernels' ray cast (btTriangleRaycastCallback against the cell's triangles, then the planes):
the twin of `ray_cast.py`."""

from __future__ import annotations

import torch

from nitro.envs.soccar.arena_mesh import ArenaMesh
from nitro.envs.soccar.contacts import RayHits
from nitro.envs.soccar.kernels import jit, require_triton, tl, triton, triton_op, warps, wrap_triton
from nitro.envs.soccar.kernels.arena_mesh import cell_candidates, flat_tris, grid, grid_args
from nitro.envs.soccar.kernels.vec import add, cross, dot, load, load_uniform, scale, store, sub, where

BLOCK = 64  # rays per program


@jit
def ray_triangle_fraction(start, end, v0, v1, v2):
    """btTriangleRaycastCallback::processTriangle: (hit, fraction, unit normal facing ``start``).

    Two-sided; the edge test is tolerant by 1e-4 of |n|^2, as Bullet's."""
    n = cross(sub(v1, v0), sub(v2, v0))
    plane = dot(v0, n)
    dist_a = dot(n, start) - plane
    dist_b = dot(n, end) - plane
    crosses = dist_a * dist_b < 0
    fraction = dist_a / tl.where(crosses, dist_a - dist_b, 1.0)
    fraction = tl.where(crosses, fraction, 1.0)
    point = add(scale(start, 1 - fraction), scale(end, fraction))  # setInterpolate3
    tolerance = dot(n, n) * -0.0001
    p0, p1, p2 = sub(v0, point), sub(v1, point), sub(v2, point)
    inside = (
        (dot(cross(p0, p1), n) >= tolerance)
        & (dot(cross(p1, p2), n) >= tolerance)
        & (dot(cross(p2, p0), n) >= tolerance)
    )
    unit = 1.0 / tl.sqrt(dot(n, n))
    return crosses & inside, fraction, scale(n, tl.where(dist_a <= 0, -unit, unit))


@jit
def ray_cast(
    start,
    end,
    live,
    tri_ptr,
    plane_normals_ptr,
    plane_offsets_ptr,
    cell_start_ptr,
    cell_tris_ptr,
    grid,
    num_tris,
    NUM_PLANES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """The closest hit of each lane's segment start -> end: (hit, fraction, normal, feature); the
    triangles listed in the cell of the segment's midpoint, then the planes."""
    origin, cell_size, dims = grid
    best = tl.full([BLOCK], 3.0e38, tl.float32)
    feature = tl.full([BLOCK], -1, tl.int32)
    zero = tl.zeros([BLOCK], tl.float32)
    normal = (zero, zero, zero)
    midpoint = scale(add(start, end), 0.5)
    first, length = cell_candidates(midpoint, live, cell_start_ptr, origin, cell_size, dims)
    longest = tl.max(length, axis=0)
    j = 0
    while j < longest:
        valid = live & (j < length)
        tri = tl.load(cell_tris_ptr + first + j, mask=valid, other=0)
        v0 = load(tri_ptr + tri * 9, valid, (0.0, 0.0, 0.0))
        v1 = load(tri_ptr + tri * 9 + 3, valid, (0.0, 0.0, 0.0))
        v2 = load(tri_ptr + tri * 9 + 6, valid, (0.0, 0.0, 1.0))
        hit, fraction, tri_normal = ray_triangle_fraction(start, end, v0, v1, v2)
        take = valid & hit & (fraction < best)  # the first of equal fractions is kept
        best = tl.where(take, fraction, best)
        feature = tl.where(take, tri, feature)
        normal = where(take, tri_normal, normal)
        j += 1
    # Planes: Bullet casts against two triangles covering the plane; same hit, same flipped normal.
    for p in tl.static_range(NUM_PLANES):  # the planes come after the meshes (creation order)
        plane_normal = load_uniform(plane_normals_ptr + p * 3)
        plane_d = tl.load(plane_offsets_ptr + p)
        dist_a = dot(start, plane_normal) - plane_d
        dist_b = dot(end, plane_normal) - plane_d
        crosses = dist_a * dist_b < 0
        fraction = dist_a / tl.where(crosses, dist_a - dist_b, 1.0)
        take = live & crosses & (fraction < best)
        best = tl.where(take, fraction, best)
        feature = tl.where(take, num_tris + p, feature)
        normal = where(take, scale(plane_normal, tl.where(dist_a <= 0, -1.0, 1.0)), normal)
    hit = feature >= 0
    return hit, tl.where(hit, best, 1.0), normal, feature


@jit
def ray_cast_kernel(
    start_ptr,
    end_ptr,
    n,
    tri_ptr,
    plane_normals_ptr,
    plane_offsets_ptr,
    cell_start_ptr,
    cell_tris_ptr,
    ox0,
    oy0,
    oz0,
    cell_size,
    dim_x,
    dim_y,
    dim_z,
    num_tris,
    hit_out,
    fraction_out,
    normal_out,
    feature_out,
    NUM_PLANES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    arena_grid = grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
    num_tris = tl.cast(num_tris, tl.int32)
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    start = load(start_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    end = load(end_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    hit, fraction, normal, feature = ray_cast(
        start,
        end,
        live,
        tri_ptr,
        plane_normals_ptr,
        plane_offsets_ptr,
        cell_start_ptr,
        cell_tris_ptr,
        arena_grid,
        num_tris,
        NUM_PLANES,
        BLOCK,
    )
    tl.store(hit_out + lane, hit.to(tl.int8), mask=live)
    tl.store(fraction_out + lane, fraction, mask=live)
    store(normal_out + lane * 3, normal, mask=live)
    tl.store(feature_out + lane, feature, mask=live)


@triton_op("nitro::soccar_ray_cast", mutates_args={})
def ray_cast_op(
    start: torch.Tensor,
    end: torch.Tensor,
    tri: torch.Tensor,
    plane_normals: torch.Tensor,
    plane_offsets: torch.Tensor,
    cell_start: torch.Tensor,
    cell_tris: torch.Tensor,
    grid: list[float],
    num_tris: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    n = start.shape[0]
    dev = start.device
    hit = torch.empty(n, dtype=torch.int8, device=dev)
    fraction = torch.empty(n, device=dev)
    normal = torch.empty(n, 3, device=dev)
    feature = torch.empty(n, dtype=torch.int32, device=dev)
    wrap_triton(ray_cast_kernel)[(triton.cdiv(n, BLOCK),)](
        start,
        end,
        n,
        tri,
        plane_normals,
        plane_offsets,
        cell_start,
        cell_tris,
        grid[0],
        grid[1],
        grid[2],
        grid[3],
        int(grid[4]),
        int(grid[5]),
        int(grid[6]),
        num_tris,
        hit,
        fraction,
        normal,
        feature,
        NUM_PLANES=4,
        BLOCK=BLOCK,
        num_warps=warps(BLOCK),
    )
    return hit, fraction, normal, feature


def launch_ray_cast(mesh: ArenaMesh, start: torch.Tensor, end: torch.Tensor) -> RayHits:
    """`ray_cast.ray_cast` in one kernel launch."""
    require_triton()
    hit, fraction, normal, feature = ray_cast_op(
        start.contiguous(),
        end.contiguous(),
        flat_tris(mesh),
        mesh.plane_normals,
        mesh.plane_offsets,
        mesh.cell_start,
        mesh.cell_tris,
        grid_args(mesh),
        mesh.num_triangles,
    )
    return RayHits(hit=hit.bool(), fraction=fraction, normal=normal, feature=feature)
