"""The game around the physics per lane: the twin of `rules.py` (respawns, kickoffs, goals, scores,
events), the same functions in the same order.

Each env's random streams are the reference's hash in uint32 arithmetic (Triton's unsigned 32-bit
multiplications wrap as the reference's masked ones do). A car is the kernels' car tuple
(`kernels/car.load_car`) beside its ball hit info (`kernels/ball_hit`); the spawn tables are
`GameConfig`'s (x, y, z, the rotation row by row, per team and spot).
"""

from __future__ import annotations

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.kernels import constexpr, jit, tl
from nitro.envs.soccar.kernels.car import where_car
from nitro.envs.soccar.kernels.vec import load_row, where
from nitro.envs.soccar.state import SPAWN_WIDTH

SPAWN_ROW = constexpr(16)
"""Floats per row of `spawn_rows`: a spawn table's 12 (`SPAWN_WIDTH`), padded to a power of two."""
KICKOFF_STREAM = constexpr(0)
RESPAWN_STREAM = constexpr(1)
SPAWNS = constexpr(len(C.CAR_SPAWN_LOCATIONS_SOCCAR))
RESPAWN_SPOTS = constexpr(len(C.CAR_RESPAWN_LOCATIONS_SOCCAR))
HASH_MUL_1 = constexpr(0x7FEB352D)
HASH_MUL_2 = constexpr(0x846CA68B)
CAR_RESPAWN_Z = constexpr(C.CAR_RESPAWN_Z)
BALL_REST_Z = constexpr(C.BALL_REST_Z)


def spawn_rows(spawns: torch.Tensor) -> torch.Tensor:
    """A `GameConfig` spawn table [2, spots, SPAWN_WIDTH] as the kernels read it: one row per team and
    spot (team x spots + spot), [2 x spots, SPAWN_ROW] float32."""
    rows = spawns.reshape(-1, SPAWN_WIDTH)
    return torch.nn.functional.pad(rows, (0, SPAWN_ROW.value - SPAWN_WIDTH)).contiguous()


