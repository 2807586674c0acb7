"""RocketSim's raycast vehicle (btVehicleRL) per lane: the twin of `vehicle.py`, the same functions
in the same order.

Per-wheel values are 4-tuples in btVehicleRL's order (front-right, front-left, back-right,
back-left), built and read with static loops over the wheels. A tick's wheels travel as one tuple in
`vehicle.Wheels`' field order: (hard_point, axle, is_in_contact, contact_point, contact_normal,
suspension_length, suspension_relative_velocity, clipped_inv_contact_dot_suspension, impulse,
on_world, ground), ``ground`` a 4-tuple of `vehicle.GroundBody` tuples (pos, rot_mat, vel, ang_vel,
inv_mass, inv_inertia_local). A preset's numbers come from the per-car table `car_table` (`CarParams`
flattened, see `kernels/car.py`); LinearPieceCurves are compile-time constants (`curve`,
`kernels/car.py`'s *_CURVE).

The bodies a wheel ray can hit besides the arena (`vehicle.Bodies`) are ``bodies`` = (rows_ptr,
first_row, slot, hitbox_table_ptr, car_table_ptr, ball): the cars' packed rows as they stand when
the cars' pre-ticks start (`kernels/car.pack_cars`' layout, read from a buffer the pre-tick stage does
not write: `kernels/arena.tick`), the lane's env's first row and its own car slot, the hitbox and car
tables, and the ball (pos, rot_mat, vel, ang_vel, inv_mass, inv_inertia, radius in BT), loaded once.
"""

from __future__ import annotations

import numpy as np

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.kernels import constexpr, jit, tl
from nitro.envs.soccar.kernels.car_contacts import (
    bounding_radius, box_sphere_radius, lane_float, lane_int, lane_vec, load_hitbox,
)  # fmt: skip
from nitro.envs.soccar.kernels.ray_cast import ray_cast as arena_ray_cast
from nitro.envs.soccar.kernels.rigid_body import (
    INV_MASS,
    apply_impulse,
    basis_from_quat,
    column,
    mat_vec,
    quat_from_axis_angle,
    safe_normalized,
    transpose,
    vec_mat,
    where_mat,
)
from nitro.envs.soccar.kernels.subsimplex_convex_cast import normalized, ray_cast_convex
from nitro.envs.soccar.kernels.vec import (
    add, chunked_at, cross, dot, load_chunked, load_columns, load_uniform, neg, scale, store_row, sub, where,
)  # fmt: skip

FRICTION_SCALE = constexpr(C.CAR_MASS_BT / 3.0)
MAX_SUSPENSION_TRAVEL = constexpr(C.MAX_SUSPENSION_TRAVEL)
SUSPENSION_SUBTRACTION = constexpr(C.SUSPENSION_SUBTRACTION)
SUSPENSION_STIFFNESS = constexpr(C.SUSPENSION_STIFFNESS)
WHEELS_DAMPING_COMPRESSION = constexpr(C.WHEELS_DAMPING_COMPRESSION)
WHEELS_DAMPING_RELAXATION = constexpr(C.WHEELS_DAMPING_RELAXATION)
ROLLING_FRICTION_SCALE_MAGIC = constexpr(C.ROLLING_FRICTION_SCALE_MAGIC)
VEHICLE_CONTACT_DAMPING = constexpr(C.VEHICLE_CONTACT_DAMPING)
SOLVER_ERP = constexpr(C.SOLVER_ERP)
BT_TO_UU = constexpr(C.BT_TO_UU)
UU_TO_BT = constexpr(C.UU_TO_BT)
BODY_ROW = constexpr(88)
"""Floats per car row of ``bodies`` (`kernels/car.CAR_WIDTH`, chunked: `vec.chunked_at`): pos, rot_mat (rows),
vel and ang_vel are its first 18 floats, is_demoed its float `BODY_DEMOED_AT` (`kernels/car.py` asserts this layout)."""
BODY_DEMOED_AT = constexpr(48)
BODY_TABLE_WIDTH = constexpr(28)
"""Floats per car slot of the car table (`kernels/car.CAR_TABLE_WIDTH`), its first 3 the inverse local
inertia (`kernels/car.py` asserts this too)."""


def curve(points) -> constexpr:
    """A LinearPieceCurve as `piecewise` takes it, a compile-time constant: (number of points, x0, y0,
    x1, y1, ...), the values rounded to float32 as RocketSim stores them."""
    return constexpr((len(points), *(float(np.float32(v)) for point in points for v in point)))


@jit
def piecewise(x, CURVE: tl.constexpr):
    """LinearPieceCurve::GetOutput of a `curve`: linear between the points, constant beyond them
    (float32 maths; the points are immediate operands, no memory is read)."""
    # CURVE[0], the number of points, is used in place: a constexpr assigned to a name would not stay one
    out = x * 0.0 + CURVE[2 * CURVE[0]]
    for k in tl.static_range(CURVE[0] - 1):  # segments from the last, as the reference's where chain
        x0 = CURVE[2 * (CURVE[0] - 2 - k) + 1]
        y0 = CURVE[2 * (CURVE[0] - 2 - k) + 2]
        x1 = CURVE[2 * (CURVE[0] - 1 - k) + 1]
        y1 = CURVE[2 * (CURVE[0] - 1 - k) + 2]
        out = tl.where(x < x1, y0 + (y1 - y0) * ((x - x0) / (x1 - x0)), out)
    return tl.where(x <= CURVE[1], CURVE[2], out)


