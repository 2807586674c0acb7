"""Car mechanics, one function per stage of RocketSim's `Car`, in the order a tick runs them.

Reference: RocketSim (ZealanL/RocketSim, MIT) `src/Sim/Car/Car.cpp`. Per tick (`Arena::Step`):

`pre_tick_update` (Car::_PreTickUpdate), before Bullet's step
    `vehicle.update_vehicle_first` (rays, lagged friction impulses); the on-ground flag (3 or more
    wheels); `update_wheels` (throttle, brake, steer, handbrake, friction, sticky force);
    `update_air_torque` (fewer than 3 wheels: flip torque, air control, air throttle);
    `update_jump`; `update_auto_flip`; `update_double_jump_or_flip`; `update_auto_roll`;
    `vehicle.update_vehicle_second` (suspension and friction impulses); `update_boost`.
`physics_step`: the car's part of Bullet's step (`rigid_body`): gravity, the body's contacts with
    the arena (their solve is `car_world`'s), write-back and integration.
`post_tick_update` (Car::_PostTickUpdate): supersonic, bump cooldown, last controls.
`finish_physics_tick` (Car::_FinishPhysicsTick): the cached bump velocity and the speed clamps.

Every function is pure over [N, C, ...] tensors (C cars per env), with RocketSim's branches as masks.
Impulses change the velocities at once; forces and torques accumulate in `rigid_body.Forces` and act
in Bullet's step. Demolished cars are frozen (RocketSim skips them); their countdown and respawn are
`rules.update_demo`, the bumps and demolitions `car_bump`, the hits on the ball `ball_hit`.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from nitro.core import tree
from nitro.envs.soccar import constants as C
from nitro.envs.soccar import rigid_body as rb
from nitro.envs.soccar import vehicle
from nitro.envs.soccar.arena_mesh import ArenaMesh
from nitro.envs.soccar.car_config import CarParams
from nitro.envs.soccar.contacts import BodySolve
from nitro.envs.soccar.mutators import TickParams
from nitro.envs.soccar.rigid_body import Forces, where3
from nitro.envs.soccar.state import CarState
from nitro.envs.soccar.vec import constant, cross, dot
from nitro.envs.soccar.vehicle import Wheels, piecewise

_f32 = C.f32


@dataclasses.dataclass
class CarControls:
    """One tick's controls of every car [N, C] (RocketSim `CarControls` after ClampFix)."""

    throttle: torch.Tensor
    steer: torch.Tensor
    pitch: torch.Tensor
    yaw: torch.Tensor
    roll: torch.Tensor
    jump: torch.Tensor
    """bool."""
    boost: torch.Tensor
    """bool."""
    handbrake: torch.Tensor
    """bool."""

    @staticmethod
    def from_tensor(controls: torch.Tensor) -> CarControls:
        """From [N, C, 8] floats (throttle, steer, pitch, yaw, roll, jump, boost, handbrake): the analog
        inputs clamped to [-1, 1] as CarControls::ClampFix does, buttons pressed above 0.5."""
        analog = controls[..., :5].clamp(-1.0, 1.0)
        buttons = controls[..., 5:] > 0.5
        return CarControls(*analog.unbind(-1), *buttons.unbind(-1))

    def as_tensor(self) -> torch.Tensor:
        """Back to [N, C, 8] (buttons as 0 / 1): what CarState.last_controls holds."""
        parts = (
            self.throttle,
            self.steer,
            self.pitch,
            self.yaw,
            self.roll,
            self.jump,
            self.boost,
            self.handbrake,
        )
        return torch.stack([p.to(torch.float32) for p in parts], -1)


def _sgn(x: torch.Tensor) -> torch.Tensor:
    """RS_SGN: (x > 0) - (x < 0) as an int."""
    return (x > 0).to(torch.int8) - (x < 0).to(torch.int8)


def _axes(car: CarState):
    """The car's forward, right, up directions (CarState::rotMat's columns) [N, C, 3] each."""
    return car.rot_mat[..., :, 0], car.rot_mat[..., :, 1], car.rot_mat[..., :, 2]


