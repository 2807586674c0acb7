"""Body-contact parity harness: the real RocketSim and nitro from identical scenes of a ball and cars.

A scene is the ball's state and K cars' states with scripted controls. It runs in a fresh RocketSim
arena (``rocketsim==2.2.1``, `MemoryWeightMode.HEAVY`, RocketSim's default, no boost pads), where the
cars are added in slot order (blue first) and every state is set before the first step; nitro runs
every scene of one car line-up in one `Arena` set through `set_ball` / `set_car`. Both run with their
game rules on the contacts (RocketSim's default mutators): `Ball::_OnHit`'s extra impulse, bumps and
demolitions, which nitro's tick fires from its Bullet contacts as RocketSim's callbacks do. RocketSim's
bump callback records the scenes that had a bump or demolition (``bumped``). Every tick the ball and
the cars are recorded, with each side's `ball_hit_info` (the tick of each car's last touch and where
on the ball).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from nitro.envs.soccar import car_car
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena import Arena

from .car_harness import BOOST, PRESET_NAMES, REST_Z, THROTTLE, _vec, bt_ulp_nudge, rot_mat_from_angles
from .rocketsim_harness import TICK_RATE, rocketsim

BALL_REST = 93.15  # UU: a fresh ball on the floor


@dataclasses.dataclass
class Scenes:
    """n scenes of a ball and K cars (numpy, float32): starting states and per-tick controls."""

    family: list[str]
    presets: tuple[str, ...]
    """The K cars' presets, blue first (the same line-up in every scene)."""
    ball_pos: np.ndarray
    """[n, 3] UU."""
    ball_vel: np.ndarray
    ball_ang_vel: np.ndarray
    pos: np.ndarray
    """[n, K, 3] UU."""
    rot_mat: np.ndarray
    """[n, K, 3, 3], columns forward, right, up."""
    vel: np.ndarray
    ang_vel: np.ndarray
    controls: np.ndarray
    """[n, K, ticks, 8]."""

    def __len__(self) -> int:
        return len(self.family)

    @property
    def ticks(self) -> int:
        return self.controls.shape[2]

    @staticmethod
    def concat(parts: list[Scenes]) -> Scenes:
        """Scenes of one line-up, joined."""
        assert len({p.presets for p in parts}) == 1, "one line-up per Arena"
        arrays = {f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in dataclasses.fields(Scenes) if f.name not in ("family", "presets")}
        return Scenes(family=[f for p in parts for f in p.family], presets=parts[0].presets, **arrays)


@dataclasses.dataclass
class SceneRecording:
    """States after every tick: the ball [n, T, 3] and the cars [n, K, T, ...]; ``touch_tick`` [n, K, T]:
    the tick of each car's last ball touch (-1 before one), ``touch_pos`` [n, K, T, 3] its relative
    position on the ball (RocketSim's ball_hit_info)."""

    ball_pos: np.ndarray
    ball_vel: np.ndarray
    ball_ang_vel: np.ndarray
    pos: np.ndarray
    rot_mat: np.ndarray
    vel: np.ndarray
    ang_vel: np.ndarray
    touch_tick: np.ndarray
    touch_pos: np.ndarray
    bumped: np.ndarray
    """[n] bool: a bump happened (RocketSim's bump callback; nitro records none)."""
    car_contact: np.ndarray
    """[n, T] bool: two cars held contact points (nitro only)."""
    wheel_contact: np.ndarray
    """[n, K, T, 4] bool: each wheel's suspension ray hit something."""

    @staticmethod
    def zeros(n: int, k: int, ticks: int) -> SceneRecording:
        z = lambda *shape: np.zeros(shape, np.float32)
        return SceneRecording(
            ball_pos=z(n, ticks, 3), ball_vel=z(n, ticks, 3), ball_ang_vel=z(n, ticks, 3),
            pos=z(n, k, ticks, 3), rot_mat=z(n, k, ticks, 3, 3), vel=z(n, k, ticks, 3), ang_vel=z(n, k, ticks, 3),
            touch_tick=np.full((n, k, ticks), -1, np.int64), touch_pos=z(n, k, ticks, 3), bumped=np.zeros(n, bool),
            car_contact=np.zeros((n, ticks), bool),
            wheel_contact=np.zeros((n, k, ticks, 4), bool),
        )


