"""nitro's soccar state as the RLBot v5 GamePacket the game would send for it, in `rlbot`'s own
flatbuffer types: a bot (nitro's or anyone's) can play a nitro simulation offline, and the tests feed
nitro's exported bots the packets of the states they check.

What RLBot v5 sends for a car follows the schema's documentation of each field (rlbot_flatbuffers);
RocketSim state the schema has no field for is not sent:

- ``physics.rotation``: the Euler angles of the car's orientation (RocketSim's ``Angle::FromRotMat``,
  btMatrix3x3::getEulerYPR with pitch and roll negated) of the rotation nearest ``rot_mat`` (nitro's
  float32 matrices are rotations to within float32 rounding; the game's orientation is exact).
- ``air_state``: one per car, as the game keeps one. OnGround while RocketSim's ``is_on_ground`` (three
  or more wheels touch), even on the first ticks of a jump; else Jumping during the jump, Dodging during
  a flip, InAir otherwise (RocketSim has no double-jump phase, so DoubleJumping is never sent). A
  demolished car is reported OnGround (the schema has no demolished air state; the runtime ignores
  the air state of a demolished car).
- ``dodge_timeout``: 1.25 s minus the air time since the jump while the flip window is open after a
  jump, else -1 (on the ground, after the window, or airborne without a jump).
- ``demolished_timeout``: the respawn timer while demolished, else -1.
- ``boost_pads``: in the order RLBot v5 lists the standard soccar map's pads (`FIELD_INFO_ORDER`),
  ``timer`` the seconds since the pad was taken (the pad's respawn time minus RocketSim's cooldown,
  as the schema defines it) or 0 while active.
- ``last_input``: the car's controls of the last tick; ``has_dodged`` / ``dodge_elapsed`` are RocketSim's
  ``has_flipped`` / ``flip_time``; no ball touches are reported (``latest_touch`` null).

A packet built here is packed to bytes and read back (`on_the_wire`) so it carries exactly what the
wire format carries (float32 numbers).
"""

from __future__ import annotations

import math

import numpy as np
from rlbot import flat

from nitro.deploy.export import PAD_COOLDOWN_BIG, PAD_COOLDOWN_SMALL
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.rl import SoccarState
from nitro.envs.soccar.rl import common_values as V

BALL_DIAMETER = 2 * V.BALL_RADIUS
BOOST_LOCATIONS_INDEX = (14, 10, 7, 12, 8, 11, 29, 4, 3, 15, 18, 30, 1, 2, 5, 6, 9, 20, 19, 22, 21, 23, 25, 32, 31,
                         26, 27, 24, 28, 33, 17, 13, 16, 0)
"""RLGym's `BOOST_LOCATIONS` index of each pad in the order RLBot v5 lists the standard soccar map's pads
(FieldInfo and GamePacket), as JPK314/rlgym-compat (game_state.py) records it from the game. Bots must
not rely on it: nitro's runtime matches pads by position."""
FIELD_INFO_ORDER = tuple(V.PADS_RLBOT_ORDER[i] for i in BOOST_LOCATIONS_INDEX)
"""The arena (RocketSim) index of each pad in RLBot v5's order."""


def field_info() -> flat.FieldInfo:
    """The soccar field's static info as RLBot sends it at start-up (its boost pads, in RLBot v5's order)."""
    pads = [flat.BoostPad(flat.Vector3(*V.PAD_POSITIONS[i]), i < len(C.BOOST_PADS_BIG)) for i in FIELD_INFO_ORDER]
    return flat.FieldInfo(boost_pads=pads)


def rot_mat_to_euler(rot_mat: np.ndarray) -> tuple[float, float, float]:
    """(pitch, yaw, roll) of the rotation nearest ``rot_mat`` [3, 3] (columns forward, right, up), as
    RocketSim's ``Angle::FromRotMat`` reads a rotation, in float64."""
    u, _, vt = np.linalg.svd(np.asarray(rot_mat, np.float64))
    r = u @ vt
    yaw = math.atan2(r[1, 0], r[0, 0])
    pitch = math.asin(max(-1.0, min(1.0, -r[2, 0])))
    roll = math.atan2(r[2, 1], r[2, 2])
    if abs(pitch) == math.pi / 2:  # getEulerYPR at gimbal lock
        yaw += -math.pi if yaw > 0 else math.pi
        roll += -math.pi if roll > 0 else math.pi
    return -pitch, yaw, -roll


