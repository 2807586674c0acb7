"""Car parity harness: the real RocketSim and nitro's cars, started from identical car states.

Every rollout is one car with a scripted control sequence. It runs in a fresh RocketSim arena
(``rocketsim==2.2.1`` on the real soccar meshes, `MemoryWeightMode.LIGHT`, the soccar pads), where the car is added,
its state set before the first step, and the ball parked asleep outside the field (behind a corner
wall, where no car reaches it). nitro runs every rollout of one preset in one `Arena` with the same
states set through `Arena.set_car` on a never-stepped arena, so both start from a fresh car's hidden
state. Both are stepped tick by tick; we record the pose, velocities and flags after every tick.

Scenario families (`FAMILIES`) cover what the cars do on their wheels and in the air: driving,
turning, boosting, powersliding, climbing walls, corners and onto the ceiling, jumps, double jumps,
flips in 8 directions, flip cancels, air control, landings and flights into the walls, with the
drive, jump and landing families spread over every preset. Rotations come from RocketSim's own `Angle.as_rot_mat`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import torch

from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.car_config import PRESETS

from .rocketsim_harness import TICK_RATE, rocketsim

PRESET_NAMES = tuple(PRESETS)  # octane, dominus, plank, breakout, hybrid, merc
# Where each preset rests on the floor (rocketsim.md 2.3, measured), UU: starts on the wheels.
REST_Z = {
    "octane": 17.03,
    "dominus": 17.07,
    "plank": 18.67,
    "breakout": 18.36,
    "hybrid": 17.03,
    "merc": 18.81,
}
BALL_PARK = (4000.0, 5000.0, 1000.0)  # behind the corner wall |x| + |y| = 8064: never reached
FLAGS = ("is_on_ground", "has_jumped", "has_double_jumped", "has_flipped")
THROTTLE, STEER, PITCH, YAW, ROLL, JUMP, BOOST, HANDBRAKE = range(8)


@dataclasses.dataclass
class Rollouts:
    """A batch of one-car rollouts: starting states and per-tick controls (numpy, float32)."""

    family: list[str]
    preset: list[str]
    pos: np.ndarray
    """[n, 3] UU."""
    rot_mat: np.ndarray
    """[n, 3, 3], columns forward, right, up."""
    vel: np.ndarray
    ang_vel: np.ndarray
    boost: np.ndarray
    """[n]."""
    has_world_contact: np.ndarray
    """[n] bool: the body touched the arena on the tick before the start (auto-flip, auto-roll)."""
    world_contact_normal: np.ndarray
    """[n, 3]: that contact's normal."""
    controls: np.ndarray
    """[n, ticks, 8]: throttle, steer, pitch, yaw, roll, jump, boost, handbrake."""

    def __len__(self) -> int:
        return len(self.family)

    @property
    def ticks(self) -> int:
        return self.controls.shape[1]

    @staticmethod
    def concat(parts: list[Rollouts]) -> Rollouts:
        return Rollouts(
            family=[f for p in parts for f in p.family],
            preset=[f for p in parts for f in p.preset],
            **{
                name: np.concatenate([getattr(p, name) for p in parts])
                for name in STATE_FIELDS
            },
        )

    def select(self, idx) -> Rollouts:
        idx = np.asarray(idx)
        return Rollouts(
            family=[self.family[i] for i in idx],
            preset=[self.preset[i] for i in idx],
            **{
                name: getattr(self, name)[idx]
                for name in STATE_FIELDS
            },
        )


STATE_FIELDS = ("pos", "rot_mat", "vel", "ang_vel", "boost", "has_world_contact", "world_contact_normal", "controls")