def run_rocketsim(scenes: Scenes) -> SceneRecording:
    """Each scene in its own fresh RocketSim arena."""
    rs = rocketsim()
    k = len(scenes.presets)
    rec = SceneRecording.zeros(len(scenes), k, scenes.ticks)
    for i in range(len(scenes)):
        arena = rs.Arena(rs.GameMode.SOCCAR, config=rs.ArenaConfig(custom_boost_pads=[]), tick_rate=TICK_RATE)
        def bump(arena, bumper, victim, is_demo, data, i=i):
            rec.bumped[i] = True

        arena.set_car_bump_callback(bump)
        arena.ball.set_state(
            rs.BallState(
                pos=_vec(rs, scenes.ball_pos[i]), vel=_vec(rs, scenes.ball_vel[i]), ang_vel=_vec(rs, scenes.ball_ang_vel[i])
            )
        )
        cars = []
        for j, preset in enumerate(scenes.presets):
            team = rs.Team.BLUE if j < (k + 1) // 2 else rs.Team.ORANGE
            car = arena.add_car(team, rs.CarConfig(getattr(rs.CarConfig, preset.upper())))
            m = scenes.rot_mat[i, j]
            car.set_state(
                rs.CarState(
                    pos=_vec(rs, scenes.pos[i, j]),
                    rot_mat=rs.RotMat(_vec(rs, m[:, 0]), _vec(rs, m[:, 1]), _vec(rs, m[:, 2])),
                    vel=_vec(rs, scenes.vel[i, j]),
                    ang_vel=_vec(rs, scenes.ang_vel[i, j]),
                    boost=100.0,
                )
            )
            cars.append(car)
        for t in range(scenes.ticks):
            for j, car in enumerate(cars):
                c = scenes.controls[i, j, t]
                car.set_controls(
                    rs.CarControls(
                        throttle=float(c[0]), steer=float(c[1]), pitch=float(c[2]), yaw=float(c[3]),
                        roll=float(c[4]), jump=bool(c[5] > 0.5), boost=bool(c[6] > 0.5), handbrake=bool(c[7] > 0.5),
                    )
                )
            arena.step(1)
            b = arena.ball.get_state()
            rec.ball_pos[i, t], rec.ball_vel[i, t], rec.ball_ang_vel[i, t] = (
                b.pos.as_numpy(), b.vel.as_numpy(), b.ang_vel.as_numpy()
            )
            for j, car in enumerate(cars):
                s = car.get_state()
                rec.pos[i, j, t], rec.vel[i, j, t], rec.ang_vel[i, j, t] = (
                    s.pos.as_numpy(), s.vel.as_numpy(), s.ang_vel.as_numpy()
                )
                rec.rot_mat[i, j, t] = np.asarray(s.rot_mat.as_numpy()).T
                rec.wheel_contact[i, j, t] = list(s.wheels_with_contact)
                hit = s.ball_hit_info
                if hit.is_valid:
                    rec.touch_tick[i, j, t] = hit.tick_count_when_hit
                    rec.touch_pos[i, j, t] = hit.relative_pos_on_ball.as_numpy()
    return rec


def run_nitro(scenes: Scenes, device: str = "cpu") -> SceneRecording:
    """All scenes in one nitro Arena; the touches are its cars' ball hit info."""
    k = len(scenes.presets)
    blue = (k + 1) // 2
    rec = SceneRecording.zeros(len(scenes), k, scenes.ticks)
    arena = Arena(len(scenes), blue=blue, orange=k - blue, car=list(scenes.presets), device=device, tick_rate=TICK_RATE)
    dev = lambda x: torch.from_numpy(np.ascontiguousarray(x)).to(device)
    arena.set_ball(pos=dev(scenes.ball_pos), vel=dev(scenes.ball_vel), ang_vel=dev(scenes.ball_ang_vel))
    for j in range(k):
        arena.set_car(
            j, pos=dev(scenes.pos[:, j]), rot_mat=dev(scenes.rot_mat[:, j]), vel=dev(scenes.vel[:, j]),
            ang_vel=dev(scenes.ang_vel[:, j]), boost=torch.full((len(scenes),), 100.0, device=device),
        )
    controls = dev(scenes.controls)
    world = arena.world
    for t in range(scenes.ticks):
        if k > 1:  # the tick's car-car contacts, at the tick-start transforms
            s = arena.state
            pairs = car_car.car_car_contacts(s.cars.pos * C.UU_TO_BT_F32, s.cars.rot_mat, world.cars.hitbox.flat(s.cars.pos.shape[:2]))
            rec.car_contact[:, t] = (pairs.count > 0).any(1).cpu().numpy()
        arena.step(controls[:, :, t].contiguous())
        b, cars = arena.ball, arena.cars
        rec.ball_pos[:, t], rec.ball_vel[:, t], rec.ball_ang_vel[:, t] = (
            b.pos.cpu().numpy(), b.vel.cpu().numpy(), b.ang_vel.cpu().numpy()
        )
        rec.pos[:, :, t], rec.vel[:, :, t] = cars.pos.cpu().numpy(), cars.vel.cpu().numpy()
        rec.ang_vel[:, :, t], rec.rot_mat[:, :, t] = cars.ang_vel.cpu().numpy(), cars.rot_mat.cpu().numpy()
        rec.wheel_contact[:, :, t] = cars.wheels_with_contact.cpu().numpy()
        valid = cars.ball_hit_info_is_valid.cpu().numpy()
        rec.touch_tick[:, :, t] = np.where(valid, cars.ball_hit_info_tick_count_when_hit.cpu().numpy(), -1)
        rec.touch_pos[:, :, t] = np.where(valid[..., None], cars.ball_hit_info_relative_pos_on_ball.cpu().numpy(), 0.0)
    return rec


