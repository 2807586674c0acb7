"""The fused K-tick kernel: the twin of `arena.py`'s `tick` / `fold_tick` / `step_ticks`, whole ticks
in one launch, one env per thread, the ball and the env's cars in registers for all K ticks.

`tick` reads like the reference tick: the stages of `kernels/ball.py` and `kernels/car.py` called in
Arena::Step order; the later stages (car_world, car_ball, car_car, boost pads, rules) go in as calls
at their places in that order. An env's cars are a tuple of car tuples (`kernels/car.load_car`),
NUM_CARS of them, walked with static loops.
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh import ArenaMesh, load_arena_mesh
from nitro.envs.soccar.contacts import MAX_NEW_CONTACTS, MAX_PUSH_POINTS, PLANE_OBJECT_BASE
from nitro.envs.soccar.kernels import car as car_kernels
from nitro.envs.soccar.kernels import jit, require_triton, tl, triton, triton_op, warps, wrap_triton
from nitro.envs.soccar.kernels.arena_mesh import flat_tris, grid, grid_args
from nitro.envs.soccar.kernels.ball import finish_physics_tick, is_ball_scored, physics_step, update_sleeping
from nitro.envs.soccar.kernels.car import (
    SOLVER_DEFAULT_TIME_STEP,
    car_table,
    load_car,
    load_car_params,
    load_controls,
    pack_cars,
    store_car,
    unpack_cars_,
)
from nitro.envs.soccar.kernels.vec import load, store
from nitro.envs.soccar.mutators import TickParams
from nitro.envs.soccar.state import ArenaEvents, GameState, World

FUSED_BLOCK = 32  # envs per program of the fused tick: one warp, so block-wide branches are warp-wide
# The fused tick reads its own grid, made for the ball's reach (radius + gap = 93.2 UU): 64-UU cells
# listing the triangles within 96 UU, where the shared grid (128-UU cells, 112 UU for every query)
# lists 1.5x as many per cell near the walls. Lists stay in Bullet's visiting order and hold every
# triangle the ball can touch, so the contacts, in order, are the same.
BALL_GRID_CELL = 64.0
BALL_GRID_RADIUS = 96.0
PARAM_NAMES = tuple(f.name for f in dataclasses.fields(TickParams))
"""The kernel's parameters named as `TickParams`' fields (the op carries them as a list in this order)."""


@jit
def tick(
    pos,
    vel,
    ang_vel,
    velocity_impulse_cache,
    tick_count_since_update,
    tick_count,
    cars,
    controls,
    car_params,
    live,
    tick_time,
    gravity_dv,
    ball_damping,
    ball_radius,
    ball_contact_gap,
    ball_inv_mass,
    ball_inv_inertia,
    ball_restitution,
    ball_friction,
    ball_max_speed,
    ball_max_ang_speed,
    goal_y,
    restitution_velocity_threshold,
    friction_direction_epsilon_sq,
    erp2_over_dt,
    gravity_z,
    jump_immediate_force,
    jump_accel,
    boost_accel_ground,
    boost_accel_air,
    boost_used_per_second,
    unlimited_flips,
    unlimited_double_jumps,
    flip_z_damp_factor,
    car_world_friction,
    car_world_restitution,
    arena,
    grid,
    NUM_CARS: tl.constexpr,
    NUM_PLANES: tl.constexpr,
    PLANE_BASE: tl.constexpr,
    MAX_CONTACTS: tl.constexpr,
    DEGENERATE_L2: tl.constexpr,
    SIMD_EPSILON: tl.constexpr,
    MAX_ANGLE: tl.constexpr,
    EDGE_DISTANCE: tl.constexpr,
    ITERATIONS: tl.constexpr,
    PUSH_POINTS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """One RocketSim tick (Arena::Step) of each lane's arena: the new ball state, cars and tick count,
    and the goal (0, 1 blue, 2 orange). Stages that are not simulated yet are noted in their place;
    ball-only arenas (NUM_CARS = 0) skip the car stages, as RocketSim does."""
    sleeping = update_sleeping(vel, ang_vel)  # 1. ball zero-velocity sleeping
    # 2. cars' pre-tick (suspension, controls, jump, flip, air control, boost)
    solver_dt = tl.where(tick_count == 0, SOLVER_DEFAULT_TIME_STEP, tick_time)  # before the 1st step
    pre_ticked = ()
    for c in tl.static_range(NUM_CARS):
        pre_ticked = pre_ticked + (
            car_kernels.pre_tick_update(
                cars[c],
                controls[c],
                car_params[c],
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
                NUM_PLANES,
                BLOCK,
            ),
        )
    # 3. boost pad cooldowns (with the boost pads)
    # 4. ball pre-tick: nothing in soccar (heatseeker steering, hoops/dropshot launch)
    pos, vel, ang_vel = physics_step(  # 5. Bullet step: the ball, then each car
        pos,
        vel,
        ang_vel,
        live & (~sleeping),
        tick_time,
        gravity_dv,
        ball_damping,
        ball_radius,
        ball_contact_gap,
        ball_inv_mass,
        ball_inv_inertia,
        ball_restitution,
        ball_friction,
        restitution_velocity_threshold,
        friction_direction_epsilon_sq,
        erp2_over_dt,
        arena,
        grid,
        NUM_PLANES,
        PLANE_BASE,
        MAX_CONTACTS,
        DEGENERATE_L2,
        SIMD_EPSILON,
        MAX_ANGLE,
        EDGE_DISTANCE,
        ITERATIONS,
        PUSH_POINTS,
        BLOCK,
    )
    new_cars = ()
    for c in tl.static_range(NUM_CARS):
        car, force, torque = pre_ticked[c]
        car = car_kernels.physics_step(car, force, torque, car_params[c][0], tick_time, gravity_z)
        car = car_kernels.post_tick_update(car, controls[c], tick_time)  # 6. cars' post-tick and finish
        new_cars = new_cars + (car_kernels.finish_physics_tick(car),)  # (then boost pad pickups)
    # 7. boost pads give boost (with the boost pads)
    vel, ang_vel, velocity_impulse_cache, tick_count_since_update = finish_physics_tick(  # 8. ball finish
        vel, ang_vel, velocity_impulse_cache, tick_count_since_update, ball_max_speed, ball_max_ang_speed
    )
    scored = is_ball_scored(pos, goal_y)  # 9. goal (RocketSim fires every tick)
    goal = tl.where(scored, tl.where(pos[1] > 0, 1, 2), 0)
    tick_count += 1  # 10.
    return pos, vel, ang_vel, velocity_impulse_cache, tick_count_since_update, tick_count, new_cars, goal


@jit
def fold_tick(goal, tick_count, goal_tick, goals):
    """Fold one tick's goal into the events: ``goals`` bit 0 blue, bit 1 orange; the first scoring
    tick is kept in ``goal_tick``."""
    first = (goal > 0) & (goal_tick < 0)
    return tl.where(first, tick_count, goal_tick), goals | goal


@jit
def step_ticks_kernel(
    # state (read and written)
    pos_ptr,
    vel_ptr,
    ang_vel_ptr,
    velocity_impulse_cache_ptr,
    tick_count_since_update_ptr,
    tick_count_ptr,
    goal_tick_ptr,
    goals_ptr,
    # the cars: their packed rows (`kernels/car.pack_cars`) and their two integer fields, [N * C]
    car_rows_ptr,
    car_contact_id_ptr,
    car_tick_count_since_update_ptr,
    controls_ptr,
    car_table_ptr,
    n,
    ticks,
    # tick parameters (`TickParams`)
    tick_time,
    gravity_dv,
    ball_damping,
    ball_radius,
    ball_contact_gap,
    ball_inv_mass,
    ball_inv_inertia,
    ball_restitution,
    ball_friction,
    ball_max_speed,
    ball_max_ang_speed,
    goal_y,
    restitution_velocity_threshold,
    friction_direction_epsilon_sq,
    erp2_over_dt,
    gravity_z,
    jump_immediate_force,
    jump_accel,
    boost_accel_ground,
    boost_accel_air,
    boost_used_per_second,
    unlimited_flips,
    unlimited_double_jumps,
    flip_z_damp_factor,
    car_world_friction,
    car_world_restitution,
    # arena
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
    NUM_CARS: tl.constexpr,
    NUM_PLANES: tl.constexpr,
    PLANE_BASE: tl.constexpr,
    MAX_CONTACTS: tl.constexpr,
    DEGENERATE_L2: tl.constexpr,
    SIMD_EPSILON: tl.constexpr,
    MAX_ANGLE: tl.constexpr,
    EDGE_DISTANCE: tl.constexpr,
    ITERATIONS: tl.constexpr,
    PUSH_POINTS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """`arena.step_ticks`: ``ticks`` times `tick` and `fold_tick`, the controls held throughout."""
    # Float scalars arrive as fp32 from eager launches but as fp64 from torch.compile (Inductor types
    # Python floats as fp64): cast them once, so every value below is float32.
    tick_time = tl.cast(tick_time, tl.float32)
    gravity_dv = tl.cast(gravity_dv, tl.float32)
    ball_damping = tl.cast(ball_damping, tl.float32)
    ball_radius = tl.cast(ball_radius, tl.float32)
    ball_contact_gap = tl.cast(ball_contact_gap, tl.float32)
    ball_inv_mass = tl.cast(ball_inv_mass, tl.float32)
    ball_inv_inertia = tl.cast(ball_inv_inertia, tl.float32)
    ball_restitution = tl.cast(ball_restitution, tl.float32)
    ball_friction = tl.cast(ball_friction, tl.float32)
    ball_max_speed = tl.cast(ball_max_speed, tl.float32)
    ball_max_ang_speed = tl.cast(ball_max_ang_speed, tl.float32)
    goal_y = tl.cast(goal_y, tl.float32)
    restitution_velocity_threshold = tl.cast(restitution_velocity_threshold, tl.float32)
    friction_direction_epsilon_sq = tl.cast(friction_direction_epsilon_sq, tl.float32)
    erp2_over_dt = tl.cast(erp2_over_dt, tl.float32)
    gravity_z = tl.cast(gravity_z, tl.float32)
    jump_immediate_force = tl.cast(jump_immediate_force, tl.float32)
    jump_accel = tl.cast(jump_accel, tl.float32)
    boost_accel_ground = tl.cast(boost_accel_ground, tl.float32)
    boost_accel_air = tl.cast(boost_accel_air, tl.float32)
    boost_used_per_second = tl.cast(boost_used_per_second, tl.float32)
    unlimited_flips = tl.cast(unlimited_flips, tl.float32)
    unlimited_double_jumps = tl.cast(unlimited_double_jumps, tl.float32)
    flip_z_damp_factor = tl.cast(flip_z_damp_factor, tl.float32)
    arena_grid = grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
    ticks = tl.cast(ticks, tl.int32)
    arena = (tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr)
    arena = arena + (plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr)
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    pos = load(pos_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    vel = load(vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    ang_vel = load(ang_vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    velocity_impulse_cache = load(velocity_impulse_cache_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    tick_count_since_update = tl.load(tick_count_since_update_ptr + lane, mask=live, other=0)
    tick_count = tl.load(tick_count_ptr + lane, mask=live, other=0)
    goal_tick = tl.load(goal_tick_ptr + lane, mask=live, other=-1)
    goals = tl.load(goals_ptr + lane, mask=live, other=0).to(tl.int32)  # bit 0: blue, bit 1: orange
    cars = ()
    controls = ()
    car_params = ()
    for c in tl.static_range(NUM_CARS):
        cars = cars + (load_car(car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, lane * NUM_CARS + c, live, BLOCK),)
        controls = controls + (load_controls(controls_ptr, lane * NUM_CARS + c, live, BLOCK),)
        car_params = car_params + (load_car_params(car_table_ptr, c),)
    k = 0
    while k < ticks:
        pos, vel, ang_vel, velocity_impulse_cache, tick_count_since_update, tick_count, cars, goal = tick(
            pos,
            vel,
            ang_vel,
            velocity_impulse_cache,
            tick_count_since_update,
            tick_count,
            cars,
            controls,
            car_params,
            live,
            tick_time,
            gravity_dv,
            ball_damping,
            ball_radius,
            ball_contact_gap,
            ball_inv_mass,
            ball_inv_inertia,
            ball_restitution,
            ball_friction,
            ball_max_speed,
            ball_max_ang_speed,
            goal_y,
            restitution_velocity_threshold,
            friction_direction_epsilon_sq,
            erp2_over_dt,
            gravity_z,
            jump_immediate_force,
            jump_accel,
            boost_accel_ground,
            boost_accel_air,
            boost_used_per_second,
            unlimited_flips,
            unlimited_double_jumps,
            flip_z_damp_factor,
            car_world_friction,
            car_world_restitution,
            arena,
            arena_grid,
            NUM_CARS,
            NUM_PLANES,
            PLANE_BASE,
            MAX_CONTACTS,
            DEGENERATE_L2,
            SIMD_EPSILON,
            MAX_ANGLE,
            EDGE_DISTANCE,
            ITERATIONS,
            PUSH_POINTS,
            BLOCK,
        )
        goal_tick, goals = fold_tick(goal, tick_count, goal_tick, goals)
        k += 1
    store(pos_ptr + lane * 3, pos, mask=live)
    store(vel_ptr + lane * 3, vel, mask=live)
    store(ang_vel_ptr + lane * 3, ang_vel, mask=live)
    store(velocity_impulse_cache_ptr + lane * 3, velocity_impulse_cache, mask=live)
    tl.store(tick_count_since_update_ptr + lane, tick_count_since_update, mask=live)
    tl.store(tick_count_ptr + lane, tick_count, mask=live)
    tl.store(goal_tick_ptr + lane, goal_tick, mask=live)
    tl.store(goals_ptr + lane, goals.to(tl.int8), mask=live)
    for c in tl.static_range(NUM_CARS):
        store_car(car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, lane * NUM_CARS + c, live, cars[c], BLOCK)


@triton_op(
    "nitro::soccar_step_ticks_",
    mutates_args={
        "pos",
        "vel",
        "ang_vel",
        "velocity_impulse_cache",
        "tick_count_since_update",
        "tick_count",
        "goal_tick",
        "goals",
        "car_rows",
        "car_contact_id",
        "car_tick_count_since_update",
    },
)
def step_ticks_op(
    pos: torch.Tensor,
    vel: torch.Tensor,
    ang_vel: torch.Tensor,
    velocity_impulse_cache: torch.Tensor,
    tick_count_since_update: torch.Tensor,
    tick_count: torch.Tensor,
    goal_tick: torch.Tensor,
    goals: torch.Tensor,
    car_rows: torch.Tensor,
    car_contact_id: torch.Tensor,
    car_tick_count_since_update: torch.Tensor,
    controls: torch.Tensor,
    car_table: torch.Tensor,
    ticks: int,
    params: list[float],
    tri: torch.Tensor,
    tri_bounds: torch.Tensor,
    tri_mesh: torch.Tensor,
    edge_angle: torch.Tensor,
    edge_flags: torch.Tensor,
    plane_normals: torch.Tensor,
    plane_offsets: torch.Tensor,
    cell_start: torch.Tensor,
    cell_tris: torch.Tensor,
    grid: list[float],
    block: int,
    maxnreg: int = 0,
) -> None:
    n = pos.shape[0]
    # ptxas's register cap per thread (trading spills for occupancy): eager launches only, as
    # torch.compile does not pass it through to Triton.
    cap = {"maxnreg": maxnreg} if maxnreg else {}
    wrap_triton(step_ticks_kernel)[(triton.cdiv(n, block),)](
        pos_ptr=pos,
        vel_ptr=vel,
        ang_vel_ptr=ang_vel,
        velocity_impulse_cache_ptr=velocity_impulse_cache,
        tick_count_since_update_ptr=tick_count_since_update,
        tick_count_ptr=tick_count,
        goal_tick_ptr=goal_tick,
        goals_ptr=goals,
        car_rows_ptr=car_rows,
        car_contact_id_ptr=car_contact_id,
        car_tick_count_since_update_ptr=car_tick_count_since_update,
        controls_ptr=controls,
        car_table_ptr=car_table,
        n=n,
        ticks=ticks,
        **dict(zip(PARAM_NAMES, params)),
        tri_ptr=tri,
        tri_bounds_ptr=tri_bounds,
        tri_mesh_ptr=tri_mesh,
        edge_angle_ptr=edge_angle,
        edge_flags_ptr=edge_flags,
        plane_normals_ptr=plane_normals,
        plane_offsets_ptr=plane_offsets,
        cell_start_ptr=cell_start,
        cell_tris_ptr=cell_tris,
        ox0=grid[0],
        oy0=grid[1],
        oz0=grid[2],
        cell_size=grid[3],
        dim_x=int(grid[4]),
        dim_y=int(grid[5]),
        dim_z=int(grid[6]),
        NUM_CARS=controls.shape[1],
        NUM_PLANES=4,
        PLANE_BASE=PLANE_OBJECT_BASE,
        MAX_CONTACTS=MAX_NEW_CONTACTS,
        DEGENERATE_L2=C.DEGENERATE_TRIANGLE_L2,
        SIMD_EPSILON=C.SIMD_EPSILON_UU2,
        MAX_ANGLE=C.INTERNAL_EDGE_MAX_ANGLE,
        EDGE_DISTANCE=C.INTERNAL_EDGE_DISTANCE_THRESHOLD,
        ITERATIONS=C.SOLVER_NUM_ITERATIONS,
        PUSH_POINTS=MAX_PUSH_POINTS,
        BLOCK=block,
        num_warps=warps(block),
        **cap,
    )


def ball_grid(world: World) -> ArenaMesh:
    """The arena with the fused tick's grid (`BALL_GRID_CELL`), or the world's own when a ball
    mutated bigger than `BALL_GRID_RADIUS` would not fit it."""
    p, mesh = world.params, world.mesh
    reach = p.ball_radius + p.ball_contact_gap
    if reach > BALL_GRID_RADIUS:
        if reach > mesh.query_radius:
            raise ValueError(
                f"ball reach radius + gap = {reach} UU exceeds the grid's "
                f"query radius {mesh.query_radius} UU; load the mesh with a larger query_radius"
            )
        return mesh
    key = (mesh.folder, str(mesh.device))
    if key not in _BALL_GRIDS:  # once per folder and device: no file system work per step
        _BALL_GRIDS[key] = load_arena_mesh(
            mesh.folder, mesh.device, query_radius=BALL_GRID_RADIUS, cell_size=BALL_GRID_CELL
        )
    return _BALL_GRIDS[key]


_BALL_GRIDS: dict[tuple[str, str], ArenaMesh] = {}


def launch_step_ticks_(
    state: GameState,
    events: ArenaEvents,
    controls: torch.Tensor,
    world: World,
    ticks: int,
    block: int = FUSED_BLOCK,
    maxnreg: int = 0,
) -> None:
    """Advance the arenas by ``ticks`` ticks in one kernel launch with ``controls`` [N, C, 8] held,
    updating ``state`` and ``events`` in place: the same mechanics as `arena.step_ticks`.

    ``block``: envs per program (32, 64, ...; one per thread). ``maxnreg``: a cap on registers per
    thread (0: ptxas's choice, about 255 here), for benchmarks of spills against occupancy.

    ``events.goal_blue`` / ``goal_orange`` are rewritten from the kernel's per-env goal bits, so they
    must be the arena's own event buffers. The state's tensors must be contiguous (the Arena's are).
    """
    require_triton()
    mesh = ball_grid(world)
    b = state.ball
    goals = events.goal_blue.to(torch.int8) | (events.goal_orange.to(torch.int8) << 1)
    cars = state.cars
    car_rows = pack_cars(cars)  # one row per car: read and written with one memory operation each
    step_ticks_op(
        b.pos,
        b.vel,
        b.ang_vel,
        b.velocity_impulse_cache,
        b.tick_count_since_update,
        state.tick_count,
        events.goal_tick,
        goals,
        car_rows,
        cars.car_contact_id,
        cars.tick_count_since_update,
        controls.contiguous(),
        _car_table(world),
        int(ticks),
        [float(getattr(world.params, name)) for name in PARAM_NAMES],
        flat_tris(mesh),
        mesh.tri_bounds,
        mesh.tri_mesh,
        mesh.edge_angle,
        mesh.edge_flags,
        mesh.plane_normals,
        mesh.plane_offsets,
        mesh.cell_start,
        mesh.cell_tris,
        grid_args(mesh),
        int(block),
        int(maxnreg),
    )
    unpack_cars_(car_rows, cars)
    events.goal_blue.copy_((goals & 1) > 0)
    events.goal_orange.copy_((goals & 2) > 0)


def _car_table(world: World) -> torch.Tensor:
    """`car_table` of the world's presets, built once per World."""
    key = id(world.cars)
    if key not in _CAR_TABLES:
        _CAR_TABLES[key] = (world.cars, car_table(world.cars))
    return _CAR_TABLES[key][1]


_CAR_TABLES: dict[int, tuple[object, torch.Tensor]] = {}
