"""Per-arena physics parameters: RocketSim's `MutatorConfig`, and `TickParams`, every number a tick
reads, built once from the mutators and the tick length and read by name by the reference mechanics
and the kernels alike."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from nitro.envs.soccar import constants as C


DEMO_MODES = ("normal", "on_contact", "disabled")
"""RocketSim's DemoMode, in its enum's order (TickParams.demo_mode is the index)."""


@dataclasses.dataclass(frozen=True)
class MutatorConfig:
    """The soccar subset of RocketSim's MutatorConfig the ball and cars read (defaults = RocketSim's)."""

    gravity_z: float = C.GRAVITY_Z
    """Gravity along z, UU/s^2."""
    ball_mass: float = C.BALL_MASS_BT
    """Ball mass (Bullet units; only ratios to car mass matter)."""
    ball_max_speed: float = C.BALL_MAX_SPEED
    """Linear speed clamp at the end of each tick, UU/s."""
    ball_drag: float = C.BALL_DRAG
    """Linear damping: velocity is multiplied by (1 - drag)^dt each tick, before gravity."""
    ball_world_friction: float = C.BALL_FRICTION
    """The ball's friction; against the arena Bullet takes min(this, 0.6)."""
    ball_world_restitution: float = C.BALL_RESTITUTION
    """The ball's restitution; against the arena Bullet takes max(this, 0.3)."""
    ball_radius: float = C.BALL_COLLISION_RADIUS_SOCCAR
    """UU."""
    goal_base_threshold_y: float = C.SOCCAR_GOAL_SCORE_BASE_THRESHOLD_Y
    """A goal is scored when |ball y| exceeds this plus the ball radius, UU."""
    jump_accel: float = C.JUMP_ACCEL
    """Upward acceleration while a jump is held, UU/s^2."""
    jump_immediate_force: float = C.JUMP_IMMEDIATE_FORCE
    """Upward velocity a jump starts with, UU/s (the double jump keeps RocketSim's constant)."""
    boost_accel_ground: float = C.BOOST_ACCEL_GROUND
    """Boost acceleration with 3 or more wheels on the ground, UU/s^2."""
    boost_accel_air: float = C.BOOST_ACCEL_AIR
    """Boost acceleration otherwise, UU/s^2."""
    boost_used_per_second: float = C.BOOST_USED_PER_SECOND
    """Boost burnt per second of boosting (of 100)."""
    car_spawn_boost_amount: float = C.BOOST_SPAWN_AMOUNT
    """Boost of a fresh or respawned car."""
    boost_pad_cooldown_big: float = C.BOOST_PAD_COOLDOWN_BIG
    """Seconds a big pad stays inactive after a pickup."""
    boost_pad_cooldown_small: float = C.BOOST_PAD_COOLDOWN_SMALL
    """Seconds a small pad stays inactive after a pickup."""
    car_world_friction: float = C.CARWORLD_COLLISION_FRICTION
    """Friction of every car body contact with the arena (RocketSim's contact callback sets it)."""
    car_world_restitution: float = C.CARWORLD_COLLISION_RESTITUTION
    """Restitution of every car body contact with the arena (likewise)."""
    unlimited_flips: bool = False
    """Flips are possible after a flip or double jump (within the 1.25 s window)."""
    unlimited_double_jumps: bool = False
    """Double jumps likewise."""
    ball_hit_extra_force_scale: float = 1.0
    """Scale of the extra velocity a car's hit gives the ball (Ball::_OnHit)."""
    bump_force_scale: float = 1.0
    """Scale of a bump's upward velocity (RocketSim scales only the upward term)."""
    bump_cooldown_time: float = C.BUMP_COOLDOWN_TIME
    """Seconds before a car can bump or demolish the car it last bumped again."""
    respawn_delay: float = C.DEMO_RESPAWN_TIME
    """Seconds from a demolition to the respawn."""
    demo_mode: str = "normal"
    """When a bump demolishes: "normal" (the bumper is supersonic), "on_contact" (always) or
    "disabled" (never); RocketSim's DemoMode."""
    enable_team_demos: bool = False
    """Bumps between teammates can demolish."""

    def __post_init__(self):
        if self.demo_mode not in DEMO_MODES:
            raise ValueError(f"demo_mode must be one of {DEMO_MODES}, got {self.demo_mode!r}")
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.type == "bool" and not isinstance(value, bool):
                raise ValueError(f"{field.name} must be a bool, got {value!r}")
            if field.type == "float" and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            ):
                raise ValueError(f"{field.name} must be a finite number, got {value!r}")

    @property
    def ball_world_contact_friction(self) -> float:
        """Combined ball-arena friction (btManifoldResult: min against a static body)."""
        return min(self.ball_world_friction, C.ARENA_COLLISION_BASE_FRICTION)

    @property
    def ball_world_contact_restitution(self) -> float:
        """Combined ball-arena restitution (btManifoldResult: max against a static body)."""
        return max(self.ball_world_restitution, C.ARENA_COLLISION_BASE_RESTITUTION)

    @property
    def ball_contact_gap(self) -> float:
        """Bullet's contact breaking threshold for this ball against the arena, UU."""
        return C.contact_breaking_threshold(self.ball_radius)

    @property
    def ball_inv_inertia(self) -> float:
        """1 / (0.4 m r^2) of a solid sphere, with r in UU (so angular impulses come out in rad/s)."""
        return 1.0 / (0.4 * self.ball_mass * self.ball_radius**2)