# --- Scene families ---------------------------------------------------------------------------------


def _controls(n, k, ticks):
    return np.zeros((n, k, ticks, 8), np.float32)


def _ground_car(rng, n, preset, target, distance, speed):
    """Cars on the floor ``distance`` from ``target`` [n, 2], facing it (within 15 degrees) at ``speed``."""
    away = rng.uniform(-math.pi, math.pi, n)
    xy = target + np.stack([np.cos(away), np.sin(away)], 1) * distance[:, None]
    yaw = away + math.pi + np.radians(rng.uniform(-15, 15, n))
    pos = np.concatenate([xy, np.full((n, 1), REST_Z[preset])], 1)
    rot = rot_mat_from_angles(yaw, np.zeros(n), np.zeros(n))
    vel = rot[:, :, 0] * speed[:, None]
    vel[:, 2] = 0.0
    return pos, rot, vel


def car_into_ball_on_ground(rng, n, ticks, preset="octane"):
    """A car driving (throttle 1, a third boosting) into a ball at rest (asleep) or rolling, from
    250-700 UU at 500-1800 UU/s."""
    ball_pos = np.stack([rng.uniform(-2000, 2000, n), rng.uniform(-3000, 3000, n), np.full(n, BALL_REST)], 1)
    ball_vel = np.zeros((n, 3))
    rolling = rng.random(n) < 0.5
    ball_vel[rolling, :2] = rng.uniform(-500, 500, (rolling.sum(), 2))
    pos, rot, vel = _ground_car(rng, n, preset, ball_pos[:, :2], rng.uniform(250, 700, n), rng.uniform(500, 1800, n))
    c = _controls(n, 1, ticks)
    c[:, 0, :, THROTTLE] = 1.0
    c[:, 0, :, BOOST] = (rng.random(n) < 0.33)[:, None]
    return _pack("car into the ball on the ground", (preset,), ball_pos, ball_vel, pos[:, None], rot[:, None], vel[:, None], c)


def car_into_ball_in_air(rng, n, ticks, preset="octane"):
    """A car in any orientation with the ball on its roof's side, spinning, flying at a ball in the
    air from 200-450 UU: body hits on any face, edge or corner but the underside (where the wheels'
    suspension rays would meet the ball: they come with the vehicle's rays against bodies)."""
    ball_pos = np.stack([rng.uniform(-2000, 2000, n), rng.uniform(-3000, 3000, n), rng.uniform(300, 1200, n)], 1)
    ball_vel = rng.uniform(-400, 400, (n, 3))
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    pos = ball_pos + direction * rng.uniform(200, 450, n)[:, None]
    pos[:, 2] = np.maximum(pos[:, 2], 120.0)
    toward = ball_pos - pos
    toward /= np.linalg.norm(toward, axis=1, keepdims=True)
    vel = toward * rng.uniform(600, 1600, n)[:, None] + rng.uniform(-150, 150, (n, 3))
    rot = rot_mat_from_angles(rng.uniform(-math.pi, math.pi, n), rng.uniform(-1.5, 1.5, n), rng.uniform(-math.pi, math.pi, n))
    under = np.einsum("ni,ni->n", rot[:, :, 2], toward) < 0.3
    rot[under, :, 1:] *= -1  # turned over about its forward axis: the roof faces the ball
    ang_vel = rng.normal(size=(n, 3)) * 0.5
    return _pack(
        "car into the ball in the air", (preset,), ball_pos, ball_vel, pos[:, None], rot[:, None], vel[:, None],
        _controls(n, 1, ticks), ang_vel=ang_vel[:, None],
    )


