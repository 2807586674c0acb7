"""Boost pads per lane: the twin of `boost_pads.py` (BoostPad, BoostPadGrid), the same functions in the
same order.

A pad's state is (is_active, cooldown, prev_locked_car_id) per lane; `kernels/arena.py` walks the 34
pads of each lane's arena once per tick, after the cars' physics (the cooldown's pre-tick count
down reads nothing the physics writes, so it joins the walk), with the pads' state in memory.
Lengths are in Bullet units where RocketSim tests in them; the float32 constants below are the
reference's tensors' values (each product rounded as PyTorch rounds it).
"""

from __future__ import annotations

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.kernels import constexpr, jit, tl
from nitro.envs.soccar.kernels.vec import load_uniform
from nitro.envs.soccar.state import BoostPadConfig

_f32 = np.float32
UU_TO_BT = constexpr(float(_f32(C.UU_TO_BT)))


def _bt(uu: float) -> float:
    return float(_f32(uu) * _f32(C.UU_TO_BT))


CYL_RAD_SQ_BIG = constexpr(float(_f32(_bt(C.BOOST_PAD_CYL_RAD_BIG)) ** 2))
CYL_RAD_SQ_SMALL = constexpr(float(_f32(_bt(C.BOOST_PAD_CYL_RAD_SMALL)) ** 2))
CYL_HEIGHT_BT = constexpr(_bt(C.BOOST_PAD_CYL_HEIGHT))
BOX_RAD_BIG_BT = constexpr(_bt(C.BOOST_PAD_BOX_RAD_BIG))
BOX_RAD_SMALL_BT = constexpr(_bt(C.BOOST_PAD_BOX_RAD_SMALL))
BOX_HEIGHT_BT = constexpr(_bt(C.BOOST_PAD_BOX_HEIGHT))
GRID_EXTENT_Z = constexpr(C.BOOST_PAD_GRID_EXTENT_Z)
GRID_CELLS_X, GRID_CELLS_Y = (constexpr(c) for c in C.BOOST_PAD_GRID_CELLS)
GRID_CELL_SIZE_X, GRID_CELL_SIZE_Y = (constexpr(c) for c in C.BOOST_PAD_GRID_CELL_SIZE)
BOOST_MAX = constexpr(C.BOOST_MAX)
AMOUNT_BIG = constexpr(C.BOOST_PAD_AMOUNT_BIG)
AMOUNT_SMALL = constexpr(C.BOOST_PAD_AMOUNT_SMALL)
PAD_TABLE_WIDTH = constexpr(4)
"""Floats per pad in `pad_table`: the centre (UU) and is_big (0 / 1)."""


def pad_table(config: BoostPadConfig) -> torch.Tensor:
    """The pads as the kernels read them: [34, PAD_TABLE_WIDTH] float32."""
    return torch.cat((config.pos, config.is_big[:, None].float()), 1).contiguous()


@jit
def pre_tick_update(cooldown, tick_time):
    """BoostPad::_PreTickUpdate: count the cooldown down; active when it is 0. Returns (is_active, cooldown)."""
    cooldown = tl.where(cooldown > 0, tl.maximum(cooldown - tick_time, 0.0), cooldown)
    return cooldown == 0, cooldown


