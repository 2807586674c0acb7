"""The RL layer on CUDA: the same numbers as on the CPU, and no host syncs."""

from __future__ import annotations

import pytest
import torch

from nitro.core import tree
from nitro.envs.soccar.rl import rewards as R
from nitro.envs.soccar.rl.action_parsers import LookupTableAction
from nitro.envs.soccar.rl.done_conditions import AnyCondition, GoalCondition, NoTouchTimeoutCondition
from nitro.envs.soccar.rl.obs_builders import DefaultObs, GigaLearnAdvancedObs, GigaLearnDefaultObs
from tests.envs.soccar.rl.states import random_state

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def work(before, after, actions):
    parser = LookupTableAction(masks=True)
    reward = R.CombinedReward((R.ZeroSumReward(R.VelocityBallToGoalReward()), 2.0), (R.FaceBallReward(), 0.25),
                              (R.PickupBoostReward(), 10.0), (R.GoalReward(), 150.0))
    done = AnyCondition(GoalCondition(), NoTouchTimeoutCondition(10))
    builders = (DefaultObs(), GigaLearnDefaultObs(), GigaLearnAdvancedObs())
    return (*[b(after) for b in builders], parser(actions, after), parser.action_mask(after), reward(before, after),
            done(before, after))


def test_cuda_matches_cpu_without_syncs():
    before, after = random_state(64, 2, 2, seed=1), random_state(64, 2, 2, seed=2, bench=0.2)
    actions = torch.randint(0, 90, (256,), generator=torch.Generator().manual_seed(0))
    expected = work(before, after, actions)
    cuda = tree.to((before, after), "cuda"), actions.cuda()
    work(*cuda[0], cuda[1])  # warm-up: the constant tables are copied once
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        got = work(*cuda[0], cuda[1])
        torch.cuda.synchronize()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for a, b in zip(got, expected):
        # the same float32 operations; CUDA may fuse multiply-adds (a few ulp on values up to ~150)
        torch.testing.assert_close(a.cpu(), b, rtol=1e-5, atol=1e-4)


def test_bots_on_cuda_match_the_cpu_without_syncs():
    """Both scripted players and their lookup-table actions on CUDA: the CPU's controls (float32 atan2 and
    norms may differ by a few ulp: 1e-5) and the same actions (`LookupTableAction.encode` rounds the
    controls to 2^-12 and sums in one order: its many ties, a saturated control as far from two rows,
    break the same way; only controls within an ulp of an odd multiple of 2^-13 could differ, which
    random states do not meet), no syncs."""
    from nitro.envs.soccar.rl.bots import BOTS

    state = random_state(64, 3, 3, seed=4)
    parser = LookupTableAction(masks=True)
    expected = {name: (bot(state), parser.encode(bot(state), state)) for name, bot in BOTS.items()}
    cuda = tree.to(state, "cuda")
    for bot in BOTS.values():
        parser.encode(bot(cuda), cuda)  # warm-up: the constant tables
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        got = {name: (bot(cuda), parser.encode(bot(cuda), cuda)) for name, bot in BOTS.items()}
        torch.cuda.synchronize()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for name, (controls, actions) in got.items():
        torch.testing.assert_close(controls.cpu(), expected[name][0], rtol=0, atol=1e-5)
        assert torch.equal(actions.cpu(), expected[name][1]), name


def test_games_against_a_bot_replayed_from_a_cuda_graph_match_direct_launches():
    """play_vs_bot with graph=True (steps captured once, replayed) gives the run without a graph exactly:
    a random policy against the ball chaser in 16-tick games of the fused physics (the env that is
    `capturable`: the eager tick's GJK/EPA loops, captured, would run their fixed counts, a quarter
    million launches per tick)."""
    from nitro.core import rng
    from nitro.envs.soccar.rl.done_conditions import GameCondition
    from nitro.envs.soccar.rl.env import Soccar, SoccarParams
    from nitro.train.config import PolicyConfig
    from nitro.train.evaluate import play_vs_bot
    from nitro.train.policy import ActorCritic

    env = Soccar(SoccarParams(**{**Soccar.GAME_PARAMS, "termination": GameCondition(16 / 120, 8 / 120),
                                 "physics": "fused"}))  # fmt: skip
    assert env.capturable
    torch.manual_seed(0)
    policy = ActorCritic(172, env.action_space, PolicyConfig(hidden=[64, 64])).cuda()

    def actor(state, key):
        return policy.dist.mode(policy.actor(env.observe(state)))

    with torch.no_grad():
        runs = [play_vs_bot(env, actor, env.bots()["ball_chaser"], 8, rng.env_keys(rng.key(1, "cuda"), 8), "cuda",
                            100, graph=graph, steps_per_replay=4) for graph in (False, True)]
    # the games' outcomes (the runs look for the end at different steps, so their states go on differently)
    for a, b in zip(*(tree.leaves((r.final, r.ep_return, r.running)) for r in runs)):
        assert torch.equal(a, b)


def test_fused_physics_steps_as_the_eager_env():
    """Soccar-v0 with physics="fused" (the K-tick kernel per held action) against the eager env: four
    steps of the ball chaser against the shadow defender from 64 kickoffs, cars on their wheels (the
    fused tick's car-body contacts approximate the eager tick's, and none happen here); the cars' tolerances are the
    fused-tick tests' (tests/envs/soccar/kernels/car_states.py), the ball within 2e-3 UU as there."""
    from nitro.core import rng
    from nitro.envs.soccar.rl.env import Soccar, SoccarParams
    from tests.envs.soccar.kernels.car_states import assert_cars_close

    eager, fused = Soccar(SoccarParams()), Soccar(SoccarParams(physics="fused"))
    keys = rng.env_keys(rng.key(0, "cuda"), 64)
    state = eager.reset(keys, 64, "cuda")
    a, b = state, state
    for _ in range(4):
        rows = torch.arange(128, device="cuda") % 2 == 0
        chase, shadow = eager.bots()["ball_chaser"], eager.bots()["shadow_defender"]
        a = eager.step(a, torch.where(rows, chase(a, keys), shadow(a, keys)), keys)[0]
        b = fused.step(b, torch.where(rows, chase(b, keys), shadow(b, keys)), keys)[0]
        assert not a.game.cars.has_world_contact.any()
    assert_cars_close(b.game.cars, a.game.cars)
    assert float((b.game.ball.pos - a.game.ball.pos).norm(dim=-1).max()) <= 2e-3
    assert torch.equal(b.events.ball_touch, a.events.ball_touch)
