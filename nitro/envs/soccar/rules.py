"""The game around the physics: respawns, kickoffs, goals and scores, and the events a step reports.

Reference: RocketSim (ZealanL/RocketSim, MIT) `Car::SetState`, `Car::Respawn` and the demolished-car
block of `Car::_PreTickUpdate` (`Car.cpp`), `Arena::ResetToRandomKickoff` and the goal test of
`Arena::Step` (`Arena.cpp`), and the Python binding's score count (a goal counts once per run of
consecutive scoring ticks: its goal callback skips a tick that follows a scoring tick).

Random choices (kickoff spots, respawn spots) come from each env's own counter-based stream: a 32-bit
hash of (seed, env, stream, counter), so a choice depends on nothing but the arena's seed, the env's
index and how many choices of that kind the env has made; no generator state to carry, and the same
integer arithmetic in the kernels. RocketSim draws from one engine per thread instead, so its choices
cannot be replayed; tests read the spots chosen here (`Arena.kickoff_spawns`) and set them in
RocketSim.

Everything is pure over batched tensors, with env selections as masks, so it runs inside a compiled,
captured step (the post-goal kickoff) as well as from `Arena.reset_kickoff`.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from nitro.core import tree
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.mutators import TickParams
from nitro.envs.soccar.rigid_body import angle_to_rot_mat
from nitro.envs.soccar.state import (
    ArenaEvents,
    BallState,
    BoostPadState,
    CarState,
    GameConfig,
    GameState,
    World,
    kickoff_table,
)
from nitro.envs.soccar.vec import may_be_any

MASK32 = 0xFFFFFFFF
KICKOFF_STREAM = 0
"""Stream of the kickoff shuffles; respawns of car c use stream RESPAWN_STREAM + c."""
RESPAWN_STREAM = 1


# --- Each env's random streams ------------------------------------------------------------------


def mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """x * c mod 2^32 for x in [0, 2^32) int64 and a 32-bit constant, without int64 overflow (in
    16-bit halves of c)."""
    lo, hi = c & 0xFFFF, c >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & MASK32


def hash32(x: torch.Tensor) -> torch.Tensor:
    """Chris Wellons' lowbias32 integer hash of x mod 2^32, int64 in [0, 2^32)."""
    x = x & MASK32
    x = mul32(x ^ (x >> 16), 0x7FEB352D)
    x = mul32(x ^ (x >> 15), 0x846CA68B)
    return x ^ (x >> 16)


def random_u32(seed: int, env: torch.Tensor, stream: int, counter: torch.Tensor) -> torch.Tensor:
    """The ``counter``-th draw of stream ``stream`` of each env: uniform in [0, 2^32) int64.

    ``env`` and ``counter`` broadcast (int64); a draw depends only on (seed, env, stream, counter).
    """
    h = hash32(env + hash32(torch.full_like(env, seed & MASK32)))  # (no host tensor: CUDA graphs capture it)
    h = hash32(h ^ stream)
    return hash32(h ^ (counter & MASK32))


def env_index(num_envs: int, device: torch.device) -> torch.Tensor:
    return torch.arange(num_envs, dtype=torch.int64, device=device)


# --- Car::SetState, Car::Respawn, the demolished car's countdown -----------------------------------


def set_state(cars: CarState, new: CarState, mask: torch.Tensor) -> CarState:
    """Car::SetState of the cars where ``mask`` [N, C]: every CarState field from ``new``, the cached
    bump velocity cleared, ``tick_count_since_update`` 0; btVehicleRL's wheel infos stay as they are."""
    new = dataclasses.replace(
        new,
        velocity_impulse_cache=torch.zeros_like(cars.velocity_impulse_cache),
        tick_count_since_update=torch.zeros_like(cars.tick_count_since_update),
        **{name: getattr(cars, name) for name in CarState.WHEEL_INFOS},
    )
    return tree.where(mask, new, cars)


def game_config(blue: int, orange: int, seed: int, kickoff_after_goal: bool, device: torch.device) -> GameConfig:
    """The teams and the spawn tables: each spot's position and rotation per team, as
    Arena::ResetToRandomKickoff (orange mirrored through (-x, -y)) and Car::Respawn (orange's y
    mirrored) place cars, both turning orange around (Angle::yaw += M_PI, in double)."""

    def table(spots, z: float, mirror_x: bool) -> torch.Tensor:
        x, y, yaw = torch.tensor(spots, dtype=torch.float32).unbind(-1)
        rows = []
        for orange_side in (False, True):
            turned = (yaw.double() + math.pi).float() if orange_side else yaw
            rot = angle_to_rot_mat(turned, torch.zeros_like(yaw), torch.zeros_like(yaw))
            sx = -x if orange_side and mirror_x else x
            sy = -y if orange_side else y
            rows.append(torch.cat((torch.stack((sx, sy, torch.full_like(x, z)), -1), rot.reshape(-1, 9)), -1))
        return torch.stack(rows).to(device)

    return GameConfig(
        blue=blue,
        orange=orange,
        seed=seed,
        kickoff_after_goal=kickoff_after_goal,
        is_orange=torch.arange(blue + orange, device=device) >= blue,
        kickoff_spawns=table(kickoff_table(max(blue, orange)), C.CAR_SPAWN_REST_Z, mirror_x=True),
        respawn_spawns=table(C.CAR_RESPAWN_LOCATIONS_SOCCAR, C.CAR_RESPAWN_Z, mirror_x=False),
    )


