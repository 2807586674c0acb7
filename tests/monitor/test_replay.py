"""The replay file: orientation conversions, derived events, saving and loading."""

from __future__ import annotations

import json

import numpy as np
import pytest
from monitor_helpers import frames, synthetic_cars

from nitro.envs.soccar import constants as C
from nitro.monitor import replay as R


def rodrigues(axis, angle) -> np.ndarray:
    """Rotation matrix of ``angle`` about the unit ``axis`` (Rodrigues' formula), the reference."""
    axis = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def axis_angle_quat(axis, angle) -> np.ndarray:
    axis = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    return np.array([*(axis * np.sin(angle / 2)), np.cos(angle / 2)])


# Rotations that take each branch of Shepperd's method: a small angle (trace largest) and half turns
# about x, y and z (that diagonal entry largest), plus the game's own case: a car facing +y.
CASES = [((0, 0, 1), 0.3), ((1, 0, 0), np.pi), ((0, 1, 0), np.pi), ((0, 0, 1), np.pi), ((0, 0, 1), np.pi / 2),
         ((1, 2, 3), 2.5), ((-3, 1, 0.5), 3.1)]


@pytest.mark.parametrize("axis,angle", CASES)
def test_rot_mat_to_quat_matches_axis_angle(axis, angle):
    q = R.rot_mat_to_quat(rodrigues(axis, angle))
    want = axis_angle_quat(axis, angle)
    # q and -q are the same rotation; float32 storage: 1e-6 is a few float32 ulps of unit values
    sign = np.sign(np.dot(q, want)) or 1.0
    np.testing.assert_allclose(sign * q, want, atol=1e-6)
    np.testing.assert_allclose(R.quat_to_rot_mat(q), rodrigues(axis, angle), atol=1e-6)


def test_car_facing_plus_y_has_rocketsims_axes():
    """RocketSim's convention: a car on the floor facing +y has right = -x (right = up x forward)."""
    forward, up = np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])
    m = np.stack([forward, np.cross(up, forward), up], -1)
    np.testing.assert_array_equal(m[:, 1], [-1.0, 0.0, 0.0])
    q = R.rot_mat_to_quat(m)
    np.testing.assert_allclose(q, axis_angle_quat((0, 0, 1), np.pi / 2), atol=1e-6)  # a quarter yaw


def test_random_rotations_round_trip():
    rng = np.random.default_rng(0)
    mats = np.stack([rodrigues(rng.normal(size=3), rng.uniform(0, np.pi)) for _ in range(200)])
    back = R.quat_to_rot_mat(R.rot_mat_to_quat(mats))
    np.testing.assert_allclose(back, mats, atol=2e-6)  # float32 quaternions: a few ulps per entry


def test_events_derived_from_states():
    r = synthetic_cars(envs=1, frames=120)
    # the ball moves 5400 / 119 UU a frame along +y; blue scores on the first frame past the goal
    # line plus a ball radius (RocketSim's IsBallScored): y > 5124.25 + 91.25
    threshold = 5124.25 + C.BALL_COLLISION_RADIUS_SOCCAR
    first = int(np.argmax(r.ball_pos[0, :, 1] > threshold))
    assert np.nonzero(r.goal[0])[0].tolist() == [first]
    assert r.goal[0, first] == 1  # the +y goal is orange's: blue scored
    # car 1 demolished on frames 80-89: one demo event, on frame 80
    assert np.argwhere(r.demo[0]).tolist() == [[80, 1]]
    # pad 3 goes inactive on frame 60: a pickup by the car nearest to it
    pad = np.asarray((C.BOOST_PADS_BIG + C.BOOST_PADS_SMALL)[3])
    nearest = int(np.argmin(np.linalg.norm(r.car_pos[0, 60, :, :2] - pad[:2], axis=-1)))
    assert np.argwhere(r.boost_pickup[0] >= 0).tolist() == [[60, nearest]]
    assert r.boost_pickup[0, 60, nearest] == 3
    assert not r.touch.any()  # touches are never derived
    assert r.flag("is_demoed")[0, 85, 1] and not r.flag("is_on_ground")[0, 85, 1]


def test_only_the_first_goal_frame_of_a_run_counts():
    """The arena reports every scoring tick; the replay keeps the first of each run (per episode)."""
    r = synthetic_cars(envs=1, frames=10)
    marked = np.array([[0, 1, 1, 1, 0, 1, 1, 0, 0, 1]], np.int8)
    start = np.zeros((1, 10), bool)
    start[0, 3] = True  # a reset inside the first run: a new episode's goal counts again
    rebuilt = R.build(**_states(r), episode_start=start, events={"goal": marked})
    assert rebuilt.goal[0].tolist() == [0, 1, 0, 1, 0, 1, 0, 0, 0, 1]  # the ball is at y > 0: blue scored


