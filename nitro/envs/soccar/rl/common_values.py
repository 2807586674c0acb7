"""Constants of the RL layer, as RLGym v2 (`rlgym.rocket_league.common_values`) and GigaLearnCPP
(`RLGymCPP/CommonValues.h`) define them, and the boost pads in their order.

Both stacks list the 34 soccar pads in RLBot's order (`BOOST_LOCATIONS`), while the arena
keeps RocketSim's internal order (6 big pads, then 28 small). ``PADS_RLBOT_ORDER[i]`` is the arena index
of RLBot pad ``i``; an orange player's view reverses the RLBot list.
"""

from __future__ import annotations

import functools

import torch

from nitro.envs.soccar import constants as C

TICKS_PER_SECOND = 120
"""RLGym's and GigaLearn's tick rate: every time in their conditions and rewards counts 120 ticks/s."""

BLUE_TEAM, ORANGE_TEAM = 0, 1

SIDE_WALL_X = 4096.0
BACK_WALL_Y = 5120.0
CEILING_Z = 2044.0
BACK_NET_Y = 6000.0
GOAL_HEIGHT = 642.775
ORANGE_GOAL_BACK = (0.0, BACK_NET_Y, GOAL_HEIGHT / 2)
BLUE_GOAL_BACK = (0.0, -BACK_NET_Y, GOAL_HEIGHT / 2)
GOAL_THRESHOLD = 5215.5
"""|ball y| beyond which RLGym's engine reports a goal (soccar)."""

CAR_MAX_SPEED = 2300.0
BALL_MAX_SPEED = 6000.0
CAR_MAX_ANG_VEL = 5.5
DOUBLEJUMP_MAX_DELAY = 1.25
"""Seconds after a jump in which a flip or double jump is still allowed."""
FLIP_TORQUE_TIME = 0.65
"""Seconds a flip's torque lasts (RLGym's `Car.is_flipping` reads flip_time against it)."""
RAMP_HEIGHT = 256.0
BALL_RADIUS = 91.25
"""RLGym's ball radius. GigaLearn's `CommonValues::BALL_RADIUS` is 92.75 (`GIGALEARN_BALL_RADIUS`)."""
GIGALEARN_BALL_RADIUS = 92.75
BALL_RESTING_HEIGHT = 93.15

KPH_TO_VEL = 250.0 / 9.0
"""UU/s per km/h (GigaLearn `Math::KPHToVel`)."""

NUM_ACTIONS = 8
"""Controls per car: throttle, steer, pitch, yaw, roll, jump, boost, handbrake."""
THROTTLE, STEER, PITCH, YAW, ROLL, JUMP, BOOST, HANDBRAKE = range(NUM_ACTIONS)

PAD_POSITIONS = C.BOOST_PADS_BIG + C.BOOST_PADS_SMALL
"""The arena's pads in RocketSim's internal order."""
BOOST_LOCATIONS = (
    (0.0, -4240.0), (-1792.0, -4184.0), (1792.0, -4184.0), (-3072.0, -4096.0), (3072.0, -4096.0),
    (-940.0, -3308.0), (940.0, -3308.0), (0.0, -2816.0), (-3584.0, -2484.0), (3584.0, -2484.0),
    (-1788.0, -2300.0), (1788.0, -2300.0), (-2048.0, -1036.0), (0.0, -1024.0), (2048.0, -1036.0),
    (-3584.0, 0.0), (-1024.0, 0.0), (1024.0, 0.0), (3584.0, 0.0),
    (-2048.0, 1036.0), (0.0, 1024.0), (2048.0, 1036.0), (-1788.0, 2300.0), (1788.0, 2300.0),
    (-3584.0, 2484.0), (3584.0, 2484.0), (0.0, 2816.0), (-940.0, 3308.0), (940.0, 3308.0),
    (-3072.0, 4096.0), (3072.0, 4096.0), (-1792.0, 4184.0), (1792.0, 4184.0), (0.0, 4240.0),
)  # fmt: skip
"""x, y of the pads in RLBot's order (RLGym's and GigaLearn's `BOOST_LOCATIONS`; the RocketSim binding's
`get_boost_pads()` order). Pad 33 - i is pad i mirrored through the centre."""
PADS_RLBOT_ORDER = tuple(
    next(j for j, (x, y, _) in enumerate(PAD_POSITIONS) if (x, y) == location) for location in BOOST_LOCATIONS
)
"""Arena pad index of each pad in RLBot order."""

@functools.lru_cache(maxsize=256)
def device_tensor(values: tuple, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A constant tensor on ``device``, made once (so hot loops never copy from the host)."""
    return torch.tensor(values, dtype=dtype, device=device)


def pads_rlbot_order(device: torch.device) -> torch.Tensor:
    """`PADS_RLBOT_ORDER` as an int64 tensor on ``device``."""
    return device_tensor(PADS_RLBOT_ORDER, device, torch.int64)
