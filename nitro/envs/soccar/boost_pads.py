"""Boost pads (RocketSim `BoostPad` and `BoostPadGrid`): cooldowns, pickup tests and boost given.

RocketSim's pads are pure logic, not Bullet bodies. Each tick with cars (`Arena::Step`):

1. `pre_tick_update`: cooldowns count down; a pad is active again when its cooldown reaches 0.
2. after the cars' physics, `check_collision` finds the car each pad is locked to this tick: a car
   whose centre is inside the pad's cylinder, or, for the car the pad was locked to on the previous
   tick, whose AABB overlaps the pad's box (so a car that stays on a pad keeps it locked). Only cars
   that are not demoed, have less than full boost, are below the grid's height and sit in the 3 x 3
   grid cells around the pad are tested (`BoostPadGrid::CheckCollision`).
3. `post_tick_update`: an active pad with a locked car gives it 100 (big) or 12 (small) boost, capped
   at 100, and starts its cooldown (the mutators' 10 s or 4 s).

The lock box starts at the pad's height (70 or 73 UU) while a car on its wheels reaches about 50 UU,
so a car that stays on a pad fails the box test on the tick after each lock and is locked again by
the cylinder on the next: on the floor the lock alternates tick by tick, in RocketSim as here.

Tests are done in Bullet units, as RocketSim does them. When two cars touch one pad on the same
tick RocketSim's winner depends on memory addresses (it iterates an unordered set of cars); here the
car with the highest index wins. The kernels' twin is `kernels/boost_pads.py`.
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car_config import CarParams
from nitro.envs.soccar.mutators import TickParams
from nitro.envs.soccar.state import BoostPadConfig, BoostPadState, CarState


def pre_tick_update(pads: BoostPadState, params: TickParams) -> BoostPadState:
    """BoostPad::_PreTickUpdate: count the cooldown down; active when it is 0."""
    cooldown = torch.where(pads.cooldown > 0, (pads.cooldown - params.tick_time).clamp_min(0), pads.cooldown)
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
    near = ((grid_cell(car_pos_uu) - grid_cell(config.pos)).abs() <= 1).all(-1)  # [N, C, 34]
    tested = ~cars.is_demoed & (cars.boost < C.BOOST_MAX) & (cars.pos[..., 2] <= C.BOOST_PAD_GRID_EXTENT_Z)

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

    car_id = _car_ids(cars)[:, None]  # [C, 1]
    was_locked = pads.prev_locked_car_id[:, None, :] == car_id  # [N, C, 34]
    colliding = near & tested[..., None] & torch.where(was_locked, in_box, in_cylinder)
    return (colliding.to(torch.int32) * car_id).amax(dim=1)


def post_tick_update(
    pads: BoostPadState, cars: CarState, locked_car_id: torch.Tensor, config: BoostPadConfig, params: TickParams
) -> tuple[BoostPadState, CarState, torch.Tensor]:
    """BoostPad::_PostTickUpdate: active pads give their locked car boost and start their cooldown.

    Returns (pads, cars, pickup_pad): ``pickup_pad`` [N, C] int32 is the pad each car picked up this
    tick (the highest index if several), -1 for none.
    """
    pickups = torch.where(pads.is_active, locked_car_id, 0)  # [N, 34] car id
    amount = torch.where(config.is_big, C.BOOST_PAD_AMOUNT_BIG, C.BOOST_PAD_AMOUNT_SMALL)  # [34]
    picked_by = pickups[:, None, :] == _car_ids(cars)[:, None]  # [N, C, 34]
    given = (picked_by * amount).sum(-1)  # [N, C]
    # each pad caps at BOOST_MAX in turn; all amounts are positive, so capping the sum is the same
    boost = torch.where(given > 0, (cars.boost + given).clamp_max(C.BOOST_MAX), cars.boost)
    cooldown_full = torch.where(config.is_big, params.boost_pad_cooldown_big, params.boost_pad_cooldown_small)
    picked = pickups > 0
    pads = BoostPadState(
        is_active=pads.is_active & ~picked,
        cooldown=torch.where(picked, cooldown_full, pads.cooldown),
        prev_locked_car_id=locked_car_id,
    )
    pad_index = torch.arange(C.BOOST_PAD_COUNT, dtype=torch.int32, device=pickups.device)
    pickup_pad = torch.where(picked_by, pad_index, -1).amax(-1)
    return pads, dataclasses.replace(cars, boost=boost), pickup_pad


def car_aabb(cars: CarState, car_params: CarParams) -> tuple[torch.Tensor, torch.Tensor]:
    """btRigidBody::getAabb of each car's compound hitbox, BT [N, C, 3] twice.

    The compound's local box is the child box's AABB at the hitbox offset (btBoxShape's half
    extents with its margin), turned by the absolute rotation (btCompoundShape::getAabb).
    """
    local_min, local_max = car_params.hitbox.local_min, car_params.hitbox.local_max  # [C, 3]
    local_half = 0.5 * (local_max - local_min)
    local_center = 0.5 * (local_max + local_min)
    rot = cars.rot_mat  # [N, C, 3, 3], rows are world axes
    center = cars.pos * C.UU_TO_BT + (rot * local_center[None, :, None, :]).sum(-1)
    extent = (rot.abs() * local_half[None, :, None, :]).sum(-1)
    return center - extent, center + extent


def grid_cell(pos_uu: torch.Tensor) -> torch.Tensor:
    """BoostPadGrid's cell of a position: C++'s int() of pos / cell size + cells / 2 [..., 2] int32."""
    (cells_x, cells_y), (size_x, size_y) = C.BOOST_PAD_GRID_CELLS, C.BOOST_PAD_GRID_CELL_SIZE
    x = torch.trunc(pos_uu[..., 0] / size_x + cells_x // 2)
    y = torch.trunc(pos_uu[..., 1] / size_y + cells_y // 2)
    return torch.stack([x, y], -1).to(torch.int32)


def _car_ids(cars: CarState) -> torch.Tensor:
    """RocketSim's car ids, index + 1 [C] int32 (0 is "no car")."""
    return torch.arange(1, cars.boost.shape[1] + 1, dtype=torch.int32, device=cars.boost.device)
