"""RocketSimVis packets: one JSON game state per UDP datagram, to 127.0.0.1:9273 by default.

Format: ZealanL/RocketSimVis ``networking-format.md`` (ball_phys, cars with team_num, phys, boost_amount,
on_ground, has_flipped_or_double_jumped, is_demoed; boost_pad_locations and boost_pad_states). The
document says boost_amount runs 0-1, but the visualizer's own client sends 0-100
(``rocketsimvis_rlgym_sim_client.py``: ``boost_amount * 100``) and its CarState reads "From 0 to 100":
we send 0-100. Pads go with their locations in RocketSim's order, since the visualizer's default
locations are in RLGym's order.
"""

from __future__ import annotations

import json

from nitro.monitor.replay import Replay, quat_to_rot_mat

ROCKETSIMVIS_PORT = 9273


def _vec(v) -> list[float]:
    return [float(x) for x in v]


def game_state(replay: Replay, env: int, frame: int) -> dict:
    """The JSON object of env ``env`` (an index into the replay's envs) at frame ``frame``."""
    e, f = env, frame
    cars = []
    rot = quat_to_rot_mat(replay.car_quat[e, f]) if replay.num_cars else []
    for c in range(replay.num_cars):
        flag = replay.flags_at(e, f, c)
        cars.append({
            "team_num": int(replay.meta["teams"][c]),
            "phys": {"pos": _vec(replay.car_pos[e, f, c]), "forward": _vec(rot[c][:, 0]), "up": _vec(rot[c][:, 2]),
                     "vel": _vec(replay.car_vel[e, f, c]), "ang_vel": _vec(replay.car_ang_vel[e, f, c])},
            "boost_amount": float(replay.car_boost[e, f, c]),
            "on_ground": flag["is_on_ground"],
            "has_flipped_or_double_jumped": flag["has_flipped"] or flag["has_double_jumped"],
            "is_demoed": flag["is_demoed"],
        })
    return {
        "ball_phys": {"pos": _vec(replay.ball_pos[e, f]), "vel": _vec(replay.ball_vel[e, f]),
                      "ang_vel": _vec(replay.ball_ang_vel[e, f])},
        "cars": cars,
        "boost_pad_locations": [_vec(p) for p in replay.meta["pad_positions"]],
        "boost_pad_states": [bool(a) for a in replay.pad_active[e, f]],
    }


def game_state_packet(replay: Replay, env: int, frame: int) -> bytes:
    return json.dumps(game_state(replay, env, frame), separators=(",", ":")).encode()