@dataclasses.dataclass
class CarRecording:
    """States after every tick: pos / vel / ang_vel [n, T, 3], rot_mat [n, T, 3, 3], boost [n, T],
    flags [n, T, 4] (FLAGS order); ``world_contact`` [n, T]: the body touched the arena."""

    pos: np.ndarray
    rot_mat: np.ndarray
    vel: np.ndarray
    ang_vel: np.ndarray
    boost: np.ndarray
    flags: np.ndarray
    world_contact: np.ndarray

    @staticmethod
    def zeros(n: int, ticks: int) -> CarRecording:
        return CarRecording(
            pos=np.zeros((n, ticks, 3), np.float32),
            rot_mat=np.zeros((n, ticks, 3, 3), np.float32),
            vel=np.zeros((n, ticks, 3), np.float32),
            ang_vel=np.zeros((n, ticks, 3), np.float32),
            boost=np.zeros((n, ticks), np.float32),
            flags=np.zeros((n, ticks, len(FLAGS)), bool),
            world_contact=np.zeros((n, ticks), bool),
        )


# --- RocketSim ------------------------------------------------------------------------------------


def rot_mat_from_angles(yaw, pitch, roll) -> np.ndarray:
    """RocketSim's Angle(yaw, pitch, roll).ToRotMat() (setEulerYPR(yaw, -pitch, -roll)), computed in
    float64 and rounded to float32, [n, 3, 3] with columns forward, right, up. numpy only, so every
    machine draws the same starts (both simulators are then given the same matrix)."""
    ci, cj, ch = np.cos(-np.asarray(roll)), np.cos(-np.asarray(pitch)), np.cos(np.asarray(yaw))
    si, sj, sh = np.sin(-np.asarray(roll)), np.sin(-np.asarray(pitch)), np.sin(np.asarray(yaw))
    cc, cs, sc, ss = ci * ch, ci * sh, si * ch, si * sh
    rows = (
        (cj * ch, sj * sc - cs, sj * cc + ss),
        (cj * sh, sj * ss + cc, sj * cs - sc),
        (-sj, cj * si, cj * ci),
    )
    return np.stack([np.stack(r, -1) for r in rows], -2).astype(np.float32)


def _vec(rs, v):
    return rs.Vec(*map(float, v))


def run_rocketsim(rollouts: Rollouts, tick_rate: int = TICK_RATE) -> CarRecording:
    """Each rollout in its own fresh RocketSim arena; record every tick."""
    rs = rocketsim()
    rec = CarRecording.zeros(len(rollouts), rollouts.ticks)
    configs = {name: getattr(rs.CarConfig, name.upper()) for name in PRESET_NAMES}
    for i in range(len(rollouts)):
        config = rs.ArenaConfig(memory_weight_mode=rs.MemoryWeightMode.LIGHT)  # with the soccar pads
        arena = rs.Arena(rs.GameMode.SOCCAR, config=config, tick_rate=tick_rate)
        arena.ball.set_state(rs.BallState(pos=rs.Vec(*BALL_PARK)))
        car = arena.add_car(rs.Team.BLUE, rs.CarConfig(configs[rollouts.preset[i]]))
        m = rollouts.rot_mat[i]
        car.set_state(
            rs.CarState(
                pos=_vec(rs, rollouts.pos[i]),
                rot_mat=rs.RotMat(_vec(rs, m[:, 0]), _vec(rs, m[:, 1]), _vec(rs, m[:, 2])),
                vel=_vec(rs, rollouts.vel[i]),
                ang_vel=_vec(rs, rollouts.ang_vel[i]),
                boost=float(rollouts.boost[i]),
                has_world_contact=bool(rollouts.has_world_contact[i]),
                world_contact_normal=_vec(rs, rollouts.world_contact_normal[i]),
            )
        )
        for k in range(rollouts.ticks):
            c = rollouts.controls[i, k]
            car.set_controls(
                rs.CarControls(
                    throttle=float(c[THROTTLE]),
                    steer=float(c[STEER]),
                    pitch=float(c[PITCH]),
                    yaw=float(c[YAW]),
                    roll=float(c[ROLL]),
                    jump=bool(c[JUMP] > 0.5),
                    boost=bool(c[BOOST] > 0.5),
                    handbrake=bool(c[HANDBRAKE] > 0.5),
                )
            )
            arena.step(1)
            s = car.get_state()
            rec.pos[i, k], rec.vel[i, k], rec.ang_vel[i, k] = (
                s.pos.as_numpy(),
                s.vel.as_numpy(),
                s.ang_vel.as_numpy(),
            )
            rec.rot_mat[i, k] = np.asarray(s.rot_mat.as_numpy()).T
            rec.boost[i, k] = s.boost
            rec.flags[i, k] = [getattr(s, f) for f in FLAGS]
            rec.world_contact[i, k] = s.has_world_contact
    return rec


