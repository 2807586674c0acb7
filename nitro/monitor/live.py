"""Live viewing: one env's frames streamed to RLViser or RocketSimVis at game speed.

A `LiveView` takes replay chunks (from a `Recorder` during training or eval, or a replay file) and a
background thread sends one env's frames over UDP at the pace the game would run, at most
``max_fps`` packets per second. During training chunks arrive faster than real time: a chunk that
arrives while another plays replaces any chunk still waiting (the viewer shows the newest rollout,
whole), so the trainer never waits. ``block=True`` (eval, replay files) makes `feed` wait instead.
RLViser's Speed and Paused messages (its +/- and P keys) are obeyed.
"""

from __future__ import annotations

import socket
import threading
import time
import warnings

import numpy as np

from nitro.monitor import VIEWERS, rlviser, rocketsimvis
from nitro.monitor.replay import Replay


def schedule(ticks: np.ndarray, tick_rate: float, max_fps: float) -> list[tuple[int, float]]:
    """(frame, game seconds after the first frame) of the frames to send.

    A frame lasts its tick difference to the next one; where ticks do not increase (a reset) it lasts
    the median difference. Frames closer than 1 / max_fps to the last one sent are skipped; the
    first and the last frame are always sent."""
    ticks = np.asarray(ticks, np.int64)
    if len(ticks) == 0:
        return []
    diff = np.diff(ticks)
    typical = float(np.median(diff[diff > 0])) if (diff > 0).any() else 1.0
    dt = np.where(diff > 0, diff, typical) / tick_rate
    times = np.concatenate([[0.0], np.cumsum(dt)])
    gap = 1.0 / max_fps
    out, last = [(0, 0.0)], 0.0
    for i in range(1, len(ticks)):  # sync-ok: host numpy
        if times[i] - last >= gap - 1e-9 or i == len(ticks) - 1:
            out.append((i, float(times[i])))
            last = times[i]
    return out


class LiveView:
    """Stream env ``env`` (an index into the chunks' envs) to ``viewer`` ("rlviser" | "rocketsimvis")."""

    def __init__(self, viewer: str, env: int = 0, host: str = "127.0.0.1", port: int | None = None,
                 listen_port: int | None = None, max_fps: float = 60.0, block: bool = False, speed: float = 1.0):
        if viewer not in VIEWERS:
            raise ValueError(f"viewer must be one of {', '.join(VIEWERS)}, got {viewer!r}")
        if max_fps <= 0 or speed <= 0:
            raise ValueError(f"max_fps and speed must be positive, got {max_fps} and {speed}")
        self.viewer, self.env, self.max_fps, self.block = viewer, env, max_fps, block
        self.speed, self.paused = speed, False
        default_port = rlviser.RLVISER_PORT if viewer == "rlviser" else rocketsimvis.ROCKETSIMVIS_PORT
        self.address = (host, port or default_port)
        self.encode = rlviser.game_state_packet if viewer == "rlviser" else rocketsimvis.game_state_packet
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if viewer == "rlviser":
            want = rlviser.SIM_PORT if listen_port is None else listen_port
            try:
                self.sock.bind(("0.0.0.0", want))
            except OSError as e:
                self.sock.bind(("0.0.0.0", 0))
                warnings.warn(f"port {want} is taken ({e}); RLViser's pause and speed keys will not reach nitro",
                              stacklevel=2)
            self.sock.setblocking(False)
            self._send(rlviser.connection_packet())
        self.sent = 0
        """Packets sent so far."""
        self._pending: Replay | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._playing = False
        self._thread = threading.Thread(target=self._run, name=f"nitro-{viewer}", daemon=True)
        self._thread.start()

    def feed(self, replay: Replay) -> None:
        """Queue a chunk to play (see the module docstring for what happens to one already waiting)."""
        if not 0 <= self.env < replay.num_envs:
            raise ValueError(f"live view env {self.env} is not in this recording of {replay.num_envs} envs")
        with self._cond:
            while self.block and self._pending is not None and not self._closed:
                self._cond.wait()
            self._pending = replay
            self._cond.notify_all()

    def wait(self) -> None:
        """Block until every fed chunk has been played."""
        with self._cond:
            while (self._pending is not None or self._playing) and not self._closed:
                self._cond.wait()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=5)
        self.sock.close()

    def _send(self, data: bytes) -> None:
        try:
            self.sock.sendto(data, self.address)
        except OSError:  # nobody listening (ICMP port unreachable): a viewer may start later
            pass

    def _poll(self) -> None:
        """Apply RLViser's Speed / Paused messages."""
        if self.viewer != "rlviser":
            return
        while True:
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, OSError):
                return
            try:
                kind, value = rlviser.message_kind(data), rlviser.message_value(data)
            except (ValueError, IndexError, TypeError):
                continue
            if kind == rlviser.MESSAGE_SPEED and value:
                self.speed = float(value)
            elif kind == rlviser.MESSAGE_PAUSED:
                self.paused = bool(value)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                replay, self._pending, self._playing = self._pending, None, True
                self._cond.notify_all()
            self._play(replay)
            with self._cond:
                self._playing = False
                self._cond.notify_all()

    def _play(self, replay: Replay) -> None:
        ticks = replay.tick[self.env]
        start, clock, speed = time.monotonic(), 0.0, self.speed
        for frame, at in schedule(ticks, replay.meta["tick_rate"], self.max_fps):
            while True:  # wait for the frame's time (game time runs at `speed`, stops while paused)
                self._poll()
                if self._closed:
                    return
                now = time.monotonic()
                if not self.paused:
                    clock += (now - start) * speed
                start, speed = now, self.speed
                if not self.paused and clock >= at - 1e-4:
                    break
                time.sleep(min(0.05, (at - clock) / speed) if not self.paused else 0.05)
            self._send(self.encode(replay, self.env, frame))
            self.sent += 1
