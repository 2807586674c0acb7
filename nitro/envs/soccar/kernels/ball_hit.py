"""A car's hit on the ball per lane: the twin of `ball_hit.py` (Ball::_OnHit), the same functions.

A car's ball hit info travels as the tuple (is_valid, relative_pos_on_ball, ball_pos, extra_hit_vel,
tick_count_when_hit, tick_count_when_extra_impulse_applied), the ``ball_hit_info_*`` fields of
`CarState` in order; `on_hit` returns the extra velocity for the ball's cache, which the caller adds
car by car.
"""

from __future__ import annotations

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.kernels import constexpr, jit, tl
from nitro.envs.soccar.kernels.vec import dot, scale, sub, where
from nitro.envs.soccar.kernels.vehicle import curve, piecewise

EPSILON_SQ = constexpr(C.SIMD_EPSILON * C.SIMD_EPSILON)
Z_SCALE = constexpr(C.BALL_CAR_EXTRA_IMPULSE_Z_SCALE)
FORWARD_KEEP = constexpr(1 - C.BALL_CAR_EXTRA_IMPULSE_FORWARD_SCALE)
MAX_DELTA_VEL = constexpr(C.BALL_CAR_EXTRA_IMPULSE_MAXDELTAVEL_UU)
BALL_CAR_EXTRA_IMPULSE_FACTOR_CURVE = curve(C.BALL_CAR_EXTRA_IMPULSE_FACTOR_CURVE)


@jit
def normalized(v):
    """RocketSim's Vec::Normalized: v / |v|, or zero when |v| <= FLT_EPSILON^2."""
    length = tl.sqrt(dot(v, v))
    ok = length > EPSILON_SQ
    safe = tl.where(ok, length, 1.0)
    return tl.where(ok, v[0] / safe, 0.0), tl.where(ok, v[1] / safe, 0.0), tl.where(ok, v[2] / safe, 0.0)


@jit
def extra_hit_vel(ball_pos, ball_vel, car_pos, car_vel, car_forward, ball_hit_extra_force_scale):
    """The extra velocity of one hit (zero when car and ball move alike)."""
    rel_pos = sub(ball_pos, car_pos)
    rel_vel = sub(ball_vel, car_vel)
    rel_speed = tl.minimum(tl.sqrt(dot(rel_vel, rel_vel)), MAX_DELTA_VEL)
    hit_dir = normalized((rel_pos[0] * 1.0, rel_pos[1] * 1.0, rel_pos[2] * Z_SCALE))
    forward_adjustment = scale(car_forward, dot(hit_dir, car_forward) * FORWARD_KEEP)
    hit_dir = normalized(sub(hit_dir, forward_adjustment))
    factor = piecewise(rel_speed, BALL_CAR_EXTRA_IMPULSE_FACTOR_CURVE)
    added = scale(scale(scale(hit_dir, rel_speed), factor), ball_hit_extra_force_scale)
    moving = rel_speed > 0
    return tl.where(moving, added[0], 0.0), tl.where(moving, added[1], 0.0), tl.where(moving, added[2], 0.0)


@jit
def on_hit(
    is_hit, relative_pos_on_ball, ball_pos, ball_vel, car_pos, car_vel, car_forward, hit_info, tick_count,
    ball_hit_extra_force_scale,
):  # fmt: skip
    """Ball::_OnHit of one car: returns (the extra velocity for the ball's cache, the car's new hit info)."""
    applied = hit_info[5]
    can_apply = (applied < 0) | (tick_count > applied + 1) | (applied > tick_count)
    extra = is_hit & can_apply
    added = extra_hit_vel(ball_pos, ball_vel, car_pos, car_vel, car_forward, ball_hit_extra_force_scale)
    added = where(extra, added, (0.0, 0.0, 0.0))
    new_info = (
        hit_info[0] | is_hit,
        where(is_hit, relative_pos_on_ball, hit_info[1]),
        where(is_hit, ball_pos, hit_info[2]),
        where(is_hit, added, hit_info[3]),
        tl.where(is_hit, tick_count, hit_info[4]),
        tl.where(extra, tick_count, applied),
    )
    return added, new_info

