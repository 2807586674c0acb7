"""RocketSim's raycast vehicle (btVehicleRL) per lane: the twin of `vehicle.py`, the same functions
in the same order.

Per-wheel values are 4-tuples in btVehicleRL's order (front-right, front-left, back-right,
back-left), built and read with static loops over the wheels. A tick's wheels travel as one tuple in
`vehicle.Wheels`' field order: (hard_point, axle, is_in_contact, contact_point, contact_normal,
suspension_length, suspension_relative_velocity, clipped_inv_contact_dot_suspension, impulse).
A preset's numbers come from the per-car table `car_table` (`CarParams` flattened, see
`kernels/car.py`); LinearPieceCurves are compile-time constants (`curve`, `kernels/car.py`'s *_CURVE).
"""

from __future__ import annotations

import numpy as np

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.kernels import constexpr, jit, tl
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
)
from nitro.envs.soccar.kernels.vec import add, cross, dot, neg, scale, sub, where

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
        hard_point = hard_point + (add(mat_vec(rot_mat, wheel_connection[i]), pos),)
        steer = steer_angle * 0.0
        if i < 2:  # the front pair steers
            steer = steer_angle
        steering = basis_from_quat(quat_from_axis_angle(up, steer))
        axle = axle + (mat_vec(steering, right),)
    return hard_point, axle


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
    NUM_PLANES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """btVehicleRL::rayCast for every wheel: (is_in_contact, contact_point, contact_normal,
    suspension_length, suspension_relative_velocity, clipped_inv_contact_dot_suspension,
    extra_pushback), 4-tuples.

    The ray runs from the hard point down the chassis' up axis for rest + travel + radius - 2.5 UU.
    A hit sets the suspension length (clamped to rest +- 12 UU), its velocity along the contact
    normal (projected, clipped where the normal is far from up), and, when the wheel is pushed more
    than 2.5 UU past its rest against the static arena, the extra pushback impulse (a quarter of
    resolveSingleCollision's), which then persists while the wheel keeps touching."""
    tri_ptr, _, _, _, _, plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr = arena
    up = column(rot_mat, 2)
    ray_length = ()
    for i in tl.static_range(4):
        ray_length = ray_length + (((suspension_rest_length[i] + MAX_SUSPENSION_TRAVEL) + wheel_radius[i]) - SUSPENSION_SUBTRACTION,)
    # The four rays against the arena, one per pass of a loop that is not unrolled: the arena query
    # (and its memory reads) appears once in the kernel, which keeps Triton's compile time down.
    no = up[0] != up[0]
    zero = up[0] * 0.0
    ray_hit = (no, no, no, no)
    ray_fraction = (zero, zero, zero, zero)
    ray_normal = ((zero, zero, zero), (zero, zero, zero), (zero, zero, zero), (zero, zero, zero))
    for w in range(4):
        start = pick_vec(hard_point, w)
        target = add(start, scale(neg(up), pick(ray_length, w)))
        hit, fraction, normal, _feature = arena_ray_cast(
            start,
            target,
            live,
            tri_ptr,
            plane_normals_ptr,
            plane_offsets_ptr,
            cell_start_ptr,
            cell_tris_ptr,
            grid,
            0,  # plane features are numbered from here: the wheels only need the hit
            NUM_PLANES,
            BLOCK,
        )
        ray_hit = put(ray_hit, w, hit)
        ray_fraction = put(ray_fraction, w, fraction)
        ray_normal = put_vec(ray_normal, w, normal)
    is_in_contact = ()
    contact_point = ()
    contact_normal = ()
    suspension_length = ()
    suspension_relative_velocity = ()
    clipped_inv_contact_dot_suspension = ()
    new_extra_pushback = ()
    for i in tl.static_range(4):
        rest = suspension_rest_length[i]
        radius = wheel_radius[i]
        target = add(hard_point[i], scale(neg(up), ray_length[i]))
        hit, fraction, hit_normal = ray_hit[i], ray_fraction[i], ray_normal[i]
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
        pushed = hit & (trace < threshold)
        pushback = resolve_single_collision(pos, vel, ang_vel, inv_inertia, point, normal, trace - threshold, solver_dt) / 4
        is_in_contact = is_in_contact + (hit,)
        contact_point = contact_point + (point,)
        contact_normal = contact_normal + (normal,)
        suspension_length = suspension_length + (length,)
        suspension_relative_velocity = suspension_relative_velocity + (relative_velocity,)
        clipped_inv_contact_dot_suspension = clipped_inv_contact_dot_suspension + (clipped_inv,)
        new_extra_pushback = new_extra_pushback + (
            tl.where(pushed, pushback, tl.where(hit, extra_pushback[i], 0.0)),
        )
    return (
        is_in_contact,
        contact_point,
        contact_normal,
        suspension_length,
        suspension_relative_velocity,
        clipped_inv_contact_dot_suspension,
        new_extra_pushback,
    )