# --- nitro ----------------------------------------------------------------------------------------


def run_nitro(rollouts: Rollouts, device: str = "cpu", mode: str = "eager") -> CarRecording:
    """The rollouts of each preset together in one nitro Arena (one car per env); every tick recorded."""
    rec = CarRecording.zeros(len(rollouts), rollouts.ticks)
    presets = np.array(rollouts.preset)
    for preset in dict.fromkeys(rollouts.preset):
        rows = np.flatnonzero(presets == preset)
        part = rollouts.select(rows)
        arena = Arena(
            len(rows), blue=1, orange=0, car=preset, device=device, tick_rate=TICK_RATE, mode=mode,
            mem_weight_mode="light",  # as run_rocketsim's arenas
        )
        arena.set_ball(pos=torch.tensor(BALL_PARK, device=device))

        def dev(x):
            return torch.from_numpy(np.ascontiguousarray(x)).to(device)

        arena.set_car(0, **{name: dev(getattr(part, name)) for name in STATE_FIELDS if name != "controls"})
        controls = dev(part.controls)
        recorded = {name: [] for name in ("pos", "rot_mat", "vel", "ang_vel", "boost", "flags", "world_contact")}
        for k in range(rollouts.ticks):
            arena.step(controls[:, k, None].contiguous())
            cars = arena.cars  # cloned below: the fused mode updates the state in place
            values = (cars.pos, cars.rot_mat, cars.vel, cars.ang_vel, cars.boost)
            values += (torch.stack([getattr(cars, f) for f in FLAGS], -1), cars.has_world_contact)
            for name, value in zip(recorded, values):
                recorded[name].append(value[:, 0].clone())
        for name, values in recorded.items():
            getattr(rec, name)[rows] = torch.stack(values, 1).cpu().numpy()
    return rec


# --- Comparing ------------------------------------------------------------------------------------


