"""GAE known answers: ``nitro.train.ppo.gae`` against a plain-Python loop with terminations and
truncations mixed, a hand-worked example, and the trainer's bootstrap of truncated episodes from
their final observation (``Trainer._rollout_step``) and its advantages over a real rollout."""

from __future__ import annotations

import pytest
import torch
from train_helpers import tiny_config

from nitro.core import rng, tree
from nitro.train.ppo import Trainer, gae

ATOL = 1e-5
"""float32 GAE vs the float64 Python loop: |A| < ~30 here, 17 recurrence steps of ~1e-7 relative error."""


def reference_gae(rewards, values, terminated, truncated, final_values, next_value, gamma, lam):
    """Textbook GAE for one env, in plain Python floats.

    An episode ends after step t if it terminated or was truncated there. A terminated step has no
    future value; a truncated one has the value of the observation it was cut at (``final_values[t]``);
    otherwise the future value is that of the next step's observation (``next_value`` after the last).
    The lambda-chain never crosses an episode end.
    """
    T = len(rewards)
    adv = [0.0] * T
    running = 0.0
    for t in reversed(range(T)):
        if terminated[t]:
            future = 0.0
        elif truncated[t]:
            future = final_values[t]
        else:
            future = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * future - values[t]
        ended = terminated[t] or truncated[t]
        running = delta + (0.0 if ended else gamma * lam * running)
        adv[t] = running
    return adv


def trainer_gae(rewards, values, terminated, truncated, final_values, next_value, gamma, lam):
    """What the trainer does: add gamma * V(final_obs) to truncated (not terminated) steps' rewards,
    then run ``gae`` with dones = terminated | truncated."""
    bootstrap = gamma * final_values * (truncated & ~terminated)
    return gae(rewards + bootstrap, values, terminated | truncated, next_value, gamma, lam)


def test_hand_worked_example():
    # T = 3, one env, gamma = lambda = 0.5, V = 1 everywhere, V(next obs) = 2,
    # rewards [1, 2, 3], the episode ends (terminates) after step 1.
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.ones(3, 1)
    dones = torch.tensor([[False], [True], [False]])
    next_value = torch.tensor([2.0])
    # t = 2: delta = 3 + 0.5 * 2 - 1 = 3                 A2 = 3
    # t = 1: done, no future: delta = 2 + 0 - 1 = 1      A1 = 1 (the chain is cut: A2 does not flow back)
    # t = 0: delta = 1 + 0.5 * V1 - 1 = 0.5              A0 = 0.5 + 0.5 * 0.5 * A1 = 0.75
    adv = gae(rewards, values, dones, next_value, gamma=0.5, lam=0.5)
    torch.testing.assert_close(adv, torch.tensor([[0.75], [1.0], [3.0]]), rtol=0, atol=1e-7)


def test_hand_worked_truncation():
    # Same as above, but step 1 is truncated (time limit), not terminated, at an observation whose
    # value is 4. The trainer adds gamma * V(final_obs) = 0.5 * 4 = 2 to the reward of step 1:
    # t = 1: delta = (2 + 2) - 1 = 3                    A1 = 3 (still cut: the next obs is a new episode)
    # t = 0: delta = 1 + 0.5 * 1 - 1 = 0.5              A0 = 0.5 + 0.25 * 3 = 1.25
    # t = 2: unchanged                                   A2 = 3
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.ones(3, 1)
    terminated = torch.zeros(3, 1, dtype=torch.bool)
    truncated = torch.tensor([[False], [True], [False]])
    final_values = torch.full((3, 1), 4.0)
    adv = trainer_gae(rewards, values, terminated, truncated, final_values, torch.tensor([2.0]), 0.5, 0.5)
    torch.testing.assert_close(adv, torch.tensor([[1.25], [3.0], [3.0]]), rtol=0, atol=1e-7)


@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (1.0, 1.0), (0.9, 0.0), (0.5, 0.8)])
def test_matches_plain_loop_with_termination_truncation_mix(gamma, lam):
    T, N = 17, 6
    g = torch.Generator().manual_seed(0)
    rewards = torch.randn(T, N, generator=g)
    values = torch.randn(T, N, generator=g)
    final_values = torch.randn(T, N, generator=g)
    next_value = torch.randn(N, generator=g)
    terminated = torch.rand(T, N, generator=g) < 0.15
    truncated = torch.rand(T, N, generator=g) < 0.15
    # every kind of step occurs, including a step that is both terminated and truncated (the
    # termination wins: no bootstrap) and a done on the rollout's last step
    terminated[3, 0] = truncated[3, 0] = True
    terminated[T - 1, 1], truncated[T - 1, 2] = True, True
    assert (terminated & ~truncated).any() and (truncated & ~terminated).any()
    assert (~terminated & ~truncated).any()

    adv = trainer_gae(rewards, values, terminated, truncated, final_values, next_value, gamma, lam)
    for n in range(N):
        col = lambda x: x[:, n].tolist()
        want = reference_gae(col(rewards), col(values), col(terminated), col(truncated), col(final_values),
                             next_value[n].item(), gamma, lam)
        torch.testing.assert_close(adv[:, n], torch.tensor(want), rtol=0, atol=ATOL)


