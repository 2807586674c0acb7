"""RLViser 0.9 packets decoded with flatc and RLViser's own schema (spec/*.fbs of rlviser-py 0.6.14)."""

from __future__ import annotations

import socket
import struct
import time

import numpy as np
import pytest
import torch
from monitor_helpers import frames

from nitro.envs.soccar import Arena
from nitro.monitor import rlviser
from nitro.monitor.cars import car_preset
from nitro.monitor.live import LiveView, schedule
from nitro.monitor.recorder import ArenaRecording

# float32 values printed by flatc with 6 decimals (e.g. 2202.066162): 1e-3 relative covers the
# printing of numbers up to ~6000 UU; the values themselves are bit copies of float32s.
RTOL = 1e-6
ATOL = 1e-3


def vec(d: dict) -> list[float]:
    return [d["x"], d["y"], d["z"]]


def payload(packet: bytes) -> bytes:
    (length,) = struct.unpack(">Q", packet[:8])
    assert length == len(packet) - 8, "the 8-byte big-endian header holds the payload length"
    return packet[8:]


def test_game_state_with_cars_decodes_with_rlvisers_schema(flatc, cars_replay):
    env, frame = 1, 85  # car 1 is demolished on frames 80-89
    packet = flatc.decode(payload(rlviser.game_state_packet(cars_replay, env, frame)))
    assert packet["message_type"] == "GameState"
    g = packet["message"]
    assert g["tick_rate"] == 120.0 and g["tick_count"] == int(cars_replay.tick[env, frame])
    assert g["game_mode"] == "Soccar"
    np.testing.assert_allclose(vec(g["ball"]["physics"]["pos"]), cars_replay.ball_pos[env, frame], RTOL, ATOL)
    np.testing.assert_allclose(vec(g["ball"]["physics"]["vel"]), cars_replay.ball_vel[env, frame], RTOL, ATOL)
    rot = cars_replay.rot_mat()[env, frame]
    assert [c["id"] for c in g["cars"]] == [1, 2] and [c["team"] for c in g["cars"]] == ["Blue", "Orange"]
    for c, car in enumerate(g["cars"]):
        s = car["state"]
        np.testing.assert_allclose(vec(s["physics"]["pos"]), cars_replay.car_pos[env, frame, c], RTOL, ATOL)
        for col, axis in enumerate(("forward", "right", "up")):  # RotMat columns, as RocketSim stores them
            np.testing.assert_allclose(vec(s["physics"]["rot_mat"][axis]), rot[c][:, col], atol=1e-6)
        assert s["boost"] == pytest.approx(float(cars_replay.car_boost[env, frame, c]))
        flags = cars_replay.flags_at(env, frame, c)
        assert s["is_demoed"] == flags["is_demoed"] == (c == 1)
        assert s["is_on_ground"] == flags["is_on_ground"]
        preset = car_preset(cars_replay.meta["car_presets"][c])
        np.testing.assert_allclose(vec(car["config"]["hitbox_size"]), preset.hitbox_size, rtol=1e-6)
        np.testing.assert_allclose(vec(car["config"]["hitbox_pos_offset"]), preset.hitbox_offset, rtol=1e-6)
        assert car["config"]["back_wheels"]["wheel_radius"] == preset.back_wheels.wheel_radius
    assert len(g["pads"]) == 34
    for p, pad in enumerate(g["pads"]):
        np.testing.assert_allclose(vec(pad["config"]["pos"]), cars_replay.meta["pad_positions"][p])
        assert pad["config"]["is_big"] == cars_replay.meta["pad_is_big"][p]
        assert pad["state"]["is_active"] == bool(cars_replay.pad_active[env, frame, p])
    assert not g["pads"][3]["state"]["is_active"]  # taken on frame 60


