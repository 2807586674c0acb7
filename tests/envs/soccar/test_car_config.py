"""Car presets as Bullet holds them (`car_config.CarHitbox`), against hand-worked answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car_config import PRESETS, CarParams


def _hitboxes(names):
    return CarParams.build(list(names), torch.device("cpu")).hitbox


def test_octane_hitbox_is_bullets_box():
    box = _hitboxes(["octane"])
    # Worked by hand: half extents 120.507 / 86.6994 / 38.6591 UU x 0.02 / 2 = 1.20507 / 0.866994 /
    # 0.386591 BT; btBoxShape keeps them minus 0.04; setSafeMargin lowers the margin to 0.1 x 0.386591.
    assert box.inner[0].tolist() == pytest.approx([1.16507, 0.826994, 0.346591], abs=1e-6)
    assert box.margin[0].item() == pytest.approx(0.0386591, abs=1e-7)
    assert box.offset[0].tolist() == pytest.approx([0.277514, 0.0, 0.4151], abs=1e-6)
    # getAngularMotionDisc: the child AABB's half diagonal plus its centre's distance from the
    # origin, times gContactBreakingThreshold 0.02
    half = np.array([1.16507, 0.826994, 0.346591]) + 0.0386591
    disc = np.linalg.norm(half) + math.hypot(0.277514, 0.4151)
    assert box.threshold[0].item() == pytest.approx(disc * 0.02, rel=1e-6)


def test_every_preset_fits_the_grid_cells(mesh):
    # A car's contacts are looked for among its origin's grid cell list, which holds every triangle
    # within mesh.query_radius of the cell: the box's farthest corner plus the breaking threshold
    # must be inside that reach.
    box = _hitboxes(PRESETS)
    corner = (box.inner + box.margin[:, None]).norm(dim=-1) + box.offset.norm(dim=-1)
    reach = (corner + box.threshold) * C.BT_TO_UU
    assert reach.max().item() < mesh.query_radius
