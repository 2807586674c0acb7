"""Recording envs of a batch: the real ball-only arena, and synthetic car states."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
import torch

from nitro.envs.soccar import Arena, ArenaEvents, BallState, BoostPadState, CarState, GameState
from nitro.monitor import replay as R
from nitro.monitor.recorder import ArenaRecording, Recorder


def test_arena_recording_matches_the_arena(meshes_available, tmp_path):
    """Three envs, two recorded; env 2's ball flies into the orange goal. The replay holds exactly the
    states the arena went through, and its goal frame is the arena's own goal event."""
    arena = Arena(3, blue=0, orange=0)
    arena.set_ball(pos=torch.tensor([[0.0, 0.0, 300.0], [500.0, 0.0, 93.15], [0.0, 4900.0, 300.0]]),
                   vel=torch.tensor([[0.0, 0.0, 0.0], [1000.0, 0.0, 0.0], [0.0, 3000.0, 0.0]]))
    rec = ArenaRecording(arena, env_ids=[0, 2], chunk=4)  # chunks of 4 frames: several flushes
    seen, goals = [arena.ball.pos.clone()], [torch.zeros(3, dtype=torch.bool)]
    for _ in range(10):
        events = arena.step(None, ticks=2)
        rec.step(events)
        seen.append(arena.ball.pos.clone())
        goals.append(events.goal_blue.clone())
    replay = rec.replay()
    assert (replay.num_envs, replay.num_frames, replay.num_cars) == (2, 11, 0)
    want = torch.stack(seen, 1)[[0, 2]].numpy()
    np.testing.assert_array_equal(replay.ball_pos, want)  # float32 copied exactly
    np.testing.assert_array_equal(replay.tick[0], np.arange(11) * 2)
    arena_goal = torch.stack(goals, 1)[2].numpy()
    assert arena_goal.any(), "the ball should score within 20 ticks"
    assert np.nonzero(replay.goal[1])[0].tolist() == [int(np.argmax(arena_goal))]
    assert (replay.goal[1][replay.goal[1] > 0] == 1).all() and not replay.goal[0].any()
    # without the arena's events, goals derived from the ball positions land on the same frame
    np.testing.assert_array_equal(R.derive_scored(replay.ball_pos, arena.world.params), replay.ball_scored)
    assert replay.meta["env_ids"] == [0, 2] and replay.meta["tick_rate"] == 120.0
    back = R.load(rec.save(tmp_path / "arena.npz"))
    np.testing.assert_array_equal(back.ball_pos, replay.ball_pos)


def car_state(num_envs: int, device="cpu") -> CarState:
    """Two cars per env with distinct poses, flags and boost (what the cars stage will hold)."""
    cars = CarState.empty(num_envs, 2, torch.device(device))
    env = torch.arange(num_envs, dtype=torch.float32)
    cars.pos[:, 0] = torch.stack([env * 100, env * 10 - 2000, torch.full_like(env, 17.0)], -1)
    cars.pos[:, 1] = torch.stack([-env * 100, 2000 - env * 10, torch.full_like(env, 300.0)], -1)
    forward, up = torch.tensor([0.0, 1.0, 0.0]), torch.tensor([0.0, 0.0, 1.0])
    cars.rot_mat[:, 0] = torch.stack([forward, torch.linalg.cross(up, forward), up], -1)  # car 0 faces +y
    cars.boost[:, 0] = 33.0
    cars.boost[:, 1] = env
    cars.is_on_ground[:, 0] = True
    cars.has_jumped[:, 1] = True
    cars.is_demoed[1::2, 1] = True
    return cars


def test_recorder_packs_car_fields_and_events():
    N = 5
    state = GameState(ball=BallState.rest(N, torch.device("cpu")), cars=car_state(N),
                      pads=BoostPadState.fresh(N, torch.device("cpu")), tick_count=torch.full((N,), 7),
                      **GameState.scoreboard(N, torch.device("cpu")))
    state.pads.is_active[3, 5] = False
    state.ball.pos[3, 1] = -5300.0  # env 3's ball in blue's goal (-y): orange scored
    rec = Recorder(state, env_ids=[1, 3], frames=2, teams=[0, 1], car_presets=["octane", "merc"], events=True)
    events = ArenaEvents.none(N, 2, torch.device("cpu"))
    events = dataclasses.replace(events, goal_orange=torch.arange(N) == 3, ball_touch=torch.ones(N, 2, dtype=bool))
    rec.capture(0, state, events=events)
    rec.capture(1, state, first=torch.ones(N, dtype=torch.bool), events=ArenaEvents.none(N, 2, torch.device("cpu")))
    got: list[R.Replay] = []
    assert rec.flush(2, got.append)
    rec.close()
    r = got[0]
    np.testing.assert_array_equal(r.car_pos[:, 0], state.cars.pos[[1, 3]].numpy())
    np.testing.assert_allclose(r.rot_mat()[:, 0, 0], state.cars.rot_mat[[1, 3], 0].numpy(), atol=1e-6)
    np.testing.assert_array_equal(r.car_boost[:, 0], [[33.0, 1.0], [33.0, 3.0]])
    assert r.flag("is_on_ground")[:, 0].tolist() == [[True, False], [True, False]]
    assert r.flag("has_jumped")[:, 0, 1].all() and r.flag("is_demoed")[:, 0, 1].all()  # envs 1 and 3 are odd
    assert not r.flag("is_boosting").any()  # a flag the state lacks reads false
    assert r.goal[:, 0].tolist() == [0, 2] and r.touch[:, 0].all() and not r.touch[:, 1].any()
    assert r.episode_start[:, 1].all() and not r.episode_start[:, 0].any()
    assert r.tick[0].tolist() == [7, 7]
    assert not r.pad_active[1, 0, 5] and r.pad_active[0, 0, 5]
    assert r.meta["car_presets"] == ["octane", "merc"]


def test_a_busy_flush_is_dropped_not_waited_for():
    state = GameState(ball=BallState.rest(2, torch.device("cpu")), cars=CarState.empty(2, 0, torch.device("cpu")),
                      pads=BoostPadState.fresh(2, torch.device("cpu")), tick_count=torch.zeros(2, dtype=torch.int64),
                      **GameState.scoreboard(2, torch.device("cpu")))
    rec = Recorder(state, env_ids=[0], frames=1)
    release, delivered = threading.Event(), []

    def slow(replay):
        release.wait(5)
        delivered.append(replay)

    rec.capture(0, state)
    assert rec.flush(1, slow)
    assert not rec.flush(1, slow) and rec.dropped == 1  # the first is still in its callback
    release.set()
    rec.close()
    assert len(delivered) == 1


def test_recorder_refuses_bad_requests():
    state = GameState(ball=BallState.rest(2, torch.device("cpu")), cars=car_state(2),
                      pads=BoostPadState.fresh(2, torch.device("cpu")), tick_count=torch.zeros(2, dtype=torch.int64),
                      **GameState.scoreboard(2, torch.device("cpu")))
    with pytest.raises(ValueError, match=r"cannot record envs \[2\]: the batch has envs 0..1"):
        Recorder(state, env_ids=[2], frames=4, teams=[0, 1])
    with pytest.raises(ValueError, match="the state holds 2 cars but teams lists 0"):
        Recorder(state, env_ids=[0], frames=4)
    with pytest.raises(ValueError, match="replays need a soccar env"):
        Recorder(torch.zeros(3), env_ids=[0], frames=4)
