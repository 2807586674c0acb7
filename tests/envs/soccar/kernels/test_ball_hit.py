"""`kernels/ball_hit.py` and `kernels/car_contacts.py`'s car-ball part against the references: the
ball's contacts with every car of random games, and Ball::_OnHit's extra velocity and hit info."""

from __future__ import annotations

import pytest
import torch

from nitro.envs.soccar import ball_hit as reference
from nitro.envs.soccar import car_contacts
from nitro.envs.soccar.kernels import ball_hit as twin
from nitro.envs.soccar.kernels import car_contacts as contacts_twin
from nitro.envs.soccar.kernels.vec import load, store
from nitro.envs.soccar.mutators import MutatorConfig, TickParams
from tests.envs.soccar.kernels.game_states import car_params, flat, random_game
from tests.envs.soccar.kernels.twins import BLOCK, DEVICE, REL_TOL, assert_close, assert_same, programs, runnable

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable
PARAMS = TickParams.from_mutators(MutatorConfig(ball_hit_extra_force_scale=1.5), float(torch.tensor(1 / 120, dtype=torch.float32)))
REL_POS_TOL = 1e-3
"""UU: the contact point on the ball, ~91 UU from its centre, through two rotations in Bullet units
(a few ulps of positions up to ~5,000 UU: 5e-4 each)."""


@triton.jit
def hits_kernel(
    ball_pos_ptr, ball_vel_ptr, pos_ptr, rot_ptr, vel_ptr, frozen_ptr, hitbox_ptr,
    valid_ptr, rel_ptr, hit_ball_ptr, extra_ptr, when_hit_ptr, when_applied_ptr, tick_ptr,
    cache_ptr, is_hit_ptr, n, ball_contact_gap, ball_radius, scale,
    NUM_CARS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    ball_pos = load(ball_pos_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    ball_vel = load(ball_vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    cache = load(cache_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    tick = tl.load(tick_ptr + lane, mask=live, other=0)
    for c in tl.static_range(NUM_CARS):
        row = lane * NUM_CARS + c
        pos = load(pos_ptr + row * 3, live, (0.0, 0.0, 0.0))
        rot = (load(rot_ptr + row * 9, live, (1.0, 0.0, 0.0)), load(rot_ptr + row * 9 + 3, live, (0.0, 1.0, 0.0)))
        rot = rot + (load(rot_ptr + row * 9 + 6, live, (0.0, 0.0, 1.0)),)
        vel = load(vel_ptr + row * 3, live, (0.0, 0.0, 0.0))
        frozen = tl.load(frozen_ptr + row, mask=live, other=0) != 0
        is_hit, rel, _, _, _, _ = contacts_twin.car_ball_contacts(
            ball_pos, pos, rot, contacts_twin.load_hitbox(hitbox_ptr, c), ball_contact_gap, ball_radius, frozen
        )
        info = (
            tl.load(valid_ptr + row, mask=live, other=0) != 0,
            load(rel_ptr + row * 3, live, (0.0, 0.0, 0.0)),
            load(hit_ball_ptr + row * 3, live, (0.0, 0.0, 0.0)),
            load(extra_ptr + row * 3, live, (0.0, 0.0, 0.0)),
            tl.load(when_hit_ptr + row, mask=live, other=0),
            tl.load(when_applied_ptr + row, mask=live, other=0),
        )
        added, info = twin.on_hit(
            is_hit, rel, ball_pos, ball_vel, pos, vel, (rot[0][0], rot[1][0], rot[2][0]), info, tick, scale
        )
        cache = (cache[0] + added[0], cache[1] + added[1], cache[2] + added[2])
        tl.store(is_hit_ptr + row, is_hit.to(tl.int8), mask=live)
        tl.store(valid_ptr + row, info[0].to(tl.int8), mask=live)
        store(rel_ptr + row * 3, info[1], live)
        store(hit_ball_ptr + row * 3, info[2], live)
        store(extra_ptr + row * 3, info[3], live)
        tl.store(when_hit_ptr + row, info[4], mask=live)
        tl.store(when_applied_ptr + row, info[5], mask=live)
    store(cache_ptr + lane * 3, cache, live)


@pytest.mark.parametrize("num_cars", [1, 4])
def test_ball_hits_match_the_reference(num_cars):
    n = 256
    ball, cars, _ = random_game(n, num_cars, seed=10 + num_cars)
    params = car_params(num_cars)
    tick = torch.randint(0, 60, (n,), generator=torch.Generator().manual_seed(3)).to(DEVICE)
    frozen = cars.is_demoed
    hits = car_contacts.car_ball_contacts(ball.pos, cars, params, frozen, PARAMS).hits()
    ball_vel = ball.vel * PARAMS.ball_damping
    expected_ball, expected = reference.on_hit(ball, ball_vel, cars, hits, tick, PARAMS)

    fields = ("is_valid", "relative_pos_on_ball", "ball_pos", "extra_hit_vel", "tick_count_when_hit",
              "tick_count_when_extra_impulse_applied")  # fmt: skip
    info = [flat(getattr(cars, "ball_hit_info_" + f).clone()) for f in fields]
    cache = ball.velocity_impulse_cache.clone().contiguous()
    is_hit = torch.zeros(n, num_cars, dtype=torch.int8, device=DEVICE)
    hits_kernel[programs(n)](
        flat(ball.pos), flat(ball_vel), flat(cars.pos), flat(cars.rot_mat), flat(cars.vel), flat(frozen),
        contacts_twin.hitbox_table(params), *info, flat(tick), cache, is_hit, n,
        PARAMS.ball_contact_gap, PARAMS.ball_radius, PARAMS.ball_hit_extra_force_scale,
        NUM_CARS=num_cars, BLOCK=BLOCK,
    )  # fmt: skip
    same = assert_same(is_hit.bool(), hits.is_hit)
    assert bool(hits.is_hit.any()) and bool((~hits.is_hit).any())
    assert_same(info[0].bool(), expected.ball_hit_info_is_valid)
    assert_same(info[4], expected.ball_hit_info_tick_count_when_hit)
    assert_same(info[5], expected.ball_hit_info_tick_count_when_extra_impulse_applied)
    assert_close(info[1], expected.ball_hit_info_relative_pos_on_ball, atol=REL_POS_TOL, rows=same)
    assert_close(info[2], expected.ball_hit_info_ball_pos, atol=0.0, rows=same)
    assert_close(info[3], expected.ball_hit_info_extra_hit_vel, atol=1e-3, rtol=REL_TOL, rows=same)
    assert_close(cache, expected_ball.velocity_impulse_cache, atol=1e-3, rtol=REL_TOL, rows=same)
