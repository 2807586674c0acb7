"""The game rules by hand: each env's random streams, Ball::_OnHit's extra velocity, bumps and
demolitions, respawns, goals and the score, kickoffs after goals, the events' folding, and the
mutators' errors. The comparisons with the real RocketSim are tests/parity/test_game_parity.py."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from nitro.envs.soccar import ball_hit, car_bump, rules
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.contacts import CarBallHits, CarCarTouches
from nitro.envs.soccar.mutators import MutatorConfig, TickParams
from nitro.envs.soccar.rigid_body import angle_to_rot_mat
from nitro.envs.soccar.state import ArenaEvents, BallState, CarState

PARAMS = TickParams.from_mutators(MutatorConfig(), float(torch.tensor(1 / 120, dtype=torch.float32)))


def lowbias32(x: int) -> int:
    """Chris Wellons' published lowbias32, in plain Python integers."""
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def test_hash_is_lowbias32_and_streams_are_per_env():
    values = torch.tensor([0, 1, 2, 12345, 2**31, 2**32 - 1, 2**32, -1, 2**40 + 7])
    assert rules.hash32(values).tolist() == [lowbias32(int(v)) for v in values]
    env = torch.arange(4)
    draws = rules.random_u32(7, env, 0, torch.zeros(4, dtype=torch.int64))
    assert len(set(draws.tolist())) == 4  # envs draw differently
    assert torch.equal(draws, rules.random_u32(7, env, 0, torch.zeros(4, dtype=torch.int64)))  # and reproducibly
    assert not torch.equal(draws, rules.random_u32(8, env, 0, torch.zeros(4, dtype=torch.int64)))  # per seed
    assert not torch.equal(draws, rules.random_u32(7, env, 1, torch.zeros(4, dtype=torch.int64)))  # per stream


def test_kickoff_shuffles_are_permutations_drawn_uniformly():
    world = Arena(1, blue=1, orange=1, seed=3).world
    n = 12000
    order = rules.kickoff_order(world, torch.arange(n), torch.zeros(n, dtype=torch.int64))
    assert torch.equal(order.sort(-1).values, torch.arange(5).expand(n, 5))
    counts = torch.bincount(order[:, 0], minlength=5).float()
    # 5 spots, 2,400 expected each: a binomial's sd is 44, so +-5 sd is 220
    assert bool(((counts - n / 5).abs() < 220).all()), counts
    again = rules.kickoff_order(world, torch.arange(n), torch.ones(n, dtype=torch.int64))
    assert float((again != order).any(-1).float().mean()) > 0.9  # the next kickoff draws anew


def _car(n=1, pos=(0.0, 0.0, 17.0), yaw=0.0, vel=(0.0, 0.0, 0.0)) -> CarState:
    cars = CarState.fresh(n, 1, torch.device("cpu"))
    cars.pos = torch.tensor(pos).expand(n, 1, 3).clone()
    cars.rot_mat = angle_to_rot_mat(torch.full((n, 1), yaw), torch.zeros(n, 1), torch.zeros(n, 1))
    cars.vel = torch.tensor(vel).expand(n, 1, 3).clone()
    return cars


def test_extra_hit_velocity_by_hand():
    """RocketSim's own hit (measured): a car at 1500 UU/s flying into a ball 162.5 UU ahead. The relative
    speed is 1500, so the factor is 0.65 - 0.10 x 1000 / 1800 = 0.59444 and the extra velocity 891.67
    along x; z: the direction (162.5, 0, 0.01463 x 0.35), its forward part scaled by 0.35, renormalised,
    (1, 0, 4.85e-5) x 891.67 = 0.0432 (RocketSim: (891.6667, 0, 0.04319))."""
    cars = _car(pos=(-162.5, 0.0, 491.4236), vel=(1500.0, 0.0, -102.91667))
    ball = BallState.rest(1, torch.device("cpu"))
    ball.pos = torch.tensor([[0.0, 0.0, 491.43823]])
    ball_vel = torch.tensor([[0.0, 0.0, -102.67199]])
    hits = CarBallHits(is_hit=torch.tensor([[True]]), relative_pos_on_ball=torch.tensor([[[-91.185, 0.0, 3.44]]]))
    ball, cars = ball_hit.on_hit(ball, ball_vel, cars, hits, torch.tensor([19]), PARAMS)
    assert cars.ball_hit_info_extra_hit_vel[0, 0].tolist() == pytest.approx([891.6667, 0.0, 0.04319], abs=2e-3)
    assert torch.equal(ball.velocity_impulse_cache, cars.ball_hit_info_extra_hit_vel[:, 0])
    assert cars.ball_hit_info_tick_count_when_hit.item() == 19 and cars.ball_hit_info_is_valid.item()
    assert cars.ball_hit_info_ball_pos[0, 0].tolist() == ball.pos[0].tolist()


