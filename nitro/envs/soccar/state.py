"""Batched soccar state: dataclasses of tensors whose first axis is the env (N); what a step
reports (`ArenaEvents`); and what every tick reads and never writes (`World`).

Field names are RocketSim's (its Python binding's snake_case spelling). Units: UU, UU/s, rad/s,
seconds. Rotation matrices have columns forward, right, up. Hidden per-tick state that RocketSim does
not expose through get_state() but that a fresh RocketSim arena starts with zeroed carries a leading
underscore in RocketSim's C++ and is named the same way here.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh import ArenaMesh
from nitro.envs.soccar.arena_mesh.broadphase import ArenaBullet
from nitro.envs.soccar.car_config import CarParams
from nitro.envs.soccar.mutators import MutatorConfig, TickParams


@dataclasses.dataclass
class BallState:
    """The ball of each env (RocketSim `BallState` + `Ball`'s per-tick cache)."""

    pos: torch.Tensor
    """Centre position, UU [N, 3]."""
    vel: torch.Tensor
    """Linear velocity, UU/s [N, 3]."""
    ang_vel: torch.Tensor
    """Angular velocity, rad/s [N, 3]."""
    rot_mat: torch.Tensor
    """Orientation [N, 3, 3]; never integrated (ArenaConfig.noBallRot, RocketSim's default)."""
    velocity_impulse_cache: torch.Tensor
    """Velocity added at the end of the tick (car hits), UU/s [N, 3] (Ball::_velocityImpulseCache)."""
    tick_count_since_update: torch.Tensor
    """Ticks since the last set_ball [N] int64."""

    @staticmethod
    def rest(num_envs: int, device: torch.device) -> BallState:
        """A fresh RocketSim ball: at rest at (0, 0, BALL_REST_Z), so it sleeps until moved."""
        pos = torch.zeros(num_envs, 3, device=device)
        pos[:, 2].fill_(C.BALL_REST_Z)
        zeros = torch.zeros(num_envs, 3, device=device)
        return BallState(
            pos=pos,
            vel=zeros.clone(),
            ang_vel=zeros.clone(),
            rot_mat=torch.eye(3, device=device).expand(num_envs, 3, 3).clone(),
            velocity_impulse_cache=zeros.clone(),
            tick_count_since_update=torch.zeros(num_envs, dtype=torch.int64, device=device),
        )


# Field layouts of CarState: trailing shape and dtype per field (the leading [N, C] omitted).
_F, _B, _I32, _I64 = torch.float32, torch.bool, torch.int32, torch.int64


@dataclasses.dataclass
class CarState:
    """The cars of each env, blue first then orange: C cars, [N, C, ...] (C may be 0).

    The public fields are RocketSim's `CarState` under the Python binding's names, its
    ``ball_hit_info`` as the ``ball_hit_info_*`` fields (one per BallHitInfo field, last). The fields
    from ``is_boosting`` to ``extra_pushback`` are hidden per-tick
    state RocketSim keeps outside the binding's CarState (`Car::_internalState.isBoosting`, the
    btVehicleRL wheel infos, `Car::_velocityImpulseCache`): a fresh RocketSim car starts them zeroed,
    and `Arena.set_car` resets them the same way.
    """

    pos: torch.Tensor
    """Position of the centre of mass, UU [N, C, 3]."""
    rot_mat: torch.Tensor
    """Orientation, columns forward, right, up [N, C, 3, 3]."""
    vel: torch.Tensor
    """Linear velocity, UU/s [N, C, 3]."""
    ang_vel: torch.Tensor
    """Angular velocity, rad/s [N, C, 3]."""
    is_on_ground: torch.Tensor
    """At least 3 wheels touch [N, C] bool."""
    wheels_with_contact: torch.Tensor
    """Each wheel's ray hits something: front-right, front-left, back-right, back-left [N, C, 4] bool."""
    has_jumped: torch.Tensor
    """The car jumped to get into the air (false after a flip reset) [N, C] bool."""
    has_double_jumped: torch.Tensor
    """Double jumped and still in the air (flips do not count) [N, C] bool."""
    has_flipped: torch.Tensor
    """In the air and flipping or flipped [N, C] bool."""
    flip_rel_torque: torch.Tensor
    """The flip's torque direction in the car frame (forward flip: +y) [N, C, 3]."""
    jump_time: torch.Tensor
    """Seconds since the jump started while jumping or jumped, else 0 [N, C]."""
    flip_time: torch.Tensor
    """Seconds since the flip started [N, C]."""
    is_flipping: torch.Tensor
    """During a flip's torque phase [N, C] bool."""
    is_jumping: torch.Tensor
    """During a jump (its hold phase) [N, C] bool."""
    air_time: torch.Tensor
    """Seconds in the air [N, C]."""
    air_time_since_jump: torch.Tensor
    """Seconds in the air since the jump ended; 0 if the car never jumped [N, C]."""
    boost: torch.Tensor
    """Boost amount, 0-100 [N, C]."""
    boosting_time: torch.Tensor
    """Seconds of the current boost (the minimum boost time counts it) [N, C]."""
    is_supersonic: torch.Tensor
    """[N, C] bool."""
    supersonic_time: torch.Tensor
    """Seconds supersonic [N, C]."""
    handbrake_val: torch.Tensor
    """Powerslide amount, 0-1, rising and falling at fixed rates [N, C]."""
    is_auto_flipping: torch.Tensor
    """[N, C] bool."""
    auto_flip_timer: torch.Tensor
    """Seconds of auto-flip left [N, C]."""
    auto_flip_torque_scale: torch.Tensor
    """+1 or -1: the auto-flip's roll direction [N, C]."""
    has_world_contact: torch.Tensor
    """The car body touched the arena during the last physics step [N, C] bool."""
    world_contact_normal: torch.Tensor
    """Normal of the last such contact (kept after the contact ends) [N, C, 3]."""
    car_contact_id: torch.Tensor
    """Index + 1 of the car last bumped (0: none) [N, C] int32."""
    car_contact_cooldown_timer: torch.Tensor
    """Seconds until that car can bump this one again [N, C]."""
    is_demoed: torch.Tensor
    """[N, C] bool."""
    demo_respawn_timer: torch.Tensor
    """Seconds until respawn [N, C]."""
    last_controls: torch.Tensor
    """The previous tick's controls (throttle, steer, pitch, yaw, roll, jump, boost, handbrake) [N, C, 8]."""
    ball_hit_info_is_valid: torch.Tensor
    """BallHitInfo::isValid: the car has touched the ball (the other ball_hit_info fields are
    meaningful only then) [N, C] bool."""
    ball_hit_info_relative_pos_on_ball: torch.Tensor
    """The last touch's contact point relative to the ball's centre, UU [N, C, 3]."""
    ball_hit_info_ball_pos: torch.Tensor
    """The ball's position at the last touch (the tick's start), UU [N, C, 3]."""
    ball_hit_info_extra_hit_vel: torch.Tensor
    """The extra velocity the last touch gave the ball (zero on a touch the tick after one that
    did), UU/s [N, C, 3]."""
    ball_hit_info_tick_count_when_hit: torch.Tensor
    """Arena tick count of the last touch (the tick's number, before it is counted); -1 for never
    (the binding's 2^64 - 1) [N, C] int64."""
    ball_hit_info_tick_count_when_extra_impulse_applied: torch.Tensor
    """Arena tick count of the last touch that gave the extra velocity; -1 for never [N, C] int64."""
    tick_count_since_update: torch.Tensor
    """Ticks since the car was last set [N, C] int64."""
    # --- hidden per-tick state (not in the binding's CarState) ---
    is_boosting: torch.Tensor
    """CarState::isBoosting [N, C] bool."""
    time_since_boosted: torch.Tensor
    """CarState::timeSinceBoosted: seconds since the car last boosted (for recharge) [N, C]."""
    velocity_impulse_cache: torch.Tensor
    """Velocity added at the end of the tick (bumps), UU/s (Car::_velocityImpulseCache) [N, C, 3]."""
    engine_force: torch.Tensor
    """btWheelInfo::m_engineForce of every wheel, set by the last tick's controls [N, C]."""
    brake: torch.Tensor
    """btWheelInfo::m_brake of every wheel [N, C]."""
    steer_angle: torch.Tensor
    """btWheelInfoRL::m_steerAngle of the front wheels, rad [N, C]."""
    lat_friction: torch.Tensor
    """btWheelInfoRL::m_latFriction, kept while a wheel is off the ground [N, C, 4]."""
    long_friction: torch.Tensor
    """btWheelInfoRL::m_longFriction [N, C, 4]."""
    extra_pushback: torch.Tensor
    """btWheelInfoRL::m_extraPushback, UU/s x mass; kept while the wheel touches [N, C, 4]."""
    # --- the ball hit info (the binding's CarState.ball_hit_info, settable) ---

    FIELDS: ClassVar[dict[str, tuple[tuple[int, ...], torch.dtype]]] = {
        "pos": ((3,), _F), "rot_mat": ((3, 3), _F), "vel": ((3,), _F), "ang_vel": ((3,), _F),
        "is_on_ground": ((), _B), "wheels_with_contact": ((4,), _B), "has_jumped": ((), _B),
        "has_double_jumped": ((), _B), "has_flipped": ((), _B), "flip_rel_torque": ((3,), _F),
        "jump_time": ((), _F), "flip_time": ((), _F), "is_flipping": ((), _B), "is_jumping": ((), _B),
        "air_time": ((), _F), "air_time_since_jump": ((), _F), "boost": ((), _F),
        "boosting_time": ((), _F), "is_supersonic": ((), _B), "supersonic_time": ((), _F),
        "handbrake_val": ((), _F), "is_auto_flipping": ((), _B), "auto_flip_timer": ((), _F),
        "auto_flip_torque_scale": ((), _F), "has_world_contact": ((), _B),
        "world_contact_normal": ((3,), _F), "car_contact_id": ((), _I32),
        "car_contact_cooldown_timer": ((), _F), "is_demoed": ((), _B), "demo_respawn_timer": ((), _F),
        "last_controls": ((8,), _F), "tick_count_since_update": ((), _I64),
        "is_boosting": ((), _B), "time_since_boosted": ((), _F), "velocity_impulse_cache": ((3,), _F),
        "engine_force": ((), _F), "brake": ((), _F), "steer_angle": ((), _F),
        "lat_friction": ((4,), _F), "long_friction": ((4,), _F), "extra_pushback": ((4,), _F),
        "ball_hit_info_is_valid": ((), _B), "ball_hit_info_relative_pos_on_ball": ((3,), _F),
        "ball_hit_info_ball_pos": ((3,), _F), "ball_hit_info_extra_hit_vel": ((3,), _F),
        "ball_hit_info_tick_count_when_hit": ((), _I64), "ball_hit_info_tick_count_when_extra_impulse_applied": ((), _I64),
    }  # fmt: skip
    """Trailing shape and dtype of every field."""
    HIDDEN: ClassVar[tuple[str, ...]] = ("is_boosting", "time_since_boosted", "velocity_impulse_cache", "engine_force", "brake",
              "steer_angle", "lat_friction", "long_friction", "extra_pushback")  # fmt: skip
    """The hidden fields: reset by `Arena.set_car`, not settable through it."""
    WHEEL_INFOS: ClassVar[tuple[str, ...]] = ("engine_force", "brake", "steer_angle", "lat_friction", "long_friction",
                                              "extra_pushback")  # fmt: skip
    """The hidden fields btVehicleRL keeps (its wheel infos): RocketSim's Car::SetState leaves them as
    they are (a respawn or a kickoff keeps them; `Arena.set_car` resets them as on a fresh car)."""
    SETTABLE: ClassVar[tuple[str, ...]]  # set below the class
    """The fields `Arena.set_car` takes: all but the hidden ones and ``tick_count_since_update``
    (which Car::SetState restarts at 0)."""

    @staticmethod
    def empty(num_envs: int, num_cars: int, device: torch.device) -> CarState:
        """All-zero car state for ``num_cars`` cars (identity rotations)."""
        fields = {
            name: torch.zeros(num_envs, num_cars, *shape, dtype=dtype, device=device)
            for name, (shape, dtype) in CarState.FIELDS.items()
        }
        fields["rot_mat"][:] = torch.eye(3, device=device)
        return CarState(**fields)

    @staticmethod
    def fresh(num_envs: int, num_cars: int, device: torch.device) -> CarState:
        """Cars as RocketSim's `CarState()` makes them (at (0, 0, 17), identity rotation, on the
        ground, boost 100/3, ball hit ticks -1, everything else zero), with fresh hidden state."""
        cars = CarState.empty(num_envs, num_cars, device)
        cars.pos[..., 2].fill_(C.CAR_SPAWN_REST_Z)  # (fills: nothing copied from the host)
        cars.is_on_ground[:] = True  # (the ONNX export's trace takes no bool fill_)
        cars.boost.fill_(C.BOOST_SPAWN_AMOUNT)
        cars.ball_hit_info_tick_count_when_hit.fill_(-1)
        cars.ball_hit_info_tick_count_when_extra_impulse_applied.fill_(-1)
        return cars


CarState.SETTABLE = tuple(n for n in CarState.FIELDS if n not in CarState.HIDDEN + ("tick_count_since_update",))


@dataclasses.dataclass(frozen=True)
class BoostPadConfig:
    """The soccar pads in RocketSim's order (6 big, then 28 small), as tensors (BoostPadConfig)."""

    pos: torch.Tensor
    """Pad centre, UU [34, 3]."""
    is_big: torch.Tensor
    """[34] bool."""

    @staticmethod
    def soccar(device: torch.device) -> BoostPadConfig:
        is_big = [True] * len(C.BOOST_PADS_BIG) + [False] * len(C.BOOST_PADS_SMALL)
        return BoostPadConfig(
            pos=torch.tensor(C.BOOST_PADS, dtype=torch.float32, device=device),
            is_big=torch.tensor(is_big, dtype=torch.bool, device=device),
        )


@dataclasses.dataclass
class BoostPadState:
    """The 34 soccar pads of each env, RocketSim's order (6 big, then 28 small) [N, 34]."""

    is_active: torch.Tensor
    """The pad can be picked up [N, 34] bool."""
    cooldown: torch.Tensor
    """Seconds until the pad is active again [N, 34]."""
    prev_locked_car_id: torch.Tensor
    """Id (car index + 1) of the car the pad was locked to on the previous tick, 0: none [N, 34] int32."""

    @staticmethod
    def fresh(num_envs: int, device: torch.device) -> BoostPadState:
        """Every pad active. Each field is stored pad by pad ([34, N] in memory, seen as its [N, 34]
        transpose): the fused step walks one pad of many envs at a time and reads them in place."""
        shape = (C.BOOST_PAD_COUNT, num_envs)
        return BoostPadState(
            is_active=torch.ones(shape, dtype=torch.bool, device=device).t(),
            cooldown=torch.zeros(shape, device=device).t(),
            prev_locked_car_id=torch.zeros(shape, dtype=torch.int32, device=device).t(),
        )


@dataclasses.dataclass
class GameState:
    """Everything that changes per tick in a batch of soccar arenas."""

    ball: BallState
    cars: CarState
    pads: BoostPadState
    tick_count: torch.Tensor
    """Ticks simulated since the arena was made [N] int64 (Arena::tickCount)."""
    blue_score: torch.Tensor
    """Goals blue has scored (the ball in orange's goal, +y) [N] int32, counted as the binding counts
    them: once per run of consecutive scoring ticks."""
    orange_score: torch.Tensor
    """Goals orange has scored (the ball in blue's goal, -y) [N] int32."""
    scored_last_tick: torch.Tensor
    """The ball was in a goal at the end of the previous tick [N] bool (so a goal counts once)."""
    kickoff_count: torch.Tensor
    """Kickoffs so far [N] int64: the counter of each env's kickoff random stream."""

    @staticmethod
    def scoreboard(num_envs: int, device: torch.device) -> dict[str, torch.Tensor]:
        """The fields of a new game besides the ball, cars, pads and tick count: no goals, no kickoffs."""
        return dict(
            blue_score=torch.zeros(num_envs, dtype=torch.int32, device=device),
            orange_score=torch.zeros(num_envs, dtype=torch.int32, device=device),
            scored_last_tick=torch.zeros(num_envs, dtype=torch.bool, device=device),
            kickoff_count=torch.zeros(num_envs, dtype=torch.int64, device=device),
        )


@dataclasses.dataclass
class ArenaEvents:
    """What happened during the ticks of one `Arena.step` call, per env."""

    goal_blue: torch.Tensor
    """Blue scored (the ball went into the +y goal) on at least one stepped tick [N] bool."""
    goal_orange: torch.Tensor
    """Orange scored (the ball went into the -y goal) on at least one stepped tick [N] bool."""
    goal_tick: torch.Tensor
    """Arena tick count right after the first scoring tick of this call, -1 if none [N] int64."""
    ball_touch: torch.Tensor
    """Car touched the ball: its ball_hit_info was updated (RocketSim's touch) [N, C] bool."""
    demo: torch.Tensor
    """Car was demolished [N, C] bool."""
    demoed_by: torch.Tensor
    """Index of the car that demolished it (on the first such tick), -1 if none [N, C] int32."""
    bump: torch.Tensor
    """Car was bumped without being demolished [N, C] bool."""
    bumped_by: torch.Tensor
    """Index of the car that bumped it (on the first such tick), -1 if none [N, C] int32."""
    boost_pickup: torch.Tensor
    """Car picked up a pad [N, C] bool."""
    boost_pickup_pad: torch.Tensor
    """Index of the pad it picked up (RocketSim's order; the first such tick's), -1 if none [N, C] int32."""

    @staticmethod
    def none(num_envs: int, num_cars: int, device: torch.device) -> ArenaEvents:
        no = torch.zeros(num_envs, dtype=torch.bool, device=device)
        no_car = torch.zeros(num_envs, num_cars, dtype=torch.bool, device=device)
        nobody = torch.full((num_envs, num_cars), -1, dtype=torch.int32, device=device)
        return ArenaEvents(
            goal_blue=no,
            goal_orange=no.clone(),
            goal_tick=torch.full((num_envs,), -1, dtype=torch.int64, device=device),
            ball_touch=no_car,
            demo=no_car.clone(),
            demoed_by=nobody,
            bump=no_car.clone(),
            bumped_by=nobody.clone(),
            boost_pickup=no_car.clone(),
            boost_pickup_pad=nobody.clone(),
        )


@dataclasses.dataclass(frozen=True)
class World:
    """What every tick reads and never writes: the geometry, the mutators and the tick parameters."""

    mesh: ArenaMesh
    mutators: MutatorConfig
    params: TickParams
    """Built from ``mutators`` and the tick length (`TickParams.from_mutators`)."""
    cars: CarParams
    """The presets of the C car slots (blue cars first)."""
    pads: BoostPadConfig
    """The 34 soccar boost pads."""
    game: GameConfig
    """Teams, the random streams' seed, and what follows a goal."""
    bullet: ArenaBullet
    """The arena as Bullet holds it for the car bodies' contacts (Bullet units, broadphase cells)."""


@dataclasses.dataclass(frozen=True)
class GameConfig:
    """The game around the physics: the teams, the spawn spots, the random streams, what follows a
    goal (`rules.game_config` builds it)."""

    blue: int
    """Blue cars (car indices 0 .. blue - 1; orange cars follow)."""
    orange: int
    """Orange cars."""
    seed: int
    """Seed of every env's random streams (kickoff and respawn spots), 0 .. 2^32 - 1."""
    kickoff_after_goal: bool
    """Reset an env to a kickoff at the end of each tick that scores a goal (RocketSim never does:
    its goal callback fires on every tick the ball stays in the goal)."""
    is_orange: torch.Tensor
    """Each car's team, orange [C] bool."""
    kickoff_spawns: torch.Tensor
    """Where a kickoff puts a car, per team (0 blue, 1 orange) and spot: x, y, z and the rotation's
    nine entries row by row [2, 5 + extra, 12] float32. Spots 0-4 are CAR_SPAWN_LOCATIONS_SOCCAR's,
    then one per car past the fifth of a team (`kickoff_table`)."""
    respawn_spawns: torch.Tensor
    """Where a respawn puts a car, likewise, over CAR_RESPAWN_LOCATIONS_SOCCAR [2, 4, 12]."""


SPAWN_WIDTH = 12
"""Floats per spot of `GameConfig`'s spawn tables: x, y, z, then the rotation row by row."""


def kickoff_table(team_size: int) -> list[tuple[float, float, float]]:
    """(x, y, yaw) of blue's kickoff spots: the five of CAR_SPAWN_LOCATIONS_SOCCAR, then one row per
    car past the fifth of a team (Arena::ResetToRandomKickoff: the respawn spots in turn, each taken
    again CAR_SPAWN_EXTRA_OFFSET_Y further along y). Values are RocketSim's float32 table entries."""
    spawns = len(C.CAR_SPAWN_LOCATIONS_SOCCAR)
    rows = [tuple(float(np.float32(v)) for v in spot) for spot in C.CAR_SPAWN_LOCATIONS_SOCCAR]
    taken = [0] * len(C.CAR_RESPAWN_LOCATIONS_SOCCAR)
    for i in range(spawns, team_size):
        # RocketSim takes (i - 5) % 5 over its 4 respawn spots (out of bounds from the tenth car on);
        # we wrap over the 4.
        k = (i - spawns) % len(taken)
        x, y, yaw = C.CAR_RESPAWN_LOCATIONS_SOCCAR[k]
        rows.append((x, y + C.CAR_SPAWN_EXTRA_OFFSET_Y * taken[k], float(np.float32(yaw))))
        taken[k] += 1
    return rows
