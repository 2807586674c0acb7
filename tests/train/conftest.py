"""Shared fixtures of the trainer tests: one thread per test, and one solved CartPole run that the
learning, eval and export tests share (training it once keeps the suite short)."""

from __future__ import annotations

import time

import pytest
from train_helpers import QUIET, single_thread

from nitro.train import config as C
from nitro.train.ppo import Trainer


@pytest.fixture(autouse=True)
def one_thread():
    with single_thread():
        yield


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
