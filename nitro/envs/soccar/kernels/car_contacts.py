"""The fused kernel's stand-in contacts per lane: the twin of `car_contacts.py`, the same functions.

A car's hitbox is (inner, margin, offset) in Bullet units, `CarParams.hitbox`'s (`hitbox_table`);
rotations are row tuples ((m00, m01, m02), ...), columns forward, right, up. `car_car_contacts`
returns a pair's `CAR_CAR_POINTS` points as tuples: (is_contact, local_point_a, local_point_b).
"""

from __future__ import annotations

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car_config import CarParams
from nitro.envs.soccar.kernels import constexpr, jit, tl
from nitro.envs.soccar.kernels.rigid_body import column, mat_vec
from nitro.envs.soccar.kernels.vec import add, cross, dot, load_uniform, scale, sub, where

UU_TO_BT = constexpr(C.UU_TO_BT)
BT_TO_UU = constexpr(C.BT_TO_UU)
SIMD_EPSILON = constexpr(C.SIMD_EPSILON)
AXIS_EPSILON = constexpr(1e-6)
NEG_INF = constexpr(-float("inf"))
HITBOX_TABLE_WIDTH = constexpr(8)
"""Floats per car in `hitbox_table`: inner (3), margin, offset (3), threshold (BT)."""


def hitbox_table(params: CarParams) -> torch.Tensor:
    """The cars' hitboxes as the kernels read them: [C, HITBOX_TABLE_WIDTH] float32."""
    h = params.hitbox
    return torch.cat((h.inner, h.margin[:, None], h.offset, h.threshold[:, None]), 1).contiguous()


@jit
def load_hitbox(hitbox_table_ptr, car: tl.constexpr):
    """Car ``car``'s (inner, margin, offset, threshold), the same for every lane."""
    base = hitbox_table_ptr + car * HITBOX_TABLE_WIDTH
    return load_uniform(base), tl.load(base + 3), load_uniform(base + 4), tl.load(base + 7)


@jit
def car_ball_hits(ball_pos, car_pos, rot_mat, hitbox, ball_contact_gap, ball_radius, frozen):
    """btSphereBoxCollisionAlgorithm::getSphereDistance of the ball against one car's hitbox:
    (is_hit, the contact point on the ball relative to its centre, UU)."""
    inner, margin, offset, car_threshold = hitbox
    origin = add(scale(car_pos, UU_TO_BT), mat_vec(rot_mat, offset))
    center = scale(ball_pos, UU_TO_BT)
    d = sub(center, origin)
    rel = (dot(column(rot_mat, 0), d), dot(column(rot_mat, 1), d), dot(column(rot_mat, 2), d))
    closest = (
        tl.maximum(tl.minimum(rel[0], inner[0]), -inner[0]),
        tl.maximum(tl.minimum(rel[1], inner[1]), -inner[1]),
        tl.maximum(tl.minimum(rel[2], inner[2]), -inner[2]),
    )
    radius = ball_radius * UU_TO_BT
    intersection_dist = radius + margin
    contact_dist = intersection_dist + tl.minimum(car_threshold, ball_contact_gap * UU_TO_BT)
    normal = sub(rel, closest)
    dist2 = dot(normal, normal)
    touching = (dist2 <= contact_dist * contact_dist) & (~frozen)
    inside = dist2 <= SIMD_EPSILON
    distance = tl.sqrt(tl.where(inside, 1.0, dist2))
    normal = (normal[0] / distance, normal[1] / distance, normal[2] / distance)
    # the ball's centre inside the box: out through the nearest face (getSpherePenetration), faces
    # +x, +y, +z, -x, -y, -z, the first of equal distances
    face_dist = inner[0] - rel[0]
    face_normal = (1.0, 0.0, 0.0)
    face_point = (inner[0], rel[1], rel[2])
    dist = inner[1] - rel[1]
    better = dist < face_dist
    face_dist, face_normal, face_point = _face(better, dist, (0.0, 1.0, 0.0), (rel[0], inner[1], rel[2]), face_dist, face_normal, face_point)
    dist = inner[2] - rel[2]
    better = dist < face_dist
    face_dist, face_normal, face_point = _face(better, dist, (0.0, 0.0, 1.0), (rel[0], rel[1], inner[2]), face_dist, face_normal, face_point)
    dist = inner[0] + rel[0]
    better = dist < face_dist
    face_dist, face_normal, face_point = _face(better, dist, (-1.0, 0.0, 0.0), (-inner[0], rel[1], rel[2]), face_dist, face_normal, face_point)
    dist = inner[1] + rel[1]
    better = dist < face_dist
    face_dist, face_normal, face_point = _face(better, dist, (0.0, -1.0, 0.0), (rel[0], -inner[1], rel[2]), face_dist, face_normal, face_point)
    dist = inner[2] + rel[2]
    better = dist < face_dist
    face_dist, face_normal, face_point = _face(better, dist, (0.0, 0.0, -1.0), (rel[0], rel[1], -inner[2]), face_dist, face_normal, face_point)
    normal = where(inside, face_normal, normal)
    distance = tl.where(inside, -face_dist, distance)
    closest = where(inside, face_point, closest)
    point_on_box = add(closest, scale(normal, margin))
    depth = distance - intersection_dist
    point_on_ball = add(mat_vec(rot_mat, point_on_box), origin)
    point_on_ball = add(point_on_ball, scale(mat_vec(rot_mat, normal), depth))
    return touching, scale(sub(point_on_ball, center), BT_TO_UU)


