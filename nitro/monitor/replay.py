"""The soccar replay file: chosen envs of a batch, one frame per recorded step, in one ``.npz``.

A replay holds E envs x F frames x C cars (C may be 0: ball-only arenas). Every array is named and
typed below; ``meta`` (a JSON string inside the file) holds the tick rate, the cars' teams and
hitboxes, the boost pads and where the replay came from. Positions are UU, velocities UU/s, angular
velocities rad/s, in RocketSim's world frame (z up, blue goal at -y). Car orientations are unit
quaternions (x, y, z, w) of RocketSim's rotation matrix (columns forward, right, up).

Events per frame: ``goal`` (1 blue scored, 2 orange scored, on the first frame of a run of frames
with the ball in a goal, ``ball_scored``), ``touch`` and ``demo`` per car, ``boost_pickup`` per car
(pad index or -1). Where the recorder was not handed the arena's events they are derived from the
states: the ball in a goal from its position (RocketSim's IsBallScored), demos from ``is_demoed``
turning on, pickups from a pad turning off (given to the nearest car); touches cannot be derived and
stay false. Derived events are derived again when chunks of a recording are joined (`concat`), so
a run that spans two chunks counts once.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.ball import is_ball_scored
from nitro.envs.soccar.mutators import MutatorConfig, TickParams
from nitro.monitor.cars import car_preset

FORMAT = "nitro-replay"
VERSION = 1
CAR_FLAGS = ("is_on_ground", "has_jumped", "has_double_jumped", "has_flipped", "is_jumping", "is_flipping",
             "is_supersonic", "is_demoed", "is_boosting")
"""Bit i of ``car_flags`` is CAR_FLAGS[i] (a flag the simulator does not have yet stays 0)."""
TEAM_BLUE, TEAM_ORANGE = 0, 1
EVENTS = ("goal", "touch", "demo", "boost_pickup")
"""The events `build` takes from the arena; ``goal`` may be any per-frame marking of scoring frames."""


@dataclasses.dataclass
class Replay:
    """E envs x F frames of soccar, on the host (numpy)."""

    tick: np.ndarray
    """Arena tick count of each frame [E, F] int64."""
    episode_start: np.ndarray
    """The frame begins an episode (the state was reset just before it) [E, F] bool."""
    ball_pos: np.ndarray
    """[E, F, 3] float32."""
    ball_vel: np.ndarray
    """[E, F, 3] float32."""
    ball_ang_vel: np.ndarray
    """[E, F, 3] float32."""
    car_pos: np.ndarray
    """[E, F, C, 3] float32."""
    car_quat: np.ndarray
    """Orientation as a unit quaternion (x, y, z, w) [E, F, C, 4] float32."""
    car_vel: np.ndarray
    """[E, F, C, 3] float32."""
    car_ang_vel: np.ndarray
    """[E, F, C, 3] float32."""
    car_boost: np.ndarray
    """Boost amount 0-100 [E, F, C] float32."""
    car_flags: np.ndarray
    """Bit field of CAR_FLAGS [E, F, C] uint16."""
    pad_active: np.ndarray
    """[E, F, 34] bool, pads in RocketSim's order (meta pad_positions)."""
    ball_scored: np.ndarray
    """The ball is in a goal on this frame [E, F] bool."""
    goal: np.ndarray
    """0 none, 1 blue scored, 2 orange scored [E, F] int8."""
    touch: np.ndarray
    """[E, F, C] bool."""
    demo: np.ndarray
    """The car was demolished on this frame [E, F, C] bool."""
    boost_pickup: np.ndarray
    """Pad picked up on this frame, or -1 [E, F, C] int8."""
    meta: dict
    """tick_rate, env_ids, teams [C], car_presets [C], hitbox_size / hitbox_offset [C][3],
    pad_positions [34][3], pad_is_big [34], derived_events (names), info (source: run, update, env)."""

    @property
    def num_envs(self) -> int:
        return self.tick.shape[0]

    @property
    def num_frames(self) -> int:
        return self.tick.shape[1]

    @property
    def num_cars(self) -> int:
        return self.car_pos.shape[2]

    def flag(self, name: str) -> np.ndarray:
        """One of CAR_FLAGS as a bool array [E, F, C]."""
        return (self.car_flags >> CAR_FLAGS.index(name)) & 1 == 1

    def flags_at(self, env: int, frame: int, car: int) -> dict[str, bool]:
        """Every CAR_FLAGS entry of one car on one frame."""
        bits = int(self.car_flags[env, frame, car])
        return {name: bool(bits >> i & 1) for i, name in enumerate(CAR_FLAGS)}

    def rot_mat(self) -> np.ndarray:
        """Car rotation matrices [E, F, C, 3, 3], columns forward, right, up."""
        return quat_to_rot_mat(self.car_quat)

    def save(self, path: str | Path) -> Path:
        """Write a compressed ``.npz`` (a ``.npz`` suffix is added if missing)."""
        path = Path(path)
        if not path.name.endswith(".npz"):
            path = path.with_name(path.name + ".npz")
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "meta"}
        meta = {"format": FORMAT, "version": VERSION, "car_flags": list(CAR_FLAGS), **self.meta}
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez_compressed(tmp, meta=np.array(json.dumps(meta)), **arrays)
        tmp.replace(path)
        return path