def _mass_inertia_times(inv_inertia: torch.Tensor, rot_mat: torch.Tensor | None = None) -> torch.Tensor:
    """m_invInertiaTensorWorld.inverse() (times the basis when given), as RocketSim scales torques."""
    inertia = rb.mat_inverse(inv_inertia)
    return inertia if rot_mat is None else rb.mat_mul(inertia, rot_mat)


def update_wheels(
    car: CarState,
    controls: CarControls,
    wheels: Wheels,
    forces: Forces,
    config: CarParams,
    num_wheels_in_contact: torch.Tensor,
    forward_speed: torch.Tensor,
    dt: float,
) -> tuple[CarState, Forces]:
    """Car::_UpdateWheels: handbrake value, engine force and brake, steer angle, wheel frictions and
    the sticky force. The engine, brake, steer and friction values act from the next tick on."""
    abs_forward_speed = forward_speed.abs()
    handbrake_val = torch.where(
        controls.handbrake,
        car.handbrake_val + C.POWERSLIDE_RISE_RATE * dt,
        car.handbrake_val - C.POWERSLIDE_FALL_RATE * dt,
    ).clamp(0.0, 1.0)
    real_throttle = torch.where(controls.boost & (car.boost > 0), 1.0, controls.throttle)

    # Throttle and brake.
    drive_speed_scale = piecewise(C.DRIVE_SPEED_TORQUE_FACTOR_CURVE, abs_forward_speed)
    throttling = real_throttle.abs() >= C.THROTTLE_DEADZONE
    opposing = (abs_forward_speed > C.STOPPING_FORWARD_VEL) & (_sgn(real_throttle) != _sgn(forward_speed))
    coast_brake = torch.where(abs_forward_speed < C.STOPPING_FORWARD_VEL, 1.0, C.COASTING_BRAKE_FACTOR)
    real_brake = torch.where(throttling, torch.where(opposing, 1.0, 0.0), coast_brake)
    engine_throttle = torch.where(
        throttling,
        torch.where(opposing & (abs_forward_speed > C.BRAKING_NO_THROTTLE_SPEED_THRESH), 0.0, real_throttle),
        0.0,
    )
    real_brake = torch.where(controls.handbrake, 0.0, real_brake)  # powersliding: input throttle, no brake
    engine_throttle = torch.where(controls.handbrake, real_throttle, engine_throttle)
    drive_speed_scale = torch.where(num_wheels_in_contact < 3, drive_speed_scale / 4, drive_speed_scale)
    engine_force = (engine_throttle * C.THROTTLE_TORQUE_AMOUNT) * drive_speed_scale
    brake = real_brake * C.BRAKE_TORQUE_AMOUNT

    # Steering.
    steer_angle = piecewise(C.STEER_ANGLE_FROM_SPEED_CURVE, abs_forward_speed)
    powerslide = piecewise(C.POWERSLIDE_STEER_ANGLE_FROM_SPEED_CURVE, abs_forward_speed)
    steer_angle = torch.where(
        handbrake_val != 0, steer_angle + (powerslide - steer_angle) * handbrake_val, steer_angle
    )
    steer_angle = steer_angle * controls.steer

    # Friction of the wheels on the ground (kept for wheels in the air).
    lat_dir = wheels.axle
    long_dir = cross(lat_dir, wheels.contact_normal)
    wheel_delta = wheels.hard_point - car.pos[..., None, :]
    cross_vec = cross(car.ang_vel[..., None, :], wheel_delta) + car.vel[..., None, :]
    base_friction = dot(cross_vec, lat_dir).abs()
    slipping = base_friction > 5
    friction_curve_input = torch.where(
        slipping,
        base_friction / torch.where(slipping, dot(cross_vec, long_dir).abs() + base_friction, 1.0),
        0.0,
    )
    lat_friction = piecewise(C.LAT_FRICTION_CURVE, friction_curve_input)
    hb = handbrake_val[..., None]
    lat_friction_hb = lat_friction * (
        (piecewise(C.HANDBRAKE_LAT_FRICTION_FACTOR_CURVE, friction_curve_input) - 1) * hb + 1
    )
    long_friction_hb = (piecewise(C.HANDBRAKE_LONG_FRICTION_FACTOR_CURVE, friction_curve_input) - 1) * hb + 1
    sliding = hb != 0
    lat_friction = torch.where(sliding, lat_friction_hb, lat_friction)
    long_friction = torch.where(sliding, long_friction_hb, torch.ones_like(lat_friction))
    non_sticky = piecewise(C.NON_STICKY_FRICTION_FACTOR_CURVE, wheels.contact_normal[..., 2])
    sticky = (real_throttle != 0)[..., None]
    lat_friction = torch.where(sticky, lat_friction, lat_friction * non_sticky)
    long_friction = torch.where(sticky, long_friction, long_friction * non_sticky)
    ground = wheels.is_in_contact
    car = dataclasses.replace(
        car,
        handbrake_val=handbrake_val,
        engine_force=engine_force,
        brake=brake,
        steer_angle=steer_angle,
        lat_friction=torch.where(ground, lat_friction, car.lat_friction),
        long_friction=torch.where(ground, long_friction, car.long_friction),
    )

    # Sticky force, while any wheel touches the static arena (not a car or the ball); its direction
    # averages every touching wheel's normal.
    upwards_dir = vehicle.get_upwards_dir_from_wheel_contacts(wheels, car.rot_mat[..., :, 2])
    full_stick = (real_throttle != 0) | (abs_forward_speed > C.STOPPING_FORWARD_VEL)
    scale = torch.where(full_stick, 0.5 + (1 - upwards_dir[..., 2].abs()), 0.5)
    sticky_force = ((upwards_dir * scale[..., None]) * C.GRAVITY_Z) * C.CAR_MASS_BT
    force = forces.force + where3(wheels.on_world.any(-1), sticky_force, 0.0)
    return car, dataclasses.replace(forces, force=force)


