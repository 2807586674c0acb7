"""RLViser 0.9 packets: an 8-byte big-endian payload length, then a FlatBuffers ``rocketsim.Packet``.

The schema is RLViser's ``spec/*.fbs`` (VirxEC/rlviser v0.9.1, ``core.fbs``: ``table Packet { message:
Message (required); }`` with ``union Message {Connection, Quit, Speed, Paused, GameState, AddRender,
RemoveRender}``). The encoder below writes the tables and structs with the ``flatbuffers`` runtime in
schema order; struct layouts follow FlatBuffers' rules (each field aligned to its size, the struct
padded to its largest alignment). Ports as RLViser's defaults: it listens on 45243 and answers to
34254 (`udp.rs`, `main.rs`).
"""

from __future__ import annotations

import struct

import flatbuffers
import numpy as np

from nitro.monitor.cars import car_preset
from nitro.monitor.replay import Replay, quat_to_rot_mat

RLVISER_PORT = 45243
"""Where RLViser listens for packets."""
SIM_PORT = 34254
"""Where RLViser sends its own packets (Connection, Speed, Paused, state setting)."""
HEADER = struct.Struct(">Q")

# union Message: 0 is NONE, then the members in declaration order
MESSAGE_CONNECTION, MESSAGE_QUIT, MESSAGE_SPEED, MESSAGE_PAUSED, MESSAGE_GAME_STATE = 1, 2, 3, 4, 5
GAME_MODE_SOCCAR = 0

# struct layouts (little-endian, explicit padding) and their alignments
_VEC3 = (struct.Struct("<3f"), 4)
_PHYS = "3f9f3f3f"  # PhysState: pos, rot_mat {forward, right, up}, vel, ang_vel (72 bytes)
_PHYS_STATE = (struct.Struct("<" + _PHYS), 4)
_BALL_STATE = (struct.Struct("<" + _PHYS + "3f4xiff?3xQ"), 8)  # + HeatseekerInfo, pad, DropshotInfo: 112
_CAR_CONTROLS = (struct.Struct("<5f3?x"), 4)  # 24
_CAR_CONFIG = (struct.Struct("<3f3f5f5f?3xf"), 4)  # hitbox, offset, 2 WheelPairConfig, three_wheels, deadzone
_WHEELS = (struct.Struct("<4?"), 1)
_PAD_CONFIG = (struct.Struct("<3f?3x"), 4)  # 16
_PAD_STATE = (struct.Struct("<?3xfQQ"), 8)  # 24


def _struct(b: flatbuffers.Builder, layout, *values) -> int:
    """Write one struct inline (call right before adding it to its table's slot)."""
    fmt, align = layout
    b.Prep(align, fmt.size)
    b.head -= fmt.size
    fmt.pack_into(b.Bytes, b.head, *values)
    return b.Offset()


def _vector(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _finish(b: flatbuffers.Builder, kind: int, message: int) -> bytes:
    b.StartObject(2)
    b.PrependUint8Slot(0, kind, 0)
    b.PrependUOffsetTRelativeSlot(1, message, 0)
    b.Finish(b.EndObject())
    payload = bytes(b.Output())
    return HEADER.pack(len(payload)) + payload


def connection_packet() -> bytes:
    """``Connection``: what a simulator sends first (RLViser answers with its own)."""
    b = flatbuffers.Builder(64)
    b.StartObject(0)
    return _finish(b, MESSAGE_CONNECTION, b.EndObject())


def game_state_packet(replay: Replay, env: int, frame: int) -> bytes:
    """The ``GameState`` of env ``env`` (an index into the replay's envs) at frame ``frame``."""
    m = replay.meta
    b = flatbuffers.Builder(4096)
    rot = quat_to_rot_mat(replay.car_quat[env, frame]) if replay.num_cars else np.zeros((0, 3, 3))
    cars = [_car_info(b, replay, env, frame, c, rot[c]) for c in range(replay.num_cars)]
    car_vec = _vector(b, cars)
    pads = []
    for p, (pos, big) in enumerate(zip(m["pad_positions"], m["pad_is_big"])):
        b.StartObject(2)
        b.PrependStructSlot(0, _struct(b, _PAD_CONFIG, *pos, bool(big)), 0)
        b.PrependStructSlot(1, _struct(b, _PAD_STATE, bool(replay.pad_active[env, frame, p]), 0.0, 0, 0), 0)
        pads.append(b.EndObject())
    pad_vec = _vector(b, pads)
    b.StartObject(7)
    b.PrependFloat32Slot(0, float(m["tick_rate"]), 0.0)
    b.PrependUint64Slot(1, int(replay.tick[env, frame]), 0)
    b.PrependUint8Slot(2, GAME_MODE_SOCCAR, 0)
    b.PrependUOffsetTRelativeSlot(3, car_vec, 0)
    identity = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)  # the ball is not rotated (RocketSim noBallRot)
    ball = _struct(b, _BALL_STATE, *replay.ball_pos[env, frame], *identity, *replay.ball_vel[env, frame],
                   *replay.ball_ang_vel[env, frame], 0.0, 0.0, 0.0, 0, 0.0, 0.0, False, 0)
    b.PrependStructSlot(4, ball, 0)
    b.PrependUOffsetTRelativeSlot(5, pad_vec, 0)
    return _finish(b, MESSAGE_GAME_STATE, b.EndObject())