_DTYPES = {"tick": np.int64, "episode_start": np.bool_, "car_flags": np.uint16, "pad_active": np.bool_,
           "ball_scored": np.bool_, "goal": np.int8, "touch": np.bool_, "demo": np.bool_, "boost_pickup": np.int8}


def load(path: str | Path) -> Replay:
    """Read a replay written by `Replay.save`, checking its format, version and array shapes."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no replay at {path}")
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (ValueError, OSError) as e:
        raise ValueError(f"{path} is not a nitro replay (.npz): {e}") from None
    if "meta" not in data:
        raise ValueError(f"{path} is not a nitro replay: it has no meta entry")
    meta = json.loads(str(data.pop("meta")))
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise ValueError(f"{path}: format {meta.get('format')!r} version {meta.get('version')!r}; this nitro "
                         f"reads {FORMAT!r} version {VERSION}")
    names = [f.name for f in dataclasses.fields(Replay) if f.name != "meta"]
    missing = sorted(set(names) - set(data))
    if missing:
        raise ValueError(f"{path}: replay lacks arrays {missing}")
    replay = Replay(meta=meta, **{k: data[k] for k in names})
    check(replay)
    return replay


def check(r: Replay) -> None:
    """Raise if the arrays of ``r`` disagree in shape or type."""
    E, F = r.tick.shape
    Cn = r.car_pos.shape[2] if r.car_pos.ndim == 4 else -1
    expected = {"tick": (E, F), "episode_start": (E, F), "ball_pos": (E, F, 3), "ball_vel": (E, F, 3),
                "ball_ang_vel": (E, F, 3), "car_pos": (E, F, Cn, 3), "car_quat": (E, F, Cn, 4),
                "car_vel": (E, F, Cn, 3), "car_ang_vel": (E, F, Cn, 3), "car_boost": (E, F, Cn),
                "car_flags": (E, F, Cn), "pad_active": (E, F, C.BOOST_PAD_COUNT), "ball_scored": (E, F), "goal": (E, F),
                "touch": (E, F, Cn), "demo": (E, F, Cn), "boost_pickup": (E, F, Cn)}
    for name, shape in expected.items():
        a = getattr(r, name)
        if a.shape != shape:
            raise ValueError(f"replay array {name} has shape {a.shape}, expected {shape} (envs, frames, cars)")
        want = _DTYPES.get(name, np.float32)
        if a.dtype != want:
            raise ValueError(f"replay array {name} has dtype {a.dtype}, expected {np.dtype(want)}")
    if len(r.meta.get("teams", [])) != Cn:
        raise ValueError(f"replay meta lists {len(r.meta.get('teams', []))} teams for {Cn} cars")


def build(
    *,
    tick: np.ndarray,
    ball_pos: np.ndarray,
    ball_vel: np.ndarray,
    ball_ang_vel: np.ndarray,
    car_pos: np.ndarray,
    car_rot_mat: np.ndarray,
    car_vel: np.ndarray,
    car_ang_vel: np.ndarray,
    car_boost: np.ndarray,
    car_flags: dict[str, np.ndarray],
    pad_active: np.ndarray,
    teams: list[int],
    car_presets: list[str] | None = None,
    episode_start: np.ndarray | None = None,
    events: dict[str, np.ndarray] | None = None,
    tick_rate: float = C.DEFAULT_TICK_RATE,
    env_ids: list[int] | None = None,
    info: dict | None = None,
    mutators: MutatorConfig | None = None,
) -> Replay:
    """A `Replay` from host arrays [E, F, ...] of states (rotation matrices, flags by name).

    ``events`` may hold the arena's ``goal`` / ``touch`` / ``demo`` / ``boost_pickup`` arrays; those not
    given are derived from the states (see the module docstring).
    """
    E, F = tick.shape
    Cn = car_pos.shape[2]
    if len(teams) != Cn:
        raise ValueError(f"teams lists {len(teams)} cars, the states hold {Cn}")
    presets = list(car_presets) if car_presets is not None else ["octane"] * Cn
    if len(presets) != Cn:
        raise ValueError(f"car_presets lists {len(presets)} cars, the states hold {Cn}")
    unknown = sorted(set(car_flags) - set(CAR_FLAGS))
    if unknown:
        raise ValueError(f"unknown car flags {unknown}; known: {', '.join(CAR_FLAGS)}")
    flags = np.zeros((E, F, Cn), np.uint16)
    for name, values in car_flags.items():
        flags |= (np.asarray(values, bool).astype(np.uint16) << CAR_FLAGS.index(name)).astype(np.uint16)
    start = np.zeros((E, F), bool) if episode_start is None else np.asarray(episode_start, bool)
    events = dict(events or {})
    unknown = sorted(set(events) - set(EVENTS))
    if unknown:
        raise ValueError(f"unknown events {unknown}; known: {', '.join(EVENTS)}")
    scored = (np.asarray(events["goal"]) > 0 if "goal" in events
              else derive_scored(ball_pos, TickParams.from_mutators(mutators or MutatorConfig(), 1.0 / tick_rate)))
    meta = {
        "tick_rate": float(tick_rate),
        "env_ids": list(env_ids) if env_ids is not None else list(range(E)),
        "teams": [int(t) for t in teams],
        "car_presets": presets,
        "hitbox_size": [list(car_preset(p).hitbox_size) for p in presets],
        "hitbox_offset": [list(car_preset(p).hitbox_offset) for p in presets],
        "pad_positions": [list(p) for p in C.BOOST_PADS_BIG + C.BOOST_PADS_SMALL],
        "pad_is_big": [True] * len(C.BOOST_PADS_BIG) + [False] * len(C.BOOST_PADS_SMALL),
        "derived_events": [name for name in ("demo", "boost_pickup") if name not in events],
        "info": info or {},
    }
    f32 = lambda a: np.ascontiguousarray(a, np.float32)  # noqa: E731
    no_car = np.zeros((E, F, Cn), bool)
    replay = Replay(
        tick=np.asarray(tick, np.int64), episode_start=start, ball_pos=f32(ball_pos), ball_vel=f32(ball_vel),
        ball_ang_vel=f32(ball_ang_vel), car_pos=f32(car_pos), car_quat=f32(rot_mat_to_quat(car_rot_mat)),
        car_vel=f32(car_vel), car_ang_vel=f32(car_ang_vel), car_boost=f32(car_boost), car_flags=flags,
        pad_active=np.asarray(pad_active, bool), ball_scored=np.asarray(scored, bool),
        goal=np.zeros((E, F), np.int8), touch=np.asarray(events.get("touch", no_car), bool),
        demo=np.asarray(events.get("demo", no_car), bool),
        boost_pickup=np.asarray(events.get("boost_pickup", np.full((E, F, Cn), -1)), np.int8), meta=meta,
    )
    _settle_events(replay)
    check(replay)
    return replay


def _settle_events(r: Replay) -> None:
    """Goals from ``ball_scored`` and the derived events from the states, in place."""
    first = r.ball_scored & ~_previous(r.ball_scored, r.episode_start)
    r.goal = np.where(first, np.where(r.ball_pos[..., 1] > 0, 1, 2), 0).astype(np.int8)  # +y goal: blue scored
    if "demo" in r.meta["derived_events"]:
        demoed = r.flag("is_demoed")
        r.demo = demoed & ~_previous(demoed, r.episode_start[..., None])
    if "boost_pickup" in r.meta["derived_events"]:
        r.boost_pickup = derive_pickups(r.pad_active, r.car_pos, r.episode_start)


def concat(replays: list[Replay]) -> Replay:
    """Join replays of the same envs and cars along the frame axis (chunks of one recording)."""
    if not replays:
        raise ValueError("concat needs at least one replay")
    first = replays[0]
    for r in replays[1:]:
        if r.meta["env_ids"] != first.meta["env_ids"] or r.meta["teams"] != first.meta["teams"]:
            raise ValueError("concat: replays record different envs or cars")
    arrays = {f.name: np.concatenate([getattr(r, f.name) for r in replays], axis=1)
              for f in dataclasses.fields(Replay) if f.name != "meta"}
    joined = Replay(meta=dict(first.meta), **arrays)
    _settle_events(joined)
    return joined


def _previous(x: np.ndarray, start: np.ndarray) -> np.ndarray:
    """x shifted one frame later (False before the first frame and at episode starts)."""
    prev = np.zeros_like(x)
    prev[:, 1:] = x[:, :-1]
    return prev & ~start


def derive_scored(ball_pos: np.ndarray, params: TickParams) -> np.ndarray:
    """The ball is in a goal (RocketSim's Arena::IsBallScored) [E, F] bool."""
    E, F = ball_pos.shape[:2]
    scored = is_ball_scored(torch.from_numpy(np.ascontiguousarray(ball_pos.reshape(E * F, 3), np.float32)), params)
    return scored.numpy().reshape(E, F)


def derive_pickups(pad_active: np.ndarray, car_pos: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
    """Pickups from pads turning inactive, each given to the car nearest the pad [E, F, C] int8."""
    E, F, Cn = car_pos.shape[:3]
    out = np.full((E, F, Cn), -1, np.int8)
    if Cn == 0:
        return out
    was_active = np.ones_like(pad_active)
    was_active[:, 1:] = pad_active[:, :-1]
    was_active[episode_start] = True
    taken = was_active & ~pad_active  # [E, F, P]
    pads = np.asarray(C.BOOST_PADS_BIG + C.BOOST_PADS_SMALL, np.float32)
    for e, f, p in zip(*np.nonzero(taken)):  # sync-ok: host numpy, rare events
        dist = np.linalg.norm(car_pos[e, f, :, :2] - pads[p, :2], axis=-1)
        out[e, f, int(dist.argmin())] = p
    return out


def rot_mat_to_quat(m: np.ndarray) -> np.ndarray:
    """Unit quaternions (x, y, z, w) of rotation matrices [..., 3, 3] (Shepperd's method)."""
    m = np.asarray(m, np.float64)
    shape = m.shape[:-2]
    m = m.reshape(-1, 3, 3)
    q = np.empty((m.shape[0], 4))
    tr = m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2]
    diag = np.stack([m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]], 1)
    case = np.where(tr > diag.max(1), 3, diag.argmax(1))
    for k in range(4):  # sync-ok: four numpy cases
        sel = case == k
        if not sel.any():
            continue
        r = m[sel]
        if k == 3:
            s = np.sqrt(1.0 + tr[sel]) * 2
            q[sel] = np.stack([(r[:, 2, 1] - r[:, 1, 2]) / s, (r[:, 0, 2] - r[:, 2, 0]) / s,
                               (r[:, 1, 0] - r[:, 0, 1]) / s, 0.25 * s], 1)
            continue
        i, j, l = k, (k + 1) % 3, (k + 2) % 3
        s = np.sqrt(1.0 + r[:, i, i] - r[:, j, j] - r[:, l, l]) * 2
        v = np.empty((r.shape[0], 4))
        v[:, i] = 0.25 * s
        v[:, j] = (r[:, j, i] + r[:, i, j]) / s
        v[:, l] = (r[:, l, i] + r[:, i, l]) / s
        v[:, 3] = (r[:, l, j] - r[:, j, l]) / s
        q[sel] = v
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q.reshape(*shape, 4).astype(np.float32)


def quat_to_rot_mat(q: np.ndarray) -> np.ndarray:
    """Rotation matrices [..., 3, 3] of unit quaternions (x, y, z, w)."""
    x, y, z, w = (np.asarray(q, np.float64)[..., i] for i in range(4))
    m = np.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
        2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
        2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y),
    ], -1)
    return m.reshape(*np.shape(q)[:-1], 3, 3).astype(np.float32)
