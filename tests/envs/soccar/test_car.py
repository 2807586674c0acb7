"""Cars in the Arena shell: presets, set_car, reset_kickoff, and hand-worked mechanics.

The tick-by-tick comparison with RocketSim over every maneuver family is tests/parity/test_car_parity.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.car_config import PRESETS, CarParams
from nitro.envs.soccar.state import CarState
from tests.parity.rocketsim_harness import rocketsim

DT = 1.0 / 120.0
# btBoxShape::calculateLocalInertia of each hitbox for mass 180, x, y, z in Bullet units, worked by
# hand in float64: m / 12 (ly^2 + lz^2, ...) over the box with its margin, whose half extents are the
# hitbox's minus 0.04 BT plus the safe margin min(0.04, 0.1 x the smallest half extent). (The table
# in rocketsim.md 2.3 leaves the margin out; only the Merc, whose margin stays 0.04, agrees with it.)
INERTIA_BT = {
    "octane": (53.866, 95.843, 131.899),
    "dominus": (50.119, 107.705, 144.612),
    "plank": (50.545, 107.994, 146.944),
    "breakout": (46.815, 112.743, 147.209),
    "hybrid": (50.610, 108.049, 142.826),
    "merc": (49.346, 102.799, 128.745),
}


def test_presets_inertia_is_bullets_box_inertia():
    params = CarParams.build(list(INERTIA_BT), torch.device("cpu"))
    inertia_bt = 1.0 / params.inv_inertia_local.double() / C.BT_TO_UU**2
    expected = torch.tensor(list(INERTIA_BT.values()), dtype=torch.float64)
    assert torch.allclose(inertia_bt, expected, atol=0.002)  # 3 decimals, and float32 sizes


def test_presets_wheels_follow_car_bullet_setup():
    params = CarParams.build(["octane", "plank"], torch.device("cpu"))
    octane = PRESETS["octane"]
    # front-right, front-left, back-right, back-left; the left wheels mirror y
    assert params.wheel_connection[0, :, 1].tolist() == pytest.approx([25.9, -25.9, 29.5, -29.5])
    assert params.wheel_radius[1].tolist() == pytest.approx([12.5, 12.5, 17.0, 17.0])
    rest = octane.front_wheels.suspension_rest_length - C.MAX_SUSPENSION_TRAVEL
    assert params.suspension_rest_length[0, 0].item() == pytest.approx(rest)
    assert params.is_front[0].tolist() == [True, True, False, False]


def test_arena_takes_one_preset_per_car(mesh):
    a = Arena(3, blue=1, orange=2, car=["merc", "plank", "octane"])
    assert a.car == ("merc", "plank", "octane") and a.world.cars.names == a.car
    assert a.cars.pos.shape == (3, 3, 3)
    a.step(torch.zeros(3, 3, 8), ticks=2)
    assert a.state.tick_count.tolist() == [2, 2, 2]
    with pytest.raises(ValueError, match="one preset name or a sequence of 3"):
        Arena(3, blue=1, orange=2, car=["merc", "plank"])
    with pytest.raises(ValueError, match="one preset name"):
        Arena(3, blue=1, orange=0, car="batmobile")
    with pytest.raises(ValueError, match=r"shape \(3, 3, 8\)"):
        a.step(torch.zeros(3, 1, 8))
    with pytest.raises(ValueError, match="controls are required"):
        a.step()


def _random_value(name, count, gen):
    shape, dtype = CarState.FIELDS[name]
    if dtype == torch.bool:
        return torch.rand(count, *shape, generator=gen) < 0.5
    if dtype in (torch.int32, torch.int64):
        return torch.randint(0, 5, (count, *shape), generator=gen, dtype=dtype)
    return torch.rand(count, *shape, generator=gen) * 100


def test_set_car_sets_every_field_and_keeps_the_rest(mesh):
    a = Arena(4, blue=1, orange=1)
    gen = torch.Generator().manual_seed(0)
    values = {name: _random_value(name, 2, gen) for name in CarState.SETTABLE}
    before = a.cars
    a.set_car(1, env_ids=[0, 2], **values)
    for name in CarState.SETTABLE:
        got = getattr(a.cars, name)
        assert torch.equal(got[[0, 2], 1], values[name]), name
        assert torch.equal(got[[1, 3], 1], getattr(before, name)[[1, 3], 1]), name  # other envs
        assert torch.equal(got[:, 0], getattr(before, name)[:, 0]), name  # the other car
    a.set_car(1, boost=50.0)  # one value for every env; the rest keeps
    assert a.cars.boost[:, 1].tolist() == [50.0] * 4
    assert torch.equal(a.cars.pos[[0, 2], 1], values["pos"])


def test_set_car_resets_hidden_state_as_a_fresh_car(mesh):
    a = Arena(2, blue=1, orange=0)
    controls = torch.zeros(2, 1, 8)
    controls[..., 0] = 1.0  # throttle: sets engine force, brake, frictions, pushback
    controls[..., 6] = 1.0  # boost
    a.step(controls, ticks=5)
    assert bool(a.cars.is_boosting.all()) and a.cars.engine_force.abs().min() > 0
    a.set_car(0, env_ids=[1], pos=[0.0, 0.0, 100.0])
    fresh = CarState.fresh(1, 1, torch.device("cpu"))
    for name in CarState.HIDDEN + ("tick_count_since_update",):
        assert torch.equal(getattr(a.cars, name)[1], getattr(fresh, name)[0]), name
    assert a.cars.engine_force[0, 0] != 0 and a.cars.tick_count_since_update[0, 0] == 5


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"index": 2}, r"car index must be an int in \[0, 2\)"),
        ({"index": 0, "boots": 1.0}, "not a settable CarState field"),
        ({"index": 0, "engine_force": 1.0}, "not a settable CarState field"),  # hidden
        ({"index": 0, "tick_count_since_update": 3}, "not a settable CarState field"),
        ({"index": 0, "pos": torch.zeros(3, 3)}, r"shape \(2, 3\)"),
        ({"index": 0, "rot_mat": torch.zeros(2, 3)}, r"shape \(2, 3, 3\)"),
        ({"index": 0, "boost": torch.zeros(2, dtype=torch.float64)}, "must be torch.float32"),
        ({"index": 0, "has_jumped": torch.zeros(2)}, "must be torch.bool"),
        ({"index": 0, "vel": [float("nan"), 0.0, 0.0]}, "NaN or infinite"),
    ],
)
def test_set_car_errors(mesh, kwargs, message):
    a = Arena(2, blue=1, orange=1)
    index = kwargs.pop("index")
    with pytest.raises(ValueError, match=message):
        a.set_car(index, **kwargs)


def test_reset_kickoff_places_cars_as_rocketsim(mesh):
    """Each car on RocketSim's kickoff spots: the same spot for the i-th car of each team (orange
    mirrored), distinct spots within a team, shuffled per env from the arena's seed."""
    a = Arena(64, blue=3, orange=3, seed=1)
    a.set_car(0, has_jumped=True, boost=5.0, vel=[100.0, 0.0, 0.0])
    a.set_ball(pos=[0.0, 0.0, 500.0], vel=[10.0, 0.0, 0.0])
    a.reset_kickoff()
    spots = a.kickoff_spawns
    assert spots.shape == (64, 6) and bool((spots >= 0).all() and (spots < 5).all())
    assert torch.equal(spots[:, :3], spots[:, 3:])  # blue i and orange i share a spot
    assert all(len(set(row)) == 3 for row in spots[:, :3].tolist())
    assert len({tuple(row) for row in spots[:, :3].tolist()}) > 20  # shuffled per env (60 orders)
    table = torch.tensor(C.CAR_SPAWN_LOCATIONS_SOCCAR)
    x, y, yaw = table[spots[:, :3]].unbind(-1)
    cars = a.cars
    assert torch.equal(cars.pos[:, :3, 0], x) and torch.equal(cars.pos[:, :3, 1], y)
    assert torch.equal(cars.pos[:, 3:, :2], -cars.pos[:, :3, :2])
    assert bool((cars.pos[..., 2] == C.CAR_SPAWN_REST_Z).all())
    forward = cars.rot_mat[..., :, 0]
    assert torch.allclose(forward[:, :3, 0], torch.cos(yaw), atol=1e-6)
    assert torch.allclose(forward[:, :3, 1], torch.sin(yaw), atol=1e-6)
    assert torch.allclose(forward[:, 3:], -forward[:, :3], atol=1e-6)  # orange faces the other way
    assert bool((cars.boost == C.BOOST_SPAWN_AMOUNT).all()) and bool(cars.is_on_ground.all())
    assert not bool(cars.has_jumped.any()) and cars.vel.abs().max() == 0
    assert a.ball.vel.abs().max() == 0 and a.ball.pos[:, 2].eq(C.BALL_REST_Z).all()
    again = Arena(64, blue=3, orange=3, seed=1)
    again.reset_kickoff()
    assert torch.equal(again.kickoff_spawns, spots)  # the seed fixes each env's stream


