"""The scripted players: their controls in hand-worked situations, team symmetry, their actions in
each parser's space (the lookup table's nearest action), and the ball chaser reaching the ball in both
nitro's simulation and the real RocketSim."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from nitro.core import rng, tree
from nitro.envs.soccar.rl import bots as B
from nitro.envs.soccar.rl import common_values as V
from nitro.envs.soccar.rl.action_parsers import ContinuousAction, LookupTableAction, lookup_table
from nitro.envs.soccar.rl.env import Soccar, SoccarParams
from tests.envs.soccar.rl.states import random_state, yaw_rotation


def one_car(car_pos, yaw, ball_pos, orange=False, boost=50.0):
    """A 1v1 state whose car 0 (blue) or car 1 (orange) is at ``car_pos`` facing ``yaw``, on the ground,
    the ball at ``ball_pos``."""
    state = random_state(1, 1, 1, seed=3)
    cars = state.game.cars
    i = int(orange)
    cars.pos[0, i] = torch.tensor(car_pos)
    cars.rot_mat[0, i] = yaw_rotation(yaw)
    cars.is_on_ground[0, i], cars.boost[0, i] = True, boost
    state.game.ball.pos[0] = torch.tensor(ball_pos)
    return state, i


@pytest.mark.parametrize("ball,steer,boost,handbrake", [
    ((0.0, 2000.0, 93.0), 0.0, 1.0, 0.0),  # dead ahead: straight, boosting
    ((-1000.0, 1000.0, 93.0), 1.0, 0.0, 0.0),  # 45 degrees to its right (-x, facing +y): full right, no boost
    ((1000.0, 1000.0, 93.0), -1.0, 0.0, 0.0),  # 45 degrees to its left
    ((-100.0, 1000.0, 93.0), 3 * math.atan2(100, 1000), 1.0, 0.0),  # 5.7 degrees right: proportional, boosting
    ((200.0, -2000.0, 93.0), -1.0, 0.0, 1.0),  # behind, a little to the left: powerslide left
])  # fmt: skip
def test_ball_chaser_steers_at_the_ball(ball, steer, boost, handbrake):
    """Hand-worked: a blue car at the origin facing +y (right is -x, where steer > 0 turns), the ball
    around it; steer = 3 x the heading error (radians) clamped to 1, boost within 0.3 rad on the
    ground, handbrake beyond 1.6 rad; throttle 1, yaw = steer."""
    state, i = one_car((0.0, 0.0, 17.0), math.pi / 2, ball)
    c = B.ball_chaser(state)[0, i]
    assert c[V.THROTTLE] == 1 and c[V.YAW] == c[V.STEER] and c[V.PITCH] == c[V.ROLL] == c[V.JUMP] == 0
    assert c[V.STEER].item() == pytest.approx(steer, abs=1e-5)  # float32 atan2
    assert (c[V.BOOST].item(), c[V.HANDBRAKE].item()) == (boost, handbrake)


def test_ball_chaser_boosts_only_with_boost_on_the_ground():
    state, i = one_car((0.0, 0.0, 17.0), math.pi / 2, (0.0, 2000.0, 93.0), boost=0.0)
    assert B.ball_chaser(state)[0, i, V.BOOST] == 0
    state, i = one_car((0.0, 0.0, 17.0), math.pi / 2, (0.0, 2000.0, 93.0))
    state.game.cars.is_on_ground[0, i] = False
    assert B.ball_chaser(state)[0, i, V.BOOST] == 0


def test_shadow_defender_shoots_from_goal_side_and_shadows_otherwise():
    """Blue at (0, -1000) facing +y, ball at (0, 0): goal-side by 1000 UU and within 1500 UU, so it
    shoots: its aim is on the line from orange's goal through the ball, 400 x 1000 / 1500 UU short of
    it, straight ahead.
    Blue at (0, 1000) facing +y with the ball behind it at (500, 0): wrong side, so it heads for its
    shadow point 35% of the way from its goal (0, -5120) to the ball, (175, -3328), behind it: full
    lock and a powerslide, no boost. At that point (goal-side, but 3340 UU from a ball on the centre
    line: it waits) facing +x (right is +y) it turns right toward the ball at throttle 0.3; facing
    the ball, it coasts. With the ball in its half it shoots from there."""
    state, i = one_car((0.0, -1000.0, 17.0), math.pi / 2, (0.0, 0.0, 93.0))
    c = B.shadow_defender(state)[0, i]
    assert (c[V.THROTTLE].item(), c[V.BOOST].item()) == (1.0, 1.0)
    assert c[V.STEER].item() == pytest.approx(0.0, abs=1e-6)  # cos(pi / 2) in float32 is not 0

    state, i = one_car((0.0, 1000.0, 17.0), math.pi / 2, (500.0, 0.0, 93.0))
    c = B.shadow_defender(state)[0, i]
    angle = math.atan2(-(175.0 - 0.0), -3328.0 - 1000.0)  # right = -x: offset . right = -dx
    assert abs(angle) > B.POWERSLIDE_ANGLE
    assert c[V.THROTTLE] == 1 and c[V.HANDBRAKE] == 1 and c[V.STEER].item() == math.copysign(1.0, angle)
    assert c[V.BOOST] == 0  # 4300 UU away, but not facing it

    state, i = one_car((175.0, -3328.0, 17.0), 0.0, (500.0, 0.0, 93.0))  # at its point, facing +x
    c = B.shadow_defender(state)[0, i]
    assert c[V.THROTTLE].item() == pytest.approx(B.FACE_THROTTLE) and c[V.STEER] == 1 and c[V.HANDBRAKE] == 0
    state, i = one_car((175.0, -3328.0, 17.0), math.atan2(3328.0, 325.0), (500.0, 0.0, 93.0))  # facing the ball
    c = B.shadow_defender(state)[0, i]
    assert c[V.THROTTLE] == 0 and c[V.BOOST] == 0
    state, i = one_car((175.0, -3328.0, 17.0), math.pi / 2, (175.0, -100.0, 93.0))  # the ball in its half
    c = B.shadow_defender(state)[0, i]
    assert c[V.THROTTLE] == 1 and c[V.BOOST] == 1


def mirrored(state):
    """The same game seen from the other side: x and y negated for every position, velocity and axis,
    and the teams swapped (1v1: the two cars trade places)."""
    flip = torch.tensor([-1.0, -1.0, 1.0])
    g = state.game
    ball = dataclasses.replace(g.ball, pos=g.ball.pos * flip, vel=g.ball.vel * flip, ang_vel=g.ball.ang_vel * flip)
    cars = tree.tree_map(lambda x: x.flip(1), g.cars)
    cars = dataclasses.replace(cars, pos=cars.pos * flip, vel=cars.vel * flip, ang_vel=cars.ang_vel * flip,
                               rot_mat=cars.rot_mat * flip[:, None])
    return dataclasses.replace(state, game=dataclasses.replace(g, ball=ball, cars=cars))


@pytest.mark.parametrize("bot", sorted(B.BOTS))
def test_bots_are_team_symmetric(bot):
    """Orange plays the mirror image of blue: the controls of the mirrored game with the teams swapped
    are the original controls, exactly (negations only)."""
    state = random_state(64, 1, 1, seed=11)
    state.game.cars.pos[..., 2] = 17.0
    controls = B.BOTS[bot](state)
    assert torch.equal(B.BOTS[bot](mirrored(state)).flip(1), controls)


def test_lookup_encode_is_the_nearest_allowed_action():
    """Every table row encodes to its own id (distance 0); other controls to the row nearest in squared
    distance (brute force in float64), among the actions GigaLearn's masks allow."""
    parser, table = LookupTableAction(), np.array(lookup_table())
    state = random_state(45, 1, 1, seed=5)
    rows = torch.tensor(table, dtype=torch.float32).view(45, 2, 8)
    assert torch.equal(parser.encode(rows, state), torch.arange(90))
    controls = torch.rand(45, 2, 8, generator=torch.Generator().manual_seed(1)) * 2 - 1
    masked = LookupTableAction(masks=True)
    for p in (parser, masked):
        ids = p.encode(controls, state).numpy()
        allowed = np.ones((90, 90), bool) if p.action_mask(state) is None else p.action_mask(state).numpy()
        d = ((controls.double().numpy().reshape(90, 1, 8) - table) ** 2).sum(-1)
        d[~allowed] = np.inf
        np.testing.assert_array_equal(ids, d.argmin(-1))
        assert allowed[np.arange(90), ids].all()
    c = torch.rand(3, 2, 8) * 2 - 1
    assert torch.equal(ContinuousAction()(ContinuousAction().encode(c, random_state(3, 1, 1)), random_state(3, 1, 1)),
                       torch.cat((c[..., :5], (c[..., 5:] > 0).float()), -1))


