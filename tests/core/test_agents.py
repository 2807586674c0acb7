"""The multi-agent protocol: declarations, the env-major row layout through VecEnv and auto-reset,
per-row random streams, team sums, and turn-based acting flags, on a small turn-based game worked by
hand."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from nitro.core import agents
from nitro.core.env import Env, autoreset_step
from nitro.core.spaces import Box, Discrete
from nitro.core.vector import VecEnv

TARGET = 5


@dataclass(frozen=True)
class RaceParams:
    players: int = 3
    """Seats; seats alternate between team 0 and team 1."""


@dataclass
class RaceState:
    total: torch.Tensor
    """[N] int64 counter."""
    to_move: torch.Tensor
    """[N] int64 seat whose turn it is."""


class Race(Env[RaceState, RaceParams]):
    """Seats take turns adding 1 or 2 to a counter; the seat that brings it to TARGET or beyond wins
    for its team: +1 to each agent of that team, -1 to the others. Observation per agent: (total, is my
    turn). Adding 2 is illegal when the counter is at TARGET - 1 (an action mask to check)."""

    Params = RaceParams
    observation_space = Box.of([0.0, 0.0], [TARGET + 1.0, 1.0])
    action_space = Discrete(2, start=1)

    def __init__(self, params=None):
        super().__init__(params)
        self.num_agents = self.params.players
        self.agent_team = tuple(i % 2 for i in range(self.num_agents))

    def reset(self, key, num_envs, device):
        zero = torch.zeros(num_envs, dtype=torch.int64, device=device)
        return RaceState(zero, zero.clone())

    def acting(self, state):
        return agents.seats(state.total.shape[0], self.num_agents, state.total.device) == \
            agents.per_agent(state.to_move, self.num_agents)

    def step(self, state, action, key):
        a = self.num_agents
        mover = action.view(-1, a).gather(1, state.to_move.view(-1, 1)).squeeze(1)
        total = state.total + mover
        won = total >= TARGET
        team = torch.tensor(self.agent_team, device=total.device)
        winner_team = team[state.to_move]
        sign = torch.where(team.view(1, a) == winner_team.view(-1, 1), 1.0, -1.0)
        reward = (sign * won.view(-1, 1)).reshape(-1)
        nxt = RaceState(total, (state.to_move + 1) % a)
        return nxt, self.observe(nxt), reward, won, torch.zeros_like(won)

    def observe(self, state):
        turn = self.acting(state).float()
        return torch.stack([agents.per_agent(state.total, self.num_agents).float(), turn], -1)

    def action_mask(self, state):
        legal_two = agents.per_agent(state.total < TARGET - 1, self.num_agents)
        return torch.stack([torch.ones_like(legal_two), legal_two], -1)


def test_rows_are_env_major_and_done_flags_per_env():
    venv = VecEnv(Race(), num_envs=2, device="cpu", seed=0)
    obs, _ = venv.reset()
    assert venv.num_rows == 6 and obs.shape == (6, 2)
    assert venv.acting().tolist() == [True, False, False] * 2  # seat 0 of each env moves first
    # env 0: seat 0 adds 2; env 1: seat 0 adds 1 (rows of seats 1, 2 are ignored: they do not act)
    action = torch.tensor([2, 1, 1, 1, 2, 2])
    obs, reward, terminated, truncated, info = venv.step(action)
    assert obs[:, 0].tolist() == [2, 2, 2, 1, 1, 1]
    assert venv.acting().tolist() == [False, True, False] * 2
    assert reward.shape == (6,) and terminated.shape == truncated.shape == (2,)
    # env 0 goes 2 (seat 0) +2 (seat 1) +1 (seat 2) = 5: seat 2 (team 0) wins with seats 0 and 2
    venv.step(torch.tensor([1, 2, 1, 1, 1, 1]))
    obs, reward, terminated, _, info = venv.step(torch.tensor([1, 1, 1, 1, 1, 1]))
    assert terminated.tolist() == [True, False]
    assert reward.tolist() == [1, -1, 1, 0, 0, 0]
    assert info["final_obs"][:3, 0].tolist() == [5, 5, 5]  # the final counter, before the reset
    assert obs[:3, 0].tolist() == [0, 0, 0] and obs[3:, 0].tolist() == [3, 3, 3]
    assert agents.per_agent(terminated, 3).tolist() == [True] * 3 + [False] * 3


def test_autoreset_returns_the_final_state():
    env = Race(RaceParams(players=2))
    state = RaceState(torch.tensor([4, 1]), torch.tensor([1, 0]))
    t = autoreset_step(env, state, torch.tensor([1, 1, 1, 1]), torch.zeros(2, dtype=torch.int32))
    assert t.final_state.total.tolist() == [5, 2] and t.state.total.tolist() == [0, 2]
    assert t.reward.tolist() == [-1, 1, 0, 0]  # seat 1 (team 1) of env 0 won


def test_actions_are_checked_per_row():
    venv = VecEnv(Race(), num_envs=2, device="cpu")
    venv.reset()
    with pytest.raises(ValueError, match=r"shape \[6\] \(num_envs \* num_agents"):
        venv.step(torch.ones(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="must lie in"):
        venv.step(torch.zeros(6, dtype=torch.int64))


def test_sample_actions_uses_row_streams_and_masks():
    venv = VecEnv(Race(), num_envs=64, device="cpu", seed=3)
    venv.reset()
    venv.state = RaceState(torch.full((64,), TARGET - 1), torch.zeros(64, dtype=torch.int64))
    assert (venv.sample_actions() == 1).all()  # adding 2 is masked at TARGET - 1
    venv.state = RaceState(torch.zeros(64, dtype=torch.int64), torch.zeros(64, dtype=torch.int64))
    sample = venv.sample_actions().view(64, 3)
    # each seat draws from its own stream: the three seats of an env do not all agree in every env
    # (with independent fair coins, all 64 envs agreeing has probability 4^-64)
    assert not (sample == sample[:, :1]).all()


def test_row_keys_per_agent_and_identity_for_one_agent():
    keys = torch.tensor([11, 22], dtype=torch.int32)
    assert torch.equal(agents.row_keys(keys, 1), keys)
    rows = agents.row_keys(keys, 3)
    assert rows.shape == (6,) and len(set(rows.tolist())) == 6
    # row e * A + i depends on env e's key and seat i only (not on how many envs run beside it)
    assert torch.equal(agents.row_keys(keys[1:], 3), rows[3:])


def test_team_sums_and_seats():
    assert agents.seats(2, 3).tolist() == [0, 1, 2, 0, 1, 2]
    x = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert agents.team_sums(x, (0, 1, 0)).tolist() == [[4.0, 2.0], [10.0, 5.0]]
    assert agents.team_sums(x, (0, 1, 2, 3, 4, 5)).tolist() == [x.tolist()]


@pytest.mark.parametrize("num_agents, team, match", [
    (0, (), "num_agents must be an int >= 1"),
    (2, (0,), "tuple of 2 ints"),
    (2, (1, 0), "in order of first appearance, e.g. \\(0, 1\\)"),
    (3, [0, 1, 0], "tuple of 3 ints"),
])
def test_bad_declarations_are_explained(num_agents, team, match):
    env = Race()
    env.num_agents, env.agent_team = num_agents, team
    with pytest.raises(ValueError, match=match):
        VecEnv(env, num_envs=1, device="cpu")


def test_single_agent_defaults():
    from nitro.core.registry import make_env

    env = make_env("CartPole-v1")
    assert env.num_agents == 1 and env.agent_team == (0,)
    assert env.acting(None) is None and env.result(None) is None and env.bots() == {}
