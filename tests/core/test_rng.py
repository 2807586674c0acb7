"""Counter-based RNG: reproducible from a seed, per-env streams independent of the batch size, uniform."""

from __future__ import annotations

import math

import pytest
import torch

import nitro
from nitro.core import rng

N = 1_000_000
"""Draws per distribution test."""
ALPHA = 1e-3
"""Significance level of each distribution test (deterministic under the fixed keys)."""
Z = 3.29
"""Two-sided normal quantile for ALPHA."""


def chi2_critical(dof: int, z: float = 3.09) -> float:
    """Upper ALPHA quantile of chi-square(dof) by Wilson-Hilferty; z = one-sided normal quantile of 1e-3."""
    a = 2 / (9 * dof)
    return dof * (1 - a + z * math.sqrt(a)) ** 3


def test_same_seed_same_numbers_other_seed_other_numbers():
    a = rng.uniform(rng.key(7), (1000,))
    assert torch.equal(a, rng.uniform(rng.key(7), (1000,)))
    assert not torch.equal(a, rng.uniform(rng.key(8), (1000,)))
    k1, k2 = rng.split(rng.key(7))
    assert not torch.equal(k1, k2)
    assert not torch.equal(rng.uniform(k1, (1000,)), rng.uniform(k2, (1000,)))
    assert torch.equal(rng.fold_in(rng.key(7), 3), rng.fold_in(rng.key(7), 3))
    assert not torch.equal(rng.fold_in(rng.key(7), 3), rng.fold_in(rng.key(7), 4))


def test_split_is_fold_in_of_1_to_n():
    """split hashes its keys all at once; each is still fold_in(key, i + 1), bit for bit."""
    for key in (rng.key(7), rng.env_keys(rng.key(7), 5)):
        assert rng.split(key, 0) == []
        for n in (1, 2, 4):
            assert all(torch.equal(k, rng.fold_in(key, i + 1)) for i, k in enumerate(rng.split(key, n)))


def test_key_rejects_non_int_seed():
    with pytest.raises(TypeError, match="seed must be an int"):
        rng.key(1.5)


def test_env_stream_independent_of_num_envs():
    key = rng.key(3)
    assert torch.equal(rng.uniform(key, (8, 3))[:4], rng.uniform(key, (4, 3)))
    assert torch.equal(rng.randint(key, (16,), 7)[:5], rng.randint(key, (5,), 7))
    # through the handle: env i's reset and trajectory do not depend on how many envs run beside it
    small = nitro.make("CartPole-v1", num_envs=4, device="cpu", seed=11)
    large = nitro.make("CartPole-v1", num_envs=32, device="cpu", seed=11)
    obs_s, _ = small.reset()
    obs_l, _ = large.reset()
    assert torch.equal(obs_s, obs_l[:4])
    for t in range(60):  # long enough that several envs finish and are reset from their own streams
        actions = torch.randint(0, 2, (32,), generator=torch.Generator().manual_seed(t))
        obs_s, r_s, te_s, tr_s, _ = small.step(actions[:4])
        obs_l, r_l, te_l, tr_l, _ = large.step(actions)
        assert torch.equal(obs_s, obs_l[:4]) and torch.equal(te_s, te_l[:4])


def test_uniform_is_uniform():
    u = rng.uniform(rng.key(5), (N,)).double()
    assert float(u.min()) >= 0 and float(u.max()) < 1
    bins = 100
    counts = torch.bincount((u * bins).long(), minlength=bins).double()
    expected = N / bins
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < chi2_critical(bins - 1), f"chi-square {chi2:.1f}"
    assert abs(float(u.mean()) - 0.5) < Z * math.sqrt(1 / 12 / N)
    # neighbours are uncorrelated (lag-1 correlation within Z / sqrt(N))
    assert abs(float(torch.corrcoef(torch.stack([u[:-1], u[1:]]))[0, 1])) < Z / math.sqrt(N)


def test_uniform_range_and_bits():
    x = rng.uniform(rng.key(6), (N,), -3.0, 5.0)
    assert float(x.min()) >= -3 and float(x.max()) < 5
    words = rng.bits(rng.key(6), (N,)).to(torch.int64) & 0xFFFFFFFF  # the unsigned 32-bit pattern
    # every one of the 32 bits is set half the time (binomial(N, 1/2) within Z sigma)
    ones = torch.stack([((words >> b) & 1).sum() for b in range(32)]).double()
    assert torch.all((ones - N / 2).abs() < Z * math.sqrt(N / 4)), ones


def test_randint_and_normal():
    k = 10
    r = rng.randint(rng.key(9), (N,), k)
    counts = torch.bincount(r, minlength=k).double()
    assert counts.numel() == k  # nothing outside [0, k)
    chi2 = float(((counts - N / k) ** 2 / (N / k)).sum())
    assert chi2 < chi2_critical(k - 1), f"chi-square {chi2:.1f}"
    z = rng.normal(rng.key(10), (N,)).double()
    assert torch.isfinite(z).all()
    assert abs(float(z.mean())) < Z / math.sqrt(N)
    assert abs(float(z.var()) - 1) < Z * math.sqrt(2 / N)  # var of the sample variance: 2 / N


def test_a_draw_over_stacked_keys_is_each_keys_draw():
    """What CartPole's reset relies on to draw its four variables at once."""
    keys = rng.split(rng.env_keys(rng.key(5), 9), 4)
    assert torch.equal(rng.uniform(torch.stack(keys), (4, 9), -0.05, 0.05),
                       torch.stack([rng.uniform(k, (9,), -0.05, 0.05) for k in keys]))
