"""`kernels/car_car.py` and `kernels/car_bump.py` against the references: every pair's box-box
manifold in random games (cars crowded round one spot), then the bump and demolition rule over it,
under each demo mode."""

from __future__ import annotations

import pytest
import torch

from nitro.envs.soccar import car_bump as reference
from nitro.envs.soccar import car_contacts
from nitro.envs.soccar.contacts import CAR_CAR_POINTS, car_pairs
from nitro.envs.soccar.kernels import car_bump as twin
from nitro.envs.soccar.kernels import car_car as pairs_twin
from nitro.envs.soccar.kernels import car_contacts as contacts_twin
from nitro.envs.soccar.kernels.vec import load, scale, store
from nitro.envs.soccar.mutators import MutatorConfig, TickParams
from nitro.envs.soccar.rules import game_config
from tests.envs.soccar.kernels.game_states import car_params, flat, random_game
from tests.envs.soccar.kernels.twins import BLOCK, DEVICE, NORMAL_TOL, REL_TOL, assert_close, assert_same, programs, runnable

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable
LOCAL_TOL = 4e-5
"""BT: contact points, from positions at up to ~100 BT (5,000 UU; an ulp 7.6e-6): a few ulps."""


@triton.jit
def load_state(ptrs, row, live):
    pos_ptr, vel_ptr, rot_ptr, ground_ptr, ss_ptr, id_ptr, cd_ptr, demoed_ptr, timer_ptr, cache_ptr = ptrs
    rot = (load(rot_ptr + row * 9, live, (1.0, 0.0, 0.0)), load(rot_ptr + row * 9 + 3, live, (0.0, 1.0, 0.0)))
    rot = rot + (load(rot_ptr + row * 9 + 6, live, (0.0, 0.0, 1.0)),)
    return (
        load(pos_ptr + row * 3, live, (0.0, 0.0, 0.0)), load(vel_ptr + row * 3, live, (0.0, 0.0, 0.0)), rot,
        tl.load(ground_ptr + row, mask=live, other=0) != 0, tl.load(ss_ptr + row, mask=live, other=0) != 0,
        tl.load(id_ptr + row, mask=live, other=0), tl.load(cd_ptr + row, mask=live, other=0.0),
        tl.load(demoed_ptr + row, mask=live, other=0) != 0, tl.load(timer_ptr + row, mask=live, other=0.0),
        load(cache_ptr + row * 3, live, (0.0, 0.0, 0.0)),
    )  # fmt: skip


