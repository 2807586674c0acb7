"""The memory a run needs is estimated before anything large is allocated: the estimate of the rollout
buffers is exact, and a run that cannot fit is refused at once in one line."""

from __future__ import annotations

import dataclasses
import time

import pytest
import torch
from train_helpers import tiny_config

from nitro.cli import main
from nitro.train import memory
from nitro.train.ppo import Trainer


@pytest.mark.parametrize("env_id", ["cartpole", "pendulum", "skullking"])
def test_the_rollout_buffer_estimate_is_exact(env_id):
    cfg = tiny_config(env_id, "env.num_envs=8", "ppo.total_steps=128")
    trainer = Trainer(cfg)
    buffers = [v for f in dataclasses.fields(trainer.buf) if isinstance(v := getattr(trainer.buf, f.name),
                                                                          torch.Tensor)]
    allocated = sum(t.numel() * t.element_size() for t in buffers)
    assert memory.estimate(cfg, trainer.env)["rollout buffers"] == allocated


def test_a_run_too_big_for_memory_is_refused_before_allocating(tmp_path, capsys):
    start = time.perf_counter()
    code = main(["train", "cartpole", "env.num_envs=100_000_000", "ppo.total_steps=1e10", f"run.dir={tmp_path}",
                 "run.device=cpu", "run.console=false"])
    seconds = time.perf_counter() - start
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("error: env.num_envs=100000000 with ppo.num_steps=32 needs about ")
    assert "rollout buffers" in err[0] and err[0].endswith("free; lower env.num_envs or ppo.num_steps")
    assert seconds < 30, seconds  # no allocation happened (before this check, the run took 140 s to fail)
    assert not list(tmp_path.iterdir())  # and no run directory was left behind