def test_env_bots_play_in_its_action_space():
    """Soccar.bots() are the scripted players through the env's parser: lookup ids [N * C] whose table
    rows are the nearest to the bot's controls."""
    env = Soccar(SoccarParams())
    state = random_state(4, 1, 1, seed=2)
    assert sorted(env.bots()) == sorted(B.BOTS)
    ids = env.bots()["ball_chaser"](state, rng.env_keys(rng.key(0), 4))
    assert ids.shape == (8,) and ids.dtype == torch.int64
    assert torch.equal(ids, LookupTableAction().encode(B.ball_chaser(state), state))


CHASE_STEPS = 12
"""Decisions (0.8 s at tick skip 8) for a car 1000 UU from the ball, driving at it at 1000 UU/s, to
reach it: with boost it covers the 840 UU to contact (less the car's and the ball's half-lengths) in
about 0.6 s."""


def chase_start():
    """A blue car at (0, -1000) driving at 1000 UU/s toward the ball at (0, 0, 93) at rest; the orange
    car parked far away at (3000, 4000)."""
    return {"blue": ((0.0, -1000.0, 17.0), math.pi / 2, 1000.0), "orange": ((3000.0, 4000.0, 17.0), math.pi / 2, 0.0)}


def test_ball_chaser_reaches_the_ball_in_nitro_and_in_rocketsim():
    """The ball chaser, through the lookup table, touches the ball within CHASE_STEPS decisions in
    nitro's env, and in the real RocketSim fed the same decisions through the adapter's observation
    path (soccar_state): the same bot reaches the same ball in both simulators. The orange car holds
    still (action 7: all zero)."""
    rs = pytest.importorskip("RocketSim")
    from nitro.adapters.rocketsim import car_controls, cars_in_order, soccar_state
    from tests.parity.rocketsim_harness import rocketsim

    rocketsim()
    env = Soccar(SoccarParams(truncation=None))
    bot = env.bots()["ball_chaser"]
    start = chase_start()
    state = env.reset(rng.env_keys(rng.key(0), 1), 1, "cpu")
    arena = env.arena(1, "cpu")
    arena.state = state.game
    for i, team in enumerate(("blue", "orange")):
        pos, yaw, speed = start[team]
        arena.set_car(i, pos=torch.tensor([pos]), rot_mat=yaw_rotation(yaw)[None], vel=torch.tensor([[0.0, speed, 0.0]]),
                      ang_vel=torch.zeros(1, 3), boost=torch.tensor([100.0]))
    state = dataclasses.replace(state, game=arena.state)
    still = lookup_table().index((0.0,) * 8)
    nitro_touch = None
    for step in range(CHASE_STEPS):
        action = torch.tensor([int(bot(state, None)[0]), still])
        state, *_ = env.step(state, action, None)
        if state.events.ball_touch[0, 0]:
            nitro_touch = step
            break
    assert nitro_touch is not None, "the ball chaser never reached the ball in nitro"

    real = rs.Arena(rs.GameMode.SOCCAR)
    for team, (pos, yaw, speed) in start.items():
        car = real.add_car(rs.Team.BLUE if team == "blue" else rs.Team.ORANGE)
        s = car.get_state()
        s.pos, s.rot_mat, s.vel, s.boost = rs.Vec(*pos), rs.Angle(yaw, 0, 0).as_rot_mat(), rs.Vec(0, speed, 0), 100.0
        car.set_state(s)
    touched = []
    real.set_ball_touch_callback(lambda arena, car, data: touched.append(car.team))
    parser = env.params.action
    prev = torch.zeros(1, 2, 8)
    real_touch = None
    for step in range(CHASE_STEPS):
        imported = soccar_state([real], prev)
        controls = parser(torch.tensor([int(bot(imported, None)[0]), still]), imported)
        for ticks, held in ((1, prev), (7, controls)):  # the env's 1-tick action delay
            for car, c in zip(cars_in_order(real), held[0].tolist()):
                car.set_controls(car_controls(c))
            real.step(ticks)
        prev = controls
        if 0 in touched:
            real_touch = step
            break
    assert real_touch is not None, "the ball chaser never reached the ball in RocketSim"
    assert abs(real_touch - nitro_touch) <= 1  # the same decision, give or take the tick a touch falls on