def seed_hash(seed: int) -> int:
    """hash32(seed), computed once on the host: every stream starts from it."""
    x = seed & 0xFFFFFFFF
    x = ((x ^ (x >> 16)) * 0x7FEB352D) & 0xFFFFFFFF
    x = ((x ^ (x >> 15)) * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def seed_word(seed: int) -> int:
    """`seed_hash` as a signed int32 (the same 32 bits), the kernels' ``hashed_seed`` argument: Triton
    types an int at or above 2^31 as u32, a second compile; the streams use only the low 32 bits of
    ``env + hashed_seed``, the same either way."""
    x = seed_hash(seed)
    return x - (1 << 32) if x >= 1 << 31 else x


# --- Each env's random streams ------------------------------------------------------------------


@jit
def hash32(x):
    """lowbias32 of a uint32 tensor."""
    x = x ^ (x >> 16)
    x = x * tl.cast(HASH_MUL_1, tl.uint32)
    x = x ^ (x >> 15)
    x = x * tl.cast(HASH_MUL_2, tl.uint32)
    return x ^ (x >> 16)


@jit
def random_u32(hashed_seed, env, stream, counter):
    """The ``counter``-th draw of stream ``stream`` of env ``env`` (`rules.random_u32`); ``hashed_seed``
    is `seed_word` of the arena's seed, ``env`` and ``counter`` int64 (taken mod 2^32)."""
    h = hash32((env + hashed_seed).to(tl.uint32))
    h = hash32(h ^ tl.cast(stream, tl.uint32))
    return hash32(h ^ counter.to(tl.uint32))


# --- Car::SetState, Car::Respawn, the demolished car's countdown -----------------------------------


@jit
def spawned_car(car, spawn_ptr, row, boost, live, BLOCK: tl.constexpr):
    """A fresh CarState at row ``row`` (team x spots + spot) of a spawn table (`spawn_rows`), with
    ``boost``, as Car::SetState sets it (btVehicleRL's wheel infos kept from ``car``); and a fresh ball
    hit info."""
    v = load_row(spawn_ptr, row, live, SPAWN_ROW, BLOCK)
    pos = (v[0], v[1], v[2])
    rot = ((v[3], v[4], v[5]), (v[6], v[7], v[8]), (v[9], v[10], v[11]))
    zero = car[10] * 0.0  # per lane (``boost`` is one value for every lane)
    no = zero != zero
    vec0 = (zero, zero, zero)
    fresh = (
        pos, rot, vec0, vec0, ~no, (no, no, no, no), no, no, no, vec0, zero, zero, no, no, zero, zero,
        boost + zero, zero, no, zero, zero, no, zero, zero, no, vec0, car[26] * 0, zero, no, zero,
        (zero, zero, zero, zero, zero, zero, zero, zero), car[31] * 0, no, zero, vec0,
    )  # fmt: skip
    info = (no, vec0, vec0, vec0, car[31] * 0 - 1, car[31] * 0 - 1)
    return fresh + car[35:], info


@jit
def respawn_spot(hashed_seed, env, tick_count, car):
    """Math::RandInt(0, 4): the car's respawn spot, from its stream's draw at the tick's count (``car``: its
    slot in the env)."""
    draw = random_u32(hashed_seed, env, RESPAWN_STREAM, tick_count * 64 + car)
    return (draw % RESPAWN_SPOTS).to(tl.int32)


@jit
def update_demo(
    car, info, hashed_seed, env, tick_count, respawn_ptr, tick_time, car_spawn_boost_amount, live, c, team,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """The demolished car's part of Car::_PreTickUpdate: the respawn timer counts down, and at 0 the
    car respawns (Car::Respawn). ``c``, ``team``: the car's slot in its env and its team (0 blue, 1
    orange), the same for every lane. Returns (car, ball hit info)."""
    is_demoed, timer = car[28], car[29]
    new_timer = tl.where(is_demoed, tl.maximum(timer - tick_time, 0.0), timer)
    car = car[:29] + (new_timer,) + car[30:]
    respawning = is_demoed & (new_timer == 0)
    row = team * RESPAWN_SPOTS + respawn_spot(hashed_seed, env, tick_count, c)
    fresh, fresh_info = spawned_car(car, respawn_ptr, row, car_spawn_boost_amount, live, BLOCK)
    return where_car(respawning, fresh, car), where_info(respawning, fresh_info, info)


@jit
def where_info(c, a, b):
    """Ball hit info ``a`` where ``c``, else ``b``."""
    return (
        tl.where(c, a[0], b[0]), where(c, a[1], b[1]), where(c, a[2], b[2]), where(c, a[3], b[3]),
        tl.where(c, a[4], b[4]), tl.where(c, a[5], b[5]),
    )  # fmt: skip


# --- Arena::ResetToRandomKickoff ------------------------------------------------------------------


@jit
def kickoff_order(hashed_seed, env, kickoff_count):
    """std::shuffle of the five kickoff spots from the env's kickoff stream: the spot of each slot."""
    draws = ()
    for j in tl.static_range(SPAWNS):
        draws = draws + (random_u32(hashed_seed, env, KICKOFF_STREAM, kickoff_count * SPAWNS + j),)
    order = ()
    for s in tl.static_range(SPAWNS):
        order = order + (env.to(tl.int32) * 0,)
    for j in tl.static_range(SPAWNS):
        rank = env.to(tl.int32) * 0
        for i in tl.static_range(SPAWNS):
            if i < j:
                rank += (draws[i] <= draws[j]).to(tl.int32)
            elif i > j:
                rank += (draws[i] < draws[j]).to(tl.int32)
        new_order = ()
        for s in tl.static_range(SPAWNS):
            new_order = new_order + (tl.where(rank == s, j, order[s]),)
        order = new_order
    return order


@jit
def kickoff_spot(order, slot: tl.constexpr):
    """The spot of a team's ``slot``-th car: the shuffled spot, or past the fifth its own extra row."""
    if slot < SPAWNS:
        return order[slot]
    else:
        return order[0] * 0 + slot


# --- Goals and scores -----------------------------------------------------------------------------


@jit
def is_ball_scored(pos, goal_y):
    """Which team scored on this tick: 0 none, 1 blue (+y goal), 2 orange (Arena::IsBallScored)."""
    scored = tl.abs(pos[1]) > goal_y
    return tl.where(scored, tl.where(pos[1] > 0, 1, 2), 0)


@jit
def count_goals(blue_score, orange_score, scored_last_tick, goal):
    """The binding's score: a scoring tick that follows a non-scoring one adds a goal to its team."""
    new = (goal > 0) & (~scored_last_tick)
    blue_score += (new & (goal == 1)).to(tl.int32)
    orange_score += (new & (goal == 2)).to(tl.int32)
    return blue_score, orange_score, goal > 0


# --- Events ---------------------------------------------------------------------------------------


@jit
def first(old, latest):
    """An event's first value over the ticks: the old one unless it is -1."""
    return tl.where(old < 0, latest, old)