def damping_factor(drag: float, dt: float) -> float:
    """btRigidBody::applyDamping's per-tick factor, (1 - drag)^dt, computed as Bullet does in float32."""
    return float(np.float32(math.pow(float(np.float32(1.0) - np.float32(drag)), float(np.float32(dt)))))


def flip_z_damp_factor(dt: float) -> float:
    """Car::_UpdateDoubleJumpOrFlip's per-tick z damping while flipping, (1 - 0.35)^(dt / (1 / 120)),
    computed as RocketSim's powf does in float32."""
    f32 = np.float32
    return float((f32(1) - f32(C.FLIP_Z_DAMP_120)) ** (f32(dt) / (f32(1) / f32(120))))


@dataclasses.dataclass(frozen=True)
class TickParams:
    """Every number a tick reads (Python floats), from `MutatorConfig`, the tick length and Bullet's
    solver settings: built once per arena (`from_mutators`), passed whole to the reference mechanics
    and, field by field under the same names, to the kernels."""

    tick_time: float
    """Seconds per tick, dt (RocketSim computes 1 / tick_rate in float32)."""
    gravity_dv: float
    """Velocity gravity adds along z per tick, g dt, UU/s (the solver's external impulse over mass)."""
    ball_damping: float
    """The ball's linear damping factor per tick, (1 - drag)^dt (`damping_factor`)."""
    ball_radius: float
    """UU."""
    ball_contact_gap: float
    """Bullet's contact breaking threshold of the ball against the arena, UU."""
    ball_inv_mass: float
    """1 / ball mass (Bullet mass units)."""
    ball_inv_inertia: float
    """1 / (0.4 m r^2), r in UU, so angular impulses come out in rad/s."""
    ball_restitution: float
    """Combined ball-arena restitution (max against a static body)."""
    ball_friction: float
    """Combined ball-arena friction (min against a static body)."""
    ball_max_speed: float
    """Linear speed clamp at the end of each tick, UU/s."""
    ball_max_ang_speed: float
    """Angular speed clamp at the end of each tick, rad/s."""
    goal_y: float
    """A goal is scored when |ball y| exceeds this (the goal line plus a ball radius), UU."""
    restitution_velocity_threshold: float
    """Approach speed below which a contact does not bounce, UU/s (Bullet's restitution threshold)."""
    friction_direction_epsilon_sq: float
    """Squared sliding speed below which friction takes btPlaneSpace1's direction, UU^2/s^2."""
    erp2_over_dt: float
    """Split-impulse recovery rate: erp2 / dt, 1/s."""
    gravity_z: float
    """Gravity along z, UU/s^2 (the cars' weight is this times their mass)."""
    jump_immediate_force: float
    """Upward velocity a jump starts with, UU/s."""
    jump_accel: float
    """Upward acceleration while a jump is held, UU/s^2."""
    boost_accel_ground: float
    """Boost acceleration with 3 or more wheels on the ground, UU/s^2."""
    boost_accel_air: float
    """Boost acceleration otherwise, UU/s^2."""
    boost_used_per_second: float
    """Boost burnt per second of boosting (of 100)."""
    unlimited_flips: bool
    """Flips are possible after a flip or double jump (within the 1.25 s window)."""
    unlimited_double_jumps: bool
    """Double jumps likewise."""
    flip_z_damp_factor: float
    """A flip's z-velocity damping per tick, (1 - FLIP_Z_DAMP_120)^(dt x 120), in float32 as powf."""
    car_spawn_boost_amount: float
    """Boost of a respawned car."""
    boost_pad_cooldown_big: float
    """Seconds a big pad stays inactive after a pickup."""
    boost_pad_cooldown_small: float
    """Seconds a small pad stays inactive after a pickup."""
    ball_hit_extra_force_scale: float
    """Scale of the extra velocity a car's hit gives the ball."""
    bump_force_scale: float
    """Scale of a bump's upward velocity."""
    bump_cooldown_time: float
    """Seconds before a car can bump the car it last bumped again."""
    respawn_delay: float
    """Seconds from a demolition to the respawn."""
    demo_mode: int
    """0: a supersonic bumper demolishes, 1: every bump does, 2: none does (`DEMO_MODES`' index)."""
    enable_team_demos: bool
    """Bumps between teammates can demolish."""
    car_world_friction: float
    """Friction of every car body contact with the arena."""
    car_world_restitution: float
    """Restitution of every car body contact with the arena."""

    @staticmethod
    def from_mutators(mutators: MutatorConfig, tick_time: float) -> TickParams:
        m, dt = mutators, tick_time
        return TickParams(
            tick_time=dt,
            gravity_dv=m.gravity_z * dt,
            ball_damping=damping_factor(m.ball_drag, dt),
            ball_radius=m.ball_radius,
            ball_contact_gap=m.ball_contact_gap,
            ball_inv_mass=1.0 / m.ball_mass,
            ball_inv_inertia=m.ball_inv_inertia,
            ball_restitution=m.ball_world_contact_restitution,
            ball_friction=m.ball_world_contact_friction,
            ball_max_speed=m.ball_max_speed,
            ball_max_ang_speed=C.BALL_MAX_ANG_SPEED,
            goal_y=m.goal_base_threshold_y + m.ball_radius,
            restitution_velocity_threshold=C.SOLVER_RESTITUTION_VELOCITY_THRESHOLD,
            friction_direction_epsilon_sq=C.FRICTION_DIRECTION_EPSILON_SQ,
            erp2_over_dt=C.SOLVER_ERP2 / dt,
            gravity_z=m.gravity_z,
            jump_immediate_force=m.jump_immediate_force,
            jump_accel=m.jump_accel,
            boost_accel_ground=m.boost_accel_ground,
            boost_accel_air=m.boost_accel_air,
            boost_used_per_second=m.boost_used_per_second,
            unlimited_flips=m.unlimited_flips,
            unlimited_double_jumps=m.unlimited_double_jumps,
            flip_z_damp_factor=flip_z_damp_factor(dt),
            car_spawn_boost_amount=m.car_spawn_boost_amount,
            boost_pad_cooldown_big=m.boost_pad_cooldown_big,
            boost_pad_cooldown_small=m.boost_pad_cooldown_small,
            ball_hit_extra_force_scale=m.ball_hit_extra_force_scale,
            bump_force_scale=m.bump_force_scale,
            bump_cooldown_time=m.bump_cooldown_time,
            respawn_delay=m.respawn_delay,
            demo_mode=DEMO_MODES.index(m.demo_mode),
            enable_team_demos=m.enable_team_demos,
            car_world_friction=m.car_world_friction,
            car_world_restitution=m.car_world_restitution,
        )