def test_ball_only_arena_packet(flatc, meshes_available):
    arena = Arena(2, blue=0, orange=0)
    arena.set_ball(pos=torch.tensor([[100.0, -200.0, 800.0]] * 2), vel=torch.tensor([[300.0, 0.0, 0.0]] * 2))
    rec = ArenaRecording(arena, env_ids=[1])
    rec.step(arena.step(None, ticks=4))
    replay = rec.replay()
    g = flatc.decode(payload(rlviser.game_state_packet(replay, 0, 1)))["message"]
    assert g.get("cars", []) == [] and g["tick_count"] == 4
    np.testing.assert_allclose(vec(g["ball"]["physics"]["pos"]), arena.ball.pos[1].numpy(), RTOL, ATOL)
    np.testing.assert_allclose(vec(g["ball"]["physics"]["ang_vel"]), arena.ball.ang_vel[1].numpy(), RTOL, ATOL)


def test_connection_packet(flatc):
    assert flatc.decode(payload(rlviser.connection_packet()))["message_type"] == "Connection"


@pytest.mark.parametrize("message,kind,value", [
    ({"message_type": "Speed", "message": {"speed": 2.5}}, rlviser.MESSAGE_SPEED, 2.5),
    ({"message_type": "Paused", "message": {"paused": True}}, rlviser.MESSAGE_PAUSED, True),
    ({"message_type": "Paused", "message": {"paused": False}}, rlviser.MESSAGE_PAUSED, False),
    ({"message_type": "Quit", "message": {}}, rlviser.MESSAGE_QUIT, None),
])
def test_reads_what_rlviser_sends(flatc, message, kind, value):
    """RLViser's own messages (built by flatc from the schema) are understood."""
    body = flatc.encode(message)
    datagram = struct.pack(">Q", len(body)) + body
    assert rlviser.message_kind(datagram) == kind
    assert rlviser.message_value(datagram) == value
    with pytest.raises(ValueError, match="length header does not match"):
        rlviser.message_kind(datagram[:-1])


def test_schedule_paces_frames_at_game_speed():
    # 8 ticks a frame at 120 Hz = 15 frames/s; a 60 fps cap keeps them all
    ticks = np.arange(10) * 8
    assert schedule(ticks, 120.0, 60.0) == [(i, pytest.approx(i / 15)) for i in range(10)]
    # one tick a frame (120 frames/s) capped at 30 fps: every 4th frame, plus the last
    ticks = np.arange(10)
    assert [f for f, _ in schedule(ticks, 120.0, 30.0)] == [0, 4, 8, 9]
    # a reset (ticks go back) lasts the usual frame time
    assert schedule(np.array([0, 8, 16, 0, 8]), 120.0, 60.0)[3][1] == pytest.approx(3 / 15)


def test_live_view_streams_and_obeys_pause(flatc, cars_replay):
    """A stand-in RLViser: bound to a free port, it receives Connection then paced GameStates, and its
    Paused message stops the stream."""
    viewer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    viewer.bind(("127.0.0.1", 0))
    viewer.settimeout(5)
    live = LiveView("rlviser", env=1, port=viewer.getsockname()[1], listen_port=0, max_fps=120, speed=8.0)
    try:
        first, sim = viewer.recvfrom(65536)
        assert flatc.decode(payload(first))["message_type"] == "Connection"
        short = frames(cars_replay, 0, 20)  # 20 frames of 8 ticks = 1.33 s of game, 0.17 s at speed 8
        start = time.monotonic()
        live.feed(short)
        live.wait()
        elapsed = time.monotonic() - start
        packets = [viewer.recv(65536) for _ in range(20)]
        # paced at game speed x 8: 19 frame gaps of 1/15 s / 8 = 0.158 s; a loaded CI machine may be late
        # but never early (the first frame goes at once)
        assert 0.15 <= elapsed < 3.0
        last = flatc.decode(payload(packets[-1]))["message"]
        assert last["tick_count"] == int(short.tick[1, -1])
        pause = flatc.encode({"message_type": "Paused", "message": {"paused": True}})
        viewer.sendto(struct.pack(">Q", len(pause)) + pause, sim)
        live.feed(short)
        time.sleep(0.5)
        assert live.paused and live.sent <= 21  # at most the chunk's first frame went before the pause arrived
    finally:
        live.close()
        viewer.close()