@jit
def get_forward_speed(vel, rot_mat):
    """btVehicleRL::getForwardSpeed: velocity along the chassis' forward axis, UU/s."""
    return dot(vel, column(rot_mat, 0))


@jit
def get_upwards_dir_from_wheel_contacts(is_in_contact, contact_normal, up):
    """The normalised sum of the touching wheels' contact normals; the chassis' up if none."""
    total = (up[0] * 0.0, up[1] * 0.0, up[2] * 0.0)
    for i in tl.static_range(4):
        total = add(total, where(is_in_contact[i], contact_normal[i], (0.0, 0.0, 0.0)))
    none = (total[0] == 0) & (total[1] == 0) & (total[2] == 0)
    return where(none, up, safe_normalized(total))


@jit
def update_wheel_transforms(pos, rot_mat, steer_angle, wheel_connection):
    """btVehicleRL::updateWheelTransform for every wheel: (hard_point, axle), 4-tuples of vectors.

    The hard point is the connection point in world space; the axle is the chassis' right axis
    turned about its up axis by the wheel's steer angle (front wheels; last tick's angle)."""
    right, up = column(rot_mat, 1), column(rot_mat, 2)
    hard_point = ()
    axle = ()
    for i in tl.static_range(4):
        hard_point = hard_point + (hard_point_of(pos, rot_mat, wheel_connection[i]),)
        steer = steer_angle * 0.0
        if i < 2:  # the front pair steers
            steer = steer_angle
        steering = basis_from_quat(quat_from_axis_angle(up, steer))
        axle = axle + (mat_vec(steering, right),)
    return hard_point, axle


@jit
def hard_point_of(pos, rot_mat, connection):
    """A wheel's hard point: its chassis connection point in world space."""
    return add(mat_vec(rot_mat, connection), pos)


@jit
def ray_length_of(suspension_rest_length, wheel_radius):
    """A wheel ray's length: rest + travel + radius - 2.5 UU."""
    return ((suspension_rest_length + MAX_SUSPENSION_TRAVEL) + wheel_radius) - SUSPENSION_SUBTRACTION


@jit
def resolve_single_collision(pos, vel, ang_vel, inv_inertia, point, normal, distance, solver_dt):
    """Bullet's resolveSingleCollision against a static object, without applying it: the normal
    impulse (>= 0) that would stop the approach and remove erp (0.2) of ``distance`` per solver step."""
    rel_pos = sub(point, pos)
    rel_vel = dot(normal, add(vel, cross(ang_vel, rel_pos)))
    positional_error = (SOLVER_ERP * -distance) / solver_dt
    velocity_error = -rel_vel
    denom = INV_MASS + dot(normal, cross(vec_mat(cross(rel_pos, normal), inv_inertia), rel_pos))
    jac_inv = 1.0 / denom
    return tl.maximum(positional_error * jac_inv + velocity_error * jac_inv, 0.0)




@jit
def pick(values, w):
    """``values[w]`` of a per-wheel 4-tuple, for a wheel index ``w`` known only at run time."""
    return tl.where(w == 0, values[0], tl.where(w == 1, values[1], tl.where(w == 2, values[2], values[3])))


@jit
def pick_vec(vectors, w):
    """`pick` of a per-wheel 4-tuple of vectors."""
    return (
        pick((vectors[0][0], vectors[1][0], vectors[2][0], vectors[3][0]), w),
        pick((vectors[0][1], vectors[1][1], vectors[2][1], vectors[3][1]), w),
        pick((vectors[0][2], vectors[1][2], vectors[2][2], vectors[3][2]), w),
    )


@jit
def put(values, w, value):
    """The per-wheel 4-tuple ``values`` with wheel ``w`` (known at run time) replaced by ``value``."""
    return (
        tl.where(w == 0, value, values[0]),
        tl.where(w == 1, value, values[1]),
        tl.where(w == 2, value, values[2]),
        tl.where(w == 3, value, values[3]),
    )


@jit
def put_vec(vectors, w, vector):
    """`put` of a per-wheel 4-tuple of vectors."""
    return (
        where(w == 0, vector, vectors[0]),
        where(w == 1, vector, vectors[1]),
        where(w == 2, vector, vectors[2]),
        where(w == 3, vector, vectors[3]),
    )


