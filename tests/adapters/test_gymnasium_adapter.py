"""The Gymnasium VectorEnv adapter: Gymnasium 1.x's vector-env conventions, checked against its own vector
envs and run through its own vector wrappers and utilities."""

from __future__ import annotations

import numpy as np
import pytest
import torch

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import data_equivalence  # noqa: E402
from gymnasium.utils.performance import benchmark_vector_step  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402
from gymnasium.vector.utils import batch_space  # noqa: E402

import nitro  # noqa: E402
from nitro.adapters import GymnasiumVectorEnv  # noqa: E402

ENV_IDS = ["CartPole-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1", "Acrobot-v1"]
N = 4
STEPS = 250
LIMIT = 100
"""Episode limit in the API checks, so every env ends episodes within STEPS."""


def structure(x):
    """Types, dtypes and shapes of a (nested) info dict, for comparing with Gymnasium's own vector envs
    (object arrays: the structures of their non-None entries, whichever envs those are)."""
    if isinstance(x, dict):
        return {k: structure(v) for k, v in x.items()}
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            return ("object", x.shape, frozenset(structure(v) for v in x if v is not None))
        return ("ndarray", x.dtype, x.shape)
    return type(x).__name__


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_spaces(env_id):
    envs = GymnasiumVectorEnv(env_id, num_envs=N, device="cpu")
    ref = gymnasium.make(env_id)
    assert isinstance(envs, gymnasium.vector.VectorEnv)
    assert envs.single_observation_space == ref.observation_space
    assert envs.single_action_space == ref.action_space
    assert envs.observation_space == batch_space(ref.observation_space, N)
    assert envs.action_space == batch_space(ref.action_space, N)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert envs.num_envs == N and envs.render_mode is None


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_vector_api_conventions(env_id):
    envs = GymnasiumVectorEnv(env_id, num_envs=N, device="cpu", max_episode_steps=LIMIT)
    obs, infos = envs.reset(seed=123)
    assert isinstance(obs, np.ndarray) and obs.dtype == np.float32 and infos == {}
    assert obs in envs.observation_space
    envs.action_space.seed(123)
    done_seen = 0
    for _ in range(STEPS):
        obs, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())
        assert obs in envs.observation_space and obs.dtype == envs.observation_space.dtype
        assert rewards.shape == (N,) and rewards.dtype == np.float64
        assert terminations.shape == truncations.shape == (N,)
        assert terminations.dtype == truncations.dtype == np.bool_
        assert isinstance(infos, dict)
        done = terminations | truncations
        if not done.any():
            assert infos == {}
            continue
        done_seen += int(done.sum())
        assert np.array_equal(infos["_final_obs"], done) and np.array_equal(infos["_final_info"], done)
        assert infos["final_info"] == {}
        for i in range(N):
            final = infos["final_obs"][i]
            if done[i]:
                assert final in envs.single_observation_space and final.dtype == np.float32
            else:
                assert final is None
    assert done_seen > 0


def test_same_step_infos_are_shaped_like_sync_vector_env():
    """Infos of a step where episodes end are shaped like Gymnasium's SyncVectorEnv's in SAME_STEP mode."""
    ref = gymnasium.make_vec("CartPole-v1", num_envs=N, vectorization_mode="sync",
                             vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})
    ours = GymnasiumVectorEnv("CartPole-v1", num_envs=N, device="cpu")
    ref_result, our_result = [], []
    for envs, out in ((ref, ref_result), (ours, our_result)):
        envs.reset(seed=0)
        for _ in range(200):
            step = envs.step(np.array([1, 0, 1, 0]))  # constant pushes topple every pole in ~10 steps
            if step[2][0]:
                out.extend(step)
                break
    assert ref_result and our_result
    assert ref.metadata["autoreset_mode"] == ours.metadata["autoreset_mode"]
    assert structure(our_result[4]) == structure(ref_result[4])
    for ours_x, ref_x in zip(our_result[:4], ref_result[:4]):
        assert type(ours_x) is type(ref_x) and ours_x.dtype == ref_x.dtype and ours_x.shape == ref_x.shape