def ball_onto_car(rng, n, ticks, preset="octane"):
    """A ball falling onto a car at rest or creeping forward (a dribble's first touches), from 100-300
    UU above its roof, a little off its centre: it bounces on the roof, the hood or the trunk."""
    pos = np.stack([rng.uniform(-2000, 2000, n), rng.uniform(-3000, 3000, n), np.full(n, REST_Z[preset])], 1)
    rot = rot_mat_from_angles(rng.uniform(-math.pi, math.pi, n), np.zeros(n), np.zeros(n))
    vel = rot[:, :, 0] * rng.uniform(0, 150, n)[:, None]
    vel[:, 2] = 0.0
    along = rot[:, :, 0] * rng.uniform(-60, 60, n)[:, None] + rot[:, :, 1] * rng.uniform(-30, 30, n)[:, None]
    ball_pos = pos + along + np.array([0.0, 0.0, 160.0]) + np.array([0.0, 0.0, 1.0]) * rng.uniform(0, 200, n)[:, None]
    ball_vel = np.concatenate([rng.uniform(-100, 100, (n, 2)), rng.uniform(-300, 0, (n, 1))], 1)
    c = _controls(n, 1, ticks)
    return _pack("the ball onto a car", (preset,), ball_pos, ball_vel, pos[:, None], rot[:, None], vel[:, None], c)


def cars_side_by_side(rng, n, ticks, presets=("octane", "octane")):
    """Two cars on the floor side by side, nearly parallel, driving (throttle 0.5-1) and sliding into
    each other sideways at 100-700 UU/s: door-to-door contacts, the cars pushing and rolling apart."""
    center = np.stack([rng.uniform(-2000, 2000, n), rng.uniform(-3000, 3000, n)], 1)
    yaw = rng.uniform(-math.pi, math.pi, n)
    forward = np.stack([np.cos(yaw), np.sin(yaw)], 1)
    side = np.stack([-np.sin(yaw), np.cos(yaw)], 1)
    gap = rng.uniform(95, 160, n)[:, None] / 2
    shift = rng.uniform(-25, 25, (n, 2))
    xy = np.stack([center - side * gap + forward * shift[:, :1], center + side * gap + forward * shift[:, 1:]], 1)
    pos = np.concatenate([xy, np.array([[REST_Z[p] for p in presets]] * n)[..., None]], 2)
    turn = np.radians(rng.uniform(-8, 8, (n, 2)))
    rot = rot_mat_from_angles(yaw[:, None] + turn, np.zeros((n, 2)), np.zeros((n, 2)))
    speed = rng.uniform(0, 1500, n)[:, None, None]
    slide = rng.uniform(100, 700, (n, 2))[..., None]
    vel2 = forward[:, None] * speed + np.stack([side, -side], 1) * slide
    vel = np.concatenate([vel2, np.zeros((n, 2, 1))], 2)
    c = _controls(n, 2, ticks)
    c[..., THROTTLE] = rng.uniform(0.5, 1.0, (n, 2))[..., None]
    ball_pos = np.stack([np.full(n, 4000.0), np.full(n, 5000.0), np.full(n, 1000.0)], 1)  # parked out of reach
    return _pack("cars side by side", presets, ball_pos, np.zeros((n, 3)), pos, rot, vel, c)


def cars_in_the_air(rng, n, ticks, presets=("octane", "octane")):
    """Two cars with their roofs toward each other and their noses away, spinning, flying into each
    other over the field: corner, edge and face contacts of their upper halves (their wheels'
    suspension rays, which would meet the other car, come with the vehicle's rays against bodies, and
    bumper hits with the bump rules)."""
    mid = np.stack([rng.uniform(-2000, 2000, n), rng.uniform(-3000, 3000, n), rng.uniform(300, 1200, n)], 1)
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    gap = rng.uniform(80, 200, n)[:, None]
    pos = np.stack([mid - direction * gap, mid + direction * gap], 1)
    speed = rng.uniform(300, 1200, (n, 2))
    vel = np.stack([direction * speed[:, :1], -direction * speed[:, 1:]], 1) + rng.uniform(-100, 100, (n, 2, 3))
    toward = np.stack([direction, -direction], 1)  # [n, 2, 3]: from each car to the other
    rot = _roof_toward(rng, toward, max_angle=math.radians(45))
    c = _controls(n, 2, ticks)
    ball_pos = np.stack([np.full(n, 4000.0), np.full(n, 5000.0), np.full(n, 1000.0)], 1)
    return _pack(
        "cars in the air", presets, ball_pos, np.zeros((n, 3)), pos, rot, vel, c, ang_vel=rng.normal(size=(n, 2, 3)) * 0.5
    )