@jit
def _face(better, dist, normal, point, face_dist, face_normal, face_point):
    """getSpherePenetration's step: take the face ``dist`` away where it is nearer."""
    return tl.where(better, dist, face_dist), where(better, normal, face_normal), where(better, point, face_point)


@jit
def _box(car_pos, rot_mat, hitbox):
    """A hitbox in UU: its centre and its half extents with the margin."""
    inner, margin, offset, _ = hitbox
    half = scale(add(inner, (margin, margin, margin)), BT_TO_UU)
    return add(car_pos, mat_vec(rot_mat, scale(offset, BT_TO_UU))), half


@jit
def _separation(ca, ra, ha, cb, rb, hb):
    """The largest gap between two oriented boxes over the 15 separating axes (the reference's)."""
    best = ca[0] * 0.0 + NEG_INF
    for s in tl.static_range(15):
        if s < 3:
            axis = column(ra, s)
        elif s < 6:
            axis = column(rb, s - 3)
        else:
            axis = cross(column(ra, (s - 6) // 3), column(rb, (s - 6) % 3))
        length = tl.sqrt(dot(axis, axis))
        usable = length > AXIS_EPSILON
        safe = tl.where(usable, length, 1.0)
        axis = (axis[0] / safe, axis[1] / safe, axis[2] / safe)
        distance = tl.abs(dot(axis, sub(cb, ca)))
        reach_a = (tl.abs(dot(axis, column(ra, 0))) * ha[0] + tl.abs(dot(axis, column(ra, 1))) * ha[1]) + tl.abs(
            dot(axis, column(ra, 2))
        ) * ha[2]
        reach_b = (tl.abs(dot(axis, column(rb, 0))) * hb[0] + tl.abs(dot(axis, column(rb, 1))) * hb[1]) + tl.abs(
            dot(axis, column(rb, 2))
        ) * hb[2]
        gap = distance - reach_a - reach_b
        best = tl.where(usable, tl.maximum(best, gap), best)
    return best


@jit
def _corners(center, rot, half):
    """The box's 8 corners, the reference's order (signs of itertools.product((-1, 1), repeat=3))."""
    out = ()
    for k in tl.static_range(8):
        signed = (half[0] * (2.0 * (k // 4) - 1.0), half[1] * (2.0 * ((k // 2) % 2) - 1.0), half[2] * (2.0 * (k % 2) - 1.0))
        out = out + (add(center, mat_vec(rot, signed)),)
    return out


@jit
def _inside_depth(point, center, rot, half):
    """How far the point lies inside the box (the reference's `_inside_depth`)."""
    d = sub(point, center)
    local = (dot(column(rot, 0), d), dot(column(rot, 1), d), dot(column(rot, 2), d))
    return tl.minimum(tl.minimum(half[0] - tl.abs(local[0]), half[1] - tl.abs(local[1])), half[2] - tl.abs(local[2]))


@jit
def car_car_contacts(pos_a, rot_a, hitbox_a, frozen_a, pos_b, rot_b, hitbox_b, frozen_b):
    """One car pair's contact points (see `car_contacts.car_car_contacts`): two tuples of
    (is_contact, local_point_a, local_point_b), UU: car a's deepest corner inside b, then b's inside a."""
    ca, ha = _box(pos_a, rot_a, hitbox_a)
    cb, hb = _box(pos_b, rot_b, hitbox_b)
    touching = (_separation(ca, rot_a, ha, cb, rot_b, hb) < 0) & (~frozen_a) & (~frozen_b)
    depth_a, corner_a = _deepest_corner(ca, rot_a, ha, cb, rot_b, hb)
    depth_b, corner_b = _deepest_corner(cb, rot_b, hb, ca, rot_a, ha)
    inside_a = depth_a >= 0
    inside_b = depth_b >= 0
    neither = (~inside_a) & (~inside_b)
    first = where(neither, scale(add(corner_a, corner_b), 0.5), corner_a)
    return (
        (touching & (inside_a | neither), _local(first, pos_a, rot_a), _local(first, pos_b, rot_b)),
        (touching & inside_b, _local(corner_b, pos_a, rot_a), _local(corner_b, pos_b, rot_b)),
    )


@jit
def _deepest_corner(center, rot, half, other_center, other_rot, other_half):
    """The box's corner deepest inside the other box (the first of equal depths) and its depth."""
    corners = _corners(center, rot, half)
    best = _inside_depth(corners[0], other_center, other_rot, other_half)
    corner = corners[0]
    for k in tl.static_range(1, 8):
        depth = _inside_depth(corners[k], other_center, other_rot, other_half)
        better = depth > best
        best = tl.where(better, depth, best)
        corner = where(better, corners[k], corner)
    return best, corner


@jit
def _local(point, pos, rot):
    """A world point in a car's frame (from its origin), UU."""
    d = sub(point, pos)
    return dot(column(rot, 0), d), dot(column(rot, 1), d), dot(column(rot, 2), d)
