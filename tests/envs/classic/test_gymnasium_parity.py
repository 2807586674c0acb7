"""nitro's classic-control envs against Gymnasium 1.4's, transition by transition (gymnax-style).

Each step, Gymnasium's state (float64) is injected into a nitro state (float32), both take the same random
action, and the transition is compared: observation, reward, terminated, truncated. Injection keeps float
error from piling up, so a mismatch points to one transition. Gymnasium envs come from ``gymnasium.make(id)``,
so truncation is its ``TimeLimit``; nitro truncates inside ``env.step``.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass

import gymnasium
import numpy as np
import pytest
import torch

import nitro
from nitro.core import rng, tree
from nitro.core.env import autoreset_step

from state_translate import TRANSLATIONS, gym_to_nitro, nitro_to_gym, physics_of, termination_margin

ENV_IDS = list(TRANSLATIONS)
SEED = 20240611  # fixed: every draw below (actions, resets, nitro keys) is reproducible

# Tolerances. Gymnasium steps a float64 state; nitro steps the same state rounded to float32 (relative
# error 6e-8) in float32 arithmetic, and both round the observation to float32. The worst case is Pendulum,
# whose angle th is never wrapped (as in Gymnasium): within a 200-step episode |th| <= pi + 200 * 8 * 0.05
# = 83 rad, where float32 spacing is 7.6e-6, so rounding th moves cos(th) / sin(th) by up to 3.8e-6 and the
# cost angle_normalize(th)**2 (<= pi**2) by up to 2 * pi * 3.8e-6 = 2.4e-5. Elsewhere one step amplifies the
# rounding a few times at most. Measured maxima on this suite are given per constant.
OBS_RTOL = 1e-5
OBS_ATOL = 1e-5
"""Observations: 3.8e-6 worst case (above); measured max 1.7e-6 (Pendulum), 9.5e-7 (Acrobot), <= 2.4e-7
elsewhere."""
REWARD_RTOL = 1e-5
REWARD_ATOL = 5e-5
"""Rewards: 2.4e-5 worst case (Pendulum, above); measured max 1.2e-5 (Pendulum), 3.6e-6
(MountainCarContinuous's action cost), 0 for the constant rewards."""
BOUNDARY_ATOL = 1e-5
"""terminated may differ only where Gymnasium's next state lies within this distance of the termination
boundary (the float32 state can land on the other side: state errors are <= ~1e-6, above); the closest
landing on this suite was 1.6e-5 away (MountainCarContinuous), so none is exempt."""
MAX_BOUNDARY_FLIPS = 0.001
"""...and at most this fraction of transitions may differ that way (a near-boundary landing is a ~1e-4
chance per crossing)."""

LANES = 32
"""Gymnasium envs stepped in lockstep; nitro steps them as one batch of 32."""
MIN_EPISODES = 20
"""Every env must finish at least this many episodes, with both terminations and truncations among them."""


@dataclass(frozen=True)
class Case:
    steps: int
    """Lockstep steps: more than one full episode, so lanes that start normally reach the time limit."""
    near_end_options: dict | None
    """Gymnasium reset options for episodes started close to termination (None: the env never terminates)."""
    action_scale: float = 1.0
    """Continuous actions are drawn uniform in +-action_scale * high, beyond the bounds, to exercise
    clipping."""


CASES = {
    "CartPole-v1": Case(560, {"low": -0.2, "high": 0.2}),
    "MountainCar-v0": Case(260, {"low": 0.42, "high": 0.6}),
    "MountainCarContinuous-v0": Case(1060, {"low": 0.4, "high": 0.6}, action_scale=1.5),
    "Pendulum-v1": Case(260, None, action_scale=1.5),
    "Acrobot-v1": Case(560, {"low": -2.5, "high": 2.5}),
}
LATE_START_STEPS = 20
"""A "late" episode starts with both step counters set up to this many steps before the limit, so every env
also truncates often (CartPole's random episodes never reach 500 steps on their own)."""


def make_gym(env_id: str) -> gymnasium.Env:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the passive env checker's notes on out-of-bound reset options
        return gymnasium.make(env_id)


def sample_actions(space: gymnasium.Space, np_rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    if isinstance(space, gymnasium.spaces.Discrete):
        return np_rng.integers(space.start, space.start + space.n, size=n)
    return np_rng.uniform(scale * space.low, scale * space.high, size=(n, *space.shape)).astype(np.float32)


def reset_lane(env_id: str, env: gymnasium.Env, np_rng: np.random.Generator, kind: str) -> None:
    case = CASES[env_id]
    seed = int(np_rng.integers(2**31))
    options = case.near_end_options if kind == "near_end" else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env.reset(seed=seed, options=options)
    if kind == "late":
        env._elapsed_steps = env._max_episode_steps - int(np_rng.integers(1, LATE_START_STEPS + 1))


def episode_kind(env_id: str, np_rng: np.random.Generator) -> str:
    kinds = ["default", "late"] + (["near_end"] if CASES[env_id].near_end_options else [])
    return kinds[int(np_rng.integers(len(kinds)))]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_spaces_match_gymnasium(env_id):
    env, ref = nitro.make_env(env_id), make_gym(env_id)
    assert env.observation_space.to_gymnasium() == ref.observation_space
    assert env.action_space.to_gymnasium() == ref.action_space
    assert env.params.max_episode_steps == ref.spec.max_episode_steps


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_transitions_match_gymnasium(env_id):
    case, translation = CASES[env_id], TRANSLATIONS[env_id]
    env = nitro.make_env(env_id)
    np_rng = np.random.default_rng(SEED)
    key = rng.key(SEED)
    refs = [make_gym(env_id) for _ in range(LANES)]
    for i, ref in enumerate(refs):  # half the lanes start a normal episode so they can run to the limit
        reset_lane(env_id, ref, np_rng, "default" if i < LANES // 2 else episode_kind(env_id, np_rng))

    episodes, terminations, truncations, flips, transitions = 0, 0, 0, 0, 0
    for t in range(case.steps):
        state = gym_to_nitro(env_id, refs)
        actions = sample_actions(refs[0].action_space, np_rng, LANES, case.action_scale)
        _, obs, reward, terminated, truncated = env.step(state, torch.as_tensor(actions), rng.fold_in(key, t))

        ref_out = [ref.step(a) for ref, a in zip(refs, actions)]
        ref_obs = np.stack([o[0] for o in ref_out])
        ref_reward = np.array([o[1] for o in ref_out], dtype=np.float64)
        ref_terminated = np.array([o[2] for o in ref_out])
        ref_truncated = np.array([o[3] for o in ref_out])
        margin = np.array([termination_margin(env_id, ref) for ref in refs])

        where = f"{env_id} step {t}"
        assert obs.dtype == torch.float32 and reward.dtype == torch.float32
        np.testing.assert_allclose(obs.numpy(), ref_obs, rtol=OBS_RTOL, atol=OBS_ATOL, err_msg=where)
        flipped = terminated.numpy() != ref_terminated
        assert np.all(margin[flipped] < BOUNDARY_ATOL), (
            f"{where}: terminated differs away from the boundary in lanes {np.flatnonzero(flipped).tolist()}:"
            f" nitro {terminated.numpy()[flipped]}, Gymnasium {ref_terminated[flipped]},"
            f" margins {margin[flipped]}")
        expected_reward = ref_reward + translation.termination_bonus * (
            terminated.numpy().astype(np.float64) - ref_terminated.astype(np.float64))
        np.testing.assert_allclose(reward.numpy(), expected_reward, rtol=REWARD_RTOL, atol=REWARD_ATOL,
                                   err_msg=where)
        np.testing.assert_array_equal(truncated.numpy(), ref_truncated, err_msg=where)

        transitions += LANES
        flips += int(flipped.sum())
        done = ref_terminated | ref_truncated
        episodes += int(done.sum())
        terminations += int(ref_terminated.sum())
        truncations += int((ref_truncated & ~ref_terminated).sum())
        for i in np.flatnonzero(done):
            reset_lane(env_id, refs[i], np_rng, episode_kind(env_id, np_rng))

    assert flips <= MAX_BOUNDARY_FLIPS * transitions
    assert episodes >= MIN_EPISODES, f"only {episodes} episodes finished"
    assert truncations > 0, "no truncation was compared"
    if case.near_end_options is not None:
        assert terminations > 0, "no termination was compared"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_natural_truncation_at_the_limit(env_id):
    """With no injected step count, nitro and Gymnasium truncate at the same step of a full episode."""
    env = nitro.make_env(env_id)
    limit = env.params.max_episode_steps
    ref = make_gym(env_id)
    ref.reset(seed=SEED)
    state = gym_to_nitro(env_id, [ref])
    key = rng.key(SEED)
    if env_id == "CartPole-v1":  # random actions fail within ~20 steps: balance with a PD rule instead
        policy = lambda s: np.array([int(s[2] + 0.5 * s[3] > 0)])  # noqa: E731
    elif isinstance(ref.action_space, gymnasium.spaces.Discrete):
        policy = lambda s: np.array([1])  # noqa: E731  (MountainCar/Acrobot: no push never terminates)
    else:
        policy = lambda s: np.zeros((1, 1), dtype=np.float32)  # noqa: E731
    for t in range(limit):
        action = policy(np.asarray(ref.unwrapped.state))
        state, _, _, terminated, truncated = env.step(state, torch.as_tensor(action), rng.fold_in(key, t))
        _, _, ref_terminated, ref_truncated, _ = ref.step(action[0])
        assert not ref_terminated and not bool(terminated), f"{env_id} terminated at step {t}"
        assert bool(truncated) == ref_truncated == (t == limit - 1), f"{env_id} step {t}"
        state = gym_to_nitro(env_id, [ref])


def _kolmogorov_critical(alpha: float) -> float:
    """c(alpha) of the asymptotic Kolmogorov distribution: P(sqrt(n) D_n > c) = alpha (first term)."""
    return math.sqrt(-0.5 * math.log(alpha / 2))


def _ks_uniform(x: np.ndarray, low: float, high: float) -> float:
    """One-sample Kolmogorov-Smirnov statistic of ``x`` against U(low, high)."""
    x = np.sort(x)
    n = len(x)
    cdf = (x - low) / (high - low)
    return float(max((np.arange(1, n + 1) / n - cdf).max(), (cdf - np.arange(n) / n).max()))


def _ks_two_sample(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    cdf_a, cdf_b = np.searchsorted(a, grid, "right") / len(a), np.searchsorted(b, grid, "right") / len(b)
    return float(np.abs(cdf_a - cdf_b).max())


RESET_SAMPLES = 100_000
"""nitro resets per env for the distribution tests."""
GYM_RESET_SAMPLES = 2_000
"""Gymnasium resets per env for the two-sample test (Python-speed)."""
ALPHA = 1e-3
"""Significance level of every statistical test below (each is deterministic under the fixed seed)."""
Z = 3.29
"""Two-sided normal quantile for ALPHA."""

# Gymnasium's documented reset distribution per state field (``physics_of``'s columns): (low, high) uniform,
# or a constant.
RESET_DISTRIBUTIONS = {
    "CartPole-v1": [(-0.05, 0.05)] * 4,
    "MountainCar-v0": [(-0.6, -0.4), 0.0],
    "MountainCarContinuous-v0": [(-0.6, -0.4), 0.0],
    "Pendulum-v1": [(-math.pi, math.pi), (-1.0, 1.0)],
    "Acrobot-v1": [(-0.1, 0.1)] * 4,
}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_distribution(env_id):
    env = nitro.make_env(env_id)
    state = env.reset(rng.key(SEED), RESET_SAMPLES, "cpu")
    assert all(getattr(state, c).shape == (RESET_SAMPLES,) and getattr(state, c).dtype == torch.float32
               for c in TRANSLATIONS[env_id].columns)
    assert state.elapsed.shape == (RESET_SAMPLES,) and state.elapsed.dtype == torch.int32
    assert torch.all(state.elapsed == 0)
    physics = physics_of(state).double().numpy()
    ref = make_gym(env_id)
    ref.reset(seed=SEED)
    ref_physics = []
    for _ in range(GYM_RESET_SAMPLES):
        ref.reset()
        ref_physics.append(np.asarray(ref.unwrapped.state, dtype=np.float64))
    ref_physics = np.stack(ref_physics)
    n, m = RESET_SAMPLES, GYM_RESET_SAMPLES
    c = _kolmogorov_critical(ALPHA)
    uniform_cols = []
    for j, dist in enumerate(RESET_DISTRIBUTIONS[env_id]):
        x, y = physics[:, j], ref_physics[:, j]
        name = f"{env_id} {TRANSLATIONS[env_id].columns[j]}"
        if not isinstance(dist, tuple):
            assert np.all(x == dist) and np.all(y == dist), name
            continue
        uniform_cols.append(j)
        low, high = dist
        width = high - low
        # range: inside the bounds, and reaching within 1e-4 of both ends (missing it has chance e^-10)
        assert x.min() >= low and x.max() <= high, name
        assert x.min() < low + 1e-4 * width and x.max() > high - 1e-4 * width, name
        # mean and variance against U(low, high): var(mean) = w^2 / (12 n); var(s^2) = (1/80 - 1/144) w^4 / n
        assert abs(x.mean() - (low + high) / 2) < Z * width / math.sqrt(12 * n), name
        assert abs(x.var() - width**2 / 12) < Z * width**2 * math.sqrt((1 / 80 - 1 / 144) / n), name
        # shape: KS against the documented CDF, and two-sample KS against Gymnasium's own resets
        assert _ks_uniform(x, low, high) < c / math.sqrt(n), name
        assert _ks_two_sample(x, y) < c * math.sqrt((n + m) / (n * m)), name
    # columns are drawn independently: pairwise correlation within Z / sqrt(n)
    if len(uniform_cols) > 1:
        corr = np.corrcoef(physics[:, uniform_cols].T)
        off_diagonal = corr[~np.eye(len(uniform_cols), dtype=bool)]
        assert np.abs(off_diagonal).max() < Z / math.sqrt(n), f"{env_id}: correlated reset columns {corr}"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_states_step_like_gymnasium(env_id):
    """nitro's fresh states, written into Gymnasium envs, step to the same transition (nitro -> Gymnasium)."""
    env = nitro.make_env(env_id)
    state = env.reset(rng.key(SEED), 8, "cpu")
    refs = [make_gym(env_id) for _ in range(8)]
    for ref in refs:
        ref.reset(seed=SEED)
    nitro_to_gym(env_id, state, refs)
    # the mapping round-trips
    assert torch.equal(physics_of(gym_to_nitro(env_id, refs)), physics_of(state))
    actions = sample_actions(refs[0].action_space, np.random.default_rng(SEED), 8, 1.0)
    _, obs, reward, terminated, truncated = env.step(state, torch.as_tensor(actions), rng.key(SEED))
    for i, ref in enumerate(refs):
        ref_obs, ref_reward, ref_terminated, ref_truncated, _ = ref.step(actions[i])
        np.testing.assert_allclose(obs[i].numpy(), ref_obs, rtol=OBS_RTOL, atol=OBS_ATOL)
        assert abs(float(reward[i]) - ref_reward) <= REWARD_ATOL + REWARD_RTOL * abs(ref_reward)
        assert bool(terminated[i]) == ref_terminated and bool(truncated[i]) == ref_truncated


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_autoreset_resets_exactly_the_done_envs(env_id):
    """``autoreset_step`` starts new episodes in the envs that ended, and only there, reporting final_obs."""
    env = nitro.make_env(env_id)
    n = 64
    state = env.reset(rng.key(SEED), n, "cpu")
    # every third env one step from the time limit, so some envs truncate and the others carry on
    elapsed = torch.where(torch.arange(n) % 3 == 0, env.params.max_episode_steps - 1, 5).to(torch.int32)
    state = dataclasses.replace(state, elapsed=elapsed)
    action = env.action_space.sample(rng.key(SEED + 1), n)
    key = rng.key(SEED + 2)

    raw_state, raw_obs, raw_reward, raw_terminated, raw_truncated = env.step(tree.clone(state), action,
                                                                             rng.split(key)[0])
    t = autoreset_step(env, state, action, key)
    done = t.terminated | t.truncated
    assert 0 < int(done.sum()) < n
    assert torch.equal(t.reward, raw_reward)
    assert torch.equal(t.terminated, raw_terminated) and torch.equal(t.truncated, raw_truncated)
    assert torch.equal(t.final_obs, raw_obs)  # the pre-reset observation, for every env
    # envs that go on are untouched: the raw step's state and observation, bit for bit
    keep = ~done
    for leaf, raw_leaf in zip(tree.leaves(t.state), tree.leaves(raw_state)):
        assert torch.equal(leaf[keep], raw_leaf[keep])
    assert torch.equal(t.obs[keep], raw_obs[keep])
    # done envs start afresh: step count 0, state inside the reset distribution, obs = observe(new state)
    assert torch.all(t.state.elapsed[done] == 0)
    for j, dist in enumerate(RESET_DISTRIBUTIONS[env_id]):
        col = physics_of(t.state)[done, j]
        if isinstance(dist, tuple):
            assert torch.all((col >= dist[0]) & (col <= dist[1]))
        else:
            assert torch.all(col == dist)
    assert torch.equal(t.obs[done], env.observe(t.state)[done])
    assert not torch.equal(t.obs[done], t.final_obs[done])