@jit
def grid_cell(pos):
    """BoostPadGrid's cell of a position (UU): C++'s int() of pos / cell size + cells / 2."""
    x = (pos[0] / GRID_CELL_SIZE_X + GRID_CELLS_X // 2).to(tl.int32)
    y = (pos[1] / GRID_CELL_SIZE_Y + GRID_CELLS_Y // 2).to(tl.int32)
    return x, y


@jit
def car_aabb(pos, rot_mat, local_min, local_max):
    """btRigidBody::getAabb of the car's compound hitbox, BT: (min, max). ``rot_mat`` rows are world
    axes ((m00, m01, m02), ...); ``local_min`` / ``local_max`` the compound's local AABB (BT)."""
    local_half = (
        0.5 * (local_max[0] - local_min[0]),
        0.5 * (local_max[1] - local_min[1]),
        0.5 * (local_max[2] - local_min[2]),
    )
    local_center = (
        0.5 * (local_max[0] + local_min[0]),
        0.5 * (local_max[1] + local_min[1]),
        0.5 * (local_max[2] + local_min[2]),
    )
    center = ()
    extent = ()
    for i in tl.static_range(3):
        row = rot_mat[i]
        center = center + (
            pos[i] * UU_TO_BT + ((row[0] * local_center[0] + row[1] * local_center[1]) + row[2] * local_center[2]),
        )
        extent = extent + (
            (tl.abs(row[0]) * local_half[0] + tl.abs(row[1]) * local_half[1]) + tl.abs(row[2]) * local_half[2],
        )
    lo = (center[0] - extent[0], center[1] - extent[1], center[2] - extent[2])
    hi = (center[0] + extent[0], center[1] + extent[1], center[2] + extent[2])
    return lo, hi


@jit
def check_collide(was_locked, pad_pos, is_big, car_pos, car_min, car_max):
    """BoostPad::_CheckCollide of one car: its origin in the pad's cylinder, or, for the car the pad
    was locked to on the previous tick, its AABB against the pad's box (BT)."""
    pad_bt = (pad_pos[0] * UU_TO_BT, pad_pos[1] * UU_TO_BT, pad_pos[2] * UU_TO_BT)
    car_bt = (car_pos[0] * UU_TO_BT, car_pos[1] * UU_TO_BT, car_pos[2] * UU_TO_BT)
    dx = car_bt[0] - pad_bt[0]
    dy = car_bt[1] - pad_bt[1]
    rad_sq = tl.where(is_big, CYL_RAD_SQ_BIG, CYL_RAD_SQ_SMALL)
    in_cylinder = (dx * dx + dy * dy < rad_sq) & (tl.abs(car_bt[2] - pad_bt[2]) < CYL_HEIGHT_BT)
    box_rad = tl.where(is_big, BOX_RAD_BIG_BT, BOX_RAD_SMALL_BT)
    box_min = (pad_bt[0] - box_rad, pad_bt[1] - box_rad, pad_bt[2] - 0.0)
    box_max = (pad_bt[0] + box_rad, pad_bt[1] + box_rad, pad_bt[2] + BOX_HEIGHT_BT)
    in_box = (box_max[0] > car_min[0]) & (box_min[0] < car_max[0])
    in_box = in_box & (box_max[1] > car_min[1]) & (box_min[1] < car_max[1])
    in_box = in_box & (box_max[2] > car_min[2]) & (box_min[2] < car_max[2])
    return tl.where(was_locked, in_box, in_cylinder)


@jit
def check_collision(prev_locked_car_id, pad_pos, is_big, cars_pos, cars_min, cars_max, cars_tested, NUM_CARS: tl.constexpr):
    """BoostPadGrid::CheckCollision + BoostPad::_CheckCollide of one pad against every car: the car
    it is locked to this tick as index + 1, 0 for none (the last colliding car wins)."""
    pad_cell = grid_cell(pad_pos)
    locked = prev_locked_car_id * 0
    for c in tl.static_range(NUM_CARS):
        cell = grid_cell(cars_pos[c])
        near = (tl.abs(cell[0] - pad_cell[0]) <= 1) & (tl.abs(cell[1] - pad_cell[1]) <= 1)
        colliding = check_collide(prev_locked_car_id == c + 1, pad_pos, is_big, cars_pos[c], cars_min[c], cars_max[c])
        locked = tl.where(near & cars_tested[c] & colliding, c + 1, locked)
    return locked


@jit
def tested(car_pos, is_demoed, boost):
    """BoostPadGrid::CheckCollision's skips: demolished, full of boost, above the grid."""
    return (~is_demoed) & (boost < BOOST_MAX) & (car_pos[2] <= GRID_EXTENT_Z)


@jit
def post_tick_update(is_active, cooldown, locked_car_id, is_big, boost_pad_cooldown_big, boost_pad_cooldown_small):
    """BoostPad::_PostTickUpdate of one pad: an active pad with a locked car gives it boost and starts
    its cooldown. Returns (is_active, cooldown, prev_locked_car_id, picked-up-by car id or 0, amount)."""
    pickup = tl.where(is_active, locked_car_id, 0)
    picked = pickup > 0
    full = tl.where(is_big, boost_pad_cooldown_big, boost_pad_cooldown_small)
    amount = tl.where(is_big, AMOUNT_BIG, AMOUNT_SMALL)
    return is_active & (~picked), tl.where(picked, full, cooldown), locked_car_id, pickup, amount


@jit
def give_boost(boost, given):
    """The boost the car's pads gave it this tick, capped at BOOST_MAX (the reference's order)."""
    return tl.where(given > 0, tl.minimum(boost + given, BOOST_MAX), boost)


@jit
def load_pad(pad_table_ptr, p):
    """Pad ``p``'s centre (UU) and size, the same for every lane."""
    pos = load_uniform(pad_table_ptr + p * PAD_TABLE_WIDTH)
    return pos, tl.load(pad_table_ptr + p * PAD_TABLE_WIDTH + 3) != 0