# --- The ball as Bullet holds it (Bullet units) -----------------------------------------------------
SPHERE_AABB_EXTRA = float(np.float32(0.08))  # RocketSim's btSphereShape::getAabb adds 0.08 BT


def ball_radius_bt(params: TickParams) -> float:
    """The sphere's radius (its margin) in Bullet units, float32 as RocketSim scales it."""
    return C.f32(C.f32(params.ball_radius) * C.UU_TO_BT_F32)


def ball_breaking_threshold(params: TickParams) -> float:
    """The ball's getContactBreakingThreshold, BT: its bounding sphere (radius + 0.08) times 0.02."""
    disc = ball_radius_bt(params) + 0.08  # a double literal, as in the source
    return C.f32(C.f32(disc) * C.CONTACT_BREAKING_THRESHOLD)


def ball_mass_props(params: TickParams) -> tuple[float, float, float]:
    """The ball's btRigidBody in Bullet units: (inverse mass, inverse inertia, gravity impulse along
    z per tick), float32 as Bullet computes them (setMassProps, setGravity, the solver body)."""
    mass = C.f32(1.0 / params.ball_inv_mass)
    inv_mass = C.f32(1 / mass)
    radius = C.f32(C.f32(params.ball_radius) * C.UU_TO_BT_F32)
    inertia = C.f32(C.f32(C.f32(C.f32(0.4) * mass) * radius) * radius)  # btSphereShape::calculateLocalInertia
    gravity = C.f32(C.f32(params.gravity_z) * C.UU_TO_BT_F32)  # Arena: setGravity(gravity * UU_TO_BT)
    weight = C.f32(gravity * C.f32(1 / inv_mass))  # btRigidBody::setGravity: acceleration / inverse mass
    impulse = C.f32(C.f32(weight * inv_mass) * C.f32(params.tick_time))
    return inv_mass, C.f32(1 / inertia), impulse
