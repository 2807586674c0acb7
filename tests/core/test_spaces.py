"""Spaces: batched sampling in range and within masks; check() rejects bad actions with clear errors."""

from __future__ import annotations

import math

import pytest
import torch

from nitro.core import rng
from nitro.core.spaces import Box, Discrete, MultiDiscrete

N = 20_000
"""Samples per distribution test; a category with probability 1/k has relative std sqrt(k / N) <= 2.2%."""
COUNT_Z = 4.5
"""Each count may miss its expectation by this many binomial standard deviations (a 7e-6 chance)."""


def assert_counts_uniform(samples: torch.Tensor, values: list[int]) -> None:
    p = 1 / len(values)
    for v in values:
        count = int((samples == v).sum())
        assert abs(count - N * p) < COUNT_Z * math.sqrt(N * p * (1 - p)), f"value {v}: {count} of {N}"


# ---- sampling -------------------------------------------------------------------------------------------

def test_discrete_sample_in_range_and_uniform():
    space = Discrete(5, start=-2)
    a = space.sample(rng.key(0), N)
    assert a.shape == (N,) and a.dtype == torch.int64
    assert_counts_uniform(a, list(range(-2, 3)))
    space.check(a, N, "cpu")


def test_discrete_mask_is_respected():
    space = Discrete(4)
    mask = torch.zeros(N, 4, dtype=torch.bool)
    mask[:, 1] = True
    mask[: N // 2, 3] = True  # first half: {1, 3}; second half: only {1}
    a = space.sample(rng.key(1), N, mask)
    assert torch.all(mask.gather(1, a[:, None]).squeeze(1)), "a masked-out action was sampled"
    assert torch.all(a[N // 2:] == 1)
    first = a[: N // 2]
    # uniform over the allowed pair: binomial(N/2, 1/2)
    assert abs(int((first == 3).sum()) - N / 4) < COUNT_Z * math.sqrt(N / 2 * 0.25)


def test_multidiscrete_sample_and_mask():
    space = MultiDiscrete((2, 3))
    a = space.sample(rng.key(2), N)
    assert a.shape == (N, 2) and a.dtype == torch.int64
    assert_counts_uniform(a[:, 0], [0, 1])
    assert_counts_uniform(a[:, 1], [0, 1, 2])
    mask = torch.tensor([True, False, False, True, True]).expand(N, 5)  # choice 0 -> {0}; choice 1 -> {1, 2}
    a = space.sample(rng.key(3), N, mask)
    assert torch.all(a[:, 0] == 0) and torch.all(a[:, 1] >= 1)
    space.check(a, N, "cpu")


def test_box_sample_bounded_and_unbounded():
    space = Box.of([-1.0, 0.0, -math.inf], [1.0, 5.0, math.inf])
    x = space.sample(rng.key(4), N)
    assert x.shape == (N, 3) and x.dtype == torch.float32
    assert torch.all((x[:, 0] >= -1) & (x[:, 0] <= 1)) and torch.all((x[:, 1] >= 0) & (x[:, 1] <= 5))
    # unbounded: standard normal, as Gymnasium; mean within COUNT_Z / sqrt(N), variance within 5%
    z = x[:, 2].double()
    assert abs(float(z.mean())) < COUNT_Z / math.sqrt(N)
    assert abs(float(z.var()) - 1) < 0.05  # std of the sample variance is sqrt(2 / N) = 1%: 5 sigma
    assert torch.isfinite(x).all()


def test_box_of_broadcasts_scalars():
    space = Box.of(-2.0, 2.0, shape=(2, 3))
    assert space.low == (-2.0,) * 6 and space.shape == (2, 3)
    lo, hi = space.bounds()
    assert lo.shape == (2, 3) and torch.all(hi == 2)


# ---- check() errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("space, good", [
    (Discrete(3), torch.zeros(4, dtype=torch.int64)),
    (MultiDiscrete((2, 3)), torch.zeros(4, 2, dtype=torch.int64)),
    (Box.of([-1.0], [1.0]), torch.zeros(4, 1)),
])
def test_check_wrong_shape_says_expected_and_got(space, good):
    space.check(good, 4, "cpu")
    bad = good[:3]
    with pytest.raises(ValueError) as e:
        space.check(bad, 4, "cpu")
    assert f"must have shape {[4, *space.shape]}" in str(e.value) and f"got {list(bad.shape)}" in str(e.value)


def test_check_wrong_dtype_says_expected_and_got():
    with pytest.raises(TypeError, match=r"integer dtype, got torch.float32"):
        Discrete(3).check(torch.zeros(4), 4, "cpu")
    with pytest.raises(TypeError, match=r"float dtype, got torch.int64"):
        Box.of([-1.0], [1.0]).check(torch.zeros(4, 1, dtype=torch.int64), 4, "cpu")
    with pytest.raises(TypeError, match=r"must be a torch.Tensor, got ndarray"):
        import numpy as np

        Discrete(3).check(np.zeros(4, dtype=np.int64), 4, "cpu")


def test_check_wrong_device_says_expected_and_got():
    # the comparison needs no CUDA device: actions on cpu, env said to run on cuda
    with pytest.raises(ValueError, match=r"on cpu but the env runs on cuda.*actions.to\('cuda'\)"):
        Discrete(3).check(torch.zeros(4, dtype=torch.int64), 4, "cuda")


def test_check_out_of_range_discrete_lists_the_values():
    with pytest.raises(ValueError, match=r"\[0, 3\); got values \[3, -1\]"):
        Discrete(3).check(torch.tensor([0, 3, 1, -1]), 4, "cpu")
    with pytest.raises(ValueError, match=r"\[5, 7\)"):
        Discrete(2, start=5).check(torch.tensor([5, 6, 4]), 3, "cpu")
    with pytest.raises(ValueError, match=r"nvec=\[2, 3\]; got rows \[\[0, 3\]\]"):
        MultiDiscrete((2, 3)).check(torch.tensor([[1, 2], [0, 3]]), 2, "cpu")


def test_check_nan_box_names_the_rows():
    actions = torch.zeros(5, 2)
    actions[3, 1] = math.nan
    with pytest.raises(ValueError, match=r"NaN \(at env rows \[3\]\)"):
        Box.of([-1.0, -1.0], [1.0, 1.0]).check(actions, 5, "cpu")
    # out-of-range continuous actions are legal: envs clip them (Gymnasium's documented dynamics)
    Box.of([-1.0, -1.0], [1.0, 1.0]).check(torch.full((5, 2), 7.0), 5, "cpu")


# ---- Gymnasium conversion -------------------------------------------------------------------------------

def test_to_gymnasium():
    gymnasium = pytest.importorskip("gymnasium")
    import numpy as np

    assert Discrete(3, start=1).to_gymnasium() == gymnasium.spaces.Discrete(3, start=1)
    assert MultiDiscrete((2, 3)).to_gymnasium() == gymnasium.spaces.MultiDiscrete([2, 3])
    box = Box.of([-1.0, -math.inf], [1.0, math.inf]).to_gymnasium()
    assert box == gymnasium.spaces.Box(np.array([-1, -np.inf], np.float32), np.array([1, np.inf], np.float32))
    assert box.dtype == np.float32