@jit
def bodies_of(
    rows_ptr, ball_pos_ptr, ball_vel_ptr, ball_ang_vel_ptr, env, slot, live, hitbox_table_ptr, car_table_ptr,
    ball_radius, ball_inv_mass, ball_inv_inertia, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """`Bodies.of`: what the wheel rays of car ``slot`` of env ``env`` can hit besides the arena, as
    `ray_cast_bodies` reads it: the cars' packed rows at ``rows_ptr`` (as they stand when the cars'
    pre-ticks start) and the env's ball, loaded here (pos, vel, ang_vel: [N, 3] arrays), its rotation
    the identity (RocketSim never turns the ball: noBallRot; a fresh or kicked-off ball's is the
    identity and `Arena.set_ball` does not set it). The ball's numbers are taken as float32 (as the
    reference's `ball_radius_bt`, whose float32 product the radius in BT must equal)."""
    zero = tl.zeros([BLOCK], tl.float32)
    ball = (
        load_columns(ball_pos_ptr, env, live, 3, 3, 4, BLOCK),
        ((zero + 1.0, zero, zero), (zero, zero + 1.0, zero), (zero, zero, zero + 1.0)),
        load_columns(ball_vel_ptr, env, live, 3, 3, 4, BLOCK),
        load_columns(ball_ang_vel_ptr, env, live, 3, 3, 4, BLOCK),
        tl.cast(ball_inv_mass, tl.float32),
        tl.cast(ball_inv_inertia, tl.float32),
        tl.cast(ball_radius, tl.float32) * UU_TO_BT,
    )
    return rows_ptr, env * NUM_CARS, slot, hitbox_table_ptr, car_table_ptr, ball


@jit
def where_ground(c, a, b):
    """A `vehicle.GroundBody` tuple: ``a`` where ``c``, else ``b``."""
    return (
        where(c, a[0], b[0]),
        where_mat(c, a[1], b[1]),
        where(c, a[2], b[2]),
        where(c, a[3], b[3]),
        tl.where(c, a[4], b[4]),
        where(c, a[5], b[5]),
    )


@jit
def static_ground(like):
    """`GroundBody.static`: the arena (zeros: an immovable body at the origin)."""
    zero = like[0] * 0.0
    z = (zero, zero, zero)
    return z, (z, z, z), z, z, zero, z


@jit
def passes_near(start, end, center, radius):
    """Whether the segment start -> end passes within ``radius`` (+ 0.01 BT) of ``center`` (a cheap
    bound: a ray farther from a body's bounding sphere cannot hit it)."""
    seg = sub(end, start)
    to_center = sub(center, start)
    t = tl.minimum(tl.maximum(dot(to_center, seg) / dot(seg, seg), 0.0), 1.0)
    near = sub(to_center, scale(seg, t))
    return dot(near, near) <= (radius + 0.01) * (radius + 0.01)


NEAR_SPARE = constexpr(1.0)
"""UU the bodies' spheres and boxes grow by in the bounds that send lanes past their casts and contacts
(`rays_near_bodies`, `kernels/arena.bodies_near`): more than the rounding of either side."""


@jit
def rays_near_bodies(
    bodies, pos, rot_mat, wheel_connection, wheel_radius, suspension_rest_length, live, NUM_CARS: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """Whether the wheel rays of the car at ``pos``, ``rot_mat`` can pass near another car or the ball:
    each body's bounding sphere as `ray_cast_bodies` bounds its casts (about the box's centre or the
    ball's), `NEAR_SPARE` to spare, against the box that holds the car's four ray segments in its own
    frame (from the connection points down its up axis, as `ray_cast` casts them). Where it is false,
    `ray_cast_bodies` casts at no body for any wheel: the rays meet the arena alone (the pre-tick's fast
    lanes, `kernels/arena.pre_tick_kernel`). (Not the box of a car body: a cast at a box may stop on a
    ray that misses it, as Bullet's does.)"""
    rows_ptr, first_row, slot, hitbox_table_ptr, _, ball = bodies
    lo = wheel_connection[0]
    hi = wheel_connection[0]
    for i in tl.static_range(4):
        c = wheel_connection[i]
        bottom = c[2] - ray_length_of(suspension_rest_length[i], wheel_radius[i])
        lo = (tl.minimum(lo[0], c[0]), tl.minimum(lo[1], c[1]), tl.minimum(lo[2], bottom))
        hi = (tl.maximum(hi[0], c[0]), tl.maximum(hi[1], c[1]), tl.maximum(hi[2], c[2]))
    near = sphere_meets_box(ball[0], ball[6] * BT_TO_UU + NEAR_SPARE, pos, rot_mat, lo, hi)
    for b in tl.static_range(NUM_CARS):
        other_car = tl.where(slot != b, live, False)  # (live & a scalar: int32 under the interpreter)
        hitbox = load_hitbox(hitbox_table_ptr, b)
        offset = hitbox[2]
        radius = box_sphere_radius(hitbox) * BT_TO_UU + NEAR_SPARE
        # the box's centre lies within its offset of the car's origin: the sphere about the origin,
        # grown by the offset, first; the row's 12 columns read at once (the rotation read after that
        # test waited on the first read: 3.46 -> 2.55 ms per 3v3 tick at 4M envs on an H200)
        v = load_chunked(rows_ptr, first_row + b, other_car, BODY_ROW, NUM_CARS, 0, 12, BLOCK)
        reach = bounding_radius(hitbox) * BT_TO_UU + NEAR_SPARE
        maybe = other_car & sphere_meets_box((v[0], v[1], v[2]), reach, pos, rot_mat, lo, hi)
        other_rot = ((v[3], v[4], v[5]), (v[6], v[7], v[8]), (v[9], v[10], v[11]))
        center = add((v[0], v[1], v[2]), scale(mat_vec(other_rot, offset), BT_TO_UU))
        near = near | (maybe & sphere_meets_box(center, radius, pos, rot_mat, lo, hi))
    return live & near


@jit
def sphere_meets_box(center, radius, origin, rot_mat, lo, hi):
    """Whether the sphere of ``radius`` about ``center`` meets the box ``lo`` - ``hi`` of the frame at
    ``origin``, turned by ``rot_mat`` (rows): the centre in that frame, clamped to the box."""
    local = vec_mat(sub(center, origin), rot_mat)
    gap = (
        local[0] - tl.minimum(tl.maximum(local[0], lo[0]), hi[0]),
        local[1] - tl.minimum(tl.maximum(local[1], lo[1]), hi[1]),
        local[2] - tl.minimum(tl.maximum(local[2], lo[2]), hi[2]),
    )
    return dot(gap, gap) <= radius * radius


@jit
def ray_cast_bodies(bodies, start, end, live, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr):
    """btCollisionWorld::rayTest of one wheel ray start -> end (UU) against the other cars' boxes and
    the ball (`ray_cast_body`): (hit, fraction, unit normal, whether the closest body hit has contact
    response (a demolished car has none), its `GroundBody` tuple). The car's own box is ignored; of
    equal fractions the first body (the cars in order, then the ball) is kept. The bodies are visited
    by a loop that is not unrolled."""
    s, e = scale(start, UU_TO_BT), scale(end, UU_TO_BT)
    best = start[0] * 0.0 + 2.0
    normal = (best * 0.0, best * 0.0, best * 0.0)
    responds = best != best
    ground = static_ground(start)
    for b in range(NUM_CARS + 1):  # the cars, then the ball
        hit, fraction, hit_normal, body_responds, body = ray_cast_body(bodies, b, s, e, live, NUM_CARS, BLOCK)
        take = hit & (fraction < best)
        best = tl.where(take, fraction, best)
        normal = where(take, hit_normal, normal)
        responds = tl.where(take, body_responds, responds)
        ground = where_ground(take, body, ground)
    hit = best < 2.0
    return hit, tl.where(hit, best, 1.0), normal, responds, ground


@jit
def ray_cast_body(bodies, b, s, e, live, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr):
    """The ray s -> e (BT) against body ``b`` of the lane's env (car slot b, or the ball at b =
    NUM_CARS; one body for every lane, or each lane its own), Bullet's convex cast
    (`subsimplex_convex_cast`): (hit, fraction, unit normal, whether the body has contact response,
    its `GroundBody` tuple). The lane's own car is not hit, and the cast is skipped when no lane's ray
    passes near its body."""
    rows_ptr, first_row, slot, hitbox_table_ptr, car_table_ptr, ball = bodies
    ball_pos, ball_rot_mat, ball_vel, ball_ang_vel, ball_inv_mass, ball_inv_inertia, ball_radius = ball
    is_ball = b == NUM_CARS
    other = tl.minimum(b, NUM_CARS - 1)  # a car slot (the ball's pass reads one it does not use)
    is_other_car = (b < NUM_CARS) & (b != slot)
    row = first_row + other
    v = load_chunked(rows_ptr, row, live & is_other_car, BODY_ROW, NUM_CARS, 0, 18, BLOCK)
    demoed = tl.load(
        chunked_at(rows_ptr, row, BODY_ROW, NUM_CARS, BODY_DEMOED_AT), mask=live & is_other_car, other=0.0
    ) != 0
    inner, margin, offset, _ = load_hitbox(hitbox_table_ptr, other)
    rot_mat = ((v[3], v[4], v[5]), (v[6], v[7], v[8]), (v[9], v[10], v[11]))
    body = where_ground(
        is_ball,
        (ball_pos, ball_rot_mat, ball_vel, ball_ang_vel, ball_inv_mass, (ball_inv_inertia, ball_inv_inertia, ball_inv_inertia)),
        ((v[0], v[1], v[2]), rot_mat, (v[12], v[13], v[14]), (v[15], v[16], v[17]), v[0] * 0.0 + INV_MASS,
         load_uniform(car_table_ptr + other * BODY_TABLE_WIDTH)),
    )  # fmt: skip
    # the compound's child box at the car's transform (car_world.box_transform), or the ball's centre
    box_origin = add(mat_vec(rot_mat, offset), scale(body[0], UU_TO_BT))
    origin = where(is_ball, scale(ball_pos, UU_TO_BT), box_origin)
    extent = add(inner, (margin, margin, margin))
    radius = tl.where(is_ball, ball_radius, tl.sqrt(dot(extent, extent)))
    candidate = live & (is_ball | is_other_car) & passes_near(s, e, origin, radius)
    hit = candidate & (~candidate)
    fraction = s[0] * 0.0 + 1.0
    hit_normal = (fraction * 0.0, fraction * 0.0, fraction * 0.0)
    if tl.max(candidate.to(tl.int32), axis=0) > 0:
        shape = (is_ball, origin, rot_mat, inner, tl.where(is_ball, ball_radius, margin))
        hit, fraction, hit_normal = ray_cast_convex(shape, s, e, candidate)
    return hit, fraction, hit_normal, is_ball | (~demoed), body


@jit
def ray_cast_bodies_across_lanes(bodies, hard_point, ray_length, up, live, NUM_CARS: tl.constexpr,
                                 BLOCK: tl.constexpr):  # fmt: skip
    """`ray_cast_bodies` of one car per program, the same car in every lane, for its four wheels at
    once: lane 4 b + w casts wheel w's ray at body b (`ray_cast_body`), and each wheel keeps its first
    closest hit, as the loop over the bodies does. Per-wheel 4-tuples of its results."""
    tl.static_assert(4 * (NUM_CARS + 1) <= BLOCK, "a lane for every wheel and body")
    lane = tl.arange(0, BLOCK)
    w = lane % 4
    start = pick_vec(hard_point, w)
    target = add(start, scale(neg(up), pick(ray_length, w)))
    s, e = scale(start, UU_TO_BT), scale(target, UU_TO_BT)
    hit, fraction, normal, responds, ground = ray_cast_body(
        bodies, lane // 4, s, e, live & (lane < 4 * (NUM_CARS + 1)), NUM_CARS, BLOCK
    )
    body_hit, body_fraction, body_normal, body_responds, body_ground = (), (), (), (), ()
    for i in tl.static_range(4):
        key = tl.where((w == i) & hit, fraction, 2.0)
        best = tl.min(key, axis=0)
        first = lane == tl.min(tl.where(key == best, lane, BLOCK), axis=0)  # the first body of the closest
        found = tl.broadcast_to(best, key.shape) < 2.0
        body_hit = body_hit + (found,)
        body_fraction = body_fraction + (tl.where(found, best, 1.0),)
        body_normal = body_normal + (where(found, lane_vec(normal, first), (0.0, 0.0, 0.0)),)
        body_responds = body_responds + (found & (lane_int(responds.to(tl.int32), first) != 0),)
        body_ground = body_ground + (where_ground(found, lane_ground(ground, first), static_ground(up)),)
    return body_hit, body_fraction, body_normal, body_responds, body_ground


@jit
def arena_rays_across_lanes(hard_point, ray_length, up, live, arena, grid, NUM_PLANES: tl.constexpr,
                            BLOCK: tl.constexpr):  # fmt: skip
    """The four wheel rays of one car per program, the same car in every lane, against the arena
    (`kernels/ray_cast.ray_cast`), lane w casting wheel w's: per-wheel 4-tuples (hit, fraction, normal)."""
    tri_ptr, _, _, _, _, plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr = arena
    lane = tl.arange(0, BLOCK)
    start = pick_vec(hard_point, lane)
    target = add(start, scale(neg(up), pick(ray_length, lane)))
    hit, fraction, normal, _feature = arena_ray_cast(
        start, target, live & (lane < 4), tri_ptr, plane_normals_ptr, plane_offsets_ptr, cell_start_ptr,
        cell_tris_ptr, grid, 0, NUM_PLANES, BLOCK,
    )  # fmt: skip
    ray_hit, ray_fraction, ray_normal = (), (), ()
    for i in tl.static_range(4):
        ray_hit = ray_hit + (lane_int(hit.to(tl.int32), lane == i) != 0,)
        ray_fraction = ray_fraction + (lane_float(fraction, lane == i),)
        ray_normal = ray_normal + (lane_vec(normal, lane == i),)
    return ray_hit, ray_fraction, ray_normal


@jit
def lane_ground(ground, this):
    """`car_contacts.lane_float` of a `GroundBody` tuple."""
    pos, rot_mat, vel, ang_vel, inv_mass, inv_inertia = ground
    return (
        lane_vec(pos, this),
        (lane_vec(rot_mat[0], this), lane_vec(rot_mat[1], this), lane_vec(rot_mat[2], this)),
        lane_vec(vel, this),
        lane_vec(ang_vel, this),
        lane_float(inv_mass, this),
        lane_vec(inv_inertia, this),
    )


@jit
def put_ground(grounds, w, ground):
    """`put` of a per-wheel 4-tuple of `GroundBody` tuples."""
    return (
        where_ground(w == 0, ground, grounds[0]),
        where_ground(w == 1, ground, grounds[1]),
        where_ground(w == 2, ground, grounds[2]),
        where_ground(w == 3, ground, grounds[3]),
    )


@jit
def ray_cast(
    pos,
    rot_mat,
    vel,
    ang_vel,
    extra_pushback,
    hard_point,
    wheel_radius,
    suspension_rest_length,
    inv_inertia,
    solver_dt,
    live,
    arena,
    grid,
    bodies,
    NUM_CARS: tl.constexpr,
    NUM_PLANES: tl.constexpr,
    BLOCK: tl.constexpr,
    BODIES: tl.constexpr = True,
    arena_hits=None,
    ACROSS_LANES: tl.constexpr = False,
):
    """btVehicleRL::rayCast for every wheel: (is_in_contact, on_world, contact_point, contact_normal,
    suspension_length, suspension_relative_velocity, clipped_inv_contact_dot_suspension, ground,
    extra_pushback), 4-tuples.

    The ray runs from the hard point down the chassis' up axis for rest + travel + radius - 2.5 UU,
    and stops at the closest of the arena (tested first: it wins ties), the other cars and the ball
    (``bodies``). A hit sets the suspension length (clamped to rest +- 12 UU), its velocity along the
    contact normal (projected, clipped where the normal is far from up), and, when the wheel is pushed
    more than 2.5 UU past its rest against the static arena, the extra pushback impulse (a quarter of
    resolveSingleCollision's), which then persists while the wheel keeps touching. Without ``BODIES``
    the rays meet the arena alone: for lanes whose rays pass near no body (`rays_near_bodies`), the
    same hits, at a fraction of the registers. With ``arena_hits`` (`load_arena_hit`) the rays' hits on
    the arena are read, as `kernels/arena.wheel_rays_kernel` found them, rather than cast. With
    ``ACROSS_LANES`` (one car per program, the same car in every lane) the 8 to 28 casts of its
    wheels against the arena and the bodies run side by side, a lane each (`arena_rays_across_lanes`,
    `ray_cast_bodies_across_lanes`)."""
    tri_ptr, _, _, _, _, plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr = arena
    up = column(rot_mat, 2)
    ray_length = ()
    for i in tl.static_range(4):
        ray_length = ray_length + (ray_length_of(suspension_rest_length[i], wheel_radius[i]),)
    # The four rays against the arena and the bodies, one per pass of a loop that is not unrolled: the
    # queries (and their memory reads) appear once in the kernel, which keeps Triton's compile time down.
    no = up[0] != up[0]
    zero = up[0] * 0.0
    z = (zero, zero, zero)
    ray_hit = (no, no, no, no)
    ray_fraction = (zero, zero, zero, zero)
    ray_normal = (z, z, z, z)
    body_hit = (no, no, no, no)
    body_fraction = (zero, zero, zero, zero)
    body_normal = (z, z, z, z)
    body_responds = (no, no, no, no)
    body_ground = (static_ground(up), static_ground(up), static_ground(up), static_ground(up))
    if ACROSS_LANES:
        ray_hit, ray_fraction, ray_normal = arena_rays_across_lanes(
            hard_point, ray_length, up, live, arena, grid, NUM_PLANES, BLOCK
        )
        body_hit, body_fraction, body_normal, body_responds, body_ground = ray_cast_bodies_across_lanes(
            bodies, hard_point, ray_length, up, live, NUM_CARS, BLOCK
        )
    else:
        for w in range(4):
            start = pick_vec(hard_point, w)
            target = add(start, scale(neg(up), pick(ray_length, w)))
            if arena_hits is None:
                hit, fraction, normal, _feature = arena_ray_cast(  # (plane features numbered from 0: unused)
                    start, target, live, tri_ptr, plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr,
                    grid, 0, NUM_PLANES, BLOCK,
                )  # fmt: skip
            else:
                hit, fraction, normal = load_arena_hit(arena_hits, w, live)
            ray_hit = put(ray_hit, w, hit)
            ray_fraction = put(ray_fraction, w, fraction)
            ray_normal = put_vec(ray_normal, w, normal)
            if BODIES:
                hit, fraction, normal, responds, ground = ray_cast_bodies(bodies, start, target, live, NUM_CARS, BLOCK)
                body_hit = put(body_hit, w, hit)
                body_fraction = put(body_fraction, w, fraction)
                body_normal = put_vec(body_normal, w, normal)
                body_responds = put(body_responds, w, responds)
                body_ground = put_ground(body_ground, w, ground)
    is_in_contact = ()
    on_world = ()
    contact_point = ()
    contact_normal = ()
    suspension_length = ()
    suspension_relative_velocity = ()
    clipped_inv_contact_dot_suspension = ()
    ground = ()
    new_extra_pushback = ()
    for i in tl.static_range(4):
        rest = suspension_rest_length[i]
        radius = wheel_radius[i]
        target = add(hard_point[i], scale(neg(up), ray_length[i]))
        # the closest of the arena, the other cars and the ball
        on_body = body_hit[i] & (body_fraction[i] < ray_fraction[i])
        hit = ray_hit[i] & (~on_body) | on_body & body_responds[i]
        fraction = tl.where(on_body, body_fraction[i], ray_fraction[i])
        hit_normal = ray_normal[i]
        if BODIES:  # castRay's normal of a body's hit
            hit_normal = where(on_body, normalized(where(on_body, body_normal[i], (1.0, 1.0, 1.0))), hit_normal)
        world = hit & (~on_body)
        point = where(hit, add(scale(hard_point[i], 1.0 - fraction), scale(target, fraction)), target)
        normal = where(hit, hit_normal, up)
        trace = dot(sub(hard_point[i], point), up)
        length = tl.minimum(
            tl.maximum(trace - radius, rest - MAX_SUSPENSION_TRAVEL), rest + MAX_SUSPENSION_TRAVEL
        )
        length = tl.where(hit, length, rest + MAX_SUSPENSION_TRAVEL)
        denominator = dot(normal, up)
        rel_pos = sub(point, pos)
        proj_vel = dot(normal, add(vel, cross(ang_vel, rel_pos)))
        steep = denominator > 0.1
        inv = 1.0 / tl.where(steep, denominator, 1.0)
        relative_velocity = tl.where(hit & steep, proj_vel * inv, 0.0)
        clipped_inv = tl.where(hit, tl.where(steep, inv, 10.0), 1.0)
        threshold = (rest + radius) - SUSPENSION_SUBTRACTION
        pushed = world & (trace < threshold)
        pushback = resolve_single_collision(pos, vel, ang_vel, inv_inertia, point, normal, trace - threshold, solver_dt) / 4
        is_in_contact = is_in_contact + (hit,)
        on_world = on_world + (world,)
        contact_point = contact_point + (point,)
        contact_normal = contact_normal + (normal,)
        suspension_length = suspension_length + (length,)
        suspension_relative_velocity = suspension_relative_velocity + (relative_velocity,)
        clipped_inv_contact_dot_suspension = clipped_inv_contact_dot_suspension + (clipped_inv,)
        ground = ground + (where_ground(hit & on_body, body_ground[i], static_ground(up)),)
        new_extra_pushback = new_extra_pushback + (
            tl.where(pushed, pushback, tl.where(hit, extra_pushback[i], 0.0)),
        )
    return (
        is_in_contact,
        on_world,
        contact_point,
        contact_normal,
        suspension_length,
        suspension_relative_velocity,
        clipped_inv_contact_dot_suspension,
        ground,
        new_extra_pushback,
    )


ARENA_HIT_WIDTH = constexpr(4)
"""Floats per wheel of a car's rays' hits on the arena (`store_arena_hit`): the fraction (-1 where the
ray hit nothing) and the unit normal."""


@jit
def store_arena_hit(arena_hits, w, live, hit, fraction, normal, BLOCK: tl.constexpr):
    """Wheel ``w``'s ray against the arena (`ray_cast.ray_cast`'s hit, fraction and normal) into
    ``arena_hits``: (the hits, [rows, 4 wheels, ARENA_HIT_WIDTH], each lane's car row), 16 bytes per lane."""
    hits_ptr, row = arena_hits
    values = (tl.where(hit, fraction, -1.0),) + normal
    store_row(hits_ptr, row * 4 + w, values, live, ARENA_HIT_WIDTH, BLOCK)


@jit
def load_arena_hit(arena_hits, w, live):
    """`store_arena_hit`'s inverse: (hit, fraction, normal) as `ray_cast.ray_cast` returns them, a value
    per load (read as one [BLOCK, 4] tile, the values reach their lanes through shared memory: measured on
    an H200, the pre-tick's first pass at 1M 1v1 envs 1.08 ms per tick this way, 1.21 as a tile)."""
    hits_ptr, row = arena_hits
    at = hits_ptr + (row * 4 + w) * ARENA_HIT_WIDTH
    fraction = tl.load(at, mask=live, other=-1.0)
    hit = fraction >= 0
    normal = (tl.load(at + 1, mask=live, other=0.0), tl.load(at + 2, mask=live, other=0.0))
    return hit, tl.where(hit, fraction, 1.0), normal + (tl.load(at + 3, mask=live, other=0.0),)


@jit
def resolve_single_bilateral(pos, rot_mat, vel, ang_vel, inv_inertia_local, ground, point, axis):
    """Bullet's resolveSingleBilateral of the chassis (body 1) against the body under the wheel
    (``ground``, body 2; immovable on the arena): -0.2 x the relative velocity along ``axis`` at
    ``point`` times the effective mass of the pair (the lateral friction impulse)."""
    ground_pos, ground_rot_mat, ground_vel, ground_ang_vel, ground_inv_mass, ground_inv_inertia_local = ground
    rel_pos = sub(point, pos)
    rel_pos2 = sub(point, ground_pos)
    vel_at = sub(add(vel, cross(ang_vel, rel_pos)), add(ground_vel, cross(ground_ang_vel, rel_pos2)))
    a_j = mat_vec(transpose(rot_mat), cross(rel_pos, axis))
    b_j = mat_vec(transpose(ground_rot_mat), cross(rel_pos2, neg(axis)))
    scaled = (inv_inertia_local[0] * a_j[0], inv_inertia_local[1] * a_j[1], inv_inertia_local[2] * a_j[2])
    scaled2 = (
        ground_inv_inertia_local[0] * b_j[0],
        ground_inv_inertia_local[1] * b_j[1],
        ground_inv_inertia_local[2] * b_j[2],
    )
    jac_diag = ((INV_MASS + dot(scaled, a_j)) + ground_inv_mass) + dot(scaled2, b_j)
    return (-VEHICLE_CONTACT_DAMPING * dot(axis, vel_at)) * (1.0 / jac_diag)


@jit
def calc_friction_impulses(
    pos,
    rot_mat,
    vel,
    ang_vel,
    engine_force,
    brake,
    lat_friction,
    long_friction,
    inv_inertia_local,
    axle,
    is_in_contact,
    contact_point,
    contact_normal,
    ground,
    tick_time,
):
    """btVehicleRL::calcFrictionImpulses: each touching wheel's friction impulse per second, a
    4-tuple of vectors.

    Lateral: resolveSingleBilateral along the axle projected onto the contact plane, against the body
    under the wheel (``ground``), times the wheel's lateral friction. Longitudinal: the engine force,
    or without throttle the brake's rolling friction (the contact speed relative to that body, taken
    at the contact point's offset from the car's centre as RocketSim does, times 113.74, clamped to
    the brake), times the longitudinal friction. Engine force, brake and frictions are the values the
    previous tick's controls set."""
    impulse = ()
    for i in tl.static_range(4):
        normal = contact_normal[i]
        wheel_axle = safe_normalized(sub(axle[i], scale(normal, dot(axle[i], normal))))
        forward = safe_normalized(cross(normal, wheel_axle))
        side_impulse = resolve_single_bilateral(
            pos, rot_mat, vel, ang_vel, inv_inertia_local, ground[i], contact_point[i], wheel_axle
        )
        rel_pos = sub(contact_point[i], pos)
        ground_vel_at = add(ground[i][2], cross(ground[i][3], rel_pos))
        rel_vel = dot(sub(add(vel, cross(ang_vel, rel_pos)), ground_vel_at), forward)
        # RocketSim rounds small rolling friction off below 80 ticks/s
        threshold = (-(1.0 / (tick_time * 150.0)) + 0.8) * BT_TO_UU
        rounded = tl.where(tl.abs(rel_vel) < threshold, 0.0, rel_vel)
        rel_vel = tl.where(tick_time > 1.0 / 80.0, rounded, rel_vel)
        rolling = tl.minimum(tl.maximum(-rel_vel * ROLLING_FRICTION_SCALE_MAGIC, -brake), brake)
        rolling = tl.where(engine_force == 0, tl.where(brake != 0, rolling, 0.0), -engine_force / FRICTION_SCALE)
        total = add(
            scale(scale(forward, rolling), long_friction[i]), scale(scale(wheel_axle, side_impulse), lat_friction[i])
        )
        impulse = impulse + (where(is_in_contact[i], scale(total, FRICTION_SCALE), (0.0, 0.0, 0.0)),)
    return impulse


@jit
def update_vehicle_first(
    pos,
    rot_mat,
    vel,
    ang_vel,
    steer_angle,
    engine_force,
    brake,
    lat_friction,
    long_friction,
    extra_pushback,
    wheel_connection,
    wheel_radius,
    suspension_rest_length,
    inv_inertia_local,
    inv_inertia,
    tick_time,
    solver_dt,
    live,
    arena,
    grid,
    bodies,
    NUM_CARS: tl.constexpr,
    NUM_PLANES: tl.constexpr,
    BLOCK: tl.constexpr,
    BODIES: tl.constexpr = True,
    arena_hits=None,
    ACROSS_LANES: tl.constexpr = False,
):
    """Wheel transforms, the four rays (against the arena and, with ``BODIES``, ``bodies``; the arena's
    hits read from ``arena_hits`` where given; with ``ACROSS_LANES`` cast side by side: `ray_cast`), and
    the (lagged) friction impulses: (wheels, extra_pushback).

    ``solver_dt`` is Bullet's solver time step as the pushback reads it: the tick length, but 1/60 s
    before an arena's first step (btContactSolverInfo's default)."""
    hard_point, axle = update_wheel_transforms(pos, rot_mat, steer_angle, wheel_connection)
    (
        is_in_contact,
        on_world,
        contact_point,
        contact_normal,
        suspension_length,
        suspension_relative_velocity,
        clipped_inv_contact_dot_suspension,
        ground,
        extra_pushback,
    ) = ray_cast(
        pos,
        rot_mat,
        vel,
        ang_vel,
        extra_pushback,
        hard_point,
        wheel_radius,
        suspension_rest_length,
        inv_inertia,
        solver_dt,
        live,
        arena,
        grid,
        bodies,
        NUM_CARS,
        NUM_PLANES,
        BLOCK,
        BODIES,
        arena_hits,
        ACROSS_LANES,
    )
    impulse = calc_friction_impulses(
        pos,
        rot_mat,
        vel,
        ang_vel,
        engine_force,
        brake,
        lat_friction,
        long_friction,
        inv_inertia_local,
        axle,
        is_in_contact,
        contact_point,
        contact_normal,
        ground,
        tick_time,
    )
    wheels = (
        hard_point,
        axle,
        is_in_contact,
        contact_point,
        contact_normal,
        suspension_length,
        suspension_relative_velocity,
        clipped_inv_contact_dot_suspension,
        impulse,
        on_world,
        ground,
    )
    return wheels, extra_pushback


@jit
def update_suspension(pos, vel, ang_vel, extra_pushback, suspension_rest_length, suspension_force_scale, wheels, inv_inertia, tick_time):
    """btVehicleRL::updateSuspension: (vel, ang_vel) after each touching wheel's spring impulse.

    Force = (rest - length) x 500 x clipped 1/(n.up) - damping (25 compressing, 40 relaxing) x the
    suspension velocity, times the front/back scale, never pulling; the impulse force x dt + the
    extra pushback goes along the contact normal at the contact point."""
    _, _, is_in_contact, contact_point, contact_normal, suspension_length, rel_vel, clipped_inv, _, _, _ = wheels
    for i in tl.static_range(4):
        force = ((suspension_rest_length[i] - suspension_length[i]) * SUSPENSION_STIFFNESS) * clipped_inv[i]
        damping = tl.where(rel_vel[i] < 0, WHEELS_DAMPING_COMPRESSION, WHEELS_DAMPING_RELAXATION)
        force = tl.maximum((force - damping * rel_vel[i]) * suspension_force_scale[i], 0.0)
        force = tl.where(is_in_contact[i], force, 0.0)
        impulse = scale(contact_normal[i], force * tick_time + extra_pushback[i])
        new_vel, new_ang_vel = apply_impulse(vel, ang_vel, inv_inertia, impulse, sub(contact_point[i], pos))
        applied = force != 0
        vel, ang_vel = where(applied, new_vel, vel), where(applied, new_ang_vel, ang_vel)
    return vel, ang_vel


@jit
def apply_friction_impulses(pos, rot_mat, vel, ang_vel, wheels, inv_inertia, tick_time):
    """btVehicleRL::applyFrictionImpulses: (vel, ang_vel) after each wheel's friction impulse x dt,
    applied at its contact point moved into the chassis' plane through the centre of mass."""
    _, _, _, contact_point, _, _, _, _, impulse, _, _ = wheels
    up = column(rot_mat, 2)
    for i in tl.static_range(4):
        offset = sub(contact_point[i], pos)
        rel_pos = sub(offset, scale(up, dot(up, offset)))
        new_vel, new_ang_vel = apply_impulse(vel, ang_vel, inv_inertia, scale(impulse[i], tick_time), rel_pos)
        applied = (impulse[i][0] != 0) | (impulse[i][1] != 0) | (impulse[i][2] != 0)
        vel, ang_vel = where(applied, new_vel, vel), where(applied, new_ang_vel, ang_vel)
    return vel, ang_vel


@jit
def update_vehicle_second(pos, rot_mat, vel, ang_vel, extra_pushback, suspension_rest_length, suspension_force_scale, wheels, inv_inertia, tick_time):
    """Suspension impulses, then the friction impulses computed in `update_vehicle_first`."""
    vel, ang_vel = update_suspension(
        pos, vel, ang_vel, extra_pushback, suspension_rest_length, suspension_force_scale, wheels, inv_inertia, tick_time
    )
    return apply_friction_impulses(pos, rot_mat, vel, ang_vel, wheels, inv_inertia, tick_time)
