"""Car mechanics per lane, one function per stage of RocketSim's `Car`: the twin of `car.py`, the same
functions in the same order and RocketSim's names.

A car's state travels through the stages as its fields (the reference's ``car.name`` is ``name``
here); `kernels/arena.py`'s stage kernels hold each car's fields as one tuple in `CarState.FIELDS`
order (`load_car` / `store_car`: one packed row per car in memory, read and written by each kernel), and
the tick's stages (`pre_tick_update`, `physics_step`, ...) unpack it. Controls are (throttle, steer, pitch, yaw, roll, jump, boost, handbrake), the first five
clamped to [-1, 1], the buttons pressed above 0.5 (CarControls.from_tensor). Forces and torques
accumulate as (force, torque) and act in `physics_step`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car_config import CarParams
from nitro.envs.soccar.kernels import constexpr, jit, stage_jit, tl
from nitro.envs.soccar.kernels.rigid_body import (
    CAR_MASS_BT,
    SIMD_EPSILON,
    apply_gravity,
    clamp_speeds,
    column,
    integrate,
    inv_inertia_world,
    length2,
    mat_inverse,
    mat_mul,
    mat_vec,
    safe_normalized,
    where_mat,
)
from nitro.envs.soccar.kernels.rigid_body import external_impulses as external_impulses_of
from nitro.envs.soccar.kernels.vec import (
    CHUNK, add, atan2, chunk_rows, chunked_row, cross, dot, load_chunked, load_row, neg, scale, store_chunked,
    store_chunks, sub, unchunk_rows, where,
)  # fmt: skip
from nitro.envs.soccar.kernels.vehicle import (
    BODY_DEMOED_AT,
    BODY_ROW,
    BODY_TABLE_WIDTH,
    curve,
    get_forward_speed,
    get_upwards_dir_from_wheel_contacts,
    piecewise,
    update_vehicle_first,
    update_vehicle_second,
)
from nitro.envs.soccar.state import CarState

_f32 = np.float32
POWERSLIDE_RISE_RATE = constexpr(C.POWERSLIDE_RISE_RATE)
POWERSLIDE_FALL_RATE = constexpr(C.POWERSLIDE_FALL_RATE)
THROTTLE_DEADZONE = constexpr(C.THROTTLE_DEADZONE)
STOPPING_FORWARD_VEL = constexpr(C.STOPPING_FORWARD_VEL)
COASTING_BRAKE_FACTOR = constexpr(C.COASTING_BRAKE_FACTOR)
BRAKING_NO_THROTTLE_SPEED_THRESH = constexpr(C.BRAKING_NO_THROTTLE_SPEED_THRESH)
THROTTLE_TORQUE_AMOUNT = constexpr(C.THROTTLE_TORQUE_AMOUNT)
BRAKE_TORQUE_AMOUNT = constexpr(C.BRAKE_TORQUE_AMOUNT)
GRAVITY_Z = constexpr(C.GRAVITY_Z)
FLIP_TORQUE_TIME = constexpr(C.FLIP_TORQUE_TIME)
FLIP_TORQUE_X = constexpr(C.FLIP_TORQUE_X)
FLIP_TORQUE_Y = constexpr(C.FLIP_TORQUE_Y)
FLIP_PITCHLOCK_END = constexpr(float(_f32(C.FLIP_TORQUE_TIME) + _f32(C.FLIP_PITCHLOCK_EXTRA_TIME)))
CAR_AIR_CONTROL_TORQUE_PITCH = constexpr(C.CAR_AIR_CONTROL_TORQUE[0])
CAR_AIR_CONTROL_TORQUE_YAW = constexpr(C.CAR_AIR_CONTROL_TORQUE[1])
CAR_AIR_CONTROL_TORQUE_ROLL = constexpr(C.CAR_AIR_CONTROL_TORQUE[2])
CAR_AIR_CONTROL_DAMPING_PITCH = constexpr(C.CAR_AIR_CONTROL_DAMPING[0])
CAR_AIR_CONTROL_DAMPING_YAW = constexpr(C.CAR_AIR_CONTROL_DAMPING[1])
CAR_AIR_CONTROL_DAMPING_ROLL = constexpr(C.CAR_AIR_CONTROL_DAMPING[2])
CAR_TORQUE_SCALE = constexpr(C.CAR_TORQUE_SCALE)
THROTTLE_AIR_ACCEL = constexpr(C.THROTTLE_AIR_ACCEL)
JUMP_MIN_TIME = constexpr(C.JUMP_MIN_TIME)
JUMP_RESET_END = constexpr(float(_f32(C.JUMP_MIN_TIME) + _f32(C.JUMP_RESET_TIME_PAD)))
JUMP_MAX_TIME = constexpr(C.JUMP_MAX_TIME)
JUMP_PRE_MIN_ACCEL_SCALE = constexpr(C.JUMP_PRE_MIN_ACCEL_SCALE)
CAR_AUTOFLIP_NORMZ_THRESH = constexpr(C.CAR_AUTOFLIP_NORMZ_THRESH)
CAR_AUTOFLIP_ROLL_THRESH = constexpr(C.CAR_AUTOFLIP_ROLL_THRESH)
CAR_AUTOFLIP_TIME = constexpr(C.CAR_AUTOFLIP_TIME)
CAR_AUTOFLIP_IMPULSE = constexpr(C.CAR_AUTOFLIP_IMPULSE)
CAR_AUTOFLIP_TORQUE = constexpr(C.CAR_AUTOFLIP_TORQUE)
PI = constexpr(math.pi)
DOUBLEJUMP_MAX_DELAY = constexpr(C.DOUBLEJUMP_MAX_DELAY)
CAR_MAX_SPEED = constexpr(C.CAR_MAX_SPEED)
FLIP_INITIAL_VEL_SCALE = constexpr(C.FLIP_INITIAL_VEL_SCALE)
FLIP_BACKWARD_IMPULSE_MAX_SPEED_SCALE = constexpr(C.FLIP_BACKWARD_IMPULSE_MAX_SPEED_SCALE)
FLIP_FORWARD_IMPULSE_MAX_SPEED_SCALE = constexpr(C.FLIP_FORWARD_IMPULSE_MAX_SPEED_SCALE)
FLIP_SIDE_SCALE = constexpr(float(_f32(C.FLIP_SIDE_IMPULSE_MAX_SPEED_SCALE) - _f32(1)))
FLIP_BACKWARD_IMPULSE_SCALE_X = constexpr(C.FLIP_BACKWARD_IMPULSE_SCALE_X)
JUMP_IMMEDIATE_FORCE = constexpr(C.JUMP_IMMEDIATE_FORCE)
FLIP_Z_DAMP_START = constexpr(C.FLIP_Z_DAMP_START)
FLIP_Z_DAMP_END = constexpr(C.FLIP_Z_DAMP_END)
CAR_AUTOROLL_FORCE = constexpr(C.CAR_AUTOROLL_FORCE)
CAR_AUTOROLL_TORQUE = constexpr(C.CAR_AUTOROLL_TORQUE)
BOOST_MIN_TIME = constexpr(C.BOOST_MIN_TIME)
BOOST_MAX = constexpr(C.BOOST_MAX)
SUPERSONIC_MAINTAIN_MAX_TIME = constexpr(C.SUPERSONIC_MAINTAIN_MAX_TIME)
SUPERSONIC_MAINTAIN_MIN_SPEED = constexpr(C.SUPERSONIC_MAINTAIN_MIN_SPEED)
SUPERSONIC_START_SPEED = constexpr(C.SUPERSONIC_START_SPEED)
SOLVER_DEFAULT_TIME_STEP = constexpr(C.SOLVER_DEFAULT_TIME_STEP)

STEER_ANGLE_FROM_SPEED_CURVE = curve(C.STEER_ANGLE_FROM_SPEED_CURVE)
POWERSLIDE_STEER_ANGLE_FROM_SPEED_CURVE = curve(C.POWERSLIDE_STEER_ANGLE_FROM_SPEED_CURVE)
DRIVE_SPEED_TORQUE_FACTOR_CURVE = curve(C.DRIVE_SPEED_TORQUE_FACTOR_CURVE)
NON_STICKY_FRICTION_FACTOR_CURVE = curve(C.NON_STICKY_FRICTION_FACTOR_CURVE)
LAT_FRICTION_CURVE = curve(C.LAT_FRICTION_CURVE)
HANDBRAKE_LAT_FRICTION_FACTOR_CURVE = curve(C.HANDBRAKE_LAT_FRICTION_FACTOR_CURVE)
HANDBRAKE_LONG_FRICTION_FACTOR_CURVE = curve(C.HANDBRAKE_LONG_FRICTION_FACTOR_CURVE)
CAR_TABLE_WIDTH = constexpr(28)
"""Floats per car in `car_table`: inv_inertia_local (3), wheel_connection (4 x 3), wheel_radius (4),
suspension_rest_length (4), suspension_force_scale (4), dodge_deadzone (1)."""


def car_table(config: CarParams) -> torch.Tensor:
    """The presets of the C car slots as the kernel reads them: [C, CAR_TABLE_WIDTH] float32."""
    c = config.num_cars
    return torch.cat(
        (
            config.inv_inertia_local,
            config.wheel_connection.reshape(c, 12),
            config.wheel_radius,
            config.suspension_rest_length,
            config.suspension_force_scale,
            config.dodge_deadzone[:, None],
        ),
        1,
    ).contiguous()


@jit
def sgn(x):
    """RS_SGN: (x > 0) - (x < 0) as an int."""
    return (x > 0).to(tl.int32) - (x < 0).to(tl.int32)


@jit
def mass_inertia_times(inv_inertia, rot_mat):
    """m_invInertiaTensorWorld.inverse() times the basis, as RocketSim scales the flip torque."""
    return mat_mul(mat_inverse(inv_inertia), rot_mat)


@jit
def update_wheels(
    pos,
    rot_mat,
    vel,
    ang_vel,
    boost,
    handbrake_val,
    lat_friction,
    long_friction,
    throttle,
    steer,
    boost_pressed,
    handbrake,
    wheels,
    force,
    num_wheels_in_contact,
    forward_speed,
    tick_time,
):
    """Car::_UpdateWheels: handbrake value, engine force and brake, steer angle, wheel frictions and
    the sticky force: (handbrake_val, engine_force, brake, steer_angle, lat_friction, long_friction,
    force). The engine, brake, steer and friction values act from the next tick on."""
    hard_point, axle, is_in_contact, _, contact_normal, _, _, _, _, on_world, _ = wheels
    abs_forward_speed = tl.abs(forward_speed)
    handbrake_val = tl.where(
        handbrake,
        handbrake_val + POWERSLIDE_RISE_RATE * tick_time,
        handbrake_val - POWERSLIDE_FALL_RATE * tick_time,
    )
    handbrake_val = tl.minimum(tl.maximum(handbrake_val, 0.0), 1.0)
    real_throttle = tl.where(boost_pressed & (boost > 0), 1.0, throttle)

    # Throttle and brake.
    drive_speed_scale = piecewise(abs_forward_speed, DRIVE_SPEED_TORQUE_FACTOR_CURVE)
    throttling = tl.abs(real_throttle) >= THROTTLE_DEADZONE
    opposing = (abs_forward_speed > STOPPING_FORWARD_VEL) & (sgn(real_throttle) != sgn(forward_speed))
    coast_brake = tl.where(abs_forward_speed < STOPPING_FORWARD_VEL, 1.0, COASTING_BRAKE_FACTOR)
    real_brake = tl.where(throttling, tl.where(opposing, 1.0, 0.0), coast_brake)
    engine_throttle = tl.where(
        throttling,
        tl.where(opposing & (abs_forward_speed > BRAKING_NO_THROTTLE_SPEED_THRESH), 0.0, real_throttle),
        0.0,
    )
    real_brake = tl.where(handbrake, 0.0, real_brake)  # powersliding: input throttle, no brake
    engine_throttle = tl.where(handbrake, real_throttle, engine_throttle)
    drive_speed_scale = tl.where(num_wheels_in_contact < 3, drive_speed_scale / 4, drive_speed_scale)
    engine_force = (engine_throttle * THROTTLE_TORQUE_AMOUNT) * drive_speed_scale
    brake = real_brake * BRAKE_TORQUE_AMOUNT

    # Steering.
    steer_angle = piecewise(abs_forward_speed, STEER_ANGLE_FROM_SPEED_CURVE)
    powerslide = piecewise(abs_forward_speed, POWERSLIDE_STEER_ANGLE_FROM_SPEED_CURVE)
    steer_angle = tl.where(handbrake_val != 0, steer_angle + (powerslide - steer_angle) * handbrake_val, steer_angle)
    steer_angle = steer_angle * steer

    # Friction of the wheels on the ground (kept for wheels in the air).
    sticky = real_throttle != 0
    new_lat_friction = ()
    new_long_friction = ()
    for i in tl.static_range(4):
        lat_dir = axle[i]
        long_dir = cross(lat_dir, contact_normal[i])
        wheel_delta = sub(hard_point[i], pos)
        cross_vec = add(cross(ang_vel, wheel_delta), vel)
        base_friction = tl.abs(dot(cross_vec, lat_dir))
        slipping = base_friction > 5
        friction_curve_input = tl.where(
            slipping,
            base_friction / tl.where(slipping, tl.abs(dot(cross_vec, long_dir)) + base_friction, 1.0),
            0.0,
        )
        lat = piecewise(friction_curve_input, LAT_FRICTION_CURVE)
        hb_lat = piecewise(friction_curve_input, HANDBRAKE_LAT_FRICTION_FACTOR_CURVE)
        hb_long = piecewise(friction_curve_input, HANDBRAKE_LONG_FRICTION_FACTOR_CURVE)
        lat_hb = lat * ((hb_lat - 1) * handbrake_val + 1)
        long_hb = (hb_long - 1) * handbrake_val + 1
        sliding = handbrake_val != 0
        lat = tl.where(sliding, lat_hb, lat)
        long = tl.where(sliding, long_hb, 1.0)
        non_sticky = piecewise(contact_normal[i][2], NON_STICKY_FRICTION_FACTOR_CURVE)
        lat = tl.where(sticky, lat, lat * non_sticky)
        long = tl.where(sticky, long, long * non_sticky)
        new_lat_friction = new_lat_friction + (tl.where(is_in_contact[i], lat, lat_friction[i]),)
        new_long_friction = new_long_friction + (tl.where(is_in_contact[i], long, long_friction[i]),)

    # Sticky force, while any wheel touches the static arena (not another car or the ball).
    upwards_dir = get_upwards_dir_from_wheel_contacts(is_in_contact, contact_normal, column(rot_mat, 2))
    full_stick = (real_throttle != 0) | (abs_forward_speed > STOPPING_FORWARD_VEL)
    stick_scale = tl.where(full_stick, 0.5 + (1 - tl.abs(upwards_dir[2])), 0.5)
    sticky_force = scale(scale(scale(upwards_dir, stick_scale), GRAVITY_Z), CAR_MASS_BT)
    any_on_world = on_world[0] | on_world[1] | on_world[2] | on_world[3]
    force = add(force, where(any_on_world, sticky_force, (0.0, 0.0, 0.0)))
    return handbrake_val, engine_force, brake, steer_angle, new_lat_friction, new_long_friction, force


@jit
def update_air_torque(
    rot_mat,
    ang_vel,
    is_flipping,
    has_flipped,
    flip_time,
    flip_rel_torque,
    is_auto_flipping,
    throttle,
    pitch,
    yaw,
    roll,
    force,
    torque,
    inv_inertia,
    update_air_control,
):
    """Car::_UpdateAirTorque (cars with fewer than 3 wheels touching): the flip's torque (scaled
    down by a flip cancel), air control with its damping when no wheel touches, and air throttle:
    (is_flipping, force, torque)."""
    forward, right, up = column(rot_mat, 0), column(rot_mat, 1), column(rot_mat, 2)
    dir_pitch, dir_yaw, dir_roll = neg(right), up, neg(forward)
    is_flipping = is_flipping & has_flipped & (flip_time < FLIP_TORQUE_TIME)
    rel = flip_rel_torque
    has_torque = (rel[0] != 0) | (rel[1] != 0) | (rel[2] != 0)
    cancel = (rel[1] != 0) & (pitch != 0) & (sgn(rel[1]) == sgn(pitch))
    pitch_scale = tl.where(cancel, 1 - tl.minimum(tl.abs(pitch), 1.0), 1.0)
    dodge_torque = (rel[0] * FLIP_TORQUE_X, (rel[1] * pitch_scale) * FLIP_TORQUE_Y, rel[2] * 0.0)
    flip_torque = mat_vec(mass_inertia_times(inv_inertia, rot_mat), dodge_torque)
    torque = add(torque, where(is_flipping & has_torque, flip_torque, (0.0, 0.0, 0.0)))
    do_air_control = (~is_flipping) | (~has_torque) | cancel
    do_air_control = do_air_control & (~is_auto_flipping) & update_air_control

    pitch_locked = is_flipping | (has_flipped & (flip_time < FLIP_PITCHLOCK_END))
    any_input = (pitch != 0) | (yaw != 0) | (roll != 0)
    pitch_torque_scale = tl.where(any_input & pitch_locked, 0.0, 1.0)
    control_torque = add(
        add(
            scale(scale(scale(dir_pitch, pitch), pitch_torque_scale), CAR_AIR_CONTROL_TORQUE_PITCH),
            scale(scale(dir_yaw, yaw), CAR_AIR_CONTROL_TORQUE_YAW),
        ),
        scale(scale(dir_roll, roll), CAR_AIR_CONTROL_TORQUE_ROLL),
    )
    control_torque = where(any_input, control_torque, (0.0, 0.0, 0.0))
    damp_pitch = (dot(dir_pitch, ang_vel) * CAR_AIR_CONTROL_DAMPING_PITCH) * (1 - tl.abs(pitch * pitch_torque_scale))
    damp_yaw = (dot(dir_yaw, ang_vel) * CAR_AIR_CONTROL_DAMPING_YAW) * (1 - tl.abs(yaw))
    damp_roll = dot(dir_roll, ang_vel) * CAR_AIR_CONTROL_DAMPING_ROLL
    damping = add(add(scale(dir_yaw, damp_yaw), scale(dir_pitch, damp_pitch)), scale(dir_roll, damp_roll))
    air_torque = scale(mat_vec(mat_inverse(inv_inertia), sub(control_torque, damping)), CAR_TORQUE_SCALE)
    torque = add(torque, where(do_air_control, air_torque, (0.0, 0.0, 0.0)))

    air_throttle = scale(scale(scale(forward, throttle), THROTTLE_AIR_ACCEL), CAR_MASS_BT)
    force = add(force, where(throttle != 0, air_throttle, (0.0, 0.0, 0.0)))
    return is_flipping, force, torque


@jit
def update_jump(
    rot_mat,
    vel,
    is_on_ground,
    has_jumped,
    is_jumping,
    jump_time,
    jump,
    jump_pressed,
    force,
    tick_time,
    jump_immediate_force,
    jump_accel,
):
    """Car::_UpdateJump: the jump's impulse, its hold force (0.62 x before JUMP_MIN_TIME), its timer,
    and the reset of has_jumped on the ground once the jump is at least 0.05 s old:
    (vel, has_jumped, is_jumping, jump_time, force)."""
    up = column(rot_mat, 2)
    grounded = is_on_ground & (~is_jumping)
    keep = has_jumped & (jump_time < JUMP_RESET_END)
    reset = grounded & (~keep)
    has_jumped = has_jumped & (~reset)
    jump_time = tl.where(reset, 0.0, jump_time)

    continuing = (jump_time < JUMP_MIN_TIME) | (jump & (jump_time < JUMP_MAX_TIME))
    starting = (~is_jumping) & is_on_ground & jump_pressed
    is_jumping = tl.where(is_jumping, continuing, starting)
    jump_time = tl.where(starting, 0.0, jump_time)
    vel = add(vel, where(starting, scale(up, jump_immediate_force), (0.0, 0.0, 0.0)))

    hold = scale(up, jump_accel)
    hold = where(jump_time < JUMP_MIN_TIME, scale(hold, JUMP_PRE_MIN_ACCEL_SCALE), hold)
    force = add(force, where(is_jumping, scale(hold, CAR_MASS_BT), (0.0, 0.0, 0.0)))
    has_jumped = has_jumped | is_jumping
    jump_time = tl.where(is_jumping | has_jumped, jump_time + tick_time, jump_time)
    return vel, has_jumped, is_jumping, jump_time, force


@jit
def roll_angle(rot_mat):
    """Angle::FromRotMat's roll (btMatrix3x3::getEulerYPR, negated). The reference's singular case,
    asin(-m[2][0]) equal to +-pi/2 in float32, is |m[2][0]| >= 1 (asin of the next float below 1
    is 3.5e-4 rad short of pi/2)."""
    roll = atan2(rot_mat[2][1], rot_mat[2][2])
    singular = tl.abs(rot_mat[2][0]) >= 1.0
    roll = tl.where(singular, tl.where(roll > 0, roll - PI, roll + PI), roll)
    return -roll


@jit
def update_auto_flip(
    rot_mat,
    vel,
    ang_vel,
    has_world_contact,
    world_contact_normal,
    is_auto_flipping,
    auto_flip_timer,
    auto_flip_torque_scale,
    jump_pressed,
    tick_time,
):
    """Car::_UpdateAutoFlip: jumping while upside down on the arena (body contact with a normal
    pointing up, |roll| > 2.8 rad) pushes the car off and rolls it upright for 0.4 x |roll| / pi s:
    (vel, ang_vel, is_auto_flipping, auto_flip_timer, auto_flip_torque_scale)."""
    forward, up = column(rot_mat, 0), column(rot_mat, 2)
    roll = roll_angle(rot_mat)
    starts = (
        jump_pressed
        & has_world_contact
        & (world_contact_normal[2] > CAR_AUTOFLIP_NORMZ_THRESH)
        & (tl.abs(roll) > CAR_AUTOFLIP_ROLL_THRESH)
    )
    timer = tl.where(starts, CAR_AUTOFLIP_TIME * (tl.abs(roll) / PI), auto_flip_timer)
    torque_scale = tl.where(starts, tl.where(roll > 0, 1.0, -1.0), auto_flip_torque_scale)
    flipping = is_auto_flipping | starts
    vel = add(vel, where(starts, scale(neg(up), CAR_AUTOFLIP_IMPULSE), (0.0, 0.0, 0.0)))
    done = flipping & (timer <= 0)
    turning = flipping & (~done)
    ang_vel = add(ang_vel, where(turning, scale(scale(scale(forward, CAR_AUTOFLIP_TORQUE), torque_scale), tick_time), (0.0, 0.0, 0.0)))
    timer = tl.where(done, 0.0, tl.where(turning, timer - tick_time, timer))
    return vel, ang_vel, flipping & (~done), timer, torque_scale


@jit
def update_double_jump_or_flip(
    rot_mat,
    vel,
    is_on_ground,
    has_jumped,
    is_jumping,
    has_double_jumped,
    has_flipped,
    is_flipping,
    flip_time,
    flip_rel_torque,
    air_time,
    air_time_since_jump,
    is_auto_flipping,
    pitch,
    yaw,
    roll,
    jump_pressed,
    forward_speed,
    dodge_deadzone,
    tick_time,
    unlimited_flips,
    unlimited_double_jumps,
    flip_z_damp_factor,
):
    """Car::_UpdateDoubleJumpOrFlip: air timers; a jump pressed within 1.25 s of the jump's end is a
    flip (with stick input past the dodge deadzone: impulse in the yaw-only heading frame and a flip
    torque) or a double jump; the flip's z-velocity damping; the flip timer: (vel, air_time,
    air_time_since_jump, has_double_jumped, has_flipped, is_flipping, flip_time, flip_rel_torque)."""
    forward, up = column(rot_mat, 0), column(rot_mat, 2)
    ground = is_on_ground
    air_time = tl.where(ground, 0.0, air_time + tick_time)
    counting = has_jumped & (~is_jumping)
    air_time_since_jump = tl.where(ground | (~counting), 0.0, air_time_since_jump + tick_time)
    input_magnitude = (tl.abs(yaw) + tl.abs(pitch)) + tl.abs(roll)
    is_flip_input = input_magnitude >= dodge_deadzone
    unused = (~has_double_jumped) & (~has_flipped)
    can_use = unused | (tl.where(is_flip_input, unlimited_flips, unlimited_double_jumps) != 0)
    acting = (~ground) & jump_pressed & (air_time_since_jump < DOUBLEJUMP_MAX_DELAY) & can_use & (~is_auto_flipping)
    flipping_now = acting & is_flip_input
    double_jumping = acting & (~is_flip_input)

    # The flip: direction, torque, and the initial impulse.
    dodge_x = -pitch
    dodge_y = yaw + roll
    stall = (tl.abs(yaw + roll) < 0.1) & (tl.abs(pitch) < 0.1)
    dodge = safe_normalized((dodge_x, dodge_y, dodge_x * 0.0))
    dodge = where(stall, (0.0, 0.0, 0.0), dodge)
    new_rel_torque = (-dodge[1], dodge[0], dodge_x * 0.0)
    dodge = (
        tl.where(tl.abs(dodge[0]) < 0.1, 0.0, dodge[0]),
        tl.where(tl.abs(dodge[1]) < 0.1, 0.0, dodge[1]),
        tl.where(tl.abs(dodge[2]) < 0.1, 0.0, dodge[2]),
    )
    has_impulse = length2(dodge) >= SIMD_EPSILON  # !fuzzyZero()
    forward_speed_ratio = tl.abs(forward_speed) / CAR_MAX_SPEED
    backwards = tl.where(tl.abs(forward_speed) < 100.0, dodge[0] < 0, (dodge[0] >= 0) != (forward_speed >= 0))
    initial = scale(dodge, FLIP_INITIAL_VEL_SCALE)
    max_speed_scale_x = tl.where(backwards, FLIP_BACKWARD_IMPULSE_MAX_SPEED_SCALE, FLIP_FORWARD_IMPULSE_MAX_SPEED_SCALE)
    initial_x = initial[0] * (((max_speed_scale_x - 1) * forward_speed_ratio) + 1.0)
    initial_y = initial[1] * ((FLIP_SIDE_SCALE * forward_speed_ratio) + 1.0)
    initial_x = tl.where(backwards, initial_x * FLIP_BACKWARD_IMPULSE_SCALE_X, initial_x)
    forward_2d = (forward[0] * 1.0, forward[1] * 1.0, forward[2] * 0.0)
    length = tl.sqrt(length2(forward_2d))
    flat = length > SIMD_EPSILON * SIMD_EPSILON
    forward_2d = (
        tl.where(flat, forward_2d[0] / length, 0.0),
        tl.where(flat, forward_2d[1] / length, 0.0),
        tl.where(flat, forward_2d[2] / length, 0.0),
    )
    right_2d = (-forward_2d[1], forward_2d[0], length * 0.0)
    delta_vel = add(scale(forward_2d, initial_x), scale(right_2d, initial_y))
    vel = add(vel, where(flipping_now & has_impulse, delta_vel, (0.0, 0.0, 0.0)))
    vel = add(vel, where(double_jumping, scale(up, JUMP_IMMEDIATE_FORCE), (0.0, 0.0, 0.0)))

    is_flipping = is_flipping | flipping_now
    has_flipped = (~ground) & (has_flipped | flipping_now)
    flip_time = tl.where(ground | flipping_now, 0.0, flip_time)
    flip_time = tl.where(is_flipping | has_flipped, flip_time + tick_time, flip_time)
    damp_z = (
        is_flipping
        & (flip_time <= FLIP_TORQUE_TIME)
        & (flip_time >= FLIP_Z_DAMP_START)
        & ((vel[2] < 0) | (flip_time < FLIP_Z_DAMP_END))
    )
    vel = (vel[0], vel[1], tl.where(damp_z, vel[2] * flip_z_damp_factor, vel[2]))
    return (
        vel,
        air_time,
        air_time_since_jump,
        (~ground) & (has_double_jumped | double_jumping),
        has_flipped,
        is_flipping,
        flip_time,
        where(flipping_now, new_rel_torque, flip_rel_torque),
    )


@jit
def update_auto_roll(rot_mat, world_contact_normal, is_in_contact, contact_normal, force, torque, inv_inertia, num_wheels_in_contact):
    """Car::_UpdateAutoRoll: toward the surface under the wheels (or the body's last contact): a
    force into it and a torque aligning the car's right and forward axes with it: (force, torque)."""
    forward, right, up = column(rot_mat, 0), column(rot_mat, 1), column(rot_mat, 2)
    wheel_up = get_upwards_dir_from_wheel_contacts(is_in_contact, contact_normal, up)
    ground_up = where(num_wheels_in_contact > 0, wheel_up, world_contact_normal)
    ground_down = neg(ground_up)
    cross_right = cross(ground_up, forward)
    cross_forward = cross(ground_down, cross_right)
    right_factor = 1 - tl.minimum(tl.maximum(dot(right, cross_right), 0.0), 1.0)
    forward_factor = 1 - tl.minimum(tl.maximum(dot(forward, cross_forward), 0.0), 1.0)
    torque_dir_right = scale(forward, tl.where(dot(right, ground_up) >= 0, -1.0, 1.0))
    torque_dir_forward = scale(right, tl.where(dot(forward, ground_up) >= 0, 1.0, -1.0))
    roll_torque = add(scale(torque_dir_forward, forward_factor), scale(torque_dir_right, right_factor))
    roll_force = scale(scale(ground_down, CAR_AUTOROLL_FORCE), CAR_MASS_BT)
    roll_torque = scale(mat_vec(mat_inverse(inv_inertia), roll_torque), CAR_AUTOROLL_TORQUE)
    return add(force, roll_force), add(torque, roll_torque)


@jit
def update_boost(
    rot_mat,
    is_on_ground,
    boost,
    is_boosting,
    boosting_time,
    time_since_boosted,
    boost_pressed,
    force,
    tick_time,
    boost_used_per_second,
    boost_accel_ground,
    boost_accel_air,
):
    """Car::_UpdateBoost: boosting lasts at least BOOST_MIN_TIME once started and needs boost left;
    it burns boost and pushes forward (harder on the ground). (Recharge is a dropshot mutator.):
    (boost, is_boosting, boosting_time, time_since_boosted, force)."""
    has_boost = boost > 0
    is_boosting = has_boost & tl.where(is_boosting, boost_pressed | (boosting_time < BOOST_MIN_TIME), boost_pressed)
    boosting_time = tl.where(is_boosting, boosting_time + tick_time, 0.0)
    boost = tl.where(is_boosting, tl.maximum(boost - boost_used_per_second * tick_time, 0.0), boost)
    accel = tl.where(is_on_ground, boost_accel_ground, boost_accel_air)
    boost_force = scale(scale(column(rot_mat, 0), accel), CAR_MASS_BT)
    time_since_boosted = tl.where(is_boosting, 0.0, time_since_boosted + tick_time)
    force = add(force, where(is_boosting, boost_force, (0.0, 0.0, 0.0)))
    return tl.minimum(boost, BOOST_MAX), is_boosting, boosting_time, time_since_boosted, force


@jit
def where_car(c, a, b):
    """Each field of car tuple ``a`` where ``c``, else ``b``'s (`CarState.FIELDS` order)."""
    return (
        where(c, a[0], b[0]), where_mat(c, a[1], b[1]), where(c, a[2], b[2]), where(c, a[3], b[3]),
        tl.where(c, a[4], b[4]), where4(c, a[5], b[5]), tl.where(c, a[6], b[6]), tl.where(c, a[7], b[7]),
        tl.where(c, a[8], b[8]), where(c, a[9], b[9]), tl.where(c, a[10], b[10]), tl.where(c, a[11], b[11]),
        tl.where(c, a[12], b[12]), tl.where(c, a[13], b[13]), tl.where(c, a[14], b[14]),
        tl.where(c, a[15], b[15]), tl.where(c, a[16], b[16]), tl.where(c, a[17], b[17]),
        tl.where(c, a[18], b[18]), tl.where(c, a[19], b[19]), tl.where(c, a[20], b[20]),
        tl.where(c, a[21], b[21]), tl.where(c, a[22], b[22]), tl.where(c, a[23], b[23]),
        tl.where(c, a[24], b[24]), where(c, a[25], b[25]), tl.where(c, a[26], b[26]),
        tl.where(c, a[27], b[27]), tl.where(c, a[28], b[28]), tl.where(c, a[29], b[29]),
        where8(c, a[30], b[30]), tl.where(c, a[31], b[31]), tl.where(c, a[32], b[32]),
        tl.where(c, a[33], b[33]), where(c, a[34], b[34]), tl.where(c, a[35], b[35]),
        tl.where(c, a[36], b[36]), tl.where(c, a[37], b[37]), where4(c, a[38], b[38]),
        where4(c, a[39], b[39]), where4(c, a[40], b[40]),
    )  # fmt: skip


@jit
def where4(c, a, b):
    """Per wheel: ``a`` where ``c``, else ``b`` (4-tuples)."""
    return tl.where(c, a[0], b[0]), tl.where(c, a[1], b[1]), tl.where(c, a[2], b[2]), tl.where(c, a[3], b[3])


@jit
def where8(c, a, b):
    """Per control (8-tuples)."""
    return where4(c, (a[0], a[1], a[2], a[3]), (b[0], b[1], b[2], b[3])) + where4(
        c, (a[4], a[5], a[6], a[7]), (b[4], b[5], b[6], b[7])
    )


@jit
def pre_tick_update(
    car,
    controls,
    car_params,
    tick_time,
    solver_dt,
    jump_immediate_force,
    jump_accel,
    boost_used_per_second,
    boost_accel_ground,
    boost_accel_air,
    unlimited_flips,
    unlimited_double_jumps,
    flip_z_damp_factor,
    live,
    arena,
    grid,
    bodies,
    NUM_CARS: tl.constexpr,
    NUM_PLANES: tl.constexpr,
    BLOCK: tl.constexpr,
    BODIES: tl.constexpr = True,
    DEMOLISHED: tl.constexpr = True,
    arena_hits=None,
    ACROSS_LANES: tl.constexpr = False,
):
    """Car::_PreTickUpdate of one car per lane: the car's stages in RocketSim's order. Returns the car
    (impulses already in its velocities) and the force and torque for Bullet's step.

    ``bodies``: the cars and the ball as the wheels' rays and friction see them (`kernels/vehicle.py`:
    the state when the cars' pre-ticks start); without ``BODIES`` the rays meet the arena alone
    (`kernels/vehicle.ray_cast`), their hits read from ``arena_hits`` where given; with ``ACROSS_LANES``
    (one car per program, the same car in every lane) its rays are cast side by side. Without
    ``DEMOLISHED`` no lane holds a demolished car, so the car as it came (what a demolished car keeps)
    is not held in registers to the end."""
    (
        pos, rot_mat, vel, ang_vel, is_on_ground, wheels_with_contact, has_jumped, has_double_jumped,
        has_flipped, flip_rel_torque, jump_time, flip_time, is_flipping, is_jumping, air_time,
        air_time_since_jump, boost, boosting_time, is_supersonic, supersonic_time, handbrake_val,
        is_auto_flipping, auto_flip_timer, auto_flip_torque_scale, has_world_contact, world_contact_normal,
        car_contact_id, car_contact_cooldown_timer, is_demoed, demo_respawn_timer, last_controls,
        tick_count_since_update, is_boosting, time_since_boosted, velocity_impulse_cache, engine_force,
        brake, steer_angle, lat_friction, long_friction, extra_pushback,
    ) = car  # fmt: skip
    # Demolished cars do nothing here (their countdown and respawn come first: `rules.update_demo`).
    frozen = car
    throttle, steer, pitch, yaw, roll, jump, boost_pressed, handbrake = controls
    inv_inertia_local, wheel_connection, wheel_radius, suspension_rest_length, suspension_force_scale, dodge_deadzone = car_params
    zero = (vel[0] * 0.0, vel[1] * 0.0, vel[2] * 0.0)
    force, torque = zero, zero
    inv_inertia = inv_inertia_world(rot_mat, inv_inertia_local)
    wheels, extra_pushback = update_vehicle_first(
        pos, rot_mat, vel, ang_vel, steer_angle, engine_force, brake, lat_friction, long_friction,
        extra_pushback, wheel_connection, wheel_radius, suspension_rest_length, inv_inertia_local,
        inv_inertia, tick_time, solver_dt, live, arena, grid, bodies, NUM_CARS, NUM_PLANES, BLOCK, BODIES,
        arena_hits, ACROSS_LANES,
    )  # fmt: skip
    jump_pressed = jump & (last_controls[5] <= 0.5)
    wheels_with_contact = wheels[2]
    num_wheels_in_contact = (
        (wheels_with_contact[0].to(tl.int32) + wheels_with_contact[1].to(tl.int32))
        + wheels_with_contact[2].to(tl.int32)
    ) + wheels_with_contact[3].to(tl.int32)
    is_on_ground = num_wheels_in_contact >= 3
    forward_speed = get_forward_speed(vel, rot_mat)
    handbrake_val, engine_force, brake, steer_angle, lat_friction, long_friction, force = update_wheels(
        pos, rot_mat, vel, ang_vel, boost, handbrake_val, lat_friction, long_friction, throttle, steer,
        boost_pressed, handbrake, wheels, force, num_wheels_in_contact, forward_speed, tick_time,
    )  # fmt: skip

    in_air = num_wheels_in_contact < 3
    air_flipping, air_force, air_torque = update_air_torque(
        rot_mat, ang_vel, is_flipping, has_flipped, flip_time, flip_rel_torque, is_auto_flipping,
        throttle, pitch, yaw, roll, force, torque, inv_inertia, num_wheels_in_contact == 0,
    )  # fmt: skip
    is_flipping = in_air & air_flipping
    force, torque = where(in_air, air_force, force), where(in_air, air_torque, torque)

    vel, has_jumped, is_jumping, jump_time, force = update_jump(
        rot_mat, vel, is_on_ground, has_jumped, is_jumping, jump_time, jump, jump_pressed, force,
        tick_time, jump_immediate_force, jump_accel,
    )  # fmt: skip
    vel, ang_vel, is_auto_flipping, auto_flip_timer, auto_flip_torque_scale = update_auto_flip(
        rot_mat, vel, ang_vel, has_world_contact, world_contact_normal, is_auto_flipping, auto_flip_timer,
        auto_flip_torque_scale, jump_pressed, tick_time,
    )  # fmt: skip
    (
        vel, air_time, air_time_since_jump, has_double_jumped, has_flipped, is_flipping, flip_time,
        flip_rel_torque,
    ) = update_double_jump_or_flip(
        rot_mat, vel, is_on_ground, has_jumped, is_jumping, has_double_jumped, has_flipped, is_flipping,
        flip_time, flip_rel_torque, air_time, air_time_since_jump, is_auto_flipping, pitch, yaw, roll,
        jump_pressed, forward_speed, dodge_deadzone, tick_time, unlimited_flips, unlimited_double_jumps,
        flip_z_damp_factor,
    )  # fmt: skip
    rolls = (throttle != 0) & (((num_wheels_in_contact > 0) & (num_wheels_in_contact < 4)) | has_world_contact)
    roll_force, roll_torque = update_auto_roll(
        rot_mat, world_contact_normal, wheels_with_contact, wheels[4], force, torque, inv_inertia,
        num_wheels_in_contact,
    )  # fmt: skip
    force, torque = where(rolls, roll_force, force), where(rolls, roll_torque, torque)
    has_world_contact = has_world_contact & (~has_world_contact)  # cleared (RocketSim: = false)
    vel, ang_vel = update_vehicle_second(
        pos, rot_mat, vel, ang_vel, extra_pushback, suspension_rest_length, suspension_force_scale, wheels,
        inv_inertia, tick_time,
    )  # fmt: skip
    boost, is_boosting, boosting_time, time_since_boosted, force = update_boost(
        rot_mat, is_on_ground, boost, is_boosting, boosting_time, time_since_boosted, boost_pressed, force,
        tick_time, boost_used_per_second, boost_accel_ground, boost_accel_air,
    )  # fmt: skip
    updated = (
        pos, rot_mat, vel, ang_vel, is_on_ground, wheels_with_contact, has_jumped, has_double_jumped,
        has_flipped, flip_rel_torque, jump_time, flip_time, is_flipping, is_jumping, air_time,
        air_time_since_jump, boost, boosting_time, is_supersonic, supersonic_time, handbrake_val,
        is_auto_flipping, auto_flip_timer, auto_flip_torque_scale, has_world_contact, world_contact_normal,
        car_contact_id, car_contact_cooldown_timer, is_demoed, demo_respawn_timer, last_controls,
        tick_count_since_update, is_boosting, time_since_boosted, velocity_impulse_cache, engine_force,
        brake, steer_angle, lat_friction, long_friction, extra_pushback,
    )  # fmt: skip
    if DEMOLISHED:
        updated = where_car(is_demoed, frozen, updated)
        force, torque = where(is_demoed, zero, force), where(is_demoed, zero, torque)
    return updated, force, torque


@jit
def external_impulses(car, force, torque, inv_inertia_local, tick_time, gravity_z):
    """The car's forces and torques as the solver's external impulses: gravity joins the pre-tick's
    forces (applyGravity). Returns (ext_v UU/s, ext_w rad/s)."""
    force = apply_gravity(force, gravity_z)
    inv_inertia = inv_inertia_world(car[1], inv_inertia_local)
    return external_impulses_of(force, torque, inv_inertia, tick_time)


@jit
def physics_step(car, ext_v, ext_w, solved, tick_time):
    """The car's part of btDiscreteDynamicsWorld::stepSimulation after the contact solve: the
    solver's write-back (velocity deltas, split-impulse push) and the integration, and the world
    contact RocketSim's callback records. ``solved``: (dv, dw, push_v, push_w, has_world_contact,
    world_contact_normal), `kernels/car_contacts.solve_car_world`'s. Demolished cars are not
    simulated."""
    pos, rot_mat, vel, ang_vel = car[0], car[1], car[2], car[3]
    is_demoed = car[28]
    dv, dw, push_v, push_w, has_contact, contact_normal = solved
    new_pos, new_rot_mat, new_vel, new_ang_vel = integrate(
        pos, rot_mat, vel, ang_vel, ext_v, ext_w, dv, dw, push_v, push_w, tick_time
    )
    alive = ~is_demoed
    moved_contact = car[24] | has_contact
    moved_normal = where(has_contact, contact_normal, car[25])
    return (
        (where(alive, new_pos, pos), where_mat(alive, new_rot_mat, rot_mat), where(alive, new_vel, vel),
         where(alive, new_ang_vel, ang_vel))
        + car[4:24]
        + (tl.where(alive, moved_contact, car[24]), where(alive, moved_normal, car[25]))
        + car[26:]
    )  # fmt: skip


@jit
def post_tick_update(car, controls, tick_time):
    """Car::_PostTickUpdate: supersonic (from 2200 UU/s, kept above 2100 for up to 1 s), the bump
    cooldown timer, and the controls remembered for the next tick's jump edge."""
    vel, is_supersonic, supersonic_time = car[2], car[18], car[19]
    cooldown, is_demoed = car[27], car[28]
    speed2 = length2(vel)
    maintaining = is_supersonic & (supersonic_time < SUPERSONIC_MAINTAIN_MAX_TIME)
    threshold = tl.where(
        maintaining,
        SUPERSONIC_MAINTAIN_MIN_SPEED * SUPERSONIC_MAINTAIN_MIN_SPEED,
        SUPERSONIC_START_SPEED * SUPERSONIC_START_SPEED,
    )
    alive = ~is_demoed
    new_supersonic = speed2 >= threshold
    new_time = tl.where(new_supersonic, supersonic_time + tick_time, 0.0)
    new_cooldown = tl.where(cooldown > 0, tl.maximum(cooldown - tick_time, 0.0), cooldown)
    throttle, steer, pitch, yaw, roll, jump, boost, handbrake = controls
    last_controls = (
        throttle, steer, pitch, yaw, roll, jump.to(tl.float32), boost.to(tl.float32), handbrake.to(tl.float32),
    )  # fmt: skip
    return (
        car[:18]
        + (tl.where(alive, new_supersonic, is_supersonic), tl.where(alive, new_time, supersonic_time))
        + car[20:27]
        + (tl.where(alive, new_cooldown, cooldown),)
        + car[28:30]
        + (where8(alive, last_controls, car[30]),)
        + car[31:]
    )


@jit
def finish_physics_tick(car):
    """Car::_FinishPhysicsTick: the cached bump velocity, the speed clamps, the tick counter."""
    vel, ang_vel, is_demoed = car[2], car[3], car[28]
    tick_count_since_update, velocity_impulse_cache = car[31], car[34]
    new_vel, new_ang_vel = clamp_speeds(add(vel, velocity_impulse_cache), ang_vel)
    alive = ~is_demoed
    zero = (vel[0] * 0.0, vel[1] * 0.0, vel[2] * 0.0)
    return (
        car[:2]
        + (where(alive, new_vel, vel), where(alive, new_ang_vel, ang_vel))
        + car[4:31]
        + (tl.where(alive, tick_count_since_update + 1, tick_count_since_update),)
        + car[32:34]
        + (where(alive, zero, velocity_impulse_cache),)
        + car[35:]
    )


# --- The car's state in registers -------------------------------------------------------------------

PACKED = tuple(name for name, (_, dtype) in CarState.FIELDS.items() if dtype in (torch.float32, torch.bool))
"""The CarState fields the fused tick reads and writes as one float32 row per car (`pack_cars`; bools as
0 / 1): all but the two integer ones (`car_contact_id`, `tick_count_since_update`), which keep their own
arrays."""
_WIDTHS = [math.prod(CarState.FIELDS[name][0]) for name in PACKED]
AT = constexpr(tuple(sum(_WIDTHS[:i]) for i in range(len(PACKED))))
"""Where each packed field starts in a car row, in `PACKED` order."""
PACKED_FLOATS = constexpr(sum(_WIDTHS))
CAR_WIDTH = PACKED_FLOATS
"""Floats per car row: the packed fields back to back (88)."""
CAR_TUPLE_FLOATS = constexpr(sum(_WIDTHS[: PACKED.index("extra_pushback") + 1]))
"""The packed floats of `load_car`'s tuple; the ball hit info's follow them in the row (the game rules'
kernels read and write those: `kernels/arena.load_hit_info`)."""
assert CAR_WIDTH.value % CHUNK.value == 0  # (whole 16-byte chunks: `vec.chunked_at`)
# the wheel rays read the other cars' rows and the car table as `kernels/vehicle.py` lays them out
assert PACKED[:4] == ("pos", "rot_mat", "vel", "ang_vel") and AT.value[:5] == (0, 3, 12, 15, 18)
assert (CAR_WIDTH.value, AT.value[PACKED.index("is_demoed")]) == (BODY_ROW.value, BODY_DEMOED_AT.value)
assert CAR_TABLE_WIDTH.value == BODY_TABLE_WIDTH.value


def chunks_of(names: tuple[str, ...]) -> int:
    """The bit mask of the car row's chunks (`vec.CHUNK` columns each, `vec.store_chunks`) that hold the
    `PACKED` fields ``names``."""
    mask = 0
    for name in names:
        at = AT.value[PACKED.index(name)]
        for k in range(at, at + _WIDTHS[PACKED.index(name)]):
            mask |= 1 << (k // CHUNK.value)
    return mask


CAR_STEP_WRITES = ("pos", "rot_mat", "vel", "ang_vel", "has_world_contact", "world_contact_normal", "is_supersonic",
                   "supersonic_time", "car_contact_cooldown_timer", "last_controls",
                   "velocity_impulse_cache")  # fmt: skip
"""The packed fields the car step changes (`physics_step`, `post_tick_update`, `finish_physics_tick`; the
third integer one, tick_count_since_update, has its own array): `kernels/arena.car_step` writes only
their chunks of each row (12 of 22), and loads only the chunks it reads, about half a row less each way."""
CAR_STEP_CHUNKS = constexpr(chunks_of(CAR_STEP_WRITES))
PRE_TICK_WRITES = ("vel", "ang_vel", "is_on_ground", "wheels_with_contact", "has_jumped", "has_double_jumped",
                   "has_flipped", "flip_rel_torque", "jump_time", "flip_time", "is_flipping", "is_jumping", "air_time",
                   "air_time_since_jump", "boost", "boosting_time", "handbrake_val", "is_auto_flipping",
                   "auto_flip_timer", "auto_flip_torque_scale", "has_world_contact", "is_boosting",
                   "time_since_boosted", "engine_force", "brake", "steer_angle", "lat_friction", "long_friction",
                   "extra_pushback")  # fmt: skip
"""The packed fields Car::_PreTickUpdate changes (`pre_tick_update`; a demolished car's countdown and
respawn, `rules.update_demo`, change the rest): where a car's row is updated in place, the pre-tick's
first pass writes only their chunks (14 of 22; `kernels/arena.pre_tick_kernel`)."""
PRE_TICK_CHUNKS = constexpr(chunks_of(PRE_TICK_WRITES))


def pack_cars(cars: CarState) -> torch.Tensor:
    """The cars' `PACKED` fields as one float32 row per car (row env * C + car), chunked (`vec.chunked_at`:
    `load_car`'s input)."""
    rows = cars.pos.shape[0] * cars.pos.shape[1]
    parts = [getattr(cars, name).reshape(rows, width).to(torch.float32) for name, width in zip(PACKED, _WIDTHS)]
    return chunk_rows(torch.cat(parts, 1), cars.pos.shape[1])


def unpack_cars_(rows: torch.Tensor, cars: CarState) -> None:
    """`pack_cars`' inverse, in place: the rows written back into the cars' own tensors."""
    rows = unchunk_rows(rows, cars.pos.shape[0], cars.pos.shape[1])
    for name, at, width in zip(PACKED, AT.value, _WIDTHS):
        field = getattr(cars, name)
        field.copy_(rows[:, at : at + width].reshape(field.shape))


@jit
def load_car(rows_ptr, car_contact_id_ptr, tick_count_since_update_ptr, row, live, NUM_CARS: tl.constexpr,
             BLOCK: tl.constexpr):  # fmt: skip
    """Car ``row`` (= env * C + car) as the kernel's car tuple, in `CarState.FIELDS` order: its packed
    row (`pack_cars`, one memory operation) and its two integer fields."""
    v = load_car_row(rows_ptr, row, live, NUM_CARS, BLOCK)
    return car_of_row(
        v, tl.load(car_contact_id_ptr + row, mask=live, other=0), tl.load(tick_count_since_update_ptr + row, mask=live, other=0)
    )


@jit
def load_car_row(rows_ptr, row, live, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr):
    """Car row ``row``'s `CAR_WIDTH` floats (0 where not live)."""
    return load_car_columns(rows_ptr, row, live, 0, CAR_WIDTH, NUM_CARS, BLOCK)


@jit
def store_car_row(rows_ptr, row, values, live, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr):
    """`load_car_row`'s inverse."""
    store_car_columns(rows_ptr, row, values, live, 0, CAR_WIDTH, NUM_CARS, BLOCK)


@jit
def load_car_columns(rows_ptr, row, live, FIRST: tl.constexpr, COUNT: tl.constexpr, NUM_CARS: tl.constexpr,
                     BLOCK: tl.constexpr):  # fmt: skip
    """Columns FIRST to FIRST + COUNT - 1 of car row ``row`` = env * NUM_CARS + car (`pack_cars`' chunked
    rows)."""
    return load_chunked(rows_ptr, row, live, CAR_WIDTH, NUM_CARS, FIRST, COUNT, BLOCK)


@jit
def store_car_chunks(rows_ptr, row, values, live, CHUNKS: tl.constexpr, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr):
    """The chunks CHUNKS (`chunks_of`) of car row ``row`` from its `CAR_WIDTH` values; the others kept."""
    store_chunks(rows_ptr, row, values, live, CAR_WIDTH, NUM_CARS, CHUNKS, BLOCK)


@jit
def store_car_columns(rows_ptr, row, values, live, FIRST: tl.constexpr, COUNT: tl.constexpr, NUM_CARS: tl.constexpr,
                      BLOCK: tl.constexpr):  # fmt: skip
    """`load_car_columns`' inverse."""
    store_chunked(rows_ptr, row, values, live, CAR_WIDTH, NUM_CARS, FIRST, COUNT, BLOCK)


@jit
def car_of_row(v, car_contact_id, tick_count_since_update):
    """The car tuple of a car row's floats ``v`` (`load_car_row`) and its two integer fields."""
    return (
        vec3(v, AT[0]), mat3(v, AT[1]), vec3(v, AT[2]), vec3(v, AT[3]), v[AT[4]] != 0, flags4(v, AT[5]),
        v[AT[6]] != 0, v[AT[7]] != 0, v[AT[8]] != 0, vec3(v, AT[9]), v[AT[10]], v[AT[11]], v[AT[12]] != 0,
        v[AT[13]] != 0, v[AT[14]], v[AT[15]], v[AT[16]], v[AT[17]], v[AT[18]] != 0, v[AT[19]], v[AT[20]],
        v[AT[21]] != 0, v[AT[22]], v[AT[23]], v[AT[24]] != 0, vec3(v, AT[25]), car_contact_id,
        v[AT[26]], v[AT[27]] != 0, v[AT[28]], floats8(v, AT[29]), tick_count_since_update,
        v[AT[30]] != 0, v[AT[31]], vec3(v, AT[32]), v[AT[33]], v[AT[34]], v[AT[35]], floats4(v, AT[36]),
        floats4(v, AT[37]), floats4(v, AT[38]),
    )  # fmt: skip


@jit
def store_car(rows_ptr, car_contact_id_ptr, tick_count_since_update_ptr, row, live, car, NUM_CARS: tl.constexpr,
              BLOCK: tl.constexpr):  # fmt: skip
    """`load_car`'s inverse (the row's ball hit info floats zero)."""
    zero = car[0][0] * 0.0
    no_hit_info = (zero, (zero, zero, zero), (zero, zero, zero), (zero, zero, zero))
    store_car_row(rows_ptr, row, car_row_values(car, no_hit_info), live, NUM_CARS, BLOCK)
    tl.store(car_contact_id_ptr + row, car[26], mask=live)
    tl.store(tick_count_since_update_ptr + row, car[31], mask=live)


@jit
def car_row_values(car, hit_info):
    """`car_of_row`'s inverse: a car tuple and its ball hit info (``hit_info``'s first four fields:
    is_valid, relative_pos_on_ball, ball_pos, extra_hit_vel, as `kernels/arena.load_hit_info` gives them)
    as its row's `CAR_WIDTH` floats; the two integer fields keep their own arrays."""
    f = (
        car[0] + car[1][0] + car[1][1] + car[1][2] + car[2] + car[3] + (car[4],) + car[5] + (car[6], car[7], car[8])
        + car[9] + car[10:25] + car[25] + car[27:30] + car[30] + car[32:34] + car[34] + car[35:38] + car[38]
        + car[39] + car[40] + (hit_info[0],) + hit_info[1] + hit_info[2] + hit_info[3]
    )  # fmt: skip
    values = ()
    for k in tl.static_range(CAR_WIDTH):
        values = values + (f[k].to(tl.float32),)
    return values


@jit
def vec3(v, at: tl.constexpr):
    return v[at], v[at + 1], v[at + 2]


@jit
def mat3(v, at: tl.constexpr):
    """Three rows of three (btMatrix3x3's storage order)."""
    return vec3(v, at), vec3(v, at + 3), vec3(v, at + 6)


@jit
def floats4(v, at: tl.constexpr):
    return v[at], v[at + 1], v[at + 2], v[at + 3]


@jit
def flags4(v, at: tl.constexpr):
    return v[at] != 0, v[at + 1] != 0, v[at + 2] != 0, v[at + 3] != 0


@jit
def floats8(v, at: tl.constexpr):
    return floats4(v, at) + floats4(v, at + 4)


@jit
def load_controls(controls_ptr, row, live, BLOCK: tl.constexpr):
    """CarControls.from_tensor of [N, C, 8] controls: the analog inputs clamped to [-1, 1] (ClampFix),
    the buttons pressed above 0.5."""
    c = load_row(controls_ptr, row, live, 8, BLOCK)
    return (
        tl.minimum(tl.maximum(c[0], -1.0), 1.0),
        tl.minimum(tl.maximum(c[1], -1.0), 1.0),
        tl.minimum(tl.maximum(c[2], -1.0), 1.0),
        tl.minimum(tl.maximum(c[3], -1.0), 1.0),
        tl.minimum(tl.maximum(c[4], -1.0), 1.0),
        c[5] > 0.5,
        c[6] > 0.5,
        c[7] > 0.5,
    )


@jit
def load_car_params(car_table_ptr, car):
    """Car slot ``car``'s row of `car_table`: (inv_inertia_local, wheel_connection, wheel_radius,
    suspension_rest_length, suspension_force_scale, dodge_deadzone), the same for every lane."""
    row = car_table_ptr + car * CAR_TABLE_WIDTH
    inv_inertia_local = (tl.load(row), tl.load(row + 1), tl.load(row + 2))
    wheel_connection = ()
    for i in tl.static_range(4):
        wheel_connection = wheel_connection + (
            (tl.load(row + 3 + 3 * i), tl.load(row + 4 + 3 * i), tl.load(row + 5 + 3 * i)),
        )
    wheel_radius = (tl.load(row + 15), tl.load(row + 16), tl.load(row + 17), tl.load(row + 18))
    rest = (tl.load(row + 19), tl.load(row + 20), tl.load(row + 21), tl.load(row + 22))
    force_scale = (tl.load(row + 23), tl.load(row + 24), tl.load(row + 25), tl.load(row + 26))
    return inv_inertia_local, wheel_connection, wheel_radius, rest, force_scale, tl.load(row + 27)


# --- The rows packed and unpacked on the device, once per step -----------------------------------

FIELD_OF = constexpr(tuple(i for i, width in enumerate(_WIDTHS) for _ in range(width)))
"""Each column of a car row: its field's index in `PACKED`."""
COLUMN_OF = constexpr(tuple(k for width in _WIDTHS for k in range(width)))
"""Each column of a car row: its index within its field."""
WIDTH_OF = constexpr(tuple(width for width in _WIDTHS for _ in range(width)))
"""Each column of a car row: its field's width."""


def int8_view(x: torch.Tensor) -> torch.Tensor:
    """A bool tensor as the kernels read and write it (a view: writes land in the bool tensor)."""
    return x.view(torch.int8) if x.dtype == torch.bool else x


@stage_jit
def car_rows_kernel(
    rows_ptr,
    pos_ptr, rot_mat_ptr, vel_ptr, ang_vel_ptr, is_on_ground_ptr, wheels_with_contact_ptr, has_jumped_ptr,
    has_double_jumped_ptr, has_flipped_ptr, flip_rel_torque_ptr, jump_time_ptr, flip_time_ptr, is_flipping_ptr,
    is_jumping_ptr, air_time_ptr, air_time_since_jump_ptr, boost_ptr, boosting_time_ptr, is_supersonic_ptr,
    supersonic_time_ptr, handbrake_val_ptr, is_auto_flipping_ptr, auto_flip_timer_ptr,
    auto_flip_torque_scale_ptr, has_world_contact_ptr, world_contact_normal_ptr, car_contact_cooldown_timer_ptr,
    is_demoed_ptr, demo_respawn_timer_ptr, last_controls_ptr, is_boosting_ptr, time_since_boosted_ptr,
    velocity_impulse_cache_ptr, engine_force_ptr, brake_ptr, steer_angle_ptr, lat_friction_ptr,
    long_friction_ptr, extra_pushback_ptr, ball_hit_info_is_valid_ptr, ball_hit_info_relative_pos_on_ball_ptr,
    ball_hit_info_ball_pos_ptr, ball_hit_info_extra_hit_vel_ptr,
    n, NUM_CARS: tl.constexpr, UNPACK: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """`pack_cars` on the device, one car per lane: each `PACKED` field's columns read from its own
    contiguous [N * C, width] array (bools as int8 views, `int8_view`), its car row written whole (`store_car_row`); with ``UNPACK``,
    `unpack_cars_`: each row read whole, its columns written to the fields' arrays in their own types.
    (Rows written column by column from the fields, as `torch.cat` does, cost a memory sector per narrow
    column.) Lanes take the rows in their chunked order (`vec.chunked_at`): 32 lanes car slot k of 32
    neighbouring envs, ``chunked_rows(N, C)`` lanes in all; ``n`` = N * C."""
    row = chunked_row(tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), NUM_CARS)
    live = row < n
    fields = (
        pos_ptr, rot_mat_ptr, vel_ptr, ang_vel_ptr, is_on_ground_ptr, wheels_with_contact_ptr,
        has_jumped_ptr, has_double_jumped_ptr, has_flipped_ptr, flip_rel_torque_ptr, jump_time_ptr,
        flip_time_ptr, is_flipping_ptr, is_jumping_ptr, air_time_ptr, air_time_since_jump_ptr, boost_ptr,
        boosting_time_ptr, is_supersonic_ptr, supersonic_time_ptr, handbrake_val_ptr, is_auto_flipping_ptr,
        auto_flip_timer_ptr, auto_flip_torque_scale_ptr, has_world_contact_ptr, world_contact_normal_ptr,
        car_contact_cooldown_timer_ptr, is_demoed_ptr, demo_respawn_timer_ptr, last_controls_ptr,
        is_boosting_ptr, time_since_boosted_ptr, velocity_impulse_cache_ptr, engine_force_ptr, brake_ptr,
        steer_angle_ptr, lat_friction_ptr, long_friction_ptr, extra_pushback_ptr,
        ball_hit_info_is_valid_ptr, ball_hit_info_relative_pos_on_ball_ptr, ball_hit_info_ball_pos_ptr,
        ball_hit_info_extra_hit_vel_ptr,
    )  # fmt: skip
    if UNPACK:
        v = load_car_row(rows_ptr, row, live, NUM_CARS, BLOCK)
        for j in tl.static_range(CAR_WIDTH):
            field = fields[FIELD_OF[j]]
            tl.store(field + row.to(tl.int64) * WIDTH_OF[j] + COLUMN_OF[j], v[j].to(field.dtype.element_ty), mask=live)
    else:
        values = ()
        for j in tl.static_range(CAR_WIDTH):
            at = row.to(tl.int64) * WIDTH_OF[j] + COLUMN_OF[j]
            values = values + (tl.load(fields[FIELD_OF[j]] + at, mask=live, other=0).to(tl.float32),)
        store_car_row(rows_ptr, row, values, live, NUM_CARS, BLOCK)
