"""`kernels/rules.py` against `rules.py`: each env's random streams (the hash, kickoff shuffles,
respawn spots), the demolished cars' countdown and respawn, goals and the score."""

from __future__ import annotations

import pytest
import torch

from nitro.envs.soccar import rules as reference
from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.kernels import rules as twin
from nitro.envs.soccar.kernels.arena import load_hit_info, store_car_and_hit_info
from nitro.envs.soccar.kernels.car import load_car, pack_cars, unpack_cars_
from nitro.envs.soccar.kernels.vec import load_row, store_row
from nitro.envs.soccar.state import CarState
from tests.envs.soccar.kernels.game_states import random_game
from tests.envs.soccar.kernels.twins import BLOCK, DEVICE, assert_close, assert_same, programs, runnable

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable
INT_FIELDS = ("car_contact_id", "tick_count_since_update", "ball_hit_info_tick_count_when_hit",
              "ball_hit_info_tick_count_when_extra_impulse_applied")  # fmt: skip


@triton.jit
def streams_kernel(env_ptr, counter_ptr, hash_ptr, draw_ptr, order_ptr, spot_ptr, n, hashed_seed, BLOCK: tl.constexpr):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    env = tl.load(env_ptr + lane, mask=live, other=0)
    counter = tl.load(counter_ptr + lane, mask=live, other=0)
    tl.store(hash_ptr + lane, twin.hash32(counter.to(tl.uint32)).to(tl.int64), mask=live)
    tl.store(draw_ptr + lane, twin.random_u32(hashed_seed, env, 7, counter).to(tl.int64), mask=live)
    order = twin.kickoff_order(hashed_seed, env, counter)
    for s in tl.static_range(5):
        tl.store(order_ptr + lane * 5 + s, order[s], mask=live)
    for c in tl.static_range(3):
        tl.store(spot_ptr + lane * 3 + c, twin.respawn_spot(hashed_seed, env, counter, c), mask=live)


@pytest.mark.parametrize("seed", [123456789, 11])  # hashes above and below 2^31 (`seed_word` < 0 and >= 0)
def test_streams_match_the_reference(seed):
    n = 200
    g = torch.Generator().manual_seed(0)
    env = torch.randint(0, 2**20, (n,), generator=g).to(DEVICE)
    counter = torch.randint(-1, 2**33, (n,), generator=g).to(DEVICE)
    hashed, draw = torch.zeros(n, dtype=torch.int64, device=DEVICE), torch.zeros(n, dtype=torch.int64, device=DEVICE)
    order = torch.zeros(n, 5, dtype=torch.int32, device=DEVICE)
    spot = torch.zeros(n, 3, dtype=torch.int32, device=DEVICE)
    streams_kernel[programs(n)](env, counter, hashed, draw, order, spot, n, twin.seed_word(seed), BLOCK=BLOCK)
    assert torch.equal(hashed, reference.hash32(counter))
    assert torch.equal(draw, reference.random_u32(seed, env, 7, counter))
    assert twin.seed_hash(seed) == int(reference.hash32(torch.tensor(seed)))
    world = Arena(1, blue=2, orange=1, seed=seed).world
    assert torch.equal(order.long(), reference.kickoff_order(world, env, counter))
    assert torch.equal(spot.long(), reference.respawn_spots(world, env, counter))


@triton.jit
def demo_kernel(
    rows_ptr, contact_id_ptr, ticks_since_ptr, ints_ptr, tick_ptr, respawn_ptr, n, hashed_seed,
    tick_time, boost, BLUE: tl.constexpr, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    tick = tl.load(tick_ptr + lane, mask=live, other=0)
    for c in tl.static_range(NUM_CARS):
        row = lane * NUM_CARS + c
        car = load_car(rows_ptr, contact_id_ptr, ticks_since_ptr, row, live, NUM_CARS, BLOCK)
        info = load_hit_info(rows_ptr, load_row(ints_ptr, row, live, 2, BLOCK), row, live, NUM_CARS, BLOCK)
        car, info = twin.update_demo(
            car, info, hashed_seed, lane.to(tl.int64), tick, respawn_ptr, tick_time, boost, live, c, 1 if c >= BLUE else 0,
            BLOCK,
        )
        store_car_and_hit_info(rows_ptr, contact_id_ptr, ticks_since_ptr, row, live, car, info, NUM_CARS, BLOCK)
        store_row(ints_ptr, row, (info[4], info[5]), live, 2, BLOCK)


def test_demolished_cars_respawn_as_the_reference():
    n, blue, orange = 128, 2, 1
    arena = Arena(n, blue=blue, orange=orange, seed=77, device=DEVICE)
    _, cars, _ = random_game(n, blue + orange, seed=5)
    cars.is_demoed = torch.rand(n, 3, generator=torch.Generator().manual_seed(1)).to(DEVICE) < 0.5
    tick = torch.randint(0, 1000, (n,), generator=torch.Generator().manual_seed(2)).to(DEVICE)
    expected = reference.update_demo(cars, tick, arena.world)
    respawned = cars.is_demoed & ~expected.is_demoed
    assert bool(respawned.any()) and bool((cars.is_demoed & expected.is_demoed).any())
    rows = pack_cars(cars)
    ints = [getattr(cars, name).clone() for name in INT_FIELDS[:2]]
    ticks = torch.stack([getattr(cars, name) for name in INT_FIELDS[2:]], -1).reshape(-1, 2).contiguous()
    demo_kernel[programs(n)](
        rows, *ints, ticks, tick, twin.spawn_rows(arena.world.game.respawn_spawns), n, twin.seed_word(77),
        arena.world.params.tick_time, arena.world.params.car_spawn_boost_amount, BLUE=blue, NUM_CARS=3, BLOCK=BLOCK,
    )  # fmt: skip
    unpack_cars_(rows, cars)
    for name, value in zip(INT_FIELDS, ints + list(ticks.reshape(n, 3, 2).unbind(-1))):
        setattr(cars, name, value)
    for name in CarState.FIELDS:
        assert torch.equal(getattr(cars, name), getattr(expected, name)), name
