"""Boost pads per lane: the twin of `boost_pads.py` (BoostPad, BoostPadGrid), the same functions in the
same order.

A pad's state is (is_active, cooldown, prev_locked_car_id) per lane; `kernels/arena.py` walks the 34
pads of each lane's arena once per tick, after the cars' physics (the cooldown's pre-tick count
down reads nothing the physics writes, so it joins the walk), with the pads' state in memory.
Pads stand at least 1,061 UU apart and a car reaches at most about 360 UU to touch one, so a car can
touch one pad at most on a tick: each car finds that pad before the walk (`pad_near`, from the table
`pad_cells`) and tests it alone (`car_pad_tests`), and the walk compares indices (`check_collision`).
Lengths are in Bullet units where RocketSim tests in them; the float32 constants below are the
reference's tensors' values (each product rounded as PyTorch rounds it).
"""

from __future__ import annotations

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car_config import CarHitbox
from nitro.envs.soccar.kernels import constexpr, jit, tl
from nitro.envs.soccar.kernels.vec import load, load_uniform
from nitro.envs.soccar.state import BoostPadConfig

_f32 = np.float32
UU_TO_BT_F32 = constexpr(C.UU_TO_BT_F32)


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
PAD_CELL = constexpr(128.0)
"""The side (UU) of `pad_cells`' square cells, in x and y."""
PAD_CELLS_X0 = constexpr(-4608.0)
PAD_CELLS_Y0 = constexpr(-5632.0)
"""The corner (UU) of `pad_cells`' grid, which spans the field: 9,216 x 11,264 UU."""
PAD_CELLS_X = constexpr(72)
PAD_CELLS_Y = constexpr(88)
REACH_MARGIN = 8.0
"""UU added to a car's reach in `pad_cells`, for the rounding of the tests in BT and of a rotation
matrix's rows about unit length."""


def pad_table(config: BoostPadConfig) -> torch.Tensor:
    """The pads as the kernels read them: [34, PAD_TABLE_WIDTH] float32."""
    return torch.cat((config.pos, config.is_big[:, None].float()), 1).contiguous()


def car_reach(config: BoostPadConfig, hitbox: CarHitbox) -> torch.Tensor:
    """How far (UU, in x and y) from a pad's centre the origin of a car with these hitboxes can be
    while the car touches the pad, per pad [34]: within the pickup cylinder, or with its AABB over the
    pad's box. A car's AABB (`car_aabb`) sits within its origin plus |local centre| + |local half
    extents| on each axis, a rotation's rows being unit vectors; the box test holds within box radius
    plus that on x and on y, so within sqrt(2) times it in the plane."""
    local_center = 0.5 * (hitbox.local_max + hitbox.local_min)
    local_half = 0.5 * (hitbox.local_max - hitbox.local_min)
    car = local_center.norm(dim=-1) + local_half.norm(dim=-1)
    car = float(car.max()) * C.BT_TO_UU if car.numel() else 0.0  # sync-ok: once per World
    cylinder = torch.where(config.is_big, C.BOOST_PAD_CYL_RAD_BIG, C.BOOST_PAD_CYL_RAD_SMALL)
    box = torch.where(config.is_big, C.BOOST_PAD_BOX_RAD_BIG, C.BOOST_PAD_BOX_RAD_SMALL)
    return torch.maximum(cylinder, (box + car) * 2**0.5) + REACH_MARGIN


