"""The mutators and the tick parameters every tick reads."""

from __future__ import annotations

import dataclasses
import inspect
import math

import pytest

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.kernels import arena as arena_kernels
from nitro.envs.soccar.mutators import MutatorConfig, TickParams, damping_factor

DT = 1.0 / 120


def test_damping_factor_matches_bullet():
    assert damping_factor(0.03, DT) == pytest.approx(math.pow(0.97, DT), rel=1e-6)


def test_tick_params_from_mutators():
    """Hand-worked: the default ball (mass 30, radius 91.25 UU) at 120 Hz."""
    m = MutatorConfig(gravity_z=-325.0)
    p = TickParams.from_mutators(m, DT)
    assert p.tick_time == DT and p.gravity_dv == -325.0 * DT
    assert p.ball_inv_mass == 1 / 30 and p.ball_inv_inertia == 1 / (0.4 * 30 * 91.25**2)
    assert p.ball_restitution == 0.6 and p.ball_friction == 0.35  # max / min with the arena's 0.3 / 0.6
    assert p.goal_y == C.SOCCAR_GOAL_SCORE_BASE_THRESHOLD_Y + 91.25
    assert p.erp2_over_dt == 0.8 / DT
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.tick_time = 0.0  # built once per arena, never changed


def test_the_fused_kernel_takes_every_tick_param_by_name():
    """The twin rule: the kernels read the same parameters under the same names."""
    names = [f.name for f in dataclasses.fields(TickParams)]
    assert list(arena_kernels.PARAM_NAMES) == names
    stages = (arena_kernels.pre_tick_kernel, arena_kernels.car_pairs_kernel, arena_kernels.collisions_kernel,
              arena_kernels.body_solve_kernel, arena_kernels.car_step_kernel, arena_kernels.car_events_kernel,
              arena_kernels.ball_and_rules_kernel)  # fmt: skip
    params = set()
    for kernel in stages:
        params |= set(kernel.arg_names if hasattr(kernel, "arg_names") else inspect.signature(kernel).parameters)
    assert set(names) <= params