def rotation_angle_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle of the rotation taking ``a`` to ``b`` [..., 3, 3] -> [...], degrees.

    From the chord, |a - b|_F = 2 sqrt(2) sin(angle / 2), which stays accurate for tiny angles
    (the trace formula loses them in float32 rounding: its floor is about 0.03 degrees).
    """
    chord = np.linalg.norm((a.astype(np.float64) - b.astype(np.float64)).reshape(*a.shape[:-2], 9), axis=-1)
    return np.degrees(2 * np.arcsin(np.clip(chord / (2 * math.sqrt(2)), 0.0, 1.0)))


def errors_at(reference: CarRecording, port: CarRecording, seconds: float, tick_rate: int = TICK_RATE):
    """Errors after ``seconds``: pos (UU), vel (UU/s), ang_vel (rad/s), orientation (deg) [n] each."""
    t = round(seconds * tick_rate) - 1
    out = {
        name: np.linalg.norm(getattr(reference, name)[:, t] - getattr(port, name)[:, t], axis=-1)
        for name in ("pos", "vel", "ang_vel")
    }
    out["rot"] = rotation_angle_deg(reference.rot_mat[:, t], port.rot_mat[:, t])
    return out


def flag_agreement(reference: CarRecording, port: CarRecording, ticks: int | None = None) -> np.ndarray:
    """Fraction of ticks on which each flag agrees, per rollout [n, 4] (FLAGS order)."""
    t = ticks or reference.flags.shape[1]
    return (reference.flags[:, :t] == port.flags[:, :t]).mean(1)


# --- Scenario families ----------------------------------------------------------------------------


def _presets(n, every: bool) -> list[str]:
    """Every preset in turn (drive, jump and landing families), else the Octane."""
    return [PRESET_NAMES[i % len(PRESET_NAMES)] for i in range(n)] if every else ["octane"] * n


def _ground_start(rng, n, presets, half_x=1000.0, half_y=1500.0, speed=(0.0, 0.0)):
    """Cars on the floor near the middle, facing a random direction at a forward speed in ``speed``."""
    yaw = rng.uniform(-math.pi, math.pi, n)
    pos = np.stack(
        [rng.uniform(-half_x, half_x, n), rng.uniform(-half_y, half_y, n), [REST_Z[p] for p in presets]], 1
    )
    rot = rot_mat_from_angles(yaw, np.zeros(n), np.zeros(n))
    vel = rot[:, :, 0] * rng.uniform(*speed, n)[:, None]
    vel[:, 2] = 0.0
    return pos, rot, vel


def _pack(family, presets, pos, rot, vel, controls, ang_vel=None, boost=None, world_contact_normal=None):
    n = len(pos)
    return Rollouts(
        family=[family] * n,
        preset=list(presets),
        pos=pos.astype(np.float32),
        rot_mat=rot.astype(np.float32),
        vel=vel.astype(np.float32),
        ang_vel=(np.zeros((n, 3)) if ang_vel is None else ang_vel).astype(np.float32),
        boost=(np.full(n, 100.0 / 3.0) if boost is None else boost).astype(np.float32),
        has_world_contact=np.full(n, world_contact_normal is not None),
        world_contact_normal=(
            np.zeros((n, 3)) if world_contact_normal is None else world_contact_normal
        ).astype(np.float32),
        controls=controls.astype(np.float32),
    )


def _controls(n, ticks):
    return np.zeros((n, ticks, 8), np.float32)


def drive(throttle: float, name: str):
    def family(rng, n, ticks):
        presets = _presets(n, every=True)
        pos, rot, vel = _ground_start(rng, n, presets, speed=(-400.0, 1400.0))
        c = _controls(n, ticks)
        c[..., THROTTLE] = throttle
        return _pack(name, presets, pos, rot, vel, c)

    return family


def turns(rng, n, ticks):
    """Steering at 0-2000 UU/s, throttle 0, 0.5 or 1."""
    presets = _presets(n, every=False)
    pos, rot, vel = _ground_start(rng, n, presets, speed=(0.0, 2000.0))
    c = _controls(n, ticks)
    c[..., THROTTLE] = rng.choice([0.0, 0.5, 1.0], n)[:, None]
    c[..., STEER] = rng.uniform(-1, 1, n)[:, None]
    return _pack("turns", presets, pos, rot, vel, c)


def boost_to_supersonic(rng, n, ticks):
    presets = _presets(n, every=False)
    pos, rot, vel = _ground_start(rng, n, presets, half_x=600, half_y=800, speed=(1200.0, 1900.0))
    c = _controls(n, ticks)
    c[..., THROTTLE] = 1.0
    c[..., BOOST] = 1.0
    c[..., STEER] = rng.uniform(-0.2, 0.2, n)[:, None]
    return _pack("boost to supersonic", presets, pos, rot, vel, c, boost=rng.uniform(50, 100, n))


def powerslides(rng, n, ticks):
    presets = _presets(n, every=False)
    pos, rot, vel = _ground_start(rng, n, presets, speed=(600.0, 1800.0))
    c = _controls(n, ticks)
    held = rng.integers(40, ticks, n)
    on = np.arange(ticks)[None, :] < held[:, None]
    c[..., HANDBRAKE] = on
    c[..., STEER] = rng.choice([-1.0, 1.0], n)[:, None] * rng.uniform(0.5, 1.0, n)[:, None]
    c[..., THROTTLE] = rng.choice([0.0, 1.0], n)[:, None]
    return _pack("powerslides", presets, pos, rot, vel, c)


def onto_side_wall(rng, n, ticks):
    """Driving into the side wall's curved transition at 800-1800 UU/s, 20-70 degrees off its normal."""
    presets = _presets(n, every=False)
    side = rng.choice([-1.0, 1.0], n)
    off = np.radians(rng.uniform(20, 70, n)) * rng.choice([-1.0, 1.0], n)
    yaw = np.where(side > 0, 0.0, math.pi) + off
    pos = np.stack(
        [side * rng.uniform(3200, 3700, n), rng.uniform(-2000, 2000, n), [REST_Z[p] for p in presets]], 1
    )
    rot = rot_mat_from_angles(yaw, np.zeros(n), np.zeros(n))
    vel = rot[:, :, 0] * rng.uniform(800, 1800, n)[:, None]
    vel[:, 2] = 0
    c = _controls(n, ticks)
    c[..., THROTTLE] = 1.0
    c[..., BOOST] = rng.random(n)[:, None] < 0.3
    return _pack("onto the side wall", presets, pos, rot, vel, c)


