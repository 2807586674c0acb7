"""The fused K-tick kernel: the twin of `arena.py`'s `tick` / `fold_tick` / `step_ticks`, whole ticks
in one launch, one env per thread, the ball and the env's cars in registers for all K ticks.

`tick` reads like the reference tick: the stages of `kernels/ball.py`, `kernels/car.py` and the game
rules (`kernels/rules.py`, `ball_hit.py`, `car_contacts.py`, `car_bump.py`, `boost_pads.py`) called in
Arena::Step order. An env's cars are a tuple of car tuples (`kernels/car.load_car`), NUM_CARS of them,
walked with static loops, each with its ball hit info beside it; the pads' state stays in memory,
walked once per tick.

What differs from the reference tick: each car body meets the arena in Bullet's step through
`car_contacts.car_world_contacts` (separating axes for the mesh triangles, the deepest corner for the
planes, as `car_world.plane_contacts`) and is solved alone by `car_contacts.solve_car_world`, where the
reference runs Bullet's GJK/EPA and the joint solve; there is no collision response between bodies
(`dynamics_world`'s car-ball and car-car rows): the ball meets the arena alone, a car passes through
the ball and other cars. The callbacks fire from the stand-in contacts of `kernels/car_contacts.py`
(the car-ball distance in closed form, the car pairs' deepest corners), not Bullet's: the ball gets
the extra hit impulse without the contact's own response, and bumps and demolitions come from the
stand-in's points. Its PyTorch twin in the tests is `tests/envs/soccar/kernels/stand_in_tick.py`.
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh import ArenaMesh, load_arena_mesh
from nitro.envs.soccar.contacts import CAR_CAR_POINTS as _CAR_CAR_POINTS
from nitro.envs.soccar.contacts import MAX_NEW_CONTACTS, MAX_PUSH_POINTS, PLANE_OBJECT_BASE
from nitro.envs.soccar.kernels import ball_hit, boost_pads, car_bump, car_contacts, rules
from nitro.envs.soccar.kernels import car as car_kernels
from nitro.envs.soccar.kernels import constexpr, jit, require_triton, tl, triton, triton_op, warps, wrap_triton
from nitro.envs.soccar.kernels.arena_mesh import flat_tris, grid, grid_args
from nitro.envs.soccar.kernels.ball import apply_damping, finish_physics_tick, physics_step, update_sleeping
from nitro.envs.soccar.kernels.car import (
    CAR_WIDTH,
    PACKED,
    SOLVER_DEFAULT_TIME_STEP,
    car_table,
    load_car,
    load_car_params,
    load_controls,
    pack_cars,
    unpack_cars_,
)
from nitro.envs.soccar.kernels.rigid_body import column
from nitro.envs.soccar.kernels.vec import add, load, load_row, store, store_row, sub, where
from nitro.envs.soccar.mutators import TickParams
from nitro.envs.soccar.state import ArenaEvents, GameState, World

FUSED_BLOCK = 32  # envs per program of the fused tick: one warp, so block-wide branches are warp-wide
# The fused tick reads its own grid, made for the ball's reach (radius + gap = 93.2 UU): 64-UU cells
# listing the triangles within 96 UU, where the shared grid (128-UU cells, 112 UU for every query)
# lists 1.5x as many per cell near the walls. Lists stay in Bullet's visiting order and hold every
# triangle the ball can touch, so the contacts, in order, are the same.
BALL_GRID_CELL = 64.0
BALL_GRID_RADIUS = 96.0
CAR_CAR_POINTS = constexpr(_CAR_CAR_POINTS)
BOOST_PAD_COUNT = constexpr(C.BOOST_PAD_COUNT)
BALL_REST_Z = constexpr(C.BALL_REST_Z)
HIT_INFO_AT = car_kernels.CAR_TUPLE_FLOATS
"""Where the ball hit info's floats start in a packed car row: right after `load_car`'s fields."""
assert PACKED[PACKED.index("ball_hit_info_is_valid") :] == (
    "ball_hit_info_is_valid", "ball_hit_info_relative_pos_on_ball", "ball_hit_info_ball_pos", "ball_hit_info_extra_hit_vel"
)  # fmt: skip
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
    hit_infos,
    controls,
    car_params,
    game,
    events,
    tables,
    env,
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
    car_spawn_boost_amount,
    boost_pad_cooldown_big,
    boost_pad_cooldown_small,
    ball_hit_extra_force_scale,
    bump_force_scale,
    bump_cooldown_time,
    respawn_delay,
    demo_mode,
    enable_team_demos,
    car_world_friction,
    car_world_restitution,
    hashed_seed,
    arena,
    grid,
    NUM_CARS: tl.constexpr,
    BLUE: tl.constexpr,
    KICKOFF_AFTER_GOAL: tl.constexpr,
    KICKOFF_ROWS: tl.constexpr,
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
    """One RocketSim tick (Arena::Step) of each lane's arena. ``game``: (blue_score, orange_score,
    scored_last_tick, kickoff_count); ``events``: (goal, and per car: touched, demoed_by, bumped_by,
    pickup pad) of the ticks so far; ``tables``: the pads' state and table, the hitboxes, the spawn
    tables. Returns the new ball, tick count, cars, hit infos, game and events. Stages that are not
    simulated yet are noted in their place; ball-only arenas (NUM_CARS = 0) skip the car stages, as
    RocketSim does."""
    active_ptr, cooldown_ptr, locked_ptr, pad_table_ptr, hitbox_ptr, respawn_ptr, kickoff_ptr = tables
    sleeping = update_sleeping(vel, ang_vel)  # 1. ball zero-velocity sleeping
    # 2. cars' pre-tick: a demolished car's countdown and respawn, then the rest (suspension, controls,
    #    jump, flip, air control, boost); Bullet skips the bodies demolished at the tick's start
    solver_dt = tl.where(tick_count == 0, SOLVER_DEFAULT_TIME_STEP, tick_time)  # before the 1st step
    frozen = ()
    pre_ticked = ()
    new_infos = ()
    for c in tl.static_range(NUM_CARS):
        frozen = frozen + (cars[c][28],)
        car, info = rules.update_demo(
            cars[c], hit_infos[c], hashed_seed, env, tick_count, respawn_ptr, tick_time, car_spawn_boost_amount, live,
            c, 1 if c >= BLUE else 0, BLOCK,
        )  # fmt: skip
        new_infos = new_infos + (info,)
        pre_ticked = pre_ticked + (
            car_kernels.pre_tick_update(
                car,
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
    hit_infos = new_infos
    # 3. boost pad cooldowns: with the pads' walk below (they read nothing the physics writes)
    # 4. ball pre-tick: nothing in soccar (heatseeker steering, hoops/dropshot launch)
    # 5. Bullet step. Contacts at the tick's start, each firing RocketSim's callback: the car-ball hits
    #    (Ball::_OnHit), then the car-car bumps and demolitions
    damped_vel = apply_damping(vel, ball_damping)
    touched = ()
    new_infos = ()
    states = ()
    for c in tl.static_range(NUM_CARS):
        car = pre_ticked[c][0]
        is_hit, relative_pos_on_ball = car_contacts.car_ball_hits(
            pos, car[0], car[1], car_contacts.load_hitbox(hitbox_ptr, c), ball_contact_gap, ball_radius, frozen[c]
        )
        added, info = ball_hit.on_hit(
            is_hit, relative_pos_on_ball, pos, damped_vel, car[0], car[2], column(car[1], 0), hit_infos[c],
            tick_count, ball_hit_extra_force_scale,
        )  # fmt: skip
        velocity_impulse_cache = add(velocity_impulse_cache, added)
        touched = touched + (is_hit,)
        new_infos = new_infos + (info,)
        states = states + (car_bump.bump_state(car),)
    hit_infos = new_infos
    contacts = ()
    for a in tl.static_range(NUM_CARS):
        for b in tl.static_range(a + 1, NUM_CARS):
            contacts = contacts + (
                car_contacts.car_car_contacts(
                    states[a][0], states[a][2], car_contacts.load_hitbox(hitbox_ptr, a), frozen[a],
                    states[b][0], states[b][2], car_contacts.load_hitbox(hitbox_ptr, b), frozen[b],
                ),
            )  # fmt: skip
    states, bumped_by, demoed_by = car_bump.on_car_car_collision(
        states, contacts, demo_mode, enable_team_demos, bump_force_scale, bump_cooldown_time, respawn_delay,
        BLUE, NUM_CARS, CAR_CAR_POINTS,
    )  # fmt: skip
    #    then the solve and integration of each body (the car bodies' contacts come with their stage)
    pos, vel, ang_vel = physics_step(
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
    cars_min = ()
    cars_max = ()
    cars_tested = ()
    for c in tl.static_range(NUM_CARS):
        car, force, torque = pre_ticked[c]
        car = car_bump.with_bump_state(car, states[c])
        demoed = car[28]  # demolished during the step: simulated to its end, then skipped
        car = car[:28] + (frozen[c],) + car[29:]
        ext_v, ext_w = car_kernels.external_impulses(car, force, torque, car_params[c][0], tick_time, gravity_z)
        body = car_contacts.car_world_contacts(  # the car body against the arena, solved alone
            car[0], car[1], car_contacts.load_hitbox(hitbox_ptr, c), live & (frozen[c].to(tl.int32) == 0), arena, grid, NUM_PLANES,
            PLANE_BASE, MAX_ANGLE, EDGE_DISTANCE, BLOCK,
        )  # fmt: skip
        solved = car_contacts.solve_car_world(
            body, car[1], car[2], car[3], ext_v, ext_w, car_contacts.load_inv_inertia(hitbox_ptr, c), car_world_friction,
            car_world_restitution,
            tick_time, ITERATIONS, BLOCK,
        )  # fmt: skip
        car = car_kernels.physics_step(car, ext_v, ext_w, solved, tick_time)
        car = car[:28] + (demoed,) + car[29:]
        car = car_kernels.post_tick_update(car, controls[c], tick_time)  # 6. cars' post-tick and finish,
        car = car_kernels.finish_physics_tick(car)
        inner, margin, offset, _ = car_contacts.load_hitbox(hitbox_ptr, c)  # then pad pickups
        extent = add(inner, (margin, margin, margin))
        lo, hi = boost_pads.car_aabb(car[0], car[1], sub(offset, extent), add(offset, extent))
        new_cars = new_cars + (car,)
        cars_min = cars_min + (lo,)
        cars_max = cars_max + (hi,)
        cars_tested = cars_tested + (boost_pads.tested(car[0], car[28], car[16]),)
    cars = new_cars
    # 3. and 7.: each pad's cooldown, the car it is locked to, the boost it gives
    given = ()
    pickup_pad = ()
    for c in tl.static_range(NUM_CARS):
        given = given + (tl.zeros([BLOCK], dtype=tl.float32),)
        pickup_pad = pickup_pad + (tl.full([BLOCK], -1, tl.int32),)
    if NUM_CARS > 0:
        cars_pos = ()
        for c in tl.static_range(NUM_CARS):
            cars_pos = cars_pos + (cars[c][0],)
        for p in range(BOOST_PAD_COUNT):
            pad_pos, is_big = boost_pads.load_pad(pad_table_ptr, p)
            cooldown = tl.load(cooldown_ptr + env * BOOST_PAD_COUNT + p, mask=live, other=0.0)
            prev = tl.load(locked_ptr + env * BOOST_PAD_COUNT + p, mask=live, other=0)
            is_active, cooldown = boost_pads.pre_tick_update(cooldown, tick_time)
            locked = boost_pads.check_collision(prev, pad_pos, is_big, cars_pos, cars_min, cars_max, cars_tested, NUM_CARS)
            is_active, cooldown, prev, pickup, amount = boost_pads.post_tick_update(
                is_active, cooldown, locked, is_big, boost_pad_cooldown_big, boost_pad_cooldown_small
            )
            new_given = ()
            new_pad = ()
            for c in tl.static_range(NUM_CARS):
                new_given = new_given + (given[c] + tl.where(pickup == c + 1, amount, 0.0),)
                new_pad = new_pad + (tl.where(pickup == c + 1, p, pickup_pad[c]),)
            given = new_given
            pickup_pad = new_pad
            tl.store(active_ptr + env * BOOST_PAD_COUNT + p, is_active.to(tl.int8), mask=live)
            tl.store(cooldown_ptr + env * BOOST_PAD_COUNT + p, cooldown, mask=live)
            tl.store(locked_ptr + env * BOOST_PAD_COUNT + p, prev, mask=live)
    new_cars = ()
    for c in tl.static_range(NUM_CARS):
        car = cars[c]
        new_cars = new_cars + (car[:16] + (boost_pads.give_boost(car[16], given[c]),) + car[17:],)
    cars = new_cars
    vel, ang_vel, velocity_impulse_cache, tick_count_since_update = finish_physics_tick(  # 8. ball finish
        vel, ang_vel, velocity_impulse_cache, tick_count_since_update, ball_max_speed, ball_max_ang_speed
    )
    goal = rules.is_ball_scored(pos, goal_y)  # 9. goal (RocketSim fires every scoring tick)
    tick_count += 1  # 10.
    blue_score, orange_score, scored_last_tick, kickoff_count = game
    blue_score, orange_score, scored_last_tick = rules.count_goals(blue_score, orange_score, scored_last_tick, goal)
    events = fold_tick(events, goal, tick_count, touched, demoed_by, bumped_by, pickup_pad, NUM_CARS)
    if KICKOFF_AFTER_GOAL:  # nitro's option: a kickoff after each goal
        kickoff = goal > 0
        order = rules.kickoff_order(hashed_seed, env, kickoff_count)
        new_cars = ()
        new_infos = ()
        for c in tl.static_range(NUM_CARS):
            fresh, fresh_info = rules.spawned_car(
                cars[c], kickoff_ptr, (1 if c >= BLUE else 0) * KICKOFF_ROWS + rules.kickoff_spot(order, c - BLUE if c >= BLUE else c),
                car_spawn_boost_amount, live, BLOCK,
            )  # fmt: skip
            new_cars = new_cars + (car_kernels.where_car(kickoff, fresh, cars[c]),)
            new_infos = new_infos + (rules.where_info(kickoff, fresh_info, hit_infos[c]),)
        cars = new_cars
        hit_infos = new_infos
        zero = vel[0] * 0.0
        pos = where(kickoff, (zero, zero, zero + BALL_REST_Z), pos)
        vel = where(kickoff, (zero, zero, zero), vel)
        ang_vel = where(kickoff, (zero, zero, zero), ang_vel)
        velocity_impulse_cache = where(kickoff, (zero, zero, zero), velocity_impulse_cache)
        tick_count_since_update = tl.where(kickoff, 0, tick_count_since_update)
        for p in range(BOOST_PAD_COUNT):
            tl.store(active_ptr + env * BOOST_PAD_COUNT + p, tl.full([BLOCK], 1, tl.int8), mask=live & kickoff)
            tl.store(cooldown_ptr + env * BOOST_PAD_COUNT + p, tl.zeros([BLOCK], dtype=tl.float32), mask=live & kickoff)
            tl.store(locked_ptr + env * BOOST_PAD_COUNT + p, tl.zeros([BLOCK], dtype=tl.int32), mask=live & kickoff)
        kickoff_count += kickoff.to(tl.int64)
    game = (blue_score, orange_score, scored_last_tick, kickoff_count)
    return pos, vel, ang_vel, velocity_impulse_cache, tick_count_since_update, tick_count, cars, hit_infos, game, events


@jit
def fold_tick(events, goal, tick_count, touched, demoed_by, bumped_by, pickup_pad, NUM_CARS: tl.constexpr):
    """Fold one tick's events into the events so far (`rules.fold_events`): ``goals`` bit 0 blue, bit 1
    orange; the first scoring tick, attacker and pad kept."""
    goal_tick, goals, car_events = events
    goal_tick = tl.where((goal > 0) & (goal_tick < 0), tick_count, goal_tick)
    new = ()
    for c in tl.static_range(NUM_CARS):
        touch, demoer, bumper, pad = car_events[c]
        new = new + (
            (touch | touched[c], rules.first(demoer, demoed_by[c]), rules.first(bumper, bumped_by[c]), rules.first(pad, pickup_pad[c])),
        )
    return goal_tick, goals | goal, new


@jit
def step_ticks_kernel(
    # state (read and written)
    pos_ptr,
    vel_ptr,
    ang_vel_ptr,
    velocity_impulse_cache_ptr,
    tick_count_since_update_ptr,
    tick_count_ptr,
    game_ints_ptr,
    # the cars: their packed rows (`kernels/car.pack_cars`) and their integer fields, [N * C]
    car_rows_ptr,
    car_contact_id_ptr,
    car_tick_count_since_update_ptr,
    car_ints_ptr,
    # the pads' state [N, 34] (read and written)
    pad_is_active_ptr,
    pad_cooldown_ptr,
    pad_prev_locked_car_id_ptr,
    # events (folded over the ticks)
    # controls and tables
    controls_ptr,
    car_table_ptr,
    pad_table_ptr,
    hitbox_table_ptr,
    respawn_spawns_ptr,
    kickoff_spawns_ptr,
    n,
    ticks,
    hashed_seed,
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
    car_spawn_boost_amount,
    boost_pad_cooldown_big,
    boost_pad_cooldown_small,
    ball_hit_extra_force_scale,
    bump_force_scale,
    bump_cooldown_time,
    respawn_delay,
    demo_mode,
    enable_team_demos,
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
    BLUE: tl.constexpr,
    KICKOFF_AFTER_GOAL: tl.constexpr,
    KICKOFF_ROWS: tl.constexpr,
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
    flip_z_damp_factor = tl.cast(flip_z_damp_factor, tl.float32)
    car_spawn_boost_amount = tl.cast(car_spawn_boost_amount, tl.float32)
    boost_pad_cooldown_big = tl.cast(boost_pad_cooldown_big, tl.float32)
    boost_pad_cooldown_small = tl.cast(boost_pad_cooldown_small, tl.float32)
    ball_hit_extra_force_scale = tl.cast(ball_hit_extra_force_scale, tl.float32)
    bump_force_scale = tl.cast(bump_force_scale, tl.float32)
    bump_cooldown_time = tl.cast(bump_cooldown_time, tl.float32)
    respawn_delay = tl.cast(respawn_delay, tl.float32)
    car_world_friction = tl.cast(car_world_friction, tl.float32)
    car_world_restitution = tl.cast(car_world_restitution, tl.float32)
    unlimited_flips = tl.cast(unlimited_flips, tl.float32)
    unlimited_double_jumps = tl.cast(unlimited_double_jumps, tl.float32)
    demo_mode = tl.cast(tl.cast(demo_mode, tl.float32), tl.int32)
    enable_team_demos = tl.cast(tl.cast(enable_team_demos, tl.float32), tl.int32)
    arena_grid = grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
    ticks = tl.cast(ticks, tl.int32)
    arena = (tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr)
    arena = arena + (plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr)
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    env = lane.to(tl.int64)
    pos = load(pos_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    vel = load(vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    ang_vel = load(ang_vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    velocity_impulse_cache = load(velocity_impulse_cache_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    tick_count_since_update = tl.load(tick_count_since_update_ptr + lane, mask=live, other=0)
    tick_count = tl.load(tick_count_ptr + lane, mask=live, other=0)
    g = load_row(game_ints_ptr, lane, live, GAME_WIDTH, BLOCK)  # `game_ints`
    game = (g[0].to(tl.int32), g[1].to(tl.int32), g[2] != 0, g[3])
    cars = ()
    hit_infos = ()
    controls = ()
    car_params = ()
    car_events = ()
    for c in tl.static_range(NUM_CARS):
        row = lane * NUM_CARS + c
        cars = cars + (load_car(car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, row, live, BLOCK),)
        ints = load_row(car_ints_ptr, row, live, CAR_INTS_WIDTH, BLOCK)  # `car_ints`
        hit_infos = hit_infos + (load_hit_info(car_rows_ptr, ints, row, live, BLOCK),)
        controls = controls + (load_controls(controls_ptr, row, live, BLOCK),)
        car_params = car_params + (load_car_params(car_table_ptr, c),)
        car_events = car_events + ((ints[2] != 0, ints[3].to(tl.int32), ints[4].to(tl.int32), ints[5].to(tl.int32)),)
    events = (g[4], g[5].to(tl.int32), car_events)  # goals: bit 0 blue, bit 1 orange
    tables = (pad_is_active_ptr, pad_cooldown_ptr, pad_prev_locked_car_id_ptr, pad_table_ptr, hitbox_table_ptr)
    tables = tables + (respawn_spawns_ptr, kickoff_spawns_ptr)
    k = 0
    while k < ticks:
        pos, vel, ang_vel, velocity_impulse_cache, tick_count_since_update, tick_count, cars, hit_infos, game, events = tick(
            pos,
            vel,
            ang_vel,
            velocity_impulse_cache,
            tick_count_since_update,
            tick_count,
            cars,
            hit_infos,
            controls,
            car_params,
            game,
            events,
            tables,
            env,
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
            car_spawn_boost_amount,
            boost_pad_cooldown_big,
            boost_pad_cooldown_small,
            ball_hit_extra_force_scale,
            bump_force_scale,
            bump_cooldown_time,
            respawn_delay,
            demo_mode,
            enable_team_demos,
            car_world_friction,
            car_world_restitution,
            hashed_seed,
            arena,
            arena_grid,
            NUM_CARS,
            BLUE,
            KICKOFF_AFTER_GOAL,
            KICKOFF_ROWS,
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
        k += 1
    store(pos_ptr + lane * 3, pos, mask=live)
    store(vel_ptr + lane * 3, vel, mask=live)
    store(ang_vel_ptr + lane * 3, ang_vel, mask=live)
    store(velocity_impulse_cache_ptr + lane * 3, velocity_impulse_cache, mask=live)
    tl.store(tick_count_since_update_ptr + lane, tick_count_since_update, mask=live)
    tl.store(tick_count_ptr + lane, tick_count, mask=live)
    zero = game[3] * 0
    game_ints = (game[0].to(tl.int64), game[1].to(tl.int64), game[2].to(tl.int64), game[3], events[0])
    game_ints = game_ints + (events[1].to(tl.int64), zero, zero)
    store_row(game_ints_ptr, lane, game_ints, live, GAME_WIDTH, BLOCK)
    for c in tl.static_range(NUM_CARS):
        row = lane * NUM_CARS + c
        store_car_and_hit_info(
            car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, row, live, cars[c], hit_infos[c], BLOCK
        )
        touch, demoer, bumper, pad = events[2][c]
        info = hit_infos[c]
        ints = (info[4], info[5], touch.to(tl.int64), demoer.to(tl.int64), bumper.to(tl.int64), pad.to(tl.int64))
        store_row(car_ints_ptr, row, ints + (zero, zero), live, CAR_INTS_WIDTH, BLOCK)


@jit
def load_hit_info(rows_ptr, ints, row, live, BLOCK: tl.constexpr):
    """A car's ball hit info: its ``ball_hit_info_*`` floats from the car's packed row (after `load_car`'s
    fields, `HIT_INFO_AT`) and its two tick counts from its `car_ints`."""
    v = load_row(rows_ptr, row, live, CAR_WIDTH, BLOCK)
    return (
        v[HIT_INFO_AT] != 0,
        (v[HIT_INFO_AT + 1], v[HIT_INFO_AT + 2], v[HIT_INFO_AT + 3]),
        (v[HIT_INFO_AT + 4], v[HIT_INFO_AT + 5], v[HIT_INFO_AT + 6]),
        (v[HIT_INFO_AT + 7], v[HIT_INFO_AT + 8], v[HIT_INFO_AT + 9]),
        ints[0],
        ints[1],
    )


@jit
def store_car_and_hit_info(
    rows_ptr, car_contact_id_ptr, tick_count_since_update_ptr, row, live, car, info, BLOCK: tl.constexpr
):
    """`kernels/car.store_car` with the ball hit info's floats in the same row."""
    f = (
        car[0] + car[1][0] + car[1][1] + car[1][2] + car[2] + car[3] + (car[4],) + car[5] + (car[6], car[7], car[8])
        + car[9] + car[10:25] + car[25] + car[27:30] + car[30] + car[32:34] + car[34] + car[35:38] + car[38]
        + car[39] + car[40] + (info[0],) + info[1] + info[2] + info[3]
    )  # fmt: skip
    values = ()
    for k in tl.static_range(CAR_WIDTH):
        if k < HIT_INFO_AT + 10:
            values = values + (f[k].to(tl.float32),)
        else:
            values = values + (f[0].to(tl.float32) * 0.0,)
    store_row(rows_ptr, row, values, live, CAR_WIDTH, BLOCK)
    tl.store(car_contact_id_ptr + row, car[26], mask=live)
    tl.store(tick_count_since_update_ptr + row, car[31], mask=live)


