"""The kernels' btAdjustInternalEdgeContacts: the twin of `internal_edge.py`."""

from __future__ import annotations

from nitro.envs.soccar.kernels import jit, tl
from nitro.envs.soccar.kernels.vec import add, atan2, cross, dot, neg, rotate, scale, sub, where


@jit
def edge_distance(p, a, b):
    """Distance from p to segment ab (btNearestPointInLineSegment)."""
    delta = sub(b, a)
    t = dot(sub(p, a), delta) / dot(delta, delta)
    t = tl.minimum(tl.maximum(t, 0.0), 1.0)
    e = sub(p, add(a, scale(delta, t)))
    return tl.sqrt(dot(e, e))


@jit
def adjust_internal_edge_contacts(
    normal,
    point,
    v0,
    v1,
    v2,
    tri_normal,
    edge_angle,
    edge_flags,
    MAX_ANGLE: tl.constexpr,
    EDGE_DISTANCE: tl.constexpr,
):
    """btAdjustInternalEdgeContacts: the contact normal at ``point`` of triangle (v0, v1, v2) (face
    normal ``tri_normal``, ``edge_angle`` a 3-tuple, ``edge_flags``), and whether it changed."""
    angle0, angle1, angle2 = edge_angle
    dist0 = edge_distance(point, v0, v1)
    dist1 = edge_distance(point, v1, v2)
    dist2 = edge_distance(point, v2, v0)
    has_neighbour0 = tl.abs(angle0) < MAX_ANGLE
    has_neighbour1 = tl.abs(angle1) < MAX_ANGLE
    has_neighbour2 = tl.abs(angle2) < MAX_ANGLE
    # bestedge: the nearest edge with a neighbour (strict <, so the lowest edge wins ties)
    big = 3.0e38
    key0 = tl.where(has_neighbour0, dist0, big)
    key1 = tl.where(has_neighbour1, dist1, big)
    key2 = tl.where(has_neighbour2, dist2, big)
    best = tl.where(key1 < key0, 1, 0)
    best_dist = tl.minimum(key0, key1)
    best = tl.where(key2 < best_dist, 2, best)
    best_dist = tl.minimum(best_dist, key2)
    has_neighbour = tl.where(best == 0, has_neighbour0, tl.where(best == 1, has_neighbour1, has_neighbour2))
    near = has_neighbour & (best_dist < EDGE_DISTANCE)
    angle = tl.where(best == 0, angle0, tl.where(best == 1, angle1, angle2))
    convex = ((edge_flags >> best) & 1) == 1  # TRI_INFO_V0V1_CONVEX << e
    swap_b = ((edge_flags >> (best + 3)) & 1) == 1  # TRI_INFO_V0V1_SWAP_NORMALB << e
    edge = where(best == 0, sub(v0, v1), where(best == 1, sub(v1, v2), sub(v2, v0)))  # v0 - v1, ...
    n_in = scale(normal, 1.0 / tl.sqrt(dot(normal, normal)))
    swap = tl.where(convex, 1.0, -1.0)
    n_a = scale(tri_normal, swap)
    computed_b = rotate(tri_normal, edge, angle)
    computed_b = where(swap_b, neg(computed_b), computed_b)
    back_facing = (dot(n_in, n_a) < 0) & (dot(n_in, scale(computed_b, swap)) < 0)
    concave = near & ((angle == 0) | back_facing)
    # btClampNormal: keep the normal inside the wedge the neighbour allows
    edge_cross = cross(edge, n_a)
    edge_cross = scale(edge_cross, 1.0 / tl.sqrt(dot(edge_cross, edge_cross)))
    cur = atan2(dot(normal, edge_cross), dot(normal, n_a))
    clamp = tl.where(angle < 0, cur < angle, cur > angle)
    clamped = rotate(normal, edge, angle - cur)
    use_clamp = near & (~concave) & clamp & (dot(clamped, tri_normal) > 0)
    use_face = concave & (dot(tri_normal, n_in) >= 0)  # single-sided: only from the front
    return where(use_face, tri_normal, where(use_clamp, clamped, normal)), use_clamp | use_face
