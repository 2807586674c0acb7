"""What the viewers need to know about each car preset: its hitbox and wheels.

Values are RocketSim's car configs (`src/Sim/Car/CarConfig/CarConfig.cpp`, v2.2), in UU, in the car's
local frame (x forward, y right, z up). Replays store each car's hitbox; RLViser draws the wheels too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WheelPair:
    wheel_radius: float
    suspension_rest_length: float
    connection_point_offset: tuple[float, float, float]
    """Offset of the wheel on the +y side; the other wheel mirrors it."""


@dataclass(frozen=True)
class CarPreset:
    hitbox_size: tuple[float, float, float]
    """Full lengths along forward, right, up."""
    hitbox_offset: tuple[float, float, float]
    """Centre of the hitbox relative to the car's origin."""
    front_wheels: WheelPair
    back_wheels: WheelPair
    three_wheels: bool = False
    dodge_deadzone: float = 0.5


def _preset(size, offset, front, back, three_wheels=False) -> CarPreset:
    return CarPreset(size, offset, WheelPair(*front), WheelPair(*back), three_wheels)


CAR_PRESETS: dict[str, CarPreset] = {
    "octane": _preset((120.507, 86.6994, 38.6591), (13.8757, 0.0, 20.755),
                      (12.5, 38.755, (51.25, 25.9, 20.755)), (15.0, 37.055, (-33.75, 29.5, 20.755))),
    "dominus": _preset((130.427, 85.7799, 33.8), (9.0, 0.0, 15.75),
                       (12.0, 33.95, (50.3, 31.1, 15.75)), (13.5, 33.85, (-34.75, 33.0, 15.75))),
    "plank": _preset((131.32, 87.1704, 31.8944), (9.00857, 0.0, 12.0942),
                     (12.5, 31.9242, (49.97, 27.8, 12.0942)), (17.0, 27.9242, (-35.43, 20.28, 12.0942))),
    "breakout": _preset((133.992, 83.021, 32.8), (12.5, 0.0, 11.75),
                        (13.5, 29.7, (51.5, 26.67, 11.75)), (15.0, 29.666, (-35.75, 35.0, 11.75))),
    "hybrid": _preset((129.519, 84.6879, 36.6591), (13.8757, 0.0, 20.755),
                      (12.5, 38.755, (51.25, 25.9, 20.755)), (15.0, 37.055, (-34.0, 29.5, 20.755))),
    "merc": _preset((123.22, 79.2103, 44.1591), (11.3757, 0.0, 21.505),
                    (15.0, 39.505, (51.25, 25.9, 21.505)), (15.0, 39.105, (-33.75, 29.5, 21.505))),
}


def car_preset(name: str) -> CarPreset:
    try:
        return CAR_PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown car preset {name!r}; choose one of {', '.join(CAR_PRESETS)}") from None
