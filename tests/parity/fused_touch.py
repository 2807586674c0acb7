"""The fused tick's contacts between bodies (`car_contacts.solve_bodies`: the car-ball and car-car rows
solved alone, each body's arena rows starting from their deltas) against the reference tick
(`dynamics_world`: Bullet's joint solve of every row) and the real RocketSim, on touch scenes.

The fused kernel equals its PyTorch twin `stand_in_tick` under Triton's interpreter (`tests/envs/
soccar/kernels/test_game.py`), so the twin stands for it here, on the CPU. Scenes: `body_harness`'s
families (a car into a ball at rest or rolling, into a ball in the air, the ball onto a car, cars
side by side and in the air) and kickoffs (1v1, 2v2: every car full throttle and boost).

    python -m tests.parity.fused_touch [--per-family 24] [--kickoffs 16] [--rocketsim]

prints median / p95 / max of the errors, as docs/FIDELITY.md reports them.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from nitro.core import tree
from nitro.envs.soccar.arena import Arena, tick
from tests.envs.soccar.kernels.stand_in_tick import stand_in_tick

from .body_harness import (
    CAR_BALL_FAMILIES,
    CAR_CAR_FAMILIES,
    TICK_RATE,
    SceneRecording,
    Scenes,
    make_scenes,
    run_nitro,
)

AFTER_TOUCH = 6
"""Ticks after the reference's first touch at which the ball is compared (0.05 s: the solve and the
extra hit impulse have acted, the flight has not yet carried the difference far)."""


def run_stand_in(scenes: Scenes) -> SceneRecording:
    """`body_harness.run_nitro` with the fused kernel's tick (`stand_in_tick`)."""
    k = len(scenes.presets)
    blue = (k + 1) // 2
    rec = SceneRecording.zeros(len(scenes), k, scenes.ticks)
    arena = Arena(len(scenes), blue=blue, orange=k - blue, car=list(scenes.presets), tick_rate=TICK_RATE)
    t_ = lambda x: torch.from_numpy(np.ascontiguousarray(x))
    arena.set_ball(pos=t_(scenes.ball_pos), vel=t_(scenes.ball_vel), ang_vel=t_(scenes.ball_ang_vel))
    for j in range(k):
        arena.set_car(
            j, pos=t_(scenes.pos[:, j]), rot_mat=t_(scenes.rot_mat[:, j]), vel=t_(scenes.vel[:, j]),
            ang_vel=t_(scenes.ang_vel[:, j]), boost=torch.full((len(scenes),), 100.0),
        )  # fmt: skip
    state, controls = arena.state, t_(scenes.controls)
    for t in range(scenes.ticks):
        state, _ = stand_in_tick(state, controls[:, :, t].contiguous(), arena.world)
        b, cars = state.ball, state.cars
        rec.ball_pos[:, t], rec.ball_vel[:, t], rec.ball_ang_vel[:, t] = b.pos.numpy(), b.vel.numpy(), b.ang_vel.numpy()
        rec.pos[:, :, t], rec.vel[:, :, t] = cars.pos.numpy(), cars.vel.numpy()
        valid = cars.ball_hit_info_is_valid.numpy()
        rec.touch_tick[:, :, t] = np.where(valid, cars.ball_hit_info_tick_count_when_hit.numpy(), -1)
    return rec


def first_touch(rec: SceneRecording) -> np.ndarray:
    """[n] the first tick on which any car's touch is recorded (-1: none)."""
    touched = (rec.touch_tick >= 0).any(1)  # [n, T]
    return np.where(touched.any(1), touched.argmax(1), -1)


