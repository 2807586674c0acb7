"""Bumps and demolitions per lane: the twin of `car_bump.py`, the same functions in the same order.

What the rule reads and writes of each car travels as its bump state, the tuple (pos, vel, rot_mat,
is_on_ground, is_supersonic, car_contact_id, car_contact_cooldown_timer, is_demoed,
demo_respawn_timer, velocity_impulse_cache) (`kernels/arena.load_bump_state` / `store_bump_state` read
and write it in the cars' packed rows). What one direction of a pair would do (`bump`) reads only positions,
velocities, rotations, `is_on_ground` and `is_supersonic`, which no callback changes, so the fused
tick computes it per pair lane (`pair_bumps`, in `car_pairs_kernel`) beside the pair's contact
points, and the env lane walks only the callbacks' chain (`on_car_car_collision`). A pair's contacts
are then (its points, each (is_contact, forward coordinate on car a, on car b), bump a on b, bump b
on a), each bump (approaching, is_demo, impulse).
"""

from __future__ import annotations

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.kernels import constexpr, jit, tl
from nitro.envs.soccar.kernels.ball_hit import normalized
from nitro.envs.soccar.kernels.rigid_body import column
from nitro.envs.soccar.kernels.vec import add, dot, scale, sub, where
from nitro.envs.soccar.kernels.vehicle import curve, piecewise

BUMP_MIN_FORWARD_DIST = constexpr(C.BUMP_MIN_FORWARD_DIST)
BUMP_VEL_AMOUNT_GROUND_CURVE = curve(C.BUMP_VEL_AMOUNT_GROUND_CURVE)
BUMP_VEL_AMOUNT_AIR_CURVE = curve(C.BUMP_VEL_AMOUNT_AIR_CURVE)
BUMP_UPWARD_VEL_AMOUNT_CURVE = curve(C.BUMP_UPWARD_VEL_AMOUNT_CURVE)


@jit
def bump(state, other, team_ok, demo_mode):
    """The velocity test, the demolition rule and the bump impulse of the car ``state`` on ``other``
    (``team_ok``: their teams allow a demolition): (approaching, is_demo, the bumper's direction
    part of the impulse, the upward part before the force scale)."""
    pos, vel = state[0], state[1]
    delta_pos = sub(other[0], pos)
    vel_dir = normalized(vel)
    dir_to_other_car = normalized(delta_pos)
    speed_towards_other_car = dot(vel, dir_to_other_car)
    other_car_away_speed = dot(other[1], vel_dir)
    approaching = (dot(vel, delta_pos) > 0) & (speed_towards_other_car > other_car_away_speed)
    is_demo = tl.where(demo_mode == 1, True, tl.where(demo_mode == 2, False, state[4])) & team_ok
    ground_hit = other[3]
    base_scale = tl.where(
        ground_hit,
        piecewise(speed_towards_other_car, BUMP_VEL_AMOUNT_GROUND_CURVE),
        piecewise(speed_towards_other_car, BUMP_VEL_AMOUNT_AIR_CURVE),
    )
    hit_up_dir = where(ground_hit, column(other[2], 2), (0.0, 0.0, 1.0))
    upward = scale(hit_up_dir, piecewise(speed_towards_other_car, BUMP_UPWARD_VEL_AMOUNT_CURVE))
    return approaching, is_demo, scale(vel_dir, base_scale), upward


@jit
def pair_bumps(state_a, state_b, same_team, demo_mode, enable_team_demos, bump_force_scale):
    """Both directions of a pair's `bump` (a on b, then b on a), each (approaching, is_demo, the
    victim's impulse with the force scale applied)."""
    team_ok = tl.where(same_team, enable_team_demos != 0, True)
    ab = bump(state_a, state_b, team_ok, demo_mode)
    ba = bump(state_b, state_a, team_ok, demo_mode)
    return (
        (ab[0], ab[1], add(ab[2], scale(ab[3], bump_force_scale))),
        (ba[0], ba[1], add(ba[2], scale(ba[3], bump_force_scale))),
    )


