"""btAdjustInternalEdgeContacts (Bullet's btInternalEdgeUtility.cpp, default flags), per tick.

RocketSim's contact-added callback runs it on every contact with a mesh triangle, so a body rolling
or sliding over a seam between two triangles of a smooth surface does not catch on the internal edge.
It reads the edge angles and flags computed at load (`arena_mesh.internal_edge_info`). The kernels'
twin is `kernels/internal_edge.py`.
"""

from __future__ import annotations

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.vec import constant, cross, dot, rotate

_INF = float("inf")


def adjust_internal_edge_contacts(
    normal,
    point,
    v0,
    v1,
    v2,
    tri_normal,
    edge_angle,
    edge_flags,
    forced_edge=None,
    edge_distance: float = C.INTERNAL_EDGE_DISTANCE_THRESHOLD,
):
    """btAdjustInternalEdgeContacts (default flags), over [...] contacts of triangles.

    A contact close to an edge shared with a neighbour gets a normal that the neighbour pair allows:
    near a flat or concave edge, the triangle's face normal (so a ball rolling over a seam of a smooth
    surface does not bump); near a convex edge, the normal clamped into the edge's wedge.
    ``normal`` points from the triangle into the other body, ``point`` is on the triangle;
    ``edge_distance`` is m_edgeDistanceThreshold in the units of the points (UU by default).
    Returns (normal, changed): ``changed`` marks where Bullet rewrote the normal. ``forced_edge`` [...] (0: v0v1,
    1: v1v2, 2: v2v0) forces the edge tested instead of the nearest one with a neighbour (the kernel
    checks use it for a point at a vertex, where two edges are both at distance 0).
    """
    seg_a = torch.stack((v0, v1, v2), -2)
    seg_b = torch.stack((v1, v2, v0), -2)
    delta = seg_b - seg_a
    t = dot(point[..., None, :] - seg_a, delta) / dot(delta, delta)
    nearest = seg_a + t.clamp(0, 1)[..., None] * delta  # btNearestPointInLineSegment
    gap = point[..., None, :] - nearest
    edge_dist = torch.sqrt(dot(gap, gap))  # [..., 3]
    has_neighbour = edge_angle.abs() < C.INTERNAL_EDGE_MAX_ANGLE
    # bestedge: the nearest edge with a neighbour (strict <, so the lowest edge wins ties)
    if forced_edge is None:
        best = torch.argmin(torch.where(has_neighbour, edge_dist, _INF), dim=-1, keepdim=True)
    else:
        best = forced_edge.expand(edge_dist.shape[:-1])[..., None].to(torch.int64)
    best_dist = edge_dist.gather(-1, best)[..., 0]
    near = has_neighbour.gather(-1, best)[..., 0] & (best_dist < edge_distance)
    angle = edge_angle.gather(-1, best)[..., 0]
    bit = constant((0, 1, 2), best.device, torch.int64).gather(0, best.reshape(-1)).reshape(best.shape)[..., 0]
    convex = ((edge_flags >> bit) & 1) == 1  # TRI_INFO_V0V1_CONVEX << e
    swap_b = ((edge_flags >> (bit + 3)) & 1) == 1  # TRI_INFO_V0V1_SWAP_NORMALB << e
    edge = -delta.gather(-2, best[..., None].expand(*best.shape[:-1], 1, 3))[..., 0, :]  # v0 - v1, ...
    n_in = normal / torch.linalg.vector_norm(normal, dim=-1, keepdim=True)
    swap = torch.where(convex, 1.0, -1.0)[..., None]
    n_a = swap * tri_normal
    computed_b = rotate(tri_normal, edge, angle)
    n_b = swap * torch.where(swap_b[..., None], -computed_b, computed_b)
    back_facing = (dot(n_in, n_a) < 0) & (dot(n_in, n_b) < 0)
    concave = near & ((angle == 0) | back_facing)
    # btClampNormal: keep the normal inside the wedge the neighbour allows
    edge_cross = cross(edge, n_a)
    edge_cross = edge_cross / torch.linalg.vector_norm(edge_cross, dim=-1, keepdim=True)
    cur = torch.atan2(dot(normal, edge_cross), dot(normal, n_a))
    clamp = torch.where(angle < 0, cur < angle, cur > angle)
    clamped = rotate(normal, edge, angle - cur)
    use_clamp = near & ~concave & clamp & (dot(clamped, tri_normal) > 0)
    out = torch.where(use_clamp[..., None], clamped, normal)
    use_face = concave & (dot(tri_normal, n_in) >= 0)  # single-sided: only from the front
    return torch.where(use_face[..., None], tri_normal.expand_as(out), out), use_clamp | use_face
