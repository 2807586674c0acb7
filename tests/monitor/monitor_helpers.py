"""Helpers of the monitor tests: a synthetic 1v1 replay (cars come from the tests until the simulator
has them)."""

from __future__ import annotations

import dataclasses

import numpy as np

from nitro.monitor import replay as R
from nitro.train import config as C
from nitro.train.ppo import Trainer


def synthetic_cars(envs: int = 2, frames: int = 120, ticks_per_frame: int = 8) -> R.Replay:
    """Two cars driving circles on the floor (blue around x = -1500, orange around x = +1500) while
    the ball rolls into the orange goal; car 1 is demolished on frames 80-89, pad 3 is taken on frame
    60 and the boost drains by 0.5 a frame."""
    t = np.arange(frames)
    car_pos = np.zeros((envs, frames, 2, 3), np.float32)
    rot = np.zeros((envs, frames, 2, 3, 3), np.float32)
    for c, (cx, sign) in enumerate([(-1500.0, 1.0), (1500.0, -1.0)]):
        a = sign * t / 20.0
        car_pos[:, :, c] = np.stack([cx + 800 * np.cos(a), 800 * np.sin(a), np.full_like(a, 17.0)], -1)
        forward = np.stack([-np.sin(a) * sign, np.cos(a) * sign, np.zeros_like(a)], -1)
        up = np.broadcast_to([0.0, 0.0, 1.0], forward.shape)
        rot[:, :, c] = np.stack([forward, np.cross(up, forward), up], -1)  # columns forward, right, up
    ball = np.zeros((envs, frames, 3), np.float32)
    ball[..., 1] = np.linspace(0.0, 5400.0, frames)
    ball[..., 2] = 93.15
    pads = np.ones((envs, frames, 34), bool)
    pads[:, 60:, 3] = False
    demoed = np.zeros((envs, frames, 2), bool)
    demoed[:, 80:90, 1] = True
    on_ground = ~demoed
    return R.build(
        tick=np.broadcast_to(t * ticks_per_frame, (envs, frames)).copy(), ball_pos=ball,
        ball_vel=np.broadcast_to([0.0, 5400.0 / frames * 15, 0.0], ball.shape), ball_ang_vel=np.zeros_like(ball),
        car_pos=car_pos, car_rot_mat=rot, car_vel=np.zeros_like(car_pos), car_ang_vel=np.zeros_like(car_pos),
        car_boost=np.broadcast_to(np.clip(90 - 0.5 * t, 0, 100)[None, :, None], (envs, frames, 2)),
        car_flags={"is_demoed": demoed, "is_on_ground": on_ground}, pad_active=pads, teams=[0, 1],
        car_presets=["octane", "dominus"])


def frames(replay: R.Replay, start: int, stop: int) -> R.Replay:
    """Frames [start, stop) of a replay."""
    arrays = {f.name: getattr(replay, f.name)[:, start:stop] for f in dataclasses.fields(R.Replay) if f.name != "meta"}
    return R.Replay(meta=replay.meta, **arrays)


def tiny_trainer(run_dir, *overrides: str):
    """A CartPole trainer of 8 envs x 16 steps on CPU (a fraction of a second per update)."""
    cfg = C.load("cartpole", ["run.console=false", "run.tensorboard=false", "run.device=cpu", "env.num_envs=8",
                              "ppo.num_steps=16", "ppo.epochs=2", "ppo.minibatches=2", "ppo.total_steps=1024",
                              "ppo.target_return=none", *overrides])
    return Trainer(cfg, run_dir)
