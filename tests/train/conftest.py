"""Shared fixtures of the trainer tests: small CPU configs and one solved CartPole run that the
learning, eval and export tests share (training it once keeps the suite short)."""

from __future__ import annotations

import contextlib
import time

import pytest
import torch

from nitro.train import config as C
from nitro.train.ppo import Trainer

QUIET = ["run.console=false", "run.tensorboard=false", "run.device=cpu"]
"""CPU, no TensorBoard writer, no console: what every in-process test run uses."""


@contextlib.contextmanager
def single_thread():
    """One intra-op thread. The tensors here are small, where a second thread only adds
    synchronization; and when other processes share the two cores, OpenMP's spinning threads slow an
    update down a hundredfold (measured: 18 s vs 0.26 s per CartPole update)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def one_thread():
    with single_thread():
        yield


def tiny_config(target: str = "cartpole", *overrides: str) -> C.TrainConfig:
    """A config that trains in a fraction of a second per update: 8 envs x 16 steps, 2 x 2 minibatches."""
    base = ["env.num_envs=8", "ppo.num_steps=16", "ppo.epochs=2", "ppo.minibatches=2",
            "ppo.total_steps=1024", "ppo.target_return=none"]
    return C.load(target, [*QUIET, *base, *overrides])


@pytest.fixture(scope="session")
def cartpole_run(tmp_path_factory):
    """The ``cartpole`` preset trained once on CPU: (run_dir, last metrics, wall seconds of train())."""
    cfg = C.load("cartpole", QUIET)
    run_dir = tmp_path_factory.mktemp("cartpole_run")
    with single_thread():  # session fixtures are set up before the per-test one_thread
        trainer = Trainer(cfg, run_dir)
        start = time.perf_counter()
        metrics = trainer.train()
    return run_dir, metrics, time.perf_counter() - start