@triton.jit
def bump_kernel(
    pos_ptr, vel_ptr, rot_ptr, ground_ptr, ss_ptr, id_ptr, cd_ptr, demoed_ptr, timer_ptr, cache_ptr,
    hitbox_ptr, points_ptr, count_ptr, bumped_ptr, demoed_by_ptr, n, demo_mode, enable_team_demos,
    bump_force_scale, bump_cooldown_time, respawn_delay,
    BLUE: tl.constexpr, NUM_CARS: tl.constexpr, POINTS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    ptrs = (pos_ptr, vel_ptr, rot_ptr, ground_ptr, ss_ptr, id_ptr, cd_ptr, demoed_ptr, timer_ptr, cache_ptr)
    states = ()
    for c in tl.static_range(NUM_CARS):
        states = states + (load_state(ptrs, lane * NUM_CARS + c, live),)
    contacts = ()
    for a in tl.static_range(NUM_CARS):
        for b in tl.static_range(a + 1, NUM_CARS):
            sa = states[a]
            sb = states[b]
            added, local_b, local_a, held, normal, on_b, on_a, depth = pairs_twin.car_car_contacts(
                scale(sa[0], 0.02), sa[2], contacts_twin.load_box(hitbox_ptr, a),
                scale(sb[0], 0.02), sb[2], contacts_twin.load_box(hitbox_ptr, b),
            )  # fmt: skip
            both = (~sa[7]) & (~sb[7])
            held = tl.where(both, held, 0)
            pair = a * NUM_CARS - a * (a + 1) // 2 + (b - a - 1)  # `contacts.car_pairs` order
            tl.store(count_ptr + lane * (NUM_CARS * (NUM_CARS - 1) // 2) + pair, held, mask=live)
            forward = ()
            for k in tl.static_range(POINTS):
                base = points_ptr + ((lane * (NUM_CARS * (NUM_CARS - 1) // 2) + pair) * POINTS + k) * 17
                is_added = both & added[k]
                tl.store(base, is_added.to(tl.float32), mask=live)
                store(base + 1, local_a[k], live)
                store(base + 4, local_b[k], live)
                store(base + 7, on_b[k], live)
                store(base + 10, on_a[k], live)
                store(base + 13, normal, live)
                tl.store(base + 16, depth[k], mask=live)
                forward = forward + ((is_added, local_a[k][0] * 50.0, local_b[k][0] * 50.0),)
            hit_ab, hit_ba = twin.pair_bumps(
                sa, sb, (a < BLUE) == (b < BLUE), demo_mode, enable_team_demos,
                bump_force_scale,
            )  # fmt: skip
            contacts = contacts + ((forward, hit_ab, hit_ba),)
    states, bumped_by, demoed_by = twin.on_car_car_collision(
        states, contacts, bump_cooldown_time, respawn_delay, NUM_CARS, POINTS
    )
    for c in tl.static_range(NUM_CARS):
        row = lane * NUM_CARS + c
        s = states[c]
        tl.store(id_ptr + row, s[5], mask=live)
        tl.store(cd_ptr + row, s[6], mask=live)
        tl.store(demoed_ptr + row, s[7].to(tl.int8), mask=live)
        tl.store(timer_ptr + row, s[8], mask=live)
        store(cache_ptr + row * 3, s[9], live)
        tl.store(bumped_ptr + row, bumped_by[c], mask=live)
        tl.store(demoed_by_ptr + row, demoed_by[c], mask=live)


MUTATORS = {
    "default": MutatorConfig(),
    "on contact": MutatorConfig(demo_mode="on_contact", bump_force_scale=1.5),
    "disabled, team demos": MutatorConfig(demo_mode="disabled", enable_team_demos=True, bump_cooldown_time=0.0),
}


@pytest.mark.parametrize(
    "blue, orange, mutators", [(1, 1, "default"), (2, 2, "on contact"), (2, 1, "disabled, team demos")]
)
def test_bumps_match_the_reference(blue, orange, mutators):
    mutators = MUTATORS[mutators]
    n, num_cars = 128, blue + orange
    _, cars, _ = random_game(n, num_cars, seed=20 + num_cars)
    params = car_params(num_cars)
    tick = TickParams.from_mutators(mutators, float(torch.tensor(1 / 120, dtype=torch.float32)))
    game = game_config(blue, orange, 0, False, torch.device(DEVICE))
    frozen = cars.is_demoed
    found = car_contacts.car_car_contacts(cars, params, frozen)
    contacts = found.touches()
    expected, expected_bumped, expected_demoed = reference.on_car_car_collision(cars, contacts, game, tick)

    fields = ("pos", "vel", "rot_mat", "is_on_ground", "is_supersonic", "car_contact_id", "car_contact_cooldown_timer",
              "is_demoed", "demo_respawn_timer", "velocity_impulse_cache")  # fmt: skip
    buffers = [flat(getattr(cars, f).clone()) for f in fields]
    pairs = len(car_pairs(num_cars))
    points = torch.zeros(n, pairs, CAR_CAR_POINTS, 17, device=DEVICE)
    count = torch.zeros(n, pairs, dtype=torch.int32, device=DEVICE)
    bumped = torch.zeros(n, num_cars, dtype=torch.int32, device=DEVICE)
    demoed_by = torch.zeros_like(bumped)
    bump_kernel[programs(n)](
        *buffers, contacts_twin.hitbox_table(params), points, count, bumped, demoed_by, n,
        tick.demo_mode, int(tick.enable_team_demos), tick.bump_force_scale, tick.bump_cooldown_time,
        tick.respawn_delay, BLUE=blue, NUM_CARS=num_cars, POINTS=CAR_CAR_POINTS, BLOCK=BLOCK,
    )  # fmt: skip
    # the detector's points, as the callbacks read them (BT)
    same = assert_same(points[..., 0].bool(), found.added)
    assert bool(found.added.any())
    added = found.added.cpu() & same[:, None, None]
    assert_close(points[..., 1:4][added], found.local_point_a[added], atol=LOCAL_TOL)
    assert_close(points[..., 4:7][added], found.local_point_b[added], atol=LOCAL_TOL)
    # the manifold after the refresh: the held points (on both cars), the normal, the depths
    same = assert_same(count.long(), found.count)
    held = (torch.arange(CAR_CAR_POINTS) < found.count.cpu()[..., None]) & same[:, None, None]
    assert bool(held.any())
    assert_close(points[..., 7:10][held], found.point_on_b[held], atol=LOCAL_TOL)
    assert_close(points[..., 10:13][held], found.point_on_a[held], atol=LOCAL_TOL)
    assert_close(points[..., 13:16][held], found.normal[held], atol=NORMAL_TOL)
    assert_close(points[..., 16][held], found.depth[held], atol=LOCAL_TOL)
    assert_same(bumped, expected_bumped)
    assert_same(demoed_by, expected_demoed)
    assert bool((expected_bumped >= 0).any() or (expected_demoed >= 0).any())
    assert_same(buffers[5], expected.car_contact_id)
    assert_same(buffers[7].bool(), expected.is_demoed)
    assert_close(buffers[6], expected.car_contact_cooldown_timer, atol=0.0)
    assert_close(buffers[8], expected.demo_respawn_timer, atol=0.0)
    assert_close(buffers[9], expected.velocity_impulse_cache, atol=1e-3, rtol=REL_TOL)