def test_seeding_determinism():
    def rollout(envs, seed):
        obs, _ = envs.reset(seed=seed)
        out = [obs]
        action_rng = np.random.default_rng(0)
        for _ in range(50):
            step = envs.step(action_rng.integers(0, 3, size=N))
            out.append(step)
        return out

    a = GymnasiumVectorEnv("Acrobot-v1", num_envs=N, device="cpu")
    b = GymnasiumVectorEnv("Acrobot-v1", num_envs=N, device="cpu")
    assert data_equivalence(rollout(a, 42), rollout(b, 42), exact=True)
    assert data_equivalence(rollout(a, 42), rollout(a, 42), exact=True)  # reset(seed) restarts the stream
    assert not data_equivalence(rollout(a, 42)[0], rollout(a, 43)[0], exact=True)
    assert a.np_random_seed == 43  # the base class's generator is seeded too
    first, _ = a.reset(seed=7)
    again, _ = a.reset()  # unseeded: new episodes, not a replay
    assert not np.array_equal(first, again)


def test_gymnasium_vector_wrappers_and_utilities():
    """Gymnasium's SAME_STEP-aware vector wrappers accept the adapter and read its outputs correctly."""
    envs = gymnasium.wrappers.vector.RecordEpisodeStatistics(GymnasiumVectorEnv("CartPole-v1", N, "cpu"))
    envs = gymnasium.wrappers.vector.NormalizeReward(envs)
    # (observation wrappers such as NormalizeObservation take only NEXT_STEP / DISABLED envs in Gymnasium 1.4)
    envs.reset(seed=1)
    envs.action_space.seed(1)
    episodes = []
    for _ in range(300):
        _, _, terminations, truncations, infos = envs.step(envs.action_space.sample())
        if "episode" in infos:
            done = terminations | truncations
            assert np.array_equal(infos["_episode"], done)
            # CartPole pays 1 per step, so an episode's return equals its length
            assert np.array_equal(infos["episode"]["r"][done], infos["episode"]["l"][done].astype(np.float64))
            episodes.extend(infos["episode"]["l"][done].tolist())
    assert len(episodes) > 10 and min(episodes) >= 8  # a random CartPole episode lasts at least 8 steps

    as_list = gymnasium.wrappers.vector.DictInfoToList(GymnasiumVectorEnv("Pendulum-v1", N, "cpu",
                                                                          max_episode_steps=2))
    as_list.reset(seed=0)
    as_list.step(as_list.action_space.sample())
    _, _, _, truncations, infos = as_list.step(as_list.action_space.sample())
    assert truncations.all() and len(infos) == N
    assert all(info["final_obs"].shape == (3,) for info in infos)

    sps = benchmark_vector_step(GymnasiumVectorEnv("CartPole-v1", N, "cpu"), target_duration=0.2, seed=0)
    assert sps > 0


def test_torch_arrays():
    envs = GymnasiumVectorEnv("MountainCarContinuous-v0", num_envs=N, device="cpu", array="torch",
                              max_episode_steps=3)
    numpy_envs = GymnasiumVectorEnv("MountainCarContinuous-v0", num_envs=N, device="cpu", max_episode_steps=3)
    obs, _ = envs.reset(seed=5)
    np_obs, _ = numpy_envs.reset(seed=5)
    assert isinstance(obs, torch.Tensor) and obs.device == envs.device
    assert np.array_equal(obs.numpy(), np_obs)
    for t in range(3):
        actions = torch.full((N, 1), 0.5)
        obs, rewards, terminations, truncations, infos = envs.step(actions)
        np_obs, np_rewards, *_ = numpy_envs.step(actions.numpy())  # host arrays work too
        assert all(isinstance(x, torch.Tensor) for x in (obs, rewards, terminations, truncations))
        assert np.array_equal(obs.numpy(), np_obs) and np.allclose(rewards.numpy(), np_rewards)
        assert torch.equal(infos["_final_obs"], terminations | truncations)
        assert infos["final_obs"].shape == obs.shape  # dense: present every step
    assert truncations.all() and not torch.equal(infos["final_obs"], obs)


def test_wraps_an_existing_vec_env_and_rejects_bad_input():
    venv = nitro.make("CartPole-v1", num_envs=3, device="cpu", seed=9)
    envs = GymnasiumVectorEnv(venv)
    assert envs.num_envs == 3 and envs.venv is venv
    with pytest.raises(ValueError, match="num_envs=5 but the given VecEnv has 3"):
        GymnasiumVectorEnv(venv, num_envs=5)
    with pytest.raises(TypeError, match="params"):
        GymnasiumVectorEnv(venv, tau=0.01)
    with pytest.raises(ValueError, match="array must be one of"):
        GymnasiumVectorEnv("CartPole-v1", array="jax")
    with pytest.raises(ValueError, match="no reset options"):
        envs.reset(options={"low": -0.1})
    envs.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \[3\]"):
        envs.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(TypeError, match="integer dtype"):
        envs.step(np.zeros(3, dtype=np.float32))
    envs.step([0, 1, 0])  # a list of ints is a valid batch
