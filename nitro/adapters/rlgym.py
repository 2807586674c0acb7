"""RLGym v2 (rlgym-rocket-league 2.0.1) objects from nitro's soccar state.

``game_state(state, env)`` builds the `rlgym.rocket_league.api.GameState` that RLGym's own
`RocketSimEngine` would report for env ``env``: the same fields copied the same way from the car and
ball states (its ``_get_state``), agents named ``blue-i`` / ``orange-i`` in car order (as
`FixedTeamSizeMutator` names them), pad timers in RLBot order. RLGym's observation builders, rewards
and done conditions then run on it unchanged. This is a host-side, per-env conversion for tests and
tools, not a hot path.
"""

from __future__ import annotations

import numpy as np

try:
    from rlgym.rocket_league.api import Car, GameConfig, GameState, PhysicsObject
    from rlgym.rocket_league.common_values import GOAL_THRESHOLD
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("nitro.adapters.rlgym needs RLGym v2; install it with: "
                      'pip install "rlgym-rocket-league[sim]==2.0.1"') from e

from nitro.envs.soccar.rl import common_values as V
from nitro.envs.soccar.rl.state import SoccarState

HITBOX_TYPES = {"octane": 0, "dominus": 1, "plank": 2, "breakout": 3, "hybrid": 4, "merc": 5}
"""RLGym's hitbox_type of each car preset (rlgym common_values OCTANE ... MERC)."""


def agent_ids(blue: int, orange: int) -> list[str]:
    """RLGym's agent ids of the cars in car order: blue-0 ... then orange-0 ..."""
    return [f"blue-{i}" for i in range(blue)] + [f"orange-{i}" for i in range(orange)]


def physics(pos, vel, ang_vel, rot_mat=None) -> PhysicsObject:
    p = PhysicsObject()
    p.position, p.linear_velocity, p.angular_velocity = pos, vel, ang_vel
    if rot_mat is not None:
        p.rotation_mtx = np.ascontiguousarray(rot_mat)
    return p


def game_state(state: SoccarState, env: int = 0, cars: tuple[str, ...] | None = None) -> GameState:
    """Env ``env`` of ``state`` as RLGym's GameState (cars that sit the episode out are left out).

    ``cars`` names each car's preset (default: all octane) for ``hitbox_type``."""
    g = state.game
    host = lambda x: x[env].detach().cpu().numpy()  # noqa: E731
    ball, c, pads = g.ball, g.cars, g.pads
    gs = GameState()
    gs.tick_count = int(g.tick_count[env])
    gs.config = GameConfig()
    gs.config.gravity, gs.config.boost_consumption, gs.config.dodge_deadzone = 1.0, 1.0, 0.5
    gs.ball = physics(host(ball.pos), host(ball.vel), host(ball.ang_vel), host(ball.rot_mat))
    gs.goal_scored = bool(abs(gs.ball.position[1]) > GOAL_THRESHOLD)
    ids = agent_ids(state.blue, state.orange)
    active, touched = host(state.active), host(state.events.ball_touch)
    contact_id, contact_cooldown = host(c.car_contact_id), host(c.car_contact_cooldown_timer)
    f = {name: host(getattr(c, name)) for name in (
        "pos", "vel", "ang_vel", "rot_mat", "demo_respawn_timer", "wheels_with_contact", "supersonic_time",
        "boost", "boosting_time", "handbrake_val", "has_jumped", "last_controls", "is_jumping", "jump_time",
        "has_flipped", "has_double_jumped", "air_time_since_jump", "flip_time", "flip_rel_torque",
        "is_auto_flipping", "auto_flip_timer", "auto_flip_torque_scale")}  # fmt: skip
    presets = cars or ("octane",) * state.num_cars
    gs.cars = {}
    for i, agent in enumerate(ids):
        if not active[i]:
            continue
        car = Car()
        car.team_num = V.ORANGE_TEAM if i >= state.blue else V.BLUE_TEAM
        car.hitbox_type = HITBOX_TYPES[presets[i]]
        car.physics = physics(f["pos"][i], f["vel"][i], f["ang_vel"][i], f["rot_mat"][i])
        car.demo_respawn_timer = float(f["demo_respawn_timer"][i])
        car.wheels_with_contact = tuple(bool(w) for w in f["wheels_with_contact"][i])
        car.supersonic_time = float(f["supersonic_time"][i])
        car.boost_amount = float(f["boost"][i])
        car.boost_active_time = float(f["boosting_time"][i])
        car.handbrake = float(f["handbrake_val"][i])
        car.has_jumped = bool(f["has_jumped"][i])
        car.is_holding_jump = bool(f["last_controls"][i, V.JUMP] > 0.5)
        car.is_jumping = bool(f["is_jumping"][i])
        car.jump_time = float(f["jump_time"][i])
        car.has_flipped = bool(f["has_flipped"][i])
        car.has_double_jumped = bool(f["has_double_jumped"][i])
        car.air_time_since_jump = float(f["air_time_since_jump"][i])
        car.flip_time = float(f["flip_time"][i])
        car.flip_torque = f["flip_rel_torque"][i]
        car.is_autoflipping = bool(f["is_auto_flipping"][i])
        car.autoflip_timer = float(f["auto_flip_timer"][i])
        car.autoflip_direction = float(f["auto_flip_torque_scale"][i])
        victim = int(contact_id[i]) - 1
        car.bump_victim_id = ids[victim] if contact_cooldown[i] > 0 and victim >= 0 else None
        car.ball_touches = int(touched[i])
        gs.cars[agent] = car
    gs.boost_pad_timers = host(pads.cooldown)[list(V.PADS_RLBOT_ORDER)].astype(np.float32)
    return gs
