"""Faults: a NaN parameter or an infinite reward stops training with ``TrainingDiverged``, naming the
first bad update and the last good checkpoint, which stays finite and loadable."""

from __future__ import annotations

import pytest
import torch
from train_helpers import tiny_config

from nitro.train import checkpoint
from nitro.train.ppo import Trainer, TrainingDiverged

CHECKPOINT_EVERY = 2
INJECT_AFTER = 3
"""Updates 1-3 are clean (checkpoint at 2); the fault is injected after update 3's log, so update 4
is the first non-finite one and ckpt_00000002 the last good checkpoint."""


def _run_with_fault(tmp_path, inject):
    cfg = tiny_config("cartpole", "ppo.total_steps=2048", f"run.checkpoint_every={CHECKPOINT_EVERY}")
    trainer = Trainer(cfg, tmp_path)
    logged = []

    def on_log(m):
        logged.append(m["update"])
        if m["update"] == INJECT_AFTER:
            inject(trainer)

    with pytest.raises(TrainingDiverged) as err:
        trainer.train(on_log=on_log)
    return trainer, str(err.value), logged


def _nan_parameter(trainer):
    with torch.no_grad():
        trainer.policy.actor_head.weight[0, 0] = float("nan")


def _inf_reward(trainer):
    step = trainer.env.step

    def bad_step(state, action, key):
        state, obs, reward, terminated, truncated = step(state, action, key)
        reward = torch.where(torch.arange(reward.shape[0]) == 0, torch.inf, reward)  # env 0 only
        return state, obs, reward, terminated, truncated

    trainer.env.step = bad_step


@pytest.mark.parametrize("inject", [_nan_parameter, _inf_reward], ids=["nan-parameter", "inf-reward"])
def test_divergence_names_update_and_last_good_checkpoint(tmp_path, inject):
    trainer, msg, logged = _run_with_fault(tmp_path, inject)
    good = tmp_path / "checkpoints" / f"ckpt_{CHECKPOINT_EVERY:08d}.safetensors"
    assert f"at update {INJECT_AFTER + 1}" in msg, msg
    assert f"last good checkpoint: {good}" in msg, msg
    assert logged == [1, 2, 3]  # it stopped at the first log after the fault
    # no checkpoint was written from the diverged state
    assert checkpoint.checkpoints(tmp_path) == [good]
    tensors, meta = checkpoint.load(good)
    assert meta["update"] == CHECKPOINT_EVERY
    assert all(torch.isfinite(v).all() for v in tensors.values() if v.is_floating_point())


def test_divergence_before_any_checkpoint_says_so(tmp_path):
    cfg = tiny_config("cartpole", "ppo.total_steps=2048", "run.checkpoint_every=100")
    trainer = Trainer(cfg, tmp_path)
    _nan_parameter(trainer)
    with pytest.raises(TrainingDiverged, match=r"at update 1; last good checkpoint: none"):
        trainer.train()


def test_a_nonfinite_minibatch_changes_nothing(tmp_path):
    """The guard skips a non-finite step on the device (no host sync): the optimizer state and every
    other parameter keep their values; only the next log raises."""
    trainer = Trainer(tiny_config("cartpole"))
    trainer.collect()
    trainer.compute_advantages()
    # a NaN in every env column poisons every minibatch (minibatches are sets of env columns)
    trainer.buf.advantages[0, :] = float("nan")
    before = {k: v.clone() for k, v in trainer.opt.state().items()}
    flat = trainer.opt.flat.clone()
    trainer.learn()
    assert torch.equal(trainer.opt.flat, flat)
    for k, v in trainer.opt.state().items():
        assert torch.equal(v, before[k]), k
    assert trainer.first_bad_update.item() == 0


@pytest.mark.parametrize("inject", [_nan_parameter, _inf_reward], ids=["nan-parameter", "inf-reward"])
def test_no_checkpoint_follows_a_bad_update_between_logs(tmp_path, inject):
    """Logs every 4 updates, checkpoints every update, one kept: update 5 goes bad between logs, the
    checkpoint due right after it is not written (the state is checked on the host before every
    checkpoint), so the one kept is update 4's, the last good one."""
    cfg = tiny_config("cartpole", "ppo.total_steps=2048", "run.log_every=4", "run.checkpoint_every=1",
                      "run.keep_last=1")
    trainer = Trainer(cfg, tmp_path)
    iteration = trainer.iteration

    def iteration_with_fault():
        if trainer.update == 4:  # update 5 starts
            inject(trainer)
        iteration()

    trainer.iteration = iteration_with_fault
    with pytest.raises(TrainingDiverged) as err:
        trainer.train()
    good = tmp_path / "checkpoints" / "ckpt_00000004.safetensors"
    assert str(err.value) == f"non-finite loss, gradients or parameters at update 5; last good checkpoint: {good}"
    assert checkpoint.checkpoints(tmp_path) == [good]
    tensors, meta = checkpoint.load(good)
    assert meta["update"] == 4
    assert all(torch.isfinite(v).all() for v in tensors.values() if v.is_floating_point())
    # and the run resumes from it
    resumed = Trainer(tiny_config("cartpole", "ppo.total_steps=2048"), tmp_path, resume=tmp_path)
    assert resumed.update == 4
