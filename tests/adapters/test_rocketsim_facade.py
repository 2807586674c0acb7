"""The RocketSim-shaped facade: the same scripts, run once on the real ``rocketsim`` 2.2.1 binding and
once on ``nitro.adapters.rocketsim_facade``, read the same cars, ball, pads, scores and RLGym gym state."""

from __future__ import annotations

import numpy as np
import pytest

from nitro.adapters import rocketsim_facade as facade
from tests.parity.rocketsim_harness import rocketsim

pytest.importorskip("RocketSim")


def two_cars(rs):
    """A blue octane and an orange dominus placed by set_state, the ball in flight."""
    arena = rs.Arena(rs.GameMode.SOCCAR)
    blue = arena.add_car(rs.Team.BLUE, rs.CarConfig.OCTANE)
    orange = arena.add_car(rs.Team.ORANGE, rs.CarConfig.DOMINUS)
    s = blue.get_state()
    s.pos, s.vel, s.rot_mat, s.boost = rs.Vec(-1000, -2000, 17), rs.Vec(0, 500, 0), rs.Angle(1.2, 0, 0).as_rot_mat(), 50
    blue.set_state(s)
    s = orange.get_state()
    s.pos, s.rot_mat = rs.Vec(1500, 2000, 17), rs.Angle(-2.0, 0, 0).as_rot_mat()
    orange.set_state(s)
    ball = arena.ball.get_state()
    ball.pos, ball.vel = rs.Vec(300, 500, 400), rs.Vec(200, -100, 300)
    arena.ball.set_state(ball)
    return arena, blue, orange


def driving_script(rs):
    """Set states, a gym state, 30 ticks of driving (boost, steering, a powerslide), a gym state."""
    arena, blue, orange = two_cars(rs)
    before = arena.get_gym_state()
    blue.set_controls(rs.CarControls(throttle=1.0, steer=0.3, boost=True))
    orange.set_controls(rs.CarControls(throttle=0.5, steer=-1.0, handbrake=True))
    arena.step(30)
    after = arena.get_gym_state()
    states = [(c.id, c.team, c.get_state()) for c in arena.get_cars()]
    return before, after, states, arena.ball.get_state(), arena.tick_count


def test_driving_script_reads_the_same():
    """The gym state right after set_state is RocketSim's to float32 rounding (1e-6: the layout,
    quaternions and both teams' Euler angles of one state), and after 30 ticks of driving within
    2e-2 UU and UU/s (the car parity sweeps' bound for a second of driving; measured 7e-4)."""
    real, ours = driving_script(rocketsim()), driving_script(facade)
    for got, want in zip(ours[0], real[0]):
        np.testing.assert_allclose(got, want, atol=1e-6)
    for got, want in zip(ours[1], real[1]):
        np.testing.assert_allclose(got, want, atol=2e-2, rtol=1e-5)
    assert ours[4] == real[4] == 30
    for (i, team, got), (j, team_real, want) in zip(ours[2], real[2]):
        assert (i, team) == (j, team_real)
        for name in ("pos", "vel", "ang_vel"):
            np.testing.assert_allclose(getattr(got, name).as_numpy(), getattr(want, name).as_numpy(), atol=2e-2)
        np.testing.assert_allclose(got.rot_mat.as_numpy(), want.rot_mat.as_numpy(), atol=1e-5)
        for name in ("is_on_ground", "has_jumped", "is_supersonic", "is_demoed", "car_contact_id"):
            assert getattr(got, name) == getattr(want, name), name
        assert got.wheels_with_contact == tuple(want.wheels_with_contact)
        assert got.boost == pytest.approx(want.boost, abs=1e-4)
        assert got.last_controls.boost == want.last_controls.boost
        assert got.last_controls.throttle == pytest.approx(want.last_controls.throttle)
    np.testing.assert_allclose(ours[3].pos.as_numpy(), real[3].pos.as_numpy(), atol=1e-3)