def test_chunks_join_into_the_whole_recording():
    """A goal run, a demo and a pickup that straddle chunk boundaries count once, as in one piece."""
    whole = synthetic_cars(envs=1, frames=120)
    first_goal = int(np.nonzero(whole.goal[0])[0][0])
    assert 90 < first_goal < 119
    cuts = [0, 60, 85, first_goal + 1, 120]  # at the pickup, inside the demo, inside the goal run
    parts = [R.build(**_states(frames(whole, a, b))) for a, b in zip(cuts, cuts[1:])]
    # alone, a chunk that starts inside a run counts it again (its earlier frames are not in the chunk)
    assert parts[2].demo[0, 0, 1] and parts[3].goal[0, 0] == 1 and parts[2].boost_pickup[0, 0].max() == 3
    joined = R.concat(parts)
    for name in ("goal", "demo", "boost_pickup", "ball_scored", "car_pos"):
        np.testing.assert_array_equal(getattr(joined, name), getattr(whole, name), err_msg=name)


def _states(r: R.Replay) -> dict:
    return dict(tick=r.tick, ball_pos=r.ball_pos, ball_vel=r.ball_vel, ball_ang_vel=r.ball_ang_vel, car_pos=r.car_pos,
                car_rot_mat=r.rot_mat(), car_vel=r.car_vel, car_ang_vel=r.car_ang_vel, car_boost=r.car_boost,
                car_flags={n: r.flag(n) for n in R.CAR_FLAGS}, pad_active=r.pad_active, teams=r.meta["teams"],
                car_presets=r.meta["car_presets"])


def test_save_load_round_trip(tmp_path, cars_replay):
    path = cars_replay.save(tmp_path / "game")
    assert path.name == "game.npz"
    back = R.load(path)
    for name in ("tick", "ball_pos", "car_pos", "car_quat", "car_boost", "car_flags", "pad_active", "goal",
                 "demo", "boost_pickup", "episode_start"):
        np.testing.assert_array_equal(getattr(back, name), getattr(cars_replay, name))
    assert back.meta["teams"] == [0, 1] and back.meta["car_presets"] == ["octane", "dominus"]
    assert back.meta["hitbox_size"][1] == [130.427, 85.7799, 33.8]  # RocketSim's Dominus hitbox
    assert len(back.meta["pad_positions"]) == C.BOOST_PAD_COUNT


def test_ball_only_replays_have_zero_cars(tmp_path):
    E, F = 1, 5
    r = R.build(tick=np.arange(F)[None], ball_pos=np.zeros((E, F, 3)), ball_vel=np.zeros((E, F, 3)),
                ball_ang_vel=np.zeros((E, F, 3)), car_pos=np.zeros((E, F, 0, 3)),
                car_rot_mat=np.zeros((E, F, 0, 3, 3)), car_vel=np.zeros((E, F, 0, 3)),
                car_ang_vel=np.zeros((E, F, 0, 3)), car_boost=np.zeros((E, F, 0)), car_flags={},
                pad_active=np.ones((E, F, 34), bool), teams=[])
    back = R.load(r.save(tmp_path / "ball.npz"))
    assert back.num_cars == 0 and back.car_quat.shape == (1, 5, 0, 4)


def test_load_refuses_other_files(tmp_path, cars_replay):
    with pytest.raises(FileNotFoundError, match="no replay at"):
        R.load(tmp_path / "missing.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(ValueError, match="is not a nitro replay"):
        R.load(tmp_path / "text.npz")
    np.savez(tmp_path / "other.npz", meta=np.array(json.dumps({"format": "x", "version": 1})))
    with pytest.raises(ValueError, match="format 'x' version 1; this nitro reads 'nitro-replay' version 1"):
        R.load(tmp_path / "other.npz")
    path = cars_replay.save(tmp_path / "ok.npz")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["car_boost"] = arrays["car_boost"][:, :, :1]
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=r"car_boost has shape \(2, 120, 1\), expected \(2, 120, 2\)"):
        R.load(tmp_path / "bad.npz")


def test_build_checks_its_inputs(cars_replay):
    states = _states(cars_replay)
    with pytest.raises(ValueError, match="teams lists 1 cars, the states hold 2"):
        R.build(**{**states, "teams": [0]})
    with pytest.raises(ValueError, match="unknown car flags \\['is_flying'\\]"):
        R.build(**{**states, "car_flags": {"is_flying": np.zeros((2, 120, 2), bool)}})
    with pytest.raises(ValueError, match="unknown car preset 'tank'"):
        R.build(**{**states, "car_presets": ["octane", "tank"]})
