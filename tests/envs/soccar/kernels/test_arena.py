"""`kernels/arena.py`'s fused K-tick kernel against `arena.step_ticks`, with cars: the cars of
`car_states.sample_cars` (every scenario family, hidden state included) in 1v0 and 1v1 arenas, the
ball flying beside them, stepped by the fused kernel and by the PyTorch pipeline from the same state (the cars compared where
their bodies did not touch the arena: `car_world` has no kernel twin yet).
(The ball-only fused tick is checked on the parity throws by tests/envs/soccar/test_kernels.py.)"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from nitro.core import tree
from nitro.envs.soccar.arena import Arena, step_ticks
from nitro.envs.soccar.kernels.arena import launch_step_ticks_
from nitro.envs.soccar.state import ArenaEvents, CarState
from tests.envs.soccar.kernels.car_states import assert_cars_close, rows_of, sample_cars
from tests.envs.soccar.kernels.twins import DEVICE, runnable

pytest.importorskip("triton")
pytestmark = runnable
BALL_POS_TOL = 2e-3
"""UU: a flying ball after two ticks (the ball twins' own position tolerance)."""
CARS = 64
"""Cars per test (every fourth of the sample: all families, several ticks each); on the interpreter
a tick of 64 lanes takes seconds."""


def regroup(cars: CarState, envs: int, per_env: int, rows=slice(None)) -> CarState:
    """[n, 1, ...] cars (their ``rows``) as [envs, per_env, ...]: env e holds cars e * per_env ..."""
    fields = {}
    for name in CarState.FIELDS:
        value = getattr(cars, name)[rows]
        fields[name] = value.reshape(envs, per_env, *value.shape[2:]).contiguous()
    return CarState(**fields)


@pytest.mark.parametrize(("blue", "orange", "launches"), [(1, 0, (2,)), (1, 1, (1,))])
def test_fused_ticks_with_cars(blue, orange, launches):
    """``launches`` kernel launches of K ticks each (controls held) equal as many PyTorch ticks."""
    sample = sample_cars()
    per_env = blue + orange
    envs = CARS // per_env
    rows = torch.arange(CARS) * (len(sample.cars.pos) // CARS)
    arena = Arena(envs, blue=blue, orange=orange, device=DEVICE)
    g = torch.Generator().manual_seed(2)
    # the ball in flight high above the field, where its contact queries are cheap
    arena.set_ball(
        pos=(torch.rand(envs, 3, generator=g) * torch.tensor([4000.0, 6000.0, 400.0]) - torch.tensor([2000.0, 3000.0, -800.0])).to(DEVICE),
        vel=(torch.randn(envs, 3, generator=g) * 500).to(DEVICE),
    )  # fmt: skip
    expected = dataclasses.replace(
        arena.state,
        cars=tree.to(regroup(sample.cars, envs, per_env, rows), DEVICE),
        tick_count=sample.tick_count[rows[::per_env]].to(DEVICE),  # some 0: the solver's default time step
    )
    fused = tree.clone(expected)  # the fused kernel updates its state in place
    controls = sample.controls[rows].reshape(envs, per_env, 8).contiguous().to(DEVICE)
    touched = torch.zeros(envs, dtype=torch.bool, device=DEVICE)
    for ticks in launches:
        events = ArenaEvents.none(envs, per_env, DEVICE)
        launch_step_ticks_(fused, events, controls, arena.world, ticks, block=max(32, envs))
        expected_events = ArenaEvents.none(envs, per_env, DEVICE)
        for _ in range(ticks):  # a tick at a time: which car bodies touched the arena in which tick
            expected, expected_events = step_ticks(expected, expected_events, controls, arena.world, 1)
            touched |= expected.cars.has_world_contact.any(1)
        assert torch.equal(events.goal_tick.cpu(), expected_events.goal_tick.cpu())
    # The car body's contacts with the arena (`car_world`) have no kernel twin yet: the cars are
    # compared in the envs where no car body touched the arena (most of them).
    free = (~touched).repeat_interleave(per_env).cpu()
    assert float(free.float().mean()) > 0.6
    assert_cars_close(rows_of(regroup(fused.cars, CARS, 1), free), rows_of(regroup(expected.cars, CARS, 1), free))
    assert torch.equal(fused.tick_count.cpu(), expected.tick_count.cpu())
    assert float((fused.ball.pos - expected.ball.pos).norm(dim=1).max()) <= BALL_POS_TOL