@jit
def _set(values, index: tl.constexpr, value, N: tl.constexpr):
    """``values`` (a tuple of N) with entry ``index`` replaced by ``value``."""
    out = ()
    for k in tl.static_range(N):
        if k == index:
            out = out + (value,)
        else:
            out = out + (values[k],)
    return out


@jit
def _one_way(
    states, bumped_by, demoed_by, live, hit, forward, bump_cooldown_time, respawn_delay,
    bumper: tl.constexpr, victim: tl.constexpr, NUM_CARS: tl.constexpr,
):  # fmt: skip
    """One direction of one callback, ``bumper`` on ``victim``: the cooldown, the bumper's front (the
    point's ``forward`` coordinate on the bumper), the demolition or the bump; ``live`` turns false once
    either car is demolished (the call returns)."""
    live = live & (~states[bumper][7]) & (~states[victim][7])
    s = states[bumper]
    v = states[victim]
    in_cooldown = (s[5] == victim + 1) & (s[6] > 0)
    with_bumper = forward > BUMP_MIN_FORWARD_DIST
    fires = live & (~in_cooldown) & hit[0] & with_bumper
    demo = fires & hit[1]
    pushed = fires & (~hit[1])
    impulse = hit[2]
    v = (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7] | demo, tl.where(demo, respawn_delay, v[8]),
         where(pushed, add(v[9], impulse), v[9]))  # fmt: skip
    states = _set(states, victim, v, NUM_CARS)
    s = states[bumper]
    s = (s[0], s[1], s[2], s[3], s[4], tl.where(fires, victim + 1, s[5]), tl.where(fires, bump_cooldown_time, s[6]),
         s[7], s[8], s[9])  # fmt: skip
    states = _set(states, bumper, s, NUM_CARS)
    demoed_by = _set(demoed_by, victim, tl.where(demo & (demoed_by[victim] < 0), bumper, demoed_by[victim]), NUM_CARS)
    bumped_by = _set(bumped_by, victim, tl.where(pushed & (bumped_by[victim] < 0), bumper, bumped_by[victim]), NUM_CARS)
    return states, bumped_by, demoed_by, live


@jit
def on_car_car_collision(
    states, contacts, bump_cooldown_time, respawn_delay, NUM_CARS: tl.constexpr, POINTS: tl.constexpr,
):  # fmt: skip
    """Arena::_BtCallback_OnCarCarCollision for every contact point of the tick, pair by pair (a < b)
    and point by point, car b on car a first. ``states``: each car's bump state; ``contacts``: each
    pair's (points, bump a on b, bump b on a) (see the module's note). Returns the states and each
    car's bumper and demolisher of this tick (index, -1 for none)."""
    bumped_by = ()
    demoed_by = ()
    for c in tl.static_range(NUM_CARS):
        bumped_by = bumped_by + (states[c][5] * 0 - 1,)
        demoed_by = demoed_by + (states[c][5] * 0 - 1,)
    for a in tl.static_range(NUM_CARS):
        for b in tl.static_range(a + 1, NUM_CARS):
            points, hit_ab, hit_ba = contacts[a * NUM_CARS - a * (a + 1) // 2 + (b - a - 1)]  # `car_pairs` order
            for k in tl.static_range(POINTS):  # car b (the manifold's body A) on car a first
                live = points[k][0]
                states, bumped_by, demoed_by, live = _one_way(
                    states, bumped_by, demoed_by, live, hit_ba, points[k][2], bump_cooldown_time, respawn_delay,
                    b, a, NUM_CARS,
                )  # fmt: skip
                states, bumped_by, demoed_by, live = _one_way(
                    states, bumped_by, demoed_by, live, hit_ab, points[k][1], bump_cooldown_time, respawn_delay,
                    a, b, NUM_CARS,
                )  # fmt: skip
    return states, bumped_by, demoed_by
