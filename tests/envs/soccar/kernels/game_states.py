"""What the game-rule twin tests share: random game states that meet every branch of the rules.

`random_game` draws N envs of C cars near each other, the ball and the pads: cars on the floor and
in the air, some over pads, some full of boost or demolished, some supersonic, some touching each
other or the ball; pads active or cooling down, some locked to a car; ball hit info and bump
cooldowns at random. Values are float32 tensors on the twins' device; the kernels read them through
the `ptrs` helpers (bools as int8).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car_config import CarParams
from nitro.envs.soccar.rigid_body import angle_to_rot_mat
from nitro.envs.soccar.state import BallState, BoostPadState, CarState
from tests.envs.soccar.kernels.twins import DEVICE


def random_game(n: int, num_cars: int, seed: int) -> tuple[BallState, CarState, BoostPadState]:
    g = torch.Generator().manual_seed(seed)

    def uniform(lo, hi, *shape):
        return lo + (hi - lo) * torch.rand(*shape, generator=g)

    cars = CarState.fresh(n, num_cars, torch.device("cpu"))
    pads = torch.tensor(C.BOOST_PADS)
    anchor = pads[torch.randint(len(pads), (n,), generator=g)]  # each env plays around one pad
    anchor[: n // 4, :2] = 0.0  # ... or around the ball at the centre
    pos = anchor[:, None, :] + torch.cat((uniform(-250, 250, n, num_cars, 2), torch.zeros(n, num_cars, 1)), -1)
    pos[..., 2] = torch.where(torch.rand(n, num_cars, generator=g) < 0.7, 17.0, uniform(40, 400, n, num_cars))
    yaw, pitch, roll = uniform(-math.pi, math.pi, n, num_cars), uniform(-0.4, 0.4, n, num_cars), uniform(-0.4, 0.4, n, num_cars)
    flat = torch.rand(n, num_cars, generator=g) < 0.6
    pitch, roll = torch.where(flat, 0.0, pitch), torch.where(flat, 0.0, roll)
    cars.pos = pos
    cars.rot_mat = angle_to_rot_mat(yaw, pitch, roll)
    speed = uniform(0, 2300, n, num_cars) * (torch.rand(n, num_cars, generator=g) < 0.9)
    cars.vel = cars.rot_mat[..., :, 0] * speed[..., None] + torch.randn(n, num_cars, 3, generator=g) * 200
    cars.ang_vel = torch.randn(n, num_cars, 3, generator=g)
    cars.is_on_ground = pos[..., 2] < 20
    cars.is_supersonic = torch.rand(n, num_cars, generator=g) < 0.3
    cars.is_demoed = torch.rand(n, num_cars, generator=g) < 0.08
    cars.demo_respawn_timer = torch.where(cars.is_demoed, uniform(0, 0.03, n, num_cars), 0.0)
    cars.boost = torch.where(torch.rand(n, num_cars, generator=g) < 0.15, 100.0, uniform(0, 99, n, num_cars))
    cars.car_contact_id = torch.randint(0, num_cars + 1, (n, num_cars), generator=g, dtype=torch.int32)
    cars.car_contact_cooldown_timer = torch.where(torch.rand(n, num_cars, generator=g) < 0.5, uniform(0, 0.25, n, num_cars), 0.0)
    cars.velocity_impulse_cache = torch.randn(n, num_cars, 3, generator=g) * (torch.rand(n, num_cars, 1, generator=g) < 0.2)
    cars.engine_force = torch.randn(n, num_cars, generator=g) * 1000
    hit = torch.rand(n, num_cars, generator=g) < 0.5
    cars.ball_hit_info_is_valid = hit
    cars.ball_hit_info_tick_count_when_hit = torch.where(hit, torch.randint(0, 50, (n, num_cars), generator=g), -1)
    cars.ball_hit_info_tick_count_when_extra_impulse_applied = torch.where(
        hit, torch.randint(0, 50, (n, num_cars), generator=g), -1
    )
    cars.ball_hit_info_relative_pos_on_ball = torch.randn(n, num_cars, 3, generator=g) * 50
    cars.ball_hit_info_ball_pos = torch.randn(n, num_cars, 3, generator=g) * 500
    cars.ball_hit_info_extra_hit_vel = torch.randn(n, num_cars, 3, generator=g) * 300

    ball = BallState.rest(n, torch.device("cpu"))
    near_car = cars.pos[:, 0] + cars.rot_mat[:, 0, :, 0] * uniform(80, 200, n)[:, None]
    ball.pos = torch.where((torch.rand(n, generator=g) < 0.6)[:, None], near_car + torch.tensor([0, 0, 100.0]), ball.pos)
    ball.vel = torch.randn(n, 3, generator=g) * 800 * (torch.rand(n, 1, generator=g) < 0.7)
    ball.velocity_impulse_cache = torch.randn(n, 3, generator=g) * (torch.rand(n, 1, generator=g) < 0.2)

    pad_state = BoostPadState.fresh(n, torch.device("cpu"))
    cooling = torch.rand(n, C.BOOST_PAD_COUNT, generator=g) < 0.3
    ending = torch.rand(n, C.BOOST_PAD_COUNT, generator=g) < 0.5  # a tick or two from active
    cooldown = torch.where(ending, uniform(0, 0.02, n, C.BOOST_PAD_COUNT), uniform(0, 5, n, C.BOOST_PAD_COUNT))
    pad_state.cooldown = torch.where(cooling, cooldown, 0.0)
    pad_state.is_active = pad_state.cooldown == 0
    locked = torch.randint(1, num_cars + 1, (n, C.BOOST_PAD_COUNT), generator=g, dtype=torch.int32)
    pad_state.prev_locked_car_id = torch.where(torch.rand(n, C.BOOST_PAD_COUNT, generator=g) < 0.3, locked, 0)
    to = lambda tree: type(tree)(**{k: v.to(DEVICE) for k, v in vars(tree).items()})  # noqa: E731
    return to(ball), to(cars), to(pad_state)


def car_params(num_cars: int) -> CarParams:
    presets = ["octane", "dominus", "plank", "breakout", "hybrid", "merc"]
    return CarParams.build([presets[c % len(presets)] for c in range(num_cars)], torch.device(DEVICE))


def flat(x: torch.Tensor) -> torch.Tensor:
    """A kernel's buffer: contiguous, bools as int8."""
    x = x.contiguous()
    return x.view(torch.int8) if x.dtype == torch.bool else x