def test_reset_kickoff_matches_rocketsims_spawn_states(mesh):
    """Every kickoff spot RocketSim uses appears with the same car state in nitro, and nitro draws
    every spot (RocketSim's unseeded shuffle is uniform; with small fixed seeds its minstd engine
    never puts the first car on the diagonal spots, a quirk nitro does not copy)."""
    pytest.importorskip("RocketSim")
    rs = rocketsim()
    arena = rs.Arena(rs.GameMode.SOCCAR)
    cars = [arena.add_car(team) for team in (rs.Team.BLUE, rs.Team.ORANGE)]
    theirs = {}
    for _ in range(100):  # 5 spots drawn uniformly: all appear with probability 1 - 5 x 0.8^100
        arena.reset_kickoff()
        for team, car in enumerate(cars):
            s = car.get_state()
            theirs[(team, *np.round(s.pos.as_numpy(), 3))] = (np.asarray(s.rot_mat.as_numpy()).T, s.boost)
    a = Arena(200, blue=1, orange=1, seed=0)  # every spot drawn: probability 1 - 5 x 0.8^200
    a.reset_kickoff()
    ours = {}
    for e in range(200):
        for team in range(2):
            key = (team, *np.round(a.cars.pos[e, team].numpy().astype(np.float64), 3))
            ours[key] = (a.cars.rot_mat[e, team].numpy(), a.cars.boost[e, team].item())
    assert set(ours) == set(theirs) and len(ours) == 10  # 5 spots per team, all drawn
    for key, (rot, boost) in ours.items():
        assert np.allclose(rot, theirs[key][0], atol=1e-6) and boost == pytest.approx(theirs[key][1])


