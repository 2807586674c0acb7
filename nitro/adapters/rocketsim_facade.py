"""nitro's soccar simulator behind the shape of RocketSim's Python binding (``rocketsim`` 2.2.1), for
single-arena scripts: replace ``import RocketSim as rs`` by ``from nitro.adapters import
rocketsim_facade as rs`` and the same calls run on nitro's arena.

```python
arena = rs.Arena(rs.GameMode.SOCCAR)
car = arena.add_car(rs.Team.BLUE, rs.CarConfig.OCTANE)
state = car.get_state()
state.pos = rs.Vec(0, -2000, 17)
car.set_state(state)
car.set_controls(rs.CarControls(throttle=1.0, boost=True))
arena.step(8)
print(car.get_state().pos, arena.ball.get_state().vel, arena.blue_score)
gym = arena.get_gym_state()       # the binding's RLGym layout
```

Names and values follow the binding: `Arena` (``add_car``, ``remove_car``, ``get_cars``,
``get_car_from_id``, ``ball``, ``get_boost_pads``, ``step``, ``reset_kickoff``, ``get_gym_state``,
``clone``, ``tick_count``, ``tick_rate``, ``tick_time``, ``blue_score``, ``orange_score``, the goal
score and ball touch callbacks), `Car` (``id``, ``team``, ``get_state`` / ``set_state``,
``set_controls`` / ``get_controls``, ``goals``, ``assists``, ``demos``, ``boost_pickups``), `Ball`,
`BoostPad`, and the value types `Vec`, `RotMat` (rows forward, right, up, as the binding prints them),
`Angle`, `CarControls`, `CarState`, `BallState`, `BallHitInfo`, `BoostPadState`; car ids count from 1
in the order cars were added.

Underneath is one nitro `Arena` of one env, cars blue first (rebuilt, states kept, when a car is added
or removed). Each tick is stepped on its own so that the counters and callbacks see every tick, as
RocketSim's do. Where nitro differs from the binding: soccar only; `CarState` holds the fields nitro
simulates (no flip-reset fields, ``update_counter``, ``time_spent_boosting`` or
``last_rel_dodge_torque``); `reset_kickoff(seed)` draws from nitro's per-arena streams (a seed gives
the same kickoff every time, not the one RocketSim draws for it); goals and assists are counted as
RocketSim's GameEventTracker counts them, shots and saves (which need its ball prediction) are not
counted and read 0.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import torch

from nitro.core import tree
from nitro.envs.soccar import Arena as NitroArena
from nitro.envs.soccar import CarState as NitroCarState
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.rigid_body import angle_to_rot_mat
from nitro.envs.soccar.rl import common_values as V


class GameMode:
    """RocketSim's game modes; nitro simulates SOCCAR."""

    SOCCAR, HOOPS, HEATSEEKER, SNOWDAY, DROPSHOT, THE_VOID = range(6)


class Team:
    BLUE, ORANGE = 0, 1


class CarConfig:
    """The car presets as the binding numbers them (``add_car`` takes the number or the preset name)."""

    OCTANE, DOMINUS, PLANK, BREAKOUT, HYBRID, MERC = range(6)
    NAMES = ("octane", "dominus", "plank", "breakout", "hybrid", "merc")


GOAL_MAX_TOUCH_TICKS = round(4.0 * C.DEFAULT_TICK_RATE)
"""GameEventTrackerConfig.goalMaxTouchTime (4 s): a goal counts for the scoring team's last toucher
within this many ticks."""
PASS_MAX_TOUCH_TICKS = round(2.0 * C.DEFAULT_TICK_RATE)
"""GameEventTrackerConfig.passMaxTouchTime (2 s): and an assist for a teammate who touched the ball
within this many ticks before the scorer's touch."""


# --- value types --------------------------------------------------------------------------------------


class Vec:
    """x, y, z floats (RocketSim's Vec)."""

    __slots__ = ("x", "y", "z")

    def __init__(self, x: float = 0.0, y: float = 0.0, z: float = 0.0):
        self.x, self.y, self.z = float(x), float(y), float(z)

    def as_tuple(self) -> tuple[float, float, float]:
        return (self.x, self.y, self.z)

    def as_numpy(self) -> np.ndarray:
        return np.array(self.as_tuple(), np.float32)

    def __repr__(self) -> str:
        return repr(self.as_tuple())

    def __eq__(self, other) -> bool:
        return isinstance(other, Vec) and self.as_tuple() == other.as_tuple()