def _vec(v) -> flat.Vector3:
    return flat.Vector3(*(float(x) for x in v))


def _physics(pos, rot_mat, vel, ang_vel) -> flat.Physics:
    return flat.Physics(_vec(pos), flat.Rotator(*rot_mat_to_euler(rot_mat)), _vec(vel), _vec(ang_vel))


def air_state(cars: dict[str, np.ndarray], i: int) -> flat.AirState:
    if cars["is_demoed"][i] or cars["is_on_ground"][i]:
        return flat.AirState.OnGround
    if cars["is_jumping"][i]:
        return flat.AirState.Jumping
    return flat.AirState.Dodging if cars["is_flipping"][i] else flat.AirState.InAir


def dodge_timeout(cars: dict[str, np.ndarray], i: int) -> float:
    window = np.float32(C.DOUBLEJUMP_MAX_DELAY) - cars["air_time_since_jump"][i]
    closed = cars["is_demoed"][i] or cars["is_on_ground"][i] or not cars["has_jumped"][i] or window <= 0
    return -1.0 if closed else float(window)


def game_packet(state: SoccarState, env: int = 0, frame: int = 0, order: list[int] | None = None,
                phase: flat.MatchPhase = flat.MatchPhase.Active) -> flat.GamePacket:
    """The packet of env ``env`` of ``state`` at frame ``frame``: its active cars as players in the car
    order ``order`` (default: car order; player ids are car index + 1)."""
    cars = {k: v[env].cpu().numpy() for k, v in vars(state.game.cars).items()}
    ball = {k: v[env].cpu().numpy() for k, v in vars(state.game.ball).items()}
    pads = {k: v[env].cpu().numpy() for k, v in vars(state.game.pads).items()}
    active = state.active[env].cpu().numpy()
    players = []
    for i in order if order is not None else range(state.num_cars):
        if not active[i]:
            continue
        controls = cars["last_controls"][i]
        players.append(flat.PlayerInfo(
            physics=_physics(cars["pos"][i], cars["rot_mat"][i], cars["vel"][i], cars["ang_vel"][i]),
            air_state=air_state(cars, i), dodge_timeout=dodge_timeout(cars, i),
            demolished_timeout=float(cars["demo_respawn_timer"][i]) if cars["is_demoed"][i] else -1.0,
            is_supersonic=bool(cars["is_supersonic"][i]), is_bot=True, name=f"car{i}",
            team=int(i >= state.blue), boost=float(cars["boost"][i]), player_id=i + 1,
            last_input=flat.ControllerState(*(float(x) for x in controls[:5]),
                                            *(bool(x > 0.5) for x in controls[5:])),
            has_jumped=bool(cars["has_jumped"][i]), has_double_jumped=bool(cars["has_double_jumped"][i]),
            has_dodged=bool(cars["has_flipped"][i]), dodge_elapsed=float(cars["flip_time"][i]),
        ))  # fmt: skip
    respawn = np.array([PAD_COOLDOWN_BIG if i < len(C.BOOST_PADS_BIG) else PAD_COOLDOWN_SMALL
                        for i in range(len(V.PAD_POSITIONS))], np.float32)
    timer = np.where(pads["is_active"], np.float32(0), respawn - pads["cooldown"])
    return flat.GamePacket(
        players=players,
        boost_pads=[flat.BoostPadState(bool(pads["is_active"][i]), float(timer[i])) for i in FIELD_INFO_ORDER],
        balls=[flat.BallInfo(_physics(ball["pos"], ball["rot_mat"], ball["vel"], ball["ang_vel"]),
                             flat.SphereShape(BALL_DIAMETER))],
        match_info=flat.MatchInfo(seconds_elapsed=frame / 120, match_phase=phase, world_gravity_z=-650.0,
                                  game_speed=1.0, frame_num=frame),
        teams=[flat.TeamInfo(0, 0), flat.TeamInfo(1, 0)],
    )


def on_the_wire(packet: flat.GamePacket) -> flat.GamePacket:
    """``packet`` serialized and read back: the numbers the game's socket delivers (float32)."""
    return flat.GamePacket.unpack(packet.pack())