def test_reset_kickoff_sends_extra_cars_to_the_respawn_spots(mesh):
    a = Arena(2, blue=7, orange=0, seed=0)
    a.reset_kickoff()
    assert a.kickoff_spawns[:, 5:].tolist() == [[5, 6]] * 2
    x, y = C.CAR_RESPAWN_LOCATIONS_SOCCAR[0][:2], C.CAR_RESPAWN_LOCATIONS_SOCCAR[1][:2]
    assert a.cars.pos[0, 5, :2].tolist() == list(x) and a.cars.pos[0, 6, :2].tolist() == list(y)


# --- Hand-worked mechanics ------------------------------------------------------------------------


def _settled(n=1, preset="octane", ticks=240):
    """Cars at rest on the floor at the centre, facing +x (the ball rolled away from the centre,
    where it would sit on the car's roof)."""
    a = Arena(n, blue=1, orange=0, car=preset)
    a.set_ball(pos=[0.0, 3000.0, 93.15])
    a.set_car(0, pos=[0.0, 0.0, 17.1], rot_mat=torch.eye(3), vel=[0.0, 0.0, 0.0])
    a.step(torch.zeros(n, 1, 8), ticks=ticks)
    return a


def test_throttle_acts_one_tick_late_at_1600_uu_per_s2(mesh):
    """Engine force per wheel: THROTTLE_TORQUE_AMOUNT x 1 (at rest) over 4 wheels = 1600 UU/s^2 for a
    mass of 180, i.e. 13.333 UU/s per tick, applied from the tick after the throttle is read
    (rocketsim.md 2.5, measured: 0, 13.333, 26.667)."""
    a = _settled()
    controls = torch.zeros(1, 1, 8)
    controls[..., 0] = 1.0
    speeds = []
    for _ in range(3):
        a.step(controls)
        speeds.append(a.cars.vel[0, 0, 0].item())
    # 0.01 UU/s: the settled car's residual suspension motion and float32 rounding
    assert speeds == pytest.approx([0.0, 1600 / 120, 2 * 1600 / 120], abs=0.01)