class RotMat:
    """forward, right, up (RocketSim's RotMat: its columns; ``as_numpy`` gives them as rows, as the
    binding does)."""

    __slots__ = ("forward", "right", "up")

    def __init__(self, forward: Vec | None = None, right: Vec | None = None, up: Vec | None = None):
        self.forward = forward if forward is not None else Vec(1, 0, 0)
        self.right = right if right is not None else Vec(0, 1, 0)
        self.up = up if up is not None else Vec(0, 0, 1)

    def as_tuple(self) -> tuple:
        return (self.forward.as_tuple(), self.right.as_tuple(), self.up.as_tuple())

    def as_numpy(self) -> np.ndarray:
        return np.array(self.as_tuple(), np.float32)

    def __repr__(self) -> str:
        return repr(self.as_tuple())


class Angle:
    """Yaw, pitch, roll in radians (RocketSim's Angle); ``as_rot_mat`` is Angle::ToRotMat."""

    __slots__ = ("yaw", "pitch", "roll")

    def __init__(self, yaw: float = 0.0, pitch: float = 0.0, roll: float = 0.0):
        self.yaw, self.pitch, self.roll = float(yaw), float(pitch), float(roll)

    def as_tuple(self) -> tuple[float, float, float]:
        return (self.yaw, self.pitch, self.roll)

    def as_rot_mat(self) -> RotMat:
        m = angle_to_rot_mat(*(torch.tensor(a, dtype=torch.float32) for a in self.as_tuple()))
        return _rot_mat(m.numpy())


@dataclasses.dataclass
class CarControls:
    """A car's inputs, in the binding's argument order (boost before jump)."""

    throttle: float = 0.0
    steer: float = 0.0
    pitch: float = 0.0
    yaw: float = 0.0
    roll: float = 0.0
    boost: bool = False
    jump: bool = False
    handbrake: bool = False

    def as_list(self) -> list[float]:
        """The 8 values in nitro's control order (throttle, steer, pitch, yaw, roll, jump, boost, handbrake)."""
        return [float(getattr(self, name)) for name in CONTROLS]

    @staticmethod
    def from_list(values) -> CarControls:
        """From nitro's control order (buttons pressed above 0.5)."""
        values = [float(v) for v in values]
        return CarControls(**dict(zip(CONTROLS[:5], values[:5])), **{k: v > 0.5 for k, v in zip(CONTROLS[5:], values[5:])})


CONTROLS = ("throttle", "steer", "pitch", "yaw", "roll", "jump", "boost", "handbrake")
"""nitro's control order (the binding's CarControls takes boost before jump: pass them by name)."""


@dataclasses.dataclass
class BallHitInfo:
    is_valid: bool = False
    relative_pos_on_ball: Vec = dataclasses.field(default_factory=Vec)
    ball_pos: Vec = dataclasses.field(default_factory=Vec)
    extra_hit_vel: Vec = dataclasses.field(default_factory=Vec)
    tick_count_when_hit: int = -1
    tick_count_when_extra_impulse_applied: int = -1


