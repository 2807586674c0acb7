"""The fused tick's contacts between bodies against the reference tick (`tests/parity/fused_touch.py`):
the car-ball and car-car rows solved alone, then each body's arena rows from their deltas, where the
reference (which `test_body_contact_parity.py` holds to RocketSim) solves every row together.

The fused kernel equals its PyTorch twin `stand_in_tick` under Triton's interpreter
(`tests/envs/soccar/kernels/test_game.py`), so the twin stands for it: a few scenes per family here
(CPU seconds), `python -m tests.parity.fused_touch` for the report in docs/FIDELITY.md.
"""

from __future__ import annotations

import numpy as np
import pytest

from .fused_touch import kickoffs, scene_errors

SCENES = 4
# Bounds from docs/FIDELITY.md's measurement (12 scenes per family, seed 0), with margin for these 4.
# A car into the ball: the sphere-box closed form is the point Bullet's GJK converges on, and where
# the ball leaves the car within a tick the split solve is the joint one: the ball after the touch
# within float32 rounding carried by the solve (measured 1.3e-3 UU/s max of ~2,000 UU/s, 1.7e-3 UU
# after 1 s, over 36 scenes). 0.05 UU/s and
# 0.05 UU are ~100x that; a missing car-ball row (the ball passing through the car) is off by
# hundreds of UU/s.
BALL_VEL_AFTER_TOUCH = 0.05
BALL_POS_AT_1S = 0.05
# Cars side by side: the stand-in points (deepest corners, one normal and depth for both, where
# btBoxBoxDetector clips faces into up to 4 points of their own depths) move the cars by a few UU
# in most scenes (median 6.0 UU, p95 71 UU over 12 scenes after 1 s); without the car-car rows the
# cars drive through each other (hundreds of UU). 25 UU leaves room for 4 scenes' median.
CAR_CAR_MEDIAN = 25.0


@pytest.mark.parametrize("family", ["car into the ball on the ground", "car into the ball in the air"])
def test_car_ball_touches_follow_the_reference(family):
    errors = scene_errors(family, SCENES)["fused vs reference"]
    assert errors["ball vel after touch"].size > 0  # the scenes touch
    assert float(np.median(errors["ball vel after touch"])) <= BALL_VEL_AFTER_TOUCH
    assert float(np.median(errors["ball pos at 1 s"])) <= BALL_POS_AT_1S


def test_cars_push_each_other():
    errors = scene_errors("cars side by side", SCENES)["fused vs reference"]
    assert float(np.median(errors["car pos at 1 s"])) <= CAR_CAR_MEDIAN


@pytest.mark.slow
@pytest.mark.parametrize("blue", [1, 2])
def test_kickoffs_follow_the_reference(blue):
    errors = kickoffs(4, blue, 3.0)
    assert errors["ball vel after touch"].size > 0
    assert float(np.median(errors["ball vel after touch"])) <= 0.05 * 2000  # 5% of a kickoff's speed