def test_extra_velocity_every_other_tick():
    """Touches on ticks 0 (a fresh car: RocketSim's never is 2^64 - 1), 1, 2 and 4: the extra velocity
    on ticks 0, 2 and 4, the touch recorded on all four."""
    cars = _car(pos=(-160.0, 0.0, 500.0), vel=(1000.0, 0.0, 0.0))
    ball = BallState.rest(1, torch.device("cpu"))
    ball.pos = torch.tensor([[0.0, 0.0, 500.0]])
    hits = CarBallHits(is_hit=torch.tensor([[True]]), relative_pos_on_ball=torch.zeros(1, 1, 3))
    applied = []
    for tick in (0, 1, 2, 4):
        ball = dataclasses.replace(ball, velocity_impulse_cache=torch.zeros(1, 3))
        ball, cars = ball_hit.on_hit(ball, ball.vel, cars, hits, torch.tensor([tick]), PARAMS)
        applied.append(bool(ball.velocity_impulse_cache.abs().sum() > 0))
        assert cars.ball_hit_info_tick_count_when_hit.item() == tick
    assert applied == [True, False, True, True]


def _pair(bumper_vel, victim_vel=(0.0, 0.0, 0.0), supersonic=False, victim_on_ground=True):
    """Car 0 at the origin facing +x, car 1 200 UU ahead, one contact point on car 0's bumper."""
    cars = CarState.fresh(1, 2, torch.device("cpu"))
    cars.pos = torch.tensor([[[0.0, 0.0, 17.0], [200.0, 0.0, 17.0]]])
    cars.vel = torch.tensor([[bumper_vel, victim_vel]])
    cars.is_supersonic = torch.tensor([[supersonic, False]])
    cars.is_on_ground = torch.tensor([[True, victim_on_ground]])
    point = torch.zeros(1, 1, 4, 3)
    point[..., 0] = 70.0  # ahead of BUMP_MIN_FORWARD_DIST on car 0; on car 1 the same x (its front)
    contacts = CarCarTouches(
        is_contact=torch.tensor([[[True, False, False, False]]]), local_point_a=point, local_point_b=-point
    )
    return cars, contacts


@pytest.mark.parametrize("victim_on_ground", [True, False])
def test_bump_velocity_by_hand(victim_on_ground):
    """1400 UU/s into a still victim: BUMP_VEL_AMOUNT_GROUND_CURVE(1400) = 1100 (air: 1390) along the
    bumper's velocity, plus BUMP_UPWARD_VEL_AMOUNT_CURVE(1400) = 278 x 2 (bump_force_scale) along the
    victim's up (in the air: +z); the bumper's cooldown starts (0.25 s, against car id 2)."""
    cars, contacts = _pair((1400.0, 0.0, 0.0), victim_on_ground=victim_on_ground)
    params = TickParams.from_mutators(MutatorConfig(bump_force_scale=2.0), PARAMS.tick_time)
    game = rules.game_config(1, 1, 0, False, torch.device("cpu"))
    cars, bumped_by, demoed_by = car_bump.on_car_car_collision(cars, contacts, game, params)
    along = 1100.0 if victim_on_ground else 1390.0
    assert cars.velocity_impulse_cache[0, 1].tolist() == pytest.approx([along, 0.0, 556.0], abs=1e-3)
    assert bumped_by.tolist() == [[-1, 0]] and demoed_by.tolist() == [[-1, -1]]
    assert cars.car_contact_id.tolist() == [[2, 0]] and cars.car_contact_cooldown_timer[0, 0].item() == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("supersonic", "blue", "mutators", "demo"),
    [
        (True, 1, MutatorConfig(), True),
        (False, 1, MutatorConfig(), False),
        (True, 2, MutatorConfig(), False),  # teammates
        (True, 2, MutatorConfig(enable_team_demos=True), True),
        (False, 1, MutatorConfig(demo_mode="on_contact"), True),
        (True, 1, MutatorConfig(demo_mode="disabled"), False),
    ],
)
def test_demolitions_follow_demo_mode_and_teams(supersonic, blue, mutators, demo):
    cars, contacts = _pair((2250.0, 0.0, 0.0), supersonic=supersonic)
    params = TickParams.from_mutators(mutators, PARAMS.tick_time)
    game = rules.game_config(blue, 2 - blue, 0, False, torch.device("cpu"))
    cars, bumped_by, demoed_by = car_bump.on_car_car_collision(cars, contacts, game, params)
    assert cars.is_demoed[0, 1].item() is demo and (demoed_by[0, 1].item() == 0) is demo
    assert (bumped_by[0, 1].item() == 0) is not demo
    if demo:
        assert cars.demo_respawn_timer[0, 1].item() == mutators.respawn_delay
        assert not cars.velocity_impulse_cache[0, 1].any()  # no bump velocity with a demolition