@dataclasses.dataclass
class CarState:
    """A car's state under the binding's names (a fresh one is RocketSim's ``CarState()``)."""

    pos: Vec = dataclasses.field(default_factory=lambda: Vec(0, 0, C.CAR_SPAWN_REST_Z))
    rot_mat: RotMat = dataclasses.field(default_factory=RotMat)
    vel: Vec = dataclasses.field(default_factory=Vec)
    ang_vel: Vec = dataclasses.field(default_factory=Vec)
    is_on_ground: bool = True
    wheels_with_contact: tuple = (False, False, False, False)
    has_jumped: bool = False
    has_double_jumped: bool = False
    has_flipped: bool = False
    flip_rel_torque: Vec = dataclasses.field(default_factory=Vec)
    jump_time: float = 0.0
    flip_time: float = 0.0
    is_flipping: bool = False
    is_jumping: bool = False
    air_time: float = 0.0
    air_time_since_jump: float = 0.0
    boost: float = C.BOOST_SPAWN_AMOUNT
    boosting_time: float = 0.0
    is_supersonic: bool = False
    supersonic_time: float = 0.0
    handbrake_val: float = 0.0
    is_auto_flipping: bool = False
    auto_flip_timer: float = 0.0
    auto_flip_torque_scale: float = 0.0
    has_world_contact: bool = False
    world_contact_normal: Vec = dataclasses.field(default_factory=Vec)
    car_contact_id: int = 0
    """The id of the car last bumped (0: none), as the binding gives it."""
    car_contact_cooldown_timer: float = 0.0
    is_demoed: bool = False
    demo_respawn_timer: float = 0.0
    last_controls: CarControls = dataclasses.field(default_factory=CarControls)
    ball_hit_info: BallHitInfo = dataclasses.field(default_factory=BallHitInfo)

    def has_flip_or_jump(self) -> bool:
        return self.is_on_ground or (not self.has_flipped and not self.has_double_jumped
                                     and self.air_time_since_jump < V.DOUBLEJUMP_MAX_DELAY)


@dataclasses.dataclass
class BallState:
    pos: Vec = dataclasses.field(default_factory=lambda: Vec(0, 0, C.BALL_REST_Z))
    rot_mat: RotMat = dataclasses.field(default_factory=RotMat)
    vel: Vec = dataclasses.field(default_factory=Vec)
    ang_vel: Vec = dataclasses.field(default_factory=Vec)


@dataclasses.dataclass
class BoostPadState:
    is_active: bool = True
    cooldown: float = 0.0
    prev_locked_car_id: int = 0


# --- the simulation objects --------------------------------------------------------------------------


class Ball:
    def __init__(self, arena: Arena):
        self._arena = arena

    def get_state(self) -> BallState:
        b = self._arena._nitro.state.ball
        return BallState(pos=_vec(b.pos[0]), rot_mat=_rot_mat(b.rot_mat[0].cpu().numpy()), vel=_vec(b.vel[0]),
                         ang_vel=_vec(b.ang_vel[0]))

    def set_state(self, state: BallState) -> None:
        self._arena._nitro.set_ball(pos=_tensor(state.pos), vel=_tensor(state.vel), ang_vel=_tensor(state.ang_vel))

    def get_radius(self) -> float:
        return C.BALL_RADIUS


class BoostPad:
    """One of the 34 pads (``get_boost_pads`` lists them in RLBot's order, as the binding does)."""

    def __init__(self, arena: Arena, index: int):
        self._arena, self._index = arena, index
        self.is_big = bool(index < len(C.BOOST_PADS_BIG))

    def get_pos(self) -> Vec:
        return Vec(*V.PAD_POSITIONS[self._index])

    def get_state(self) -> BoostPadState:
        pads = self._arena._nitro.state.pads
        car = int(pads.prev_locked_car_id[0, self._index])
        ids = self._arena._ids_in_nitro_order()
        return BoostPadState(is_active=bool(pads.is_active[0, self._index]), cooldown=float(pads.cooldown[0, self._index]),
                             prev_locked_car_id=ids[car - 1] if car > 0 else 0)

    def set_state(self, state: BoostPadState) -> None:
        nitro = self._arena._nitro
        pads = nitro.state.pads
        index = {car_id: i + 1 for i, car_id in enumerate(self._arena._ids_in_nitro_order())}
        values = {"is_active": bool(state.is_active), "cooldown": float(state.cooldown),
                  "prev_locked_car_id": index.get(state.prev_locked_car_id, 0)}
        new = dataclasses.replace(pads, **{name: getattr(pads, name).clone() for name in values})
        for name, value in values.items():
            getattr(new, name)[0, self._index] = value
        nitro.state = dataclasses.replace(nitro.state, pads=new)


