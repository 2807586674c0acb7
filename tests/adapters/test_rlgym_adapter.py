"""NitroEngine: RLGym v2's own env, mutators, obs builder, action parser, rewards and conditions run
on nitro's simulator, beside the same RLGym env on the real RocketSim (RocketSimEngine)."""

from __future__ import annotations

import random

import numpy as np
import pytest

pytest.importorskip("rlgym.rocket_league.sim")
from rlgym.api import RLGym  # noqa: E402
from rlgym.rocket_league.action_parsers import LookupTableAction, RepeatAction  # noqa: E402
from rlgym.rocket_league.done_conditions import GoalCondition, NoTouchTimeoutCondition  # noqa: E402
from rlgym.rocket_league.obs_builders import DefaultObs  # noqa: E402
from rlgym.rocket_league.reward_functions import CombinedReward, GoalReward, TouchReward  # noqa: E402
from rlgym.rocket_league.sim import RocketSimEngine  # noqa: E402
from rlgym.rocket_league.state_mutators import FixedTeamSizeMutator, KickoffMutator, MutatorSequence  # noqa: E402

from nitro.adapters.rlgym import NitroEngine, game_state  # noqa: E402
from tests.envs.soccar.conftest import one_thread  # noqa: E402, F401  (autouse: small tensors, one thread)
from tests.envs.soccar.rl.states import random_state  # noqa: E402

THROTTLE_BOOST = 18  # RLGym's table: full throttle with boost, straight ahead


def rlgym_env(engine, blue=1, orange=1):
    """RLGym v2's quick-start env (rlgym.org), on ``engine``."""
    return RLGym(
        state_mutator=MutatorSequence(FixedTeamSizeMutator(blue, orange), KickoffMutator()),
        obs_builder=DefaultObs(zero_padding=None),
        action_parser=RepeatAction(LookupTableAction(), repeats=8),
        reward_fn=CombinedReward((GoalReward(), 10.0), (TouchReward(), 0.1)),
        termination_cond=GoalCondition(),
        truncation_cond=NoTouchTimeoutCondition(timeout_seconds=30),
        transition_engine=engine,
    )


@pytest.mark.parametrize("rlbot_delay,steps", [(True, 3), (False, 2)])
def test_rlgym_env_on_nitro_matches_rocketsim(rlbot_delay, steps):
    """The same kickoff (same shuffle) and actions: observations, rewards and done flags as on RocketSim.

    Cars drive at full throttle with boost for up to 24 ticks. Measured: positions agree to 7e-4 UU and
    velocities to 3e-4 UU/s after 32 ticks (float32 rounding of the ported physics). A tick more or less
    of input delay moves a car by ~8 UU (1000 UU/s over 1/120 s), so 1e-2 UU / 1e-2 UU/s (and the
    observations scaled by 1/2300: 1e-5) tell a wrong delay apart with ample room."""
    runs = {}
    for name, engine in (("rocketsim", RocketSimEngine(rlbot_delay)), ("nitro", NitroEngine(rlbot_delay))):
        random.seed(3)  # RLGym's KickoffMutator shuffles with Python's global random
        env = rlgym_env(engine)
        obs = [env.reset()]
        for _ in range(steps):
            obs_t, reward, terminated, truncated = env.step({a: np.array([THROTTLE_BOOST]) for a in env.agents})
            obs.append(obs_t)
        runs[name] = (obs, reward, terminated, truncated, env.state)
    (obs_r, rew_r, term_r, trunc_r, state_r), (obs_n, rew_n, term_n, trunc_n, state_n) = runs["rocketsim"], runs["nitro"]
    assert list(state_n.cars) == ["blue-0", "orange-0"] and state_n.tick_count == state_r.tick_count == 8 * steps
    for a, b in zip(obs_r, obs_n):
        for agent in a:
            np.testing.assert_allclose(b[agent], a[agent], atol=1e-5)
    assert rew_n == rew_r and term_n == term_r and trunc_n == trunc_r
    for agent, car in state_r.cars.items():
        ours = state_n.cars[agent]
        np.testing.assert_allclose(ours.physics.position, car.physics.position, atol=1e-2)
        np.testing.assert_allclose(ours.physics.linear_velocity, car.physics.linear_velocity, atol=1e-2)
        assert ours.boost_amount == pytest.approx(car.boost_amount, abs=1e-4)
        assert ours.on_ground == car.on_ground and ours.is_boosting == car.is_boosting
    # the cars did drive: well past a tick's worth of distance from their spots
    assert np.abs(state_n.cars["blue-0"].physics.linear_velocity).max() > 100


def test_set_state_matches_rocketsim_engine():
    """set_state of a 2v1 GameState with every car field set returns what RocketSimEngine returns."""
    state = random_state(1, 2, 1, seed=5)
    desired = game_state(state, 0)
    for car in desired.cars.values():  # fields RocketSim derives or normalises on set
        car.demo_respawn_timer = 0.0
        car.bump_victim_id = None
    desired.boost_pad_timers = np.where(np.arange(34) % 3 == 0, 4.0, 0.0).astype(np.float32)
    expected = RocketSimEngine().set_state(desired, {})
    got = NitroEngine().set_state(desired, {})
    assert list(got.cars) == list(expected.cars)
    np.testing.assert_array_equal(got.boost_pad_timers, expected.boost_pad_timers)
    # RocketSim keeps bodies in Bullet units (UU / 50): its round trip may move a float32 by an ulp (1e-7
    # relative); nitro stores the value as given
    np.testing.assert_allclose(got.ball.position, expected.ball.position, rtol=1e-6)
    fields = ("boost_amount", "boost_active_time", "handbrake", "has_jumped", "is_holding_jump", "is_jumping",
              "jump_time", "has_flipped", "has_double_jumped", "air_time_since_jump", "flip_time", "is_autoflipping",
              "autoflip_timer", "autoflip_direction", "supersonic_time", "wheels_with_contact", "team_num", "hitbox_type")
    for agent, car in expected.cars.items():
        ours = got.cars[agent]
        for name in fields:
            assert getattr(ours, name) == pytest.approx(getattr(car, name)), (agent, name)
        for name in ("position", "linear_velocity", "angular_velocity", "rotation_mtx"):
            np.testing.assert_allclose(getattr(ours.physics, name), getattr(car.physics, name), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ours.flip_torque, car.flip_torque, atol=1e-6)