def update_air_torque(
    car: CarState,
    controls: CarControls,
    forces: Forces,
    inv_inertia: torch.Tensor,
    update_air_control: torch.Tensor,
) -> tuple[CarState, Forces]:
    """Car::_UpdateAirTorque (cars with fewer than 3 wheels touching): the flip's torque (scaled
    down by a flip cancel), air control with its damping when no wheel touches, and air throttle."""
    forward, right, up = _axes(car)
    dir_pitch, dir_yaw, dir_roll = -right, up, -forward
    is_flipping = car.is_flipping & car.has_flipped & (car.flip_time < C.FLIP_TORQUE_TIME)
    rel = car.flip_rel_torque
    has_torque = (rel != 0).any(-1)
    rel_y = rel[..., 1]
    cancel = (rel_y != 0) & (controls.pitch != 0) & (_sgn(rel_y) == _sgn(controls.pitch))
    pitch_scale = torch.where(cancel, 1 - torch.minimum(controls.pitch.abs(), torch.ones_like(rel_y)), 1.0)
    dodge_torque = torch.stack(
        (rel[..., 0] * C.FLIP_TORQUE_X, (rel_y * pitch_scale) * C.FLIP_TORQUE_Y, rel[..., 2] * 0.0), -1
    )
    flip_torque = rb.mat_vec(_mass_inertia_times(inv_inertia, car.rot_mat), dodge_torque)
    torque = forces.torque + where3(is_flipping & has_torque, flip_torque, 0.0)
    do_air_control = ~is_flipping | ~has_torque | cancel
    do_air_control = do_air_control & ~car.is_auto_flipping & update_air_control

    pitch_locked = is_flipping | (
        car.has_flipped & (car.flip_time < _f32(_f32(C.FLIP_TORQUE_TIME) + _f32(C.FLIP_PITCHLOCK_EXTRA_TIME)))
    )
    any_input = (controls.pitch != 0) | (controls.yaw != 0) | (controls.roll != 0)
    pitch_torque_scale = torch.where(any_input & pitch_locked, 0.0, 1.0)
    t_pitch, t_yaw, t_roll = C.CAR_AIR_CONTROL_TORQUE
    control_torque = (
        ((controls.pitch[..., None] * dir_pitch) * pitch_torque_scale[..., None]) * t_pitch
        + (controls.yaw[..., None] * dir_yaw) * t_yaw
    ) + (controls.roll[..., None] * dir_roll) * t_roll
    control_torque = where3(any_input, control_torque, 0.0)
    d_pitch, d_yaw, d_roll = C.CAR_AIR_CONTROL_DAMPING
    ang_vel = car.ang_vel
    damp_pitch = (dot(dir_pitch, ang_vel) * d_pitch) * (1 - (controls.pitch * pitch_torque_scale).abs())
    damp_yaw = (dot(dir_yaw, ang_vel) * d_yaw) * (1 - controls.yaw.abs())
    damp_roll = dot(dir_roll, ang_vel) * d_roll
    damping = (dir_yaw * damp_yaw[..., None] + dir_pitch * damp_pitch[..., None]) + dir_roll * damp_roll[
        ..., None
    ]
    air_torque = rb.mat_vec(_mass_inertia_times(inv_inertia), control_torque - damping) * C.CAR_TORQUE_SCALE
    torque = torque + where3(do_air_control, air_torque, 0.0)

    air_throttle = ((forward * controls.throttle[..., None]) * C.THROTTLE_AIR_ACCEL) * C.CAR_MASS_BT
    force = forces.force + where3(controls.throttle != 0, air_throttle, 0.0)
    return dataclasses.replace(car, is_flipping=is_flipping), Forces(force=force, torque=torque)


