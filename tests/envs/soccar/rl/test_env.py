"""Soccar-v0 over the arena: the multi-agent contract, tick skip and action delay against the Arena
stepped by hand, goals ending episodes with their rewards, truncation, auto-reset and the per-env
bookkeeping of touches (fed through the arena's events)."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

import nitro
from nitro.core import agents, rng
from nitro.core.env import autoreset_step
from nitro.envs.soccar import Arena
from nitro.envs.soccar.rl import done_conditions as D
from nitro.envs.soccar.rl import state_mutators as M
from nitro.envs.soccar.rl.action_parsers import LookupTableAction, lookup_table
from nitro.envs.soccar.rl.env import Soccar, SoccarParams
from tests.envs.soccar.rl.states import random_state

# RLGym's table: action 18 is full throttle with boost, straight ahead.
THROTTLE_BOOST = 18


@pytest.fixture(scope="module")
def env():
    return Soccar(SoccarParams())


def keys(n, seed=0):
    return rng.env_keys(rng.key(seed), n)


def test_throttle_boost_action_is_what_the_tests_think():
    assert lookup_table()[THROTTLE_BOOST] == (1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0)


def test_make_and_step_contract():
    """nitro.make("soccar"): agent rows env-major, per-env done flags, acting rows, obs = observe(state)."""
    envs = nitro.make("soccar", num_envs=2, device="cpu", seed=1)
    agents.check(envs.env)
    assert envs.env.agent_team == (0, 1) and envs.num_rows == 4
    obs, _ = envs.reset()
    assert obs.shape == (4, 172)
    out = envs.step(torch.full((4,), THROTTLE_BOOST))
    obs, reward, terminated, truncated = out[:4]
    assert obs.shape == (4, 172) and reward.shape == (4,) and terminated.shape == (2,) and truncated.shape == (2,)
    assert torch.equal(obs, envs.env.observe(envs.state))
    assert torch.all(envs.acting())
    # every car drove forward, and orange's observation of itself mirrors blue's: both see themselves
    # moving toward the opponents' goal (+y in their own view)
    vel_y = obs.view(2, 2, -1)[:, :, 52 + 9 + 1]
    assert torch.all(vel_y > 0)


def test_action_delay_against_the_arena(env):
    """action_delay=1: the step runs 1 tick with the controls held from the last step (none after a
    reset), then 7 with the new ones, as Arena.step does when told so; action_delay=8 runs all 8 ticks
    on the held controls."""
    state = env.reset(keys(2), 2, "cpu")
    action = torch.full((4,), THROTTLE_BOOST)
    after, *_ = env.step(state, action, keys(2))
    arena = Arena(2, 1, 1)
    arena.state = state.game
    arena.step(torch.zeros(2, 2, 8), ticks=1)
    arena.step(LookupTableAction()(action, state), ticks=7)
    for name in ("pos", "vel", "rot_mat", "boost"):
        assert torch.equal(getattr(after.game.cars, name), getattr(arena.cars, name)), name
    assert torch.equal(after.prev_action, LookupTableAction()(action, state))

    held = Soccar(dataclasses.replace(env.params, action_delay=8))
    late, *_ = held.step(state, action, keys(2))
    arena.state = state.game
    arena.step(torch.zeros(2, 2, 8), ticks=8)
    assert torch.equal(late.game.cars.pos, arena.cars.pos)
    assert not torch.equal(late.game.cars.pos, after.game.cars.pos)


@dataclasses.dataclass(frozen=True)
class ShotOnGoal:
    """The ball 120 UU before orange's goal line, flying in at 2000 UU/s (it scores within 8 ticks)."""

    def __call__(self, arena, key, active):
        n = arena.num_envs
        arena.set_ball(pos=torch.tensor([0.0, 5100.0, 93.15]).expand(n, 3), vel=torch.tensor([0.0, 2000.0, 0.0]).expand(n, 3),
                       ang_vel=torch.zeros(n, 3))  # fmt: skip
        return active


def test_goal_terminates_and_autoresets(env):
    scoring = Soccar(dataclasses.replace(env.params, mutator=ShotOnGoal()))
    state = scoring.reset(keys(2), 2, "cpu")
    t = autoreset_step(scoring, state, torch.zeros(4, dtype=torch.int64), keys(2))
    assert t.terminated.tolist() == [True, True] and t.truncated.tolist() == [False, False]
    assert t.reward.tolist() == [10.0, -10.0, 10.0, -10.0]  # GoalReward x 10: blue scored
    assert scoring.result(t.final_state).tolist() == [1.0, 0.0, 1.0, 0.0]
    assert t.final_state.events.goal_blue.all()
    # the new episode started: the ball is back before the goal, the clock at 0
    assert torch.all(t.state.game.tick_count == 0) and torch.all(t.state.game.ball.pos[:, 1] == 5100.0)
    assert torch.equal(t.obs, scoring.observe(t.state)) and not torch.equal(t.obs, t.final_obs)


