"""Game-rule parity harness: the real RocketSim and nitro's Arena from identical game states, compared
event by event (touches and ball hit info, bumps and demolitions, pad pickups, goals, respawns).

A scenario is C cars (blue first) with starting states, a ball state and per-tick controls. Each
runs in a fresh RocketSim arena (``rocketsim==2.2.1``, the real meshes, `MemoryWeightMode.LIGHT`, the
soccar pads): cars added in nitro's order (so RocketSim's car id is nitro's index + 1), states set
before the first step. nitro runs every scenario of one car line-up in one `Arena`, set through
`set_car` / `set_ball` on a never-stepped arena, so both start from fresh hidden state. Both are
stepped tick by tick; each records its events with the arena's tick count *before* the tick (the
count RocketSim's callbacks and BallHitInfo see):

- RocketSim: touches from each car's `ball_hit_info.tick_count_when_hit`, bumps and demolitions
  from the bump callback, pickups from the boost pickup callback, goals from the goal callback;
- nitro: the `ArenaEvents` of each one-tick step.

nitro's rules fire from its Bullet contacts between bodies, found and solved as RocketSim's are
(`dynamics_world`), and its wheel rays meet the arena, the ball and the other cars as RocketSim's do
(`vehicle.ray_cast`); tests compare the first events of each kind.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.car_config import CarParams
from nitro.envs.soccar.mutators import MutatorConfig

from .car_harness import STEER, THROTTLE, bt_ulp_nudge, rot_mat_from_angles
from .rocketsim_harness import TICK_RATE, rocketsim

CAR_FIELDS = ("pos", "rot_mat", "vel", "ang_vel", "boost", "is_on_ground", "is_supersonic")
HIT_FIELDS = ("relative_pos_on_ball", "ball_pos", "extra_hit_vel")


@dataclasses.dataclass
class Scenario:
    """One game start: C cars (blue first) and the ball, with per-tick controls (numpy)."""

    family: str
    blue: int
    orange: int
    presets: tuple[str, ...]
    cars: dict[str, np.ndarray]
    """CAR_FIELDS, each [C, ...]."""
    ball: dict[str, np.ndarray]
    """pos, vel, ang_vel [3]."""
    controls: np.ndarray
    """[T, C, 8]."""
    steer_to_ball: bool = False
    """Each tick, every car's steer turns it towards the ball (`steer_towards`), from each simulator's
    own state."""

    @property
    def lineup(self) -> tuple:
        return self.blue, self.orange, self.presets, len(self.controls)


@dataclasses.dataclass
class Events:
    """What happened in one scenario, each a list of tuples, tick = the count before the tick."""

    touches: list = dataclasses.field(default_factory=list)
    """(tick, car, relative_pos_on_ball [3], ball_pos [3], extra_hit_vel [3])."""
    bumps: list = dataclasses.field(default_factory=list)
    """(tick, bumper, victim, is_demo)."""
    pickups: list = dataclasses.field(default_factory=list)
    """(tick, car, pad)."""
    goals: list = dataclasses.field(default_factory=list)
    """(tick, team: 0 blue, 1 orange)."""
    respawns: list = dataclasses.field(default_factory=list)
    """(tick, car): the car was demolished before the tick and is not after it."""
    respawn_pos: list = dataclasses.field(default_factory=list)
    """Each respawned car's position after its respawn tick [3]."""
    scores: tuple = (0, 0)
    """(blue, orange) at the end."""
    contact: list = dataclasses.field(default_factory=list)
    """Per tick, per car: (car_contact_id, car_contact_cooldown_timer, is_demoed, demo_respawn_timer)."""
    ball_vel: list = dataclasses.field(default_factory=list)
    """Per tick: the ball's velocity after it [3]."""
    wheels: list = dataclasses.field(default_factory=list)
    """Per tick, per car: some wheel touches something (the arena, the ball or another car)."""
    wheel_contact: list = dataclasses.field(default_factory=list)
    """Per tick: each car's wheels touching something after it [C, 4] bool."""
    poses: list = dataclasses.field(default_factory=list)
    """Per tick: the cars' positions [C, 3] and rotation matrices (columns forward, right, up)
    [C, 3, 3] at its start, where its wheel rays are cast."""


# --- RocketSim ------------------------------------------------------------------------------------


def _vec(rs, v):
    return rs.Vec(*map(float, v))


def _pad_index(pos) -> int:
    d = np.abs(np.asarray(C.BOOST_PADS, np.float32)[:, :2] - np.asarray(pos, np.float32)[:2]).sum(1)
    return int(np.argmin(d))


