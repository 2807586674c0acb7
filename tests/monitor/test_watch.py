"""Soccar replays and live viewing from training and from nitro eval, and eval's table and curve."""

from __future__ import annotations

import csv
import json
import socket

import numpy as np
import pytest
from ball_env import DUO_ID, ensure_registered
from monitor_helpers import tiny_trainer

from nitro.cli import main
from nitro.monitor import replay as R
from nitro.monitor import rlviser


@pytest.fixture(scope="module")
def soccar_run(tmp_path_factory, meshes_available):
    """Three updates of PPO on BallNudge (4 envs x 6 steps of 2 ticks), recording envs 1 and 3."""
    env_id = ensure_registered()
    tmp_path = tmp_path_factory.mktemp("soccar")
    trainer = tiny_trainer(tmp_path / "run", f"env.id={env_id}", "env.num_envs=4", "ppo.num_steps=6",
                           "ppo.total_steps=72", "monitor.replay_every=2", "monitor.replay_envs=[1, 3]",
                           "run.checkpoint_every=1")
    captured = []
    recorder_capture = trainer.watch.recorder.capture

    def spy(step, state, first):  # what the rollout hands over, to compare with the files
        captured.append((step, state.game.ball.pos.clone(), first.clone()))
        recorder_capture(step, state, first)

    trainer.watch.recorder.capture = spy
    trainer.train()
    return tmp_path / "run", trainer, captured


def test_training_writes_replays_of_the_rollouts(soccar_run):
    run, trainer, captured = soccar_run
    files = sorted((run / "replays").glob("*.npz"))
    assert [f.name for f in files] == ["update_00000002.npz"]  # updates 1..3, every 2nd
    replay = R.load(files[0])
    assert (replay.num_envs, replay.num_frames, replay.num_cars) == (2, 6, 0)
    assert replay.meta["env_ids"] == [1, 3] and replay.meta["info"]["update"] == 2
    second = [pos for step, pos, _ in captured[6:12]]  # the second rollout's six frames
    np.testing.assert_array_equal(replay.ball_pos, np.stack([p[[1, 3]].numpy() for p in second], 1))
    # 2 ticks a step; the 6-step episodes end with each rollout, so the second starts a fresh episode
    np.testing.assert_array_equal(replay.tick[0], np.arange(6) * 2)
    assert replay.episode_start[:, 0].all() and not replay.episode_start[:, 1:].any()
    assert trainer.watch is not None and trainer.watch.recorder.dropped == 0


def test_multi_agent_training_records_its_envs(tmp_path, meshes_available):
    """Two agents per env: the trainer's rows are agents, the replay's are envs (rows 2e, 2e+1 -> env e)."""
    trainer = tiny_trainer(tmp_path / "run", f"env.id={ensure_registered(DUO_ID)}", "env.num_envs=4",
                           "ppo.num_steps=6", "ppo.total_steps=24", "monitor.replay_every=1", "monitor.replay_envs=[2]")
    firsts = []
    recorder_capture = trainer.watch.recorder.capture

    def spy(step, state, first):
        firsts.append(first.clone())
        recorder_capture(step, state, first)

    trainer.watch.recorder.capture = spy
    trainer.train()
    assert [f.shape for f in firsts] == [(4,)] * 6  # env-level, not agent rows
    replay = R.load(tmp_path / "run" / "replays" / "update_00000001.npz")
    assert (replay.num_envs, replay.num_frames, replay.meta["env_ids"]) == (1, 6, [2])
    assert replay.episode_start[0, 0] and not replay.episode_start[0, 1:].any()  # one 6-step episode


def test_eval_records_a_replay_and_writes_its_table_and_curve(soccar_run, capsys):
    run = soccar_run[0]
    assert main(["eval", str(run), "--episodes", "4", "--device", "cpu", "--replay", "--replay-envs", "0", "2",
                 "--checkpoint", "latest"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["episodes"] == 4 and result["global_step"] == 72 and result["update"] == 3
    replay = R.load(run / "replays" / "eval_ckpt_00000003.npz")
    # eval checks for the end of its episodes every 64 steps; the replay holds every step until then,
    # the 6-step episodes one after another
    assert (replay.num_envs, replay.num_frames) == (2, 64)
    assert np.nonzero(replay.episode_start[0])[0].tolist() == list(range(0, 64, 6))
    assert replay.meta["info"]["checkpoint"] == "latest"
    with open(run / "eval" / "eval.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and float(rows[0]["mean_return"]) == pytest.approx(result["mean_return"])
    with open(run / "eval" / "episodes_ckpt_00000003_deterministic.csv") as f:
        episodes = list(csv.DictReader(f))
    assert len(episodes) == 4
    assert np.mean([float(e["return"]) for e in episodes]) == pytest.approx(result["mean_return"], rel=1e-6)
    assert (run / "eval" / "eval.png").stat().st_size > 10_000
    assert "wrote" in err and "eval.csv" in err


def test_eval_renders_to_rlviser(soccar_run, capsys):
    """nitro eval --render rlviser plays the recorded env into RLViser's port at game speed."""
    run = soccar_run[0]
    viewer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        viewer.bind(("127.0.0.1", rlviser.RLVISER_PORT))
    except OSError:
        pytest.skip(f"UDP port {rlviser.RLVISER_PORT} (RLViser's) is taken on this machine")
    viewer.settimeout(5)
    try:
        before = sorted(p.name for p in run.rglob("*"))
        assert main(["eval", str(run), "--episodes", "2", "--device", "cpu", "--render", "rlviser", "--no-write"]) == 0
        kinds = [rlviser.message_kind(viewer.recv(65536)) for _ in range(7)]
        assert kinds == [rlviser.MESSAGE_CONNECTION] + [rlviser.MESSAGE_GAME_STATE] * 6
        assert sorted(p.name for p in run.rglob("*")) == before  # --no-write, no --replay: no files
    finally:
        viewer.close()


def test_replays_need_a_soccar_env(tmp_path):
    with pytest.raises(ValueError, match="replays and live viewers need a soccar env"):
        tiny_trainer(tmp_path / "run", "monitor.replay_every=1")
    with pytest.raises(ValueError, match=r"monitor.replay_envs=\[9\]: must be a non-empty list of env indices in \[0, "
                                         r"env.num_envs=8\)"):
        tiny_trainer(tmp_path / "run", "monitor.replay_envs=[9]")
