"""nitro's soccar state read from real RocketSim arenas (the ``rocketsim`` 2.2.1 binding).

``soccar_state(arenas)`` batches the ball, cars and pads of RocketSim arenas into a `SoccarState`
(env ``e`` = ``arenas[e]``; cars blue first, each team in the arena's car order), so nitro's
observation builders, rewards and conditions run on games RocketSim itself simulates: the path by
which a policy trained on nitro plays in the reference. Host-side, once per decision.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

try:
    import RocketSim as rs
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("nitro.adapters.rocketsim needs RocketSim's binding; install it with: "
                      'pip install "nitro-rl[soccar]"') from e

from nitro.envs.soccar import ArenaEvents, BallState, BoostPadState, CarState, GameState
from nitro.envs.soccar.rl import common_values as V
from nitro.envs.soccar.rl.state import SoccarState

_VECTORS = ("pos", "vel", "ang_vel", "flip_rel_torque", "world_contact_normal")
_SCALARS = ("is_on_ground", "has_jumped", "has_double_jumped", "has_flipped", "jump_time", "flip_time", "is_flipping",
            "is_jumping", "air_time", "air_time_since_jump", "boost", "boosting_time", "is_supersonic", "supersonic_time",
            "handbrake_val", "is_auto_flipping", "auto_flip_timer", "auto_flip_torque_scale", "has_world_contact",
            "car_contact_cooldown_timer", "is_demoed", "demo_respawn_timer", "tick_count_since_update")  # fmt: skip
_CONTROLS = ("throttle", "steer", "pitch", "yaw", "roll", "jump", "boost", "handbrake")


def cars_in_order(arena) -> list:
    """The arena's cars, blue first, each team in the arena's order: nitro's car order."""
    cars = arena.get_cars()
    return [c for c in cars if c.team == int(rs.Team.BLUE)] + [c for c in cars if c.team != int(rs.Team.BLUE)]


def soccar_state(arenas: list, prev_action: torch.Tensor | None = None, device="cpu") -> SoccarState:
    """The arenas as one batch [len(arenas), ...]. Every arena must have the same number of blue and
    orange cars. ``prev_action`` [N, C, 8]: each car's last controls as GigaLearn's observations read
    them (default: the controls the cars hold now)."""
    ordered = [cars_in_order(a) for a in arenas]
    blue = sum(c.team == int(rs.Team.BLUE) for c in ordered[0])
    line_up = [(sum(c.team == int(rs.Team.BLUE) for c in cars), len(cars)) for cars in ordered]
    if len(set(line_up)) != 1:
        raise ValueError(f"every arena must have the same team sizes; got (blue, cars) per arena {line_up}")
    n, c = len(arenas), len(ordered[0])
    host = {name: np.zeros((n, c, 3), np.float32) for name in _VECTORS}
    host.update({name: np.zeros((n, c), np.float32) for name in _SCALARS})
    host["rot_mat"] = np.zeros((n, c, 3, 3), np.float32)
    host["wheels_with_contact"] = np.zeros((n, c, 4), bool)
    host["last_controls"] = np.zeros((n, c, 8), np.float32)
    host["car_contact_id"] = np.zeros((n, c), np.int32)
    for e, cars in enumerate(ordered):
        index_of = {car.id: i for i, car in enumerate(cars)}
        for i, car in enumerate(cars):
            s = car.get_state()
            for name in _VECTORS:
                host[name][e, i] = getattr(s, name).as_numpy()
            for name in _SCALARS:
                host[name][e, i] = getattr(s, name)
            host["rot_mat"][e, i] = s.rot_mat.as_numpy().reshape(3, 3).T  # rows forward, right, up -> columns
            host["wheels_with_contact"][e, i] = s.wheels_with_contact
            host["last_controls"][e, i] = [float(getattr(s.last_controls, k)) for k in _CONTROLS]
            host["car_contact_id"][e, i] = index_of[s.car_contact_id] + 1 if s.car_contact_id in index_of else 0
    cars = CarState.fresh(n, c, torch.device(device))
    for name, value in host.items():
        setattr(cars, name, torch.from_numpy(value).to(device=device, dtype=CarState.FIELDS[name][1]))
    balls = [a.ball.get_state() for a in arenas]
    ball = BallState.rest(n, torch.device(device))
    for name in ("pos", "vel", "ang_vel"):
        setattr(ball, name, torch.tensor(np.stack([getattr(b, name).as_numpy() for b in balls]), device=device))
    pads_rlbot = [[p.get_state() for p in a.get_boost_pads()] for a in arenas]
    is_active, cooldown = np.zeros((n, len(V.PAD_POSITIONS)), bool), np.zeros((n, len(V.PAD_POSITIONS)), np.float32)
    for e, pads in enumerate(pads_rlbot):
        for i, pad in zip(V.PADS_RLBOT_ORDER, pads):
            is_active[e, i], cooldown[e, i] = pad.is_active, pad.cooldown
    game = GameState(
        ball=ball, cars=cars,
        pads=dataclasses.replace(BoostPadState.fresh(n, torch.device(device)), is_active=torch.from_numpy(is_active).to(device),
                                 cooldown=torch.from_numpy(cooldown).to(device)),
        tick_count=torch.tensor([a.tick_count for a in arenas], dtype=torch.int64, device=device),
        **GameState.scoreboard(n, torch.device(device)),
    )  # fmt: skip
    return SoccarState(
        game=game, events=ArenaEvents.none(n, c, torch.device(device)),
        prev_action=cars.last_controls.clone() if prev_action is None else prev_action.to(device),
        ticks_since_touch=torch.zeros(n, dtype=torch.int64, device=device),
        touches=torch.zeros(n, c, dtype=torch.int32, device=device),
        active=torch.ones(n, c, dtype=torch.bool, device=device), blue=blue, orange=c - blue,
    )  # fmt: skip