@jit
def resolve_single_bilateral(pos, rot_mat, vel, ang_vel, inv_inertia_local, point, axis):
    """Bullet's resolveSingleBilateral against a static object: -0.2 x the velocity along ``axis``
    at ``point`` times the effective mass (the lateral friction impulse)."""
    rel_pos = sub(point, pos)
    vel_at = add(vel, cross(ang_vel, rel_pos))
    a_j = mat_vec(transpose(rot_mat), cross(rel_pos, axis))
    scaled = (inv_inertia_local[0] * a_j[0], inv_inertia_local[1] * a_j[1], inv_inertia_local[2] * a_j[2])
    jac_diag = INV_MASS + dot(scaled, a_j)
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
    tick_time,
):
    """btVehicleRL::calcFrictionImpulses: each touching wheel's friction impulse per second, a
    4-tuple of vectors.

    Lateral: resolveSingleBilateral along the axle projected onto the contact plane, times the
    wheel's lateral friction. Longitudinal: the engine force, or without throttle the brake's
    rolling friction (the contact speed times 113.74, clamped to the brake), times the longitudinal
    friction. Engine force, brake and frictions are the values the previous tick's controls set."""
    impulse = ()
    for i in tl.static_range(4):
        normal = contact_normal[i]
        wheel_axle = safe_normalized(sub(axle[i], scale(normal, dot(axle[i], normal))))
        forward = safe_normalized(cross(normal, wheel_axle))
        side_impulse = resolve_single_bilateral(pos, rot_mat, vel, ang_vel, inv_inertia_local, contact_point[i], wheel_axle)
        rel_pos = sub(contact_point[i], pos)
        rel_vel = dot(add(vel, cross(ang_vel, rel_pos)), forward)
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
    NUM_PLANES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Wheel transforms, the four rays, and the (lagged) friction impulses: (wheels, extra_pushback).

    ``solver_dt`` is Bullet's solver time step as the pushback reads it: the tick length, but 1/60 s
    before an arena's first step (btContactSolverInfo's default)."""
    hard_point, axle = update_wheel_transforms(pos, rot_mat, steer_angle, wheel_connection)
    (
        is_in_contact,
        contact_point,
        contact_normal,
        suspension_length,
        suspension_relative_velocity,
        clipped_inv_contact_dot_suspension,
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
        NUM_PLANES,
        BLOCK,
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
    )
    return wheels, extra_pushback


@jit
def update_suspension(pos, vel, ang_vel, extra_pushback, suspension_rest_length, suspension_force_scale, wheels, inv_inertia, tick_time):
    """btVehicleRL::updateSuspension: (vel, ang_vel) after each touching wheel's spring impulse.

    Force = (rest - length) x 500 x clipped 1/(n.up) - damping (25 compressing, 40 relaxing) x the
    suspension velocity, times the front/back scale, never pulling; the impulse force x dt + the
    extra pushback goes along the contact normal at the contact point."""
    _, _, is_in_contact, contact_point, contact_normal, suspension_length, rel_vel, clipped_inv, _ = wheels
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
    _, _, _, contact_point, _, _, _, _, impulse = wheels
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
