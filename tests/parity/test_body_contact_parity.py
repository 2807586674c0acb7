"""Car-ball and car-car contacts (`car_ball`, `car_car`, solved together in `dynamics_world`) against
the real RocketSim, scenes of 1 s from identical states (`body_harness`: both with their game rules
on the contacts, which nitro's tick fires from these contacts as RocketSim's callbacks do).

Car-ball: a car driving into a ball at rest or rolling, a car flying into a ball in the air (any
face, edge or corner but its underside), a ball dropping onto a car. Car-car: cars side by side
sliding into each other, and cars flying into each other (their upper halves; bumper hits bump).
RocketSim's wheels cast their suspension rays against the ball and the other cars too, which nitro's
vehicle rays do not model yet: the scenes keep a car's underside away from the other body, and those
where a RocketSim wheel still touched a body (`wheels_on_bodies`) are left out. Scenes with a bump
or demolition are kept: nitro's bump rule reads Bullet's own box-box points.
"""

from __future__ import annotations

import numpy as np
import pytest

from .body_harness import (
    CAR_BALL_FAMILIES,
    CAR_CAR_FAMILIES,
    Scenes,
    errors_after,
    make_scenes,
    run_nitro,
    run_rocketsim,
    wheels_on_bodies,
)

TICKS = 120  # 1 s: the acceptance point
PER_FAMILY = 4  # scenes per family here; `python -m tests.parity.body_sweep` runs more (docs/FIDELITY.md)
SEED = 2024
# The acceptance targets (issues 8 and 9): after 1 s, position median <= 2 UU, p95 <= 20 UU.
TARGET_MEDIAN, TARGET_P95 = 2.0, 20.0
# Measured (seed 0, 24 scenes per family, docs/FIDELITY.md): balls and cars end within 0.05 UU of
# RocketSim (0.02 with the rules off; the extra hit impulse scales the touch's rounding); the contacts
# repeat Bullet's operations (GJK, dBoxBox2, the manifolds, the island order and the solve), and what
# is left is float32 rounding that the 1 s of flight carries on. 1 UU is 20x that; a wrong contact
# point, normal, friction, restitution or solve order, or a rule fired on another tick or point,
# moves a body by 10 to 500 UU.
MAX_ERROR = 1.0
TOUCH_POS_TOL = 0.01  # UU: where on the ball a car touched (ball_hit_info.relative_pos_on_ball)


@pytest.fixture(scope="module")
def car_ball_runs(oracle):
    scenes = Scenes.concat([make_scenes(f, PER_FAMILY, TICKS, seed=SEED) for f in CAR_BALL_FAMILIES])
    return scenes, run_rocketsim(scenes), run_nitro(scenes)


@pytest.fixture(scope="module")
def car_car_runs(oracle):
    scenes = Scenes.concat([make_scenes(f, 2 * PER_FAMILY, TICKS, seed=SEED) for f in CAR_CAR_FAMILIES])
    return scenes, run_rocketsim(scenes), run_nitro(scenes)


def _check(errors: np.ndarray):
    assert np.median(errors) <= TARGET_MEDIAN and np.quantile(errors, 0.95) <= TARGET_P95
    assert errors.max() <= MAX_ERROR, errors


@pytest.mark.parametrize("family", list(CAR_BALL_FAMILIES))
def test_car_ball_scenes_match_rocketsim(car_ball_runs, family):
    scenes, reference, port = car_ball_runs
    rows = np.array([f == family for f in scenes.family]) & ~wheels_on_bodies(reference, port)
    assert rows.sum() >= PER_FAMILY // 2
    touched = reference.touch_tick[rows, :, -1] >= 0
    assert touched.mean() >= 0.5  # the scenes do hit the ball
    # the same touches on the same ticks, at the same place on the ball (what Ball::_OnHit reads)
    assert np.array_equal(port.touch_tick[rows], reference.touch_tick[rows])
    assert np.abs(port.touch_pos[rows] - reference.touch_pos[rows]).max() <= TOUCH_POS_TOL
    err = errors_after(reference, port, TICKS / 120)
    _check(err["ball"][rows])
    _check(err["cars"][rows].ravel())


@pytest.mark.parametrize("family", list(CAR_CAR_FAMILIES))
def test_car_car_scenes_match_rocketsim(car_car_runs, family):
    scenes, reference, port = car_car_runs
    rows = np.array([f == family for f in scenes.family]) & ~wheels_on_bodies(reference, port)
    assert rows.sum() >= PER_FAMILY  # at least half the scenes
    assert port.car_contact[rows].any(1).mean() >= 0.75  # and the cars do touch
    err = errors_after(reference, port, TICKS / 120)
    _check(err["cars"][rows].ravel())
