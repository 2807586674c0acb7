"""Per-arena physics parameters (RocketSim `MutatorConfig`), shared by every env of an Arena."""

from __future__ import annotations

import dataclasses

from nitro.envs.soccar import constants as C


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
    unlimited_flips: bool = False
    """Flips are possible after a flip or double jump (within the 1.25 s window)."""
    unlimited_double_jumps: bool = False
    """Double jumps likewise."""

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
