"""FlatAdam equals torch.optim.Adam step for step; ``apply=False`` changes nothing; the running
mean/variance merge equals the statistics of the concatenated stream."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from nitro.train.optim import FlatAdam, RunningMeanStd

STEPS = 10
RTOL, ATOL = 1e-6, 1e-6
"""FlatAdam computes sqrt(v / bias2) + eps where torch computes sqrt(v) / sqrt(bias2) + eps: the same
number up to float32 rounding. Parameters of magnitude ~1 have an ulp of 1.2e-7; after 10 steps they
differ by at most a few ulps (1.7e-7 seen), so 1e-6 absolute."""


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.LayerNorm(16), nn.Linear(16, 3))


def _loss(model, step):
    g = torch.Generator().manual_seed(100 + step)
    x, y = torch.randn(32, 5, generator=g), torch.randn(32, 3, generator=g)
    return ((model(x) - y) ** 2).mean()


@pytest.mark.parametrize("lr,betas,eps", [(1e-2, (0.9, 0.999), 1e-8), (3e-4, (0.8, 0.99), 1e-5)])
def test_flat_adam_equals_torch_adam(lr, betas, eps):
    ours, ref = _model(), _model()
    ref.load_state_dict(copy.deepcopy(ours.state_dict()))
    flat = FlatAdam(ours, lr, betas=betas, eps=eps)
    adam = torch.optim.Adam(ref.parameters(), lr=lr, betas=betas, eps=eps)
    for step in range(STEPS):
        flat.zero_grad()
        _loss(ours, step).backward()
        for p, q in zip(ours.parameters(), ref.parameters()):  # the same gradient for both optimizers
            q.grad = p.grad.clone()
        flat.step()
        adam.step()
        for p, q in zip(ours.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, rtol=RTOL, atol=ATOL)
    state = [adam.state[q] for q in ref.parameters()]
    torch.testing.assert_close(flat.exp_avg, torch.cat([s["exp_avg"].flatten() for s in state]),
                               rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(flat.exp_avg_sq, torch.cat([s["exp_avg_sq"].flatten() for s in state]),
                               rtol=RTOL, atol=ATOL)
    assert flat.step_count.item() == STEPS
    # the parameters really are views of the flat buffer (what the all-reduce and checkpoints rely on)
    assert all(p.data_ptr() >= flat.flat.data_ptr() for p in ours.parameters())
    torch.testing.assert_close(torch.cat([p.detach().flatten() for p in ours.parameters()]), flat.flat,
                               rtol=0, atol=0)


@pytest.mark.parametrize("grad_kind", ["finite", "nan"])
def test_apply_false_leaves_everything_unchanged(grad_kind):
    model = _model()
    flat = FlatAdam(model, 1e-2)
    for step in range(3):  # some optimizer history first
        flat.zero_grad()
        _loss(model, step).backward()
        flat.step()
    before = {k: v.clone() for k, v in {"flat": flat.flat, **flat.state()}.items()}
    flat.zero_grad()
    _loss(model, 3).backward()
    if grad_kind == "nan":
        flat.grad[::7] = float("nan")
    flat.step(apply=torch.tensor(False))
    after = {"flat": flat.flat, **flat.state()}
    for k in before:
        assert torch.equal(before[k], after[k]), k
    # and apply=True is an ordinary step
    flat.grad.nan_to_num_(0.0)
    flat.step(apply=torch.tensor(True))
    assert flat.step_count.item() == 4 and not torch.equal(before["flat"], flat.flat)


def test_apply_true_equals_plain_step():
    a, b = _model(), _model()
    fa, fb = FlatAdam(a, 1e-2), FlatAdam(b, 1e-2)
    for step in range(3):
        for m, f in ((a, fa), (b, fb)):
            f.zero_grad()
            _loss(m, step).backward()
        fa.step()
        fb.step(apply=torch.tensor(True))
        torch.testing.assert_close(fa.flat, fb.flat, rtol=0, atol=0)


def test_running_mean_std_merges_batches_like_one_stream():
    g = torch.Generator().manual_seed(0)
    batches = [torch.randn(n, 3, generator=g) * 2 + 1 for n in (100, 37, 512)]
    rms = RunningMeanStd((3,), "cpu")
    for x in batches:
        rms.update_from_moments(x.mean(0), x.var(0, unbiased=False), x.shape[0])
    stream = torch.cat(batches)
    # the initial pseudo-count 1e-4 (mean 0, var 1) shifts the result by ~1e-4 / 649 relative
    torch.testing.assert_close(rms.mean, stream.mean(0), rtol=0, atol=1e-5)
    torch.testing.assert_close(rms.var, stream.var(0, unbiased=False), rtol=1e-4, atol=1e-5)
    assert abs(rms.count.item() - 649) < 1e-3