def up_a_corner(rng, n, ticks):
    """Driving into a 45-degree corner wall from 400-800 UU away."""
    presets = _presets(n, every=False)
    sx, sy = rng.choice([-1.0, 1.0], n), rng.choice([-1.0, 1.0], n)
    u = rng.uniform(3300, 3700, n)
    wall = np.stack([sx * u, sy * (8064.0 - u)], 1)
    inward = -np.stack([sx, sy], 1) / math.sqrt(2)
    start = wall + inward * rng.uniform(400, 800, n)[:, None]
    yaw = np.arctan2(-inward[:, 1], -inward[:, 0]) + np.radians(rng.uniform(-30, 30, n))
    pos = np.concatenate([start, np.array([REST_Z[p] for p in presets])[:, None]], 1)
    rot = rot_mat_from_angles(yaw, np.zeros(n), np.zeros(n))
    vel = rot[:, :, 0] * rng.uniform(800, 1600, n)[:, None]
    vel[:, 2] = 0
    c = _controls(n, ticks)
    c[..., THROTTLE] = 1.0
    return _pack("up a corner", presets, pos, rot, vel, c)


def onto_ceiling(rng, n, ticks):
    """On a side wall at 1100-1500 UU, driving up over the wall-ceiling curve onto the ceiling."""
    presets = _presets(n, every=False)
    side = rng.choice([-1.0, 1.0], n)
    # On the wall x = side * 4096: up = -side x; forward mostly +z (pitch up 90 deg, tilted along y).
    tilt = np.radians(rng.uniform(-25, 25, n))
    forward = np.stack([np.zeros(n), np.sin(tilt), np.cos(tilt)], 1)
    up = np.stack([-side, np.zeros(n), np.zeros(n)], 1)
    right = np.cross(up, forward)
    rot = np.stack([forward, right, up], 2)
    pos = np.stack(
        [
            side * (4096.0 - np.array([REST_Z[p] for p in presets])),
            rng.uniform(-2500, 2500, n),
            rng.uniform(1100, 1500, n),
        ],
        1,
    )
    vel = forward * rng.uniform(1000, 1600, n)[:, None]
    c = _controls(n, ticks)
    c[..., THROTTLE] = 1.0
    return _pack("onto the ceiling", presets, pos, rot, vel, c)


def jumps(rng, n, ticks):
    """A jump held 1-30 ticks (short and held jumps), from rest or driving."""
    presets = _presets(n, every=True)
    pos, rot, vel = _ground_start(rng, n, presets, speed=(0.0, 1500.0))
    c = _controls(n, ticks)
    held = rng.integers(1, 31, n)
    c[..., JUMP] = np.arange(ticks)[None, :] < held[:, None]
    c[..., THROTTLE] = rng.choice([0.0, 1.0], n)[:, None]
    return _pack("jump / held jump", presets, pos, rot, vel, c)


def _second_press(rng, n, ticks):
    """First jump held 2-12 ticks, a second press 3-40 ticks later held 1-10: (c, second mask)."""
    c = _controls(n, ticks)
    first = rng.integers(2, 13, n)
    start = first + rng.integers(3, 41, n)
    t = np.arange(ticks)[None, :]
    second = (t >= start[:, None]) & (t < (start + rng.integers(1, 11, n))[:, None])
    c[..., JUMP] = (t < first[:, None]) | second
    return c, t >= start[:, None]


