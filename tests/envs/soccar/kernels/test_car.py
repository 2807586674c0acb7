"""`kernels/car.py` against `car.py`, stage by stage: the same cars into both, the outputs compared.

The cars are `car_states.sample_cars`: every scenario family of the parity harness stepped through
the reference and kept at several ticks, with controls drawn for the next tick. Each Car::_Update*
stage runs on the same inputs in both (the wheels from the reference's `update_vehicle_first`), and
so does each stage of the tick: `pre_tick_update`, `physics_step`, `post_tick_update`,
`finish_physics_tick`.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from nitro.envs.soccar import car as reference
from nitro.envs.soccar import constants as C
from nitro.envs.soccar import vehicle
from nitro.envs.soccar.car_world import world_contacts
from nitro.envs.soccar.contacts import BodySolve
from nitro.envs.soccar.kernels import car as twin
from nitro.envs.soccar.kernels.arena_mesh import grid as arena_grid
from nitro.envs.soccar.kernels.car import (
    CAR_WIDTH,
    car_table,
    load_car,
    load_car_params,
    load_controls,
    store_car,
)
from nitro.envs.soccar.kernels.vehicle import bodies_of, get_forward_speed
from nitro.envs.soccar.rigid_body import Forces
from tests.envs.soccar.kernels.car_states import (
    ATOL,
    CAR_BLOCK,
    WHEEL_BUFFERS,
    arena_args,
    assert_cars_close,
    bodies_args,
    car_memory,
    cars_from_memory,
    columns,
    controls_of,
    field_ptrs,
    inv_inertia,
    load_wheels,
    pack_wheels,
    random_forces,
    rows_of,
    sample_bodies,
    sample_cars,
    split,
    store_outputs,
)
from tests.envs.soccar.kernels.twins import DEVICE, REL_TOL, assert_close, assert_same, runnable

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable
# --- the Car::_Update* stages --------------------------------------------------------------------


@triton.jit
def update_stages_kernel(
    car_rows_ptr,
    car_contact_id_ptr,
    car_ticks_ptr,
    wheels_ptr,
    wheels_offsets_ptr,
    controls_ptr,
    force_ptr,
    torque_ptr,
    car_table_ptr,
    out_ptr,
    n,
    tick_time,
    jump_immediate_force,
    jump_accel,
    boost_accel_ground,
    boost_accel_air,
    boost_used_per_second,
    unlimited_flips,
    unlimited_double_jumps,
    flip_z_damp_factor,
    WIDTH: tl.constexpr,
    BLOCK: tl.constexpr,
):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    car = load_car(car_rows_ptr, car_contact_id_ptr, car_ticks_ptr, lane, live, 1, BLOCK)
    wheels = load_wheels(field_ptrs(wheels_ptr, wheels_offsets_ptr, n, WHEEL_BUFFERS), lane, live)
    throttle, steer, pitch, yaw, roll, jump, boost_pressed, handbrake = load_controls(controls_ptr, lane, live, BLOCK)
    inv_inertia_local, _, _, _, _, dodge_deadzone = load_car_params(car_table_ptr, 0)
    force = (tl.load(force_ptr + lane * 3, mask=live), tl.load(force_ptr + lane * 3 + 1, mask=live))
    force = force + (tl.load(force_ptr + lane * 3 + 2, mask=live),)
    torque = (tl.load(torque_ptr + lane * 3, mask=live), tl.load(torque_ptr + lane * 3 + 1, mask=live))
    torque = torque + (tl.load(torque_ptr + lane * 3 + 2, mask=live),)
    pos, rot_mat, vel, ang_vel, is_on_ground = car[0], car[1], car[2], car[3], car[4]
    inv_inertia = twin.inv_inertia_world(rot_mat, inv_inertia_local)
    is_in_contact = wheels[2]
    num_wheels_in_contact = (
        (is_in_contact[0].to(tl.int32) + is_in_contact[1].to(tl.int32)) + is_in_contact[2].to(tl.int32)
    ) + is_in_contact[3].to(tl.int32)
    forward_speed = get_forward_speed(vel, rot_mat)
    jump_pressed = jump & (car[30][5] <= 0.5)

    handbrake_val, engine_force, brake, steer_angle, lat_friction, long_friction, wheels_force = twin.update_wheels(
        pos, rot_mat, vel, ang_vel, car[16], car[20], car[38], car[39], throttle, steer, boost_pressed,
        handbrake, wheels, force, num_wheels_in_contact, forward_speed, tick_time,
    )  # fmt: skip
    out = (handbrake_val, engine_force, brake, steer_angle) + lat_friction + long_friction + wheels_force
    air_flipping, air_force, air_torque = twin.update_air_torque(
        rot_mat, ang_vel, car[12], car[8], car[11], car[9], car[21], throttle, pitch, yaw, roll, force,
        torque, inv_inertia, num_wheels_in_contact == 0,
    )  # fmt: skip
    out = out + (air_flipping,) + air_force + air_torque
    jump_vel, has_jumped, is_jumping, jump_time, jump_force = twin.update_jump(
        rot_mat, vel, is_on_ground, car[6], car[13], car[10], jump, jump_pressed, force, tick_time,
        jump_immediate_force, jump_accel,
    )  # fmt: skip
    out = out + jump_vel + (has_jumped, is_jumping, jump_time) + jump_force
    flip_vel, flip_ang_vel, is_auto_flipping, auto_flip_timer, auto_flip_torque_scale = twin.update_auto_flip(
        rot_mat, vel, ang_vel, car[24], car[25], car[21], car[22], car[23], jump_pressed, tick_time
    )
    out = out + flip_vel + flip_ang_vel + (is_auto_flipping, auto_flip_timer, auto_flip_torque_scale)
    dodge = twin.update_double_jump_or_flip(
        rot_mat, vel, is_on_ground, car[6], car[13], car[7], car[8], car[12], car[11], car[9], car[14],
        car[15], car[21], pitch, yaw, roll, jump_pressed, forward_speed, dodge_deadzone, tick_time,
        unlimited_flips, unlimited_double_jumps, flip_z_damp_factor,
    )  # fmt: skip
    out = out + dodge[0] + dodge[1:7] + dodge[7]
    roll_force, roll_torque = twin.update_auto_roll(
        rot_mat, car[25], is_in_contact, wheels[4], force, torque, inv_inertia, num_wheels_in_contact
    )
    out = out + roll_force + roll_torque
    boost, is_boosting, boosting_time, time_since_boosted, boost_force = twin.update_boost(
        rot_mat, is_on_ground, car[16], car[32], car[17], car[33], boost_pressed, force, tick_time,
        boost_used_per_second, boost_accel_ground, boost_accel_air,
    )  # fmt: skip
    out = out + (boost, is_boosting, boosting_time, time_since_boosted) + boost_force
    out = out + (twin.roll_angle(rot_mat),)
    store_outputs(out_ptr, lane, out, WIDTH, live)


def _reference_update_stages(sample, wheels, forces):
    """The reference stages on the same inputs, each output [n, width] in the kernel's order."""
    cars, controls, config, params = sample.cars, controls_of(sample), sample.arena.world.cars, sample.arena.world.params
    n, dt = len(cars.pos), params.tick_time
    ii = inv_inertia(sample)
    num_wheels = wheels.is_in_contact.sum(-1)
    forward_speed = vehicle.get_forward_speed(cars)
    jump_pressed = controls.jump & ~(cars.last_controls[..., 5] > 0.5)
    out = {}
    car, f = reference.update_wheels(cars, controls, wheels, forces, config, num_wheels, forward_speed, dt)
    for name in ("handbrake_val", "engine_force", "brake", "steer_angle", "lat_friction", "long_friction"):
        out[f"update_wheels.{name}"] = getattr(car, name)
    out["update_wheels.force"] = f.force
    car, f = reference.update_air_torque(cars, controls, forces, ii, num_wheels == 0)
    out |= {"update_air_torque.is_flipping": car.is_flipping, "update_air_torque.force": f.force}
    out["update_air_torque.torque"] = f.torque
    car, f = reference.update_jump(cars, controls, jump_pressed, forces, params)
    for name in ("vel", "has_jumped", "is_jumping", "jump_time"):
        out[f"update_jump.{name}"] = getattr(car, name)
    out["update_jump.force"] = f.force
    car = reference.update_auto_flip(cars, jump_pressed, dt)
    for name in ("vel", "ang_vel", "is_auto_flipping", "auto_flip_timer", "auto_flip_torque_scale"):
        out[f"update_auto_flip.{name}"] = getattr(car, name)
    car = reference.update_double_jump_or_flip(cars, controls, jump_pressed, forward_speed, config, params)
    for name in ("vel", "air_time", "air_time_since_jump", "has_double_jumped", "has_flipped", "is_flipping"):
        out[f"update_double_jump_or_flip.{name}"] = getattr(car, name)
    for name in ("flip_time", "flip_rel_torque"):
        out[f"update_double_jump_or_flip.{name}"] = getattr(car, name)
    f = reference.update_auto_roll(cars, wheels, forces, ii, num_wheels)
    out |= {"update_auto_roll.force": f.force, "update_auto_roll.torque": f.torque}
    car, f = reference.update_boost(cars, controls, forces, params)
    for name in ("boost", "is_boosting", "boosting_time", "time_since_boosted"):
        out[f"update_boost.{name}"] = getattr(car, name)
    out["update_boost.force"] = f.force
    out["roll_angle"] = reference.roll_angle(cars.rot_mat)
    return {name: columns(value, n) for name, value in out.items()}


