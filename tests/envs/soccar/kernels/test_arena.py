"""`kernels/arena.py`'s fused K-tick kernel against its PyTorch twin, with cars: the cars of
`car_states.sample_cars` (every scenario family, hidden state included) in 1v0 and 1v1 arenas, the
ball flying beside them, stepped by the fused kernel and by `stand_in_tick` (the reference's stages
as the fused kernel runs them) from the same state; and car bodies against every part of the arena.
(The ball-only fused tick is checked on the parity throws by tests/envs/soccar/test_kernels.py.)"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from nitro.core import tree
from nitro.envs.soccar import car_contacts
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.kernels import arena as arena_kernels
from nitro.envs.soccar.kernels import car_contacts as car_contacts_kernels
from nitro.envs.soccar.kernels import constexpr
from nitro.envs.soccar.kernels.arena import launch_step_ticks_
from nitro.envs.soccar.kernels.car_contacts import hitbox_table
from nitro.envs.soccar.kernels.vec import chunk_rows, load
from nitro.envs.soccar.state import ArenaEvents, CarState
from tests.envs.soccar.kernels.car_states import assert_cars_close, sample_cars, wheels_on_bodies
from tests.envs.soccar.kernels.game_states import random_game
from tests.envs.soccar.kernels.stand_in_tick import stand_in_step_ticks
from tests.envs.soccar.kernels.test_car_ball import random_rotations
from tests.envs.soccar.kernels.twins import DEVICE, INTERPRETED, exact_sqrt, runnable

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable
BALL_POS_TOL = 2e-3
"""UU: a flying ball after two ticks (the ball twins' own position tolerance)."""
ENVS = 32
"""Envs per test: one program of the Arena's fused launch (on the interpreter a program's tick takes
seconds); their cars are spread over the sample (all families, several ticks each)."""


def regroup(cars: CarState, envs: int, per_env: int, rows=slice(None)) -> CarState:
    """[n, 1, ...] cars (their ``rows``) as [envs, per_env, ...]: env e holds cars e * per_env ..."""
    fields = {}
    for name in CarState.FIELDS:
        value = getattr(cars, name)[rows]
        fields[name] = value.reshape(envs, per_env, *value.shape[2:]).contiguous()
    return CarState(**fields)


@pytest.mark.parametrize(("blue", "orange", "launches"), [(1, 0, (2,)), (1, 1, (1,))])
def test_fused_ticks_with_cars(blue, orange, launches):
    """``launches`` kernel launches of K ticks each (controls held) equal as many PyTorch ticks."""
    sample = sample_cars()
    per_env = blue + orange
    envs, cars = ENVS, ENVS * per_env
    rows = torch.arange(cars) * (len(sample.cars.pos) // cars)
    arena = Arena(envs, blue=blue, orange=orange, device=DEVICE)
    g = torch.Generator().manual_seed(2)
    # the ball in flight high above the field, where its contact queries are cheap
    arena.set_ball(
        pos=(torch.rand(envs, 3, generator=g) * torch.tensor([4000.0, 6000.0, 400.0]) - torch.tensor([2000.0, 3000.0, -800.0])).to(DEVICE),
        vel=(torch.randn(envs, 3, generator=g) * 500).to(DEVICE),
    )  # fmt: skip
    expected = dataclasses.replace(
        arena.state,
        cars=tree.to(regroup(sample.cars, envs, per_env, rows), DEVICE),
        tick_count=sample.tick_count[rows[::per_env]].to(DEVICE),  # some 0: the solver's default time step
    )
    fused = tree.clone(expected)  # the fused kernel updates its state in place
    controls = sample.controls[rows].reshape(envs, per_env, 8).contiguous().to(DEVICE)
    for ticks in launches:
        events = ArenaEvents.none(envs, per_env, DEVICE)
        launch_step_ticks_(fused, events, controls, arena.world, ticks)  # the Arena's own launch
        expected, expected_events = stand_in_step_ticks(
            expected, ArenaEvents.none(envs, per_env, DEVICE), controls, arena.world, ticks
        )
        assert torch.equal(events.goal_tick.cpu(), expected_events.goal_tick.cpu())
    assert_cars_close(regroup(fused.cars, cars, 1), regroup(expected.cars, cars, 1))
    assert torch.equal(fused.tick_count.cpu(), expected.tick_count.cpu())
    assert float((fused.ball.pos - expected.ball.pos).norm(dim=1).max()) <= BALL_POS_TOL


@pytest.mark.parametrize(
    "per_program_up_to, pairs_per_car, pair_slots", [(None, None, None), (0, None, None), (0, 1e-9, None), (0, None, 1)],
    ids=["car per program", "car per lane", "car per lane, pairs beyond the list", "car per lane, one pair per car"],
)
def test_fused_ticks_with_body_contacts(monkeypatch, per_program_up_to, pairs_per_car, pair_slots):
    """Car bodies against every part of the arena (`test_car_world.body_scenes`: floor, ceiling, walls,
    corners, goals, ramps; any orientation, moving): two launches of a tick equal two PyTorch ticks,
    the body's contacts and their solve included, with the car step's second pass taking one car per
    program (small batches) and one per lane (large batches, `CAR_PER_PROGRAM_UP_TO`), its contact
    points found pair by pair (`car_world_pairs_kernel`); with a list of room for one pair, every other
    car walks its cell in its lane, and so does a car with more near triangles than its slots (one
    slot: the places its other pairs took in the list stay unread)."""
    from tests.envs.soccar.kernels.test_car_world import body_scenes

    if per_program_up_to is not None:
        monkeypatch.setattr(arena_kernels, "CAR_PER_PROGRAM_UP_TO", per_program_up_to)
    if pairs_per_car is not None:
        monkeypatch.setattr(arena_kernels, "WORLD_PAIRS_PER_CAR", pairs_per_car)
    if pair_slots is not None:
        if not INTERPRETED:  # a compiled kernel keeps the constant it was compiled with
            pytest.skip("PAIR_SLOTS is patched under Triton's interpreter only, which reads it at each call")
        monkeypatch.setattr(car_contacts_kernels, "PAIR_SLOTS", constexpr(pair_slots))

    arena = Arena(ENVS, blue=1, orange=0, device=DEVICE)
    arena.set_ball(pos=torch.tensor([0.0, 0.0, 1500.0], device=DEVICE))  # out of the cars' way
    pos, rot, vel, ang_vel = body_scenes(ENVS, 5)
    arena.set_car(0, pos=pos.to(DEVICE), rot_mat=rot.to(DEVICE), vel=vel.to(DEVICE), ang_vel=ang_vel.to(DEVICE),
                  is_on_ground=torch.zeros(ENVS, dtype=torch.bool, device=DEVICE))  # fmt: skip
    expected = tree.clone(arena.state)
    fused = tree.clone(arena.state)
    controls = torch.zeros(ENVS, 1, 8, device=DEVICE)
    touched = torch.zeros(ENVS, dtype=torch.bool)
    for _ in range(2):
        launch_step_ticks_(fused, ArenaEvents.none(ENVS, 1, DEVICE), controls, arena.world, 1)
        expected, _ = stand_in_step_ticks(expected, ArenaEvents.none(ENVS, 1, DEVICE), controls, arena.world, 1)
        touched |= expected.cars.has_world_contact[:, 0].cpu()
    assert int(touched.sum()) >= ENVS // 3  # the bodies do touch the arena
    assert_cars_close(regroup(fused.cars, ENVS, 1), regroup(expected.cars, ENVS, 1))


@pytest.mark.parametrize("per_program_up_to", [None, 0], ids=["car per program", "car per lane"])
def test_fused_ticks_with_wheels_on_bodies(monkeypatch, per_program_up_to):
    """Wheels on the other car and on the ball (`car_states.wheels_on_bodies`: cars on cars' roofs, on a
    demolished car, dropping onto a rolling ball): a launch of two ticks equals two PyTorch ticks, the
    rays against the bodies and the friction against them included, the cars' tick-start rows read
    from the buffer the other tick wrote; with the pre-tick's second pass taking one car per program,
    its wheels' casts side by side (small batches), and one car per lane (`CAR_PER_PROGRAM_UP_TO`).

    The reference runs with IEEE's sqrt (`twins.exact_sqrt`, as the interpreter computes it):
    PyTorch's CPU sqrt can be an ulp off, which moves a ray's hit on the ball by up to 0.01 BT."""
    if per_program_up_to is not None:
        monkeypatch.setattr(arena_kernels, "CAR_PER_PROGRAM_UP_TO", per_program_up_to)
    state = tree.to(wheels_on_bodies(ENVS, seed=4).state, DEVICE)  # drawn on the CPU, then moved
    world = Arena(ENVS, blue=1, orange=1, seed=4, device=DEVICE).world
    expected = tree.clone(state)
    fused = tree.clone(state)
    g = torch.Generator().manual_seed(3)
    controls = torch.rand(ENVS, 2, 8, generator=g) * 2 - 1
    controls[..., 5:] = 0.0  # no jumps, boost or handbrake: the wheels stay on the bodies
    controls = controls.to(DEVICE)
    launch_step_ticks_(fused, ArenaEvents.none(ENVS, 2, DEVICE), controls, world, 2)
    with monkeypatch.context() as patch:
        patch.setattr(torch, "sqrt", exact_sqrt)
        after_one, _ = stand_in_step_ticks(expected, ArenaEvents.none(ENVS, 2, DEVICE), controls, world, 1)
        expected, _ = stand_in_step_ticks(after_one, ArenaEvents.none(ENVS, 2, DEVICE), controls, world, 1)
    on_body = after_one.cars.wheels_with_contact | expected.cars.wheels_with_contact
    assert int(on_body.sum()) > ENVS * 4  # the wheels do touch
    assert_cars_close(regroup(fused.cars, ENVS * 2, 1), regroup(expected.cars, ENVS * 2, 1))
    assert float((fused.ball.pos - expected.ball.pos).norm(dim=1).max()) <= BALL_POS_TOL


@triton.jit
def _bodies_near_kernel(ball_pos_ptr, car_rows_ptr, hitbox_table_ptr, out_ptr, pairs_ptr, n, ball_radius,
                        NUM_CARS: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    lane, live, _ = arena_kernels.env_lanes(n, BLOCK)
    ball_pos = load(ball_pos_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    near, pairs = arena_kernels.bodies_near(
        ball_pos, car_rows_ptr, hitbox_table_ptr, lane, live, ball_radius, NUM_CARS, BLOCK
    )
    tl.store(out_ptr + lane, near.to(tl.int32), mask=live)
    tl.store(pairs_ptr + lane, pairs, mask=live)


def test_envs_whose_bodies_are_apart_meet_nothing():
    """`collisions_kernel`'s first pass finishes the envs whose bodies are apart (`bodies_near` false)
    without their contacts: wherever the reference finds a car-ball contact or a point between two
    cars, `bodies_near` holds. 2v1 arenas of three presets, the bodies scattered within a few car
    lengths of each other in random orientations, so that some touch, some nearly do and some are apart;
    in half the envs the ball within a UU or two of a corner of a car's box, the bound's tightest case.
    The bound is tight: fewer than 1.6 envs near for each env with contacts (by the cars' origins alone,
    1.8). So is its bound for each pair (`car_pairs_kernel` takes only those): every pair with points
    between its cars may meet, fewer than 2 pairs for each pair with points."""
    envs, presets = 2048, ["octane", "plank", "breakout"]
    arena = Arena(envs, blue=2, orange=1, car=presets, device="cpu")
    g = torch.Generator().manual_seed(5)
    pos = torch.rand(envs, 3, 3, generator=g) * torch.tensor([1000.0, 1000.0, 250.0]) + torch.tensor([0.0, 0.0, 20.0])
    rot_mat = random_rotations(np.random.default_rng(5), envs * 3).reshape(envs, 3, 3, 3)
    cars = dataclasses.replace(arena.state.cars, pos=pos, rot_mat=rot_mat)
    ball_pos = torch.rand(envs, 3, generator=g) * torch.tensor([1000.0, 1000.0, 250.0]) + torch.tensor([0.0, 0.0, 92.0])
    world = arena.world
    # in half the envs the ball by a corner of car 0's box, where the box's bounding sphere is tightest
    box = world.cars.hitbox
    corner = (torch.randint(0, 2, (envs, 3), generator=g) * 2 - 1) * (box.inner[0] + box.margin[0])  # BT
    centre = pos[:, 0] + torch.einsum("nij,j->ni", rot_mat[:, 0], box.offset[0]) * C.BT_TO_UU
    out = torch.einsum("nij,nj->ni", rot_mat[:, 0], corner)
    reach = corner.norm(dim=1, keepdim=True) * C.BT_TO_UU + world.params.ball_radius
    by_corner = centre + out / out.norm(dim=1, keepdim=True) * (reach + torch.rand(envs, 1, generator=g) * 3 - 1)
    ball_pos = torch.where(torch.arange(envs)[:, None] % 2 == 0, by_corner, ball_pos)
    frozen = torch.zeros(envs, 3, dtype=torch.bool)
    touched = car_contacts.car_ball_contacts(ball_pos, cars, world.cars, frozen, world.params).touched.any(1)
    each_pair = car_contacts.car_car_contacts(cars, world.cars, frozen).added.reshape(envs, 3, -1).any(2)
    pair_points = each_pair.any(1)
    rows = torch.zeros(envs * 3, arena_kernels.CAR_WIDTH.value)
    rows[:, :3] = pos.reshape(-1, 3)
    rows[:, 3:12] = rot_mat.reshape(-1, 9)
    near = torch.zeros(envs, dtype=torch.int32, device=DEVICE)
    pairs = torch.zeros(envs, dtype=torch.int32, device=DEVICE)
    _bodies_near_kernel[(triton.cdiv(envs, 32),)](
        ball_pos.to(DEVICE), chunk_rows(rows, 3).to(DEVICE), hitbox_table(world.cars).to(DEVICE), near, pairs, envs,
        float(world.params.ball_radius), NUM_CARS=3, BLOCK=32,
    )  # fmt: skip
    near = near.cpu() != 0
    pairs_near = (pairs.cpu()[:, None] >> torch.arange(3)) & 1 != 0  # the pairs in `car_pairs` order
    assert bool(pairs_near[each_pair].all()), f"{int((each_pair & ~pairs_near).sum())} pairs with points taken as apart"
    assert int(each_pair.sum()) >= 64 and int(pairs_near.sum()) < 2 * int(each_pair.sum())
    assert not bool((pairs_near.any(1) & ~near).any())
    met = touched | pair_points
    assert int(met.sum()) >= envs // 8 and int((~near).sum()) >= envs // 8  # contacts, and envs apart
    assert bool(near[met].all()), f"{int((met & ~near).sum())} envs with contacts taken as apart"
    assert int(near.sum()) < 1.6 * int(met.sum())


@triton.jit
def _spread_lanes_kernel(out_ptr, listed, n, spread_programs, BLOCK: tl.constexpr):
    first, stop, step = arena_kernels.list_places(listed, n, spread_programs, 1, BLOCK)
    for q in range(first, stop, step):
        at, live = arena_kernels.spread_lanes(listed, q, n, spread_programs, BLOCK)
        tl.store(out_ptr + q * BLOCK + tl.arange(0, BLOCK), tl.where(live, at, -1))


@pytest.mark.parametrize("listed, n, spread_programs, launched", [
    (0, 100, 8, 4), (5, 100, 8, 4), (5, 100, 2, 4), (40, 100, 8, 4), (100, 100, 8, 4), (70, 1000, 8, 32),
    (300, 1000, 8, 32), (7, 31, 64, 1), (300, 1000, 8, 3), (1000, 1000, 2, 5), (5, 1000, 8, 2),
])  # fmt: skip
def test_a_lists_pass_takes_each_entry_once(listed, n, spread_programs, launched):
    """`list_places` and `spread_lanes`: the ``launched`` programs of a list's pass (at most cdiv(n, 32),
    `LIST_PROGRAMS`), each taking its places in turn, take each of its ``listed`` entries once, over at
    least min(listed, spread_programs, cdiv(n, 32)) places, at most 32 to a place, and every place they
    take holds an entry."""
    places = triton.cdiv(n, 32)
    out = torch.full((places * 32,), -2, dtype=torch.int32, device=DEVICE)
    _spread_lanes_kernel[(launched,)](out, listed, n, spread_programs, BLOCK=32)
    taken = out.cpu().reshape(places, 32)
    assert sorted(taken[taken >= 0].tolist()) == list(range(listed))
    busy = int((taken >= 0).any(1).sum())
    assert busy >= min(listed, spread_programs, places) and busy >= triton.cdiv(listed, 32)
    assert int((taken > -2).any(1).sum()) == busy  # no place without an entry


def test_wheel_rays_longer_than_their_grid_reaches_are_refused(monkeypatch):
    """A world whose longest wheel ray (52.0 UU, the merc's front wheels) reaches beyond the ray grid's
    query radius from its midpoint is refused with the radius to raise, not stepped on lists that could
    miss a triangle."""
    arena = Arena(1, blue=1, orange=0, car="merc", device=DEVICE)
    monkeypatch.setattr(arena_kernels, "RAY_GRID_RADIUS", 25.9)
    with pytest.raises(ValueError, match=r"wheel ray of 52.0 UU reaches 26.0 UU .* RAY_GRID_RADIUS = 25.9"):
        arena_kernels._tables(arena.world, arena_kernels.ball_grid(arena.world))


def test_ints_rows_kernel_packs_and_unpacks_the_game_and_car_ints():
    """`ints_rows_kernel` writes each env's `game_ints` row and each car's `car_ints` row from the state's
    and the events' own fields (hand-placed values, every column its own), and unpacking writes them
    back, with the demo, bump and pickup flags from their attackers and pads; a 3-car arena has more
    car rows than env rows (the lanes beyond either are masked)."""
    from nitro.envs.soccar.kernels.arena import int_fields, int8_view, launch_ints_rows
    from nitro.envs.soccar.state import GameState

    n, cars = 40, 3
    arena = Arena(n, blue=2, orange=1, device=DEVICE)
    state: GameState = arena.state
    events = ArenaEvents.none(n, cars, DEVICE)
    g = torch.Generator().manual_seed(5)

    def ints(shape, low, high, dtype):
        return torch.randint(low, high, shape, generator=g).to(dtype).to(DEVICE)

    state.blue_score.copy_(ints((n,), 0, 9, torch.int32))
    state.orange_score.copy_(ints((n,), 0, 9, torch.int32))
    state.scored_last_tick.copy_(ints((n,), 0, 2, torch.bool))
    state.kickoff_count.copy_(ints((n,), 0, 1 << 40, torch.int64))
    events.goal_tick.copy_(ints((n,), -1, 1 << 40, torch.int64))
    events.goal_blue.copy_(ints((n,), 0, 2, torch.bool))
    events.goal_orange.copy_(ints((n,), 0, 2, torch.bool))
    state.cars.ball_hit_info_tick_count_when_hit.copy_(ints((n, cars), -1, 1 << 40, torch.int64))
    state.cars.ball_hit_info_tick_count_when_extra_impulse_applied.copy_(ints((n, cars), -1, 1 << 40, torch.int64))
    events.ball_touch.copy_(ints((n, cars), 0, 2, torch.bool))
    for name, high in (("demoed_by", cars), ("bumped_by", cars), ("boost_pickup_pad", 34)):
        getattr(events, name).copy_(ints((n, cars), -1, high, torch.int32))
    game = torch.full((n, 8), -7, dtype=torch.int64, device=DEVICE)
    car = torch.full((n * cars, 8), -7, dtype=torch.int64, device=DEVICE)
    launch_ints_rows(int_fields(state, events), game, car, unpack=False)
    goals = events.goal_blue.long() | (events.goal_orange.long() << 1)
    expected_game = [state.blue_score, state.orange_score, state.scored_last_tick, state.kickoff_count,
                     events.goal_tick, goals]  # fmt: skip
    assert torch.equal(game[:, :6], torch.stack([x.long() for x in expected_game], 1))
    pads = state.pads
    pads.cooldown[::3, 5] = 2.0
    pads.prev_locked_car_id[1::3, 33] = 1
    pads.is_active[2::3, 0] = False
    by_pad = [int8_view(pads.is_active).t(), pads.cooldown.t(), pads.prev_locked_car_id.t()]  # [34, N] in place
    launch_ints_rows(int_fields(state, events), game, car, unpack=False, pads=by_pad)
    busy = (~pads.is_active) | (pads.cooldown != 0) | (pads.prev_locked_car_id != 0)
    assert torch.equal(game[:, 6].cpu(), (busy.long().cpu() << torch.arange(34)).sum(1))
    expected_car = [state.cars.ball_hit_info_tick_count_when_hit,
                    state.cars.ball_hit_info_tick_count_when_extra_impulse_applied, events.ball_touch,
                    events.demoed_by, events.bumped_by, events.boost_pickup_pad]  # fmt: skip
    assert torch.equal(car[:, :6], torch.stack([x.long() for x in expected_car], -1).reshape(-1, 6))

    before = {name: x.clone() for name, x in int_fields(state, events).items()}
    for x in int_fields(state, events).values():
        x.fill_(3)  # every field overwritten: the unpack must write each one back
    launch_ints_rows(int_fields(state, events), game, car, unpack=True)
    after = int_fields(state, events)
    for name in ("demo_ptr", "bump_ptr", "boost_pickup_ptr"):
        source = {"demo_ptr": "demoed_by_ptr", "bump_ptr": "bumped_by_ptr", "boost_pickup_ptr": "boost_pickup_pad_ptr"}[name]
        before[name] = (before[source] >= 0).to(torch.int8)
    for name, x in before.items():
        assert torch.equal(after[name], x), name


def test_pads_are_read_in_place():
    """The Arena's pads are stored pad by pad ([34, N] under their [N, 34] view), so the fused step reads
    and writes the state's own arrays, with no transposed copies; pads stored env by env (a user's
    own tensors) are copied in and out, with the same result."""
    arena = Arena(ENVS, blue=1, orange=0, device=DEVICE)
    for x in (arena.state.pads.is_active, arena.state.pads.cooldown, arena.state.pads.prev_locked_car_id):
        assert x.shape == (ENVS, 34) and x.t().is_contiguous()
    row_major = dataclasses.replace(
        arena.state.pads, **{k: v.contiguous() for k, v in vars(arena.state.pads).items()}
    )
    twin = Arena(ENVS, blue=1, orange=0, device=DEVICE)
    twin.state.pads = row_major
    for a in (arena, twin):
        a.set_car(0, pos=torch.tensor([-3584.0, 0.0, 17.0], device=DEVICE), boost=0.0)  # on big pad 0
        launch_step_ticks_(a.state, ArenaEvents.none(ENVS, 1, DEVICE), torch.zeros(ENVS, 1, 8, device=DEVICE),
                           a.world, 2)  # fmt: skip
    assert not arena.state.pads.is_active[:, 0].any()
    for name in ("is_active", "cooldown", "prev_locked_car_id"):
        assert torch.equal(getattr(arena.state.pads, name), getattr(twin.state.pads, name)), name


def test_the_pads_walk_reads_the_busy_pads_and_those_the_cars_touch():
    """The pads' walk visits a pad only where it is busy (`kernels/arena.pad_busy`: cooling down,
    locked to a car, or inactive) or a car touches it (`PADS_BUSY_AT`, found as a step starts and kept
    tick by tick; `pads_to_visit`), and equals the reference tick where pads are of every kind: idle, cooling
    down past the step's end or ending within it, locked to either car, inactive with no cooldown
    left; the cars at rest on pads, some full of boost, two on one pad in some envs; two launches of
    three ticks."""
    arena = Arena(ENVS, blue=1, orange=1, device=DEVICE)
    g = torch.Generator().manual_seed(11)
    tick_time = float(arena.world.params.tick_time)
    kind = torch.randint(0, 6, (ENVS, 34), generator=g)
    cooldown = torch.tensor([0.0, 0.0, 1.5 * tick_time, 4.5 * tick_time, 3.0, 0.0])[kind]
    is_active = (kind == 0) | (kind == 5)
    prev = torch.where(kind == 5, torch.randint(1, 3, (ENVS, 34), generator=g), 0)
    prev = torch.where((kind == 2) | (kind == 3), torch.randint(0, 3, (ENVS, 34), generator=g), prev)
    pads = arena.state.pads
    for x, value in ((pads.is_active, is_active), (pads.cooldown, cooldown), (pads.prev_locked_car_id, prev)):
        x.copy_(value.to(x.dtype).to(DEVICE))  # (in place: the pads stay laid out pad by pad)
    on_pad = torch.randint(0, 34, (ENVS, 2), generator=g)
    on_pad[::4, 1] = on_pad[::4, 0]  # two cars on one pad
    for c in range(2):
        pos = arena.world.pads.pos.cpu()[on_pad[:, c]] + torch.tensor([0.0, 0.0, 17.0])
        boost = torch.tensor([0.0, 50.0, 100.0])[torch.randint(0, 3, (ENVS,), generator=g)]
        arena.set_car(c, pos=pos.to(DEVICE), boost=boost.to(DEVICE))
    expected = tree.clone(arena.state)
    fused = arena.state
    controls = torch.zeros(ENVS, 2, 8, device=DEVICE)
    expected_events = ArenaEvents.none(ENVS, 2, DEVICE)
    for _ in range(2):
        events = ArenaEvents.none(ENVS, 2, DEVICE)
        launch_step_ticks_(fused, events, controls, arena.world, 3)
        expected, expected_events = stand_in_step_ticks(
            expected, ArenaEvents.none(ENVS, 2, DEVICE), controls, arena.world, 3
        )
        assert torch.equal(events.boost_pickup_pad.cpu(), expected_events.boost_pickup_pad.cpu())
        for name in ("is_active", "cooldown", "prev_locked_car_id"):
            assert torch.equal(getattr(fused.pads, name).cpu(), getattr(expected.pads, name).cpu()), name
        assert torch.equal(fused.cars.boost.cpu(), expected.cars.boost.cpu())
    assert int((events.boost_pickup_pad >= 0).sum()) > 0 and bool(fused.pads.is_active.any())  # (it tested both)


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA graphs: a GPU only")
def test_fused_steps_replayed_as_cuda_graphs_equal_direct_launches():
    """`Arena.step` in fused mode replays a CUDA graph of the step once the state's tensors stay in place
    (`arena._FusedGraph`): every step, a set_car between them included, leaves the state and the events
    bit for bit as direct launches over a copy do, and a step's events stay the caller's."""
    envs, ticks = 256, 4
    arena = Arena(envs, blue=1, orange=1, device=DEVICE, mode="fused", seed=7)
    direct = tree.clone(arena.state)
    g = torch.Generator(device=DEVICE).manual_seed(3)
    kept = []
    for step in range(6):
        if step == 3:  # the state's tensors move: a direct launch, then a graph over the new tensors
            arena.set_car(1, pos=torch.tensor([0.0, -800.0, 300.0], device=DEVICE))
            direct = tree.clone(arena.state)
        controls = torch.rand(envs, 2, 8, generator=g, device=DEVICE) * 2 - 1
        events = arena.step(controls, ticks=ticks)
        want = ArenaEvents.none(envs, 2, DEVICE)
        launch_step_ticks_(direct, want, controls, arena.world, ticks)
        for got, expected in zip(tree.leaves(arena.state) + tree.leaves(events), tree.leaves(direct) + tree.leaves(want)):
            assert torch.equal(got, expected)
        kept.append((events, tree.clone(events)))
    assert arena._runners[ticks].graph is not None  # the last steps were replays
    for events, copy in kept:  # no replay rewrote an earlier step's events
        assert all(torch.equal(a, b) for a, b in zip(tree.leaves(events), tree.leaves(copy)))


@pytest.mark.skipif(DEVICE != "cuda", reason="millions of envs: on a GPU only")
@pytest.mark.parametrize(("team_size", "copies"), [(1, 4096), (3, 3968)], ids=["1v1", "3v3"])
def test_a_batch_of_millions_steps_every_copy_of_a_game_alike(team_size, copies):
    """The game benchmark's largest batches (4,194,304 1v1 envs: the cars sorted, the car step's contact
    points found pair by pair; 4,063,232 3v3 envs, whose solve rows between bodies pass 2^31 floats
    from about 2M envs: `WIDE_OFFSETS`) holding copies of the same 1,024 games (`random_game`, no car
    demolished: a respawn spot is drawn per env index) with the same controls: after two 8-tick steps
    every copy equals the first, bit for bit, so no env far into the batch reads or writes another's
    data. The games' bodies meet (touches and bumps), so their rows between bodies are written and
    solved in every copy."""
    tile, num_cars = 1024, 2 * team_size
    ball, cars, pads = random_game(tile, num_cars, seed=5)
    cars.is_demoed = torch.zeros_like(cars.is_demoed)
    cars.demo_respawn_timer = torch.zeros_like(cars.demo_respawn_timer)
    arena = Arena(tile * copies, blue=team_size, orange=team_size, device=DEVICE, mode="fused", seed=1)
    tiled = lambda tree_: tree.tree_map(lambda x: x.repeat(copies, *[1] * (x.dim() - 1)), tree_)  # noqa: E731
    state = dataclasses.replace(arena.state, ball=tiled(ball), cars=tiled(cars), pads=tiled(pads))
    g = torch.Generator(device=DEVICE).manual_seed(4)
    touched = bumped = torch.zeros((), dtype=torch.bool, device=DEVICE)
    for _ in range(2):
        controls = (torch.rand(tile, num_cars, 8, generator=g, device=DEVICE) * 2 - 1).repeat(copies, 1, 1)
        events = ArenaEvents.none(tile * copies, num_cars, DEVICE)
        launch_step_ticks_(state, events, controls, arena.world, 8)
        touched = touched | events.ball_touch[:tile].any()
        bumped = bumped | (events.bump[:tile] | events.demo[:tile]).any()
    assert bool(touched) and bool(bumped), "the games' bodies met nothing"
    for name, x in zip(("state", "events"), (state, events)):
        for leaf in tree.leaves(x):
            copy = leaf.reshape(copies, tile, *leaf.shape[1:])
            assert torch.equal(copy, copy[:1].expand_as(copy)), f"a copy of the {name} differs from the first"


def test_a_batch_beyond_32_bit_offsets_is_refused(monkeypatch):
    """A batch whose largest buffer the kernels' 32-bit offsets cannot index is refused with the batch
    that fits (the limit lowered to one element fewer than 32 envs' car rows)."""
    monkeypatch.setattr(arena_kernels, "OFFSET_LIMIT", ENVS * 2 * arena_kernels.CAR_WIDTH.value - 1)
    arena = Arena(ENVS, blue=1, orange=1, device=DEVICE, mode="fused")
    with pytest.raises(ValueError, match=rf"32-bit offsets.*{ENVS} envs of 2 cars make car_rows .*at most {ENVS - 1} envs"):
        arena.step(torch.zeros(ENVS, 2, 8, device=DEVICE), ticks=1)