def double_jumps(rng, n, ticks):
    presets = _presets(n, every=False)
    pos, rot, vel = _ground_start(rng, n, presets, speed=(0.0, 1500.0))
    c, _ = _second_press(rng, n, ticks)
    c[..., THROTTLE] = rng.choice([0.0, 1.0], n)[:, None]
    return _pack("double jump", presets, pos, rot, vel, c)


FLIP_DIRECTIONS = {  # (pitch, yaw): forward, backward, left, right and the diagonals
    "forward": (-1, 0),
    "backward": (1, 0),
    "left": (0, -1),
    "right": (0, 1),
    "forward-left": (-1, -1),
    "forward-right": (-1, 1),
    "backward-left": (1, -1),
    "backward-right": (1, 1),
}


def flips(rng, n, ticks):
    """A jump, then a flip in one of 8 directions (stick held from the second press on, for
    10-100 ticks; roll sometimes stands in for yaw)."""
    presets = _presets(n, every=False)
    pos, rot, vel = _ground_start(rng, n, presets, speed=(0.0, 1500.0))
    c, after = _second_press(rng, n, ticks)
    names = list(FLIP_DIRECTIONS)
    pitch, yaw = np.array([FLIP_DIRECTIONS[names[i % 8]] for i in range(n)], np.float32).T
    use_roll = rng.random(n) < 0.25
    stick = after & (np.arange(ticks)[None, :] < (np.argmax(after, 1) + rng.integers(10, 101, n))[:, None])
    c[..., PITCH] = stick * pitch[:, None]
    c[..., YAW] = stick * np.where(use_roll, 0, yaw)[:, None]
    c[..., ROLL] = stick * np.where(use_roll, yaw, 0)[:, None]
    c[..., THROTTLE] = rng.choice([0.0, 1.0], n)[:, None]
    return _pack("flips (8 directions)", presets, pos, rot, vel, c)


def flip_cancels(rng, n, ticks):
    """A forward (or diagonal forward) flip, then the stick pulled back 2-20 ticks later."""
    presets = _presets(n, every=False)
    pos, rot, vel = _ground_start(rng, n, presets, speed=(0.0, 1500.0))
    c, after = _second_press(rng, n, ticks)
    start = np.argmax(after, 1)
    t = np.arange(ticks)[None, :]
    cancel = start + rng.integers(2, 21, n)
    c[..., PITCH] = np.where(t < cancel[:, None], -1.0 * after, rng.uniform(0.5, 1.0, n)[:, None])
    c[..., YAW] = after * rng.choice([-1.0, 0.0, 0.0, 1.0], n)[:, None] * (t < cancel[:, None])
    return _pack("flip cancel", presets, pos, rot, vel, c)