class Car:
    """A car of a facade `Arena` (RocketSim's Car): ``id`` from 1 in the order cars were added."""

    def __init__(self, arena: Arena, car_id: int, team: int, preset: str):
        self._arena, self.id, self.team, self.preset = arena, car_id, team, preset
        self.controls = CarControls()
        self.goals = self.assists = self.demos = self.boost_pickups = 0
        self.shots = self.saves = 0  # nitro keeps no ball prediction for shots and saves (module docstring)

    @property
    def _index(self) -> int:
        return self._arena._index_of(self)

    def set_controls(self, controls: CarControls) -> None:
        if not isinstance(controls, CarControls):
            raise TypeError(f"set_controls takes a CarControls, got {type(controls).__name__}")
        self.controls = dataclasses.replace(controls)

    def get_controls(self) -> CarControls:
        return dataclasses.replace(self.controls)

    def get_state(self) -> CarState:
        c = tree.tree_map(lambda x: x[0, self._index].cpu(), self._arena._nitro.state.cars)
        ids = self._arena._ids_in_nitro_order()
        fields = {}
        for f in dataclasses.fields(CarState):
            if f.name in ("rot_mat", "last_controls", "ball_hit_info", "car_contact_id"):
                continue
            value = getattr(c, f.name)
            fields[f.name] = (_vec(value) if value.dim() == 1 and value.numel() == 3 else
                              tuple(bool(w) for w in value) if f.name == "wheels_with_contact" else value.item())
        contact = int(c.car_contact_id)
        return CarState(
            **fields, rot_mat=_rot_mat(c.rot_mat.numpy()), car_contact_id=ids[contact - 1] if contact > 0 else 0,
            last_controls=CarControls.from_list(c.last_controls.tolist()),
            ball_hit_info=BallHitInfo(
                is_valid=bool(c.ball_hit_info_is_valid), relative_pos_on_ball=_vec(c.ball_hit_info_relative_pos_on_ball),
                ball_pos=_vec(c.ball_hit_info_ball_pos), extra_hit_vel=_vec(c.ball_hit_info_extra_hit_vel),
                tick_count_when_hit=int(c.ball_hit_info_tick_count_when_hit),
                tick_count_when_extra_impulse_applied=int(c.ball_hit_info_tick_count_when_extra_impulse_applied)),
        )  # fmt: skip

    def set_state(self, state: CarState) -> None:
        """RocketSim's Car::SetState: every field of ``state``; the wheels' engine, brake, steer and
        friction values are kept (btVehicleRL's wheel infos are not part of a CarState)."""
        if not isinstance(state, CarState):
            raise TypeError(f"set_state takes a CarState, got {type(state).__name__}")
        nitro, i = self._arena._nitro, self._index
        kept = {name: getattr(nitro.state.cars, name)[:, i].clone() for name in NitroCarState.WHEEL_INFOS}
        index = {car_id: k + 1 for k, car_id in enumerate(self._arena._ids_in_nitro_order())}
        fields = {}
        for f in dataclasses.fields(CarState):
            if f.name in ("rot_mat", "last_controls", "ball_hit_info", "car_contact_id"):
                continue
            value = getattr(state, f.name)
            fields[f.name] = _tensor(value, NitroCarState.FIELDS[f.name][1])
        hit = state.ball_hit_info
        fields.update(
            rot_mat=_tensor(np.array(state.rot_mat.as_tuple(), np.float32).T),
            car_contact_id=torch.tensor(index.get(state.car_contact_id, 0), dtype=torch.int32),
            last_controls=torch.tensor(state.last_controls.as_list(), dtype=torch.float32),
            ball_hit_info_is_valid=torch.tensor(bool(hit.is_valid)),
            ball_hit_info_relative_pos_on_ball=_tensor(hit.relative_pos_on_ball),
            ball_hit_info_ball_pos=_tensor(hit.ball_pos), ball_hit_info_extra_hit_vel=_tensor(hit.extra_hit_vel),
            ball_hit_info_tick_count_when_hit=torch.tensor(int(hit.tick_count_when_hit)),
            ball_hit_info_tick_count_when_extra_impulse_applied=torch.tensor(int(hit.tick_count_when_extra_impulse_applied)),
        )  # fmt: skip
        nitro.set_car(i, **{name: value.to(nitro.device) for name, value in fields.items()})
        cars = nitro.state.cars
        nitro.state.cars = dataclasses.replace(cars, **{
            name: _with_column(getattr(cars, name), i, value) for name, value in kept.items()})  # fmt: skip

    def get_config(self) -> str:
        """The car's preset name."""
        return self.preset

    def __repr__(self) -> str:
        return f"Car(id={self.id}, team={self.team}, {self.preset})"