def run_rocketsim(s: Scenario, mutators: MutatorConfig | None = None) -> Events:
    rs = rocketsim()
    config = rs.ArenaConfig(memory_weight_mode=rs.MemoryWeightMode.LIGHT)
    arena = rs.Arena(rs.GameMode.SOCCAR, config=config, tick_rate=TICK_RATE)
    if mutators is not None:
        m = arena.get_mutator_config()
        for name in ("demo_mode", "enable_team_demos", "bump_cooldown_time", "respawn_delay", "bump_force_scale",
                     "ball_hit_extra_force_scale", "boost_pad_cooldown_big", "boost_pad_cooldown_small"):
            value = getattr(mutators, name)
            if name == "demo_mode":
                value = {"normal": rs.DemoMode.NORMAL, "on_contact": rs.DemoMode.ON_CONTACT,
                         "disabled": rs.DemoMode.DISABLED}[value]
            setattr(m, name, value)
        arena.set_mutator_config(m)
    events = Events()
    arena.set_car_bump_callback(
        lambda arena, bumper, victim, is_demo, data: events.bumps.append(
            (arena.tick_count, bumper.id - 1, victim.id - 1, bool(is_demo))
        )
    )
    arena.set_boost_pickup_callback(
        lambda arena, car, boost_pad, data: events.pickups.append(
            (arena.tick_count, car.id - 1, _pad_index(boost_pad.get_pos().as_numpy()))
        )
    )
    arena.set_goal_score_callback(lambda arena, team, data: events.goals.append((arena.tick_count, int(team))))
    cars = []
    for i, preset in enumerate(s.presets):
        team = rs.Team.BLUE if i < s.blue else rs.Team.ORANGE
        car = arena.add_car(team, getattr(rs.CarConfig, preset.upper()))
        m = s.cars["rot_mat"][i]
        state = rs.CarState()
        state.pos, state.vel, state.ang_vel = (_vec(rs, s.cars[k][i]) for k in ("pos", "vel", "ang_vel"))
        state.rot_mat = rs.RotMat(_vec(rs, m[:, 0]), _vec(rs, m[:, 1]), _vec(rs, m[:, 2]))
        state.boost = float(s.cars["boost"][i])
        state.is_on_ground = bool(s.cars["is_on_ground"][i])
        state.is_supersonic = bool(s.cars["is_supersonic"][i])
        car.set_state(state)
        cars.append(car)
    arena.ball.set_state(rs.BallState(**{k: _vec(rs, v) for k, v in s.ball.items()}))
    for t in range(len(s.controls)):
        controls = s.controls[t].copy()
        if s.steer_to_ball:
            states = [car.get_state() for car in cars]
            controls[:, STEER] = steer_towards(
                np.stack([st.pos.as_numpy() for st in states]),
                np.stack([np.asarray(st.rot_mat.as_numpy())[0] for st in states]),  # forward: the first row
                arena.ball.get_state().pos.as_numpy(),
            )
        for car, c in zip(cars, controls):
            car.set_controls(rs.CarControls(
                throttle=float(c[0]), steer=float(c[1]), pitch=float(c[2]), yaw=float(c[3]), roll=float(c[4]),
                jump=bool(c[5] > 0.5), boost=bool(c[6] > 0.5), handbrake=bool(c[7] > 0.5),
            ))  # fmt: skip
        tick = arena.tick_count
        states = [car.get_state() for car in cars]
        demoed_before = [state.is_demoed for state in states]
        events.poses.append((np.stack([st.pos.as_numpy() for st in states]),
                             np.stack([np.asarray(st.rot_mat.as_numpy()).T for st in states])))  # fmt: skip
        arena.step(1)
        row = []
        for i, car in enumerate(cars):
            state = car.get_state()
            hit = state.ball_hit_info
            if hit.is_valid and hit.tick_count_when_hit == tick:
                events.touches.append((tick, i, *(np.asarray(getattr(hit, f).as_numpy()) for f in HIT_FIELDS)))
            if demoed_before[i] and not state.is_demoed:
                events.respawns.append((tick, i))
                events.respawn_pos.append(tuple(float(v) for v in state.pos.as_numpy()))
            row.append((state.car_contact_id, state.car_contact_cooldown_timer, state.is_demoed, state.demo_respawn_timer))
        events.contact.append(row)
        events.ball_vel.append(arena.ball.get_state().vel.as_numpy())
        wheels = [list(car.get_state().wheels_with_contact) for car in cars]
        events.wheels.append([any(w) for w in wheels])
        events.wheel_contact.append(np.array(wheels, bool))
    events.scores = (arena.blue_score, arena.orange_score)
    return events