def _roof_toward(rng, toward, max_angle):
    """Rotations [..., 3, 3] whose up axis lies within ``max_angle`` of ``toward`` [..., 3] (unit),
    turned about it at random but with the nose away from it: the wheels and the front bumper (where
    RocketSim's bumps start) face away."""
    shape = toward.shape[:-1]
    tilt = rng.uniform(0, max_angle, shape)
    spin = rng.uniform(-math.pi, math.pi, shape)
    helper = np.where(np.abs(toward[..., :1]) < 0.9, [1.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    e1 = np.cross(toward, helper)
    e1 /= np.linalg.norm(e1, axis=-1, keepdims=True)
    e2 = np.cross(toward, e1)
    side = e1 * np.cos(spin)[..., None] + e2 * np.sin(spin)[..., None]
    up = toward * np.cos(tilt)[..., None] + side * np.sin(tilt)[..., None]
    helper = np.where(np.abs(up[..., 2:]) < 0.9, [0.0, 0.0, 1.0], [1.0, 0.0, 0.0])
    forward = np.cross(helper, up)
    forward /= np.linalg.norm(forward, axis=-1, keepdims=True)
    turn = rng.uniform(-math.pi, math.pi, shape)[..., None]
    forward = forward * np.cos(turn) + np.cross(up, forward) * np.sin(turn)
    forward = np.where((forward * toward).sum(-1, keepdims=True) > 0, -forward, forward)  # the bumper away
    right = np.cross(up, forward)
    return np.stack([forward, right, up], -1)


def _pack(family, presets, ball_pos, ball_vel, pos, rot, vel, controls, ang_vel=None, ball_ang_vel=None):
    n = len(ball_pos)
    f = lambda x: np.asarray(x, np.float32)
    return Scenes(
        family=[family] * n,
        presets=tuple(presets),
        ball_pos=f(ball_pos),
        ball_vel=f(ball_vel),
        ball_ang_vel=f(np.zeros((n, 3)) if ball_ang_vel is None else ball_ang_vel),
        pos=f(pos),
        rot_mat=f(rot),
        vel=f(vel),
        ang_vel=f(np.zeros(pos.shape) if ang_vel is None else ang_vel),
        controls=f(controls),
    )


CAR_BALL_FAMILIES = {
    "car into the ball on the ground": car_into_ball_on_ground,
    "car into the ball in the air": car_into_ball_in_air,
    "the ball onto a car": ball_onto_car,
}
CAR_CAR_FAMILIES = {
    "cars side by side": cars_side_by_side,
    "cars in the air": cars_in_the_air,
}


def make_scenes(family: str, n: int, ticks: int, seed: int = 0, presets=None) -> Scenes:
    """``n`` scenes of one family, reproducible from ``seed``."""
    make = {**CAR_BALL_FAMILIES, **CAR_CAR_FAMILIES}[family]
    rng = np.random.default_rng([seed, sorted({**CAR_BALL_FAMILIES, **CAR_CAR_FAMILIES}).index(family)])
    return make(rng, n, ticks) if presets is None else make(rng, n, ticks, presets)


def nudged(scenes: Scenes, seed: int = 0) -> Scenes:
    """The scenes with every car's start position moved by one float32 ulp of RocketSim's internal
    Bullet-unit value, up or down at random: the smallest change RocketSim sees (its noise floor)."""
    return dataclasses.replace(scenes, pos=bt_ulp_nudge(scenes.pos, np.random.default_rng(seed)))


def wheels_on_bodies(reference: SceneRecording, port: SceneRecording) -> np.ndarray:
    """[n] bool: somewhere in the scene a RocketSim wheel touched while nitro's did not on the same
    tick. nitro's rays meet the ball and the other cars as RocketSim's do (`vehicle.ray_cast`); where
    they part, it is on a body, within the ray cast's rounding (btSubsimplexConvexCast's 0.5 UU)."""
    return (reference.wheel_contact & ~port.wheel_contact).any((1, 2, 3))


def errors_after(reference: SceneRecording, port: SceneRecording, seconds: float) -> dict[str, np.ndarray]:
    """Position errors after ``seconds``: the ball [n] and the cars [n, K], UU."""
    t = round(seconds * TICK_RATE) - 1
    return {
        "ball": np.linalg.norm(reference.ball_pos[:, t] - port.ball_pos[:, t], axis=-1),
        "cars": np.linalg.norm(reference.pos[:, :, t] - port.pos[:, :, t], axis=-1),
    }


__all__ = ["PRESET_NAMES", "SceneRecording", "Scenes", "errors_after", "make_scenes", "nudged", "run_nitro", "run_rocketsim", "wheels_on_bodies"]