@triton_op("nitro::soccar_step_ticks_", mutates_args={"ball", "game", "cars", "pads"})
def step_ticks_op(
    ball: list[torch.Tensor],
    game: list[torch.Tensor],
    cars: list[torch.Tensor],
    pads: list[torch.Tensor],
    controls: torch.Tensor,
    tables: list[torch.Tensor],
    ticks: int,
    params: list[float],
    hashed_seed: int,
    arena: list[torch.Tensor],
    grid: list[float],
    blue: int,
    kickoff_after_goal: bool,
    block: int,
    maxnreg: int = 0,
) -> None:
    """The fused step as a registered op: ``ball`` (pos, vel, ang_vel, velocity_impulse_cache,
    tick_count_since_update), ``game`` (tick_count, `game_ints`), ``cars`` (the packed rows,
    car_contact_id, tick_count_since_update, `car_ints`), ``pads`` (is_active, cooldown,
    prev_locked_car_id), ``tables`` (`TABLE_NAMES`), ``arena`` (`ARENA_NAMES`)."""
    n = ball[0].shape[0]
    # ptxas's register cap per thread (trading spills for occupancy): eager launches only, as
    # torch.compile does not pass it through to Triton.
    cap = {"maxnreg": maxnreg} if maxnreg else {}
    wrap_triton(step_ticks_kernel)[(triton.cdiv(n, block),)](
        **{f"{name}_ptr": x for name, x in zip(BALL_NAMES + GAME_NAMES, ball + game)},
        **{f"car_{name}_ptr": x for name, x in zip(CAR_NAMES, cars)},
        **{f"{name}_ptr": x for name, x in zip(PAD_NAMES, pads)},
        controls_ptr=controls,
        **{f"{name}_ptr": x for name, x in zip(TABLE_NAMES + ARENA_NAMES, tables + arena)},
        n=n,
        ticks=ticks,
        hashed_seed=hashed_seed,
        **dict(zip(PARAM_NAMES, params)),
        ox0=grid[0],
        oy0=grid[1],
        oz0=grid[2],
        cell_size=grid[3],
        dim_x=int(grid[4]),
        dim_y=int(grid[5]),
        dim_z=int(grid[6]),
        NUM_CARS=controls.shape[1],
        BLUE=blue,
        KICKOFF_AFTER_GOAL=kickoff_after_goal,
        KICKOFF_ROWS=tables[4].shape[0] // 2,
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


BALL_NAMES = ("pos", "vel", "ang_vel", "velocity_impulse_cache", "tick_count_since_update")
GAME_NAMES = ("tick_count", "game_ints")
CAR_NAMES = ("rows", "contact_id", "tick_count_since_update", "ints")
PAD_NAMES = ("pad_is_active", "pad_cooldown", "pad_prev_locked_car_id")
TABLE_NAMES = ("car_table", "pad_table", "hitbox_table", "respawn_spawns", "kickoff_spawns")
ARENA_NAMES = ("tri", "tri_bounds", "tri_mesh", "edge_angle", "edge_flags", "plane_normals", "plane_offsets",
               "cell_start", "cell_tris")  # fmt: skip


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

    The events' flags are rewritten from the kernel's per-env goal bits and per-car attackers and
    pads, so they must be the arena's own event buffers. The state's tensors must be contiguous (the
    Arena's are).
    """
    require_triton()
    mesh = ball_grid(world)
    b = state.ball
    cars = state.cars
    car_rows = pack_cars(cars)  # one row per car: read and written with one memory operation each
    game_ints = pack_game_ints(state, events)
    car_ints = pack_car_ints(cars, events)
    step_ticks_op(
        [b.pos, b.vel, b.ang_vel, b.velocity_impulse_cache, b.tick_count_since_update],
        [state.tick_count, game_ints],
        [car_rows, cars.car_contact_id, cars.tick_count_since_update, car_ints],
        [_int8(state.pads.is_active), state.pads.cooldown, state.pads.prev_locked_car_id],
        controls.contiguous(),
        _tables(world, mesh),
        int(ticks),
        [float(getattr(world.params, name)) for name in PARAM_NAMES],
        rules.seed_hash(world.game.seed),
        [flat_tris(mesh), mesh.tri_bounds, mesh.tri_mesh, mesh.edge_angle, mesh.edge_flags, mesh.plane_normals,
         mesh.plane_offsets, mesh.cell_start, mesh.cell_tris],  # fmt: skip
        grid_args(mesh),
        world.game.blue,
        world.game.kickoff_after_goal,
        int(block),
        int(maxnreg),
    )
    unpack_cars_(car_rows, cars)
    unpack_ints_(game_ints, car_ints, state, events)


GAME_WIDTH = constexpr(8)
"""`game_ints`' columns: blue_score, orange_score, scored_last_tick, kickoff_count, goal_tick, goal bits
(1 blue, 2 orange), two spare (rows a power of two wide, as `vec.load_row` reads them)."""
CAR_INTS_WIDTH = constexpr(8)
"""`car_ints`' columns: ball_hit_info_tick_count_when_hit, _when_extra_impulse_applied, the events'
ball_touch, demoed_by, bumped_by, boost_pickup_pad, two spare."""


def pack_game_ints(state: GameState, events: ArenaEvents) -> torch.Tensor:
    """Each env's game counters and goal events as one int64 row [N, GAME_WIDTH] (one memory operation
    each way in the kernel)."""
    goals = events.goal_blue.long() | (events.goal_orange.long() << 1)
    zero = torch.zeros_like(state.kickoff_count)
    parts = (state.blue_score, state.orange_score, state.scored_last_tick, state.kickoff_count, events.goal_tick, goals)
    return torch.stack([x.long() for x in parts] + [zero, zero], 1)


def pack_car_ints(cars, events: ArenaEvents) -> torch.Tensor:
    """Each car's hit info tick counts and events as one int64 row [N * C, CAR_INTS_WIDTH]."""
    parts = (cars.ball_hit_info_tick_count_when_hit, cars.ball_hit_info_tick_count_when_extra_impulse_applied,
             events.ball_touch, events.demoed_by, events.bumped_by, events.boost_pickup_pad)  # fmt: skip
    zero = torch.zeros_like(cars.ball_hit_info_tick_count_when_hit)
    return torch.stack([x.long() for x in parts] + [zero, zero], -1).reshape(-1, CAR_INTS_WIDTH.value)


def unpack_ints_(game_ints: torch.Tensor, car_ints: torch.Tensor, state: GameState, events: ArenaEvents) -> None:
    """The packed rows back into the state's and the events' own tensors, in place."""
    g = game_ints
    for field, column in (("blue_score", 0), ("orange_score", 1), ("scored_last_tick", 2), ("kickoff_count", 3)):
        getattr(state, field).copy_(g[:, column])
    events.goal_tick.copy_(g[:, 4])
    events.goal_blue.copy_((g[:, 5] & 1) > 0)
    events.goal_orange.copy_((g[:, 5] & 2) > 0)
    c = car_ints.reshape(*state.cars.car_contact_id.shape, CAR_INTS_WIDTH.value)
    state.cars.ball_hit_info_tick_count_when_hit.copy_(c[..., 0])
    state.cars.ball_hit_info_tick_count_when_extra_impulse_applied.copy_(c[..., 1])
    events.ball_touch.copy_(c[..., 2] != 0)
    for field, column in (("demoed_by", 3), ("bumped_by", 4), ("boost_pickup_pad", 5)):
        getattr(events, field).copy_(c[..., column])
    events.demo.copy_(events.demoed_by >= 0)
    events.bump.copy_(events.bumped_by >= 0)
    events.boost_pickup.copy_(events.boost_pickup_pad >= 0)


def _int8(x: torch.Tensor) -> torch.Tensor:
    """A bool tensor as the kernels read and write it (a view: writes land in the bool tensor)."""
    return x.view(torch.int8) if x.dtype == torch.bool else x


def _tables(world: World, mesh: ArenaMesh) -> list[torch.Tensor]:
    """`TABLE_NAMES`' tensors of the world, built once per World (checking that the grid's lists
    reach every triangle a car body can touch: `kernels/car_contacts.car_world_contacts` reads the
    list of the cell holding the box's centre)."""
    key = (id(world), str(mesh.device))
    if key not in _TABLES:
        h = world.cars.hitbox
        reach = (h.inner + h.margin[:, None]).norm(dim=1) + h.threshold  # BT, per car
        reach = float(reach.max()) * C.BT_TO_UU if reach.numel() else 0.0  # sync-ok: once per World
        if reach > mesh.query_radius:
            raise ValueError(
                f"a car body reaches {reach:.1f} UU from its hitbox centre, beyond the fused grid's query "
                f"radius {mesh.query_radius} UU; load the mesh with a larger query_radius"
            )
        _TABLES[key] = (
            world,  # kept alive with its tables, so its id is not reused
            [
                car_table(world.cars),
                boost_pads.pad_table(world.pads),
                car_contacts.hitbox_table(world.cars),
                rules.spawn_rows(world.game.respawn_spawns),
                rules.spawn_rows(world.game.kickoff_spawns),
            ],
        )
    return _TABLES[key][1]


_TABLES: dict[tuple[int, str], tuple[World, list[torch.Tensor]]] = {}
