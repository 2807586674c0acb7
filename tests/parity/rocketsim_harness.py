"""Parity harness: the real RocketSim and nitro's soccar port, started from identical ball states.

Each throw starts in a fresh RocketSim arena (``rocketsim==2.2.1`` on the real soccar meshes), so
its hidden state is the zeroed state of a new arena, which `Arena.set_ball` reproduces in nitro.
Both simulators are stepped tick by tick with identical inputs; we record position, velocity and
angular velocity after every tick, and the first tick on which each reports a goal (RocketSim's own
goal callback). `compare` turns two recordings into per-quantity errors over time.

Scenario families (`FAMILIES`) aim throws at every part of the arena: free flight; the floor, side
walls, back walls, corners, curved transitions, ceiling, goal posts and crossbar; into the net;
rolling; coming to rest. A family's generator draws throws from a seeded numpy Generator.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.arena_mesh import find_soccar_meshes

TICK_RATE = 120
R = C.BALL_COLLISION_RADIUS_SOCCAR
GOAL_HALF_WIDTH = 892.755  # RLBot wiki "Useful game values" (RocketSim's IsBallProbablyGoingIn)
GOAL_HEIGHT = 642.775
CORNER_PLANE = 8064.0  # |x| + |y| of the 45-degree corner walls


@dataclasses.dataclass
class Throws:
    """A batch of initial ball states, UU / UU/s / rad/s, numpy float32 [n, 3] each."""

    family: list[str]
    pos: np.ndarray
    vel: np.ndarray
    ang_vel: np.ndarray

    def __len__(self) -> int:
        return len(self.family)

    @staticmethod
    def concat(parts: list[Throws]) -> Throws:
        return Throws(
            family=[f for p in parts for f in p.family],
            pos=np.concatenate([p.pos for p in parts]),
            vel=np.concatenate([p.vel for p in parts]),
            ang_vel=np.concatenate([p.ang_vel for p in parts]),
        )

    def select(self, idx) -> Throws:
        idx = np.asarray(idx)
        return Throws([self.family[i] for i in idx], self.pos[idx], self.vel[idx], self.ang_vel[idx])


@dataclasses.dataclass
class Recording:
    """Ball states after every tick: pos / vel / ang_vel [n, ticks, 3]; goal_tick [n] (-1: none).

    ``goal_tick`` is the arena tick count just after the first tick on which the ball was scored.
    """

    pos: np.ndarray
    vel: np.ndarray
    ang_vel: np.ndarray
    goal_tick: np.ndarray


# --- RocketSim ------------------------------------------------------------------------------------

_ROCKETSIM = None


def rocketsim():
    """The RocketSim module, initialised once per process on the real soccar meshes."""
    global _ROCKETSIM
    if _ROCKETSIM is None:
        import RocketSim as rs

        try:
            rs.init(str(find_soccar_meshes().parent))  # must precede the first Arena of the process
        except RuntimeError as error:  # this module imported twice under two names: already done
            if "Already inited" not in str(error):
                raise
        _ROCKETSIM = rs
    return _ROCKETSIM


def _first_goal_recorder(first: list[int]):
    """A RocketSim goal callback keeping the arena tick count after the first scoring tick."""

    def record(arena, team, data):
        if not first:
            first.append(arena.tick_count + 1)  # the callback runs before tickCount++

    return record


def run_rocketsim(throws: Throws, ticks: int, tick_rate: int = TICK_RATE) -> Recording:
    """Step each throw in its own fresh RocketSim arena; record every tick."""
    rs = rocketsim()
    n = len(throws)
    out = np.zeros((3, n, ticks, 3), np.float32)
    goal_tick = np.full(n, -1, np.int64)
    for i in range(n):
        arena = rs.Arena(rs.GameMode.SOCCAR, tick_rate=tick_rate)
        first: list[int] = []
        arena.set_goal_score_callback(_first_goal_recorder(first))
        state = rs.BallState()
        state.pos, state.vel, state.ang_vel = (
            rs.Vec(*map(float, v)) for v in (throws.pos[i], throws.vel[i], throws.ang_vel[i])
        )
        arena.ball.set_state(state)
        rows = out[:, i]
        for t in range(ticks):
            arena.step(1)
            b = arena.ball.get_state()
            rows[0, t] = (b.pos.x, b.pos.y, b.pos.z)
            rows[1, t] = (b.vel.x, b.vel.y, b.vel.z)
            rows[2, t] = (b.ang_vel.x, b.ang_vel.y, b.ang_vel.z)
        goal_tick[i] = first[0] if first else -1
    return Recording(pos=out[0], vel=out[1], ang_vel=out[2], goal_tick=goal_tick)


# --- nitro ----------------------------------------------------------------------------------------


def run_nitro(
    throws: Throws, ticks: int, tick_rate: int = TICK_RATE, device: str = "cpu", mode: str = "eager"
) -> Recording:
    """Step all throws together in one ball-only nitro Arena (`Arena` ``mode``); record every tick."""
    n = len(throws)
    arena = Arena(n, blue=0, orange=0, device=device, tick_rate=tick_rate, mode=mode)
    arena.set_ball(
        pos=torch.from_numpy(throws.pos).to(device),
        vel=torch.from_numpy(throws.vel).to(device),
        ang_vel=torch.from_numpy(throws.ang_vel).to(device),
    )
    pos, vel, ang = (torch.zeros(n, ticks, 3, device=device) for _ in range(3))
    goal_tick = torch.full((n,), -1, dtype=torch.int64, device=device)
    for t in range(ticks):
        events = arena.step()
        pos[:, t], vel[:, t], ang[:, t] = arena.ball.pos, arena.ball.vel, arena.ball.ang_vel
        goal_tick = torch.where((goal_tick < 0) & (events.goal_tick >= 0), events.goal_tick, goal_tick)
    return Recording(
        pos=pos.cpu().numpy(),
        vel=vel.cpu().numpy(),
        ang_vel=ang.cpu().numpy(),
        goal_tick=goal_tick.cpu().numpy(),
    )


# --- Comparing ------------------------------------------------------------------------------------


def errors_at(
    reference: Recording, port: Recording, seconds: float, tick_rate: int = TICK_RATE
) -> dict[str, np.ndarray]:
    """Euclidean error of pos (UU), vel (UU/s), ang_vel (rad/s) after ``seconds`` of simulation [n]."""
    t = int(round(seconds * tick_rate)) - 1
    return {
        name: np.linalg.norm(getattr(reference, name)[:, t] - getattr(port, name)[:, t], axis=-1)
        for name in ("pos", "vel", "ang_vel")
    }


def max_error_until(
    reference: Recording, port: Recording, seconds: float, tick_rate: int = TICK_RATE
) -> dict[str, np.ndarray]:
    """Largest error over the first ``seconds`` [n]."""
    t = int(round(seconds * tick_rate))
    return {
        name: np.linalg.norm(getattr(reference, name)[:, :t] - getattr(port, name)[:, :t], axis=-1).max(1)
        for name in ("pos", "vel", "ang_vel")
    }


# --- Scenario families ----------------------------------------------------------------------------


def _uniform(rng, lo, hi, n):
    return rng.uniform(lo, hi, size=(n,) + np.shape(lo)).astype(np.float32)


def _spin(rng, n, scale=3.0):
    return (rng.normal(size=(n, 3)) * scale / math.sqrt(3)).astype(np.float32)


def _aim(rng, start, target, speed_lo, speed_hi):
    """Velocities from ``start`` toward ``target`` [n, 3] at a random speed, ballistic-corrected.

    The vertical component is raised so the ball would reach the target height under gravity.
    """
    delta = target - start
    dist = np.linalg.norm(delta, axis=1)
    speed = rng.uniform(speed_lo, speed_hi, size=len(start))
    flight = dist / speed
    vel = delta / flight[:, None]
    vel[:, 2] += 0.5 * -C.GRAVITY_Z * flight
    return vel.astype(np.float32)


def _pack(family, pos, vel, spin):
    return Throws(
        [family] * len(pos), pos.astype(np.float32), vel.astype(np.float32), spin.astype(np.float32)
    )


def free_flight(rng, n):
    """Mid-air, tossed gently upward: no surface within 2 s (z stays in ~[270, 1280], |x| < 3100,
    |y| < 4100)."""
    pos = np.stack([rng.uniform(-2500, 2500, n), rng.uniform(-3500, 3500, n), rng.uniform(600, 900, n)], 1)
    vel = np.stack([rng.uniform(-300, 300, n), rng.uniform(-300, 300, n), rng.uniform(500, 700, n)], 1)
    return _pack("free flight", pos, vel, _spin(rng, n))


def floor(rng, n):
    pos = np.stack([rng.uniform(-3000, 3000, n), rng.uniform(-4000, 4000, n), rng.uniform(150, 1500, n)], 1)
    vel = np.stack([rng.uniform(-800, 800, n), rng.uniform(-800, 800, n), rng.uniform(-2500, 0, n)], 1)
    return _pack("floor", pos, vel, _spin(rng, n))


def side_walls(rng, n):
    side = rng.choice([-1.0, 1.0], n)
    start = np.stack(
        [side * rng.uniform(1500, 3000, n), rng.uniform(-3000, 3000, n), rng.uniform(200, 1200, n)], 1
    )
    target = np.stack([side * 4096.0, start[:, 1] + rng.uniform(-500, 500, n), rng.uniform(500, 1500, n)], 1)
    return _pack("side walls", start, _aim(rng, start, target, 1000, 3000), _spin(rng, n))


def back_walls(rng, n):
    side = rng.choice([-1.0, 1.0], n)
    # outside the goal mouth: beside it, or above the crossbar
    beside = rng.random(n) < 0.5
    x = np.where(beside, rng.choice([-1.0, 1.0], n) * rng.uniform(1300, 2800, n), rng.uniform(-800, 800, n))
    z = np.where(beside, rng.uniform(200, 1400, n), rng.uniform(900, 1500, n))
    start = np.stack([x * 0.8, side * rng.uniform(2500, 4000, n), rng.uniform(200, 1000, n)], 1)
    target = np.stack([x, side * 5120.0, z], 1)
    return _pack("back walls", start, _aim(rng, start, target, 1000, 3000), _spin(rng, n))


def corners(rng, n):
    sx, sy = rng.choice([-1.0, 1.0], n), rng.choice([-1.0, 1.0], n)
    u = rng.uniform(3100, 3900, n)  # |x| on the corner wall, |x| + |y| = 8064
    target = np.stack([sx * u, sy * (CORNER_PLANE - u), rng.uniform(200, 1500, n)], 1)
    start = np.stack(
        [sx * rng.uniform(500, 2500, n), sy * rng.uniform(1000, 3000, n), rng.uniform(200, 1000, n)], 1
    )
    return _pack("corners", start, _aim(rng, start, target, 1200, 3000), _spin(rng, n))


def curved_transitions(rng, n):
    """Into the fillets: side wall-floor (rolling in fast or aimed low), side wall-ceiling, and the
    back wall-floor curve beside the goals."""
    kind = np.arange(n) % 4
    side = rng.choice([-1.0, 1.0], n)
    start = np.stack(
        [side * rng.uniform(2000, 3300, n), rng.uniform(-3000, 3000, n), rng.uniform(150, 600, n)], 1
    )
    target = np.stack(
        [side * rng.uniform(3950, 4096, n), start[:, 1] + rng.uniform(-400, 400, n), rng.uniform(0, 250, n)],
        1,
    )
    roll = kind == 1  # rolling fast along the floor into the side-wall fillet
    start[roll, 2] = R + 1.0
    target[roll, 2] = R
    high = kind == 2  # up high, into the wall-ceiling fillet (meshes 8, 9, 14, 15 span |y| < 3840)
    start[high, 1] = rng.uniform(-3000, 3000, high.sum())
    start[high, 2] = rng.uniform(1200, 1700, high.sum())
    target[high, 1] = start[high, 1] + rng.uniform(-300, 300, high.sum())
    target[high, 2] = rng.uniform(1950, 2048, high.sum())
    back = kind == 3  # toward the floor curve under the back wall, beside the goal mouth
    yside = rng.choice([-1.0, 1.0], back.sum())
    xb = rng.choice([-1.0, 1.0], back.sum()) * rng.uniform(1200, 2800, back.sum())
    start[back] = np.stack(
        [xb * 0.9, yside * rng.uniform(3000, 4200, back.sum()), np.full(back.sum(), R + 1.0)], 1
    )
    target[back] = np.stack([xb, yside * 5120.0, np.full(back.sum(), R)], 1)
    vel = _aim(rng, start, target, 1200, 2600)
    vel[roll | back, 2] = 0.0
    return _pack("curved transitions", start, vel, _spin(rng, n))


def ceiling(rng, n):
    pos = np.stack([rng.uniform(-3000, 3000, n), rng.uniform(-4000, 4000, n), rng.uniform(600, 1500, n)], 1)
    vel = np.stack([rng.uniform(-600, 600, n), rng.uniform(-600, 600, n), rng.uniform(1400, 2500, n)], 1)
    return _pack("ceiling", pos, vel, _spin(rng, n))


def posts_and_crossbar(rng, n):
    side = rng.choice([-1.0, 1.0], n)
    post = rng.random(n) < 0.6
    x = np.where(
        post,
        rng.choice([-1.0, 1.0], n) * (GOAL_HALF_WIDTH + rng.uniform(-120, 120, n)),
        rng.uniform(-800, 800, n),
    )
    z = np.where(post, rng.uniform(100, 600, n), GOAL_HEIGHT + rng.uniform(-120, 120, n))
    target = np.stack([x, side * 5120.0, z], 1)
    start = np.stack(
        [x * rng.uniform(0.3, 1.0, n), side * rng.uniform(2500, 4200, n), rng.uniform(150, 800, n)], 1
    )
    return _pack("goal posts and crossbar", start, _aim(rng, start, target, 1000, 3000), _spin(rng, n))


def into_the_net(rng, n):
    side = rng.choice([-1.0, 1.0], n)
    target = np.stack(
        [rng.uniform(-700, 700, n), side * rng.uniform(5300, 5900, n), rng.uniform(100, 500, n)], 1
    )
    start = np.stack(
        [rng.uniform(-1500, 1500, n), side * rng.uniform(2500, 4500, n), rng.uniform(100, 800, n)], 1
    )
    return _pack("into the net", start, _aim(rng, start, target, 1000, 3500), _spin(rng, n))


def rolling(rng, n):
    pos = np.stack([rng.uniform(-3000, 3000, n), rng.uniform(-3500, 3500, n), np.full(n, C.BALL_REST_Z)], 1)
    speed, heading = rng.uniform(200, 2000, n), rng.uniform(0, 2 * math.pi, n)
    vel = np.stack([speed * np.cos(heading), speed * np.sin(heading), np.zeros(n)], 1)
    return _pack("rolling", pos, vel, _spin(rng, n, 6.0))


def coming_to_rest(rng, n):
    pos = np.stack([rng.uniform(-2500, 2500, n), rng.uniform(-3500, 3500, n), rng.uniform(93.2, 300, n)], 1)
    speed, heading = rng.uniform(5, 150, n), rng.uniform(0, 2 * math.pi, n)
    vel = np.stack([speed * np.cos(heading), speed * np.sin(heading), rng.uniform(-200, 0, n)], 1)
    return _pack("coming to rest", pos, vel, _spin(rng, n, 1.0))


FAMILIES: dict[str, Callable[[np.random.Generator, int], Throws]] = {
    "free flight": free_flight,
    "floor": floor,
    "side walls": side_walls,
    "back walls": back_walls,
    "corners": corners,
    "curved transitions": curved_transitions,
    "ceiling": ceiling,
    "goal posts and crossbar": posts_and_crossbar,
    "into the net": into_the_net,
    "rolling": rolling,
    "coming to rest": coming_to_rest,
}


def make_throws(per_family: int, seed: int = 0, families: list[str] | None = None) -> Throws:
    """``per_family`` throws of every family (in FAMILIES order), reproducible from ``seed``."""
    parts = []
    for k, name in enumerate(families or list(FAMILIES)):
        rng = np.random.default_rng([seed, k])
        parts.append(FAMILIES[name](rng, per_family))
    return Throws.concat(parts)
