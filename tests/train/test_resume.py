"""Exact resume on CPU: a run stopped after a checkpoint and resumed from its run directory ends
bitwise equal (parameters, optimizer, normalizers, env state, keys) to the same run uninterrupted;
and a killed ``nitro train`` continues from its last checkpoint with ``nitro train --resume RUN``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from train_helpers import tiny_config

from nitro.train import checkpoint
from nitro.train.ppo import Trainer

UPDATES = 8
CHECKPOINT_EVERY = 4


class Interrupt(Exception):
    pass


def _config(lstm: int):
    # obs_norm and reward_scale put the normalizers in play, the linear schedule the update counter,
    # the short episode limit auto-resets (the env state) mid-rollout
    return tiny_config("cartpole", f"ppo.total_steps={UPDATES * 8 * 16}",
                       f"run.checkpoint_every={CHECKPOINT_EVERY}",
                       "ppo.obs_norm=true", "ppo.reward_scale=true", "ppo.lr_schedule=linear", "ppo.lr=1e-3",
                       "env.params.max_episode_steps=20", f"policy.lstm={lstm}", "policy.bptt=8")


def _last_metrics(run_dir):
    return json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])


@pytest.mark.parametrize("lstm", [0, 16])
def test_resume_reproduces_an_uninterrupted_run(tmp_path, lstm):
    straight_dir, resumed_dir = tmp_path / "straight", tmp_path / "resumed"
    straight_dir.mkdir(), resumed_dir.mkdir()
    straight = Trainer(_config(lstm), straight_dir)
    straight.train()
    assert straight.update == UPDATES

    def stop_after_checkpoint(m):
        if m["update"] == CHECKPOINT_EVERY + 1:  # the run dies one update after its checkpoint
            raise Interrupt

    first = Trainer(_config(lstm), resumed_dir)
    with pytest.raises(Interrupt):
        first.train(on_log=stop_after_checkpoint)
    saved = [p.name for p in checkpoint.checkpoints(resumed_dir)]
    assert saved == [f"ckpt_{CHECKPOINT_EVERY:08d}.safetensors"]

    resumed = Trainer(_config(lstm), resumed_dir, resume=resumed_dir)
    assert resumed.update == CHECKPOINT_EVERY and resumed.global_step == CHECKPOINT_EVERY * 8 * 16
    resumed.train()
    assert resumed.update == UPDATES

    want, got = straight._state_tensors(), resumed._state_tensors()
    assert set(want) == set(got)
    assert any(k.startswith("carry.") for k in want) and "optim.exp_avg" in want and "obs_rms.var" in want
    unequal = [k for k in want if not torch.equal(want[k], got[k])]
    assert not unequal, f"differ after resume: {unequal}"
    assert torch.equal(straight.opt.flat, resumed.opt.flat)
    # the logged losses of the last update agree too
    a, b = _last_metrics(straight_dir), _last_metrics(resumed_dir)
    for k in ("loss/policy", "loss/value", "loss/entropy", "loss/approx_kl", "global_step", "lr"):
        assert a[k] == b[k], k


def test_checkpoint_files_are_complete_and_pruned(tmp_path):
    cfg = _config(0)
    cfg.run.checkpoint_every, cfg.run.keep_last = 1, 2
    trainer = Trainer(cfg, tmp_path)
    trainer.train()
    names = [p.name for p in checkpoint.checkpoints(tmp_path)]
    assert names == [f"ckpt_{UPDATES - 1:08d}.safetensors", f"ckpt_{UPDATES:08d}.safetensors"]
    assert (tmp_path / "checkpoints" / "best.safetensors").exists()
    assert not list((tmp_path / "checkpoints").glob("*.tmp"))  # atomic writes leave no temporaries
    tensors, meta = checkpoint.load(checkpoint.latest(tmp_path))
    assert meta["update"] == UPDATES and meta["global_step"] == UPDATES * 8 * 16 and meta["world_size"] == 1
    live = trainer._state_tensors()
    assert set(tensors) == set(live) and all(torch.equal(tensors[k], live[k]) for k in live)


def test_resume_rejects_a_checkpoint_of_another_shape(tmp_path):
    Trainer(_config(0), tmp_path).train()
    other = _config(0)
    other.policy.hidden = [32]
    with pytest.raises(ValueError, match="different env or policy config|policy size"):
        Trainer(other, tmp_path / "other", resume=tmp_path)


KILL_UPDATES = 120
KILL_CHECKPOINT_EVERY = 10
"""~15 ms per update: the run is killed ~10 updates in, well before its end (~2 s later)."""


def _nitro(*args, **kwargs):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # as the in-process tests (see train_helpers.single_thread)
    return subprocess.Popen([sys.executable, "-m", "nitro.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def test_killed_run_resumes_from_its_last_checkpoint(tmp_path):
    overrides = ["run.console=false", "run.tensorboard=false", "run.device=cpu", f"run.dir={tmp_path}",
                 "run.name=killed", "env.num_envs=8", "ppo.num_steps=16", "ppo.epochs=2", "ppo.minibatches=2",
                 f"ppo.total_steps={KILL_UPDATES * 8 * 16}", "ppo.target_return=none",
                 f"run.checkpoint_every={KILL_CHECKPOINT_EVERY}"]
    run_dir = tmp_path / "killed"
    proc = _nitro("train", "cartpole", *overrides)
    deadline = time.monotonic() + 60
    while not (run_dir.exists() and checkpoint.checkpoints(run_dir)):
        assert proc.poll() is None, f"training exited before its first checkpoint: {proc.communicate()}"
        assert time.monotonic() < deadline, "no checkpoint within 60 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = checkpoint.load_meta(checkpoint.latest(run_dir))["update"]
    assert 0 < killed_at < KILL_UPDATES, "the run must be killed mid-way for this test to mean anything"
    print(f"killed after the checkpoint of update {killed_at}")

    resumed = _nitro("train", "--resume", str(run_dir))
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["run"] == str(run_dir) and summary["global_step"] == KILL_UPDATES * 8 * 16
    final, meta = checkpoint.load(checkpoint.latest(run_dir))
    assert meta["update"] == KILL_UPDATES
    # the resumed run picked up at the checkpoint: its first logged update is the one after it
    logged = [json.loads(line)["update"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
              if line.strip().endswith("}")]
    assert logged[-(KILL_UPDATES - killed_at):] == list(range(killed_at + 1, KILL_UPDATES + 1))

    # and it ends where the same run, never killed, ends (exact resume across processes)
    from nitro.train import config as C

    straight = Trainer(C.load("cartpole", [o for o in overrides if not o.startswith("run.dir")]))
    straight.train()
    live = straight._state_tensors()
    unequal = [k for k in live if not torch.equal(live[k], final[k])]
    assert not unequal, f"differ from the uninterrupted run: {unequal}"