def spawned_cars(num_envs: int, spots: torch.Tensor, spawns: torch.Tensor, world: World) -> CarState:
    """Fresh CarStates (RocketSim's `CarState()`) at each car's spot ``spots`` [N, C] of the spawn
    table ``spawns`` (`GameConfig`'s, per team), with the mutators' spawn boost."""
    cars = CarState.fresh(num_envs, spots.shape[1], spots.device)
    row = spawns[world.game.is_orange.long(), spots]  # [N, C, 12]
    cars.pos = row[..., :3].contiguous()
    cars.rot_mat = row[..., 3:].reshape(*spots.shape, 3, 3).contiguous()
    cars.boost = torch.full(spots.shape, world.params.car_spawn_boost_amount, device=spots.device)
    return cars


def respawn_spots(world: World, env: torch.Tensor, counter: torch.Tensor) -> torch.Tensor:
    """Math::RandInt(0, 4): each car's respawn spot [N, C], from its stream's ``counter``-th draw."""
    car = torch.arange(world.cars.num_cars, dtype=torch.int64, device=env.device)
    draw = random_u32(world.game.seed, env[:, None], RESPAWN_STREAM, counter[:, None] * 64 + car)
    return (draw % len(C.CAR_RESPAWN_LOCATIONS_SOCCAR)).to(torch.int64)


def respawned_cars(world: World, env: torch.Tensor, counter: torch.Tensor) -> CarState:
    """Car::Respawn: fresh cars at a random respawn spot each (z = CAR_RESPAWN_Z, orange's y mirrored
    and turned around, x not mirrored), with the mutators' spawn boost."""
    return spawned_cars(len(env), respawn_spots(world, env, counter), world.game.respawn_spawns, world)


def update_demo(cars: CarState, tick_count: torch.Tensor, world: World) -> CarState:
    """The demolished cars' part of Car::_PreTickUpdate: the respawn timer counts down, and a car
    whose timer reaches 0 respawns (Car::Respawn, then the rest of its pre-tick runs as usual; Bullet
    still skips its body this tick, see `arena.tick`). Each respawn draws its spot from the car's
    stream at the tick's count."""
    if not may_be_any(cars.is_demoed):
        return cars
    timer = (cars.demo_respawn_timer - world.params.tick_time).clamp(min=0.0)
    cars = dataclasses.replace(cars, demo_respawn_timer=torch.where(cars.is_demoed, timer, cars.demo_respawn_timer))
    respawning = cars.is_demoed & (timer == 0)
    env = env_index(len(tick_count), tick_count.device)
    return set_state(cars, respawned_cars(world, env, tick_count), respawning)


# --- Arena::ResetToRandomKickoff ------------------------------------------------------------------


def kickoff_order(world: World, env: torch.Tensor, kickoff_count: torch.Tensor) -> torch.Tensor:
    """std::shuffle of the five kickoff spots, from each env's kickoff stream [N, 5] int64.

    Five draws, ranked (ties by position): ``order[:, i]`` is the spot of slot i.
    """
    spots = len(C.CAR_SPAWN_LOCATIONS_SOCCAR)
    slot = torch.arange(spots, dtype=torch.int64, device=env.device)
    draw = random_u32(world.game.seed, env[:, None], KICKOFF_STREAM, kickoff_count[:, None] * spots + slot)
    before = (draw[:, None, :] < draw[:, :, None]) | (
        (draw[:, None, :] == draw[:, :, None]) & (slot[None, :] < slot[:, None])
    )  # [N, j, i]: draw i ranks before draw j
    rank = before.sum(-1)  # [N, 5]: the slot each spot goes to
    return (rank[:, None, :] == slot[None, :, None]).to(torch.int64).argmax(-1)