def update_jump(
    car: CarState,
    controls: CarControls,
    jump_pressed: torch.Tensor,
    forces: Forces,
    params: TickParams,
) -> tuple[CarState, Forces]:
    """Car::_UpdateJump: the jump's impulse, its hold force (0.62 x before JUMP_MIN_TIME), its timer,
    and the reset of has_jumped on the ground once the jump is at least 0.05 s old."""
    dt, up = params.tick_time, car.rot_mat[..., :, 2]
    grounded = car.is_on_ground & ~car.is_jumping
    keep = car.has_jumped & (car.jump_time < _f32(_f32(C.JUMP_MIN_TIME) + _f32(C.JUMP_RESET_TIME_PAD)))
    reset = grounded & ~keep
    has_jumped = car.has_jumped & ~reset
    jump_time = torch.where(reset, 0.0, car.jump_time)

    continuing = (jump_time < C.JUMP_MIN_TIME) | (controls.jump & (jump_time < C.JUMP_MAX_TIME))
    starting = ~car.is_jumping & car.is_on_ground & jump_pressed
    is_jumping = torch.where(car.is_jumping, continuing, starting)
    jump_time = torch.where(starting, 0.0, jump_time)
    vel = car.vel + where3(starting, up * params.jump_immediate_force, 0.0)

    hold = up * params.jump_accel
    hold = where3(jump_time < C.JUMP_MIN_TIME, hold * C.JUMP_PRE_MIN_ACCEL_SCALE, hold)
    force = forces.force + where3(is_jumping, hold * C.CAR_MASS_BT, 0.0)
    has_jumped = has_jumped | is_jumping
    jump_time = torch.where(is_jumping | has_jumped, jump_time + dt, jump_time)
    car = dataclasses.replace(car, vel=vel, has_jumped=has_jumped, is_jumping=is_jumping, jump_time=jump_time)
    return car, dataclasses.replace(forces, force=force)


def roll_angle(rot_mat: torch.Tensor) -> torch.Tensor:
    """Angle::FromRotMat's roll (btMatrix3x3::getEulerYPR, negated) [N, C]."""
    roll = torch.atan2(rot_mat[..., 2, 1], rot_mat[..., 2, 2])
    pitch = torch.asin(-rot_mat[..., 2, 0])
    singular = pitch.abs() == _f32(math.pi / 2)
    roll = torch.where(singular, torch.where(roll > 0, roll - math.pi, roll + math.pi), roll)
    return -roll