class Arena:
    """A soccar arena on nitro's simulator, shaped like RocketSim's binding (module docstring).

    ``device``, ``meshes`` and ``seed`` (keyword-only) go to nitro's `Arena`; ``seed`` seeds the
    kickoff and respawn draws (None: drawn at random)."""

    def __init__(self, game_mode: int = GameMode.SOCCAR, tick_rate: float = C.DEFAULT_TICK_RATE, *,
                 device: str = "cpu", meshes: str | None = None, seed: int | None = None):
        if game_mode != GameMode.SOCCAR:
            raise ValueError(f"nitro simulates GameMode.SOCCAR ({GameMode.SOCCAR}) only, got game mode {game_mode!r}")
        self.game_mode, self.tick_rate = game_mode, float(tick_rate)
        self._device, self._meshes = device, meshes
        self._seed = int(torch.randint(2**31, ()).item()) if seed is None else seed
        self._cars: list[Car] = []
        self._last_car_id = 0
        self._nitro = self._build([])
        self.ball = Ball(self)
        self._pads = [BoostPad(self, i) for i in V.PADS_RLBOT_ORDER]
        self._goal_callback: tuple[Callable | None, object] = (None, None)
        self._touch_callback: tuple[Callable | None, object] = (None, None)
        self._last_gym_state_tick = 0
        self._ball_scored_last = False
        self._last_ball_update_count = 0

    # --- cars ---------------------------------------------------------------------------------------

    def add_car(self, team: int, config: int | str = CarConfig.OCTANE) -> Car:
        """A new car (RocketSim's Arena::AddCar: respawned at a random respawn spot with the spawn boost)."""
        if team not in (Team.BLUE, Team.ORANGE):
            raise ValueError(f"team must be Team.BLUE (0) or Team.ORANGE (1), got {team!r}")
        preset = config if isinstance(config, str) else None
        if isinstance(config, int) and not isinstance(config, bool) and 0 <= config < len(CarConfig.NAMES):
            preset = CarConfig.NAMES[config]
        if preset not in CarConfig.NAMES:
            raise ValueError(f"config must be a CarConfig number (0-5) or a preset name {CarConfig.NAMES}, got {config!r}")
        self._last_car_id += 1
        car = Car(self, self._last_car_id, team, preset)
        self._rebuild([*self._cars, car])
        return car

    def remove_car(self, car: Car | int) -> None:
        car = self.get_car_from_id(car) if isinstance(car, int) else car
        if car not in self._cars:
            raise KeyError("Car not found in this arena")
        self._rebuild([c for c in self._cars if c is not car])

    def get_cars(self) -> list[Car]:
        """The cars in id order."""
        return list(self._cars)

    def get_car_from_id(self, car_id: int, default=KeyError) -> Car:
        for car in self._cars:
            if car.id == car_id:
                return car
        if default is KeyError:
            raise KeyError(car_id)
        return default

    def get_boost_pads(self) -> list[BoostPad]:
        """The 34 pads in RLBot's order."""
        return list(self._pads)

    # --- time and score -------------------------------------------------------------------------------

    @property
    def tick_count(self) -> int:
        return int(self._nitro.state.tick_count[0])

    @property
    def tick_time(self) -> float:
        return self._nitro.tick_time

    @property
    def blue_score(self) -> int:
        return int(self._nitro.blue_score[0])

    @property
    def orange_score(self) -> int:
        return int(self._nitro.orange_score[0])

    def set_goal_score_callback(self, callback, data=None) -> tuple:
        """``callback(arena=, team=, data=)`` on every scoring tick; returns the previous (callback, data)."""
        previous, self._goal_callback = self._goal_callback, (callback, data)
        return previous

    def set_ball_touch_callback(self, callback, data=None) -> tuple:
        """``callback(arena=, car=, data=)`` for each car touching the ball on a tick."""
        previous, self._touch_callback = self._touch_callback, (callback, data)
        return previous

    # --- stepping ---------------------------------------------------------------------------------------

    def step(self, ticks: int = 1) -> None:
        """``ticks`` ticks with each car's controls; then the goal and assist counts (RocketSim's
        GameEventTracker updates once per step call, as the binding's does)."""
        if isinstance(ticks, bool) or not isinstance(ticks, int) or ticks < 0:
            raise ValueError(f"ticks must be a non-negative int, got {ticks!r}")
        order = self._nitro_order()
        controls = torch.tensor([[self._cars[k].controls.as_list() for k in order]], dtype=torch.float32)
        controls = controls.reshape(1, len(order), 8).to(self._nitro.device)
        for _ in range(ticks):
            events = self._nitro.step(controls)
            self._after_tick(events, order)
        self._track_goals(order)

    def _after_tick(self, events, order: list[int]) -> None:
        e = tree.tree_map(lambda x: x[0].cpu(), events)
        for slot, k in enumerate(order):
            car = self._cars[k]
            car.boost_pickups += int(e.boost_pickup[slot])
            attacker = int(e.demoed_by[slot])
            if attacker >= 0:
                self._cars[order[attacker]].demos += 1
        callback, data = self._touch_callback
        if callback is not None:
            for slot, k in enumerate(order):
                if e.ball_touch[slot]:
                    callback(arena=self, car=self._cars[k], data=data)
        callback, data = self._goal_callback
        if callback is not None and (e.goal_blue or e.goal_orange):
            callback(arena=self, team=Team.BLUE if e.goal_blue else Team.ORANGE, data=data)

    def _track_goals(self, order: list[int]) -> None:
        """GameEventTracker::Update's goal event: a goal (the ball newly in a goal) counts for the scoring
        team's last toucher within 4 s, and an assist for its teammate who touched last within 2 s
        before that touch; a state set (the ball's update count falling) starts the tracking over."""
        ball = self._nitro.state.ball
        count = int(ball.tick_count_since_update[0])
        if count < self._last_ball_update_count:
            self._ball_scored_last = False
        elif count > self._last_ball_update_count:
            y = float(ball.pos[0, 1])
            scored = abs(y) > self._nitro.world.params.goal_y
            if scored and not self._ball_scored_last:
                team = Team.BLUE if y > 0 else Team.ORANGE
                cars = self._nitro.state.cars
                valid = cars.ball_hit_info_is_valid[0].cpu().tolist()
                hit = cars.ball_hit_info_tick_count_when_hit[0].cpu().tolist()
                touched = [(hit[s], self._cars[k]) for s, k in enumerate(order)
                           if self._cars[k].team == team and valid[s]]
                shooter = max((t for t in touched if t[0] + GOAL_MAX_TOUCH_TICKS >= self.tick_count),
                              key=lambda t: t[0], default=None)
                if shooter is not None:
                    shooter[1].goals += 1
                    passer = max((t for t in touched if t[1] is not shooter[1] and t[0] + PASS_MAX_TOUCH_TICKS >= shooter[0]),
                                 key=lambda t: t[0], default=None)  # fmt: skip
                    if passer is not None:
                        passer[1].assists += 1
            self._ball_scored_last = scored
        self._last_ball_update_count = count

    def reset_kickoff(self, seed: int = -1) -> None:
        """Arena::ResetToRandomKickoff. ``seed`` >= 0 draws the kickoff from that seed's stream (the same
        kickoff every time for a seed; not RocketSim's draw for it); -1 from the arena's own stream."""
        if seed >= 0:
            world = self._nitro.world
            self._nitro.world = dataclasses.replace(world, game=dataclasses.replace(world.game, seed=seed))
            self._nitro.state.kickoff_count.zero_()
        self._nitro.reset_kickoff()
        if seed >= 0:
            self._nitro.world = dataclasses.replace(self._nitro.world, game=dataclasses.replace(
                self._nitro.world.game, seed=self._seed))  # fmt: skip

    def clone(self) -> Arena:
        """An independent copy: the same cars (ids, controls, counters), states and score."""
        other = Arena.__new__(Arena)
        other.__dict__.update(self.__dict__)
        other._cars = []
        for car in self._cars:
            copy = Car(other, car.id, car.team, car.preset)
            copy.__dict__.update({k: v for k, v in car.__dict__.items() if k != "_arena"})
            other._cars.append(copy)
        other._nitro = self._build(other._cars)
        other._nitro.state = tree.tree_map(lambda x: x.clone(), self._nitro.state)
        other.ball = Ball(other)
        other._pads = [BoostPad(other, i) for i in V.PADS_RLBOT_ORDER]
        return other

    # --- RLGym's view -----------------------------------------------------------------------------------

    def get_gym_state(self) -> tuple:
        """The binding's ``get_gym_state`` layout (see its docstring): (game data [4], pads [2, 34] (RLBot
        order, then reversed), ball [2, 25], then one [2, 36] per car in id order). Each second row is the
        first seen from the other side (a half turn about z). ``hit_last_step``: the car's ball hit
        info is from a tick at or after the previous call's."""
        s = tree.tree_map(lambda x: x[0].cpu().numpy(), self._nitro.state)
        order = self._nitro_order()
        slot_of = {k: slot for slot, k in enumerate(order)}
        valid, hit = s.cars.ball_hit_info_is_valid, s.cars.ball_hit_info_tick_count_when_hit
        last_tick, last_id = 0, 0
        for k, car in enumerate(self._cars):  # id order: the first car of the latest tick wins
            slot = slot_of[k]
            if valid[slot] and hit[slot] > last_tick:
                last_tick, last_id = hit[slot], car.id
        game = np.array([self.game_mode, last_id, self.blue_score, self.orange_score], np.float32)
        active = s.pads.is_active[list(V.PADS_RLBOT_ORDER)].astype(np.float32)
        pads = np.stack((active, active[::-1]))
        ball = _body_rows(s.ball.pos, s.ball.vel, s.ball.ang_vel, s.ball.rot_mat)
        cars = []
        for k, car in enumerate(self._cars):
            i = slot_of[k]
            head = [car.id, car.team, car.goals, car.saves, car.shots, car.demos, car.boost_pickups,
                    s.cars.is_demoed[i], s.cars.is_on_ground[i],
                    valid[i] and hit[i] >= self._last_gym_state_tick, s.cars.boost[i]]
            body = _body_rows(s.cars.pos[i], s.cars.vel[i], s.cars.ang_vel[i], s.cars.rot_mat[i])
            cars.append(np.concatenate((np.tile(np.array(head, np.float32), (2, 1)), body), 1))
        self._last_gym_state_tick = self.tick_count
        return (game, pads, ball, *cars)

    # --- nitro's arena underneath -------------------------------------------------------------------------

    def _nitro_order(self) -> list[int]:
        """Indices into the id-ordered car list, blue cars first: nitro's car order."""
        return [k for k, c in enumerate(self._cars) if c.team == Team.BLUE] + \
            [k for k, c in enumerate(self._cars) if c.team != Team.BLUE]

    def _ids_in_nitro_order(self) -> list[int]:
        return [self._cars[k].id for k in self._nitro_order()]

    def _index_of(self, car: Car) -> int:
        order = self._nitro_order()
        for slot, k in enumerate(order):
            if self._cars[k] is car:
                return slot
        raise RuntimeError(f"{car} has been removed from its arena")

    def _build(self, cars: list[Car]) -> NitroArena:
        blue = [c for c in cars if c.team == Team.BLUE]
        orange = [c for c in cars if c.team != Team.BLUE]
        presets = [c.preset for c in blue + orange]
        return NitroArena(1, len(blue), len(orange), car=presets or "octane", device=self._device,
                          tick_rate=self.tick_rate, meshes=self._meshes, seed=self._seed)

    def _rebuild(self, cars: list[Car]) -> None:
        """A nitro arena for ``cars``: the ball, pads, clock and score carried over, each kept car's whole
        state (hidden state included) moved to its new slot, a new car as the new arena spawned it."""
        old, old_ids = self._nitro, self._ids_in_nitro_order()
        self._cars = cars
        new = self._build(cars)
        slots = [old_ids.index(i) if i in old_ids else -1 for i in self._ids_in_nitro_order()]

        def move(old_field: torch.Tensor, new_field: torch.Tensor) -> torch.Tensor:
            columns = [old_field[:, s] if s >= 0 else new_field[:, j] for j, s in enumerate(slots)]
            return torch.stack(columns, 1) if columns else new_field

        moved = dataclasses.replace(new.state.cars, **{
            f.name: move(getattr(old.state.cars, f.name), getattr(new.state.cars, f.name))
            for f in dataclasses.fields(new.state.cars)})  # fmt: skip
        new.state = dataclasses.replace(old.state, cars=moved)
        self._nitro = new