def kickoff_spots(order: torch.Tensor, blue: int, orange: int) -> torch.Tensor:
    """Each car's spot in `GameConfig.kickoff_spawns` [N, C]: the i-th car of each team takes the env's
    shuffled spot ``order[:, i]``, or past the fifth its own extra row i."""
    spawns = order.shape[1]
    columns = [order[:, i] if i < spawns else torch.full_like(order[:, 0], i) for i in [*range(blue), *range(orange)]]
    if not columns:
        return order[:, :0]
    return torch.stack(columns, -1)


def reset_kickoff(state: GameState, world: World, mask: torch.Tensor) -> tuple[GameState, torch.Tensor]:
    """Arena::ResetToRandomKickoff of the envs where ``mask`` [N]: the ball at rest at the centre (it
    sleeps until touched), each env's cars on its shuffled kickoff spots (orange mirrored through
    (-x, -y) and turned around, z = 17, the spawn boost, every other CarState field a fresh car's),
    the pads fresh. Returns the state and each car's spot [N, C] (`kickoff_spots`' rows)."""
    n, device = len(mask), mask.device
    env = env_index(n, device)
    order = kickoff_order(world, env, state.kickoff_count)
    spots = kickoff_spots(order, world.game.blue, world.game.orange)
    cars = state.cars
    if world.cars.num_cars:
        fresh = spawned_cars(n, spots, world.game.kickoff_spawns, world)
        cars = set_state(cars, fresh, mask[:, None].expand_as(cars.is_demoed))
    rest = BallState.rest(n, device)
    ball = tree.where(mask, rest, state.ball)
    pads = tree.where(mask, BoostPadState.fresh(n, device), state.pads)
    kickoff_count = state.kickoff_count + mask.to(torch.int64)
    return dataclasses.replace(state, ball=ball, cars=cars, pads=pads, kickoff_count=kickoff_count), spots


# --- Goals and scores -----------------------------------------------------------------------------


def is_ball_scored(ball_pos: torch.Tensor, params: TickParams) -> torch.Tensor:
    """Which team scored on this tick: 0 none, 1 blue (the ball beyond +y's goal line by a radius),
    2 orange (Arena::IsBallScored, the team from the sign of y) [N] int8."""
    scored = ball_pos[:, 1].abs() > params.goal_y
    return torch.where(scored, torch.where(ball_pos[:, 1] > 0, 1, 2), 0).to(torch.int8)


def count_goals(state: GameState, goal: torch.Tensor) -> GameState:
    """The binding's score: a scoring tick that follows a non-scoring one adds a goal to its team."""
    new = (goal > 0) & ~state.scored_last_tick
    return dataclasses.replace(
        state,
        blue_score=state.blue_score + (new & (goal == 1)).to(torch.int32),
        orange_score=state.orange_score + (new & (goal == 2)).to(torch.int32),
        scored_last_tick=goal > 0,
    )


# --- Events ---------------------------------------------------------------------------------------


def tick_events(
    goal: torch.Tensor,
    tick_count: torch.Tensor,
    ball_touch: torch.Tensor,
    demoed_by: torch.Tensor,
    bumped_by: torch.Tensor,
    boost_pickup_pad: torch.Tensor,
) -> ArenaEvents:
    """One tick's events: its goal (``tick_count`` the count after the tick), the cars that touched
    the ball, were demolished or bumped (and by whom) and picked up a pad (which)."""
    return ArenaEvents(
        goal_blue=goal == 1,
        goal_orange=goal == 2,
        goal_tick=torch.where(goal > 0, tick_count, -1),
        ball_touch=ball_touch,
        demo=demoed_by >= 0,
        demoed_by=demoed_by,
        bump=bumped_by >= 0,
        bumped_by=bumped_by,
        boost_pickup=boost_pickup_pad >= 0,
        boost_pickup_pad=boost_pickup_pad,
    )


def fold_events(events: ArenaEvents, new: ArenaEvents) -> ArenaEvents:
    """``events`` of the ticks so far with one more tick's: flags OR-ed, the first tick's tick count,
    attacker and pad kept."""

    def first(old: torch.Tensor, latest: torch.Tensor) -> torch.Tensor:
        return torch.where(old < 0, latest, old)

    return ArenaEvents(
        goal_blue=events.goal_blue | new.goal_blue,
        goal_orange=events.goal_orange | new.goal_orange,
        goal_tick=first(events.goal_tick, new.goal_tick),
        ball_touch=events.ball_touch | new.ball_touch,
        demo=events.demo | new.demo,
        demoed_by=first(events.demoed_by, new.demoed_by),
        bump=events.bump | new.bump,
        bumped_by=first(events.bumped_by, new.bumped_by),
        boost_pickup=events.boost_pickup | new.boost_pickup,
        boost_pickup_pad=first(events.boost_pickup_pad, new.boost_pickup_pad),
    )