def test_no_bump_when_slower_backwards_or_in_cooldown():
    cars, contacts = _pair((1000.0, 0.0, 0.0), victim_vel=(1200.0, 0.0, 0.0))  # the victim drives away faster
    game = rules.game_config(1, 1, 0, False, torch.device("cpu"))
    assert car_bump.on_car_car_collision(cars, contacts, game, PARAMS)[1].tolist() == [[-1, -1]]
    cars, contacts = _pair((-1000.0, 0.0, 0.0))  # reversing away
    assert car_bump.on_car_car_collision(cars, contacts, game, PARAMS)[1].tolist() == [[-1, -1]]
    cars, contacts = _pair((1000.0, 0.0, 0.0))
    cars.car_contact_id[0, 0], cars.car_contact_cooldown_timer[0, 0] = 2, 0.1  # bumped car 2 0.15 s ago
    assert car_bump.on_car_car_collision(cars, contacts, game, PARAMS)[1].tolist() == [[-1, -1]]
    contacts.local_point_a[..., 0] = 60.0  # the side, not the bumper (x <= 64.5)
    cars.car_contact_cooldown_timer[0, 0] = 0.0
    assert car_bump.on_car_car_collision(cars, contacts, game, PARAMS)[1].tolist() == [[-1, -1]]


def test_respawn_after_the_delay_at_a_respawn_spot():
    """A car demolished with 1.5 ticks left respawns on the second tick: fresh, at z = 36 on one of
    the four spots (orange: y mirrored, x kept, turned around), the spawn boost; the wheels' hidden
    state kept (Car::SetState)."""
    arena = Arena(64, blue=1, orange=1, seed=9, mutators=MutatorConfig(car_spawn_boost_amount=50.0))
    timer = 1.5 * arena.tick_time
    for car in range(2):
        arena.set_car(car, is_demoed=True, demo_respawn_timer=timer, has_jumped=True)
    controls = torch.zeros(64, 2, 8)
    arena.step(controls)
    assert bool(arena.cars.is_demoed.all())
    arena.step(controls)
    cars = arena.cars
    assert not bool(cars.is_demoed.any()) and bool((cars.boost < 50.0).all() | (cars.boost == 50.0).all())
    assert not bool(cars.has_jumped.any())
    spots = {(x, y) for x, y, _ in C.CAR_RESPAWN_LOCATIONS_SOCCAR}
    for e in range(64):
        assert (cars.pos[e, 0, 0].item(), cars.pos[e, 0, 1].item()) in spots
        assert (cars.pos[e, 1, 0].item(), -cars.pos[e, 1, 1].item()) in spots
    assert bool((cars.pos[..., 2] == C.CAR_RESPAWN_Z).all())  # Bullet skips the body on the respawn tick
    assert len({tuple(p) for p in cars.pos[:, 0, :2].tolist()}) == 4  # each env draws its own spot
    forward = cars.rot_mat[..., :, 0]
    assert torch.allclose(forward[:, 0], torch.tensor([0.0, 1.0, 0.0]), atol=1e-6)  # blue faces +y
    assert torch.allclose(forward[:, 1], torch.tensor([0.0, -1.0, 0.0]), atol=1e-6)


