"""The fused kernel's car-ball contacts, its solve of the contacts between bodies and its car body
against the arena, per lane: the twin of `car_contacts.py`, the same functions (the car pairs' points
are `kernels/car_car.py`'s).

A car's hitbox is (inner, margin, offset) in Bullet units, `CarParams.hitbox`'s (`hitbox_table`);
rotations are row tuples ((m00, m01, m02), ...), columns forward, right, up.
"""

from __future__ import annotations

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car_config import CarParams
from nitro.envs.soccar.kernels import constexpr, jit, tl
from nitro.envs.soccar.kernels.arena_mesh import cell_candidates
from nitro.envs.soccar.kernels.box_contacts import box_radius, box_triangle_separation
from nitro.envs.soccar.kernels.gjk_pair_detector import gjk_closest_points
from nitro.envs.soccar.kernels.internal_edge import adjust_internal_edge_contacts
from nitro.envs.soccar.kernels.manifolds import add_manifold_point, fill4, fill16, in_slot
from nitro.envs.soccar.kernels.rigid_body import INV_MASS, column, inv_inertia_world, mat_vec
from nitro.envs.soccar.kernels.sequential_impulse import clamp_impulse, row_impulse, setup_rows, simd_dot3
from nitro.envs.soccar.kernels.sphere_contacts import closest_point_triangle
from nitro.envs.soccar.kernels.vec import (
    add, dot, load, load_row, load_uniform, neg, pick, pick3, put3, scale, store_row, sub, where,
)
from nitro.envs.soccar.vec import BOX_SUPPORT_TIE as _BOX_SUPPORT_TIE

UU_TO_BT = constexpr(C.UU_TO_BT)
BT_TO_UU = constexpr(C.BT_TO_UU)
SIMD_EPSILON = constexpr(C.SIMD_EPSILON)
BOX_SUPPORT_TIE = constexpr(_BOX_SUPPORT_TIE)
SOLVER_ERP2 = constexpr(float(np.float32(C.SOLVER_ERP2)))
RESTITUTION_THRESHOLD_BT = constexpr(C.SOLVER_RESTITUTION_VELOCITY_THRESHOLD * C.UU_TO_BT_F32)
FLOAT32_EPSILON = constexpr(float(np.finfo(np.float32).eps))
SQRT12 = constexpr(float(np.sqrt(np.float32(0.5))))
TRI_SCREEN = constexpr(0.05)
"""UU added to the triangle-plane screen of `car_world_contacts`: the precomputed normals agree with
the triangles' own to ~2e-7 over lever arms under 8,200 UU, so no triangle within reach is skipped."""
HITBOX_TABLE_WIDTH = constexpr(17)
"""Floats per car in `hitbox_table`: inner (3), margin, offset (3), threshold, the body's inverse local
inertia (3; BT, as Bullet's solver body has it), the compound's local AABB (min (3), max (3))."""


def hitbox_table(params: CarParams) -> torch.Tensor:
    """The cars' hitboxes as the kernels read them: [C, HITBOX_TABLE_WIDTH] float32."""
    h = params.hitbox
    parts = (h.inner, h.margin[:, None], h.offset, h.threshold[:, None], h.inv_inertia_local, h.local_min, h.local_max)
    return torch.cat(parts, 1).contiguous()


@jit
def load_hitbox(hitbox_table_ptr, car):
    """Car slot ``car``'s (inner, margin, offset, threshold), the same for every lane."""
    base = hitbox_table_ptr + car * HITBOX_TABLE_WIDTH
    return load_uniform(base), tl.load(base + 3), load_uniform(base + 4), tl.load(base + 7)


@jit
def load_box(hitbox_table_ptr, car):
    """`load_hitbox` and the compound's local AABB (local_min, local_max), as `kernels/car_car` takes
    a hitbox."""
    base = hitbox_table_ptr + car * HITBOX_TABLE_WIDTH
    return load_hitbox(hitbox_table_ptr, car) + (load_uniform(base + 11), load_uniform(base + 14))


@jit
def box_sphere_radius(hitbox):
    """The radius of the car box's bounding sphere about the box's centre, margin included, BT."""
    inner, margin, _, _ = hitbox
    extent = add(inner, (margin, margin, margin))
    return tl.sqrt(dot(extent, extent))


@jit
def bounding_radius(hitbox):
    """How far from the car's origin its box reaches, BT: the box's bounding sphere about its centre
    (`box_sphere_radius`), and the centre's offset from the origin."""
    offset = hitbox[2]
    return box_sphere_radius(hitbox) + tl.sqrt(dot(offset, offset))


@jit
def load_inv_inertia(hitbox_table_ptr, car):
    """Car slot ``car``'s body's inverse local inertia in Bullet units (`CarHitbox.inv_inertia_local`)."""
    return load_uniform(hitbox_table_ptr + car * HITBOX_TABLE_WIDTH + 8)


@jit
def car_ball_contacts(ball_pos, car_pos, rot_mat, hitbox, ball_contact_gap, ball_radius, frozen):
    """btSphereBoxCollisionAlgorithm::getSphereDistance of the ball against one car's hitbox
    (`car_contacts.car_ball_contacts`): (touched, the contact point on the ball relative to its
    centre in UU (the hit's relPos), and the solver's row in BT: the normal from the ball into the
    car, the point on the car from the car's origin, the point on the ball from its centre, the
    depth)."""
    inner, margin, offset, car_threshold = hitbox
    car_bt = scale(car_pos, UU_TO_BT)
    origin = add(car_bt, mat_vec(rot_mat, offset))
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
    point_on_car = add(mat_vec(rot_mat, point_on_box), origin)
    world_normal = mat_vec(rot_mat, normal)  # from the car into the ball
    point_on_ball = add(point_on_car, scale(world_normal, depth))
    on_ball = sub(point_on_ball, center)
    return touching, scale(on_ball, BT_TO_UU), neg(world_normal), sub(point_on_car, car_bt), on_ball, depth


@jit
def _face(better, dist, normal, point, face_dist, face_normal, face_point):
    """getSpherePenetration's step: take the face ``dist`` away where it is nearer."""
    return tl.where(better, dist, face_dist), where(better, normal, face_normal), where(better, point, face_point)


# --- The car body against the arena ---------------------------------------------------------------


