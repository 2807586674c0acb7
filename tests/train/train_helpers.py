"""Helpers of the trainer tests: small CPU configs, one intra-op thread."""

from __future__ import annotations

import contextlib

import torch

from nitro.train import config as C

QUIET = ["run.console=false", "run.tensorboard=false", "run.device=cpu"]
"""CPU, no TensorBoard writer, no console: what every in-process test run uses."""

CARTPOLE_EVAL = 250.0
"""The CartPole preset's policy at its stop (tests/train/conftest.py), played deterministically on 100
fresh episodes, averaged 413, 500, 500, 500 and 464 for seeds 1-5 on one host and 324, 491, 500, 488 and
500 on another (an AMD EPYC, where seed 1's run, the tests' own, needs 639k steps instead of ~400k and its
best checkpoint plays 306 over 20 episodes): the training window's episodes began up to 16 updates
earlier (500 steps at 32 per update), and the policy keeps moving. 250 is below every seed on both
hosts and 11x a random policy's ~22."""


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


def tiny_config(target: str = "cartpole", *overrides: str) -> C.TrainConfig:
    """A config that trains in a fraction of a second per update: 8 envs x 16 steps, 2 x 2 minibatches."""
    base = ["env.num_envs=8", "ppo.num_steps=16", "ppo.epochs=2", "ppo.minibatches=2",
            "ppo.total_steps=1024", "ppo.target_return=none"]
    return C.load(target, [*QUIET, *base, *overrides])
