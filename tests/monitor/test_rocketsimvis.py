"""RocketSimVis packets: JSON read the way RocketSimVis reads it.

What RocketSimVis (ZealanL/RocketSimVis ``src/states.py``, ``GameState.read_from_json``) reads from a
datagram: ``ball_phys`` {pos, vel, ang_vel, optional forward/up}; ``cars`` [{team_num, phys {pos,
forward, up, vel, ang_vel}, boost_amount, on_ground, is_demoed, optional has_flipped_or_double_jumped
and controls}]; optional ``boost_pad_locations`` (replacing its defaults) and ``boost_pad_states`` of the
same length; a pad is big when its location's z is 73. Its listener (``src/socket_listener.py``) takes
one UTF-8 JSON object per UDP datagram of at most 1 MiB.
"""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest
from monitor_helpers import frames

from nitro.envs.soccar import constants as C
from nitro.monitor import rocketsimvis
from nitro.monitor.live import LiveView

VISUALIZER_BUFFER = 1024 * 1024


def read_like_rocketsimvis(datagram: bytes) -> dict:
    """The values RocketSimVis takes from a datagram, with its key lookups (a missing key raises)."""
    assert len(datagram) <= VISUALIZER_BUFFER
    j = json.loads(datagram.decode("utf-8"))
    phys = lambda p: {k: [float(x) for x in p[k]] for k in ("pos", "vel", "ang_vel")} | (  # noqa: E731
        {"forward": p["forward"], "up": p["up"]} if p.get("forward") is not None else {})
    cars = [{"team_num": c["team_num"], "phys": phys(c["phys"]), "boost_amount": c["boost_amount"],
             "on_ground": c["on_ground"], "is_demoed": c["is_demoed"],
             "has_flipped_or_double_jumped": c.get("has_flipped_or_double_jumped")} for c in j["cars"]]
    locations = j.get("boost_pad_locations")
    states = j.get("boost_pad_states")
    if states is not None:
        assert len(states) == len(locations), "RocketSimVis refuses pad states without matching locations"
    return {"ball": phys(j["ball_phys"]), "cars": cars, "pad_locations": locations, "pad_states": states,
            "pad_is_big": [loc[2] == 73 for loc in locations]}


def test_game_state_as_rocketsimvis_reads_it(cars_replay):
    env, frame = 0, 85
    got = read_like_rocketsimvis(rocketsimvis.game_state_packet(cars_replay, env, frame))
    np.testing.assert_allclose(got["ball"]["pos"], cars_replay.ball_pos[env, frame], rtol=1e-7)
    rot = cars_replay.rot_mat()[env, frame]
    assert [c["team_num"] for c in got["cars"]] == [0, 1]
    for c, car in enumerate(got["cars"]):
        np.testing.assert_allclose(car["phys"]["pos"], cars_replay.car_pos[env, frame, c], rtol=1e-7)
        np.testing.assert_allclose(car["phys"]["forward"], rot[c][:, 0], atol=1e-6)
        np.testing.assert_allclose(car["phys"]["up"], rot[c][:, 2], atol=1e-6)
        # RocketSimVis's CarState reads boost "From 0 to 100", as nitro and RocketSim store it
        assert car["boost_amount"] == pytest.approx(float(cars_replay.car_boost[env, frame, c]))
        assert car["is_demoed"] == (c == 1) and car["on_ground"] == (c == 0)
    # pads go with their locations in RocketSim's order (its default list is RLGym's order)
    assert got["pad_locations"] == [list(p) for p in C.BOOST_PADS_BIG + C.BOOST_PADS_SMALL]
    assert got["pad_is_big"] == cars_replay.meta["pad_is_big"]
    assert got["pad_states"][3] is False and all(got["pad_states"][:3])


def test_live_view_sends_json_datagrams(cars_replay):
    viewer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    viewer.bind(("127.0.0.1", 0))
    viewer.settimeout(5)
    live = LiveView("rocketsimvis", env=1, port=viewer.getsockname()[1], max_fps=240, speed=16.0, block=True)
    try:
        short = frames(cars_replay, 0, 30)  # 30 datagrams of ~3 kB fit any socket buffer unread
        live.feed(short)
        live.wait()
        got = [read_like_rocketsimvis(viewer.recv(VISUALIZER_BUFFER)) for _ in range(short.num_frames)]
        assert live.sent == short.num_frames  # 15 frames/s of game under the 240 fps cap: all of them
        np.testing.assert_allclose([g["ball"]["pos"] for g in got], short.ball_pos[1], rtol=1e-7)
    finally:
        live.close()
        viewer.close()


def test_live_view_checks_its_arguments(cars_replay):
    with pytest.raises(ValueError, match="viewer must be one of rlviser, rocketsimvis, got 'rlgym'"):
        LiveView("rlgym")
    live = LiveView("rocketsimvis", env=5, port=9)
    try:
        with pytest.raises(ValueError, match="live view env 5 is not in this recording of 2 envs"):
            live.feed(cars_replay)
    finally:
        live.close()
