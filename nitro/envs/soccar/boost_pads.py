"""Boost pads (RocketSim `BoostPad` and `BoostPadGrid`): cooldowns, pickup tests and boost given.

RocketSim's pads are pure logic, not Bullet bodies. Each tick (`Arena::Step`):

1. `pre_tick_update`: cooldowns count down; a pad is active again when its cooldown reaches 0.
2. after the cars' physics, `check_collision` finds the car each pad is locked to this tick: a car
   whose centre is inside the pad's cylinder, or, for the car the pad was locked to on the previous
   tick, whose AABB overlaps the pad's box (so a car that stays on a pad keeps it locked). Only cars
   that are not demoed, have less than full boost, are below the grid's height and sit in the 3 x 3
   grid cells around the pad are tested (`BoostPadGrid::CheckCollision`).
3. `post_tick_update`: an active pad with a locked car gives it 100 (big) or 12 (small) boost, capped
   at 100, and starts its cooldown.

The lock box starts at the pad's height (70 or 73 UU) while a car on its wheels reaches about 50 UU,
so a car that stays on a pad fails the box test on the tick after each lock and is locked again by
the cylinder on the next: on the floor the lock alternates tick by tick, in RocketSim as here.

Tests are done in Bullet units, as RocketSim does them. When two cars touch one pad on the same
tick RocketSim's winner depends on memory addresses (it iterates an unordered set of cars); here the
car with the highest index wins.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car_config import CarParams, hitbox_half_extents_with_margin
from nitro.envs.soccar.mutators import MutatorConfig
from nitro.envs.soccar.state import BoostPadState, CarState


@dataclasses.dataclass(frozen=True)
class BoostPadConfig:
    """The soccar pads in RocketSim's order (6 big, then 28 small), as tensors."""

    pos: torch.Tensor
    """Pad centre, UU [34, 3]."""
    is_big: torch.Tensor
    """[34] bool."""

    @staticmethod
    def soccar(device: torch.device) -> BoostPadConfig:
        pos = C.BOOST_PADS_BIG + C.BOOST_PADS_SMALL
        is_big = [True] * len(C.BOOST_PADS_BIG) + [False] * len(C.BOOST_PADS_SMALL)
        return BoostPadConfig(
            pos=torch.tensor(pos, dtype=torch.float32, device=device),
            is_big=torch.tensor(is_big, dtype=torch.bool, device=device),
        )


def pre_tick_update(pads: BoostPadState, tick_time: float) -> BoostPadState:
    """BoostPad::_PreTickUpdate: count the cooldown down; active when it is 0."""
    cooldown = torch.where(pads.cooldown > 0, (pads.cooldown - tick_time).clamp_min(0), pads.cooldown)
    return dataclasses.replace(pads, cooldown=cooldown, is_active=cooldown == 0)


def check_collision(
    pads: BoostPadState, cars: CarState, car_params: CarParams, config: BoostPadConfig
) -> torch.Tensor:
    """BoostPadGrid::CheckCollision + BoostPad::_CheckCollide for every car and pad.

    Returns the car each pad is locked to this tick as car index + 1 (RocketSim's car id), 0 for
    none [N, 34] int32.
    """
    car_pos_uu = cars.pos[:, :, None, :]  # [N, C, 1, 3]
    car_pos_bt = car_pos_uu * C.UU_TO_BT
    pad_pos_bt = config.pos * C.UU_TO_BT  # [34, 3]

    # BoostPadGrid: cars with room for boost, low enough, in the 3 x 3 cells around the pad
    cell_car = _grid_cell(car_pos_uu)
    cell_pad = _grid_cell(config.pos)
    near = ((cell_car - cell_pad).abs() <= 1).all(-1)  # [N, C, 34]
    tested = (~cars.is_demoed & (cars.boost < C.BOOST_MAX) & (cars.pos[..., 2] <= _GRID_EXTENT_Z))[..., None]

    # cylinder around the pad against the car's origin
    rad = torch.where(config.is_big, C.BOOST_PAD_CYL_RAD_BIG, C.BOOST_PAD_CYL_RAD_SMALL) * C.UU_TO_BT
    d = car_pos_bt[..., :2] - pad_pos_bt[:, :2]
    in_cylinder = ((d * d).sum(-1) < rad * rad) & (
        (car_pos_bt[..., 2] - pad_pos_bt[:, 2]).abs() < C.BOOST_PAD_CYL_HEIGHT * C.UU_TO_BT
    )

    # the pad's box against the car's AABB, for the car the pad was locked to on the previous tick
    box_rad = torch.where(config.is_big, C.BOOST_PAD_BOX_RAD_BIG, C.BOOST_PAD_BOX_RAD_SMALL) * C.UU_TO_BT
    box_min = pad_pos_bt - torch.stack([box_rad, box_rad, torch.zeros_like(box_rad)], -1)
    box_max = pad_pos_bt + torch.stack(
        [box_rad, box_rad, torch.full_like(box_rad, C.BOOST_PAD_BOX_HEIGHT * C.UU_TO_BT)], -1
    )
    car_min, car_max = car_aabb(cars, car_params)  # [N, C, 3] BT
    in_box = ((box_max > car_min[:, :, None]) & (box_min < car_max[:, :, None])).all(-1)

    num_cars = cars.pos.shape[1]
    car_id = torch.arange(1, num_cars + 1, dtype=torch.int32, device=cars.pos.device)[:, None]  # [C, 1]
    was_locked = pads.prev_locked_car_id[:, None, :] == car_id  # [N, C, 34]
    colliding = near & tested & torch.where(was_locked, in_box, in_cylinder)
    return (colliding.to(torch.int32) * car_id).amax(dim=1)