def update_auto_flip(car: CarState, jump_pressed: torch.Tensor, dt: float) -> CarState:
    """Car::_UpdateAutoFlip: jumping while upside down on the arena (body contact with a normal
    pointing up, |roll| > 2.8 rad) pushes the car off and rolls it upright for 0.4 x |roll| / pi s."""
    forward, _, up = _axes(car)
    roll = roll_angle(car.rot_mat)
    starts = (
        jump_pressed
        & car.has_world_contact
        & (car.world_contact_normal[..., 2] > C.CAR_AUTOFLIP_NORMZ_THRESH)
        & (roll.abs() > C.CAR_AUTOFLIP_ROLL_THRESH)
    )
    timer = torch.where(starts, C.CAR_AUTOFLIP_TIME * (roll.abs() / math.pi), car.auto_flip_timer)
    scale = torch.where(starts, torch.where(roll > 0, 1.0, -1.0), car.auto_flip_torque_scale)
    flipping = car.is_auto_flipping | starts
    vel = car.vel + where3(starts, -up * C.CAR_AUTOFLIP_IMPULSE, 0.0)
    done = flipping & (timer <= 0)
    turning = flipping & ~done
    ang_vel = car.ang_vel + where3(turning, ((forward * C.CAR_AUTOFLIP_TORQUE) * scale[..., None]) * dt, 0.0)
    timer = torch.where(done, 0.0, torch.where(turning, timer - dt, timer))
    return dataclasses.replace(
        car,
        vel=vel,
        ang_vel=ang_vel,
        is_auto_flipping=flipping & ~done,
        auto_flip_timer=timer,
        auto_flip_torque_scale=scale,
    )


