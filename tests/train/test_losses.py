"""PPO losses (``nitro.train.ppo.ppo_losses``) against values worked out by hand, in brax's
``losses_test.py`` style: the arithmetic is in the comments."""

from __future__ import annotations

import math

import pytest
import torch

from nitro.train.ppo import normalize_advantages, ppo_losses

CLIP = 0.2
ATOL = 1e-6
"""float32 exp/log of ratios in [0.5, 1.5]: errors ~1e-7."""


def _policy_case():
    # Five samples; logprob - old_logprob = log(ratio), so the ratios are exactly what we wrote.
    ratio = torch.tensor([1.5, 0.5, 1.5, 0.5, 1.1], dtype=torch.float64)
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0, 2.0])
    old_logprob = torch.tensor([-1.0, -0.3, -2.0, -0.7, -1.2])
    logprob = (old_logprob.double() + ratio.log()).float().requires_grad_()
    return logprob, old_logprob, adv


def _values():
    # value, old value, return for four samples (old value 0 everywhere, clip 0.2)
    value = torch.tensor([1.0, 0.1, -0.5, 0.5], requires_grad=True)
    old_value = torch.zeros(4)
    ret = torch.tensor([1.0, 1.0, -1.0, -1.0])
    return value, old_value, ret


def test_clipped_surrogate():
    logprob, old_logprob, adv = _policy_case()
    value, old_value, ret = _values()
    pg_loss, _, approx_kl, clipfrac = ppo_losses(logprob, old_logprob, adv, value, old_value, ret, CLIP, True)
    # per sample: max(-A * r, -A * clip(r, 0.8, 1.2))
    #   r = 1.5, A = +1: max(-1.5, -1.2) = -1.2   (clipped: no more gain for pushing r up)
    #   r = 0.5, A = +1: max(-0.5, -0.8) = -0.5   (unclipped: the pessimistic bound keeps the loss)
    #   r = 1.5, A = -1: max( 1.5,  1.2) =  1.5   (unclipped)
    #   r = 0.5, A = -1: max( 0.5,  0.8) =  0.8   (clipped)
    #   r = 1.1, A = +2: max(-2.2, -2.2) = -2.2   (inside the clip range)
    # mean = (-1.2 - 0.5 + 1.5 + 0.8 - 2.2) / 5 = -1.6 / 5 = -0.32
    assert pg_loss.item() == pytest.approx(-0.32, abs=ATOL)
    # clip fraction: |r - 1| > 0.2 for 1.5, 0.5, 1.5, 0.5 but not 1.1 -> 4 / 5
    assert clipfrac.item() == pytest.approx(0.8, abs=ATOL)
    # approx KL = mean((r - 1) - log r):
    #   r = 1.5: 0.5 - 0.4054651 = 0.0945349 (twice)
    #   r = 0.5: -0.5 + 0.6931472 = 0.1931472 (twice)
    #   r = 1.1: 0.1 - 0.0953102 = 0.0046898
    #   sum = 0.5800540, mean = 0.1160108
    assert approx_kl.item() == pytest.approx(0.1160108, abs=ATOL)


def test_clipped_surrogate_gradient():
    logprob, old_logprob, adv = _policy_case()
    value, old_value, ret = _values()
    pg_loss, *_ = ppo_losses(logprob, old_logprob, adv, value, old_value, ret, CLIP, True)
    pg_loss.backward()
    # d/dlogprob of -A * r / 5 is -A * r / 5 where the unclipped term is the max, 0 where clipped:
    #   [0, -1 * 0.5 / 5, 1 * 1.5 / 5, 0, -2 * 1.1 / 5] = [0, -0.1, 0.3, 0, -0.44]
    torch.testing.assert_close(logprob.grad, torch.tensor([0.0, -0.1, 0.3, 0.0, -0.44]), rtol=0, atol=ATOL)