# --- nitro ----------------------------------------------------------------------------------------


def run_nitro(scenarios: list[Scenario], mutators: MutatorConfig | None = None, device: str = "cpu") -> list[Events]:
    """Scenarios of one line-up together in one Arena (one scenario per env)."""
    blue, orange, presets, _ = scenarios[0].lineup
    assert all(s.lineup == scenarios[0].lineup for s in scenarios)
    n, ticks = len(scenarios), len(scenarios[0].controls)
    arena = Arena(
        n, blue=blue, orange=orange, car=list(presets), device=device, mutators=mutators, seed=0,
        mem_weight_mode="light",  # as run_rocketsim's arenas: the broadphase cells order the body solve
    )

    def stack(key, part):
        return torch.from_numpy(np.stack([getattr(s, part)[key] for s in scenarios])).to(device)

    for i in range(blue + orange):
        arena.set_car(i, **{k: stack(k, "cars")[:, i] for k in CAR_FIELDS})
    arena.set_ball(**{k: stack(k, "ball").float() for k in ("pos", "vel", "ang_vel")})
    controls = torch.from_numpy(np.stack([s.controls for s in scenarios])).to(device)  # [n, T, C, 8]
    out = [Events() for _ in scenarios]
    steer = torch.tensor([s.steer_to_ball for s in scenarios])
    for t in range(ticks):
        demoed_before = arena.cars.is_demoed.clone()
        pos, rot_mat = arena.cars.pos.numpy().copy(), arena.cars.rot_mat.numpy().copy()
        now = controls[:, t].clone()
        towards = torch.from_numpy(
            steer_towards(arena.cars.pos.numpy(), arena.cars.rot_mat[..., :, 0].numpy(), arena.ball.pos[:, None].numpy())
        )
        now[..., STEER] = torch.where(steer[:, None], towards, now[..., STEER])
        ev = arena.step(now)
        cars = arena.cars
        touch = ev.ball_touch.nonzero().tolist()
        for e, i in touch:
            out[e].touches.append((t, i, *(getattr(cars, "ball_hit_info_" + f)[e, i].numpy() for f in HIT_FIELDS)))
        for e, i in (ev.demo | ev.bump).nonzero().tolist():
            attacker = int(ev.demoed_by[e, i]) if ev.demo[e, i] else int(ev.bumped_by[e, i])
            out[e].bumps.append((t, attacker, i, bool(ev.demo[e, i])))
        for e, i in ev.boost_pickup.nonzero().tolist():
            out[e].pickups.append((t, i, int(ev.boost_pickup_pad[e, i])))
        for e in (ev.goal_blue | ev.goal_orange).nonzero().flatten().tolist():
            out[e].goals.append((t, 0 if ev.goal_blue[e] else 1))
        for e, i in (demoed_before & ~cars.is_demoed).nonzero().tolist():
            out[e].respawns.append((t, i))
            out[e].respawn_pos.append(tuple(float(v) for v in cars.pos[e, i]))
        rows = torch.stack(
            [cars.car_contact_id.float(), cars.car_contact_cooldown_timer, cars.is_demoed.float(), cars.demo_respawn_timer], -1
        ).numpy()
        wheels = cars.wheels_with_contact.numpy()
        ball_vel = arena.ball.vel.numpy()
        for e in range(n):
            out[e].contact.append([(int(a), b, bool(c), d) for a, b, c, d in rows[e]])
            out[e].ball_vel.append(ball_vel[e])
            out[e].wheels.append(wheels[e].any(-1).tolist())
            out[e].wheel_contact.append(wheels[e].copy())
            out[e].poses.append((pos[e], rot_mat[e]))
    for e in range(n):
        out[e].scores = (int(arena.blue_score[e]), int(arena.orange_score[e]))
    return out


def run_both(scenarios: list[Scenario], mutators: MutatorConfig | None = None) -> list[tuple[Events, Events]]:
    """(RocketSim's, nitro's) events of every scenario, batching nitro by line-up."""
    ours: dict[int, Events] = {}
    groups: dict[tuple, list[int]] = {}
    for i, s in enumerate(scenarios):
        groups.setdefault(s.lineup, []).append(i)
    for rows in groups.values():
        for i, events in zip(rows, run_nitro([scenarios[i] for i in rows], mutators)):
            ours[i] = events
    return [(run_rocketsim(s, mutators), ours[i]) for i, s in enumerate(scenarios)]


