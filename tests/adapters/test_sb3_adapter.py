"""The Stable-Baselines3 VecEnv adapter: SB3's VecEnv conventions (as its DummyVecEnv follows them), its
wrappers, and PPO training through it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")
import gymnasium  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecCheckNan, VecMonitor, VecNormalize  # noqa: E402

import nitro  # noqa: E402
from nitro.adapters import SB3VecEnv  # noqa: E402

N = 4


def test_step_outputs_match_dummy_vec_env_conventions():
    ours = SB3VecEnv("CartPole-v1", num_envs=N, device="cpu", seed=0)
    ref = DummyVecEnv([lambda: gymnasium.make("CartPole-v1") for _ in range(N)])
    assert ours.observation_space == ref.observation_space and ours.action_space == ref.action_space
    assert ours.num_envs == ref.num_envs and ours.render_mode is None
    ours.seed(0)
    ref.seed(0)
    obs, ref_obs = ours.reset(), ref.reset()
    assert obs.shape == ref_obs.shape and obs.dtype == ref_obs.dtype
    done_infos, ref_done_infos = [], []
    for _ in range(100):
        actions = np.ones(N, dtype=np.int64)  # constant pushes end every episode within ~10 steps
        obs, rewards, dones, infos = ours.step(actions)
        ref_obs, ref_rewards, ref_dones, ref_infos = ref.step(actions)
        for a, b in ((obs, ref_obs), (rewards, ref_rewards), (dones, ref_dones)):
            assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
        assert isinstance(infos, list) and len(infos) == N
        assert [set(i) for i in infos if "terminal_observation" not in i] == \
               [{"TimeLimit.truncated"}] * int((~dones).sum())
        done_infos += [i for i, d in zip(infos, dones) if d]
        ref_done_infos += [i for i, d in zip(ref_infos, ref_dones) if d]
    assert done_infos and ref_done_infos
    assert {frozenset(i) for i in done_infos} == {frozenset(i) for i in ref_done_infos} == \
           {frozenset({"TimeLimit.truncated", "terminal_observation"})}
    for i in done_infos:
        assert i["terminal_observation"].shape == (4,) and i["terminal_observation"].dtype == np.float32
        assert i["TimeLimit.truncated"] is False  # toppled poles terminate


def test_terminal_observation_and_time_limit():
    envs = SB3VecEnv("Pendulum-v1", num_envs=N, device="cpu", seed=1, max_episode_steps=3)
    obs = envs.reset()
    actions = np.zeros((N, 1), dtype=np.float32)
    for t in range(3):
        last = obs
        obs, rewards, dones, infos = envs.step(actions)
        assert dones.all() == (t == 2) and rewards.dtype == np.float32
    for i in range(N):
        assert infos[i]["TimeLimit.truncated"] is True
        final = infos[i]["terminal_observation"]
        assert not np.array_equal(final, obs[i]) and not np.array_equal(final, last[i])
        assert abs(final[2]) <= 8  # a real Pendulum observation (angular velocity within max_speed)


def test_seed_makes_reset_reproducible():
    envs = SB3VecEnv("Acrobot-v1", num_envs=N, device="cpu")
    assert envs.seed(123) == [123] * N
    first = envs.reset()
    assert not np.array_equal(envs.reset(), first)  # the seed applies to one reset only (SB3's rule)
    envs.seed(123)
    assert np.array_equal(envs.reset(), first)
    other = SB3VecEnv("Acrobot-v1", num_envs=N, device="cpu", seed=123)
    assert np.array_equal(other.reset(), first)


def test_attributes_and_methods():
    envs = SB3VecEnv("CartPole-v1", num_envs=N, device="cpu")
    assert envs.get_attr("max_episode_steps") == [500] * N  # a params field
    assert envs.get_attr("tau", indices=[1, 2]) == [0.02, 0.02]
    assert envs.get_attr("render_mode") == [None] * N
    assert envs.has_attr("gravity") and not envs.has_attr("no_such_attribute")
    with pytest.raises(AttributeError, match="no attribute 'no_such_attribute'"):
        envs.get_attr("no_such_attribute")
    assert envs.env_is_wrapped(gymnasium.Wrapper) == [False] * N
    masks = envs.env_method("action_masks")
    assert len(masks) == N and all(m.shape == (2,) and m.all() for m in masks)
    assert envs.env_method("__repr__", indices=0) == [repr(envs.venv.env)]

    envs.set_attr("max_episode_steps", 2)  # rebuilds the env with the new params, for every env
    assert envs.get_attr("max_episode_steps") == [2] * N
    envs.reset()
    envs.step(np.zeros(N, dtype=np.int64))
    _, _, dones, infos = envs.step(np.zeros(N, dtype=np.int64))
    assert dones.all() and all(i["TimeLimit.truncated"] for i in infos)
    with pytest.raises(ValueError, match="can only be set for all of them"):
        envs.set_attr("max_episode_steps", 3, indices=[0])
    with pytest.raises(ValueError, match="changes the env's spaces"):
        envs.set_attr("x_threshold", 3.0)  # CartPole's observation bounds derive from it


def test_sb3_wrappers_accept_it():
    envs = VecNormalize(VecCheckNan(VecMonitor(SB3VecEnv("Pendulum-v1", num_envs=N, device="cpu",
                                                          max_episode_steps=20)), raise_exception=True))
    envs.reset()
    episodes = 0
    for _ in range(45):
        _, _, dones, infos = envs.step(np.stack([envs.action_space.sample() for _ in range(N)]))
        for info, done in zip(infos, dones):
            if done:
                assert info["episode"]["l"] == 20
                episodes += 1
    assert episodes == 2 * N
    nan_actions = np.full((N, 1), np.nan, dtype=np.float32)
    with pytest.raises(ValueError, match="found nan in actions"):  # VecCheckNan's own check
        envs.step(nan_actions)
    with pytest.raises(ValueError, match="Box actions contain NaN"):  # and nitro's, without the wrapper
        envs.unwrapped.step(nan_actions)


@pytest.fixture
def one_torch_thread():
    """SB3's small MLP gains nothing from intra-op threads, and on a busy 2-core machine their spin-waiting
    made this test 10-30x slower (measured 26 s vs 1.2 s for CartPole)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("env_id, total, params", [
    ("CartPole-v1", 4096, {}),
    ("Pendulum-v1", 1024, {"max_episode_steps": 100}),  # 128 steps per env: one whole episode each
])
def test_ppo_trains_through_the_adapter(env_id, total, params):
    envs = VecMonitor(SB3VecEnv(env_id, num_envs=8, device="cpu", seed=0, **params))
    model = PPO("MlpPolicy", envs, n_steps=128, batch_size=256, n_epochs=4, seed=0, device="cpu", verbose=0)
    model.learn(total_timesteps=total)
    assert model.num_timesteps >= total
    assert len(model.ep_info_buffer) > 0  # whole episodes were seen through terminal observations
    assert all(np.isfinite(info["r"]) for info in model.ep_info_buffer)


