"""Recording chosen envs of a soccar batch without slowing the batch down.

`Recorder.capture` copies the chosen envs' state into one device buffer row per frame (a gather and
a concatenation; no host sync, so it may run inside a compiled step or a CUDA graph). `Recorder.flush`
queues an asynchronous copy of the filled frames to pinned host memory and returns at once; a
background thread waits for that copy, unpacks it into a `Replay` and hands it to a callback (write a
file, feed a live viewer). A flush that finds the previous one still running is dropped, never waited
for, so a slow disk or viewer cannot stall training.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.state import ArenaEvents, GameState
from nitro.monitor import replay as R

_CAR_FIELDS = (("pos", (3,)), ("rot_mat", (3, 3)), ("vel", (3,)), ("ang_vel", (3,)), ("boost", ()))


def find_game_state(state: Any, path: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """The attribute path from an env state to the soccar `GameState` it holds, or None."""
    if isinstance(state, GameState):
        return path
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        for f in dataclasses.fields(state):
            found = find_game_state(getattr(state, f.name), path + (f.name,))
            if found is not None:
                return found
    return None


def _follow(state: Any, path: tuple[str, ...]) -> GameState:
    for name in path:
        state = getattr(state, name)
    return state


@dataclasses.dataclass(frozen=True)
class _Layout:
    """Where each recorded quantity sits in a packed frame row (float64: ticks stay exact)."""

    num_cars: int
    flags: tuple[str, ...]
    """CAR_FLAGS the state has (the others are recorded as 0)."""
    events: bool

    def fields(self) -> list[tuple[str, tuple[int, ...]]]:
        c = self.num_cars
        out = [("tick", ()), ("first", ()), ("ball_pos", (3,)), ("ball_vel", (3,)), ("ball_ang_vel", (3,))]
        out += [(f"car_{name}", (c, *shape)) for name, shape in _CAR_FIELDS]
        out += [(f"flag_{name}", (c,)) for name in self.flags]
        out += [("pad_active", (C.BOOST_PAD_COUNT,))]
        if self.events:
            out += [("goal", ()), ("touch", (c,)), ("demo", (c,)), ("boost_pickup", (c,))]
        return out

    @property
    def width(self) -> int:
        return sum(int(np.prod(s)) for _, s in self.fields())

    def unpack(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """[F, E, width] -> {name: [E, F, *shape]}."""
        out, at = {}, 0
        F, E = rows.shape[:2]
        for name, shape in self.fields():
            n = int(np.prod(shape))
            out[name] = np.moveaxis(rows[..., at:at + n].reshape(F, E, *shape), 0, 1)
            at += n
        return out


class Recorder:
    """Record envs ``env_ids`` of a batch of soccar states, up to ``frames`` frames per flush.

    ``teams`` gives each car's team (0 blue, 1 orange; blue cars first, as in the Arena), ``car_presets``
    each car's preset name (default octane). ``events=True`` records the `ArenaEvents` passed to
    `capture` instead of deriving them on the host.
    """

    def __init__(self, state: Any, env_ids: Sequence[int], frames: int, *, teams: Sequence[int] = (),
                 car_presets: Sequence[str] | None = None, tick_rate: float = C.DEFAULT_TICK_RATE,
                 events: bool = False, info: dict | None = None):
        if not env_ids:
            raise ValueError("env_ids must name at least one env to record")
        if frames < 1:
            raise ValueError(f"frames must be >= 1, got {frames}")
        self.path = self._locate(state)
        game = _follow(state, self.path)
        num_envs, num_cars = game.tick_count.shape[0], game.cars.pos.shape[1]
        self.env_ids = [int(e) for e in env_ids]
        bad = [e for e in self.env_ids if not 0 <= e < num_envs]
        if bad:
            raise ValueError(f"cannot record envs {bad}: the batch has envs 0..{num_envs - 1}")
        if num_cars != len(teams):
            raise ValueError(f"the state holds {num_cars} cars but teams lists {len(teams)}; pass "
                             "teams=[0, ..., 1, ...] (blue cars first)")
        self.device = game.tick_count.device
        self.ids = torch.tensor(self.env_ids, dtype=torch.int64, device=self.device)
        self.frames, self.teams = frames, [int(t) for t in teams]
        self.car_presets = list(car_presets) if car_presets is not None else None
        self.tick_rate, self.info = tick_rate, dict(info or {})
        flags = tuple(f for f in R.CAR_FLAGS if hasattr(game.cars, f))
        self.layout = _Layout(num_cars, flags, events)
        self.buffer = torch.zeros(frames, len(self.env_ids), self.layout.width, dtype=torch.float64,
                                  device=self.device)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="nitro-replay")
        self._pending: concurrent.futures.Future | None = None
        self.dropped = 0
        """Flushes skipped because the previous one was still being handled."""

    @staticmethod
    def _locate(state: Any) -> tuple[str, ...]:
        path = find_game_state(state)
        if path is None:
            raise ValueError(f"replays need a soccar env: its state must hold a nitro.envs.soccar GameState, "
                             f"this one is a {type(state).__name__}")
        return path

    # --- device side ------------------------------------------------------------------------------

    def pack(self, state: Any, first: torch.Tensor | None = None, events: Any = None) -> torch.Tensor:
        """The recorded envs' frame row [E, width] float64 (pure device work)."""
        g, ids = _follow(state, self.path), self.ids
        E = ids.numel()
        rows = lambda x: x.index_select(0, ids).reshape(E, -1).double()  # noqa: E731
        parts = [rows(g.tick_count),
                 rows(first) if first is not None else torch.zeros(E, 1, dtype=torch.float64, device=ids.device),
                 rows(g.ball.pos), rows(g.ball.vel), rows(g.ball.ang_vel)]
        parts += [rows(getattr(g.cars, name)) for name, _ in _CAR_FIELDS]
        parts += [rows(getattr(g.cars, name)) for name in self.layout.flags]
        parts += [rows(g.pads.is_active)]
        if self.layout.events:
            if events is None:
                raise ValueError("this Recorder records events (events=True): pass the step's ArenaEvents")
            goal = torch.where(events.goal_blue, 1, torch.where(events.goal_orange, 2, 0))
            pickup = getattr(events, "boost_pickup_pad", None)
            if pickup is None:  # an arena without pad indices: mark the pickup, pad unknown
                pickup = torch.where(events.boost_pickup, -2, -1)
            parts += [rows(goal), rows(events.ball_touch), rows(events.demo), rows(pickup)]
        return torch.cat(parts, 1)

    def capture(self, frame: int, state: Any, first: torch.Tensor | None = None, events: Any = None) -> None:
        """Write the recorded envs of ``state`` as frame ``frame`` (0 <= frame < frames); no host sync.

        ``state`` is a `GameState` or an env state holding one; ``first`` [N] bool marks envs whose
        state begins an episode."""
        self.buffer[frame].copy_(self.pack(state, first, events))

    # --- host side --------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._pending is not None and not self._pending.done()

    def flush(self, frames: int, callback: Callable[[R.Replay], Any], info: dict | None = None) -> bool:
        """Hand the first ``frames`` frames to ``callback`` (on a background thread) as a `Replay`.

        Returns False (and counts a drop) if the previous flush is still being handled. The copy is
        queued on the current stream, after the work that filled the buffer; nothing here waits."""
        if self.busy:
            self.dropped += 1
            return False
        if self._pending is not None:
            self._pending.result()  # re-raise a failure of the previous callback
        src = self.buffer[:frames]
        if self.device.type == "cuda":
            host = torch.empty(src.shape, dtype=src.dtype, pin_memory=True)
            host.copy_(src, non_blocking=True)
            ready = torch.cuda.Event()
            ready.record()
        else:
            host, ready = src.clone(), None
        meta = {**self.info, **(info or {})}
        self._pending = self._pool.submit(self._deliver, host, ready, callback, meta)
        return True

    def _deliver(self, host: torch.Tensor, ready, callback, info: dict) -> None:
        if ready is not None:
            ready.synchronize()  # waits on this thread only
        callback(self.to_replay(host.numpy(), info))

    def to_replay(self, rows: np.ndarray, info: dict | None = None) -> R.Replay:
        """A `Replay` from packed rows [F, E, width]."""
        d = self.layout.unpack(rows)
        events = None
        if self.layout.events:
            events = {"goal": d["goal"], "touch": d["touch"] > 0.5, "demo": d["demo"] > 0.5,
                      "boost_pickup": d["boost_pickup"]}
        return R.build(
            tick=d["tick"].astype(np.int64), episode_start=d["first"] > 0.5, ball_pos=d["ball_pos"],
            ball_vel=d["ball_vel"], ball_ang_vel=d["ball_ang_vel"], car_pos=d["car_pos"],
            car_rot_mat=d["car_rot_mat"], car_vel=d["car_vel"], car_ang_vel=d["car_ang_vel"],
            car_boost=d["car_boost"], car_flags={f: d[f"flag_{f}"] > 0.5 for f in self.layout.flags},
            pad_active=d["pad_active"] > 0.5, teams=self.teams, car_presets=self.car_presets, events=events,
            tick_rate=self.tick_rate, env_ids=self.env_ids, info=info)

    def wait(self) -> None:
        """Block until the last flush has been handled (re-raising its error)."""
        if self._pending is not None:
            self._pending.result()

    def close(self) -> None:
        self.wait()
        self._pool.shutdown(wait=True)