@jit
def deepest_corner(center, rot, half, direction):
    """btBoxShape::localGetSupportingVertex: the box's corner furthest along ``direction``."""
    signed = (
        tl.where(dot(column(rot, 0), direction) >= 0, half[0], -half[0]),
        tl.where(dot(column(rot, 1), direction) >= 0, half[1], -half[1]),
        tl.where(dot(column(rot, 2), direction) >= 0, half[2], -half[2]),
    )
    return add(center, mat_vec(rot, signed))


@jit
def box_support(center, rot, half, direction):
    """`vec.box_support`: the box's points furthest along ``direction``, averaged where a face or edge
    ties."""
    along = (dot(column(rot, 0), direction), dot(column(rot, 1), direction), dot(column(rot, 2), direction))
    signed = (
        tl.where(tl.abs(along[0]) <= BOX_SUPPORT_TIE, 0.0, tl.where(along[0] > 0, half[0], -half[0])),
        tl.where(tl.abs(along[1]) <= BOX_SUPPORT_TIE, 0.0, tl.where(along[1] > 0, half[1], -half[1])),
        tl.where(tl.abs(along[2]) <= BOX_SUPPORT_TIE, 0.0, tl.where(along[2] > 0, half[2], -half[2])),
    )
    return add(center, mat_vec(rot, signed))


@jit
def box_triangle_contacts(center, rot_mat, hitbox, v0, v1, v2, live, BLOCK: tl.constexpr):
    """`car_contacts.box_triangle_contacts` for one triangle per lane: Bullet's GJK on the box grown by
    its margin (`gjk_pair_detector.gjk_closest_points`, Bullet units), the inner box's separating axes
    where Bullet would run EPA. (has, normal from the triangle into the box, point on the triangle UU,
    signed distance UU)."""
    inner, margin, _, threshold = hitbox
    tri = (scale(v0, UU_TO_BT), scale(v1, UU_TO_BT), scale(v2, UU_TO_BT))
    grown = margin + threshold
    found, normal, point_b, distance, deep = gjk_closest_points(
        scale(center, UU_TO_BT), rot_mat, inner, margin, tri, grown * grown, live
    )
    has = found & (distance <= threshold)
    point_b = scale(point_b, BT_TO_UU)
    distance = distance * BT_TO_UU
    if tl.max(deep.to(tl.int32), axis=0) > 0:  # the inner box's separating axes where GJK stopped
        half = scale(inner, BT_TO_UU)
        axes = (column(rot_mat, 0), column(rot_mat, 1), column(rot_mat, 2))
        sep, axis = box_triangle_separation((center, axes, half), v0, v1, v2, BLOCK)
        sep = sep - margin * BT_TO_UU
        has = tl.where(deep, sep <= threshold * BT_TO_UU, has)
        normal = where(deep, axis, normal)
        point_b = where(deep, closest_point_triangle(box_support(center, rot_mat, half, neg(axis)), v0, v1, v2), point_b)
        distance = tl.where(deep, sep, distance)
    return has, normal, point_b, distance


