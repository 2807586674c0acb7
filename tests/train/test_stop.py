"""Stopping a run: Ctrl-C (SIGINT) or SIGTERM saves a checkpoint of the update in progress and ends with
``TrainingInterrupted`` (the ``nitro`` command: one line, exit code 128 + the signal number), from which
the run resumes; checkpoints also come every ``run.checkpoint_seconds``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from train_helpers import tiny_config

from nitro.train import checkpoint
from nitro.train.ppo import Trainer
from nitro.train.stop import TrainingInterrupted


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_saves_the_update_in_progress_and_the_run_resumes(tmp_path, sig):
    cfg = tiny_config("cartpole", "ppo.total_steps=1280", "run.checkpoint_every=100")
    trainer = Trainer(cfg, tmp_path)

    def on_log(m):
        if m["update"] == 3:
            os.kill(os.getpid(), sig)  # arrives during the log of update 3

    with pytest.raises(TrainingInterrupted) as err:
        trainer.train(on_log=on_log)
    saved = tmp_path / "checkpoints" / "ckpt_00000003.safetensors"
    assert err.value.signum == sig
    assert str(err.value) == (f"stopped by {sig.name} at update 3; saved {saved}; continue with: "
                              f"nitro train --resume {tmp_path}")
    assert checkpoint.checkpoints(tmp_path) == [saved]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
    resumed = Trainer(tiny_config("cartpole", "ppo.total_steps=1280"), tmp_path, resume=tmp_path)
    assert resumed.update == 3
    resumed.train()
    assert resumed.update == 10


def test_checkpoints_also_come_on_a_wall_clock_interval(tmp_path):
    # checkpoint_every is far away; a tiny interval makes every update's end a checkpoint
    cfg = tiny_config("cartpole", "ppo.total_steps=640", "run.checkpoint_every=1000",
                      "run.checkpoint_seconds=1e-9", "run.keep_last=10")
    Trainer(cfg, tmp_path / "timed").train()
    assert [checkpoint.load_meta(p)["update"] for p in checkpoint.checkpoints(tmp_path / "timed")] == [1, 2, 3, 4, 5]
    cfg = tiny_config("cartpole", "ppo.total_steps=640", "run.checkpoint_every=1000", "run.checkpoint_seconds=0")
    Trainer(cfg, tmp_path / "untimed").train()
    assert [checkpoint.load_meta(p)["update"] for p in checkpoint.checkpoints(tmp_path / "untimed")] == [5]


def test_sigterm_to_the_command_is_one_line_and_exit_code_143(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "nitro.cli", "train", "cartpole", "run.console=false",
                             "run.tensorboard=false", "run.device=cpu", f"run.dir={tmp_path}", "run.name=run",
                             "env.num_envs=8", "ppo.num_steps=16", "ppo.minibatches=2", "ppo.total_steps=10_000_000",
                             "ppo.target_return=none"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not (run / "metrics.jsonl").exists() or not (run / "metrics.jsonl").read_text().count("\n") >= 2:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no progress within 120 s"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    [latest] = checkpoint.checkpoints(run)
    update = checkpoint.load_meta(latest)["update"]
    assert err.strip().splitlines() == [f"nitro: stopped by SIGTERM at update {update}; saved {latest}; "
                                        f"continue with: nitro train --resume {run}"]