def test_lambda_one_gives_discounted_return_minus_value():
    # With lambda = 1 and no episode end, A_t + V_t is the discounted return bootstrapped from next_value.
    T, gamma = 5, 0.9
    rewards = torch.arange(1.0, T + 1).unsqueeze(1)  # 1, 2, 3, 4, 5
    values = torch.full((T, 1), 0.5)
    adv = gae(rewards, values, torch.zeros(T, 1, dtype=torch.bool), torch.tensor([10.0]), gamma, 1.0)
    ret = [sum(gamma**k * (t + k + 1) for k in range(T - t)) + gamma ** (T - t) * 10.0 for t in range(T)]
    torch.testing.assert_close(adv[:, 0] + 0.5, torch.tensor(ret), rtol=0, atol=ATOL)


def _trainer_for_bootstrap(obs_norm: bool, reward_scale: bool) -> Trainer:
    trainer = Trainer(tiny_config("cartpole", f"ppo.obs_norm={obs_norm}", f"ppo.reward_scale={reward_scale}",
                                  "ppo.gamma=0.9"))
    # non-trivial normalizers, so a wrongly (un)normalized final observation or reward shows
    trainer.obs_rms.mean.copy_(torch.tensor([0.1, -0.2, 0.05, 0.3]))
    trainer.obs_rms.var.copy_(torch.tensor([0.5, 2.0, 0.01, 3.0]))
    trainer.ret_rms.var.fill_(4.0)  # reward scale 1 / sqrt(4) = 0.5
    return trainer


@pytest.mark.parametrize("obs_norm,reward_scale", [(False, False), (True, True)])
def test_rollout_step_bootstraps_truncated_episodes_from_final_obs(obs_norm, reward_scale):
    """Envs 0 and 1 hit the 500-step limit on this step; envs 1 and 2 topple (env 1: both). Only env 0
    gets gamma * V(final_obs) added to its reward; every one of 0, 1, 2 is done."""
    trainer = _trainer_for_bootstrap(obs_norm, reward_scale)
    env, c = trainer.env, trainer.carry
    c.env_state.elapsed[:2] = env.params.max_episode_steps - 1
    c.env_state.theta[1:3] = 0.5  # 0.5 rad > 12 degrees: terminates whatever the action
    c.obs = env.observe(c.env_state).float()
    state_before = tree.clone(c.env_state)

    carry, record, _ = trainer._rollout_step(c)
    obs, action, logprob, value, reward, done, first, mask, acting = record
    assert acting is None  # CartPole: every env acts every step

    # the raw transition, recomputed independently (CartPole's step is deterministic given the action)
    raw_state, final_obs, raw_reward, terminated, truncated = env.step(state_before, action, rng.key(0))
    assert truncated[:2].all() and terminated[1:3].all() and not terminated[0] and not truncated[2:].any()
    assert not terminated[3:].any()
    norm = trainer.obs_rms.normalize if obs_norm else (lambda x: x)
    with torch.no_grad():
        v_final = trainer.policy.value(norm(final_obs))
    scale = 0.5 if reward_scale else 1.0
    want = raw_reward * scale
    want[0] += 0.9 * v_final[0]
    torch.testing.assert_close(reward, want, rtol=0, atol=1e-6)
    assert v_final[0].abs() > 1e-4  # the bootstrap term is not vacuously zero
    assert done.tolist() == [True, True, True] + [False] * (trainer.N - 3)
    # the next carry starts new episodes where one ended, and keeps the stepped state elsewhere
    assert torch.equal(carry.first, done)
    assert torch.equal(carry.env_state.elapsed[:3], torch.zeros(3, dtype=torch.int32))
    assert torch.equal(carry.obs[3:], final_obs[3:])
    assert not torch.equal(carry.obs[0], final_obs[0])


@pytest.mark.parametrize("lstm", [0, 8])
def test_trainer_advantages_match_plain_loop_over_a_rollout(lstm):
    """A real rollout with frequent truncations (4-step episode limit) and terminations (a loose
    policy topples the pole): the stored (already bootstrapped) rewards, values and dones, plus the
    value of the observation after the rollout, give the plain-loop advantages and returns."""
    trainer = Trainer(tiny_config("cartpole", "env.params.max_episode_steps=4", f"policy.lstm={lstm}",
                                  "policy.bptt=8", "ppo.obs_norm=true"))
    trainer.collect()
    trainer.compute_advantages()
    b, c, p = trainer.buf, trainer.carry, trainer.cfg.ppo
    assert b.dones.any() and not b.dones.all()
    with torch.no_grad():
        next_value = trainer.policy.value(trainer.obs_rms.normalize(c.obs), c.hidden, c.first)
    no = torch.zeros(trainer.T, dtype=torch.bool).tolist()
    for n in range(trainer.N):
        col = lambda x: x[:, n].tolist()
        want = reference_gae(col(b.rewards), col(b.values), col(b.dones), no, no, next_value[n].item(),
                             p.gamma, p.gae_lambda)
        torch.testing.assert_close(b.advantages[:, n], torch.tensor(want), rtol=0, atol=ATOL)
    torch.testing.assert_close(b.returns, b.advantages + b.values, rtol=0, atol=0)
