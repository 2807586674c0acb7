"""The numpy route of small CPU batches gives the same bits as PyTorch's route (the one CUDA and
torch.compile take): random keys and a whole CartPole step, compared exactly (no tolerance: integer
hashing and float32 + - * / round identically in both)."""

from __future__ import annotations

import pytest
import torch

from nitro.core import host, rng
from nitro.envs.classic.cartpole import CartPole, CartPoleParams, CartPoleState


def torch_route(monkeypatch, fn, *args):
    """``fn(*args)`` with every eager CPU tensor sent down PyTorch's route."""
    with monkeypatch.context() as m:
        m.setattr(host, "eager_cpu", lambda x: False)
        return fn(*args)


def test_eager_cpu_takes_plain_cpu_batches_only():
    assert host.eager_cpu(torch.zeros(3))
    assert not host.eager_cpu(torch.tensor(1.0))  # 0-d: numpy would hand back a scalar
    assert not host.eager_cpu(torch.zeros(3, device="meta"))
    assert not host.eager_cpu(torch.zeros(host.GRAIN))  # large batches keep PyTorch's threads
    # compiled code keeps PyTorch's route: tests/core/test_fast.py compiles CartPole on the CPU


def test_key_hashes_match_bit_for_bit(monkeypatch):
    words = torch.cat([torch.tensor([0, 1, -1, 2**31 - 1, -(2**31), 0xFFFF, 0x10000], dtype=torch.int32),
                       torch.randint(-(2**31), 2**31, (30_000,), dtype=torch.int32,
                                     generator=torch.Generator().manual_seed(0))])
    assert torch.equal(rng._mix(words), torch_route(monkeypatch, rng._mix, words))
    keys = rng.env_keys(rng.key(11), 64)
    for n in (1, 2, 4):
        ours, theirs = rng.split(keys, n), torch_route(monkeypatch, rng.split, keys, n)
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    for shape, low, high in (((64,), -0.05, 0.05), ((64,), 0, 1), ((64, 3), 0.0, 1.0)):
        ours, theirs = rng.uniform(keys, shape, low, high), torch_route(monkeypatch, rng.uniform, keys, shape, low, high)
        assert ours.dtype == theirs.dtype and torch.equal(ours, theirs)


@pytest.mark.parametrize("integrator, sutton_barto", [("euler", False), ("semi-implicit euler", True)])
def test_cartpole_step_matches_bit_for_bit(monkeypatch, integrator, sutton_barto):
    env = CartPole(CartPoleParams(kinematics_integrator=integrator, sutton_barto_reward=sutton_barto))
    g = torch.Generator().manual_seed(1)
    n = 4096  # below host.GRAIN: the numpy route
    # states well past the termination bounds too, and step counts at the time limit
    state = CartPoleState(*(torch.rand(n, generator=g) * 6 - 3 for _ in range(4)),
                          torch.randint(490, 500, (n,), dtype=torch.int32, generator=g))
    for _ in range(20):
        action = torch.randint(0, 2, (n,), generator=g)
        ours = env.step(state, action, None)
        theirs = torch_route(monkeypatch, env.step, state, action, None)
        for a, b in zip((*vars(ours[0]).values(), *ours[1:]), (*vars(theirs[0]).values(), *theirs[1:]), strict=True):
            assert a.dtype == b.dtype and torch.equal(a, b)
        state = ours[0]
    keys = rng.env_keys(rng.key(3), n)
    assert all(torch.equal(a, b) for a, b in zip(vars(env.reset(keys, n, "cpu")).values(),
                                                  vars(torch_route(monkeypatch, env.reset, keys, n, "cpu")).values()))