def _car_info(b: flatbuffers.Builder, r: Replay, e: int, f: int, c: int, rot: np.ndarray) -> int:
    flag = r.flags_at(e, f, c)
    b.StartObject(29)  # CarState, fields in schema order
    physics = _struct(b, _PHYS_STATE, *r.car_pos[e, f, c], *rot[:, 0], *rot[:, 1], *rot[:, 2],
                      *r.car_vel[e, f, c], *r.car_ang_vel[e, f, c])
    b.PrependStructSlot(0, physics, 0)
    b.PrependBoolSlot(1, flag["is_on_ground"], False)
    b.PrependStructSlot(2, _struct(b, _WHEELS, *[flag["is_on_ground"]] * 4), 0)
    b.PrependBoolSlot(3, flag["has_jumped"], False)
    b.PrependBoolSlot(4, flag["has_double_jumped"], False)
    b.PrependBoolSlot(5, flag["has_flipped"], False)
    b.PrependStructSlot(6, _struct(b, _VEC3, 0.0, 0.0, 0.0), 0)  # flip_rel_torque: not recorded
    b.PrependBoolSlot(9, flag["is_flipping"], False)
    b.PrependBoolSlot(10, flag["is_jumping"], False)
    b.PrependFloat32Slot(13, float(r.car_boost[e, f, c]), 0.0)
    b.PrependBoolSlot(15, flag["is_boosting"], False)
    b.PrependBoolSlot(17, flag["is_supersonic"], False)
    b.PrependBoolSlot(25, flag["is_demoed"], False)
    controls = _struct(b, _CAR_CONTROLS, 0.0, 0.0, 0.0, 0.0, 0.0, False, flag["is_boosting"], False)
    b.PrependStructSlot(28, controls, 0)
    state = b.EndObject()
    p = car_preset(r.meta["car_presets"][c])
    b.StartObject(4)  # CarInfo
    b.PrependUint64Slot(0, c + 1, 0)  # RocketSim numbers cars from 1
    b.PrependUint8Slot(1, int(r.meta["teams"][c]), 0)
    b.PrependUOffsetTRelativeSlot(2, state, 0)
    fw, bw = p.front_wheels, p.back_wheels
    config = _struct(b, _CAR_CONFIG, *p.hitbox_size, *p.hitbox_offset, fw.wheel_radius, fw.suspension_rest_length,
                     *fw.connection_point_offset, bw.wheel_radius, bw.suspension_rest_length,
                     *bw.connection_point_offset, p.three_wheels, p.dodge_deadzone)
    b.PrependStructSlot(3, config, 0)
    return b.EndObject()


def message_kind(datagram: bytes) -> int:
    """The union type of a received packet (checking the length header), e.g. MESSAGE_PAUSED."""
    if len(datagram) < HEADER.size or HEADER.unpack_from(datagram)[0] != len(datagram) - HEADER.size:
        raise ValueError("not an RLViser packet: the 8-byte length header does not match the datagram")
    table = flatbuffers.table.Table(datagram, HEADER.size + flatbuffers.encode.Get(
        flatbuffers.packer.uoffset, datagram, HEADER.size))
    off = table.Offset(4)
    return table.Get(flatbuffers.number_types.Uint8Flags, off + table.Pos) if off else 0


def message_value(datagram: bytes) -> float | bool | None:
    """The value of a Speed (float) or Paused (bool) packet; None for other messages."""
    kind = message_kind(datagram)
    if kind not in (MESSAGE_SPEED, MESSAGE_PAUSED):
        return None
    root = HEADER.size + flatbuffers.encode.Get(flatbuffers.packer.uoffset, datagram, HEADER.size)
    packet = flatbuffers.table.Table(datagram, root)
    msg = flatbuffers.table.Table(datagram, packet.Indirect(packet.Offset(6) + packet.Pos))
    off = msg.Offset(4)
    if kind == MESSAGE_SPEED:
        return msg.Get(flatbuffers.number_types.Float32Flags, off + msg.Pos) if off else 0.0
    return bool(msg.Get(flatbuffers.number_types.BoolFlags, off + msg.Pos)) if off else False