def update_double_jump_or_flip(
    car: CarState,
    controls: CarControls,
    jump_pressed: torch.Tensor,
    forward_speed: torch.Tensor,
    config: CarParams,
    params: TickParams,
) -> CarState:
    """Car::_UpdateDoubleJumpOrFlip: air timers; a jump pressed within 1.25 s of the jump's end is a
    flip (with stick input past the dodge deadzone: impulse in the yaw-only heading frame and a flip
    torque) or a double jump; the flip's z-velocity damping; the flip timer."""
    dt, (forward, _, up) = params.tick_time, _axes(car)
    ground = car.is_on_ground
    air_time = torch.where(ground, 0.0, car.air_time + dt)
    counting = car.has_jumped & ~car.is_jumping
    air_time_since_jump = torch.where(ground | ~counting, 0.0, car.air_time_since_jump + dt)
    input_magnitude = (controls.yaw.abs() + controls.pitch.abs()) + controls.roll.abs()
    is_flip_input = input_magnitude >= config.dodge_deadzone
    unused = ~car.has_double_jumped & ~car.has_flipped
    can_use = torch.where(
        is_flip_input, unused | params.unlimited_flips, unused | params.unlimited_double_jumps
    )
    acting = (
        ~ground
        & jump_pressed
        & (air_time_since_jump < C.DOUBLEJUMP_MAX_DELAY)
        & can_use
        & ~car.is_auto_flipping
    )
    flipping_now = acting & is_flip_input
    double_jumping = acting & ~is_flip_input

    # The flip: direction, torque, and the initial impulse.
    dodge_x, dodge_y = -controls.pitch, controls.yaw + controls.roll
    stall = ((controls.yaw + controls.roll).abs() < 0.1) & (controls.pitch.abs() < 0.1)
    dodge = rb.safe_normalized(torch.stack((dodge_x, dodge_y, torch.zeros_like(dodge_x)), -1))
    dodge = where3(stall, 0.0, dodge)
    flip_rel_torque = torch.stack((-dodge[..., 1], dodge[..., 0], torch.zeros_like(dodge_x)), -1)
    dodge = torch.where(dodge.abs() < 0.1, 0.0, dodge)
    has_impulse = rb.length2(dodge) >= C.SIMD_EPSILON  # !fuzzyZero()
    forward_speed_ratio = forward_speed.abs() / C.CAR_MAX_SPEED
    backwards = torch.where(
        forward_speed.abs() < 100.0, dodge[..., 0] < 0, (dodge[..., 0] >= 0) != (forward_speed >= 0)
    )
    initial = dodge * C.FLIP_INITIAL_VEL_SCALE
    max_speed_scale_x = torch.where(
        backwards, C.FLIP_BACKWARD_IMPULSE_MAX_SPEED_SCALE, C.FLIP_FORWARD_IMPULSE_MAX_SPEED_SCALE
    )
    initial_x = initial[..., 0] * (((max_speed_scale_x - 1) * forward_speed_ratio) + 1.0)
    side_scale = _f32(_f32(C.FLIP_SIDE_IMPULSE_MAX_SPEED_SCALE) - 1)
    initial_y = initial[..., 1] * ((side_scale * forward_speed_ratio) + 1.0)
    initial_x = torch.where(backwards, initial_x * C.FLIP_BACKWARD_IMPULSE_SCALE_X, initial_x)
    forward_2d = forward * constant((1.0, 1.0, 0.0), forward.device)
    length = torch.sqrt(rb.length2(forward_2d))
    forward_2d = where3(length > C.SIMD_EPSILON * C.SIMD_EPSILON, forward_2d / length[..., None], 0.0)
    right_2d = torch.stack((-forward_2d[..., 1], forward_2d[..., 0], torch.zeros_like(length)), -1)
    delta_vel = initial_x[..., None] * forward_2d + initial_y[..., None] * right_2d
    vel = car.vel + where3(flipping_now & has_impulse, delta_vel, 0.0)
    vel = vel + where3(double_jumping, up * C.JUMP_IMMEDIATE_FORCE, 0.0)

    is_flipping = car.is_flipping | flipping_now
    has_flipped = torch.where(ground, False, car.has_flipped | flipping_now)
    flip_time = torch.where(ground | flipping_now, 0.0, car.flip_time)
    flip_time = torch.where(is_flipping | has_flipped, flip_time + dt, flip_time)
    damp_z = (
        is_flipping
        & (flip_time <= C.FLIP_TORQUE_TIME)
        & (flip_time >= C.FLIP_Z_DAMP_START)
        & ((vel[..., 2] < 0) | (flip_time < C.FLIP_Z_DAMP_END))
    )
    damped_z = torch.where(damp_z, vel[..., 2] * params.flip_z_damp_factor, vel[..., 2])
    vel = torch.cat((vel[..., :2], damped_z[..., None]), -1)
    return dataclasses.replace(
        car,
        vel=vel,
        air_time=air_time,
        air_time_since_jump=air_time_since_jump,
        has_double_jumped=torch.where(ground, False, car.has_double_jumped | double_jumping),
        has_flipped=has_flipped,
        is_flipping=is_flipping,
        flip_time=flip_time,
        flip_rel_torque=where3(flipping_now, flip_rel_torque, car.flip_rel_torque),
    )


def update_auto_roll(
    car: CarState,
    wheels: Wheels,
    forces: Forces,
    inv_inertia: torch.Tensor,
    num_wheels_in_contact: torch.Tensor,
) -> Forces:
    """Car::_UpdateAutoRoll: toward the surface under the wheels (or the body's last contact): a
    force into it and a torque aligning the car's right and forward axes with it."""
    forward, right, up = _axes(car)
    wheel_up = vehicle.get_upwards_dir_from_wheel_contacts(wheels, up)
    ground_up = where3(num_wheels_in_contact > 0, wheel_up, car.world_contact_normal)
    ground_down = -ground_up
    cross_right = cross(ground_up, forward)
    cross_forward = cross(ground_down, cross_right)
    right_factor = 1 - dot(right, cross_right).clamp(0.0, 1.0)
    forward_factor = 1 - dot(forward, cross_forward).clamp(0.0, 1.0)
    torque_dir_right = forward * torch.where(dot(right, ground_up) >= 0, -1.0, 1.0)[..., None]
    torque_dir_forward = right * torch.where(dot(forward, ground_up) >= 0, 1.0, -1.0)[..., None]
    torque = torque_dir_forward * forward_factor[..., None] + torque_dir_right * right_factor[..., None]
    force = (ground_down * C.CAR_AUTOROLL_FORCE) * C.CAR_MASS_BT
    torque = rb.mat_vec(_mass_inertia_times(inv_inertia), torque) * C.CAR_AUTOROLL_TORQUE
    return Forces(force=forces.force + force, torque=forces.torque + torque)