def test_truncation_and_termination_priority(env):
    """A 2-tick timeout truncates on the second 1-tick step; a goal on the same step would win."""
    short = Soccar(dataclasses.replace(env.params, tick_skip=1, action_delay=0, truncation=D.TimeoutCondition(2 / 120)))
    state = short.reset(keys(2), 2, "cpu")
    action = torch.zeros(4, dtype=torch.int64)
    state, _, _, terminated, truncated = short.step(state, action, keys(2))
    assert not truncated.any() and not terminated.any()
    goal = dataclasses.replace(short.params, termination=D.TimeoutCondition(1 / 120))
    both = Soccar(goal)
    _, _, _, terminated, truncated = both.step(state, action, keys(2))
    assert terminated.all() and not truncated.any()
    _, _, _, terminated, truncated = short.step(state, action, keys(2))
    assert truncated.all() and not terminated.any()


def test_touch_bookkeeping_from_events(env, monkeypatch):
    """ticks_since_touch counts up by tick_skip and restarts on any car's touch, read from the arena's
    events; NoTouchTimeoutCondition(10 / 120 s) truncates once 10 ticks pass without one."""
    timed = Soccar(dataclasses.replace(env.params, truncation=D.NoTouchTimeoutCondition(10 / 120)))
    state = env.reset(keys(2), 2, "cpu")
    touches = iter([[False, False], [True, False], [False, False], [False, False]])

    def physics(s, controls):
        events = dataclasses.replace(s.events, ball_touch=torch.tensor([next(touches), [False, False]]))
        return dataclasses.replace(s.game, tick_count=s.game.tick_count + 8), events

    monkeypatch.setattr(timed, "physics", physics)
    seen, cut = [], []
    for _ in range(4):
        state, _, _, _, truncated = timed.step(state, torch.zeros(4, dtype=torch.int64), keys(2))
        seen.append(state.ticks_since_touch.tolist())
        cut.append(truncated.tolist())
    assert seen == [[8, 8], [0, 16], [8, 24], [16, 32]]
    assert cut == [[False, False], [False, True], [False, True], [True, True]]


def test_benched_cars_hold_nothing_and_masks_allow_them_all(monkeypatch):
    masked = Soccar(SoccarParams(blue=2, orange=2, action=LookupTableAction(masks=True),
                                 mutator=M.MutatorSequence(M.FixedTeamSizeMutator(1, 2), M.KickoffMutator())))
    state = masked.reset(keys(3), 3, "cpu")
    assert masked.acting(state).view(3, 4).tolist() == [[True, False, True, True]] * 3
    mask = masked.action_mask(state).view(3, 4, 90)
    assert mask[:, 1].all() and not mask[:, 0].all()  # benched: anything goes; playing: GigaLearn's mask
    given = []
    monkeypatch.setattr(masked, "physics", lambda s, controls: given.append(controls) or (s.game, s.events))
    masked.step(state, torch.full((12,), THROTTLE_BOOST), keys(3))
    assert not given[0][:, 1].any() and given[0][:, [0, 2, 3]].any(-1).all()


def test_bad_params():
    with pytest.raises(ValueError, match="action_delay must be in \\[0, tick_skip=8\\], got 9"):
        Soccar(SoccarParams(action_delay=9))
    with pytest.raises(ValueError, match="at least one car"):
        Soccar(SoccarParams(blue=0, orange=0))
    with pytest.raises(ValueError, match="physics must be one of"):
        Soccar(SoccarParams(physics="fast"))
    if os.environ.get("TRITON_INTERPRET") != "1":
        fused = Soccar(SoccarParams(physics="fused"))
        state = fused.reset(keys(2), 2, "cpu")  # resets need no kernel (a trainer sizes its memory on the CPU)
        with pytest.raises(ValueError, match="physics='fused' runs a Triton kernel: it needs a CUDA device"):
            fused.step(state, torch.zeros(4, dtype=torch.int64), keys(2))


def test_only_the_fused_physics_is_capturable():
    """Trainers and evaluations on auto compile and capture only a `capturable` env's step: the eager
    tick's GJK/EPA loops would run their fixed counts there (a quarter million launches per tick)."""
    assert not Soccar(SoccarParams()).capturable
    assert Soccar(SoccarParams(physics="fused")).capturable


