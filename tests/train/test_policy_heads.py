"""policy.heads: actor towers per range of actions (Skull King's bid head beside its play head). The
towers must be independent networks (each range's logits depend on its own tower only, before and after
training steps), look like a plain MLP to every other reader (stacked snapshots by bmm and vmap), and
be refused where they cannot work."""

from __future__ import annotations

import pytest
import torch

from nitro.core.spaces import Discrete
from nitro.train.config import ConfigError, PolicyConfig, load
from nitro.train.opponents import METHODS, PolicyStack
from nitro.train.optim import FlatAdam
from nitro.train.policy import ActorCritic, tower_of_actions

BID = [75, 86]
CFG = PolicyConfig(hidden=[32, 16], heads={"bid": BID}, fused="false")


def test_tower_of_actions():
    towers = tower_of_actions(10, {"a": [2, 4], "b": [7, 10]})
    assert towers == [0, 0, 1, 1, 0, 0, 0, 2, 2, 2]


def _towers(policy: ActorCritic) -> list[list[torch.nn.Parameter]]:
    """The actor's linear layers in order: the trunk's, then the head (the towers are blocks of each)."""
    return [m for m in policy.actor_trunk if isinstance(m, torch.nn.Linear)] + [policy.actor_head]


def test_each_range_depends_on_its_own_tower_only():
    """Changing the bid tower's weights changes bid logits only, and the main tower's the others only."""
    torch.manual_seed(0)
    policy = ActorCritic(40, Discrete(102), CFG)
    obs = torch.randn(16, 40)
    before = policy.actor(obs)
    first, second, head = _towers(policy)
    with torch.no_grad():
        second.weight[16:, 32:] += 1.0  # the bid tower's block (rows and columns 16.. / 32.. of 2 x widths)
        second.bias[16:] += 1.0
    after = policy.actor(obs)
    bids = torch.zeros(102, dtype=torch.bool)
    bids[BID[0] : BID[1]] = True
    assert torch.equal(after[:, ~bids], before[:, ~bids])
    assert not torch.allclose(after[:, bids], before[:, bids])
    with torch.no_grad():
        first.weight[:32] += 1.0  # the main tower's first layer
    assert torch.equal(policy.actor(obs)[:, bids], after[:, bids])


def test_towers_stay_apart_under_training():
    """Adam steps on a loss over every logit keep the off-block weights exactly zero (their gradients are
    masked), so the towers never start to share."""
    torch.manual_seed(1)
    policy = ActorCritic(40, Discrete(102), CFG)
    opt = FlatAdam(policy, 1e-2)
    zero_before = [layer.weight == 0 for layer in _towers(policy)[1:]]
    for _ in range(5):
        out, value, _ = policy(torch.randn(32, 40))
        loss = (out.log_softmax(-1)[:, ::3].sum() + value.square().sum())
        opt.zero_grad()
        loss.backward()
        opt.step()
    for layer, zero in zip(_towers(policy)[1:], zero_before):
        assert (layer.weight[zero] == 0).all()
        assert (layer.weight[~zero] != 0).all()  # and the blocks did train (nonzero, as initialised)


@pytest.mark.parametrize("method", METHODS)
def test_stacked_snapshots_match(method):
    """A league's stacked copies (bmm over the plain trunk, or vmap) reproduce the hierarchical actor."""
    torch.manual_seed(2)
    policies = [ActorCritic(40, Discrete(102), CFG) for _ in range(3)]
    stack = PolicyStack(policies[0], 3, 40, obs_norm=False, method=method)
    for slot, pol in enumerate(policies):
        stack.load_(slot, pol.state_dict())
    obs = torch.randn(8, 40)
    out = stack.outputs(obs)
    for slot, pol in enumerate(policies):
        torch.testing.assert_close(out[slot], pol.actor(obs), rtol=1e-5, atol=1e-6)  # float32 matmul order


@pytest.mark.parametrize("override, message", [
    ("policy.heads={bid: [75, 86], x: [80, 90]}", "overlap"),
    ("policy.heads={bid: [75, 120]}", "reaches past SkullKing-v0's 102 actions"),
    ("policy.heads={bid: [9, 3]}", "must be \\[start, stop\\]"),
    ("policy.layer_norm=true", "policy.layer_norm does not go with policy.heads"),
    ("policy.lstm=8", "policy.lstm does not go with policy.heads"),
])
def test_config_refuses_bad_heads(override, message):
    with pytest.raises(ConfigError, match=message):
        load("skullking_hierarchical", [override, "run.device=cpu"])


def test_heads_need_discrete_actions():
    with pytest.raises(ConfigError, match="needs Discrete actions"):
        load("pendulum", ["policy.heads={a: [0, 1]}", "run.device=cpu"])