FLAGS = {"is_flipping", "has_jumped", "is_jumping", "is_auto_flipping", "has_double_jumped", "has_flipped"}
FORCE_TOL = 0.05
"""Mass x UU/s^2: forces of up to ~2e5 (sticky force, boost: 180 x 991.7) from products of unit
vectors, an ulp of 2e5 is 0.016; `REL_TOL` covers the rest."""


@pytest.mark.parametrize("preset", ["octane", "plank"])
def test_update_stages(mesh, preset):
    """Car::_UpdateWheels, _UpdateAirTorque, _UpdateJump, _UpdateAutoFlip, _UpdateDoubleJumpOrFlip,
    _UpdateAutoRoll, _UpdateBoost and Angle::FromRotMat's roll, each from the same state."""
    sample = sample_cars(preset)
    cars, world = sample.cars, sample.arena.world
    n = len(cars.pos)
    solver_dt = torch.full((n,), world.params.tick_time)
    wheels, _ = vehicle.update_vehicle_first(
        cars, world.cars, world.mesh, sample_bodies(sample)[1], world.params, inv_inertia(sample), solver_dt
    )
    force, torque = random_forces(n, 3)
    expected = _reference_update_stages(sample, wheels, Forces(force=force, torque=torque))
    widths = {name: value.shape[1] for name, value in expected.items()}
    out = torch.empty(n, sum(widths.values()), device=DEVICE)
    memory = car_memory(cars)
    wheels_flat, wheels_offsets = pack_wheels(wheels, n)
    params = world.params
    update_stages_kernel[(triton.cdiv(n, CAR_BLOCK),)](
        *memory, wheels_flat, wheels_offsets, sample.controls.reshape(n, 8).to(DEVICE),
        force.reshape(n, 3).to(DEVICE), torque.reshape(n, 3).to(DEVICE), car_table(world.cars).to(DEVICE),
        out, n,
        **{name: float(getattr(params, name)) for name in (
            "tick_time", "jump_immediate_force", "jump_accel", "boost_accel_ground", "boost_accel_air",
            "boost_used_per_second", "unlimited_flips", "unlimited_double_jumps", "flip_z_damp_factor",
        )},
        WIDTH=out.shape[1], BLOCK=CAR_BLOCK, num_warps=CAR_BLOCK // 32,
    )  # fmt: skip
    got = split(out, widths)
    # the sample reaches the branches: wheels on and off the ground, jumps and flips starting
    assert 0.2 * n < int(wheels.is_in_contact.all(-1).sum()) < 0.8 * n
    assert int(expected["update_double_jump_or_flip.has_flipped"].sum()) > int(cars.has_flipped.sum())
    assert int(expected["update_jump.is_jumping"].sum()) > int(cars.is_jumping.sum())
    for name, value in expected.items():
        stage_output = name.split(".")[-1]
        try:
            if stage_output in FLAGS:
                assert_same(got[name], value)
            elif stage_output in ("force", "torque"):
                assert_close(got[name], value, atol=FORCE_TOL, rtol=REL_TOL)
            else:
                assert_close(got[name], value, atol=ATOL.get(stage_output, 1e-5), rtol=REL_TOL)
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from None