def post_tick_update(
    pads: BoostPadState, cars: CarState, locked_car_id: torch.Tensor, config: BoostPadConfig,
    mutators: MutatorConfig,
) -> tuple[BoostPadState, CarState, torch.Tensor]:
    """BoostPad::_PostTickUpdate: active pads give their locked car boost and start their cooldown.

    Returns (pads, cars, pickups): ``pickups`` [N, 34] int32 is the id (index + 1) of the car that
    picked each pad up this tick, 0 for none.
    """
    pickups = torch.where(pads.is_active, locked_car_id, 0)
    amount = torch.where(config.is_big, C.BOOST_PAD_AMOUNT_BIG, C.BOOST_PAD_AMOUNT_SMALL)  # [34]
    car_id = torch.arange(1, cars.boost.shape[1] + 1, dtype=torch.int32, device=cars.boost.device)
    given = ((pickups[:, None, :] == car_id[:, None]) * amount).sum(-1)  # [N, C]
    # each pad caps at BOOST_MAX in turn; all amounts are positive, so capping the sum is the same
    boost = torch.where(given > 0, (cars.boost + given).clamp_max(C.BOOST_MAX), cars.boost)
    cooldown_full = torch.where(config.is_big, mutators.boost_pad_cooldown_big, mutators.boost_pad_cooldown_small)
    picked = pickups > 0
    pads = BoostPadState(
        is_active=pads.is_active & ~picked,
        cooldown=torch.where(picked, cooldown_full, pads.cooldown),
        prev_locked_car_id=locked_car_id,
    )
    return pads, dataclasses.replace(cars, boost=boost), pickups


def car_aabb(cars: CarState, car_params: CarParams) -> tuple[torch.Tensor, torch.Tensor]:
    """btRigidBody::getAabb of each car's compound hitbox, BT [N, C, 3] twice.

    The compound's local box is the child box's AABB at the hitbox offset (btBoxShape's half
    extents with its margin), turned by the absolute rotation (btCompoundShape::getAabb).
    """
    half = torch.from_numpy(
        np.stack([hitbox_half_extents_with_margin(s) for s in car_params.hitbox_size.tolist()])  # sync-ok
    ).to(cars.pos.device)  # [C, 3]
    offset_bt = car_params.hitbox_pos_offset * C.UU_TO_BT  # [C, 3]
    local_min, local_max = offset_bt - half, offset_bt + half
    local_half = 0.5 * (local_max - local_min)
    local_center = 0.5 * (local_max + local_min)
    rot = cars.rot_mat  # [N, C, 3, 3], rows are world axes
    center = cars.pos * C.UU_TO_BT + (rot * local_center[None, :, None, :]).sum(-1)
    extent = (rot.abs() * local_half[None, :, None, :]).sum(-1)
    return center - extent, center + extent


_GRID_EXTENT_Z = C.BOOST_PAD_CYL_HEIGHT + 250.0  # BoostPadGrid::EXTENT_Z, UU
_GRID_CELLS = (8, 10)  # BoostPadGrid::CELLS_X, CELLS_Y
_GRID_CELL_SIZE = (1024.0, 1024.0)  # (int)(EXTENT_X / (CELLS_X / 2)), (int)(EXTENT_Y / (CELLS_Y / 2))


def _grid_cell(pos_uu: torch.Tensor) -> torch.Tensor:
    """BoostPadGrid's cell of a position: C++'s int() of pos / cell size + cells / 2 [..., 2] int32."""
    x = torch.trunc(pos_uu[..., 0] / _GRID_CELL_SIZE[0] + _GRID_CELLS[0] // 2)
    y = torch.trunc(pos_uu[..., 1] / _GRID_CELL_SIZE[1] + _GRID_CELLS[1] // 2)
    return torch.stack([x, y], -1).to(torch.int32)
