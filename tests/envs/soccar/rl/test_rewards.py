"""Rewards and done conditions against RLGym v2's and rlgym-tools' own classes (run on states exported
from nitro), and GigaLearnCPP's rewards re-derived from Rewards/CommonRewards.h and ZeroSumReward.cpp."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest
import torch

from nitro.envs.soccar.rl import common_values as V
from nitro.envs.soccar.rl import done_conditions as D
from nitro.envs.soccar.rl import rewards as R
from tests.envs.soccar.rl.states import random_state

rlgym_rewards = pytest.importorskip("rlgym.rocket_league.reward_functions")
rlgym_done = pytest.importorskip("rlgym.rocket_league.done_conditions")
pytest.importorskip("rlgym_tools")
rlgym_adapter = pytest.importorskip("nitro.adapters.rlgym")

# nitro computes in float32, the references in float64 from the same float32 inputs: rewards of order 1
# agree to float32 rounding of a few operations (~1e-7 relative); 1e-5 leaves room for the square roots
# and normalisations near zero-length vectors while still catching any wrong term.
TOL = dict(rtol=1e-5, atol=1e-5)
N, BLUE, ORANGE = 16, 2, 2


def tool(name: str, *args, **kwargs):
    """An rlgym-tools reward (its package __init__ files are empty: import the class's own module)."""
    module = "".join("_" + ch.lower() if ch.isupper() else ch for ch in name).lstrip("_")
    return getattr(importlib.import_module(f"rlgym_tools.rocket_league.reward_functions.{module}"), name)(*args, **kwargs)


def step_pair(seed: int):
    """A random step: ``after`` is another random state 8 ticks later, with goal events where its ball is
    past RLGym's goal line (so RLGym's goal_scored and nitro's events agree)."""
    before = random_state(N, BLUE, ORANGE, seed=seed)
    after = random_state(N, BLUE, ORANGE, seed=seed + 1000)
    after.game.tick_count = before.game.tick_count + 8
    scored = torch.rand(N, generator=torch.Generator().manual_seed(seed)) < 0.4
    y = after.game.ball.pos[:, 1]
    after.game.ball.pos[:, 1] = torch.where(scored, torch.sign(y) * (V.GOAL_THRESHOLD + 50), y.clamp(-5000, 5000))
    after.events.goal_blue = after.game.ball.pos[:, 1] > V.GOAL_THRESHOLD
    after.events.goal_orange = after.game.ball.pos[:, 1] < -V.GOAL_THRESHOLD
    # a car with a live contact on a victim that was just demolished, in some envs
    cars = after.game.cars
    cars.demo_respawn_timer[::3, 2] = 2.5
    before.game.cars.demo_respawn_timer[::3, 2] = 0.0
    cars.car_contact_id[::3, 0], cars.car_contact_cooldown_timer[::3, 0] = 3, 0.2
    return before, after


def reference_rewards(fn, before, after) -> np.ndarray:
    """RLGym-style reward object ``fn`` over the step, env by env: [N, C]."""
    agents = rlgym_adapter.agent_ids(BLUE, ORANGE)
    out = np.zeros((N, BLUE + ORANGE))
    for env in range(N):
        gs_before, gs_after = rlgym_adapter.game_state(before, env), rlgym_adapter.game_state(after, env)
        fn.reset(agents, gs_before, {})
        r = fn.get_rewards(agents, gs_after, {a: False for a in agents}, {a: False for a in agents}, {})
        out[env] = [r[a] for a in agents]
    return out


CASES = [
    (R.GoalReward(), lambda: rlgym_rewards.GoalReward()),
    (R.TouchReward(), lambda: rlgym_rewards.TouchReward()),
    (R.CombinedReward((R.GoalReward(), 10.0), (R.TouchReward(), 0.1)),
     lambda: rlgym_rewards.CombinedReward((rlgym_rewards.GoalReward(), 10.0), (rlgym_rewards.TouchReward(), 0.1))),
    (R.VelocityPlayerToBallReward(), lambda: tool("VelocityPlayerToBallReward")),
    (R.VelocityPlayerToBallReward(include_negative_values=False),
     lambda: tool("VelocityPlayerToBallReward", include_negative_values=False)),
    (R.BoostKeepReward(2.0), lambda: tool("BoostKeepReward", 2.0)),
    (R.BoostChangeReward(1.0, 0.5), lambda: tool("BoostChangeReward", 1.0, 0.5)),
    (R.DemoReward(2.0, 0.5), lambda: tool("DemoReward", 2.0, 0.5)),
    (R.AdvancedTouchReward(1.0, 0.5), lambda: tool("AdvancedTouchReward", 1.0, 0.5, use_touch_count=False)),
    (R.AerialHeightReward(), lambda: tool("AerialDistanceReward")),
]


@pytest.mark.parametrize("ours,reference", CASES, ids=[type(c[0]).__name__ for c in CASES])
def test_rlgym_rewards(ours, reference):
    for seed in (1, 2):
        before, after = step_pair(seed)
        np.testing.assert_allclose(ours(before, after).numpy(), reference_rewards(reference(), before, after), **TOL)


def test_demo_reward_sees_demos():
    """The step pairs above do contain demos (so the DemoReward comparison is not all zeros)."""
    before, after = step_pair(1)
    r = R.DemoReward()(before, after)
    assert (r[::3, 0] == 1).all() and (r[::3, 2] <= -1).all()


# --- GigaLearnCPP, per player ------------------------------------------------------------------------------


def giga_reference(name: str, before, after, env: int, i: int) -> float:
    """The GetReward of GigaLearn's reward ``name`` for player i, as CommonRewards.h reads."""
    h = lambda x: x[env].double().numpy()  # noqa: E731
    b, a = before.game, after.game
    pos, vel, fwd = h(a.cars.pos)[i], h(a.cars.vel)[i], h(a.cars.rot_mat)[i][:, 0]
    ball_pos, ball_vel, prev_ball_vel = h(a.ball.pos), h(a.ball.vel), h(b.ball.vel)
    boost, prev_boost = h(a.cars.boost)[i], h(b.cars.boost)[i]
    touched = bool(after.events.ball_touch[env, i])
    to_ball = (ball_pos - pos) / np.linalg.norm(ball_pos - pos)
    if name == "VelocityPlayerToBallReward":
        return float(to_ball @ (vel / 2300))
    if name == "VelocityBallToGoalReward":
        target = np.array(V.ORANGE_GOAL_BACK if i < after.blue else V.BLUE_GOAL_BACK)
        return float((target - ball_pos) / np.linalg.norm(target - ball_pos) @ (ball_vel / 6000))
    if name == "FaceBallReward":
        return float(fwd @ to_ball)
    if name == "AirReward":
        return float(not a.cars.is_on_ground[env, i])
    if name == "SaveBoostReward":
        return float(np.clip((boost / 100) ** 0.5, 0, 1))
    if name == "PickupBoostReward":
        return float(np.sqrt(boost / 100) - np.sqrt(prev_boost / 100)) if boost > prev_boost else 0.0
    kph = 250 / 9
    if name == "StrongTouchReward":
        force = np.linalg.norm(ball_vel - prev_ball_vel)
        return 0.0 if not touched or force < 20 * kph else float(min(1, force / (130 * kph)))
    if name == "TouchAccelReward":
        prev, cur = min(1, np.linalg.norm(prev_ball_vel) / (110 * kph)), min(1, np.linalg.norm(ball_vel) / (110 * kph))
        return float(cur - prev) if touched and cur > prev else 0.0
    raise KeyError(name)


GIGA = [R.VelocityPlayerToBallReward(per_second=False), R.VelocityBallToGoalReward(), R.FaceBallReward(),
        R.AirReward(), R.SaveBoostReward(), R.PickupBoostReward(), R.StrongTouchReward(), R.TouchAccelReward()]


@pytest.mark.parametrize("reward", GIGA, ids=[type(r).__name__ for r in GIGA])
def test_gigalearn_rewards(reward):
    before, after = step_pair(3)
    # slow the ball down in half the envs so the touch rewards see both small and large changes
    after.game.ball.vel[::2] = before.game.ball.vel[::2] + 100.0
    ours = reward(before, after).numpy()
    for env in range(N):
        for i in range(BLUE + ORANGE):
            assert ours[env, i] == pytest.approx(giga_reference(type(reward).__name__, before, after, env, i),
                                                 rel=1e-5, abs=1e-5)


def test_velocity_ball_to_goal_own_goal():
    before, after = step_pair(4)
    assert torch.allclose(R.VelocityBallToGoalReward(own_goal=True)(before, after)[:, :BLUE],
                          R.VelocityBallToGoalReward()(before, after)[:, BLUE:BLUE + 1].expand(-1, BLUE))


def test_zero_sum_reward():
    """ZeroSumReward.cpp: r (1 - ts) + mean(team) ts - mean(opponents) x opponent_scale, over a 2v1 worked
    by hand with child rewards blue 1 and 3 (mean 2), orange 5, team_spirit 0.5, opponent_scale 0.8."""
    state = random_state(1, 2, 1)
    child = lambda before, after: torch.tensor([[1.0, 3.0, 5.0]])  # noqa: E731
    r = R.ZeroSumReward(child, team_spirit=0.5, opponent_scale=0.8)(state, state)
    assert r[0].tolist() == pytest.approx([0.5 + 1.0 - 4.0, 1.5 + 1.0 - 4.0, 2.5 + 2.5 - 1.6])


def test_combined_reward_rejects_bad_pairs():
    with pytest.raises(TypeError, match="CombinedReward takes rewards or"):
        R.CombinedReward((R.GoalReward(), "10"))


# --- done conditions -----------------------------------------------------------------------------------------


def test_goal_condition():
    before, after = step_pair(5)
    expected = [rlgym_done.GoalCondition().is_done(["blue-0"], rlgym_adapter.game_state(after, e), {})["blue-0"]
                for e in range(N)]
    assert D.GoalCondition()(before, after).tolist() == expected


@pytest.mark.parametrize("timeout", [10, 2.5, 1 / 3])
def test_timeouts_follow_rlgym_over_an_episode(timeout):
    """NoTouchTimeoutCondition and TimeoutCondition step by step beside RLGym's (stateful) classes over
    random touches, 8 ticks a step."""
    state = random_state(1, 1, 1)
    state.game.tick_count[:] = 0
    agents = ["blue-0", "orange-0"]
    no_touch, timeout_ref = rlgym_done.NoTouchTimeoutCondition(timeout), rlgym_done.TimeoutCondition(timeout)
    gs = rlgym_adapter.game_state(state, 0)
    no_touch.reset(agents, gs, {})
    timeout_ref.reset(agents, gs, {})
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        after = dataclasses.replace(state, game=dataclasses.replace(state.game, tick_count=state.game.tick_count + 8),
                                    events=dataclasses.replace(state.events, ball_touch=torch.rand(1, 2, generator=g) < 0.03))
        after.ticks_since_touch = torch.where(after.events.ball_touch.any(-1), 0, state.ticks_since_touch + 8)
        gs = rlgym_adapter.game_state(after, 0)
        assert bool(D.NoTouchTimeoutCondition(timeout)(state, after)) == no_touch.is_done(agents, gs, {})["blue-0"]
        assert bool(D.TimeoutCondition(timeout)(state, after)) == timeout_ref.is_done(agents, gs, {})["blue-0"]
        state = after


def test_any_and_all_conditions():
    before, after = step_pair(6)
    goal = D.GoalCondition()(before, after)
    late = D.TimeoutCondition(40)(before, after)
    assert torch.equal(D.AnyCondition(D.GoalCondition(), D.TimeoutCondition(40))(before, after), goal | late)
    assert torch.equal(D.AllCondition(D.GoalCondition(), D.TimeoutCondition(40))(before, after), goal & late)
    assert (goal & late).any() and (goal ^ late).any()  # the cases differ on this data


def test_timeout_ticks():
    assert D.timeout_ticks(10) == 1200 and D.timeout_ticks(1 / 3) == 40 and D.timeout_ticks(0.001) == 1
    with pytest.raises(ValueError, match="positive number of seconds"):
        D.timeout_ticks(0)