def pad_cells(config: BoostPadConfig, hitbox: CarHitbox) -> torch.Tensor:
    """Which pad a car whose origin lies in each cell of the field may touch (`pad_near`): the one pad
    whose reach (`car_reach`) meets the cell, -1 for none; [PAD_CELLS_Y, PAD_CELLS_X] int8. Raises
    ValueError where a cell meets two pads' reach or a pad's reach leaves the grid (pads other than
    RocketSim's)."""
    reach = car_reach(config, hitbox).cpu().double()  # sync-ok: once per World
    pos = config.pos[:, :2].cpu().double()  # sync-ok: once per World
    lo = torch.tensor([PAD_CELLS_X0.value, PAD_CELLS_Y0.value], dtype=torch.float64)
    hi = lo + PAD_CELL.value * torch.tensor([PAD_CELLS_X.value, PAD_CELLS_Y.value], dtype=torch.float64)
    outside = ((pos - reach[:, None] < lo) | (pos + reach[:, None] > hi)).any(1)
    if bool(outside.any()):  # sync-ok: once per World, on the CPU copy
        first = int(outside.nonzero()[0])  # sync-ok: an error's message, on the CPU copy
        where = pos[first].tolist()  # sync-ok: the same
        raise ValueError(
            f"boost pad {first} at {where} UU reaches beyond the fused "
            f"tick's pad grid, x from {lo[0]:.0f} and y from {lo[1]:.0f} UU over {hi[0] - lo[0]:.0f} x "
            f"{hi[1] - lo[1]:.0f} UU; use RocketSim's soccar pads (BoostPadConfig.soccar) or the eager tick"
        )
    x = lo[0] + PAD_CELL.value * torch.arange(PAD_CELLS_X.value, dtype=torch.float64)
    y = lo[1] + PAD_CELL.value * torch.arange(PAD_CELLS_Y.value, dtype=torch.float64)
    # each pad's distance to the nearest point of each cell [34, cells y, cells x]
    dx = (torch.maximum(x - pos[:, :1], pos[:, :1] - (x + PAD_CELL.value)).clamp_min(0))[:, None, :]
    dy = (torch.maximum(y - pos[:, 1:], pos[:, 1:] - (y + PAD_CELL.value)).clamp_min(0))[:, :, None]
    meets = dx * dx + dy * dy <= (reach * reach)[:, None, None]
    if bool((meets.sum(0) > 1).any()):  # sync-ok: once per World, on the CPU copy
        raise ValueError(
            "two boost pads stand within reach of one car (`car_reach`), which the fused tick's pad walk "
            "does not take; use RocketSim's soccar pads (BoostPadConfig.soccar) or the eager tick"
        )
    index = torch.arange(len(reach), dtype=torch.int64)[:, None, None]
    cells = torch.where(meets, index, -1).amax(0)
    return cells.to(torch.int8).to(config.pos.device).contiguous()


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
            pos[i] * UU_TO_BT_F32 + ((row[0] * local_center[0] + row[1] * local_center[1]) + row[2] * local_center[2]),
        )
        extent = extent + (
            (tl.abs(row[0]) * local_half[0] + tl.abs(row[1]) * local_half[1]) + tl.abs(row[2]) * local_half[2],
        )
    lo = (center[0] - extent[0], center[1] - extent[1], center[2] - extent[2])
    hi = (center[0] + extent[0], center[1] + extent[1], center[2] + extent[2])
    return lo, hi


@jit
def check_collide(pad_pos, is_big, car_pos, car_min, car_max):
    """BoostPad::_CheckCollide of one car, both of its tests (BT): (its origin in the pad's cylinder,
    its AABB against the pad's box), the second for the car the pad was locked to on the previous
    tick."""
    pad_bt = (pad_pos[0] * UU_TO_BT_F32, pad_pos[1] * UU_TO_BT_F32, pad_pos[2] * UU_TO_BT_F32)
    car_bt = (car_pos[0] * UU_TO_BT_F32, car_pos[1] * UU_TO_BT_F32, car_pos[2] * UU_TO_BT_F32)
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
    return in_cylinder, in_box


@jit
def pad_near(pad_cells_ptr, car_pos, live):
    """The one pad a car at ``car_pos`` (UU) may touch (`pad_cells`), -1 for none."""
    x = tl.floor((car_pos[0] - PAD_CELLS_X0) * (1.0 / PAD_CELL)).to(tl.int32)
    y = tl.floor((car_pos[1] - PAD_CELLS_Y0) * (1.0 / PAD_CELL)).to(tl.int32)
    inside = live & (x >= 0) & (x < PAD_CELLS_X) & (y >= 0) & (y < PAD_CELLS_Y)
    return tl.load(pad_cells_ptr + y * PAD_CELLS_X + x, mask=inside, other=-1).to(tl.int32)


@jit
def car_pad_tests(pad, pad_table_ptr, car_pos, car_min, car_max, car_tested):
    """BoostPadGrid::CheckCollision + BoostPad::_CheckCollide of one car against ``pad``, the one pad it
    may touch (`pad_near`, -1 for none): (that pad, whether it collides as a car the pad was not locked
    to on the previous tick, whether as the car it was locked to)."""
    has = pad >= 0
    at = pad_table_ptr + tl.where(has, pad, 0) * PAD_TABLE_WIDTH
    pad_pos = load(at, has, (0.0, 0.0, 0.0))
    is_big = tl.load(at + 3, mask=has, other=0.0) != 0
    pad_cell = grid_cell(pad_pos)
    cell = grid_cell(car_pos)
    near = (tl.abs(cell[0] - pad_cell[0]) <= 1) & (tl.abs(cell[1] - pad_cell[1]) <= 1)
    in_cylinder, in_box = check_collide(pad_pos, is_big, car_pos, car_min, car_max)
    candidate = has & near & car_tested
    return pad, candidate & in_cylinder, candidate & in_box


@jit
def check_collision(prev_locked_car_id, p, cars_pad, NUM_CARS: tl.constexpr):
    """BoostPadGrid::CheckCollision + BoostPad::_CheckCollide of pad ``p`` against every car, from each
    car's `car_pad_tests`: the car it is locked to this tick as index + 1, 0 for none (the last
    colliding car wins)."""
    locked = prev_locked_car_id * 0
    for c in tl.static_range(NUM_CARS):
        pad, in_cylinder, in_box = cars_pad[c]
        colliding = (pad == p) & tl.where(prev_locked_car_id == c + 1, in_box, in_cylinder)
        locked = tl.where(colliding, c + 1, locked)
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

