"""`kernels/vehicle.py` against `vehicle.py`, stage by stage, on the cars of `car_states.sample_cars`
(wheels on the floor, walls, curves and ceiling, in the air, landing). Each stage gets the
reference's own inputs (the wheels it computed), so a difference is the stage's own."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar import rigid_body
from nitro.envs.soccar import vehicle as reference
from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.kernels import vehicle as twin
from nitro.envs.soccar.kernels import arena as arena_kernels
from nitro.envs.soccar.kernels.arena import arena_of, ray_grid, wheel_hits_of
from nitro.envs.soccar.kernels.arena_mesh import grid as arena_grid
from nitro.envs.soccar.kernels.car import (
    SOLVER_DEFAULT_TIME_STEP,
    car_table,
    load_car,
    load_car_params,
)
from nitro.envs.soccar.kernels.rigid_body import column, inv_inertia_world
from nitro.envs.soccar.kernels.vec import load_chunked
from nitro.envs.soccar.rigid_body import angle_to_rot_mat
from nitro.envs.soccar.state import CarState
from tests.envs.soccar.kernels.car_states import (
    ATOL,
    CAR_BLOCK,
    GROUND_FIELDS,
    WHEEL_BUFFERS,
    WHEEL_FIELDS,
    arena_args,
    arena_args_of,
    bodies_args,
    car_memory,
    columns,
    field_ptrs,
    inv_inertia,
    load_wheels,
    pack_wheels,
    sample_bodies,
    sample_cars,
    split,
    store_outputs,
    wheels_on_bodies,
)
from tests.envs.soccar.kernels.twins import DEVICE, REL_TOL, assert_close, assert_same, exact_sqrt, runnable

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable


@triton.jit
def flat4(v):
    """A per-wheel 4-tuple of vectors as 12 values."""
    return v[0] + v[1] + v[2] + v[3]


@triton.jit
def flat_ground(ground):
    """A per-wheel 4-tuple of `GroundBody` tuples as `GroundBody`'s fields, each over the wheels
    (`columns` of the reference's [n, 1, 4, ...] fields)."""
    out = flat4((ground[0][0], ground[1][0], ground[2][0], ground[3][0]))
    for i in tl.static_range(4):
        out = out + ground[i][1][0] + ground[i][1][1] + ground[i][1][2]
    out = out + flat4((ground[0][2], ground[1][2], ground[2][2], ground[3][2]))
    out = out + flat4((ground[0][3], ground[1][3], ground[2][3], ground[3][3]))
    out = out + (ground[0][4], ground[1][4], ground[2][4], ground[3][4])
    return out + flat4((ground[0][5], ground[1][5], ground[2][5], ground[3][5]))


@triton.jit
def vehicle_stages_kernel(
    car_rows_ptr,
    car_contact_id_ptr,
    car_ticks_ptr,
    wheels_ptr,
    wheels_offsets_ptr,
    extra_pushback_ptr,
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
    out_ptr,
    n,
    tick_time,
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
    WIDTH: tl.constexpr,
    NUM_PLANES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    car = load_car(car_rows_ptr, car_contact_id_ptr, car_ticks_ptr, lane, live, 1, BLOCK)
    wheels = load_wheels(field_ptrs(wheels_ptr, wheels_offsets_ptr, n, WHEEL_BUFFERS), lane, live)
    bodies = twin.bodies_of(  # one car per env: the ball alone
        bodies_rows_ptr, ball_pos_ptr, ball_vel_ptr, ball_ang_vel_ptr, lane, 0, live, hitbox_table_ptr, car_table_ptr,
        ball_radius, ball_inv_mass, ball_inv_inertia, 1, BLOCK,
    )  # fmt: skip
    inv_inertia_local, wheel_connection, wheel_radius, rest, force_scale, _ = load_car_params(car_table_ptr, 0)
    pos, rot_mat, vel, ang_vel = car[0], car[1], car[2], car[3]
    engine_force, brake, steer_angle = car[35], car[36], car[37]
    lat_friction, long_friction, extra_pushback = car[38], car[39], car[40]
    inv_inertia = inv_inertia_world(rot_mat, inv_inertia_local)
    arena = (tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr)
    arena = arena + (plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr)
    grid = arena_grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
    tick_count = tl.load(tick_count_ptr + lane, mask=live, other=1)
    solver_dt = tl.where(tick_count == 0, SOLVER_DEFAULT_TIME_STEP, tick_time)
    hard_point, axle, is_in_contact, contact_point, contact_normal, _, _, _, _, _, ground = wheels

    transforms = twin.update_wheel_transforms(pos, rot_mat, steer_angle, wheel_connection)
    out = flat4(transforms[0]) + flat4(transforms[1])
    cast = twin.ray_cast(
        pos, rot_mat, vel, ang_vel, extra_pushback, hard_point, wheel_radius, rest, inv_inertia, solver_dt,
        live, arena, grid, bodies, 1, NUM_PLANES, BLOCK,
    )  # fmt: skip
    out = out + cast[0] + cast[1] + flat4(cast[2]) + flat4(cast[3]) + cast[4] + cast[5] + cast[6]
    out = out + flat_ground(cast[7]) + cast[8]
    friction = twin.calc_friction_impulses(
        pos, rot_mat, vel, ang_vel, engine_force, brake, lat_friction, long_friction, inv_inertia_local,
        axle, is_in_contact, contact_point, contact_normal, ground, tick_time,
    )  # fmt: skip
    out = out + flat4(friction)
    pushback = ()
    for i in tl.static_range(4):
        pushback = pushback + (tl.load(extra_pushback_ptr + lane * 4 + i, mask=live, other=0.0),)
    suspended = twin.update_suspension(pos, vel, ang_vel, pushback, rest, force_scale, wheels, inv_inertia, tick_time)
    out = out + suspended[0] + suspended[1]
    rubbed = twin.apply_friction_impulses(pos, rot_mat, vel, ang_vel, wheels, inv_inertia, tick_time)
    out = out + rubbed[0] + rubbed[1]
    out = out + twin.get_upwards_dir_from_wheel_contacts(is_in_contact, contact_normal, column(rot_mat, 2))
    out = out + (twin.get_forward_speed(vel, rot_mat),)
    store_outputs(out_ptr, lane, out, WIDTH, live)


@pytest.mark.parametrize("preset", ["octane", "plank"])
def test_vehicle_stages(mesh, preset):
    """update_wheel_transforms, ray_cast (the four rays against the arena and the ball, suspension, the
    extra pushback), calc_friction_impulses, update_suspension, apply_friction_impulses,
    get_upwards_dir_from_wheel_contacts and get_forward_speed. (Wheels on other cars and on the ball:
    `test_wheels_on_bodies`.)"""
    sample = sample_cars(preset)
    cars, world = sample.cars, sample.arena.world
    n, dt, config = len(cars.pos), world.params.tick_time, world.cars
    ii = inv_inertia(sample)
    ball, bodies = sample_bodies(sample)
    solver_dt = torch.where(sample.tick_count == 0, C.SOLVER_DEFAULT_TIME_STEP, dt)
    wheels, car = reference.update_vehicle_first(cars, config, world.mesh, bodies, world.params, ii, solver_dt)
    hard_point, axle = reference.update_wheel_transforms(cars, config)
    contact, ground, extra_pushback = reference.ray_cast(
        cars, config, wheels.hard_point, world.mesh, bodies, world.params, ii, solver_dt
    )
    expected = {"hard_point": hard_point, "axle": axle} | contact
    expected |= {f"ground.{name}": getattr(ground, name) for name in GROUND_FIELDS}
    expected["extra_pushback"] = extra_pushback
    expected["impulse"] = reference.calc_friction_impulses(cars, config, wheels, dt)
    pushed = dataclasses.replace(cars, extra_pushback=car.extra_pushback)
    expected["suspension.vel"], expected["suspension.ang_vel"] = reference.update_suspension(
        pushed, config, wheels, ii, dt
    )
    expected["friction.vel"], expected["friction.ang_vel"] = reference.apply_friction_impulses(cars, wheels, ii, dt)
    expected["upwards_dir"] = reference.get_upwards_dir_from_wheel_contacts(wheels, cars.rot_mat[..., :, 2])
    expected["forward_speed"] = reference.get_forward_speed(cars)
    expected = {name: columns(value, n) for name, value in expected.items()}
    widths = {name: value.shape[1] for name, value in expected.items()}
    # the sample reaches the branches: rays that hit and miss, steep contacts, the extra pushback
    hit = contact["is_in_contact"]
    assert 0.3 < float(hit.float().mean()) < 0.8
    assert int((contact["clipped_inv_contact_dot_suspension"] != 1).sum()) > 0
    assert int((extra_pushback > 0).sum()) > 0
    assert int((hit & (contact["contact_normal"][..., 2] < 0.7)).sum()) > 10  # walls, curves, ceiling

    out = torch.empty(n, sum(widths.values()), device=DEVICE)
    memory = car_memory(cars)
    wheels_flat, wheels_offsets = pack_wheels(wheels, n)
    vehicle_stages_kernel[(triton.cdiv(n, CAR_BLOCK),)](
        *memory, wheels_flat, wheels_offsets, car.extra_pushback.reshape(n, 4).to(DEVICE),
        sample.tick_count.to(DEVICE), car_table(config).to(DEVICE), **bodies_args(cars, ball, sample.arena.world),
        out_ptr=out,
        n=n, tick_time=dt, **arena_args(sample, ray_grid),
        WIDTH=out.shape[1], NUM_PLANES=4, BLOCK=CAR_BLOCK, num_warps=CAR_BLOCK // 32,
    )  # fmt: skip
    assert_outputs(split(out, widths), expected, exact=False)


@triton.jit
def arena_hits_kernel(
    car_rows_ptr, car_contact_id_ptr, car_ticks_ptr, wheel_hits_ptr, car_table_ptr, out_ptr, n, tick_time,
    tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr, plane_offsets_ptr,
    cell_start_ptr, cell_tris_ptr, ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z,
    WIDTH: tl.constexpr, NUM_PLANES: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """ray_cast against the arena alone (the pre-tick's first pass) twice per car: casting its rays, then
    reading their hits from ``wheel_hits`` (`kernels/arena.wheel_rays_kernel`'s, one env per car)."""
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    car = load_car(car_rows_ptr, car_contact_id_ptr, car_ticks_ptr, lane, live, 1, BLOCK)
    inv_inertia_local, wheel_connection, wheel_radius, rest, _, _ = load_car_params(car_table_ptr, 0)
    pos, rot_mat, vel, ang_vel = car[0], car[1], car[2], car[3]
    hard_point, _ = twin.update_wheel_transforms(pos, rot_mat, car[37], wheel_connection)
    arena = arena_of(tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr,
                     plane_offsets_ptr, cell_start_ptr, cell_tris_ptr)  # fmt: skip
    grid = arena_grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
    inv_inertia = inv_inertia_world(rot_mat, inv_inertia_local)
    cast = twin.ray_cast(
        pos, rot_mat, vel, ang_vel, car[40], hard_point, wheel_radius, rest, inv_inertia, tick_time, live, arena,
        grid, None, 1, NUM_PLANES, BLOCK, False,
    )  # fmt: skip
    read = twin.ray_cast(
        pos, rot_mat, vel, ang_vel, car[40], hard_point, wheel_radius, rest, inv_inertia, tick_time, live, arena,
        grid, None, 1, NUM_PLANES, BLOCK, False, wheel_hits_of(wheel_hits_ptr, lane),
    )  # fmt: skip
    store_outputs(out_ptr, lane, flat_cast(cast) + flat_cast(read), WIDTH, live)


@triton.jit
def flat_cast(cast):
    """What `arena_hits_kernel` compares of a ray_cast: all but the ground bodies, as 48 values."""
    return cast[0] + cast[1] + flat4(cast[2]) + flat4(cast[3]) + cast[4] + cast[5] + cast[6] + cast[8]


@pytest.mark.parametrize("preset", ["octane", "merc"])
def test_wheel_rays_kernel(preset):
    """`kernels/arena.wheel_rays_kernel` casts each wheel's ray against the arena in a lane of its own,
    before the pre-tick, whose first pass reads the hits (`load_arena_hit`) where it cast them in the car's
    lane: the same contacts, suspension and pushback, from cars of every scenario family."""
    sample = sample_cars(preset)
    cars, world = sample.cars, sample.arena.world
    n = len(cars.pos)
    rows, contact_id, ticks = car_memory(cars)
    wheel_hits = torch.full((n, 4, twin.ARENA_HIT_WIDTH.value), float("nan"), device=DEVICE)
    arena = arena_args(sample, ray_grid)
    args = {"car_order_ptr": torch.arange(n, dtype=torch.int32, device=DEVICE)[None], "car_start_rows_ptr": rows,
            "car_table_ptr": car_table(world.cars).to(DEVICE), "wheel_hits_ptr": wheel_hits, **arena,
            "NUM_CARS": 1, "NUM_PLANES": 4}  # fmt: skip
    arena_kernels.launch(arena_kernels.wheel_rays_kernel, n, 4, args, CAR_BLOCK, 0)  # a program per wheel
    assert not bool(wheel_hits.isnan().any())  # every wheel of every car written
    width = 2 * 48
    out = torch.empty(n, width, device=DEVICE)
    arena_hits_kernel[(triton.cdiv(n, CAR_BLOCK),)](
        rows, contact_id, ticks, wheel_hits, args["car_table_ptr"], out, n, world.params.tick_time, **arena,
        WIDTH=width, NUM_PLANES=4, BLOCK=CAR_BLOCK, num_warps=CAR_BLOCK // 32,
    )  # fmt: skip
    cast, read = out.cpu().chunk(2, dim=1)
    hit = cast[:, :4] != 0
    assert 0.3 < float(hit.float().mean()) < 0.8  # rays that hit and miss
    assert int((hit & (cast[:, 22:32:3] < 0.7)).sum()) > 10  # normals of walls, curves, ceiling
    assert_same(read[:, :8], cast[:, :8])  # is_in_contact, on_world
    # the same numbers, a compiled kernel's rounding aside (its two kernels may contract products apart)
    assert_close(read, cast, atol=ATOL["extra_pushback"], rtol=REL_TOL)
    if DEVICE == "cpu":
        assert torch.equal(read, cast)


def assert_outputs(got: dict, expected: dict, exact: bool) -> None:
    """The stages' outputs by name: flags identical, values equal where ``exact``, else within the
    car twins' tolerances."""
    for name, value in expected.items():
        try:
            if name in ("is_in_contact", "on_world"):
                assert_same(got[name], value)
            elif exact:
                assert_close(got[name], value, atol=0.0)
            elif name == "impulse":  # mass x UU/s: up to ~1e5, an ulp 0.008
                assert_close(got[name], value, atol=0.05, rtol=REL_TOL)
            elif name == "extra_pushback":
                assert_close(got[name], value, atol=ATOL["extra_pushback"], rtol=REL_TOL)
            elif name in ("hard_point", "contact_point", "ground.pos"):
                assert_close(got[name], value, atol=ATOL["pos"], rtol=REL_TOL)
            elif name.endswith(("vel", "velocity")) or name == "forward_speed":  # ground.vel too
                # (suspension_relative_velocity: the chassis' UU/s along the contact normal, a
                # difference of terms of ~1,000 UU/s, whose ulps are 6e-5)
                assert_close(got[name], value, atol=ATOL["vel"], rtol=REL_TOL)
            else:  # unit vectors, suspension lengths (UU of order 10), factors, inverse masses and inertias
                assert_close(got[name], value, atol=1e-5, rtol=REL_TOL)
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from None


@triton.jit
def piecewise_kernel(x_ptr, out_ptr, n, CURVE: tl.constexpr, BLOCK: tl.constexpr):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    x = tl.load(x_ptr + lane, mask=live, other=0.0)
    tl.store(out_ptr + lane, twin.piecewise(x, CURVE), mask=live)


CURVES = {name: getattr(C, name) for name in dir(C) if name.endswith("_CURVE")}


@pytest.mark.parametrize("name", sorted(CURVES))
def test_piecewise(name):
    """LinearPieceCurve::GetOutput on every curve of the constants, at its points, between and beyond."""
    points = CURVES[name]
    xs = torch.tensor([p[0] for p in points], dtype=torch.float32)
    lo, hi = float(xs.min()), float(xs.max())
    x = torch.cat((xs, torch.linspace(lo - 0.5 * (hi - lo + 1), hi + 0.5 * (hi - lo + 1), 200)))
    out = torch.empty_like(x, device=DEVICE)
    piecewise_kernel[(triton.cdiv(len(x), 256),)](
        x.to(DEVICE), out, len(x), CURVE=twin.curve(points), BLOCK=256, num_warps=8
    )
    assert_close(out, reference.piecewise(points, x), atol=1e-6, rtol=REL_TOL)


@triton.jit
def wheels_on_bodies_kernel(
    car_rows_ptr, car_contact_id_ptr, car_ticks_ptr, car_table_ptr, bodies_rows_ptr, ball_pos_ptr, ball_vel_ptr,
    ball_ang_vel_ptr, hitbox_table_ptr, ball_radius, ball_inv_mass, ball_inv_inertia, out_ptr, n, tick_time,
    tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr, plane_offsets_ptr,
    cell_start_ptr, cell_tris_ptr, ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z,
    WIDTH: tl.constexpr, NUM_CARS: tl.constexpr, NUM_PLANES: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """update_vehicle_first of one car per lane (lane = env * NUM_CARS + slot), its rays against the
    arena, the env's other cars and its ball."""
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    car = load_car(car_rows_ptr, car_contact_id_ptr, car_ticks_ptr, lane, live, 1, BLOCK)
    inv_inertia_local, wheel_connection, wheel_radius, rest, _, _ = load_car_params(car_table_ptr, 0)
    bodies = twin.bodies_of(
        bodies_rows_ptr, ball_pos_ptr, ball_vel_ptr, ball_ang_vel_ptr, lane // NUM_CARS, lane % NUM_CARS, live,
        hitbox_table_ptr, car_table_ptr, ball_radius, ball_inv_mass, ball_inv_inertia, NUM_CARS, BLOCK,
    )  # fmt: skip
    arena = (tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr)
    arena = arena + (plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr)
    grid = arena_grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
    rot_mat = car[1]
    wheels, extra_pushback = twin.update_vehicle_first(
        car[0], rot_mat, car[2], car[3], car[37], car[35], car[36], car[38], car[39], car[40], wheel_connection,
        wheel_radius, rest, inv_inertia_local, inv_inertia_world(rot_mat, inv_inertia_local), tick_time,
        tick_time, live, arena, grid, bodies, NUM_CARS, NUM_PLANES, BLOCK,
    )  # fmt: skip
    hard_point, axle, is_in_contact, contact_point, contact_normal, length, rel_vel, clipped, impulse, on_world, ground = wheels
    out = flat4(hard_point) + flat4(axle) + is_in_contact + on_world + flat4(contact_point) + flat4(contact_normal)
    out = out + length + rel_vel + clipped + flat_ground(ground) + extra_pushback + flat4(impulse)
    store_outputs(out_ptr, lane, out, WIDTH, live)


def test_wheels_on_bodies(mesh, monkeypatch):
    """update_vehicle_first with the wheels on the other car and on the ball (`wheels_on_bodies`: cars
    on cars' roofs, some tilted onto the box's edges, on a demolished car, dropping onto the ball): the
    rays' hits, the body under each wheel, the suspension and the friction impulses against that body.

    The reference runs with IEEE's sqrt (`twins.exact_sqrt`): PyTorch's CPU sqrt can be an ulp off it,
    which moves a ray's hit on the ball (the cast stops at another iteration); with it the interpreter's
    results equal the reference's to the bit. The kernel compiles without FMA contraction, as the
    pre-tick's pass that casts against the bodies does (`kernels/arena.UNFUSED_PASSES`)."""
    arena = wheels_on_bodies(64, seed=3)
    world, state = arena.world, arena.state
    cars, ball, config, params = state.cars, state.ball, world.cars, world.params
    envs, num_cars = cars.is_demoed.shape
    n = envs * num_cars
    ii = rigid_body.inv_inertia_world(cars.rot_mat, config.inv_inertia_local)
    bodies = reference.Bodies.of(cars, ball, config, params)
    solver_dt = torch.full((envs,), params.tick_time)
    with monkeypatch.context() as patch:
        patch.setattr(torch, "sqrt", exact_sqrt)
        wheels, car = reference.update_vehicle_first(cars, config, world.mesh, bodies, params, ii, solver_dt)
        # the bodies along the rays of the wheels without contact (their contact point: the ray's end)
        body_hit = reference.ray_cast_bodies(bodies, config, params, wheels.hard_point, wheels.contact_point)[0]
    expected = {name: getattr(wheels, name) for name in WHEEL_FIELDS if name != "impulse"}
    expected |= {f"ground.{name}": getattr(wheels.ground, name) for name in GROUND_FIELDS}
    expected |= {"extra_pushback": car.extra_pushback, "impulse": wheels.impulse}
    order = ("hard_point", "axle", "is_in_contact", "on_world", "contact_point", "contact_normal",
             "suspension_length", "suspension_relative_velocity", "clipped_inv_contact_dot_suspension")  # fmt: skip
    expected = {name: expected[name] for name in order} | {k: v for k, v in expected.items() if k not in order}
    expected = {name: columns(value, n) for name, value in expected.items()}
    widths = {name: value.shape[1] for name, value in expected.items()}
    # the scenes reach the branches: wheels on the arena, on a car, on the ball, and on a demolished
    # car (its box stops the ray: no contact), with friction against the body under them
    on_body = wheels.is_in_contact & ~wheels.on_world
    on_ball = on_body & (wheels.ground.inv_mass == params.ball_inv_mass)
    assert int(wheels.on_world.sum()) > 50 and int(on_ball.sum()) > 10 and int((on_body & ~on_ball).sum()) > 50
    assert int((body_hit & ~wheels.is_in_contact).sum()) > 10  # on a demolished car
    assert int(((wheels.impulse != 0).any(-1) & on_body).sum()) > 30

    out = torch.empty(n, sum(widths.values()), device=DEVICE)
    flat = CarState(**{name: getattr(cars, name).reshape(n, 1, *getattr(cars, name).shape[2:]) for name in CarState.FIELDS})
    wheels_on_bodies_kernel[(triton.cdiv(n, CAR_BLOCK),)](
        *car_memory(flat), car_table(config).to(DEVICE), **bodies_args(cars, ball, world), out_ptr=out, n=n,
        tick_time=params.tick_time, **arena_args_of(world, ray_grid), WIDTH=out.shape[1], NUM_CARS=num_cars, NUM_PLANES=4,
        BLOCK=CAR_BLOCK, num_warps=CAR_BLOCK // 32, enable_fp_fusion=False,
    )  # fmt: skip
    assert_outputs(split(out, widths), expected, exact=DEVICE == "cpu")  # the interpreter rounds as the reference


@triton.jit
def rays_near_bodies_kernel(
    car_table_ptr, bodies_rows_ptr, ball_pos_ptr, ball_vel_ptr, ball_ang_vel_ptr, hitbox_table_ptr,
    ball_radius, ball_inv_mass, ball_inv_inertia, out_ptr, n, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """rays_near_bodies of each env's car ``slot`` (one slot per program, as `kernels/arena.car_lanes`)."""
    slot = tl.program_id(0) % NUM_CARS
    env = (tl.program_id(0) // NUM_CARS) * BLOCK + tl.arange(0, BLOCK)
    live = env < n
    row = env * NUM_CARS + slot
    v = load_chunked(bodies_rows_ptr, row, live, twin.BODY_ROW, NUM_CARS, 0, 12, BLOCK)
    pos, rot_mat = (v[0], v[1], v[2]), ((v[3], v[4], v[5]), (v[6], v[7], v[8]), (v[9], v[10], v[11]))
    _, wheel_connection, wheel_radius, rest, _, _ = load_car_params(car_table_ptr, slot)
    bodies = twin.bodies_of(
        bodies_rows_ptr, ball_pos_ptr, ball_vel_ptr, ball_ang_vel_ptr, env, slot, live, hitbox_table_ptr,
        car_table_ptr, ball_radius, ball_inv_mass, ball_inv_inertia, NUM_CARS, BLOCK,
    )  # fmt: skip
    near = twin.rays_near_bodies(bodies, pos, rot_mat, wheel_connection, wheel_radius, rest, live, NUM_CARS, BLOCK)
    tl.store(out_ptr + row, near.to(tl.int8), mask=live)


@pytest.mark.parametrize("presets", [("octane", "octane"), ("plank", "merc")])
def test_rays_near_bodies(presets):
    """The pre-tick's fast lanes (`kernels/arena.pre_tick_kernel`) skip the rays' casts against the
    bodies where `rays_near_bodies` is false: that must never drop a hit. Cars, turned at random, with
    the other car and the ball at random offsets of up to 420 UU: every car whose full wheel rays hit a
    body in the reference (`vehicle.ray_cast_bodies`) is near, and the bound is tight enough (each
    body's bounding sphere against the box of the car's rays) to leave every car more than 170 UU from
    every body on the fast path, and fewer than three cars near for each car whose rays hit (a bound by
    the distance between the bodies' centres left four)."""
    envs = 512
    g = torch.Generator().manual_seed(5)
    u = lambda *shape: torch.rand(*shape, generator=g)
    direction = lambda: torch.nn.functional.normalize(torch.randn(envs, 3, generator=g), dim=-1)
    rot = lambda: angle_to_rot_mat((u(envs) - 0.5) * 6.28, (u(envs) - 0.5) * 3.14, (u(envs) - 0.5) * 6.28)
    pos = torch.stack((u(envs) * 4000 - 2000, u(envs) * 6000 - 3000, 500 + u(envs) * 300), -1)
    other = pos + direction() * (u(envs, 1) * 420)
    ball = pos + direction() * (u(envs, 1) * 420)
    arena = Arena(envs, blue=1, orange=1, car=list(presets), seed=0)
    arena.set_car(0, pos=pos, rot_mat=rot())
    arena.set_car(1, pos=other, rot_mat=rot())
    arena.set_ball(pos=ball)
    world, cars = arena.world, arena.state.cars
    config, params = world.cars, world.params
    hard_point, _ = reference.update_wheel_transforms(cars, config)
    ray_length = ((config.suspension_rest_length + C.MAX_SUSPENSION_TRAVEL) + config.wheel_radius) - C.SUSPENSION_SUBTRACTION
    end = hard_point - cars.rot_mat[..., None, :, 2] * ray_length[..., None]
    bodies = reference.Bodies.of(cars, arena.state.ball, config, params)
    hit = reference.ray_cast_bodies(bodies, config, params, hard_point, end)[0].any(-1)  # [N, C]

    out = torch.empty(envs * 2, dtype=torch.int8, device=DEVICE)
    rays_near_bodies_kernel[(triton.cdiv(envs, CAR_BLOCK) * 2,)](
        car_table(config).to(DEVICE), **bodies_args(cars, arena.state.ball, world),
        out_ptr=out, n=envs, NUM_CARS=2, BLOCK=CAR_BLOCK, num_warps=CAR_BLOCK // 32,
    )  # fmt: skip
    near = out.cpu().bool().reshape(envs, 2)
    assert int(hit.sum()) > 50  # the scenes reach rays on bodies
    assert not bool((hit & ~near).any()), "a car whose rays hit a body was put on the fast path"
    apart = (other - pos).norm(dim=-1)
    gap = torch.stack((apart.minimum((ball - pos).norm(dim=-1)), apart.minimum((ball - other).norm(dim=-1))), -1)
    assert not bool(near[gap > 170].any())
    assert int(near.sum()) < 3 * int(hit.sum())