def test_free_fall_is_semi_implicit_euler(mesh):
    a = Arena(1, blue=1, orange=0)
    a.set_car(0, pos=[0.0, 0.0, 1000.0], rot_mat=torch.eye(3), vel=[0.0, 0.0, 0.0])
    n = 60
    a.step(torch.zeros(1, 1, 8), ticks=n)
    expected = 1000.0 + C.GRAVITY_Z * DT * DT * n * (n + 1) / 2
    assert a.cars.pos[0, 0, 2].item() == pytest.approx(expected, abs=1e-3)  # float32 rounding
    assert a.cars.vel[0, 0, 2].item() == pytest.approx(C.GRAVITY_Z * DT * n, abs=1e-3)
    assert a.cars.air_time[0, 0].item() == pytest.approx(n * DT, abs=1e-5)
    assert not bool(a.cars.is_on_ground[0, 0])


@pytest.mark.parametrize("axis, column, torque", [(2, 1, 130.0), (3, 2, 95.0), (4, 0, 400.0)])
def test_air_control_angular_acceleration(mesh, axis, column, torque):
    """From rest in the air, full pitch / yaw / roll turns the car about -right / up / -forward at
    CAR_AIR_CONTROL_TORQUE x CAR_TORQUE_SCALE rad/s^2 (12.46, 9.11, 38.35; rocketsim.md 2.7)."""
    a = Arena(1, blue=1, orange=0)
    a.set_car(0, pos=[0.0, 0.0, 1000.0], rot_mat=torch.eye(3))
    controls = torch.zeros(1, 1, 8)
    controls[..., axis] = 1.0
    a.step(controls)
    sign = 1.0 if column == 2 else -1.0
    expected = torch.zeros(3)
    expected[column] = sign * torque * C.CAR_TORQUE_SCALE * DT
    assert torch.allclose(a.cars.ang_vel[0, 0], expected, atol=1e-6)


def test_boost_burns_and_lasts_its_minimum_time(mesh):
    """A one-tick boost press in the air boosts for BOOST_MIN_TIME (0.1 s = 12 ticks), burning
    100/3 per second and accelerating at BOOST_ACCEL_AIR along forward."""
    a = Arena(1, blue=1, orange=0)
    a.set_car(0, pos=[0.0, 0.0, 1500.0], rot_mat=torch.eye(3), boost=50.0)
    press = torch.zeros(1, 1, 8)
    press[..., 6] = 1.0
    a.step(press)
    boosting = [bool(a.cars.is_boosting[0, 0])]
    for _ in range(14):
        a.step(torch.zeros(1, 1, 8))
        boosting.append(bool(a.cars.is_boosting[0, 0]))
    assert boosting == [True] * 12 + [False] * 3
    assert a.cars.boost[0, 0].item() == pytest.approx(50.0 - 12 * C.BOOST_USED_PER_SECOND * DT, abs=1e-4)
    assert a.cars.vel[0, 0, 0].item() == pytest.approx(12 * C.BOOST_ACCEL_AIR * DT, abs=1e-2)


def test_supersonic_thresholds(mesh):
    """Supersonic from 2200 UU/s; kept down to 2100 UU/s for up to 1 s (rocketsim.md 2.8)."""
    a = Arena(3, blue=1, orange=0)
    a.set_car(0, pos=[0.0, 0.0, 1500.0], rot_mat=torch.eye(3), vel=torch.tensor([[2210.0, 0, 0], [2150.0, 0, 0], [2150.0, 0, 0]]))
    a.set_car(0, env_ids=[2], is_supersonic=True)
    a.step(torch.zeros(3, 1, 8))
    assert a.cars.is_supersonic[:, 0].tolist() == [True, False, True]
    a.set_car(0, env_ids=[2], is_supersonic=True, supersonic_time=1.0)  # maintained long enough
    a.step(torch.zeros(3, 1, 8))
    assert a.cars.is_supersonic[2, 0].item() is False


def test_car_state_settable_fields_are_the_bindings(mesh):
    """Every settable field is a RocketSim CarState attribute (the binding's names), the
    ``ball_hit_info_*`` fields those of its ``ball_hit_info``."""
    rs = pytest.importorskip("RocketSim")
    binding = set(dir(rs.CarState()))
    binding |= {"ball_hit_info_" + name for name in dir(rs.BallHitInfo())}
    assert set(CarState.SETTABLE) <= binding, set(CarState.SETTABLE) - binding
    assert {"ball_hit_info_" + name for name in dir(rs.BallHitInfo()) if not name.startswith("_")} <= set(
        CarState.SETTABLE
    )