# --- the tick's car stages -----------------------------------------------------------------------


@triton.jit
def tick_stages_kernel(
    car_rows_ptr,
    car_contact_id_ptr,
    car_ticks_ptr,
    controls_ptr,
    force_ptr,
    torque_ptr,
    tick_count_ptr,
    car_table_ptr,
    bodies_rows_ptr,
    ball_pos_ptr,
    ball_vel_ptr,
    ball_ang_vel_ptr,
    hitbox_table_ptr,
    ball_radius,
    ball_inv_mass,
    ball_inv_inertia,
    out_rows_ptr,
    out_contact_id_ptr,
    out_ticks_ptr,
    force_out_ptr,
    n,
    rows_apart,
    tick_time,
    gravity_z,
    jump_immediate_force,
    jump_accel,
    boost_accel_ground,
    boost_accel_air,
    boost_used_per_second,
    unlimited_flips,
    unlimited_double_jumps,
    flip_z_damp_factor,
    tri_ptr,
    tri_bounds_ptr,
    tri_mesh_ptr,
    edge_angle_ptr,
    edge_flags_ptr,
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
    NUM_PLANES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    car = load_car(car_rows_ptr, car_contact_id_ptr, car_ticks_ptr, lane, live, 1, BLOCK)
    controls = load_controls(controls_ptr, lane, live, BLOCK)
    car_params = load_car_params(car_table_ptr, 0)
    arena = (tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr)
    arena = arena + (plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr)
    grid = arena_grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
    tick_count = tl.load(tick_count_ptr + lane, mask=live, other=1)
    solver_dt = tl.where(tick_count == 0, twin.SOLVER_DEFAULT_TIME_STEP, tick_time)
    bodies = bodies_of(  # one car per env: the ball alone
        bodies_rows_ptr, ball_pos_ptr, ball_vel_ptr, ball_ang_vel_ptr, lane, 0, live, hitbox_table_ptr, car_table_ptr,
        ball_radius, ball_inv_mass, ball_inv_inertia, 1, BLOCK,
    )  # fmt: skip
    pre, force, torque = twin.pre_tick_update(
        car, controls, car_params, tick_time, solver_dt, jump_immediate_force, jump_accel,
        boost_used_per_second, boost_accel_ground, boost_accel_air, unlimited_flips,
        unlimited_double_jumps, flip_z_damp_factor, live, arena, grid, bodies, 1, NUM_PLANES, BLOCK,
    )  # fmt: skip
    store_car(out_rows_ptr, out_contact_id_ptr, out_ticks_ptr, lane, live, pre, 1, BLOCK)  # output 0
    store_outputs(force_out_ptr, lane, force + torque, 6, live)
    force = (tl.load(force_ptr + lane * 3, mask=live), tl.load(force_ptr + lane * 3 + 1, mask=live))
    force = force + (tl.load(force_ptr + lane * 3 + 2, mask=live),)
    torque = (tl.load(torque_ptr + lane * 3, mask=live), tl.load(torque_ptr + lane * 3 + 1, mask=live))
    torque = torque + (tl.load(torque_ptr + lane * 3 + 2, mask=live),)
    ext_v, ext_w = twin.external_impulses(car, force, torque, car_params[0], tick_time, gravity_z)
    zero = (force[0] * 0.0, force[0] * 0.0, force[0] * 0.0)
    stepped = twin.physics_step(car, ext_v, ext_w, (zero, zero, zero, zero, live & False, zero), tick_time)
    store_car(out_rows_ptr + rows_apart, out_contact_id_ptr + n, out_ticks_ptr + n, lane, live, stepped, 1, BLOCK)
    posted = twin.post_tick_update(car, controls, tick_time)
    store_car(out_rows_ptr + 2 * rows_apart, out_contact_id_ptr + 2 * n, out_ticks_ptr + 2 * n, lane, live, posted, 1, BLOCK)
    finished = twin.finish_physics_tick(car)
    store_car(out_rows_ptr + 3 * rows_apart, out_contact_id_ptr + 3 * n, out_ticks_ptr + 3 * n, lane, live, finished, 1, BLOCK)


def test_tick_stages(mesh):
    """pre_tick_update (the wheels' rays against the arena and the ball, and every _Update* stage in order),
    external_impulses and physics_step (without contacts: the body's are `test_car_world`'s), post_tick_update
    and finish_physics_tick, each
    from the same cars."""
    sample = sample_cars()
    cars, world = sample.cars, sample.arena.world
    params, n = world.params, len(cars.pos)
    # some cars fast enough for the speed clamps, bump velocities to add
    g = torch.Generator().manual_seed(5)
    fast = torch.rand(n, 1, generator=g) < 0.1
    cars = dataclasses.replace(
        cars,
        vel=torch.where(fast[..., None], cars.vel * 3 + 500, cars.vel),
        ang_vel=torch.where(fast[..., None], cars.ang_vel * 4 + 3, cars.ang_vel),
        velocity_impulse_cache=torch.randn(n, 1, 3, generator=g) * 100 * fast[..., None],
        car_contact_cooldown_timer=torch.rand(n, 1, generator=g) * 0.2 * fast,
    )
    force, torque = random_forces(n, 4)
    memory = car_memory(cars)
    outs = [torch.empty((4, *x.shape), dtype=x.dtype, device=DEVICE) for x in memory]  # 4 stages' cars
    forces_out = torch.empty(n, 6, device=DEVICE)
    ball, bodies = sample_bodies(sample, cars)
    tick_stages_kernel[(triton.cdiv(n, CAR_BLOCK),)](
        *memory, sample.controls.reshape(n, 8).to(DEVICE), force.reshape(n, 3).to(DEVICE),
        torque.reshape(n, 3).to(DEVICE), sample.tick_count.to(DEVICE), car_table(world.cars).to(DEVICE),
        **bodies_args(cars, ball, sample.arena.world), out_rows_ptr=outs[0], out_contact_id_ptr=outs[1],
        out_ticks_ptr=outs[2], force_out_ptr=forces_out, n=n, rows_apart=memory[0].numel(),
        **{name: float(getattr(params, name)) for name in (
            "tick_time", "gravity_z", "jump_immediate_force", "jump_accel", "boost_accel_ground",
            "boost_accel_air", "boost_used_per_second", "unlimited_flips", "unlimited_double_jumps",
            "flip_z_damp_factor",
        )},
        **arena_args(sample), NUM_PLANES=4, BLOCK=CAR_BLOCK, num_warps=CAR_BLOCK // 32,
    )  # fmt: skip
    pre, stepped, posted, finished = (cars_from_memory(*(out[k] for out in outs)) for k in range(4))
    controls = controls_of(sample)
    expected_pre, expected_forces = reference.pre_tick_update(
        cars, controls, world.cars, world.mesh, bodies, sample.tick_count, params
    )
    assert_cars_close(pre, expected_pre)
    assert_close(forces_out[:, :3], expected_forces.force.reshape(n, 3), atol=FORCE_TOL, rtol=REL_TOL)
    assert_close(forces_out[:, 3:], expected_forces.torque.reshape(n, 3), atol=FORCE_TOL * 100, rtol=REL_TOL)
    # physics_step without contacts (their solve is `test_car_world`'s): the reference's step with no
    # contact, on the cars whose box touches no arena object this tick (most of the sample).
    ext_v, ext_w = reference.external_impulses(cars, Forces(force, torque), world.cars, params)
    zero = torch.zeros_like(cars.vel)
    no_contact = BodySolve(zero, zero, zero, zero, torch.zeros_like(cars.is_demoed), zero)
    expected_step = reference.physics_step(cars, ext_v, ext_w, no_contact, params)
    flat = lambda x: x.reshape(n, *x.shape[2:])
    bt = C.UU_TO_BT_F32
    free = ~world_contacts(
        world.mesh, world.bullet, flat(cars.pos) * bt, flat(cars.rot_mat), flat(cars.vel) * bt, flat(cars.ang_vel),
        world.cars.hitbox.flat(cars.pos.shape[:2]), params.tick_time,
    ).has_contact
    assert float(free.float().mean()) > 0.6
    assert_cars_close(rows_of(stepped, free), rows_of(expected_step, free))
    assert_cars_close(posted, reference.post_tick_update(cars, controls, params))
    assert_cars_close(finished, reference.finish_physics_tick(cars))


def test_pack_and_unpack_kernels_twin_pack_cars():
    """`car_rows_kernel` writes `pack_cars`' rows and, unpacking, does `unpack_cars_`, to the
    bit, on cars whose every packed field holds its own random values (the kernels' field order is
    `PACKED`'s: a field out of place lands in another's columns); the integer fields stay as they were."""
    from nitro.envs.soccar.kernels.car import PACKED, car_rows_kernel, int8_view, pack_cars, unpack_cars_
    from nitro.envs.soccar.kernels.vec import chunked_rows, unchunk_rows
    from nitro.envs.soccar.state import CarState
    from tests.envs.soccar.kernels.game_states import random_game
    from tests.envs.soccar.kernels.twins import programs

    n, num_cars = 70, 3  # 210 rows: a partial last program
    g = torch.Generator().manual_seed(4)

    def scrambled(cars):
        for name in PACKED:
            x = getattr(cars, name)
            value = torch.rand(x.shape, generator=g) < 0.5 if x.dtype == torch.bool else torch.randn(x.shape, generator=g) * 1e3
            setattr(cars, name, value.to(DEVICE))
        for name in ("car_contact_id", "tick_count_since_update"):
            setattr(cars, name, getattr(cars, name).to(DEVICE))
        return cars

    cars = scrambled(random_game(n, num_cars, seed=2)[1])
    rows_n = n * num_cars
    rows = torch.full((chunked_rows(n, num_cars), CAR_WIDTH.value), float("nan"), device=DEVICE)
    names = {f"{name}_ptr": x for name, x in zip(PACKED, (int8_view(getattr(cars, name)) for name in PACKED))}
    lanes = programs(chunked_rows(n, num_cars))  # (in the rows' chunked order)
    car_rows_kernel[lanes](rows, **names, n=rows_n, NUM_CARS=num_cars, UNPACK=False, BLOCK=32)
    assert torch.equal(unchunk_rows(rows, n, num_cars), unchunk_rows(pack_cars(cars), n, num_cars))

    other = scrambled(random_game(n, num_cars, seed=3)[1])
    expected = dataclasses.replace(other, **{name: getattr(other, name).clone() for name in CarState.FIELDS})
    unpack_cars_(rows, expected)
    names = {f"{name}_ptr": x for name, x in zip(PACKED, (int8_view(getattr(other, name)) for name in PACKED))}
    car_rows_kernel[lanes](rows, **names, n=rows_n, NUM_CARS=num_cars, UNPACK=True, BLOCK=32)
    for name in CarState.FIELDS:
        assert torch.equal(getattr(other, name), getattr(expected, name)), name