@jit
def car_world_contacts(
    car_pos, rot_mat, hitbox, alive, arena, grid,
    NUM_PLANES: tl.constexpr, PLANE_BASE: tl.constexpr, MAX_ANGLE: tl.constexpr, EDGE_DISTANCE: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """One car body's contact manifolds with the arena (`car_contacts.car_world_contacts`), one car per
    lane: the manifolds (`kernels/manifolds.py`'s layout, offsets and depths in BT, no arena points),
    whether it touched (worldContact.hasContact) and the last point's normal before smoothing."""
    manifolds, found, last = no_contacts(BLOCK)
    manifolds, found, last = mesh_contacts(
        car_pos, rot_mat, hitbox, alive, arena, grid, manifolds, found, last, MAX_ANGLE, EDGE_DISTANCE, BLOCK
    )
    return plane_contacts(
        car_pos, rot_mat, hitbox, alive, arena, manifolds, found, last, NUM_PLANES, PLANE_BASE, BLOCK
    )


@jit
def mesh_contacts(car_pos, rot_mat, hitbox, alive, arena, grid, manifolds, found, last, MAX_ANGLE: tl.constexpr,
                  EDGE_DISTANCE: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """`car_world_contacts`' mesh triangles, each lane walking its own car's cell: the points join
    ``manifolds`` (found counts them, last holds the last one's raw normal)."""
    tri_ptr, tri_bounds_ptr, cell_start_ptr, cell_tris_ptr = arena[0], arena[1], arena[7], arena[8]
    center, axes, half, threshold = car_box(car_pos, rot_mat, hitbox)
    # the cell's triangles, in Bullet's visiting order. Each lane walks its own list with a cursor to
    # its next triangle within reach (`next_near_triangle`), then the lanes that found one run GJK
    # together: a warp runs GJK as often as its lane with the most such triangles, not once for every
    # triangle some lane reaches (the lanes of a warp meet the arena in different places)
    start, length = cell_candidates(center, alive, cell_start_ptr, grid[0], grid[1], grid[2])
    length = tl.where(alive, length, 0)
    j = tl.zeros([BLOCK], tl.int32)
    while tl.max((j < length).to(tl.int32), axis=0) > 0:
        near, j, tri, v0, v1, v2 = next_near_triangle(
            center, axes, half, threshold, start, length, j, tri_ptr, tri_bounds_ptr, cell_tris_ptr, BLOCK
        )
        if tl.max(near.to(tl.int32), axis=0) > 0:
            has, raw_normal, point_b, sep = box_triangle_contacts(center, rot_mat, hitbox, v0, v1, v2, near, BLOCK)
            has = near & has
            if tl.max(has.to(tl.int32), axis=0) > 0:
                tri_mesh, point_offset, normal = manifold_point(
                    car_pos, tri, v0, v1, v2, has, raw_normal, point_b, sep, arena, MAX_ANGLE, EDGE_DISTANCE
                )
                manifolds = add_manifold_point(has, tri_mesh, point_offset, (), normal, sep * UU_TO_BT, manifolds, False)
                found += has.to(tl.int32)
                last = where(has, raw_normal, last)
        j = tl.where(near, j + 1, j)  # past the triangle just met
    return manifolds, found, last


# --- The car body against the arena in three launches (large batches) ------------------------------
# One car per lane, a warp walks its cell lists, runs the separating axes and GJK as often as its lane
# with the most triangles, and a car meets about one triangle: in the benchmark's 1v1 games (CPU, 2,048
# envs) a warp of 32 such cars ran GJK 25-46 iterations where its cars needed 6.5 on average. So each
# car's near triangles are listed first, its lanes sharing its cell (`list_near_triangles`), one
# contact point per listed pair is found 32 pairs to a warp (`world_point`), and each car's points
# then join its manifolds in its list's order, as Bullet adds them (`listed_car_world_contacts`).
PAIR_SLOTS = constexpr(8)
"""Near triangles listed per car (`list_near_triangles`): a car with more, or whose pairs no longer fit
the list, walks its cell in its own lane (`mesh_contacts`), as the small batches do."""
WORLD_POINT_WIDTH = constexpr(16)
"""Floats per listed pair's point (`world_point`): whether it holds a contact, the triangle's mesh, the
point on the car from its origin (3, BT), the smoothed normal (3), the depth (BT), the raw normal (3),
four spare (rows a power of two wide)."""


@jit
def list_near_triangles(car_pos, rot_mat, hitbox, alive, row, arena, grid, world_pair_count_ptr,
                        world_pairs_ptr, world_pair_slots_ptr, world_pair_total_ptr, capacity,
                        BLOCK: tl.constexpr):  # fmt: skip
    """`mesh_contacts`' screens of one car's cell, the same car in every lane (as
    `car_world_contacts_across_lanes` shares them): the triangles its box may touch (`in_reach`, then
    the whole box's separating axes) listed as pairs (car row, triangle) in Bullet's visiting order,
    each at the next free place of ``world_pairs`` ([capacity, 2]; places handed out by one relaxed
    atomic add per BLOCK triangles at ``world_pair_total``), the car's places in order in
    ``world_pair_slots`` (`PAIR_SLOTS` per car row) and their count in ``world_pair_count``: -1 where a
    pair did not fit (the car then walks its cell on the car step's second pass; a place it took in the
    list holds car row -1)."""
    tri_ptr, tri_bounds_ptr, cell_start_ptr, cell_tris_ptr = arena[0], arena[1], arena[7], arena[8]
    center, axes, half, threshold = car_box(car_pos, rot_mat, hitbox)
    lane = tl.arange(0, BLOCK)
    start, length = cell_candidates(center, alive, cell_start_ptr, grid[0], grid[1], grid[2])
    length = tl.max(tl.where(alive, length, 0), axis=0)  # the car's (every lane holds it)
    count = tl.zeros([BLOCK], tl.int32)
    for first in range(0, length, BLOCK):
        valid = first + lane < length
        tri = tl.load(cell_tris_ptr + start + first + lane, mask=valid, other=0)
        near = in_reach(center, axes, half, threshold, tri, valid, tri_bounds_ptr)
        if tl.max(near.to(tl.int32), axis=0) > 0:
            near, _, _, _ = within_bound(center, axes, half, threshold, tri, near, tri_ptr, BLOCK)
            near = near & (count >= 0)  # (none more once one did not fit)
            if tl.max(near.to(tl.int32), axis=0) > 0:
                d = near.to(tl.int32)
                before = tl.cumsum(d, axis=0) - d
                at = tl.atomic_add(world_pair_total_ptr, tl.sum(d, axis=0), sem="relaxed") + before
                fits = near & (at < capacity) & (count + before < PAIR_SLOTS)
                # a place taken but not filled (the car's slots full) is marked, so no lane reads its pair
                tl.store(world_pairs_ptr + at * 2, tl.where(fits, row.to(tl.int32), -1), mask=near & (at < capacity))
                tl.store(world_pairs_ptr + at * 2 + 1, tri, mask=fits)
                tl.store(world_pair_slots_ptr + row * PAIR_SLOTS + count + before, at, mask=fits)
                missed = tl.max((near & ~fits).to(tl.int32), axis=0) > 0
                count = tl.where(missed, -1, count + tl.sum(d, axis=0))
    tl.store(world_pair_count_ptr + row, count, mask=alive & (lane == 0))


@jit
def world_point(car_pos, rot_mat, hitbox, tri, live, arena, MAX_ANGLE: tl.constexpr, EDGE_DISTANCE: tl.constexpr,
                BLOCK: tl.constexpr):  # fmt: skip
    """The contact point of one listed (car, triangle) pair per lane, as `mesh_contacts` finds it
    (`box_triangle_contacts`, then `manifold_point`): the `WORLD_POINT_WIDTH` floats of its row."""
    center, _, _, _ = car_box(car_pos, rot_mat, hitbox)
    v0, v1, v2 = triangle_vertices(arena[0], tri, live)
    has, raw_normal, point_b, sep = box_triangle_contacts(center, rot_mat, hitbox, v0, v1, v2, live, BLOCK)
    has = live & has
    tri_mesh, point_offset, normal = manifold_point(
        car_pos, tri, v0, v1, v2, has, raw_normal, point_b, sep, arena, MAX_ANGLE, EDGE_DISTANCE
    )
    zero = sep * 0.0
    return (has.to(tl.float32), tri_mesh.to(tl.float32)) + point_offset + normal + (sep * UU_TO_BT,) + raw_normal + (
        zero, zero, zero, zero)


@jit
def listed_car_world_contacts(
    car_pos, rot_mat, hitbox, alive, row, arena, grid, world_pair_count_ptr, world_pair_slots_ptr, world_points_ptr,
    NUM_PLANES: tl.constexpr, PLANE_BASE: tl.constexpr, MAX_ANGLE: tl.constexpr, EDGE_DISTANCE: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """`car_world_contacts` from the listed pairs' points (`world_point`), each car's joining its
    manifolds in its list's order; a car whose pairs did not fit the list walks its cell in its lane."""
    manifolds, found, last = no_contacts(BLOCK)
    count = tl.load(world_pair_count_ptr + row, mask=alive, other=0)
    i = 0
    while tl.max((alive & (i < count)).to(tl.int32), axis=0) > 0:
        take = alive & (i < count)
        p = load_row(world_points_ptr, tl.load(world_pair_slots_ptr + row * PAIR_SLOTS + i, mask=take, other=0),
                     take, WORLD_POINT_WIDTH, BLOCK)  # fmt: skip
        has = take & (p[0] != 0)
        manifolds = add_manifold_point(
            has, p[1].to(tl.int32), (p[2], p[3], p[4]), (), (p[5], p[6], p[7]), p[8], manifolds, False
        )
        found += has.to(tl.int32)
        last = where(has, (p[9], p[10], p[11]), last)
        i += 1
    walks = alive & (count < 0)
    if tl.max(walks.to(tl.int32), axis=0) > 0:
        manifolds, found, last = mesh_contacts(
            car_pos, rot_mat, hitbox, walks, arena, grid, manifolds, found, last, MAX_ANGLE, EDGE_DISTANCE, BLOCK
        )
    return plane_contacts(
        car_pos, rot_mat, hitbox, alive, arena, manifolds, found, last, NUM_PLANES, PLANE_BASE, BLOCK
    )


@jit
def car_world_contacts_across_lanes(
    car_pos, rot_mat, hitbox, alive, arena, grid,
    NUM_PLANES: tl.constexpr, PLANE_BASE: tl.constexpr, MAX_ANGLE: tl.constexpr, EDGE_DISTANCE: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """`car_world_contacts` of one car per program, the same car in every lane: the lanes share the
    triangles of its grid cell, BLOCK at a time in Bullet's visiting order, each screening its triangle
    (`in_reach`, then the whole box's separating axes, a lower bound of the distance, within the contact
    threshold) and running GJK on it; the contacts found then join the manifolds one at a time in the
    list's order, as Bullet adds them. A car whose body meets many triangles (a wall, a curved
    transition) waits for its list's length over BLOCK, not its length."""
    tri_ptr, tri_bounds_ptr, cell_start_ptr, cell_tris_ptr = arena[0], arena[1], arena[7], arena[8]
    center, axes, half, threshold = car_box(car_pos, rot_mat, hitbox)
    manifolds, found, last = no_contacts(BLOCK)
    lane = tl.arange(0, BLOCK)
    start, length = cell_candidates(center, alive, cell_start_ptr, grid[0], grid[1], grid[2])
    length = tl.max(tl.where(alive, length, 0), axis=0)  # the car's (every lane holds it)
    for first in range(0, length, BLOCK):
        valid = first + lane < length
        tri = tl.load(cell_tris_ptr + start + first + lane, mask=valid, other=0)
        near = in_reach(center, axes, half, threshold, tri, valid, tri_bounds_ptr)
        if tl.max(near.to(tl.int32), axis=0) > 0:
            near, v0, v1, v2 = within_bound(center, axes, half, threshold, tri, near, tri_ptr, BLOCK)
            if tl.max(near.to(tl.int32), axis=0) > 0:
                has, raw_normal, point_b, sep = box_triangle_contacts(center, rot_mat, hitbox, v0, v1, v2, near, BLOCK)
                has = near & has
                if tl.max(has.to(tl.int32), axis=0) > 0:
                    tri_mesh, point_offset, normal = manifold_point(
                        car_pos, tri, v0, v1, v2, has, raw_normal, point_b, sep, arena, MAX_ANGLE, EDGE_DISTANCE
                    )
                    depth = sep * UU_TO_BT
                    while tl.max(has.to(tl.int32), axis=0) > 0:  # each lane's contact in turn, in list order
                        this = lane == tl.min(tl.where(has, lane, BLOCK), axis=0)
                        manifolds = add_manifold_point(
                            alive, lane_int(tri_mesh, this), lane_vec(point_offset, this), (),
                            lane_vec(normal, this), lane_float(depth, this), manifolds, False,
                        )  # fmt: skip
                        found += 1
                        last = lane_vec(raw_normal, this)
                        has = has & ~this
    return plane_contacts(
        car_pos, rot_mat, hitbox, alive, arena, manifolds, found, last, NUM_PLANES, PLANE_BASE, BLOCK
    )


@jit
def car_box(car_pos, rot_mat, hitbox):
    """The car body's box in UU: (centre, axes (the rotation's columns), half extents with the margin,
    contact threshold)."""
    inner, margin, offset, threshold = hitbox
    half = scale(add(inner, (margin, margin, margin)), BT_TO_UU)
    threshold = threshold * BT_TO_UU
    center = add(car_pos, mat_vec(rot_mat, scale(offset, BT_TO_UU)))
    return center, (column(rot_mat, 0), column(rot_mat, 1), column(rot_mat, 2)), half, threshold


@jit
def no_contacts(BLOCK: tl.constexpr):
    """Empty manifolds, no contact found yet, a zero last normal (`car_world_contacts`' start)."""
    zero = tl.zeros([BLOCK], tl.float32)
    vectors = (fill16(zero), fill16(zero), fill16(zero))
    manifolds = (fill4(tl.full([BLOCK], -1, tl.int32)), fill4(tl.zeros([BLOCK], tl.int32)), vectors, (), vectors, fill16(zero))
    return manifolds, tl.zeros([BLOCK], tl.int32), (zero, zero, zero)


@jit
def manifold_point(car_pos, tri, v0, v1, v2, has, raw_normal, point_b, sep, arena, MAX_ANGLE: tl.constexpr,
                   EDGE_DISTANCE: tl.constexpr):  # fmt: skip
    """Where ``has``, the box's contact with triangle ``tri`` (`box_triangle_contacts`' raw normal, point
    on the triangle and distance, UU) as a manifold point: (the triangle's mesh, the point on the car
    from its origin BT, the normal smoothed at the triangle's internal edges)."""
    tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr = arena[1:5]
    point_a = add(point_b, scale(raw_normal, sep))
    tri_normal = load(tri_bounds_ptr + tri * 8, has, (0.0, 0.0, 1.0))
    edge_angle = load(edge_angle_ptr + tri * 3, has, (7.0, 7.0, 7.0))
    edge_flags = tl.load(edge_flags_ptr + tri, mask=has, other=0)
    normal, _ = adjust_internal_edge_contacts(
        raw_normal, point_b, v0, v1, v2, tri_normal, edge_angle, edge_flags, MAX_ANGLE, EDGE_DISTANCE
    )
    tri_mesh = tl.load(tri_mesh_ptr + tri, mask=has, other=0)
    return tri_mesh, scale(sub(point_a, car_pos), UU_TO_BT), normal


@jit
def plane_contacts(car_pos, rot_mat, hitbox, alive, arena, manifolds, found, last,
                   NUM_PLANES: tl.constexpr, PLANE_BASE: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """The planes, after the meshes: the box's deepest corner along each normal within the contact
    threshold, into the manifolds; the car's contacts done: (manifolds, whether it touched, last)."""
    plane_normals_ptr, plane_offsets_ptr = arena[5], arena[6]
    center, _, half, threshold = car_box(car_pos, rot_mat, hitbox)
    for p in range(NUM_PLANES):
        plane_normal, corner, depth = plane_corner(center, rot_mat, half, plane_normals_ptr, plane_offsets_ptr, p)
        has = alive & (depth < threshold)
        if tl.max(has.to(tl.int32), axis=0) > 0:
            manifolds = add_manifold_point(
                has, PLANE_BASE + p + tl.zeros([BLOCK], tl.int32), scale(sub(corner, car_pos), UU_TO_BT), (),
                plane_normal, depth * UU_TO_BT, manifolds, False,
            )  # fmt: skip
            found += has.to(tl.int32)
            last = where(has, plane_normal, last)
    return manifolds, found > 0, last


@jit
def lane_float(x, this):
    """The value of lane ``this`` (one lane true) in every lane, bit for bit."""
    return tl.broadcast_to(tl.max(tl.where(this, x, -float("inf")), axis=0), x.shape)


@jit
def lane_int(x, this):
    """`lane_float` of an int32."""
    return tl.broadcast_to(tl.max(tl.where(this, x, -2147483647), axis=0), x.shape)


@jit
def lane_vec(v, this):
    """`lane_float` of a vector."""
    return lane_float(v[0], this), lane_float(v[1], this), lane_float(v[2], this)


@jit
def in_reach(center, axes, half, threshold, tri, valid, tri_bounds_ptr):
    """Where ``valid``, whether triangle ``tri`` may be within the contact threshold of the box: its
    plane within the box's extent along the precomputed normal, and its bounding sphere within the
    box grown by the threshold (the sphere's centre outside the box by at most its radius and the
    threshold), each with `TRI_SCREEN` to spare. A triangle beyond either is farther from the box than
    the threshold, where GJK reports no contact."""
    tri_normal = load(tri_bounds_ptr + tri * 8, valid, (0.0, 0.0, 1.0))
    tri_plane_d = tl.load(tri_bounds_ptr + tri * 8 + 3, mask=valid, other=0.0)
    reach = box_radius(tri_normal, axes, half) + threshold + TRI_SCREEN
    plane = tl.abs(dot(center, tri_normal) - tri_plane_d) < reach
    to_centroid = sub(load(tri_bounds_ptr + tri * 8 + 4, valid, (0.0, 0.0, 0.0)), center)
    outside = 0.0
    for i in tl.static_range(3):
        excess = tl.maximum(tl.abs(dot(axes[i], to_centroid)) - half[i], 0.0)
        outside += excess * excess
    sphere = tl.load(tri_bounds_ptr + tri * 8 + 7, mask=valid, other=0.0) + threshold + TRI_SCREEN
    return valid & plane & (outside <= sphere * sphere)


@jit
def next_near_triangle(center, axes, half, threshold, start, length, j, tri_ptr, tri_bounds_ptr, cell_tris_ptr,
                       BLOCK: tl.constexpr):  # fmt: skip
    """Each lane's cursor ``j`` moved along its cell list (from ``start``, ``length`` long) to the next
    triangle the box may touch: in reach (`in_reach`), then the whole box's separating axes, a lower
    bound of the distance, within the contact threshold, as `car_contacts.car_world_contacts` screens
    them. (near, j, tri, v0, v1, v2): where ``near`` is false the lane's list is done (``j`` at its end)."""
    zero = tl.zeros([BLOCK], tl.float32)
    near = j < 0
    tri = tl.zeros([BLOCK], tl.int32)
    v0, v1, v2 = (zero, zero, zero), (zero, zero, zero), (zero, zero, zero)
    scanning = j < length
    while tl.max(scanning.to(tl.int32), axis=0) > 0:
        at = tl.load(cell_tris_ptr + start + j, mask=scanning, other=0)
        reach = in_reach(center, axes, half, threshold, at, scanning, tri_bounds_ptr)
        if tl.max(reach.to(tl.int32), axis=0) > 0:
            hit, w0, w1, w2 = within_bound(center, axes, half, threshold, at, reach, tri_ptr, BLOCK)
            near = near | hit
            tri = tl.where(hit, at, tri)
            v0, v1, v2 = where(hit, w0, v0), where(hit, w1, v1), where(hit, w2, v2)
        j = tl.where(scanning & ~near, j + 1, j)
        scanning = ~near & (j < length)
    return near, j, tri, v0, v1, v2


@jit
def within_bound(center, axes, half, threshold, tri, reach, tri_ptr, BLOCK: tl.constexpr):
    """Where ``reach``, triangle ``tri``'s vertices and whether the whole box's separating axes, a lower
    bound of the distance, are within the contact threshold: (near, v0, v1, v2)."""
    v0, v1, v2 = triangle_vertices(tri_ptr, tri, reach)
    bound, _ = box_triangle_separation((center, axes, half), v0, v1, v2, BLOCK)
    return reach & (bound <= threshold), v0, v1, v2


@jit
def triangle_vertices(tri_ptr, tri, live):
    """Triangle ``tri``'s three vertices, UU (a unit triangle where not live)."""
    return (load(tri_ptr + tri * 9, live, (0.0, 0.0, 0.0)), load(tri_ptr + tri * 9 + 3, live, (1.0, 0.0, 0.0)),
            load(tri_ptr + tri * 9 + 6, live, (0.0, 1.0, 0.0)))  # fmt: skip


@jit
def plane_corner(center, rot_mat, half, plane_normals_ptr, plane_offsets_ptr, p):
    """Plane ``p``'s (unit normal, the box's deepest corner along it, that corner's depth above it)."""
    plane_normal = load_uniform(plane_normals_ptr + p * 3)
    zero = tl.zeros_like(center[0])
    plane_normal = add((zero, zero, zero), plane_normal)
    corner = deepest_corner(center, rot_mat, half, neg(plane_normal))
    return plane_normal, corner, dot(corner, plane_normal) - tl.load(plane_offsets_ptr + p)


@jit
def may_touch_arena(car_pos, rot_mat, hitbox, alive, arena, grid, NUM_PLANES: tl.constexpr):
    """Whether `car_world_contacts` can find a contact for the car: some triangle of its grid cell is
    in reach (`in_reach`, the first of its screens), or the box's deepest corner along some plane is
    within the contact threshold (the same numbers `car_world_contacts` computes). Where it is false
    the body touches nothing (the car step's fast lanes, `kernels/arena.car_step_kernel`)."""
    tri_bounds_ptr, plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr = (arena[1],) + arena[5:]
    center, axes, half, threshold = car_box(car_pos, rot_mat, hitbox)
    touch = alive & (alive != alive)
    for p in tl.static_range(NUM_PLANES):
        touch = touch | (plane_corner(center, rot_mat, half, plane_normals_ptr, plane_offsets_ptr, p)[2] < threshold)
    start, length = cell_candidates(center, alive, cell_start_ptr, grid[0], grid[1], grid[2])
    j = 0
    tri = tl.load(cell_tris_ptr + start, mask=alive & ~touch & (length > 0), other=0)
    while tl.max((alive & ~touch & (j < length)).to(tl.int32), axis=0) > 0:
        valid = alive & ~touch & (j < length)
        # the next triangle's index read before this one's bounds are needed: one wait per triangle, not two
        after = tl.load(cell_tris_ptr + start + j + 1, mask=valid & (j + 1 < length), other=0)
        touch = touch | in_reach(center, axes, half, threshold, tri, valid, tri_bounds_ptr)
        tri = after
        j += 1
    return alive & touch


@jit
def untouched(start):
    """`solve_car_world`'s result for a car whose body touches nothing: its deltas of the solve between
    bodies (``start``, BT), without a world contact."""
    dv, dw, push, turn = start
    zero = dw[0] * 0.0
    return scale(dv, BT_TO_UU), dw, scale(push, BT_TO_UU), turn, zero != zero, (zero, zero, zero)


@jit
def solve_car_world(
    contacts, rot_mat, vel, ang_vel, ext_v, ext_w, inv_inertia_local, car_world_friction, car_world_restitution,
    tick_time, start, ITERATIONS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """`car_contacts.solve_car_world` for one car (``inv_inertia_local``: `load_inv_inertia`'s, BT): Bullet's
    solve of its arena points alone (split impulse, then the normal and friction rows), in registers,
    starting from ``start``'s (dv, dw, push, turn) (BT: `solve_bodies`' for the car). Each sweep walks the
    manifolds in a runtime loop and each one's 4 points unrolled, a row set up again where a sweep reads
    it (`world_row`) and skipped where no lane of the block holds it (the slots' most points, found
    before the sweeps): the code holds 4 rows per sweep, not 16, and fits the instruction cache. Returns
    the `BodySolve` tuple (dv, dw, push_v, push_w UU and rad/s, has_world_contact, world_contact_normal)."""
    manifolds, has_contact, contact_normal = contacts
    count = manifolds[1]
    zero = tl.zeros([BLOCK], tl.float32)
    m = inv_inertia_world(rot_mat, inv_inertia_local)
    body_a = (scale(vel, UU_TO_BT), ang_vel, scale(ext_v, UU_TO_BT), ext_w, INV_MASS, m[0] + m[1] + m[2])
    body = (body_a, 1.0 / tick_time, car_world_friction, car_world_restitution)
    dv, dw, push, turn = start
    if tl.max(has_contact.to(tl.int32), axis=0) > 0:
        # the most points a lane holds in each manifold slot, once: a sweep sets up point q of slot s
        # where q is below it (four reductions, not one per row and sweep)
        most = ()
        for k in tl.static_range(4):
            most = most + (tl.max(count[k], axis=0),)
        applied = fill16(zero)
        for sweep in range(ITERATIONS):  # the split impulse: rows without a penetration term are skipped
            for s in range(4):
                slot = slot_of(count, s)
                for q in tl.static_range(4):
                    held = q < pick(count, slot, 4)
                    if q < pick(most, s, 4):  # (some lane holds the row)
                        row, push_rhs, _ = world_row(manifolds, held, slot, q, body)
                        on = held & (push_rhs != 0)
                        n_, torque_a, angular_a, jac = row[0], row[1], row[2], row[6]
                        delta = push_rhs - (simd_dot3(n_, push) + simd_dot3(torque_a, turn)) * jac
                        old = in_slot(applied, slot, q)
                        delta, new = clamp_impulse(old, delta, 0.0)
                        delta = tl.where(on, delta, 0.0)
                        applied = put_point(applied, slot, q, tl.where(on, new, old))
                        push = add(push, scale(scale(n_, INV_MASS), delta))
                        turn = add(turn, scale(angular_a, delta))
        normal_applied = fill16(zero)
        friction_applied = fill16(zero)
        for sweep in range(ITERATIONS):  # every normal row, then every friction row
            for s in range(4):
                slot = slot_of(count, s)
                for q in tl.static_range(4):
                    held = q < pick(count, slot, 4)
                    if q < pick(most, s, 4):  # (some lane holds the row)
                        row, _, _ = world_row(manifolds, held, slot, q, body)
                        n_, torque_a, angular_a, jac, rhs = row[0], row[1], row[2], row[6], row[7]
                        delta = rhs - (simd_dot3(n_, dv) + simd_dot3(torque_a, dw)) * jac
                        old = in_slot(normal_applied, slot, q)
                        delta, new = clamp_impulse(old, delta, 0.0)
                        delta = tl.where(held, delta, 0.0)
                        normal_applied = put_point(normal_applied, slot, q, tl.where(held, new, old))
                        dv = add(dv, scale(scale(n_, INV_MASS), delta))
                        dw = add(dw, scale(angular_a, delta))
            for s in range(4):
                slot = slot_of(count, s)
                for q in tl.static_range(4):
                    held = q < pick(count, slot, 4)
                    if q < pick(most, s, 4):  # (some lane holds the row)
                        _, _, f_row = world_row(manifolds, held, slot, q, body)
                        tangent, f_torque, f_angular, f_jac, f_rhs = f_row[0], f_row[1], f_row[2], f_row[6], f_row[7]
                        limit = car_world_friction * in_slot(normal_applied, slot, q)
                        delta = f_rhs - (simd_dot3(tangent, dv) + simd_dot3(f_torque, dw)) * f_jac
                        old = in_slot(friction_applied, slot, q)
                        delta, new = clamp_impulse(old, delta, -limit, limit)
                        on = held & (in_slot(normal_applied, slot, q) > 0)
                        delta = tl.where(on, delta, 0.0)
                        friction_applied = put_point(friction_applied, slot, q, tl.where(on, new, old))
                        dv = add(dv, scale(scale(tangent, INV_MASS), delta))
                        dw = add(dw, scale(f_angular, delta))
    return scale(dv, BT_TO_UU), dw, scale(push, BT_TO_UU), turn, has_contact, contact_normal


@jit
def slot_of(count, s):
    """Manifold slot ``s`` of the solve's runtime loop as a per-lane tensor (the loop's index is a
    scalar on the GPU, an int under the interpreter)."""
    return count[0] * 0 + s


@jit
def put_point(t, slot, q: tl.constexpr, value):
    """The 16-tuple ``t`` with point ``q`` of manifold slot ``slot`` (per lane) set to ``value``."""
    out = ()
    for k in tl.static_range(16):
        if k % 4 == q:
            out = out + (tl.where(slot == k // 4, value, t[k]),)
        else:
            out = out + (t[k],)
    return out


@jit
def world_row(manifolds, held, slot, q: tl.constexpr, body):
    """The solver rows of point ``q`` of manifold slot ``slot`` against the arena (static, body B at
    rest): `setup_rows`' (normal row, push rhs, friction row). ``body``: (car body as `setup_rows` takes
    it, 1 / dt, friction, restitution)."""
    offset, normal, depth = manifolds[2], manifolds[4], manifolds[5]
    body_a, inv_dt, friction, restitution = body
    zero = depth[0] * 0.0
    zero3 = (zero, zero, zero)
    n_ = (in_slot(normal[0], slot, q), in_slot(normal[1], slot, q), in_slot(normal[2], slot, q))
    point_offset = (in_slot(offset[0], slot, q), in_slot(offset[1], slot, q), in_slot(offset[2], slot, q))
    body_b = (zero3, zero3, zero3, zero3, 0.0, (zero, zero, zero, zero, zero, zero, zero, zero, zero))
    return setup_rows(
        where(held, n_, (0.0, 0.0, 1.0)), point_offset, zero3, in_slot(depth, slot, q), friction, restitution,
        held | ~held, body_a, body_b, inv_dt, SOLVER_ERP2, RESTITUTION_THRESHOLD_BT, FLOAT32_EPSILON, SQRT12,
    )  # fmt: skip


# --- The contacts between bodies, solved alone ----------------------------------------------------
BODY_ROW_WIDTH = constexpr(16)
"""Floats per contact row between bodies in `body_rows` (env-major, `solve_bodies`' order: each car's
with the ball, then each pair's points): the normal from B into A (3), the point on A from A's
origin (3), the point on B from B's (3), the depth, body A, body B (the ball 0, car c 1 + c), the
friction, the restitution, then the impulses `solve_bodies` has applied on the row so far (written 0:
the split impulse's, then the normal row's; the friction row's); BT."""
APPLIED_AT = constexpr(14)
"""Where a `body_rows` row's applied impulses sit (`BODY_ROW_WIDTH`)."""


PAIR_COUNT_BITS = constexpr(3)
"""Bits per car pair in an env's `body_mask` word, after one bit per car-ball row: the pair's points
held (0 to 4), which fill its first rows."""
PAIR_COUNT_MASK = constexpr(7)


@jit
def row_held(mask, k, NUM_CARS: tl.constexpr, POINTS: tl.constexpr):
    """Whether an env's body row ``k`` holds a point, from its `body_mask` word: bit k for the car-ball
    rows (k < NUM_CARS), else the pair's count of held points (`PAIR_COUNT_BITS` bits per pair)."""
    k = k + mask * 0  # a tensor, as the loop's index is on the GPU (the interpreter's is an int)
    pair = tl.maximum((k - NUM_CARS) // POINTS, 0)
    count = (mask >> (NUM_CARS + PAIR_COUNT_BITS * pair)) & PAIR_COUNT_MASK
    return tl.where(k < NUM_CARS, ((mask >> k) & 1) != 0, k - NUM_CARS - pair * POINTS < count)


@jit
def body_row(normal, rel_a, rel_b, depth, body_a, body_b, friction, restitution):
    """A `body_rows` row's values."""
    zero = depth * 0.0
    ids = (zero + body_a, zero + body_b, zero + friction, zero + restitution, zero, zero)
    return normal + rel_a + rel_b + (depth,) + ids


@jit
def _pick9(matrices, index, N: tl.constexpr):
    out = matrices[0]
    for j in tl.static_range(1, N):
        chosen = ()
        for i in tl.static_range(9):
            chosen = chosen + (tl.where(index == j, matrices[j][i], out[i]),)
        out = chosen
    return out


@jit
def _body(bodies, index, N: tl.constexpr):
    """Solver body ``index`` (per lane) of ``bodies`` = (vel, ang_vel, ext_v, ext_w, inv_mass,
    inv_inertia), each a tuple over the N bodies, as `setup_rows` takes one."""
    vel, ang_vel, ext_v, ext_w, inv_mass, inv_inertia = bodies
    return (
        pick3(vel, index, N), pick3(ang_vel, index, N), pick3(ext_v, index, N), pick3(ext_w, index, N),
        pick(inv_mass, index, N), _pick9(inv_inertia, index, N),
    )  # fmt: skip


@jit
def _impulse(state, a, b, row, rhs, applied, lower, upper, on, inv_mass_a, inv_mass_b, N: tl.constexpr):
    """One row's impulse on the bodies' (linear, angular) deltas ``state`` (tuples over the N bodies),
    as `sequential_impulse`'s rows: the limits clamp, body A then body B take it. Returns the state
    and the new applied impulse."""
    lin, ang = state
    n_, angular_a, normal_b, angular_b = row[0], row[2], row[3], row[5]
    lin_a, ang_a = pick3(lin, a, N), pick3(ang, a, N)
    lin_b, ang_b = pick3(lin, b, N), pick3(ang, b, N)
    delta, new = row_impulse(row, rhs, applied, lower, upper, on, lin_a, ang_a, lin_b, ang_b)
    lin = put3(lin, a, add(lin_a, scale(scale(n_, inv_mass_a), delta)), True, N)
    ang = put3(ang, a, add(ang_a, scale(angular_a, delta)), True, N)
    lin_b, ang_b = pick3(lin, b, N), pick3(ang, b, N)
    lin = put3(lin, b, add(lin_b, scale(scale(normal_b, inv_mass_b), delta)), True, N)
    ang = put3(ang, b, add(ang_b, scale(angular_b, delta)), True, N)
    return (lin, ang), tl.where(on, new, applied)


@jit
def _row(body_rows_ptr, row_index, on, bodies, tick_time, N: tl.constexpr, BLOCK: tl.constexpr):
    """Row ``row_index`` of `body_rows` set up (`setup_rows`): (bodies a and b, the normal row, its
    push rhs, the friction row, the friction coefficient, the row's two applied impulses)."""
    r = load_row(body_rows_ptr, row_index, on, BODY_ROW_WIDTH, BLOCK)
    a = r[10].to(tl.int32)
    b = r[11].to(tl.int32)
    normal = where(on, (r[0], r[1], r[2]), (0.0, 0.0, 1.0))
    no_static = r[10] < 0  # false: both bodies move
    row, push_rhs, friction_row = setup_rows(
        normal, (r[3], r[4], r[5]), (r[6], r[7], r[8]), r[9], r[12], r[13], no_static, _body(bodies, a, N),
        _body(bodies, b, N), 1.0 / tick_time, SOLVER_ERP2, RESTITUTION_THRESHOLD_BT, FLOAT32_EPSILON, SQRT12,
    )  # fmt: skip
    return a, b, row, push_rhs, friction_row, r[12], (r[APPLIED_AT], r[APPLIED_AT + 1])


@jit
def _store_applied(body_rows_ptr, row_index, column: tl.constexpr, value, on):
    """Row ``row_index``'s applied impulse ``column`` (0: the split impulse's, then the normal row's; 1:
    the friction row's; `APPLIED_AT`) where ``on``."""
    tl.store(body_rows_ptr + row_index * BODY_ROW_WIDTH + APPLIED_AT + column, value, mask=on)


@jit
def compact_rows(body_rows_ptr, first_row, live, mask, NUM_ROWS: tl.constexpr, NUM_CARS: tl.constexpr,
                 POINTS: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """Each lane's held rows of its env's NUM_ROWS `body_rows` (from ``first_row``; `row_held` of
    ``mask``) moved, in their order, to the env's first rows (row k to the place of the rows held before
    it, never after k, so each row is read before anything is written over it); returns how many each
    lane holds. The rows no lane of the block holds are skipped."""
    held = tl.zeros([BLOCK], tl.int32)
    for k in range(NUM_ROWS):
        on = live & row_held(mask, k, NUM_CARS, POINTS)
        if tl.max(on.to(tl.int32), axis=0) > 0:
            row = load_row(body_rows_ptr, first_row + k, on, BODY_ROW_WIDTH, BLOCK)
            store_row(body_rows_ptr, first_row + held, row, on & (held != k), BODY_ROW_WIDTH, BLOCK)
            held += on.to(tl.int32)
    return held


@jit
def solve_bodies(
    body_rows_ptr, first_row, live, mask, bodies, tick_time,
    NUM_ROWS: tl.constexpr, NUM_BODIES: tl.constexpr, POINTS: tl.constexpr, ITERATIONS: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """`car_contacts.solve_bodies` for one env per lane: Bullet's sequential impulse over the env's
    NUM_ROWS rows of `body_rows` (from ``first_row``; ``mask`` marks the rows held, `row_held`), the split
    impulse first, then 10 iterations of the normal rows and the friction rows. ``bodies``: (vel,
    ang_vel, ext_v, ext_w, inv_mass, inv_inertia), each a tuple over the NUM_BODIES bodies, BT.

    Each lane first moves its env's held rows, in order, to the front of its rows (`compact_rows`), so
    that the sweeps walk as many rows as the lane of the block holding the most: the rows held by any
    lane of a block of 32 envs are several times as many. The rows are runtime loops (the code is one
    row's, whatever the team size), each row read and set up again where a sweep meets it; the
    bodies' deltas stay in registers, each row's applied impulses in the row (`APPLIED_AT`: read with
    it, a select over the rows in registers cost a value per row per visit). Returns (dv, dw, push,
    turn), each a tuple over the bodies."""
    zero = tl.zeros([BLOCK], tl.float32)
    zero3 = (zero, zero, zero)
    velocity = ()
    for j in tl.static_range(NUM_BODIES):
        velocity = velocity + (zero3,)
    dv, dw, push, turn = velocity, velocity, velocity, velocity
    if tl.max((live & (mask != 0)).to(tl.int32), axis=0) > 0:
        held = compact_rows(body_rows_ptr, first_row, live, mask, NUM_ROWS, NUM_BODIES - 1, POINTS, BLOCK)
        most = tl.max(held, axis=0)
        for sweep in range(ITERATIONS):  # the split impulse: rows without a penetration term are skipped
            for k in range(most):
                on = live & (k < held)
                a, b, row, push_rhs, _, _, applied = _row(
                    body_rows_ptr, first_row + k, on, bodies, tick_time, NUM_BODIES, BLOCK
                )
                moved, new = _impulse(
                    (push, turn), a, b, row, push_rhs, applied[0], 0.0, 1e30, on & (push_rhs != 0),
                    pick(bodies[4], a, NUM_BODIES), pick(bodies[4], b, NUM_BODIES), NUM_BODIES,
                )  # fmt: skip
                push, turn = moved
                _store_applied(body_rows_ptr, first_row + k, 0, new, on)
        for k in range(most):  # the normal rows start from no impulse
            _store_applied(body_rows_ptr, first_row + k, 0, zero, live & (k < held))
        for sweep in range(ITERATIONS):  # every normal row, then every friction row
            for k in range(most):
                on = live & (k < held)
                a, b, row, _, _, _, applied = _row(
                    body_rows_ptr, first_row + k, on, bodies, tick_time, NUM_BODIES, BLOCK
                )
                moved, new = _impulse(
                    (dv, dw), a, b, row, row[7], applied[0], 0.0, 1e30, on,
                    pick(bodies[4], a, NUM_BODIES), pick(bodies[4], b, NUM_BODIES), NUM_BODIES,
                )  # fmt: skip
                dv, dw = moved
                _store_applied(body_rows_ptr, first_row + k, 0, new, on)
            for k in range(most):
                on = live & (k < held)
                a, b, _, _, f_row, friction, applied = _row(
                    body_rows_ptr, first_row + k, on, bodies, tick_time, NUM_BODIES, BLOCK
                )
                normal_applied = applied[0]
                limit = friction * normal_applied
                moved, new = _impulse(
                    (dv, dw), a, b, f_row, f_row[7], applied[1], -limit, limit,
                    on & (normal_applied > 0), pick(bodies[4], a, NUM_BODIES), pick(bodies[4], b, NUM_BODIES),
                    NUM_BODIES,
                )  # fmt: skip
                dv, dw = moved
                _store_applied(body_rows_ptr, first_row + k, 1, new, on)
    return dv, dw, push, turn
