"""Car presets (RocketSim `CarConfig`) and the per-car tables the tick reads.

Reference: RocketSim (ZealanL/RocketSim, MIT) `src/Sim/Car/CarConfig/CarConfig.cpp` (the preset
numbers) and `Car::_BulletSetup` (what Bullet builds from them: the hitbox, its inertia, the four
wheels). Data only: nothing here imports a mechanic.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.vec import dot

# Wheel order of btVehicleRL as Car::_BulletSetup adds them: front-right, front-left, back-right,
# back-left (each pair's second wheel has the connection point's y, which points right, negated).
NUM_WHEELS = 4
WHEEL_IS_FRONT = (True, True, False, False)
WHEEL_Y_SIGN = (1.0, -1.0, 1.0, -1.0)


@dataclasses.dataclass(frozen=True)
class WheelPairConfig:
    """One axle of a preset (RocketSim `WheelPairConfig`), UU."""

    wheel_radius: float
    suspension_rest_length: float
    """How far out the suspension rests, UU (Bullet's rest length is this minus 12 UU of travel)."""
    connection_point_offset: tuple[float, float, float]
    """Where the suspension ray starts, in the car's frame (x forward, y right, z up); y > 0, the
    pair's second wheel mirrors it."""


@dataclasses.dataclass(frozen=True)
class CarHitbox:
    """Bullet's view of car hitboxes (`Car::_BulletSetup`), BT, one row per car [..., 3] / [...]."""

    inner: torch.Tensor
    """m_implicitShapeDimensions: half extents minus 0.04 BT (btBoxShape subtracts the default
    margin, then setSafeMargin lowers the margin without giving the difference back) [..., 3]."""
    margin: torch.Tensor
    """Collision margin, min(0.04, 0.1 * smallest half extent) [...]."""
    offset: torch.Tensor
    """The box's centre in the car frame (the compound's child transform) [..., 3]."""
    local_min: torch.Tensor
    """The compound's local AABB (the child box's, margin included) [..., 3]."""
    local_max: torch.Tensor
    threshold: torch.Tensor
    """Contact breaking threshold of every car-world manifold: the compound's angular motion disc
    (bounding sphere radius plus its centre's distance from the origin) times 0.02 [...]."""
    inv_inertia_local: torch.Tensor
    """1 / btBoxShape::calculateLocalInertia (mass 180) [..., 3]."""

    def flat(self, shape: torch.Size) -> CarHitbox:
        """The hitboxes broadcast to cars of batch ``shape`` and flattened: [B, 3] / [B]."""
        batch = self.margin.dim()

        def one(x: torch.Tensor) -> torch.Tensor:
            tail = x.shape[batch:]
            return x.expand(*shape, *tail).reshape(-1, *tail)

        return CarHitbox(**{f.name: one(getattr(self, f.name)) for f in dataclasses.fields(self)})


def car_hitbox(size: torch.Tensor, offset: torch.Tensor) -> CarHitbox:
    """The `CarHitbox` of hitboxes of ``size`` and ``offset`` [..., 3] (UU, `CarConfig`'s
    ``hitbox_size`` and ``hitbox_pos_offset``), in float32 as Bullet computes it."""
    size = torch.as_tensor(size, dtype=torch.float32)
    offset = torch.as_tensor(offset, dtype=torch.float32, device=size.device)
    half = (size * C.UU_TO_BT_F32) / 2.0
    inner = half - C.CONVEX_DISTANCE_MARGIN
    margin = torch.clamp(C.BOX_SAFE_MARGIN_FACTOR * half.amin(-1), max=C.CONVEX_DISTANCE_MARGIN)
    offset_bt = offset * C.UU_TO_BT_F32
    # btCompoundShape::recalculateLocalAabb (the child's getAabb), then getBoundingSphere at identity
    extent = inner + margin[..., None]
    local_min, local_max = offset_bt - extent, offset_bt + extent
    local_half, local_center = 0.5 * (local_max - local_min), 0.5 * (local_max + local_min)
    aabb_min, aabb_max = local_center - local_half, local_center + local_half
    diag = aabb_max - aabb_min
    center = (aabb_min + aabb_max) * 0.5
    disc = torch.sqrt(dot(diag, diag)) * 0.5 + torch.sqrt(dot(center, center))
    # btBoxShape::calculateLocalInertia (mass / 12 = 15 exactly), inverted in double by setMassProps
    lx, ly, lz = (2.0 * extent).unbind(-1)
    inertia = torch.stack((ly * ly + lz * lz, lx * lx + lz * lz, lx * lx + ly * ly), -1) * (
        C.CAR_MASS_BT / 12.0
    )
    return CarHitbox(
        inner=inner,
        margin=margin,
        offset=offset_bt,
        local_min=local_min,
        local_max=local_max,
        threshold=disc * C.CONTACT_BREAKING_THRESHOLD,
        inv_inertia_local=(1.0 / inertia.double()).float(),
    )


@dataclasses.dataclass(frozen=True)
class CarConfig:
    """A car preset (RocketSim `CarConfig`), UU."""

    hitbox_size: tuple[float, float, float]
    """Full length, width, height of the collision box."""
    hitbox_pos_offset: tuple[float, float, float]
    """The box's centre in the car's frame; the centre of mass stays at the car's origin."""
    front_wheels: WheelPairConfig
    back_wheels: WheelPairConfig
    dodge_deadzone: float = 0.5
    """|yaw| + |pitch| + |roll| must reach this for a jump in the air to be a flip."""


def _preset(size, offset, front_radius, back_radius, front_rest, back_rest, front_offset, back_offset):
    return CarConfig(
        hitbox_size=size,
        hitbox_pos_offset=offset,
        front_wheels=WheelPairConfig(front_radius, front_rest, front_offset),
        back_wheels=WheelPairConfig(back_radius, back_rest, back_offset),
    )


# CarConfig.cpp's tables, one preset per row. PLANK is the Batmobile hitbox.
PRESETS: dict[str, CarConfig] = {
    "octane": _preset(
        (120.507, 86.6994, 38.6591),
        (13.8757, 0.0, 20.755),
        12.50,
        15.00,
        38.755,
        37.055,
        (51.25, 25.90, 20.755),
        (-33.75, 29.50, 20.755),
    ),
    "dominus": _preset(
        (130.427, 85.7799, 33.8),
        (9.0, 0.0, 15.75),
        12.00,
        13.50,
        33.95,
        33.85,
        (50.30, 31.10, 15.75),
        (-34.75, 33.00, 15.75),
    ),
    "plank": _preset(
        (131.32, 87.1704, 31.8944),
        (9.00857, 0.0, 12.0942),
        12.50,
        17.00,
        31.9242,
        27.9242,
        (49.97, 27.80, 12.0942),
        (-35.43, 20.28, 12.0942),
    ),
    "breakout": _preset(
        (133.992, 83.021, 32.8),
        (12.5, 0.0, 11.75),
        13.50,
        15.00,
        29.7,
        29.666,
        (51.50, 26.67, 11.75),
        (-35.75, 35.00, 11.75),
    ),
    "hybrid": _preset(
        (129.519, 84.6879, 36.6591),
        (13.8757, 0.0, 20.755),
        12.50,
        15.00,
        38.755,
        37.055,
        (51.25, 25.90, 20.755),
        (-34.00, 29.50, 20.755),
    ),
    "merc": _preset(
        (123.22, 79.2103, 44.1591),
        (11.3757, 0.0, 21.505),
        15.00,
        15.00,
        39.505,
        39.105,
        (51.25, 25.90, 21.505),
        (-33.75, 29.50, 21.505),
    ),
}


def hitbox_half_extents_with_margin(hitbox_size) -> np.ndarray:
    """btBoxShape's half extents as its inertia sees them, in BT, float32 [3].

    The constructor stores half - 0.04 (CONVEX_DISTANCE_MARGIN) and then shrinks the margin to 0.1 x
    the smallest half extent when that is smaller (setSafeMargin), so every preset but the Merc ends
    up slightly smaller than its hitbox (the Octane by 0.0013 BT = 0.067 UU per side).
    """
    f = np.float32
    half = (np.asarray(hitbox_size, f) * f(C.UU_TO_BT)) / f(2)
    margin = f(0.04)
    implicit = half - margin
    margin = min(margin, f(0.1) * half.min())
    return implicit + margin


def box_inertia_bt(hitbox_size) -> np.ndarray:
    """btBoxShape::calculateLocalInertia for CAR_MASS_BT, in Bullet units, float32 [3]."""
    f = np.float32
    lx, ly, lz = f(2) * hitbox_half_extents_with_margin(hitbox_size)
    scale = f(C.CAR_MASS_BT) / f(12)
    return np.array(
        [scale * (ly * ly + lz * lz), scale * (lx * lx + lz * lz), scale * (lx * lx + ly * ly)], f
    )


@dataclasses.dataclass(frozen=True)
class CarParams:
    """The presets of an Arena's C car slots as tensors (blue cars first, then orange).

    What `Car::_BulletSetup` derives from each `CarConfig`, in UU: the rigid body's inverse inertia,
    the four btVehicleRL wheels (in its order: front pair, then back pair; each pair's second wheel
    mirrored to negative y), and the hitbox the body collides with.
    """

    names: tuple[str, ...]
    """Preset of each car [C]."""
    hitbox_size: torch.Tensor
    """Full box size, UU [C, 3]."""
    hitbox_pos_offset: torch.Tensor
    """Box centre in the car frame, UU [C, 3]."""
    inv_inertia_local: torch.Tensor
    """1 / principal moments of inertia, in mass-UU^2 units (Bullet's times 1/2500) [C, 3]."""
    wheel_connection: torch.Tensor
    """Suspension ray starts in the car frame, UU [C, 4, 3]."""
    wheel_radius: torch.Tensor
    """UU [C, 4]."""
    suspension_rest_length: torch.Tensor
    """Bullet's rest length: the config's minus MAX_SUSPENSION_TRAVEL, UU [C, 4]."""
    suspension_force_scale: torch.Tensor
    """SUSPENSION_FORCE_SCALE_FRONT or _BACK per wheel [C, 4]."""
    is_front: torch.Tensor
    """Front wheels (the steered pair) [C, 4] bool."""
    dodge_deadzone: torch.Tensor
    """[C]."""
    hitbox: CarHitbox
    """The hitboxes as Bullet holds them (BT units) [C, ...]."""

    @property
    def num_cars(self) -> int:
        return len(self.names)

    @property
    def ray_length(self) -> torch.Tensor:
        """The wheels' suspension rays, from the hard point down: rest + travel + radius - 2.5 UU [C, 4]."""
        rest_and_travel = self.suspension_rest_length + C.MAX_SUSPENSION_TRAVEL
        return (rest_and_travel + self.wheel_radius) - C.SUSPENSION_SUBTRACTION

    @staticmethod
    def build(names: Sequence[str], device: torch.device) -> CarParams:
        """Tables for cars of the given preset names (keys of PRESETS)."""
        for name in names:
            if name not in PRESETS:
                raise ValueError(f"unknown car preset {name!r}; expected one of {sorted(PRESETS)}")
        configs = [PRESETS[name] for name in names]
        inertia_uu = [box_inertia_bt(c.hitbox_size).astype(np.float64) * C.BT_TO_UU**2 for c in configs]
        wheels = [[c.front_wheels, c.front_wheels, c.back_wheels, c.back_wheels] for c in configs]

        def t(x, dtype=torch.float32):
            return torch.tensor(np.asarray(x), dtype=dtype, device=device).reshape(
                (len(names),) + np.shape(x)[1:]
            )

        return CarParams(
            names=tuple(names),
            hitbox_size=t([c.hitbox_size for c in configs]),
            hitbox_pos_offset=t([c.hitbox_pos_offset for c in configs]),
            inv_inertia_local=t([1.0 / np.float32(i) for i in inertia_uu]),
            wheel_connection=t(
                [
                    [
                        (
                            w.connection_point_offset[0],
                            w.connection_point_offset[1] * s,
                            w.connection_point_offset[2],
                        )
                        for w, s in zip(ws, WHEEL_Y_SIGN)
                    ]
                    for ws in wheels
                ]
            ),
            wheel_radius=t([[w.wheel_radius for w in ws] for ws in wheels]),
            suspension_rest_length=t(
                [[w.suspension_rest_length - C.MAX_SUSPENSION_TRAVEL for w in ws] for ws in wheels]
            ),
            suspension_force_scale=t(
                [
                    [
                        C.SUSPENSION_FORCE_SCALE_FRONT if f else C.SUSPENSION_FORCE_SCALE_BACK
                        for f in WHEEL_IS_FRONT
                    ]
                    for _ in configs
                ]
            ),
            is_front=t([list(WHEEL_IS_FRONT) for _ in configs], torch.bool),
            dodge_deadzone=t([c.dodge_deadzone for c in configs]),
            hitbox=car_hitbox(
                t([c.hitbox_size for c in configs]).reshape(-1, 3),
                t([c.hitbox_pos_offset for c in configs]).reshape(-1, 3),
            ),
        )
