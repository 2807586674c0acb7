"""`kernels/boost_pads.pad_cells`, the table of the one pad a car may touch (the fused tick tests each
car against that pad alone), against the reference's tests of every pad. Plain PyTorch: runs without
Triton."""

from __future__ import annotations

import pytest
import torch

from nitro.envs.soccar import boost_pads as reference
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car_config import CarParams
from nitro.envs.soccar.kernels import boost_pads as twin
from nitro.envs.soccar.state import BoostPadConfig, BoostPadState, CarState
from tests.envs.soccar.kernels.kernel_checks import random_rotations

PRESETS = ("octane", "dominus", "plank", "breakout", "hybrid", "merc")


@pytest.mark.parametrize("preset", PRESETS)
def test_pad_cells_name_every_pad_a_car_touches(preset):
    """`pad_cells` (the kernels test each car against that one pad alone) names every pad the
    reference's tests find, for cars of every preset anywhere near the pads (origins within 400 UU in x
    and y, any orientation), the pad locked to the car on the previous tick or not. The table is made
    for all six presets at once, as a World with one car of each makes it."""
    cpu = torch.device("cpu")
    config = BoostPadConfig.soccar(cpu)
    cells = twin.pad_cells(config, CarParams.build(list(PRESETS), cpu).hitbox).long()
    n = 20_000
    gen = torch.Generator().manual_seed(PRESETS.index(preset))
    cars = CarState.fresh(n, 1, cpu)
    pad = torch.randint(0, C.BOOST_PAD_COUNT, (n, 1), generator=gen)
    offset = (torch.rand(n, 1, 3, generator=gen) * 2 - 1) * torch.tensor([400.0, 400.0, 120.0])
    cars.pos = config.pos[pad] + offset
    cars.rot_mat = random_rotations(n, seed=PRESETS.index(preset))[:, None]  # any orientation
    params = CarParams.build([preset], cpu)
    touched = torch.zeros(n, C.BOOST_PAD_COUNT, dtype=torch.bool)
    for prev in (0, 1):  # the car tested against the pads' cylinders, then against their boxes
        pads = BoostPadState.fresh(n, cpu)
        pads.prev_locked_car_id = torch.full_like(pads.prev_locked_car_id, prev)
        touched |= reference.check_collision(pads, cars, params, config) == 1
    column = ((cars.pos[:, 0, 0] - twin.PAD_CELLS_X0.value) / twin.PAD_CELL.value).floor().long()
    row = ((cars.pos[:, 0, 1] - twin.PAD_CELLS_Y0.value) / twin.PAD_CELL.value).floor().long()
    named = cells[row, column]
    assert int(touched.sum(-1).max()) == 1  # a car touches one pad at most
    some = touched.any(-1)
    assert torch.equal(named[some], touched.int().argmax(-1)[some])
    assert int(some.sum()) > n // 10  # the sample touches pads (about a fifth of the cars)