def wheels_on_cars(s: Scenario, events: Events) -> np.ndarray:
    """[T] bool: on the tick a car's wheel touched something (``events.wheel_contact``) while its
    suspension ray, cast from the tick's starting pose, crosses another car's hitbox: RocketSim's
    rays hit other cars (btDefaultVehicleRaycaster tests the whole world), and so do nitro's.

    The ray is btVehicleRL::rayCast's (the hard point down the car's up axis for rest + travel +
    radius - 2.5 UU); the box is the car's Bullet box with its margin (`CarHitbox`), which the ray
    test meets."""
    params = CarParams.build(s.presets, torch.device("cpu"))
    conn = params.wheel_connection.numpy().astype(np.float64)  # [C, 4, 3]
    length = (params.suspension_rest_length + C.MAX_SUSPENSION_TRAVEL + params.wheel_radius
              - C.SUSPENSION_SUBTRACTION).numpy()  # [C, 4]  # fmt: skip
    hitbox = params.hitbox
    half = ((hitbox.inner + hitbox.margin[:, None]) * C.BT_TO_UU).numpy().astype(np.float64)  # [C, 3]
    offset = (hitbox.offset * C.BT_TO_UU).numpy().astype(np.float64)
    num_cars = len(s.presets)
    out = np.zeros(len(events.poses), bool)
    for t, ((pos, rot), touching) in enumerate(zip(events.poses, events.wheel_contact)):
        pos, rot = pos.astype(np.float64), rot.astype(np.float64)
        for i in range(num_cars):
            start = pos[i] + conn[i] @ rot[i].T  # [4, 3]
            down = -rot[i][:, 2]
            for j in range(num_cars):
                if j == i:
                    continue
                center = pos[j] + rot[j] @ offset[j]
                o, d = (start - center) @ rot[j], down @ rot[j]  # the box's frame
                with np.errstate(divide="ignore", invalid="ignore"):
                    near, far = (-half[j] - o) / d, (half[j] - o) / d
                lo, hi = np.minimum(near, far), np.maximum(near, far)
                flat = np.abs(d) < 1e-9  # parallel to a slab: inside it or never
                lo = np.where(flat, np.where(np.abs(o) <= half[j], -np.inf, np.inf), lo)
                hi = np.where(flat, np.where(np.abs(o) <= half[j], np.inf, -np.inf), hi)
                enter, leave = lo.max(-1), hi.min(-1)
                crosses = (enter <= leave) & (leave >= 0) & (enter <= length[i])
                out[t] |= bool((crosses & touching[i]).any())
    return out


def nudged(s: Scenario, seed: int = 0) -> Scenario:
    """The scenario with every car's start position moved by one float32 ulp of RocketSim's
    Bullet-unit value, up or down at random: RocketSim against itself at its noise floor."""
    cars = dict(s.cars, pos=bt_ulp_nudge(s.cars["pos"], np.random.default_rng(seed)))
    return dataclasses.replace(s, cars=cars)


def steer_towards(car_pos: np.ndarray, forward: np.ndarray, ball_pos: np.ndarray) -> np.ndarray:
    """Steer [..., C] turning each car towards the ball: 4 x the heading error (rad), clipped to 1."""
    to_ball = ball_pos[..., :2] - car_pos[..., :2]
    error = np.arctan2(to_ball[..., 1], to_ball[..., 0]) - np.arctan2(forward[..., 1], forward[..., 0])
    error = (error + np.pi) % (2 * np.pi) - np.pi
    return np.clip(4.0 * error, -1.0, 1.0).astype(np.float32)  # steer > 0 turns to the right, up x forward: +yaw


# --- Scenario families ----------------------------------------------------------------------------


def _car_states(pos, yaw, speed, boost, vel_z=None, ang_vel=None, pitch=None, roll=None) -> dict[str, np.ndarray]:
    """Car start states [C, ...] from positions, headings and forward speeds."""
    c = len(pos)
    zeros = np.zeros(c)
    rot = rot_mat_from_angles(yaw, zeros if pitch is None else pitch, zeros if roll is None else roll)
    vel = rot[:, :, 0] * np.asarray(speed, np.float64)[:, None]
    if vel_z is not None:
        vel[:, 2] = vel_z
    pos = np.asarray(pos, np.float32)
    return {
        "pos": pos,
        "rot_mat": rot,
        "vel": vel.astype(np.float32),
        "ang_vel": (np.zeros((c, 3)) if ang_vel is None else ang_vel).astype(np.float32),
        "boost": np.asarray(boost, np.float32),
        "is_on_ground": pos[:, 2] < 20,
        "is_supersonic": np.linalg.norm(vel, axis=1) >= C.SUPERSONIC_START_SPEED,
    }


