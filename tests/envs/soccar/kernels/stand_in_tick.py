"""The fused kernel's tick in PyTorch: the reference of `kernels/arena.py` as it approximates a tick.

`arena.tick` runs Bullet's joint step (`dynamics_world`): the car bodies collide with the arena, the
ball and each other, every row is solved together, and RocketSim's callbacks fire on those contacts.
The fused kernel detects the contacts between bodies with the cheaper `car_contacts` (and fires the
callbacks from them), solves them alone (`car_contacts.solve_bodies`), then the ball's arena contact
(`ball.physics_step`) and each car body's (`car_contacts.car_world_contacts` and `solve_car_world`)
starting from those deltas. Its wheels, as the reference's, meet the arena, the other cars and the
ball (`vehicle.Bodies`). `stand_in_tick` is that pipeline from the
same stage functions, in Arena::Step order, for the whole-game twin tests (`test_game.py`).
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import ball, ball_hit, boost_pads, car, car_bump, car_contacts, rules, vehicle
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car import CarControls
from nitro.envs.soccar.sequential_impulse import SolverResult
from nitro.envs.soccar.state import ArenaEvents, GameState, World


def stand_in_tick(state: GameState, controls: torch.Tensor, world: World) -> tuple[GameState, ArenaEvents]:
    """One tick as the fused kernel runs it (`arena.tick`'s stages; see the module's docstring)."""
    params, cars, pads, game = world.params, state.cars, state.pads, world.game
    sleeping = ball.update_sleeping(state.ball)
    frozen = cars.is_demoed
    bodies = vehicle.Bodies.of(cars, state.ball, world.cars, params)
    cars = rules.update_demo(cars, state.tick_count, world)
    car_controls = CarControls.from_tensor(controls)
    cars, forces = car.pre_tick_update(cars, car_controls, world.cars, world.mesh, bodies, state.tick_count, params)
    pads = boost_pads.pre_tick_update(pads, params)
    car_ball = car_contacts.car_ball_contacts(state.ball.pos, cars, world.cars, frozen, params)
    hits = car_ball.hits()
    ball_state, cars = ball_hit.on_hit(
        state.ball, ball.apply_damping(state.ball.vel, params), cars, hits, state.tick_count, params
    )
    car_car = car_contacts.car_car_contacts(cars, world.cars, frozen)
    cars, bumped_by, demoed_by = car_bump.on_car_car_collision(cars, car_car.touches(), game, params)
    ext_v, ext_w = car.external_impulses(cars, forces, world.cars, params)
    # the contacts between bodies solved alone, then each body's arena rows starting from their deltas
    between = car_contacts.solve_bodies(state.ball, sleeping, cars, ext_v, ext_w, car_ball, car_car, world, params)
    to_uu = (C.BT_TO_UU, 1.0, C.BT_TO_UU, 1.0)
    ball_start = tuple(x[:, 0] * k for x, k in zip((between.dv, between.dw, between.push, between.turn), to_uu))
    ball_state = ball.physics_step(ball_state, sleeping, world.mesh, params, start=ball_start)
    body = car_contacts.car_world_contacts(world.mesh, cars, world.cars, ~frozen)
    car_start = SolverResult(*(x[:, 1:] for x in (between.dv, between.dw, between.push, between.turn)))
    solved = car_contacts.solve_car_world(body, cars, ext_v, ext_w, world.cars, params, start=car_start)
    moved = car.physics_step(dataclasses.replace(cars, is_demoed=frozen), ext_v, ext_w, solved, params)
    cars = dataclasses.replace(moved, is_demoed=cars.is_demoed)
    cars = car.finish_physics_tick(car.post_tick_update(cars, car_controls, params))
    locked = boost_pads.check_collision(pads, cars, world.cars, world.pads)
    pads, cars, pickup_pad = boost_pads.post_tick_update(pads, cars, locked, world.pads, params)
    ball_state = ball.finish_physics_tick(ball_state, params)
    goal = rules.is_ball_scored(ball_state.pos, params)
    state = dataclasses.replace(state, ball=ball_state, cars=cars, pads=pads, tick_count=state.tick_count + 1)
    state = rules.count_goals(state, goal)
    events = rules.tick_events(goal, state.tick_count, hits.is_hit, demoed_by, bumped_by, pickup_pad)
    if game.kickoff_after_goal:
        state, _ = rules.reset_kickoff(state, world, goal > 0)
    return state, events


def stand_in_step_ticks(
    state: GameState, events: ArenaEvents, controls: torch.Tensor, world: World, ticks: int
) -> tuple[GameState, ArenaEvents]:
    """``ticks`` stand-in ticks with the same controls, folding their events (`arena.step_ticks`'s twin)."""
    for _ in range(ticks):
        state, new = stand_in_tick(state, controls, world)
        events = rules.fold_events(events, new)
    return state, events