class Recording:
    """Record envs of a stream of states, frame by frame, into one replay.

    Frames are gathered on the device in chunks of ``chunk`` and copied to the host off the stepping
    thread; every chunk is kept (a full buffer waits for the previous copy rather than drop it) and
    handed to ``on_chunk`` too (a live viewer). The other arguments are `Recorder`'s."""

    def __init__(self, state: Any, env_ids: Sequence[int], chunk: int = 256, *, teams: Sequence[int] = (),
                 car_presets: Sequence[str] | None = None, tick_rate: float = C.DEFAULT_TICK_RATE,
                 events: bool = False, info: dict | None = None,
                 on_chunk: Callable[[R.Replay], Any] | None = None):
        self.recorder = Recorder(state, env_ids, chunk, teams=teams, car_presets=car_presets, tick_rate=tick_rate,
                                 events=events, info=info)
        self.on_chunk = on_chunk
        self.chunks: list[R.Replay] = []
        self.frame = 0

    def capture(self, state: Any, first: torch.Tensor | None = None, events: Any = None) -> None:
        """Record ``state`` as the next frame (``first`` [N] marks envs whose episode starts here)."""
        self.recorder.capture(self.frame, state, first, events)
        self.frame += 1
        if self.frame == self.recorder.frames:
            self._flush()

    def _keep(self, replay: R.Replay) -> None:
        self.chunks.append(replay)
        if self.on_chunk is not None:
            self.on_chunk(replay)

    def _flush(self) -> None:
        self.recorder.wait()
        self.recorder.flush(self.frame, self._keep)
        self.frame = 0

    def replay(self) -> R.Replay:
        """Everything recorded so far, as one replay."""
        if self.frame:
            self._flush()
        self.recorder.wait()
        if not self.chunks:
            raise ValueError("nothing was recorded")
        return R.concat(self.chunks)

    def save(self, path) -> Path:
        return self.replay().save(path)

    def close(self) -> None:
        self.recorder.close()


class ArenaRecording(Recording):
    """Record envs of a `nitro.envs.soccar.Arena` step by step into one replay file.

        rec = ArenaRecording(arena, env_ids=[0, 1])
        for _ in range(600):
            events = arena.step(controls)
            rec.step(events)
        rec.save("kickoffs.npz")

    The first frame is the arena's state when recording starts; the arena's events are recorded."""

    def __init__(self, arena, env_ids: Sequence[int] = (0,), chunk: int = 256, teams: Sequence[int] | None = None,
                 info: dict | None = None):
        if teams is None:
            if arena.num_cars:
                raise ValueError(f"the arena has {arena.num_cars} cars: pass teams=[0, ..., 1, ...] (blue first)")
            teams = []
        cars = arena.car if isinstance(arena.car, (list, tuple)) else [arena.car] * arena.num_cars
        super().__init__(arena.state, env_ids, chunk, teams=teams, car_presets=cars, tick_rate=arena.tick_rate,
                         events=True, info=info)
        self.arena = arena
        self.capture(arena.state, events=ArenaEvents.none(arena.num_envs, arena.num_cars, arena.device))

    def step(self, events) -> None:
        """Record the arena's state after a step, with that step's events."""
        self.capture(self.arena.state, events=events)