def test_wraps_an_existing_vec_env_and_rejects_bad_input():
    venv = nitro.make("MountainCar-v0", num_envs=3, device="cpu")
    envs = SB3VecEnv(venv)
    assert envs.num_envs == 3 and envs.venv is venv
    with pytest.raises(ValueError, match="seed a given VecEnv through reset"):
        SB3VecEnv(venv, seed=1)
    envs.reset()
    with pytest.raises(ValueError, match=r"lie in \[0, 3\)"):
        envs.step(np.array([0, 1, 3]))
    with pytest.raises(RuntimeError, match="step_async"):
        envs.step_wait()
    envs.set_options({"low": -0.5})
    with pytest.raises(ValueError, match="no reset options"):
        envs.reset()


AOT_OBS_ATOL = 1e-4
"""Observations of the ahead-of-time compiled step against eager stepping: Inductor's sine, cosine and
fused multiply-adds round an ulp or so apart (6e-8 near 1), which the pole's dynamics grow over an
episode (2.3e-6 at most over 300 steps of 8 envs, measured)."""


def test_aot_step_steps_as_eager_and_loads_from_its_cache(tmp_path, monkeypatch):
    """mode="aot" (the step compiled ahead of time: SB3's fast path on a CPU) plays the same episodes as
    eager stepping (rewards, dones and infos identical), a second env loads the library from the cache
    without compiling, actions of another dtype are refused, and a params change drops the library."""
    from nitro.core import fast

    monkeypatch.setenv("NITRO_CACHE_DIR", str(tmp_path))
    ours = SB3VecEnv("CartPole-v1", num_envs=8, device="cpu", seed=3, mode="aot")
    eager = SB3VecEnv("CartPole-v1", num_envs=8, device="cpu", seed=3)
    np.testing.assert_array_equal(ours.reset(), eager.reset())
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(200):
        actions = rng.integers(0, 2, 8)
        obs, reward, done, info = ours.step(actions)
        want_obs, want_reward, want_done, want_info = eager.step(actions)
        np.testing.assert_allclose(obs, want_obs, atol=AOT_OBS_ATOL, rtol=0)
        assert (reward == want_reward).all() and (done == want_done).all()
        for got, want in zip(info, want_info):
            assert got.keys() == want.keys() and got["TimeLimit.truncated"] == want["TimeLimit.truncated"]
            if "terminal_observation" in want:
                np.testing.assert_allclose(got["terminal_observation"], want["terminal_observation"], atol=AOT_OBS_ATOL)
        ended += int(done.sum())
    assert ended > 50  # random play ends an episode every ~20 steps: the reset path ran
    assert len(list((tmp_path / "aot").glob("*.pt2"))) == 1

    def no_compile(*args):
        raise AssertionError("the second env compiled again")

    monkeypatch.setattr(fast, "_aot_compile", no_compile)
    again = SB3VecEnv("CartPole-v1", num_envs=8, device="cpu", seed=3, mode="aot")
    again.reset()
    again.step(np.zeros(8, dtype=np.int64))
    with pytest.raises(ValueError, match="compiled this env's step for torch.int64 actions, got torch.int32"):
        again.venv.step(torch.zeros(8, dtype=torch.int32))
    again.set_attr("force_mag", 12.0)
    assert again.venv._aot is None  # the next step compiles for the new params
    with pytest.raises(ValueError, match="mode='aot' compiles a CPU step"):
        fast.handle_mode("aot", torch.device("cuda"))