def air_control(rng, n, ticks):
    """High in the air, any orientation, random pitch / yaw / roll / throttle inputs changed every
    15 ticks."""
    presets = _presets(n, every=False)
    pos = np.stack([rng.uniform(-2500, 2500, n), rng.uniform(-3000, 3000, n), rng.uniform(800, 1300, n)], 1)
    rot = rot_mat_from_angles(
        rng.uniform(-math.pi, math.pi, n), rng.uniform(-1.4, 1.4, n), rng.uniform(-math.pi, math.pi, n)
    )
    vel = np.stack([rng.uniform(-600, 600, n), rng.uniform(-600, 600, n), rng.uniform(-200, 400, n)], 1)
    ang_vel = rng.normal(size=(n, 3)) * 1.5
    c = _controls(n, ticks)
    segments = rng.uniform(-1, 1, (n, (ticks + 14) // 15, 4))
    segments[rng.random(segments.shape) < 0.3] = 0.0
    seg = np.repeat(segments, 15, axis=1)[:, :ticks]
    c[..., PITCH], c[..., YAW], c[..., ROLL], c[..., THROTTLE] = np.moveaxis(seg, -1, 0)
    return _pack("air pitch/yaw/roll", presets, pos, rot, vel, c, ang_vel=ang_vel)


def landings(rng, n, ticks):
    """Falling onto the floor on the wheels: 60-300 UU up, tilted up to 12 degrees, 0-500 UU/s down."""
    presets = _presets(n, every=True)
    pos = np.stack([rng.uniform(-1500, 1500, n), rng.uniform(-2000, 2000, n), rng.uniform(60, 300, n)], 1)
    tilt = np.radians(12)
    rot = rot_mat_from_angles(
        rng.uniform(-math.pi, math.pi, n), rng.uniform(-tilt, tilt, n), rng.uniform(-tilt, tilt, n)
    )
    vel = np.stack([rng.uniform(-800, 800, n), rng.uniform(-800, 800, n), rng.uniform(-500, 0, n)], 1)
    ang_vel = rng.normal(size=(n, 3)) * 0.5
    c = _controls(n, ticks)
    c[..., THROTTLE] = rng.choice([0.0, 1.0], n)[:, None]
    c[..., STEER] = rng.uniform(-1, 1, n)[:, None] * (rng.random(n) < 0.5)[:, None]
    return _pack("landings on wheels", presets, pos, rot, vel, c, ang_vel=ang_vel)


def landings_any_orientation(rng, n, ticks):
    """Falling onto the floor from 150-400 UU in any orientation, spinning: roof, side and nose
    landings (the car body against the arena)."""
    presets = _presets(n, every=True)
    pos = np.stack([rng.uniform(-1500, 1500, n), rng.uniform(-2000, 2000, n), rng.uniform(150, 400, n)], 1)
    rot = rot_mat_from_angles(
        rng.uniform(-math.pi, math.pi, n), rng.uniform(-1.5, 1.5, n), rng.uniform(-math.pi, math.pi, n)
    )
    vel = np.stack([rng.uniform(-800, 800, n), rng.uniform(-800, 800, n), rng.uniform(-600, 0, n)], 1)
    ang_vel = rng.normal(size=(n, 3)) * 2.0
    c = _controls(n, ticks)
    c[..., THROTTLE] = rng.choice([0.0, 1.0], n)[:, None]
    return _pack("landings, any orientation", presets, pos, rot, vel, c, ang_vel=ang_vel)


def into_walls(rng, n, ticks):
    """Flying into a wall in any orientation, spinning, 150-300 UU from it at 500-1500 UU/s: a side
    wall (a plane), a back wall beside the goal, a corner and the goal mouth (meshes), on either side
    of the field. The body hits, bounces and falls (the car body against the arena)."""
    presets = _presets(n, every=True)
    target = np.arange(n) % 4
    sx, sy = rng.choice([-1.0, 1.0], n), rng.choice([-1.0, 1.0], n)
    speed = rng.uniform(500, 1500, n)
    gap = rng.uniform(150, 300, n)
    side = np.stack([4096 - gap, rng.uniform(-3000, 3000, n), rng.uniform(300, 1400, n)], 1)
    back = np.stack([rng.uniform(1300, 2800, n), 5120 - gap, rng.uniform(300, 1400, n)], 1)
    corner_xy = 8064 - gap * math.sqrt(2) - 3800
    corner = np.stack([3800 - rng.uniform(0, 200, n), corner_xy, rng.uniform(300, 1000, n)], 1)
    goal = np.stack([rng.uniform(-1100, 1100, n), 5120 - gap, rng.uniform(100, 700, n)], 1)
    pos = np.choose(target[:, None], [side, back, corner, goal])
    toward = np.choose(
        target[:, None], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.7071, 0.7071, 0.0], [0.0, 1.0, 0.0]]
    )
    vel = toward * speed[:, None] + rng.uniform(-300, 300, (n, 3)) * (1 - np.abs(toward))
    flip = np.stack([sx, sy, np.ones(n)], 1)
    pos, vel = pos * flip, vel * flip
    rot = rot_mat_from_angles(
        rng.uniform(-math.pi, math.pi, n), rng.uniform(-1.5, 1.5, n), rng.uniform(-math.pi, math.pi, n)
    )
    ang_vel = rng.normal(size=(n, 3)) * 2.0
    return _pack("into the walls", presets, pos, rot, vel, _controls(n, ticks), ang_vel=ang_vel)