def update_boost(car: CarState, controls: CarControls, forces: Forces, params: TickParams):
    """Car::_UpdateBoost: boosting lasts at least BOOST_MIN_TIME once started and needs boost left;
    it burns boost and pushes forward (harder on the ground). (Recharge is a dropshot mutator.)"""
    dt, has_boost = params.tick_time, car.boost > 0
    is_boosting = has_boost & torch.where(
        car.is_boosting, controls.boost | (car.boosting_time < C.BOOST_MIN_TIME), controls.boost
    )
    boosting_time = torch.where(is_boosting, car.boosting_time + dt, 0.0)
    boost = torch.where(
        is_boosting, (car.boost - params.boost_used_per_second * dt).clamp(min=0.0), car.boost
    )
    accel = torch.where(car.is_on_ground, params.boost_accel_ground, params.boost_accel_air)
    boost_force = (accel[..., None] * car.rot_mat[..., :, 0]) * C.CAR_MASS_BT
    car = dataclasses.replace(
        car,
        is_boosting=is_boosting,
        boosting_time=boosting_time,
        boost=boost.clamp(max=C.BOOST_MAX),
        time_since_boosted=torch.where(is_boosting, 0.0, car.time_since_boosted + dt),
    )
    return car, dataclasses.replace(forces, force=forces.force + where3(is_boosting, boost_force, 0.0))


def pre_tick_update(
    car: CarState,
    controls: CarControls,
    config: CarParams,
    mesh: ArenaMesh,
    bodies: vehicle.Bodies | None,
    tick_count: torch.Tensor,
    params: TickParams,
) -> tuple[CarState, Forces]:
    """Car::_PreTickUpdate of every car: the car's stages in RocketSim's order. Returns the cars
    (impulses already in their velocities) and the forces and torques for Bullet's step.

    ``bodies``: the cars and the ball as the wheels' rays and friction see them (`vehicle.Bodies`,
    the state when the cars' pre-ticks start; None: the arena alone).

    ``tick_count`` [N]: the arena's ticks so far; Bullet's solver time step, which the wheels' extra
    pushback reads, is its default 1/60 s before an arena's first step.
    """
    dt = params.tick_time
    solver_dt = torch.where(tick_count == 0, C.SOLVER_DEFAULT_TIME_STEP, dt)
    inv_inertia = rb.inv_inertia_world(car.rot_mat, config.inv_inertia_local)
    before = car
    wheels, car = vehicle.update_vehicle_first(car, config, mesh, bodies, params, inv_inertia, solver_dt)
    jump_pressed = controls.jump & ~(car.last_controls[..., 5] > 0.5)
    num_wheels_in_contact = wheels.is_in_contact.sum(-1)
    car = dataclasses.replace(
        car, wheels_with_contact=wheels.is_in_contact, is_on_ground=num_wheels_in_contact >= 3
    )
    forward_speed = vehicle.get_forward_speed(car)
    forces = Forces.zeros_like(car.vel)
    car, forces = update_wheels(
        car, controls, wheels, forces, config, num_wheels_in_contact, forward_speed, dt
    )

    in_air = num_wheels_in_contact < 3
    air_car, air_forces = update_air_torque(car, controls, forces, inv_inertia, num_wheels_in_contact == 0)
    car = tree.where(in_air, air_car, dataclasses.replace(car, is_flipping=torch.zeros_like(car.is_flipping)))
    forces = tree.where(in_air, air_forces, forces)

    car, forces = update_jump(car, controls, jump_pressed, forces, params)
    car = update_auto_flip(car, jump_pressed, dt)
    car = update_double_jump_or_flip(car, controls, jump_pressed, forward_speed, config, params)
    rolls = (controls.throttle != 0) & (
        ((num_wheels_in_contact > 0) & (num_wheels_in_contact < 4)) | car.has_world_contact
    )
    forces = tree.where(
        rolls, update_auto_roll(car, wheels, forces, inv_inertia, num_wheels_in_contact), forces
    )
    car = dataclasses.replace(car, has_world_contact=torch.zeros_like(car.has_world_contact))
    car = vehicle.update_vehicle_second(car, config, wheels, inv_inertia, dt)
    car, forces = update_boost(car, controls, forces, params)

    # Demolished cars do nothing here (their countdown and respawn come first: `rules.update_demo`).
    demoed = before.is_demoed
    return tree.where(demoed, before, car), tree.where(demoed, Forces.zeros_like(car.vel), forces)