def touch_errors(reference: SceneRecording, port: SceneRecording, seconds: float = 1.0) -> dict[str, np.ndarray]:
    """The errors of ``port`` against ``reference``: the ball's velocity (UU/s) and position (UU)
    `AFTER_TOUCH` ticks after the reference's first touch (scenes with one), and after ``seconds``
    the ball's velocity and position and the cars' positions."""
    t = round(seconds * TICK_RATE) - 1
    first = first_touch(reference)
    some = first >= 0
    at = np.minimum(first[some] + AFTER_TOUCH, reference.ball_pos.shape[1] - 1)
    rows = np.flatnonzero(some)
    norm = lambda a, b: np.linalg.norm(a - b, axis=-1)
    return {
        "ball vel after touch": norm(reference.ball_vel[rows, at], port.ball_vel[rows, at]),
        "ball pos after touch": norm(reference.ball_pos[rows, at], port.ball_pos[rows, at]),
        "ball vel at 1 s": norm(reference.ball_vel[:, t], port.ball_vel[:, t]),
        "ball pos at 1 s": norm(reference.ball_pos[:, t], port.ball_pos[:, t]),
        "car pos at 1 s": norm(reference.pos[:, :, t], port.pos[:, :, t]).reshape(-1),
    }


def kickoffs(n: int, blue: int, seconds: float, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` kickoffs of ``blue`` v ``blue`` (every car full throttle and boost, RocketSim's spawns
    from ``seed``) stepped by the reference tick and by the fused twin: `touch_errors`, the time of
    the comparison ``seconds`` after the kickoff."""
    arena = Arena(n, blue=blue, orange=blue, seed=seed, tick_rate=TICK_RATE)
    arena.reset_kickoff()
    controls = torch.zeros(n, 2 * blue, 8)
    controls[..., 0] = 1.0
    controls[..., 6] = 1.0
    ticks = round(seconds * TICK_RATE)
    recs = []
    for step in (tick, stand_in_tick):
        rec = SceneRecording.zeros(n, 2 * blue, ticks)
        state = tree.clone(arena.state)
        for t in range(ticks):
            state, _ = step(state, controls, arena.world)
            rec.ball_pos[:, t], rec.ball_vel[:, t] = state.ball.pos.numpy(), state.ball.vel.numpy()
            rec.pos[:, :, t] = state.cars.pos.numpy()
            valid = state.cars.ball_hit_info_is_valid.numpy()
            rec.touch_tick[:, :, t] = np.where(valid, state.cars.ball_hit_info_tick_count_when_hit.numpy(), -1)
        recs.append(rec)
    return touch_errors(*recs, seconds=seconds)


def scene_errors(family: str, n: int, seed: int = 0, rocketsim: bool = False) -> dict[str, dict[str, np.ndarray]]:
    """``n`` scenes of one `body_harness` family over 1 s: the fused twin's `touch_errors` against the
    reference tick (and against RocketSim, and the reference's own, with ``rocketsim``)."""
    scenes = make_scenes(family, n, TICK_RATE, seed)
    reference, fused = run_nitro(scenes), run_stand_in(scenes)
    out = {"fused vs reference": touch_errors(reference, fused)}
    if rocketsim:
        from .body_harness import run_rocketsim

        real = run_rocketsim(scenes)
        out["fused vs RocketSim"] = touch_errors(real, fused)
        out["reference vs RocketSim"] = touch_errors(real, reference)
    return out


def summary(errors: np.ndarray) -> str:
    if errors.size == 0:
        return "-"
    return f"{np.median(errors):.3g} / {np.percentile(errors, 95):.3g} / {errors.max():.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-family", type=int, default=24)
    parser.add_argument("--kickoffs", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rocketsim", action="store_true")
    args = parser.parse_args()
    rows = []
    for family in (*CAR_BALL_FAMILIES, *CAR_CAR_FAMILIES):
        for comparison, errors in scene_errors(family, args.per_family, args.seed, args.rocketsim).items():
            rows.append((family, comparison, errors))
    for blue in (1, 2):
        rows.append((f"kickoff {blue}v{blue}", "fused vs reference", kickoffs(args.kickoffs, blue, 3.0, args.seed)))
    names = list(rows[0][2])
    print("| scenes | comparison | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for family, comparison, errors in rows:
        print(f"| {family} | {comparison} | " + " | ".join(summary(errors[name]) for name in names) + " |")


if __name__ == "__main__":
    main()
