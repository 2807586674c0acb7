"""`kernels/boost_pads.py` against `boost_pads.py`: one tick of every pad of random games (cars over
pads, full of boost, demolished, above the grid; pads cooling down, locked to a car)."""

from __future__ import annotations

import pytest
import torch

from nitro.envs.soccar import boost_pads as reference
from nitro.envs.soccar.kernels import boost_pads as twin
from nitro.envs.soccar.kernels.vec import load, load_uniform
from nitro.envs.soccar.mutators import MutatorConfig, TickParams
from nitro.envs.soccar.state import BoostPadConfig
from tests.envs.soccar.kernels.game_states import car_params, flat, random_game
from tests.envs.soccar.kernels.twins import BLOCK, DEVICE, assert_close, assert_same, programs, runnable

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable
PARAMS = TickParams.from_mutators(MutatorConfig(), float(torch.tensor(1 / 120, dtype=torch.float32)))


@triton.jit
def pads_kernel(
    pos_ptr, rot_ptr, boost_ptr, demoed_ptr, local_ptr, pad_table_ptr, pad_cells_ptr, active_ptr, cooldown_ptr, locked_ptr,
    aabb_ptr, out_boost_ptr, pickup_ptr, n, tick_time, cooldown_big, cooldown_small,
    NUM_CARS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    cars_pad = ()
    for c in tl.static_range(NUM_CARS):
        row = lane * NUM_CARS + c
        pos = load(pos_ptr + row * 3, live, (0.0, 0.0, 0.0))
        rot = (load(rot_ptr + row * 9, live, (1.0, 0.0, 0.0)), load(rot_ptr + row * 9 + 3, live, (0.0, 1.0, 0.0)))
        rot = rot + (load(rot_ptr + row * 9 + 6, live, (0.0, 0.0, 1.0)),)
        lo, hi = twin.car_aabb(pos, rot, load_uniform(local_ptr + c * 6), load_uniform(local_ptr + c * 6 + 3))
        boost = tl.load(boost_ptr + row, mask=live, other=0.0)
        tested = twin.tested(pos, tl.load(demoed_ptr + row, mask=live, other=0) != 0, boost)
        cars_pad = cars_pad + (twin.car_pad_tests(twin.pad_near(pad_cells_ptr, pos, live), pad_table_ptr, pos, lo, hi, tested),)
        for i in tl.static_range(3):
            tl.store(aabb_ptr + row * 6 + i, lo[i], mask=live)
            tl.store(aabb_ptr + row * 6 + 3 + i, hi[i], mask=live)
    given = ()
    pickup_pad = ()
    for c in tl.static_range(NUM_CARS):
        given = given + (tl.zeros([BLOCK], dtype=tl.float32),)
        pickup_pad = pickup_pad + (tl.full([BLOCK], -1, tl.int32),)
    for p in tl.static_range(34):
        is_big = twin.load_pad(pad_table_ptr, p)[1]
        cooldown = tl.load(cooldown_ptr + lane * 34 + p, mask=live, other=0.0)
        prev = tl.load(locked_ptr + lane * 34 + p, mask=live, other=0)
        is_active, cooldown = twin.pre_tick_update(cooldown, tick_time)
        locked = twin.check_collision(prev, p, cars_pad, NUM_CARS)
        is_active, cooldown, prev, pickup, amount = twin.post_tick_update(
            is_active, cooldown, locked, is_big, cooldown_big, cooldown_small
        )
        new_given = ()
        new_pad = ()
        for c in tl.static_range(NUM_CARS):
            new_given = new_given + (given[c] + tl.where(pickup == c + 1, amount, 0.0),)
            new_pad = new_pad + (tl.where(pickup == c + 1, p, pickup_pad[c]),)
        given = new_given
        pickup_pad = new_pad
        tl.store(active_ptr + lane * 34 + p, is_active.to(tl.int8), mask=live)
        tl.store(cooldown_ptr + lane * 34 + p, cooldown, mask=live)
        tl.store(locked_ptr + lane * 34 + p, prev, mask=live)
    for c in tl.static_range(NUM_CARS):
        boost = tl.load(boost_ptr + lane * NUM_CARS + c, mask=live, other=0.0)
        tl.store(out_boost_ptr + lane * NUM_CARS + c, twin.give_boost(boost, given[c]), mask=live)
        tl.store(pickup_ptr + lane * NUM_CARS + c, pickup_pad[c], mask=live)


@pytest.mark.parametrize("num_cars", [2, 6])
def test_pads_match_the_reference(num_cars):
    n = 256
    _, cars, pads = random_game(n, num_cars, seed=num_cars)
    params = car_params(num_cars)
    config = BoostPadConfig.soccar(torch.device(DEVICE))
    # the reference's tick: pre-tick, then (after the physics) the pickups
    after = reference.pre_tick_update(pads, PARAMS)
    locked = reference.check_collision(after, cars, params, config)
    expected_pads, expected_cars, expected_pickup = reference.post_tick_update(after, cars, locked, config, PARAMS)
    lo, hi = reference.car_aabb(cars, params)

    active = torch.zeros(n, 34, dtype=torch.int8, device=DEVICE)
    cooldown, prev = pads.cooldown.clone(), pads.prev_locked_car_id.clone()
    aabb = torch.zeros(n, num_cars, 6, device=DEVICE)
    boost = torch.zeros(n, num_cars, device=DEVICE)
    pickup = torch.zeros(n, num_cars, dtype=torch.int32, device=DEVICE)
    local = torch.cat((params.hitbox.local_min, params.hitbox.local_max), 1).contiguous()
    pads_kernel[programs(n)](
        flat(cars.pos), flat(cars.rot_mat), flat(cars.boost), flat(cars.is_demoed), local,
        twin.pad_table(config), twin.pad_cells(config, params.hitbox), active, cooldown, prev, aabb, boost, pickup, n, PARAMS.tick_time,
        PARAMS.boost_pad_cooldown_big, PARAMS.boost_pad_cooldown_small, NUM_CARS=num_cars, BLOCK=BLOCK,
    )  # fmt: skip
    assert_close(aabb[..., :3], lo, atol=1e-5)  # BT: a few ulps of ~100 BT
    assert_close(aabb[..., 3:], hi, atol=1e-5)
    assert_same(prev, expected_pads.prev_locked_car_id)
    assert_same(active.bool(), expected_pads.is_active)
    assert_close(cooldown, expected_pads.cooldown, atol=0.0)
    assert_same(pickup, expected_pickup)
    assert_close(boost, expected_cars.boost, atol=0.0)
    assert bool((expected_pickup >= 0).any()) and bool((locked > 0).any())  # the sample picks pads up


