"""Batched soccar state: dataclasses of tensors whose first axis is the env (N); what a step
reports (`ArenaEvents`); and what every tick reads and never writes (`World`).

Field names are RocketSim's (its Python binding's snake_case spelling). Units: UU, UU/s, rad/s,
seconds. Rotation matrices have columns forward, right, up. Hidden per-tick state that RocketSim does
not expose through get_state() but that a fresh RocketSim arena starts with zeroed carries a leading
underscore in RocketSim's C++ and is named the same way here.
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh import ArenaMesh
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
        pos[:, 2] = C.BALL_REST_Z
        zeros = torch.zeros(num_envs, 3, device=device)
        return BallState(
            pos=pos,
            vel=zeros.clone(),
            ang_vel=zeros.clone(),
            rot_mat=torch.eye(3, device=device).expand(num_envs, 3, 3).clone(),
            velocity_impulse_cache=zeros.clone(),
            tick_count_since_update=torch.zeros(num_envs, dtype=torch.int64, device=device),
        )


@dataclasses.dataclass
class CarState:
    """The cars of each env, blue first then orange: C cars, [N, C, ...] (C may be 0).

    Names follow RocketSim's `CarState`. Ball-only arenas (this stage of the port) hold C = 0; the
    car mechanics that fill these fields come with the cars (ROADMAP "Soccar cars").
    """

    pos: torch.Tensor
    """Position, UU [N, C, 3]."""
    rot_mat: torch.Tensor
    """Orientation, columns forward, right, up [N, C, 3, 3]."""
    vel: torch.Tensor
    """Linear velocity, UU/s [N, C, 3]."""
    ang_vel: torch.Tensor
    """Angular velocity, rad/s [N, C, 3]."""
    boost: torch.Tensor
    """Boost amount, 0-100 [N, C]."""
    is_on_ground: torch.Tensor
    """At least 3 wheels touch [N, C] bool."""
    has_jumped: torch.Tensor
    """[N, C] bool."""
    has_double_jumped: torch.Tensor
    """[N, C] bool."""
    has_flipped: torch.Tensor
    """[N, C] bool."""
    is_jumping: torch.Tensor
    """[N, C] bool."""
    is_flipping: torch.Tensor
    """[N, C] bool."""
    is_supersonic: torch.Tensor
    """[N, C] bool."""
    is_demoed: torch.Tensor
    """[N, C] bool."""
    jump_time: torch.Tensor
    """Seconds since the jump started [N, C]."""
    flip_time: torch.Tensor
    """Seconds since the flip started [N, C]."""
    air_time: torch.Tensor
    """Seconds in the air [N, C]."""
    air_time_since_jump: torch.Tensor
    """Seconds in the air since the jump ended [N, C]."""
    supersonic_time: torch.Tensor
    """Seconds supersonic [N, C]."""
    handbrake_val: torch.Tensor
    """Powerslide amount, 0-1 [N, C]."""
    demo_respawn_timer: torch.Tensor
    """Seconds until respawn [N, C]."""

    @staticmethod
    def empty(num_envs: int, num_cars: int, device: torch.device) -> CarState:
        """All-zero car state for ``num_cars`` cars (identity rotations)."""

        def f(*shape):
            return torch.zeros(num_envs, num_cars, *shape, device=device)

        def b():
            return torch.zeros(num_envs, num_cars, dtype=torch.bool, device=device)

        return CarState(
            pos=f(3),
            rot_mat=torch.eye(3, device=device).expand(num_envs, num_cars, 3, 3).clone(),
            vel=f(3),
            ang_vel=f(3),
            boost=f(),
            is_on_ground=b(),
            has_jumped=b(),
            has_double_jumped=b(),
            has_flipped=b(),
            is_jumping=b(),
            is_flipping=b(),
            is_supersonic=b(),
            is_demoed=b(),
            jump_time=f(),
            flip_time=f(),
            air_time=f(),
            air_time_since_jump=f(),
            supersonic_time=f(),
            handbrake_val=f(),
            demo_respawn_timer=f(),
        )


@dataclasses.dataclass
class BoostPadState:
    """The 34 soccar pads of each env, RocketSim's order (6 big, then 28 small) [N, 34]."""

    is_active: torch.Tensor
    """The pad can be picked up [N, 34] bool."""
    cooldown: torch.Tensor
    """Seconds until the pad is active again [N, 34]."""

    @staticmethod
    def fresh(num_envs: int, device: torch.device) -> BoostPadState:
        return BoostPadState(
            is_active=torch.ones(num_envs, C.BOOST_PAD_COUNT, dtype=torch.bool, device=device),
            cooldown=torch.zeros(num_envs, C.BOOST_PAD_COUNT, device=device),
        )


@dataclasses.dataclass
class GameState:
    """Everything that changes per tick in a batch of soccar arenas."""

    ball: BallState
    cars: CarState
    pads: BoostPadState
    tick_count: torch.Tensor
    """Ticks simulated since the arena was made [N] int64 (Arena::tickCount)."""


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
    """Car touched the ball [N, C] bool."""
    demo: torch.Tensor
    """Car was demolished [N, C] bool."""
    boost_pickup: torch.Tensor
    """Car picked up a pad [N, C] bool."""

    @staticmethod
    def none(num_envs: int, num_cars: int, device: torch.device) -> ArenaEvents:
        no = torch.zeros(num_envs, dtype=torch.bool, device=device)
        no_car = torch.zeros(num_envs, num_cars, dtype=torch.bool, device=device)
        return ArenaEvents(
            goal_blue=no,
            goal_orange=no.clone(),
            goal_tick=torch.full((num_envs,), -1, dtype=torch.int64, device=device),
            ball_touch=no_car,
            demo=no_car.clone(),
            boost_pickup=no_car.clone(),
        )


@dataclasses.dataclass(frozen=True)
class World:
    """What every tick reads and never writes: the geometry, the mutators and the tick parameters."""

    mesh: ArenaMesh
    mutators: MutatorConfig
    params: TickParams
    """Built from ``mutators`` and the tick length (`TickParams.from_mutators`)."""