def test_value_loss_clipped():
    logprob, old_logprob, adv = _policy_case()
    value, old_value, ret = _values()
    _, v_loss, _, _ = ppo_losses(logprob, old_logprob, adv, value, old_value, ret, CLIP, True)
    # clipped value = old + clip(value - old, -0.2, 0.2); per sample max((v - R)^2, (v_clip - R)^2):
    #   v =  1.0, R =  1: max(0.00, (0.2 - 1)^2 = 0.64)  = 0.64   (the clipped term is larger)
    #   v =  0.1, R =  1: max(0.81, (0.1 - 1)^2 = 0.81)  = 0.81   (inside the clip range)
    #   v = -0.5, R = -1: max(0.25, (-0.2 + 1)^2 = 0.64) = 0.64
    #   v =  0.5, R = -1: max(2.25, (0.2 + 1)^2 = 1.44)  = 2.25
    # 0.5 * mean = 0.5 * 4.34 / 4 = 0.5425
    assert v_loss.item() == pytest.approx(0.5425, abs=ATOL)
    v_loss.backward()
    # gradient 0.5 * 2 * (v - R) / 4 where the unclipped term wins, else 0 (the clipped value is constant):
    #   [0, (0.1 - 1) / 4, 0, (0.5 + 1) / 4] = [0, -0.225, 0, 0.375]
    torch.testing.assert_close(value.grad, torch.tensor([0.0, -0.225, 0.0, 0.375]), rtol=0, atol=ATOL)


def test_value_loss_unclipped():
    logprob, old_logprob, adv = _policy_case()
    value, old_value, ret = _values()
    _, v_loss, _, _ = ppo_losses(logprob, old_logprob, adv, value, old_value, ret, CLIP, False)
    # 0.5 * mean((v - R)^2) = 0.5 * (0 + 0.81 + 0.25 + 2.25) / 4 = 0.5 * 3.31 / 4 = 0.41375
    assert v_loss.item() == pytest.approx(0.41375, abs=ATOL)


def test_on_policy_ratio_is_one():
    # Right after a rollout logprob == old_logprob: r = 1, nothing clipped, KL 0, and the surrogate
    # equals -mean(A) = -(1 + 1 - 1 - 1 + 2) / 5 = -0.4.
    _, old_logprob, adv = _policy_case()
    value, old_value, ret = _values()
    pg_loss, _, approx_kl, clipfrac = ppo_losses(old_logprob, old_logprob, adv, value, old_value, ret, CLIP,
                                                 True)
    assert pg_loss.item() == pytest.approx(-0.4, abs=ATOL)
    assert approx_kl.item() == 0.0 and clipfrac.item() == 0.0
    assert math.isfinite(pg_loss.item())


def test_acting_weights_restrict_the_policy_terms():
    # turn-based envs: samples 1 and 3 were not the agent's turn (weight 0); the policy terms average the
    # others: pg (-1.2 + 1.5 - 2.2) / 3, clipped 2 of 3 (r = 1.5 twice), KL (0.0945349 * 2 + 0.0046898) / 3
    logprob, old_logprob, adv = _policy_case()
    value, old_value, ret = _values()
    weight = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0])
    pg_loss, v_loss, approx_kl, clipfrac = ppo_losses(logprob, old_logprob, adv, value, old_value, ret, CLIP, True,
                                                      weight)
    assert pg_loss.item() == pytest.approx(-1.9 / 3, abs=ATOL)
    assert clipfrac.item() == pytest.approx(2 / 3, abs=ATOL)
    assert approx_kl.item() == pytest.approx((0.0945349 * 2 + 0.0046898) / 3, abs=ATOL)
    assert v_loss.item() == pytest.approx(0.5425, abs=ATOL)  # the critic learns from every sample
    pg_loss.backward()
    assert logprob.grad[1] == 0 and logprob.grad[3] == 0


def test_advantages_normalized_over_acting_samples():
    # weights 1, 1, 1, 0: mean of 1, 2, 3 is 2, unbiased std 1; the unweighted sample is scaled alike
    adv = normalize_advantages(torch.tensor([1.0, 2.0, 3.0, 100.0]), torch.tensor([1.0, 1.0, 1.0, 0.0]))
    torch.testing.assert_close(adv, torch.tensor([-1.0, 0.0, 1.0, 98.0]), rtol=0, atol=1e-6)
