"""Random soccar states for the RL tests: every field drawn over its range (and past the thresholds
the observations and rewards read), without running the physics."""

from __future__ import annotations

import dataclasses
import math

import torch

from nitro.envs.soccar import ArenaEvents, BallState, BoostPadState, CarState, GameState
from nitro.envs.soccar.rl.state import SoccarState


def rotations(shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """Uniformly random rotation matrices [*shape, 3, 3] (from normalised Gaussian quaternions)."""
    q = torch.randn(*shape, 4, generator=g, dtype=torch.float64)
    w, x, y, z = (q / q.norm(dim=-1, keepdim=True)).unbind(-1)
    rows = (
        (1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
        (2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
        (2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)),
    )
    return torch.stack([torch.stack(r, -1) for r in rows], -2).float()


def random_state(num_envs: int, blue: int, orange: int, seed: int = 0, bench: float = 0.0) -> SoccarState:
    """A random batch; ``bench`` is the chance that a car sits the episode out (inactive)."""
    g = torch.Generator().manual_seed(seed)
    n, c = num_envs, blue + orange

    def u(*shape, low=0.0, high=1.0):
        return low + (high - low) * torch.rand(*shape, generator=g)

    def flag(*shape, p=0.5):
        return torch.rand(*shape, generator=g) < p

    ball = BallState.rest(n, torch.device("cpu"))
    ball.pos = torch.stack((u(n, low=-4000, high=4000), u(n, low=-5500, high=5500), u(n, low=90, high=2000)), -1)
    ball.vel = u(n, 3, low=-4000, high=4000)
    ball.ang_vel = u(n, 3, low=-6, high=6)
    cars = CarState.fresh(n, c, torch.device("cpu"))
    cars.pos = torch.stack((u(n, c, low=-4000, high=4000), u(n, c, low=-5000, high=5000), u(n, c, low=17, high=2000)), -1)
    cars.vel = u(n, c, 3, low=-2300, high=2300)
    cars.ang_vel = u(n, c, 3, low=-5.5, high=5.5)
    cars.rot_mat = rotations((n, c), g)
    for name in ("is_on_ground", "has_jumped", "has_double_jumped", "has_flipped", "is_flipping", "is_jumping",
                 "is_supersonic", "is_auto_flipping", "has_world_contact"):
        setattr(cars, name, flag(n, c))
    cars.wheels_with_contact = flag(n, c, 4, p=0.6)
    cars.jump_time = u(n, c, high=0.2)
    cars.flip_time = u(n, c, high=1.3)  # straddles FLIP_TORQUE_TIME (0.65)
    cars.air_time = u(n, c, high=3.0)
    cars.air_time_since_jump = u(n, c, high=2.5)  # straddles DOUBLEJUMP_MAX_DELAY (1.25)
    cars.boost = torch.where(flag(n, c, p=0.1), 0.0, u(n, c, high=100))
    cars.boosting_time = torch.where(flag(n, c), 0.0, u(n, c, high=1.0))
    cars.supersonic_time = torch.where(flag(n, c), 0.0, u(n, c, high=1.0))
    cars.handbrake_val = u(n, c)
    cars.flip_rel_torque = u(n, c, 3, low=-1, high=1)
    cars.auto_flip_timer = u(n, c, high=0.4)
    cars.auto_flip_torque_scale = torch.where(flag(n, c), 1.0, -1.0)
    cars.world_contact_normal = u(n, c, 3, low=-1, high=1)
    cars.is_demoed = flag(n, c, p=0.2)
    cars.demo_respawn_timer = torch.where(cars.is_demoed, u(n, c, low=0.01, high=3.0), 0.0)
    cars.last_controls = torch.cat((u(n, c, 5, low=-1, high=1), flag(n, c, 3).float()), -1)
    cars.car_contact_id = torch.randint(0, c + 1, (n, c), generator=g, dtype=torch.int32)
    cars.car_contact_cooldown_timer = torch.where(flag(n, c), 0.0, u(n, c, high=0.25))
    active = flag(n, 34, p=0.6)
    pads = dataclasses.replace(BoostPadState.fresh(n, torch.device("cpu")), is_active=active,
                               cooldown=torch.where(active, 0.0, u(n, 34, low=0.01, high=10.0)))
    game = GameState(ball=ball, cars=cars, pads=pads, tick_count=torch.randint(0, 10000, (n,), generator=g),
                     **GameState.scoreboard(n, torch.device("cpu")))
    events = ArenaEvents.none(n, c, torch.device("cpu"))
    events.ball_touch = flag(n, c, p=0.3)
    playing = ~flag(n, c, p=bench) if bench else torch.ones(n, c, dtype=torch.bool)
    return SoccarState(
        game=game, events=events, prev_action=u(n, c, 8, low=-1, high=1).round(), ticks_since_touch=torch.zeros(n, dtype=torch.int64),
        touches=torch.zeros(n, c, dtype=torch.int32),
        active=playing, blue=blue, orange=orange,
    )


def yaw_rotation(yaw: float) -> torch.Tensor:
    """A car flat on the floor facing ``yaw`` (radians from +x): columns forward, right, up."""
    c, s = math.cos(yaw), math.sin(yaw)
    return torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
