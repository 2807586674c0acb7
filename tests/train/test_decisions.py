"""The decision layout (``ppo.decisions``, nitro/train/decisions.py): each seat's decisions packed into
slots, rewards summed onto the seat's last decision, GAE over each seat's decisions, the open last decision
carried into the next rollout. Known answers: a tiny turn-based env worked by hand over two rollouts, and
Skull King's rollouts against a plain-Python repacking of the same steps' rows."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from train_helpers import QUIET, tiny_config

from nitro.core import agents, registry
from nitro.core.env import Env
from nitro.core.spaces import Box, Discrete
from nitro.train import config as C
from nitro.train import decisions
from nitro.train.config import ConfigError
from nitro.train.ppo import Trainer

ATOL = 1e-5
"""float32 sums and GAE recurrences of a few dozen terms of size < 100 against Python floats."""


@dataclass(frozen=True)
class TakeTurnsParams:
    pass


@dataclass
class TakeTurnsState:
    t: torch.Tensor
    """[N] int64 the step of the episode (0-4)."""


class TakeTurns(Env[TakeTurnsState, TakeTurnsParams]):
    """Two seats, five-step episodes: both decide at step 0 (a bid), then seat 0 at steps 1 and 3 and
    seat 1 at steps 2 and 4. Every step pays seat 0 (t + 1) and seat 1 10 (t + 1), whoever acts;
    actions change nothing. Observations: (t, seat); action 1 is legal only where the seat acts."""

    Params = TakeTurnsParams
    observation_space = Box.of(0.0, 4.0, (2,))
    action_space = Discrete(2)
    num_agents = 2
    agent_team = (0, 1)
    truncates = False

    def reset(self, key, num_envs, device):
        return TakeTurnsState(torch.zeros(num_envs, dtype=torch.int64, device=device))

    def step(self, state, action, key):
        t = state.t
        reward = torch.stack([t + 1.0, 10.0 * (t + 1)], 1).reshape(-1)
        nxt = TakeTurnsState(t + 1)
        done = nxt.t >= 5
        return nxt, self.observe(nxt), reward, done, torch.zeros_like(done)

    def observe(self, state):
        seat = agents.seats(state.t.shape[0], 2, state.t.device).float()
        return torch.stack([agents.per_agent(state.t.float(), 2), seat], 1)

    def acting(self, state):
        t = agents.per_agent(state.t, 2)
        seat = agents.seats(state.t.shape[0], 2, state.t.device)
        return (t == 0) | ((t > 0) & ((t - 1) % 2 == seat))

    def action_mask(self, state):
        acting = self.acting(state)
        return torch.stack([torch.ones_like(acting), acting], 1)


def _take_turns(*overrides: str) -> Trainer:
    if "TakeTurns-v0" not in {s.id for s in registry.registered()}:
        registry.register("TakeTurns-v0", TakeTurns)
    cfg = C.load("TakeTurns-v0", [*QUIET, "env.num_envs=1", "ppo.num_steps=8", "ppo.minibatches=1",
                                  "ppo.total_steps=64", "policy.hidden=[8]", "ppo.decisions=true", *overrides])
    trainer = Trainer(cfg)
    with torch.no_grad():  # V = 0.5 everywhere
        trainer.policy.critic_head.weight.zero_()
        trainer.policy.critic_head.bias.fill_(0.5)
    return trainer


def test_take_turns_packed_and_advantages_by_hand():
    """gamma = lambda = 0.5, V = 0.5. Rollout 1 (steps 0-7): a whole episode, then steps 0-2 of the next.
    Seat 0 decides at episode steps 0, 1, 3 | 0, 1; seat 1 at 0, 2, 4 | 0, 2. Each decision's reward is
    the sum until the seat's next decision (or the episode's end):
      seat 0: t0: 1 | t1: 2 + 3 = 5 | t3: 4 + 5 = 9, done | t0: 1 | t1: 2 + 3 = 5 and open (the seat has
              not decided again): not trained, carried over
      seat 1: t0: 10 + 20 = 30 | t2: 30 + 40 = 70 | t4: 50, done | t0: 30 | t2: 30, open
    GAE per decision, A_i = r_i + 0.5 V_next (not after done) - 0.5 + 0.25 A_next (A of a trained next):
      seat 0: A3 = 1 + 0.25 - 0.5 = 0.75 (slot 4 open: the chain stops) | A2 = 9 - 0.5 = 8.5 |
              A1 = 4.75 + 0.25 * 8.5 = 6.875 | A0 = 0.75 + 0.25 * 6.875 = 2.46875
      seat 1: A3 = 29.75 | A2 = 49.5 | A1 = 69.75 + 0.25 * 49.5 = 82.125 | A0 = 29.75 + 0.25 * 82.125 = 50.28125
    """
    trainer = _take_turns("ppo.gamma=0.5", "ppo.gae_lambda=0.5")
    b = trainer.buf
    assert trainer.slots == 9 and b.obs.shape[:2] == (10, 2)  # 1 + max_decisions(8) = 1 + 8, and the discard row
    trainer.collect()
    trainer.compute_advantages()
    assert b.count.tolist() == [5, 5]
    torch.testing.assert_close(b.rewards[:5].T, torch.tensor([[1.0, 5, 9, 1, 5], [30, 70, 50, 30, 30]]), rtol=0, atol=0)
    assert b.dones[:5].T.tolist() == [[False, False, True, False, False]] * 2
    assert b.trained.T.tolist() == [[True] * 4 + [False] * 5] * 2
    assert b.obs[:5, 0, 0].tolist() == [0, 1, 3, 0, 1] and b.obs[:5, 1, 0].tolist() == [0, 2, 4, 0, 2]
    assert b.masks[:5, :, 1].all()  # stored at decisions only: where action 1 is legal
    want = torch.tensor([[2.46875, 6.875, 8.5, 0.75], [50.28125, 82.125, 49.5, 29.75]])
    torch.testing.assert_close(b.advantages[:4].T, want, rtol=0, atol=ATOL)
    assert (b.advantages[4:9] == 0).all()
    torch.testing.assert_close(b.returns[:4], b.advantages[:4] + 0.5, rtol=0, atol=0)
    open_logprob, open_action = b.logprobs[4].clone(), b.actions[4].clone()

    # rollout 2 (steps 8-15): episode steps 3, 4, then a whole episode, then step 0 of the next.
    #   seat 0: the carried t1 decision gets nothing more (5): seat 0 decides again at t3 (4 + 5 = 9, done)
    #           | 1 | 5 | 9 done | t0: 1, open
    #   seat 1: the carried t2 decision gets 40 more (70) | t4: 50 done | 30 | 70 | 50 done | t0: 10, open
    trainer.collect()
    trainer.compute_advantages()
    assert b.count.tolist() == [6, 6]
    torch.testing.assert_close(b.rewards[:6].T, torch.tensor([[5.0, 9, 1, 5, 9, 1], [70, 50, 30, 70, 50, 10]]),
                               rtol=0, atol=0)
    assert b.dones[:6].T.tolist() == [[False, True, False, False, True, False]] * 2
    assert b.trained.T.tolist() == [[True] * 5 + [False] * 4] * 2
    # the carried decision keeps the log-prob and action of the policy that took it (PPO's ratio stays exact)
    assert torch.equal(b.logprobs[0], open_logprob) and torch.equal(b.actions[0], open_action)
    assert b.obs[0, 0].tolist() == [1, 0] and b.obs[0, 1].tolist() == [2, 1]
    # seat 0: A1 = 8.5; A0 = 5 + 0.25 - 0.5 + 0.25 * 8.5 = 6.875
    torch.testing.assert_close(b.advantages[:2, 0], torch.tensor([6.875, 8.5]), rtol=0, atol=ATOL)


def test_gae_by_hand_with_a_gap():
    """One column: a trained decision whose next slot is open gets no lambda-chain from it, and slots after
    the count are ignored whatever they hold. gamma = 1, lambda = 0.5, V = [1, 2, 3, 99]:
    slot 0: 1 + V1 - V0 = 2 + 0.5 * A1 | slot 1 (done): 3 - 2 = 1 | slot 2: open (count 3) -> 0."""
    rewards = torch.tensor([[1.0], [3.0], [7.0], [5.0]])
    values = torch.tensor([[1.0], [2.0], [3.0], [99.0]])
    dones = torch.tensor([[False], [True], [False], [True]])
    trained = decisions.trained(torch.tensor([3]), dones)
    assert trained[:, 0].tolist() == [True, True, False, False]
    adv = decisions.gae(rewards, values, dones, trained, gamma=1.0, lam=0.5)
    torch.testing.assert_close(adv[:, 0], torch.tensor([2.5, 1.0, 0.0, 0.0]), rtol=0, atol=0)


def _repack(steps, pending):
    """Plain Python: each learner slot's decisions from the per-step rows (acting, reward, done, value,
    logprob) of a rollout, starting from the carried decision ``pending`` (a dict or None per column)."""
    L = len(steps[0]["acting"])
    cols = []
    for col in range(L):
        seq = [dict(pending[col])] if pending[col] else []
        is_open = bool(pending[col])
        for s in steps:
            if s["acting"][col]:
                seq.append({"reward": 0.0, "done": False, "value": s["value"][col], "logprob": s["logprob"][col]})
                is_open = True
            if is_open:
                seq[-1]["reward"] += s["reward"][col]
                seq[-1]["done"] = s["done"][col]
                is_open = not s["done"][col]
        cols.append((seq, is_open))
    return cols


def _reference_gae(seq, is_open, gamma, lam):
    """Per-decision GAE of one column; the open last decision has none (None)."""
    adv = [None] * len(seq)
    nxt = None
    for i in reversed(range(len(seq))):
        d = seq[i]
        if i == len(seq) - 1 and is_open:
            continue
        future = 0.0 if d["done"] else gamma * seq[i + 1]["value"]
        delta = d["reward"] + future - d["value"]
        chain = 0.0 if d["done"] or nxt is None else gamma * lam * nxt
        adv[i] = delta + chain
        nxt = adv[i]
    return adv


@pytest.mark.parametrize("preset", ["skullking", "skullking_hierarchical"])
def test_skullking_rollouts_match_a_plain_repacking(preset):
    """Three rollouts of a Skull King preset (single rounds of 1-3 cards: many episode ends inside a
    rollout, decisions carried over): the packed buffers and advantages equal a plain-Python repacking of
    the same steps' per-row records and GAE over each seat's decisions."""
    trainer = Trainer(tiny_config(preset, "env.params.schedule=[1, 2, 3]", "env.params.round_weights=null",
                                  "ppo.gamma=0.9", "ppo.gae_lambda=0.8"))
    p, b, K = trainer.cfg.ppo, trainer.buf, trainer.slots
    assert p.decisions and K == 1 + trainer.env.max_decisions(trainer.T)
    steps: list = []
    inner = trainer.rollout_step

    def recording(c):
        c2, rec, stats = inner(c)
        _, _, logprob, value, reward, done, _, _, acting = rec
        steps.append({"acting": acting.tolist(), "reward": reward.tolist(), "done": done.tolist(),
                      "value": value.tolist(), "logprob": logprob.tolist()})
        return c2, rec, stats

    trainer.rollout_step = recording
    pending = [None] * trainer.L
    for _ in range(3):
        steps.clear()
        trainer.collect()
        trainer.compute_advantages()
        cols = _repack(steps, pending)
        carried = 0
        for col, (seq, is_open) in enumerate(cols):
            n = len(seq)
            assert b.count[col] == n
            for field, stored in (("reward", b.rewards), ("value", b.values), ("logprob", b.logprobs)):
                torch.testing.assert_close(stored[:n, col], torch.tensor([d[field] for d in seq]), rtol=0, atol=ATOL)
            assert b.dones[:n, col].tolist() == [d["done"] for d in seq]
            adv = _reference_gae(seq, is_open, p.gamma, p.gae_lambda)
            assert b.trained[:, col].tolist() == [a is not None for a in adv] + [False] * (K - n)
            got = b.advantages[:n, col].tolist()
            for a, g in zip(adv, got):
                assert a is None or abs(a - g) <= ATOL, (col, adv, got)
            pending[col] = seq[-1] if is_open else None
            carried += is_open
        assert carried > 0 and b.dones.any()  # both the carry-over and episode ends were exercised
        assert torch.equal(trainer.carry.pending.open, torch.tensor([x is not None for x in pending]))


def test_decisions_need_a_turn_based_env_and_no_lstm():
    with pytest.raises(ConfigError, match="turn-based"):
        Trainer(tiny_config("cartpole", "ppo.decisions=true"))
    with pytest.raises(ConfigError, match="policy.lstm=0"):
        tiny_config("skullking", "policy.lstm=16", "policy.bptt=16")


def test_an_undercounting_bound_is_an_error():
    """An env whose max_decisions is too small: the decisions beyond the slots are counted, and the next log
    stops the run with an error that names the bound."""
    trainer = _take_turns()
    trainer.env.max_decisions = lambda steps: 1  # seats decide up to 5 times in 8 steps
    trainer.slots = decisions.slots(1)
    trainer.buf = trainer._buffers()
    with pytest.raises(Exception, match="max_decisions"):
        trainer.train()


class Interrupt(Exception):
    pass


def test_resume_carries_the_open_decisions(tmp_path):
    """A decision-layout run stopped after its checkpoint and resumed ends bitwise equal to the same run
    uninterrupted: the decisions carried between rollouts (``Carry.pending``) are in the checkpoint."""
    def config():
        return tiny_config("skullking", "ppo.total_steps=512", "run.checkpoint_every=2", "run.log_every=1")

    straight = Trainer(config(), tmp_path / "straight")
    straight.train()

    def stop(m):
        if m["update"] == 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        Trainer(config(), tmp_path / "resumed").train(on_log=stop)
    resumed = Trainer(config(), tmp_path / "resumed", resume=tmp_path / "resumed")
    assert resumed.update == 2 and resumed.carry.pending.open.any()
    resumed.train()
    want, got = straight._state_tensors(), resumed._state_tensors()
    unequal = [k for k in want if not torch.equal(want[k], got[k])]
    assert not unequal, f"differ after resume: {unequal}"
