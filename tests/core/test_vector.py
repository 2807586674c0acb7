"""The VecEnv handle: reset/step shapes, dtypes and devices, same-step auto-reset, seeding, input checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nitro
from nitro.core import agents, rng, tree
from nitro.core.env import autoreset_step
from nitro.envs.soccar.rl.done_conditions import TimeoutCondition

ENV_IDS = ["CartPole-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1", "Acrobot-v1"]
N = 16


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_and_step_shapes_dtypes_devices(env_id):
    env = nitro.make(env_id, num_envs=N, device="cpu", seed=1)
    obs_shape = (N, *env.single_observation_space.shape)
    obs, info = env.reset()
    assert obs.shape == obs_shape and obs.dtype == torch.float32 and obs.device == env.device
    assert info == {}
    for _ in range(3):
        actions = env.sample_actions()
        assert actions.shape == (N, *env.single_action_space.shape) and actions.device == env.device
        obs, reward, terminated, truncated, info = env.step(actions)
        assert obs.shape == obs_shape and obs.dtype == torch.float32
        assert reward.shape == (N,) and reward.dtype == torch.float32
        assert terminated.shape == truncated.shape == (N,)
        assert terminated.dtype == truncated.dtype == torch.bool
        assert info["final_obs"].shape == obs_shape
        assert all(t.device == env.device for t in (obs, reward, terminated, truncated, info["final_obs"]))


def test_final_obs_on_truncation():
    env = nitro.make("Pendulum-v1", num_envs=N, device="cpu", seed=2, max_episode_steps=5)
    env.reset()
    for t in range(5):
        obs, _, terminated, truncated, info = env.step(env.sample_actions())
        if t < 4:  # no episode has ended yet: final_obs is the observation itself
            assert not truncated.any() and torch.equal(info["final_obs"], obs)
    assert truncated.all() and not terminated.any()
    assert not torch.equal(info["final_obs"], obs)  # obs starts the new episodes, final_obs ends the old ones
    assert torch.all(env.state.elapsed == 0)


def test_final_obs_on_termination_only_for_done_envs():
    env = nitro.make("CartPole-v1", num_envs=N, device="cpu", seed=3)
    env.reset()
    push_right = torch.ones(N, dtype=torch.int64)
    for _ in range(200):  # pushing one way topples every pole within ~10 steps
        obs, _, terminated, _, info = env.step(push_right)
        if terminated.any():
            break
    assert terminated.any()
    final = info["final_obs"]
    assert torch.equal(final[~terminated], obs[~terminated])
    x_threshold, theta_threshold = env.params.x_threshold, env.params.theta_threshold_radians
    failed = (final[:, 0].abs() > x_threshold) | (final[:, 2].abs() > theta_threshold)
    assert torch.equal(failed, terminated)  # final_obs is the failing state; obs is a fresh one
    assert torch.all(obs[terminated].abs() <= env.params.reset_high)


def test_seeding_is_reproducible():
    def rollout(seed):
        env = nitro.make("Acrobot-v1", num_envs=4, device="cpu", seed=seed)
        out = [env.reset()[0]]
        for _ in range(5):
            out.append(env.step(env.sample_actions())[0])
        return torch.stack(out)

    assert torch.equal(rollout(5), rollout(5))
    assert not torch.equal(rollout(5), rollout(6))
    env = nitro.make("Acrobot-v1", num_envs=4, device="cpu", seed=0)
    assert torch.equal(env.reset(seed=5)[0], rollout(5)[0])  # reset(seed=...) reseeds the handle
    assert not torch.equal(env.reset()[0], rollout(5)[0])  # a later unseeded reset draws new states


def test_counts_take_integer_scalars_and_refuse_bools():
    """num_envs and seed accept any integer scalar (numpy's too) and refuse bools and floats."""
    env = nitro.make("CartPole-v1", num_envs=np.int64(8), device="cpu", seed=np.int32(3))
    assert env.num_envs == 8 and type(env.num_envs) is int
    assert torch.equal(env.reset()[0], nitro.make("CartPole-v1", num_envs=8, device="cpu", seed=3).reset()[0])
    with pytest.raises(TypeError, match="num_envs must be an int >= 1, got the bool True"):
        nitro.make("CartPole-v1", num_envs=True)
    with pytest.raises(TypeError, match=r"num_envs must be an int >= 1, got 8.0 \(float\)"):
        nitro.make("CartPole-v1", num_envs=8.0)
    with pytest.raises(ValueError, match="num_envs must be an int >= 1, got 0"):
        nitro.make("CartPole-v1", num_envs=0)
    with pytest.raises(TypeError, match="seed must be an int, got the bool"):
        nitro.make("CartPole-v1", num_envs=2, seed=False)


def test_errors():
    env = nitro.make("CartPole-v1", num_envs=4, device="cpu")
    with pytest.raises(RuntimeError, match="reset"):
        env.step(torch.zeros(4, dtype=torch.int64))
    env.reset()
    with pytest.raises(ValueError, match=r"shape \[4\]"):
        env.step(torch.zeros(3, dtype=torch.int64))
    with pytest.raises(TypeError, match="integer dtype"):
        env.step(torch.zeros(4))
    with pytest.raises(ValueError, match=r"lie in \[0, 2\)"):
        env.step(torch.full((4,), 2))
    cont = nitro.make("Pendulum-v1", num_envs=2, device="cpu")
    cont.reset()
    with pytest.raises(ValueError, match="NaN"):
        cont.step(torch.tensor([[0.0], [float("nan")]]))


SHORT_EPISODES = {"Soccar-v0": ({"truncation": "none", "termination": TimeoutCondition(3 * 8 / 120)}, 8)}
"""Envs whose episodes outlast the test's steps (or whose steps cost the CPU seconds): params that end an
episode within a few steps, and how many steps to take."""


@pytest.mark.parametrize("spec", nitro.registered(), ids=lambda s: s.id)
def test_the_lazy_reset_of_cpu_stepping_changes_nothing(spec):
    """On a CPU the handle skips the reset when no episode ended; every env steps exactly as with it."""
    env = nitro.make_env(spec.id)
    params, steps = SHORT_EPISODES.get(spec.id, ({}, 300))
    if hasattr(env.params, "max_episode_steps"):  # some episode ends within the test's steps
        params = {"max_episode_steps": 100}
    env = nitro.make_env(spec.id, **params)
    n = 8
    keys = rng.env_keys(rng.key(4, "cpu"), n)
    state = env.reset(keys, n, torch.device("cpu"))
    skipped = 0
    for t in range(steps):
        k = rng.fold_in(keys, t + 1)
        row_keys = agents.row_keys(rng.fold_in(k, 1), env.num_agents)
        actions = env.action_space.sample(row_keys, n * env.num_agents, env.action_mask(state))
        full, lazy = (autoreset_step(env, state, actions, rng.fold_in(k, 2), lazy=flag) for flag in (False, True))
        for a, b in zip(tree.leaves(tuple(full)), tree.leaves(tuple(lazy)), strict=True):
            assert torch.equal(a, b)
        skipped += not bool((full.terminated | full.truncated).any())
        state = full.state
    assert 0 < skipped < steps  # both branches ran