# --- conversions --------------------------------------------------------------------------------------


def _vec(t) -> Vec:
    return Vec(*(float(x) for x in (t.tolist() if hasattr(t, "tolist") else t)))


def _rot_mat(m: np.ndarray) -> RotMat:
    """nitro's [3, 3] (columns forward, right, up) as a RotMat."""
    return RotMat(*(Vec(*m[:, k].tolist()) for k in range(3)))


def _tensor(value, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    if isinstance(value, Vec):
        value = value.as_tuple()
    return torch.as_tensor(np.asarray(value), dtype=dtype)


def _with_column(base: torch.Tensor, index: int, column: torch.Tensor) -> torch.Tensor:
    out = base.clone()
    out[:, index] = column
    return out


def _quaternion(m: np.ndarray) -> np.ndarray:
    """btMatrix3x3::getRotation of ``m`` [3, 3] (rows as Bullet's m_el): (w, x, y, z)."""
    m = m.astype(np.float32)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    q = np.zeros(4, np.float32)  # x, y, z, w
    if trace > 0:
        s = np.sqrt(trace + np.float32(1.0))
        q[3] = s * np.float32(0.5)
        s = np.float32(0.5) / s
        q[0], q[1], q[2] = (m[2, 1] - m[1, 2]) * s, (m[0, 2] - m[2, 0]) * s, (m[1, 0] - m[0, 1]) * s
    else:
        i = (2 if m[1, 1] < m[2, 2] else 1) if m[0, 0] < m[1, 1] else (2 if m[0, 0] < m[2, 2] else 0)
        j, k = (i + 1) % 3, (i + 2) % 3
        s = np.sqrt(m[i, i] - m[j, j] - m[k, k] + np.float32(1.0))
        q[i] = s * np.float32(0.5)
        s = np.float32(0.5) / s
        q[3], q[j], q[k] = (m[k, j] - m[j, k]) * s, (m[j, i] + m[i, j]) * s, (m[k, i] + m[i, k]) * s
    return np.array((q[3], q[0], q[1], q[2]), np.float32)


def _pitch_yaw_roll(m: np.ndarray) -> np.ndarray:
    """The binding's calcPYR: btMatrix3x3::getEulerYPR, roll negated, as (pitch, yaw, roll)."""
    yaw, pitch, roll = math.atan2(m[1, 0], m[0, 0]), math.asin(max(-1.0, min(1.0, -float(m[2, 0])))), \
        math.atan2(m[2, 1], m[2, 2])
    if abs(pitch) == math.pi / 2:
        yaw += -math.pi if yaw > 0 else math.pi
        roll += -math.pi if roll > 0 else math.pi
    return np.array((pitch, yaw, -roll), np.float32)


def _body_rows(pos, vel, ang_vel, rot) -> np.ndarray:
    """[2, 25]: pos, quaternion (w, x, y, z), vel, ang vel, forward, right, up, pitch/yaw/roll; the
    second row as the other team sees it (x and y negated; the quaternion and angles of the turned
    basis, as the binding writes them)."""
    flip = np.array((-1.0, -1.0, 1.0), np.float32)
    q = _quaternion(rot)
    inverse_q = np.array((q[3], q[2], -q[1], -q[0]), np.float32)
    turned = np.diag(flip) @ rot  # a product, as the binding's btMatrix3x3 one: +0, not -0, where entries are 0
    rows = []
    for sign, quat, basis in ((1.0, q, rot), (flip, inverse_q, turned)):
        axes = [rot[:, k] * sign for k in range(3)]
        rows.append(np.concatenate((pos * sign, quat, vel * sign, ang_vel * sign, *axes, _pitch_yaw_roll(basis))))
    return np.stack(rows).astype(np.float32)