def external_impulses(car: CarState, forces: Forces, config: CarParams, params: TickParams):
    """The cars' forces and torques as the solver's external impulses (btSolverBody's
    m_externalForceImpulse / m_externalTorqueImpulse): gravity joins the pre-tick's forces
    (applyGravity). Returns (ext_v UU/s, ext_w rad/s) [N, C, 3]."""
    forces = rb.apply_gravity(forces, params.gravity_z)
    inv_inertia = rb.inv_inertia_world(car.rot_mat, config.inv_inertia_local)
    return rb.external_impulses(forces, inv_inertia, params.tick_time)


def physics_step(
    car: CarState, ext_v: torch.Tensor, ext_w: torch.Tensor, solved: BodySolve, params: TickParams
) -> CarState:
    """The cars' part of btDiscreteDynamicsWorld::stepSimulation after the contact solve
    (`dynamics_world`): the solver's write-back (velocity deltas, split-impulse push) and the
    integration, and the world contact RocketSim's callback records for the next tick's auto-flip and
    auto-roll. Demolished cars are not simulated."""
    pos, rot_mat, vel, ang_vel = rb.integrate(
        car.pos, car.rot_mat, car.vel, car.ang_vel, ext_v, ext_w, solved.dv, solved.dw, solved.push_v,
        solved.push_w, params.tick_time,
    )
    moved = dataclasses.replace(
        car,
        pos=pos,
        rot_mat=rot_mat,
        vel=vel,
        ang_vel=ang_vel,
        has_world_contact=car.has_world_contact | solved.has_world_contact,
        world_contact_normal=where3(solved.has_world_contact, solved.world_contact_normal, car.world_contact_normal),
    )
    return tree.where(car.is_demoed, car, moved)


def post_tick_update(car: CarState, controls: CarControls, params: TickParams) -> CarState:
    """Car::_PostTickUpdate: supersonic (from 2200 UU/s, kept above 2100 for up to 1 s), the bump
    cooldown timer, and the controls remembered for the next tick's jump edge."""
    dt, speed2 = params.tick_time, rb.length2(car.vel)
    maintaining = car.is_supersonic & (car.supersonic_time < C.SUPERSONIC_MAINTAIN_MAX_TIME)
    threshold = torch.where(maintaining, C.SUPERSONIC_MAINTAIN_MIN_SPEED**2, C.SUPERSONIC_START_SPEED**2)
    is_supersonic = speed2 >= threshold
    cooldown = car.car_contact_cooldown_timer
    updated = dataclasses.replace(
        car,
        is_supersonic=is_supersonic,
        supersonic_time=torch.where(is_supersonic, car.supersonic_time + dt, 0.0),
        car_contact_cooldown_timer=torch.where(cooldown > 0, (cooldown - dt).clamp(min=0.0), cooldown),
        last_controls=controls.as_tensor(),
    )
    return tree.where(car.is_demoed, car, updated)


def finish_physics_tick(car: CarState) -> CarState:
    """Car::_FinishPhysicsTick: the cached bump velocity, the speed clamps, the tick counter."""
    vel, ang_vel = rb.clamp_speeds(car.vel + car.velocity_impulse_cache, car.ang_vel)
    updated = dataclasses.replace(
        car,
        vel=vel,
        ang_vel=ang_vel,
        velocity_impulse_cache=torch.zeros_like(car.velocity_impulse_cache),
        tick_count_since_update=car.tick_count_since_update + 1,
    )
    return tree.where(car.is_demoed, car, updated)
