"""Ray casts against the arena (the wheels' suspension rays): the closest hit of a segment, Bullet's
btTriangleRaycastCallback against the mesh's triangles and RocketSim's planes.

Reference: Bullet 3.24 (btRaycastCallback.cpp, btCollisionWorld::rayTest) as RocketSim runs it. The
kernels' twin is `kernels/ray_cast.py`.
"""

from __future__ import annotations

import torch

from nitro.envs.soccar import kernels
from nitro.envs.soccar.arena_mesh import ArenaMesh, cell_candidates
from nitro.envs.soccar.contacts import RayHits
from nitro.envs.soccar.kernels import ray_cast as ray_cast_kernels
from nitro.envs.soccar.vec import cross, dot

_INF = float("inf")


def ray_triangle_fraction(start, end, v0, v1, v2):
    """btTriangleRaycastCallback::processTriangle, broadcast: (hit [...], fraction [...], normal [..., 3]).

    Two-sided; the edge test is tolerant by 1e-4 of |n|^2, as Bullet's. The normal faces ``start``.
    """
    n = cross(v1 - v0, v2 - v0)
    plane = dot(v0, n)
    dist_a = dot(n, start) - plane
    dist_b = dot(n, end) - plane
    crosses = dist_a * dist_b < 0
    fraction = dist_a / torch.where(crosses, dist_a - dist_b, 1)
    point = start * (1 - fraction)[..., None] + end * fraction[..., None]  # setInterpolate3
    tolerance = dot(n, n) * -0.0001
    p0, p1, p2 = v0 - point, v1 - point, v2 - point
    inside = (
        (dot(cross(p0, p1), n) >= tolerance)
        & (dot(cross(p1, p2), n) >= tolerance)
        & (dot(cross(p2, p0), n) >= tolerance)
    )
    unit = n / torch.linalg.vector_norm(n, dim=-1, keepdim=True)
    normal = torch.where((dist_a <= 0)[..., None], -unit, unit)
    return crosses & inside, torch.where(crosses, fraction, 1.0), normal


def ray_cast(
    mesh: ArenaMesh, start: torch.Tensor, end: torch.Tensor, use_kernels: bool | None = None
) -> RayHits:
    """Closest hit of segments start [N, 3] -> end [N, 3] (UU) with the arena's triangles and planes:
    the list of the cell holding the segment's midpoint, then the planes. On CUDA a Triton kernel
    (when Triton is importable); ``use_kernels`` forces the kernel or this PyTorch reference.

    Segments must be at most twice ``mesh.query_radius`` long: every point of a segment lies within
    half its length of the midpoint, and the midpoint's cell lists every triangle within the query
    radius of it (wheel rays are 48-52 UU).
    """
    if kernels.use_kernels(start, use_kernels):
        return ray_cast_kernels.launch_ray_cast(mesh, start, end)
    n = start.shape[0]
    ids, valid = cell_candidates(mesh, (start + end) * 0.5)
    v = mesh.tri_verts[ids]
    s, e = start[:, None, :], end[:, None, :]
    hit, fraction, normal = ray_triangle_fraction(s, e, v[..., 0, :], v[..., 1, :], v[..., 2, :])
    hit = hit & valid
    # Planes: Bullet casts against two triangles covering the plane; same hit, same flipped normal.
    pn = mesh.plane_normals.expand(n, -1, -1)
    da = start @ mesh.plane_normals.T - mesh.plane_offsets
    db = end @ mesh.plane_normals.T - mesh.plane_offsets
    p_hit = da * db < 0
    p_fraction = torch.where(p_hit, da / torch.where(p_hit, da - db, 1), 1.0)
    p_normal = torch.where((da <= 0)[..., None], -pn, pn)
    # Meshes are visited before the planes (creation order); the first of equal fractions is kept.
    all_hit = torch.cat((hit, p_hit), 1)
    all_fraction = torch.where(all_hit, torch.cat((fraction, p_fraction), 1), _INF)
    plane_ids = mesh.num_triangles + torch.arange(mesh.num_planes, device=start.device).expand(n, -1)
    all_feature = torch.cat((ids, plane_ids), 1)
    best = torch.argmin(all_fraction, dim=1, keepdim=True)
    any_hit = all_hit.any(1)
    return RayHits(
        hit=any_hit,
        fraction=torch.where(any_hit, all_fraction.gather(1, best)[:, 0], 1.0),
        normal=torch.where(
            any_hit[:, None],
            torch.cat((normal, p_normal), 1).gather(1, best[..., None].expand(-1, -1, 3))[:, 0],
            0.0,
        ),
        feature=torch.where(any_hit, all_feature.gather(1, best)[:, 0], -1).to(torch.int32),
    )
