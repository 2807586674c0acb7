"""Watching soccar games while training or evaluating: replays into the run directory and live viewers.

`TrainingWatch` records chosen envs of every rollout on the device (a gather per step, inside the
rollout, so a CUDA graph captures it) and, after an update, hands the rollout to a background thread
that writes ``<run dir>/replays/update_<n>.npz`` every ``replay_every`` updates and/or streams it to
RLViser or RocketSimVis. Nothing waits for the host: a copy still in flight when the next one is due
is skipped. `EvalWatch` records every step of ``nitro eval`` into one replay and can stream it too.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any, Sequence

import torch

from nitro.envs.soccar import constants as C
from nitro.monitor import VIEWERS
from nitro.monitor import replay as R
from nitro.monitor.live import LiveView
from nitro.monitor.recorder import Recorder, Recording, find_game_state

RENDER_CHOICES = ("none", *VIEWERS)


def soccar_layout(env, state: Any) -> dict:
    """Teams, car presets and tick rate of a soccar env's cars, for `Recorder`.

    Teams: the env's ``agent_team`` when its agents are the cars (the Arena order, blue first), else
    the first half of the cars blue. Presets: ``env.params.car`` (one name or one per car), else
    octane. Tick rate: ``env.params.tick_rate``, else RocketSim's 120."""
    path = find_game_state(state)
    if path is None:
        raise ValueError(f"replays and live viewers need a soccar env (its state holds a nitro.envs.soccar "
                         f"GameState); {type(env).__name__}'s state is a {type(state).__name__}")
    game = state
    for name in path:
        game = getattr(game, name)
    cars = game.cars.pos.shape[1]
    teams = list(env.agent_team) if env.num_agents == cars else [0] * math.ceil(cars / 2) + [1] * (cars // 2)
    preset = getattr(env.params, "car", "octane")
    presets = [preset] * cars if isinstance(preset, str) else list(preset)
    return {"teams": teams, "car_presets": presets,
            "tick_rate": float(getattr(env.params, "tick_rate", C.DEFAULT_TICK_RATE))}


class TrainingWatch:
    """Replays and live viewing of the rollouts of a `nitro.train.ppo.Trainer`."""

    def __init__(self, env, state: Any, env_ids: Sequence[int], frames: int, replay_every: int = 0,
                 replay_dir: Path | None = None, render: str = "none"):
        if render not in RENDER_CHOICES:
            raise ValueError(f"render must be one of {', '.join(RENDER_CHOICES)}, got {render!r}")
        self.recorder = Recorder(state, env_ids, frames, **soccar_layout(env, state))
        self.frames, self.every = frames, replay_every if replay_dir is not None else 0
        self.replay_dir = Path(replay_dir) if replay_dir is not None else None
        self.live = LiveView(render) if render != "none" else None
        self.written: list[Path] = []

    @classmethod
    def for_run(cls, cfg, env, state: Any, frames: int, run_dir: Path | None) -> TrainingWatch:
        """The watch a run's ``monitor`` config asks for."""
        return cls(env, state, cfg.replay_envs, frames, cfg.replay_every,
                   Path(run_dir) / "replays" if run_dir else None, cfg.render)

    def capture(self, step: int, state: Any, first: torch.Tensor) -> None:
        """Inside the rollout: record frame ``step`` (device work only)."""
        self.recorder.capture(step, state, first)

    def after_update(self, update: int) -> None:
        """On the host after update ``update``: hand the rollout over if it is wanted (never waits)."""
        save = bool(self.every) and update % self.every == 0
        if save or self.live is not None:
            self.recorder.flush(self.frames, functools.partial(self._deliver, update, save), {"update": update})

    def _deliver(self, update: int, save: bool, replay: R.Replay) -> None:
        if save:
            self.written.append(replay.save(self.replay_dir / f"update_{update:08d}.npz"))
        if self.live is not None:
            self.live.feed(replay)

    def close(self) -> None:
        self.recorder.close()
        if self.live is not None:
            self.live.close()


class EvalWatch:
    """Every step of chosen envs of an evaluation, into one replay and/or a live viewer."""

    def __init__(self, env, state: Any, env_ids: Sequence[int], render: str = "none", info: dict | None = None):
        if render not in RENDER_CHOICES:
            raise ValueError(f"render must be one of {', '.join(RENDER_CHOICES)}, got {render!r}")
        self.live = LiveView(render, block=True) if render != "none" else None
        self.recording = Recording(state, env_ids, **soccar_layout(env, state), info=info,
                                   on_chunk=self.live.feed if self.live is not None else None)

    def capture(self, state: Any, first: torch.Tensor) -> None:
        self.recording.capture(state, first)

    def finish(self, path: Path | None) -> R.Replay:
        """The whole recording (saved to ``path`` if given), once the viewer has shown it."""
        replay = self.recording.replay()
        self.recording.close()
        if path is not None:
            replay.save(path)
        if self.live is not None:
            self.live.wait()
            self.live.close()
        return replay
