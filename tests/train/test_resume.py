"""Exact resume on CPU: a run stopped after a checkpoint and resumed from its run directory ends
bitwise equal (parameters, optimizer, normalizers, env state, keys) to the same run uninterrupted;
and ``nitro train`` killed at random points and inside checkpoint writes continues with ``nitro train
--resume RUN`` to the same result."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
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


KILL_UPDATES = 100
KILL_CHECKPOINT_EVERY = 5
"""~15 ms per update at this size: the process killed at random trains for up to a second."""

DYING_WRITER = textwrap.dedent("""
    # nitro train, killed (SIGKILL to itself) inside its first checkpoint write, at the given stage
    import os, signal, sys
    from nitro import cli
    from nitro.train import checkpoint

    stage, write = sys.argv[1], checkpoint.write_atomic

    def dying_write(path, data):
        if path.name.startswith("ckpt_"):
            tmp = path.with_name(path.name + checkpoint.TMP_SUFFIX)
            tmp.parent.mkdir(parents=True, exist_ok=True)
            if stage == "torn":  # half of the temporary file written
                tmp.write_bytes(data[: len(data) // 2])
            elif stage == "unrenamed":  # the whole temporary file, not renamed yet
                tmp.write_bytes(data)
            elif stage == "renamed":  # the checkpoint in place; best and rotation not done yet
                write(path, data)
            os.kill(os.getpid(), signal.SIGKILL)
        write(path, data)

    checkpoint.write_atomic = dying_write
    sys.exit(cli.main(sys.argv[2:]))
""")


def _nitro(*args, writer_dies: str | None = None):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # as the in-process tests (see train_helpers.single_thread)
    prefix = ["-c", DYING_WRITER, writer_dies] if writer_dies else ["-m", "nitro.cli"]
    return subprocess.Popen([sys.executable, *prefix, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _logged(run_dir) -> list[int]:
    path = run_dir / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line)["update"] for line in lines if line.endswith("}")]


def _kill_at_random(proc, run_dir, rnd) -> None:
    """SIGKILL ``proc`` a random 0-1 s after it has logged an update of its own."""
    before, deadline = len(_logged(run_dir)), time.monotonic() + 120
    while len(_logged(run_dir)) <= before:
        assert proc.poll() is None, f"exited before training: {proc.communicate()}"
        assert time.monotonic() < deadline, "no update logged within 120 s"
        time.sleep(0.01)
    time.sleep(rnd.uniform(0.0, 1.0))
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_runs_killed_anywhere_resume_to_the_uninterrupted_result(tmp_path):
    """SIGKILL at random points and inside checkpoint writes (a torn temporary file, a whole one not yet
    renamed, a renamed one before rotation), each followed by ``nitro train --resume``: the run ends
    bitwise equal to the same run never killed, and metrics.jsonl holds every update exactly once."""
    overrides = ["run.console=false", "run.tensorboard=false", "run.device=cpu", f"run.dir={tmp_path}",
                 "run.name=killed", "env.num_envs=8", "ppo.num_steps=16", "ppo.epochs=2", "ppo.minibatches=2",
                 f"ppo.total_steps={KILL_UPDATES * 8 * 16}", "ppo.target_return=none",
                 f"run.checkpoint_every={KILL_CHECKPOINT_EVERY}"]
    run_dir, resume = tmp_path / "killed", ["train", "--resume", str(tmp_path / "killed")]
    rnd = random.Random(20260101)
    history = []

    def progress(what):
        saved = [checkpoint.load_meta(p)["update"] for p in checkpoint.checkpoints(run_dir)]
        history.append((what, saved[-1] if saved else None, len(_logged(run_dir))))

    _nitro("train", "cartpole", *overrides, writer_dies="torn").wait()  # dies in its first checkpoint
    assert not checkpoint.checkpoints(run_dir) and list((run_dir / "checkpoints").glob("*.tmp"))
    progress("killed writing its first checkpoint (torn)")
    # with no checkpoint yet, the resume starts the run from the beginning
    _kill_at_random(_nitro(*resume), run_dir, rnd)
    progress("killed at random")
    for stage in ("unrenamed", "renamed"):
        proc = _nitro(*resume, writer_dies=stage)
        proc.wait(timeout=120)
        assert proc.returncode == -signal.SIGKILL, proc.communicate()
        progress(f"killed writing a checkpoint ({stage})")
    last = _nitro(*resume)
    out, err = last.communicate(timeout=120)
    assert last.returncode == 0, err
    progress("finished")
    print(history)
    saved = [h[1] or 0 for h in history]
    assert saved == sorted(saved) and saved[-1] == KILL_UPDATES and len(set(saved)) >= 3, history
    assert json.loads(out.strip().splitlines()[-1])["global_step"] == KILL_UPDATES * 8 * 16
    assert _logged(run_dir) == list(range(1, KILL_UPDATES + 1))  # every update once, in order
    assert not list((run_dir / "checkpoints").glob("*.tmp"))

    from nitro.train import config as C

    straight = Trainer(C.load("cartpole", [o for o in overrides if not o.startswith("run.dir")]))
    straight.train()
    final, meta = checkpoint.load(checkpoint.latest(run_dir))
    assert meta["update"] == KILL_UPDATES
    live = straight._state_tensors()
    unequal = [k for k in live if not torch.equal(live[k], final[k])]
    assert not unequal, f"differ from the uninterrupted run: {unequal}"