def auto_flip(rng, n, ticks):
    """Upside down (|roll| > 2.8 rad) just above the floor after a roof contact, jump pressed: the
    auto-flip pushes the car off and rolls it over (RocketSim's worldContact is set in the start
    state, so the body need not touch on the first tick)."""
    presets = _presets(n, every=False)
    pos = np.stack([rng.uniform(-1500, 1500, n), rng.uniform(-2000, 2000, n), rng.uniform(50, 70, n)], 1)
    roll = rng.choice([-1.0, 1.0], n) * rng.uniform(2.85, math.pi, n)
    rot = rot_mat_from_angles(rng.uniform(-math.pi, math.pi, n), rng.uniform(-0.2, 0.2, n), roll)
    vel = np.zeros((n, 3))
    c = _controls(n, ticks)
    c[..., JUMP] = np.arange(ticks)[None, :] < rng.integers(1, 20, n)[:, None]
    c[..., THROTTLE] = rng.choice([0.0, 1.0], n)[:, None]
    up = np.tile([0.0, 0.0, 1.0], (n, 1))
    return _pack("auto-flip", presets, pos, rot, vel, c, world_contact_normal=up)


FAMILIES: dict[str, Callable[[np.random.Generator, int, int], Rollouts]] = {
    "drive, throttle 1": drive(1.0, "drive, throttle 1"),
    "drive, throttle -1": drive(-1.0, "drive, throttle -1"),
    "drive, throttle 0": drive(0.0, "drive, throttle 0"),
    "turns": turns,
    "boost to supersonic": boost_to_supersonic,
    "powerslides": powerslides,
    "onto the side wall": onto_side_wall,
    "up a corner": up_a_corner,
    "onto the ceiling": onto_ceiling,
    "jump / held jump": jumps,
    "double jump": double_jumps,
    "flips (8 directions)": flips,
    "flip cancel": flip_cancels,
    "air pitch/yaw/roll": air_control,
    "landings on wheels": landings,
    "landings, any orientation": landings_any_orientation,
    "auto-flip": auto_flip,
    "into the walls": into_walls,
}
PER_PRESET = (
    "drive, throttle 1",
    "drive, throttle -1",
    "drive, throttle 0",
    "jump / held jump",
    "landings on wheels",
    "landings, any orientation",
)


def make_rollouts(per_family: int, ticks: int, seed: int = 0, families: list[str] | None = None) -> Rollouts:
    """``per_family`` rollouts of every family (FAMILIES order), ``ticks`` long, reproducible from ``seed``."""
    parts = []
    for k, name in enumerate(FAMILIES):
        if families is None or name in families:
            parts.append(FAMILIES[name](np.random.default_rng([seed, k]), per_family, ticks))
    return Rollouts.concat(parts)


def nudged(rollouts: Rollouts, seed: int = 0) -> Rollouts:
    """The rollouts with every start coordinate moved by one float32 ulp of RocketSim's internal
    Bullet-unit value (UU x 0.02), up or down at random: the smallest change RocketSim sees."""
    return dataclasses.replace(rollouts, pos=bt_ulp_nudge(rollouts.pos, np.random.default_rng(seed)))


def bt_ulp_nudge(pos: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``pos`` (UU) with every coordinate moved by one float32 ulp of its Bullet-unit value (UU x
    0.02), up or down at random, float32."""
    bt = (pos * np.float32(0.02)).astype(np.float32)
    up = rng.random(bt.shape) < 0.5
    target = np.where(up, np.nextafter(bt, np.float32(np.inf)), np.nextafter(bt, np.float32(-np.inf)))
    out = (target * np.float32(50)).astype(np.float32)
    for _ in range(8):  # step the UU value until UU * 0.02 lands on the moved BT value
        got = (out * np.float32(0.02)).astype(np.float32)
        out = np.where(got < target, np.nextafter(out, np.float32(np.inf)), out)
        out = np.where(got > target, np.nextafter(out, np.float32(-np.inf)), out)
    return out.astype(np.float32)