def test_whole_games_play_on_after_goals(env):
    """kickoff_after_goal with GameCondition(16 ticks): the shot scores during the first step, the
    arena puts the ball back on the kickoff spot and the game goes on; at 16 ticks it is over, 1-0,
    and the result and statistics say so per car (blue: 1 for, 0 against; orange the reverse)."""
    game = Soccar(dataclasses.replace(env.params, mutator=ShotOnGoal(), kickoff_after_goal=True,
                                      termination=D.GameCondition(16 / 120), truncation=None))
    state = game.reset(keys(2), 2, "cpu")
    still = torch.full((4,), lookup_table().index((0.0,) * 8))
    state, _, reward, terminated, _ = game.step(state, still, keys(2))
    assert not terminated.any() and state.game.blue_score.tolist() == [1, 1]
    assert torch.equal(state.game.ball.pos[:, :2], torch.zeros(2, 2))  # the kickoff after the goal
    assert reward.tolist() == [10.0, -10.0, 10.0, -10.0]
    state, _, _, terminated, _ = game.step(state, still, keys(2))
    assert terminated.all()
    assert game.result(state).tolist() == [1.0, 0.0, 1.0, 0.0]
    stats = game.episode_stats(state)
    assert stats["goals_for"].tolist() == [1, 0, 1, 0] and stats["goals_against"].tolist() == [0, 1, 0, 1]


def test_game_condition_goes_to_overtime_on_a_level_score():
    """GameCondition(seconds=8/120, max_overtime_seconds=16/120) over hand-made steps: over at 8 ticks
    when the score differs; level, it goes on until a goal or 24 ticks (a draw)."""
    cond = D.GameCondition(8 / 120, max_overtime_seconds=16 / 120)
    state = random_state(3, 1, 1)
    state.game.tick_count = torch.tensor([8, 16, 24])
    state.game.blue_score = torch.tensor([1, 0, 0], dtype=torch.int32)
    state.game.orange_score = torch.tensor([0, 0, 0], dtype=torch.int32)
    assert cond(state, state).tolist() == [True, False, True]
    state.game.tick_count = torch.tensor([7, 7, 7])
    assert not cond(state, state).any()
    assert D.timeout_ticks(300) == 36_000  # a 5-minute game: 36,000 ticks at 120 per second
    with pytest.raises(ValueError, match="timeout_seconds must be a positive number"):
        D.GameCondition(0)


def test_components_by_name():
    """String components (YAML presets, --params) resolve through COMPONENTS; unknown names and a game
    without kickoffs after goals are refused."""
    from nitro.envs.soccar.rl.env import COMPONENTS, GIGALEARN_REWARD
    from nitro.envs.soccar.rl.obs_builders import GigaLearnAdvancedObs

    named = Soccar(SoccarParams(obs="gigalearn_advanced", reward="gigalearn", truncation="none", termination="game",
                                kickoff_after_goal=True, mutator="kickoff"))
    p = named.params
    assert p.obs == GigaLearnAdvancedObs() and p.reward is GIGALEARN_REWARD and p.truncation is None
    assert p.termination == D.GameCondition(300.0, 300.0) and named.observation_space.shape == (109,)
    assert Soccar(SoccarParams(**Soccar.GAME_PARAMS)).params.termination is COMPONENTS["termination"]["game"]
    with pytest.raises(ValueError, match="obs='giga' is not a named obs; the names are default, default_unpadded"):
        Soccar(SoccarParams(obs="giga"))
    with pytest.raises(ValueError, match="set kickoff_after_goal=True"):
        Soccar(SoccarParams(termination="game"))


def test_a_steps_rl_work_makes_no_tensors_from_host_data(monkeypatch):
    """The RL work of a step besides the physics (the observation, parsing the actions, the masks,
    rewards, done conditions) takes its constant tables from `common_values.device_tensor`, made once
    per device: after a first step it builds no tensor from host data, which on CUDA would be a
    synchronising copy (the CUDA check: tests/envs/soccar/rl/test_gpu.py, bench/soccar_rl_gpu.py)."""
    from nitro.envs.soccar.rl import rewards as R
    from nitro.envs.soccar.rl.obs_builders import GigaLearnAdvancedObs

    before, after = random_state(8, 2, 2, seed=1), random_state(8, 2, 2, seed=2, bench=0.2)
    actions = torch.randint(0, 90, (32,), generator=torch.Generator().manual_seed(0))
    parser, obs = LookupTableAction(masks=True), GigaLearnAdvancedObs()
    reward = R.CombinedReward((R.ZeroSumReward(R.VelocityBallToGoalReward()), 2.0), (R.PickupBoostReward(), 10.0))
    done = D.AnyCondition(D.GoalCondition(), D.NoTouchTimeoutCondition(10))

    def work():
        return obs(after), parser(actions, after), parser.action_mask(after), reward(before, after), done(before, after)

    work()  # the first step makes the tables
    made = []
    for name in ("tensor", "as_tensor", "from_numpy"):
        original = getattr(torch, name)
        monkeypatch.setattr(torch, name, lambda *a, _f=original, _n=name, **k: made.append(_n) or _f(*a, **k))
    work()
    assert made == []