def test_goals_count_once_per_run_of_scoring_ticks():
    state = Arena(1, blue=0, orange=0).state
    for scored in (0, 1, 1, 1, 0, 2, 2, 0, 1):
        state = rules.count_goals(state, torch.tensor([scored], dtype=torch.int8))
    assert state.blue_score.tolist() == [2] and state.orange_score.tolist() == [1]


def test_kickoff_after_goal_resets_only_the_scoring_env(mesh):
    arena = Arena(2, blue=1, orange=1, seed=1, kickoff_after_goal=True)
    arena.set_ball(pos=[0.0, 5200.0, 300.0], vel=[0.0, 2000.0, 0.0], env_ids=[0])  # about to score
    arena.set_ball(pos=[0.0, 0.0, 600.0], vel=[0.0, 0.0, -10.0], env_ids=[1])
    arena.set_car(0, pos=[500.0, 0.0, 17.0], env_ids=[0, 1])
    events = arena.step(torch.zeros(2, 2, 8), ticks=3)
    assert events.goal_blue.tolist() == [True, False] and events.goal_tick[0].item() == 1
    assert arena.blue_score.tolist() == [1, 0] and arena.state.kickoff_count.tolist() == [1, 0]
    assert arena.ball.pos[0, :2].abs().max() < 1e-3  # back at the centre, asleep: it does not move
    assert arena.ball.pos[0, 2].item() == pytest.approx(C.BALL_REST_Z)
    spots = {(x, y) for x, y, _ in C.CAR_SPAWN_LOCATIONS_SOCCAR}
    assert (round(arena.cars.pos[0, 0, 0].item()), round(arena.cars.pos[0, 0, 1].item())) in spots
    assert arena.cars.pos[1, 0, 0].item() == 500.0  # the other env plays on
    assert arena.ball.pos[1, 2].item() < 600.0


def test_events_keep_the_first_attacker_and_pad():
    def one(demoed_by, pad):
        none = ArenaEvents.none(1, 2, torch.device("cpu"))
        return dataclasses.replace(
            none,
            demo=torch.tensor([demoed_by]) >= 0,
            demoed_by=torch.tensor([demoed_by], dtype=torch.int32),
            boost_pickup=torch.tensor([pad]) >= 0,
            boost_pickup_pad=torch.tensor([pad], dtype=torch.int32),
        )

    events = ArenaEvents.none(1, 2, torch.device("cpu"))
    for demoed_by, pad in (([-1, -1], [-1, 3]), ([1, -1], [-1, 7]), ([1, 0], [5, -1])):
        events = rules.fold_events(events, one(demoed_by, pad))
    assert events.demoed_by.tolist() == [[1, 0]] and events.demo.tolist() == [[True, True]]
    assert events.boost_pickup_pad.tolist() == [[5, 3]]


def test_pads_are_readable_in_rlbot_order(mesh):
    arena = Arena(1)
    order = arena.pad_rlbot_order
    assert arena.pad_positions.shape == (34, 3) and int(arena.pad_is_big.sum()) == 6
    assert sorted(order.tolist()) == list(range(34))
    rlbot_xy = torch.tensor(C.BOOST_PADS_RLBOT_XY, dtype=torch.float32)
    assert (arena.pad_positions[order, :2] - rlbot_xy).abs().max() <= 2.0  # RLBot's 3310 for 3308
    assert order[0].item() == 6 and order[3].item() == 4  # (0, -4240) small, (-3072, -4096) big


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"demo_mode": "always"}, "demo_mode must be one of"),
        ({"enable_team_demos": 1}, "enable_team_demos must be a bool"),
        ({"bump_force_scale": math.nan}, "bump_force_scale must be a finite number"),
        ({"respawn_delay": "3"}, "respawn_delay must be a finite number"),
    ],
)
def test_mutator_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MutatorConfig(**kwargs)