def goal_script(rs):
    """The blue car's ball hit info says it touched the ball 0.5 s ago, the orange car's just now; the ball
    flies into orange's goal over two step calls (the event tracker takes the first call after a state
    set as a new start). Returns the scores, the cars' goals, the callback's teams and the gym state's
    game row."""
    arena, blue, orange = two_cars(rs)
    teams = []
    arena.set_goal_score_callback(lambda arena, team, data: teams.append(team))
    arena.step(60)
    for car, ticks_ago in ((blue, 60), (orange, 1)):
        s = car.get_state()
        s.ball_hit_info.is_valid = True
        s.ball_hit_info.tick_count_when_hit = arena.tick_count - ticks_ago
        car.set_state(s)
    ball = arena.ball.get_state()
    ball.pos, ball.vel = rs.Vec(0, 4500, 300), rs.Vec(0, 2500, 0)
    arena.ball.set_state(ball)
    arena.step(1)
    arena.step(44)  # it crosses the goal line (5215.5 UU) after about 34 ticks
    return arena.blue_score, arena.orange_score, blue.goals, orange.goals, teams, arena.get_gym_state()[0]


def test_goals_and_their_scorers_count_as_rocketsim_counts_them():
    """A goal by blue: the score, the goal callback on every scoring tick, the goal credited to the
    blue car (the scoring team's last toucher within 4 s; orange's later touch does not count), and
    the gym state's score and last toucher."""
    real, ours = goal_script(rocketsim()), goal_script(facade)
    assert ours[:4] == real[:4] == (1, 0, 1, 0)
    assert ours[4] == real[4] and set(ours[4]) == {0}
    np.testing.assert_array_equal(ours[5], real[5])


def test_cars_come_and_go_by_id():
    """Ids count from 1 in the order cars are added and are not reused; get_cars lists them by id;
    adding a car keeps the others' states; removed cars are gone; a clone goes its own way."""
    for rs in (rocketsim(), facade):
        arena, blue, orange = two_cars(rs)
        arena.step(4)
        before = orange.get_state().pos.as_numpy()
        third = arena.add_car(rs.Team.BLUE, rs.CarConfig.MERC)
        assert [c.id for c in arena.get_cars()] == [1, 2, 3] and third.team == rs.Team.BLUE
        np.testing.assert_array_equal(orange.get_state().pos.as_numpy(), before)
        arena.remove_car(blue)
        assert [c.id for c in arena.get_cars()] == [2, 3] and arena.get_car_from_id(3) is third
        assert arena.add_car(rs.Team.ORANGE).id == 4
        with pytest.raises(KeyError):
            arena.get_car_from_id(1)
        copy = arena.clone()
        copy.step(3)
        assert copy.tick_count == arena.tick_count + 3 and [c.id for c in copy.get_cars()] == [2, 3, 4]
        assert copy.get_car_from_id(3).get_state().pos.as_tuple() != third.get_state().pos.as_tuple()
        pads = arena.get_boost_pads()
        assert len(pads) == 34 and [p.is_big for p in pads].count(True) == 6
        assert pads[0].get_pos().as_tuple()[:2] == (0.0, -4240.0)  # RLBot's first pad


def test_bad_input_is_refused():
    arena = facade.Arena()
    with pytest.raises(ValueError, match="Team.BLUE"):
        arena.add_car(2)
    with pytest.raises(ValueError, match="CarConfig"):
        arena.add_car(facade.Team.BLUE, 9)
    with pytest.raises(ValueError, match="SOCCAR"):
        facade.Arena(facade.GameMode.HOOPS)
    car = arena.add_car(facade.Team.BLUE)
    with pytest.raises(TypeError, match="CarControls"):
        car.set_controls((1.0, 0.0))


def test_car_controls_take_the_bindings_argument_order():
    """The binding's CarControls(throttle, steer, pitch, yaw, roll, boost, jump, handbrake): boost before
    jump, unlike nitro's control vector; as_list gives nitro's order."""
    for rs in (rocketsim(), facade):
        c = rs.CarControls(1.0, 0.5, 0.0, 0.0, 0.0, True, False, False)
        assert (c.boost, c.jump, c.handbrake, c.steer) == (True, False, False, 0.5)
    assert facade.CarControls(1.0, 0.5, 0.0, 0.0, 0.0, True).as_list() == [1.0, 0.5, 0, 0, 0, 0.0, 1.0, 0.0]
