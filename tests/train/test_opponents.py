"""Opponents in the batch (``nitro.train.opponents``): seating worked by hand, team scores, the stacked
policies against each policy run on its own (both methods), opponent draws, and who plays which row."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from nitro.core import rng
from nitro.core.spaces import Box, Discrete
from nitro.envs.connect_four import ConnectFour
from nitro.train.config import PolicyConfig
from nitro.train.opponents import METHODS, SELF, Opponents, PolicyStack, Seating
from nitro.train.policy import ActorCritic


@dataclasses.dataclass
class Seats:
    """A declaration only (Seating reads nothing else): ``num_agents`` seats in ``agent_team``."""

    num_agents: int
    agent_team: tuple


def test_learner_rows_first_then_opponents_env_major():
    seating = Seating(Seats(4, (0, 1, 0, 1)), 2, opponents=True, device="cpu")  # 2v2, seats alternate
    mine, theirs = seating.rows(torch.tensor([1, 0]))  # env 0: learner on team 1; env 1: team 0
    assert mine.tolist() == [1, 3, 4, 6] and theirs.tolist() == [0, 2, 5, 7]
    assert seating.learner_rows == 4 and seating.learner_teams(torch.tensor([1, 0])).tolist() == [1, 1, 0, 0]
    rows = seating.assemble(torch.tensor([10, 30, 40, 60]), torch.tensor([0, 20, 50, 70]), mine, theirs)
    assert rows.tolist() == [0, 10, 20, 30, 40, 50, 60, 70]


def test_pure_self_play_drives_every_row():
    seating = Seating(Seats(3, (0, 1, 2)), 2, opponents=False, device="cpu")
    mine, theirs = seating.rows(torch.zeros(2, dtype=torch.int64))
    assert seating.all_rows and mine.tolist() == list(range(6)) and theirs.numel() == 0


def test_team_scores_by_hand():
    two = Seating(Seats(4, (0, 1, 0, 1)), 2, opponents=True, device="cpu")
    # env 0: team 0 stands 1 + 1 = 2, team 1 stands 0: a win; env 1: 0.5 + 0 vs 0 + 0.5: a draw
    scores = two.scores(torch.tensor([1.0, 0.0, 1.0, 0.0, 0.5, 0.0, 0.0, 0.5]))
    assert scores.tolist() == [[1.0, 0.0], [0.5, 0.5]]
    # three players: 3 beats both (1), 1 beats nobody (0), 2 beats one of two (0.5); a tie counts half
    ffa = Seating(Seats(3, (0, 1, 2)), 2, opponents=True, device="cpu")
    assert ffa.scores(torch.tensor([3.0, 1.0, 2.0, 1.0, 1.0, 0.0])).tolist() == [[1.0, 0.0, 0.5], [0.75, 0.75, 0.0]]


def test_unequal_teams_are_refused_with_opponents():
    with pytest.raises(ValueError, match=r"teams of sizes \[2, 1\].*pure self-play"):
        Seating(Seats(3, (0, 0, 1)), 1, opponents=True, device="cpu")


POLICIES = {
    "categorical": (Discrete(5), PolicyConfig(hidden=[16, 16])),
    "layernorm-relu": (Discrete(5), PolicyConfig(hidden=[16, 8], activation="relu", layer_norm=True)),
    "gaussian": (Box.of(-1.0, 1.0, (2,)), PolicyConfig(hidden=[16])),
    "gaussian-state-dependent": (Box.of(-1.0, 1.0, (2,)), PolicyConfig(hidden=[16], log_std="state_dependent")),
}
OBS_DIM, K, ROWS = 6, 3, 32
TOL = 1e-5
"""float32 sums of 16 products in a different order (baddbmm vs linear): differences ~1e-7."""


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", sorted(POLICIES))
def test_stack_matches_each_policy_alone(method, name):
    space, cfg = POLICIES[name]
    policies = []
    for k in range(K):
        torch.manual_seed(k)
        policy = ActorCritic(OBS_DIM, space, cfg)
        with torch.no_grad():  # a non-trivial log-std too
            for p in policy.parameters():
                p.add_(0.1 * torch.randn_like(p))
        policies.append(policy)
    stack = PolicyStack(policies[0], K, OBS_DIM, obs_norm=True, method=method)
    means, variances = torch.randn(K, OBS_DIM), torch.rand(K, OBS_DIM) + 0.5
    for k, policy in enumerate(policies):
        stack.load_(k, policy.state_dict(), means[k], variances[k])
    obs = 3 * torch.randn(ROWS, OBS_DIM)
    with torch.no_grad():
        out = stack.outputs(obs)
        for k, policy in enumerate(policies):
            x = ((obs - means[k]) / torch.sqrt(variances[k] + 1e-8)).clamp(-10, 10)
            want = policy.actor(x)
            got = out[k] if not isinstance(out, tuple) else (out[0][k], out[1][k])
            torch.testing.assert_close(got, want, rtol=0, atol=TOL)
        member = torch.arange(ROWS) % K
        picked = stack.select(out, member)
        first = picked if not isinstance(picked, tuple) else picked[0]
        for r in range(ROWS):
            x = ((obs[r] - means[member[r]]) / torch.sqrt(variances[member[r]] + 1e-8)).clamp(-10, 10)
            want = policies[member[r]].actor(x[None])
            torch.testing.assert_close(first[r], (want if not isinstance(want, tuple) else want[0])[0], rtol=0,
                                       atol=TOL)
    assert not any(t.requires_grad for t in stack.tensors().values())


def test_stack_refuses_recurrent_policies():
    policy = ActorCritic(OBS_DIM, Discrete(3), PolicyConfig(hidden=[8], lstm=8))
    with pytest.raises(ValueError, match="policy.lstm=0"):
        PolicyStack(policy, 2, OBS_DIM, obs_norm=False)


def test_draws_follow_the_probabilities():
    opponents = Opponents(None, [lambda s, k: None] * 2, ActorCritic(4, Discrete(2), PolicyConfig()).dist, "cpu")
    opponents.probs.copy_(torch.tensor([0.5, 0.0, 0.5]) * 2)  # unnormalized weights work too
    ids = opponents.draw(rng.env_keys(rng.key(0), 40_000))
    freq = torch.bincount(ids, minlength=3).float() / 40_000
    # binomial standard error sqrt(0.25 / 40000) = 0.0025; 0.01 is 4 of them; id 1 has weight 0: never
    assert abs(freq[0] - 0.5) < 0.01 and freq[1] == 0 and abs(freq[2] - 0.5) < 0.01


def _column_policy(column: int) -> ActorCritic:
    """A Connect Four policy that plays ``column`` (its logits: 0 but 50 there; the trunk is ignored)."""
    policy = ActorCritic(84, Discrete(7), PolicyConfig(hidden=[8]))
    with torch.no_grad():
        policy.actor_head.weight.zero_()
        policy.actor_head.bias.zero_()
        policy.actor_head.bias[column] = 50.0
    return policy


def test_each_opponent_row_is_played_by_its_own_opponent():
    """Opponent ids 0 (the learner: column 5), 1 and 2 (stacked policies: columns 3 and 1), 3 and 4 (bots:
    columns 6 and 2), one per env, acting for player_1 while the learner sits on player_0."""
    env = ConnectFour()
    state = env.reset(rng.env_keys(rng.key(0), 5), 5, "cpu")
    learner = _column_policy(5)
    stack = PolicyStack(learner, 2, 84, obs_norm=False)
    stack.load_(0, _column_policy(3).state_dict())
    stack.load_(1, _column_policy(1).state_dict())
    bots = [lambda s, k: torch.full((10,), 6), lambda s, k: torch.full((10,), 2)]
    opponents = Opponents(stack, bots, learner.dist, "cpu")
    seating = Seating(env, 5, opponents=True, device="cpu")
    mine, theirs = seating.rows(torch.zeros(5, dtype=torch.int64))
    member = torch.arange(5)
    with torch.no_grad():
        action = opponents.act(state, theirs, env.observe(state)[theirs], env.action_mask(state)[theirs], member,
                               rng.env_keys(rng.key(1), 5), rng.env_keys(rng.key(2), 5), learner.actor)
    assert theirs.tolist() == [1, 3, 5, 7, 9] and action.tolist() == [5, 3, 1, 6, 2]
    assert SELF == 0
