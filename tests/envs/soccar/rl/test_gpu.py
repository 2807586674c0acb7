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