BALL_PARK = {"pos": np.array([4000.0, 5000.0, 1000.0], np.float32), "vel": np.zeros(3, np.float32),
             "ang_vel": np.zeros(3, np.float32)}  # fmt: skip
"""Behind a corner wall, asleep: no car reaches it."""


def pad_runs(rng, n: int, ticks: int) -> list[Scenario]:
    """One car on the floor near a random pad, low on boost, driving with random throttle, steer,
    boost and handbrake changes every 0.25 s: pickups, locks, cooldowns and full-boost skips."""
    out = []
    pads = np.asarray(C.BOOST_PADS, np.float32)
    for _ in range(n):
        pad = pads[rng.integers(len(pads))]
        pos = np.array([[*(pad[:2] + rng.uniform(-400, 400, 2)), 17.03]])
        pos[0, :2] = np.clip(pos[0, :2], [-3800, -4800], [3800, 4800])
        yaw = np.arctan2(pad[1] - pos[0, 1], pad[0] - pos[0, 0]) + rng.uniform(-0.4, 0.4)
        cars = _car_states(pos, [yaw], [rng.uniform(300, 1400)], [rng.choice([0.0, rng.uniform(0, 95), 100.0])])
        controls = np.zeros((ticks, 1, 8), np.float32)
        for start in range(0, ticks, 30):
            controls[start:start + 30, 0, 0] = rng.choice([1.0, 0.6, -0.3])
            controls[start:start + 30, 0, 1] = rng.uniform(-0.7, 0.7)
            controls[start:start + 30, 0, 6] = rng.random() < 0.3
        out.append(Scenario("pads", 1, 0, ("octane",), cars, BALL_PARK, controls))
    return out


def air_hits(rng, n: int, ticks: int) -> list[Scenario]:
    """A car flying at a ball high in the air (no wheels, no body contact before the touch), from
    any side, any orientation and spin, at 300-2300 UU/s; the ball still or moving."""
    out = []
    for _ in range(n):
        ball_pos = np.array([rng.uniform(-2000, 2000), rng.uniform(-3000, 3000), rng.uniform(700, 1300)], np.float32)
        ball_vel = (rng.normal(size=3) * rng.choice([0.0, 600.0])).astype(np.float32)
        direction = rng.normal(size=3)
        direction[2] *= 0.4
        direction /= np.linalg.norm(direction)
        distance, speed = rng.uniform(250, 400), rng.uniform(300, 2000)
        car_pos = (ball_pos - direction * distance)[None]
        aim = ball_pos + rng.uniform(-60, 60, 3) - car_pos[0]  # both fall alike: aim the relative velocity
        vel = ball_vel + aim / np.linalg.norm(aim) * speed
        speed = np.linalg.norm(vel)
        cars = _car_states(car_pos, rng.uniform(-np.pi, np.pi, 1), [0.0], [50.0],
                           ang_vel=rng.normal(size=(1, 3)) * rng.choice([0.0, 2.0]),
                           pitch=rng.uniform(-1.2, 1.2, 1), roll=rng.uniform(-np.pi, np.pi, 1))  # fmt: skip
        cars["vel"] = vel[None].astype(np.float32)
        cars["is_supersonic"] = np.array([speed >= C.SUPERSONIC_START_SPEED])
        ball = {"pos": ball_pos, "vel": ball_vel, "ang_vel": np.zeros(3, np.float32)}
        out.append(Scenario("air hits", 1, 0, ("octane",), cars, ball, np.zeros((ticks, 1, 8), np.float32)))
    return out


