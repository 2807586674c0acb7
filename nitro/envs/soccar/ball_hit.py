"""A car's hit on the ball: RocketSim's `Ball::_OnHit`, the extra impulse and the car's `BallHitInfo`.

Reference: RocketSim (ZealanL/RocketSim, MIT) `Ball.cpp` (`Ball::_OnHit`), `Arena.cpp`
(`_BtCallback_OnCarBallCollision`), `BallHitInfo.h`, and the extra-impulse constants of `RLConst.h`.

Bullet calls RocketSim's contact-added callback for each car-ball contact point it adds, during the
tick's collision detection: at the tick's starting transforms, with the ball's velocity already
damped and the car's after its pre-tick impulses. For each touching car, `on_hit`:

1. records the touch in the car's ball hit info (valid, the contact point relative to the ball, the
   ball's position, the tick; the extra velocity zeroed);
2. unless the car's last extra impulse was on the previous tick (at most one every other tick),
   adds the extra velocity: along the direction from the car to the ball with its z scaled by
   0.35, then its part along the car's forward axis scaled by 0.65, renormalised; of magnitude
   relative speed (capped at 4600 UU/s) x BALL_CAR_EXTRA_IMPULSE_FACTOR_CURVE(relative speed) x
   the mutators' scale. It reaches the ball at the end of the tick (`ball.finish_physics_tick`).

The contact itself (friction 2, restitution 0) is the solver's (`car_ball`, `dynamics_world`). The
kernels' twin is `kernels/ball_hit.py`.
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.contacts import CarBallHits
from nitro.envs.soccar.mutators import TickParams
from nitro.envs.soccar.state import BallState, CarState
from nitro.envs.soccar.vec import constant, dot
from nitro.envs.soccar.vehicle import piecewise


def normalized(v: torch.Tensor) -> torch.Tensor:
    """RocketSim's Vec::Normalized: v / |v|, or zero when |v| <= FLT_EPSILON^2 [..., 3]."""
    length = torch.sqrt(dot(v, v))
    ok = length > C.SIMD_EPSILON * C.SIMD_EPSILON
    return torch.where(ok[..., None], v / torch.where(ok, length, 1.0)[..., None], 0.0)


def extra_hit_vel(
    ball_pos: torch.Tensor, ball_vel: torch.Tensor, car_pos: torch.Tensor, car_vel: torch.Tensor,
    car_forward: torch.Tensor, params: TickParams,
) -> torch.Tensor:
    """The extra velocity of one hit [..., 3] (zero when car and ball move alike)."""
    rel_pos = ball_pos - car_pos
    rel_vel = ball_vel - car_vel
    rel_speed = torch.sqrt(dot(rel_vel, rel_vel)).clamp(max=C.BALL_CAR_EXTRA_IMPULSE_MAXDELTAVEL_UU)
    z_scale = constant((1.0, 1.0, C.BALL_CAR_EXTRA_IMPULSE_Z_SCALE), rel_pos.device)
    hit_dir = normalized(rel_pos * z_scale)
    forward_adjustment = car_forward * (dot(hit_dir, car_forward) * (1 - C.BALL_CAR_EXTRA_IMPULSE_FORWARD_SCALE))[..., None]
    hit_dir = normalized(hit_dir - forward_adjustment)
    factor = piecewise(C.BALL_CAR_EXTRA_IMPULSE_FACTOR_CURVE, rel_speed)
    added = ((hit_dir * rel_speed[..., None]) * factor[..., None]) * params.ball_hit_extra_force_scale
    return torch.where((rel_speed > 0)[..., None], added, 0.0)


def on_hit(
    ball: BallState, ball_vel: torch.Tensor, cars: CarState, hits: CarBallHits, tick_count: torch.Tensor,
    params: TickParams,
) -> tuple[BallState, CarState]:
    """Ball::_OnHit for every car whose contact with the ball was added this tick.

    ``ball_vel`` [N, 3]: the ball's velocity as the callback sees it (damped); ``cars``: as after
    their pre-tick; ``tick_count`` [N]: the arena's count before this tick. Returns the ball with
    the extra velocities in its ``velocity_impulse_cache`` (summed in car order) and the cars' ball
    hit info.
    """
    tick = tick_count[:, None]  # [N, 1]
    applied = cars.ball_hit_info_tick_count_when_extra_impulse_applied
    # tickCount > applied + 1 || applied > tickCount, with RocketSim's "never" (~0ULL) as -1
    can_apply = (applied < 0) | (tick > applied + 1) | (applied > tick)
    extra = hits.is_hit & can_apply  # [N, C]
    added = extra_hit_vel(
        ball.pos[:, None], ball_vel[:, None], cars.pos, cars.vel, cars.rot_mat[..., :, 0], params
    )
    added = torch.where(extra[..., None], added, 0.0)  # [N, C, 3]
    cache = ball.velocity_impulse_cache
    for c in range(cars.pos.shape[1]):  # RocketSim adds each car's hit to the cache in turn
        cache = cache + added[:, c]
    hit = hits.is_hit
    cars = dataclasses.replace(
        cars,
        ball_hit_info_is_valid=cars.ball_hit_info_is_valid | hit,
        ball_hit_info_relative_pos_on_ball=torch.where(
            hit[..., None], hits.relative_pos_on_ball, cars.ball_hit_info_relative_pos_on_ball
        ),
        ball_hit_info_ball_pos=torch.where(hit[..., None], ball.pos[:, None], cars.ball_hit_info_ball_pos),
        ball_hit_info_extra_hit_vel=torch.where(hit[..., None], added, cars.ball_hit_info_extra_hit_vel),
        ball_hit_info_tick_count_when_hit=torch.where(hit, tick, cars.ball_hit_info_tick_count_when_hit),
        ball_hit_info_tick_count_when_extra_impulse_applied=torch.where(extra, tick, applied),
    )
    return dataclasses.replace(ball, velocity_impulse_cache=cache), cars