def bumps(rng, n: int, ticks: int) -> list[Scenario]:
    """Two cars: a bumper driving (or boosting, 30% already supersonic) at a victim 250-700 UU ahead
    on the ground or in the air, hitting its front, side or back; same or opposite teams."""
    out = []
    for _ in range(n):
        yaw = rng.uniform(-np.pi, np.pi)
        ahead = np.array([np.cos(yaw), np.sin(yaw)])
        distance = rng.uniform(250, 700)
        bumper = np.array([rng.uniform(-1500, 1500), rng.uniform(-2000, 2000), 17.03])
        victim_z = 17.03 if rng.random() < 0.75 else rng.uniform(60, 120)
        victim = np.array([*(bumper[:2] + ahead * distance + rng.uniform(-40, 40, 2)), victim_z])
        supersonic = rng.random() < 0.3
        speed = rng.uniform(2200, 2290) if supersonic else rng.uniform(500, 2100)
        victim_speed = rng.uniform(0, 800) * rng.choice([0.0, 1.0])
        cars = _car_states(np.stack([bumper, victim]), [yaw, rng.uniform(-np.pi, np.pi)], [speed, victim_speed],
                           [100.0, 50.0], vel_z=[0.0, 0.0 if victim_z < 20 else rng.uniform(-100, 200)])  # fmt: skip
        controls = np.zeros((ticks, 2, 8), np.float32)
        controls[:, 0, THROTTLE] = 1.0
        controls[:, 0, 6] = supersonic or rng.random() < 0.3
        controls[:, 1, THROTTLE] = rng.choice([0.0, 1.0])
        same_team = rng.random() < 0.25
        blue, orange = (2, 0) if same_team else (1, 1)
        out.append(Scenario("bumps", blue, orange, ("octane", "octane"), cars, BALL_PARK, controls))
    return out


def demos(rng, n: int, ticks: int) -> list[Scenario]:
    """A supersonic car boosting into a parked opponent 300-600 UU ahead (front, side or back)."""
    out = []
    for _ in range(n):
        yaw = rng.uniform(-np.pi, np.pi)
        bumper = np.array([rng.uniform(-1000, 1000), rng.uniform(-1500, 1500), 17.03])
        victim = np.array([*(bumper[:2] + np.array([np.cos(yaw), np.sin(yaw)]) * rng.uniform(300, 600)), 17.03])
        cars = _car_states(np.stack([bumper, victim]), [yaw, rng.uniform(-np.pi, np.pi)], [2250.0, 0.0], [100.0, 33.0])
        controls = np.zeros((ticks, 2, 8), np.float32)
        controls[:, 0, THROTTLE] = 1.0
        controls[:, 0, 6] = 1.0
        out.append(Scenario("demos", 1, 1, ("octane", "octane"), cars, BALL_PARK, controls))
    return out


def shots(rng, n: int, ticks: int) -> list[Scenario]:
    """The ball thrown at either goal (a car parked in a corner): goal tick, team and the binding's
    score, which counts a goal once however long the ball stays in."""
    out = []
    for _ in range(n):
        side = rng.choice([-1.0, 1.0])
        start = np.array([rng.uniform(-600, 600), side * rng.uniform(3500, 4500), rng.uniform(100, 500)], np.float32)
        target = np.array([rng.uniform(-800, 800), side * 5300, rng.uniform(100, 600)])
        vel = (target - start) / np.linalg.norm(target - start) * rng.uniform(1500, 3000)
        vel[2] += 300
        ball = {"pos": start, "vel": vel.astype(np.float32), "ang_vel": np.zeros(3, np.float32)}
        cars = _car_states(np.array([[-3000.0, 0.0, 17.03]]), [0.0], [0.0], [33.0])
        out.append(Scenario("shots", 1, 0, ("octane",), cars, ball, np.zeros((ticks, 1, 8), np.float32)))
    return out


def kickoffs(blue: int, orange: int, n: int, ticks: int, seed: int) -> list[Scenario]:
    """nitro's `reset_kickoff` spawns (its seeded shuffle), every car driving at the ball at full
    throttle and boost: the first touches of the kickoff."""
    arena = Arena(n, blue=blue, orange=orange, seed=seed)
    arena.reset_kickoff()
    out = []
    controls = np.zeros((ticks, blue + orange, 8), np.float32)
    controls[..., THROTTLE] = 1.0
    controls[..., 6] = 1.0
    for e in range(n):
        cars = {k: getattr(arena.cars, k)[e].numpy().copy() for k in CAR_FIELDS}
        ball = {k: getattr(arena.ball, k)[e].numpy().copy() for k in ("pos", "vel", "ang_vel")}
        spots = tuple(arena.kickoff_spawns[e].tolist())
        out.append(Scenario(f"kickoff {blue}v{orange} {spots}", blue, orange, ("octane",) * (blue + orange),
                            cars, ball, controls, steer_to_ball=True))  # fmt: skip
    return out
