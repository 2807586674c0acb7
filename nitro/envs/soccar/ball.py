"""Ball mechanics, one function per mechanic, in the order RocketSim runs them each tick.

Reference: RocketSim (ZealanL/RocketSim, MIT) `Arena::Step`, `Ball.cpp`, and the Bullet 3.24 it
vendors (btDiscreteDynamicsWorld::stepSimulation, btSequentialImpulseConstraintSolver with RocketSim's
changes). Per tick, for the ball alone:

1. `update_sleeping`: a ball with exactly zero linear and angular velocity sleeps (the kickoff freeze).
2. Bullet step: gravity is queued as a force, `apply_damping` scales the velocity by (1 - drag)^dt,
   `world_contacts` finds the arena features within the contact gap of the ball *where it is now*
   and files them into Bullet's 4-point manifolds (one per arena object), `solve_world_contact` solves RocketSim's single averaged
   ball-world contact over all held points (restitution, friction, 10 sequential-impulse
   iterations), `split_impulse_push` moves penetrating balls back out (position only), and
   `integrate` writes the velocities back (gravity enters here) and advances the position.
3. `finish_physics_tick`: the cached hit impulse is added and the speeds are clamped.
4. `is_ball_scored`: the goal test.

All functions are pure, over [N, ...] tensors, with no host synchronisation.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.collide import MANIFOLD_POINTS, ContactManifolds, sphere_manifolds
from nitro.envs.soccar.mesh import ArenaMesh, cross, dot, eager_cpu_width
from nitro.envs.soccar.mutators import MutatorConfig
from nitro.envs.soccar.state import BallState

# Penetrating points that take part in the split-impulse recovery, in manifold order. Points of one
# manifold mostly share a normal, and Gauss-Seidel resolves a repeated normal on its first point.
MAX_PUSH_POINTS = 8


def damping_factor(drag: float, dt: float) -> float:
    """btRigidBody::applyDamping's per-tick factor, (1 - drag)^dt, computed as Bullet does in float32."""
    return float(np.float32(math.pow(float(np.float32(1.0) - np.float32(drag)), float(np.float32(dt)))))


def update_sleeping(ball: BallState) -> torch.Tensor:
    """Arena::Step: the ball sleeps (no gravity, no motion) while both velocities are exactly zero [N]."""
    return (dot(ball.vel, ball.vel) == 0) & (dot(ball.ang_vel, ball.ang_vel) == 0)


def apply_damping(vel: torch.Tensor, factor: float) -> torch.Tensor:
    """btRigidBody::applyDamping: v *= (1 - drag)^dt, before gravity (angular damping is 0)."""
    return vel * factor


def world_contacts(mesh: ArenaMesh, pos: torch.Tensor, mutators: MutatorConfig) -> ContactManifolds:
    """The ball's contact manifolds with the arena at the tick's starting position.

    Bullet detects contacts before it integrates, against every feature within the contact gap, and
    files them into one 4-point manifold per arena object (see `collide.sphere_manifolds`).
    """
    return sphere_manifolds(mesh, pos, mutators.ball_radius, mutators.ball_contact_gap)


def _plane_space(n: torch.Tensor) -> torch.Tensor:
    """btPlaneSpace1's first tangent of ``n`` [N, 3] (used when there is no sliding direction)."""
    nx, ny, nz = n.unbind(-1)
    use_yz = nz.abs() > math.sqrt(0.5)
    k_yz = torch.rsqrt(torch.where(use_yz, ny * ny + nz * nz, 1))
    k_xy = torch.rsqrt(torch.where(use_yz, 1, nx * nx + ny * ny))
    zero = torch.zeros_like(nx)
    yz = torch.stack((zero, -nz * k_yz, ny * k_yz), -1)
    xy = torch.stack((-ny * k_xy, nx * k_xy, zero), -1)
    return torch.where(use_yz[..., None], yz, xy)


def solve_world_contact(
    vel: torch.Tensor, ang_vel: torch.Tensor, manifolds: ContactManifolds, dt: float, mutators: MutatorConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """RocketSim's "special" ball-world contact, solved as Bullet's sequential-impulse solver does.

    RocketSim marks every ball-world contact point as special and replaces them, each tick, with one
    constraint: normal = the *mean* of the held points' normals (not renormalised, so it is shorter
    than 1 where surfaces meet), lever arm = -normal * mean distance from the centre to the points.
    Its normal row bounces with restitution e when the approach speed exceeds 10 UU/s (Bullet's
    restitution threshold) and otherwise just stops the approach; there is no positional term,
    because RocketSim removed the speculative-contact term and the averaged point reports a positive
    distance. One friction row (along the sliding velocity) is limited by mu times the normal
    impulse. Both rows iterate 10 times (Gauss-Seidel).

    ``vel`` is the damped velocity before gravity. Returns the velocity deltas (dv [N, 3] UU/s,
    dw [N, 3] rad/s), zero where the ball touches nothing.
    """
    inv_mass = 1.0 / mutators.ball_mass
    inv_inertia = mutators.ball_inv_inertia
    held = torch.arange(MANIFOLD_POINTS, device=vel.device) < manifolds.count[..., None]  # [N, S, 4]
    total = held.sum((1, 2))
    touching = total > 0
    per_point = total.clamp(min=1).to(vel.dtype)[:, None]
    normal = torch.where(held[..., None], manifolds.normal, 0.0).sum((1, 2)) / per_point
    arm_length = (
        torch.where(held, torch.linalg.vector_norm(manifolds.offset, dim=-1), 0.0).sum((1, 2))
        / per_point[:, 0]
    )
    arm = normal * -arm_length[:, None]  # rel_pos1 of the averaged point
    gravity_dv = torch.zeros_like(vel)
    gravity_dv[:, 2] = mutators.gravity_z * dt
    vel_ext = vel + gravity_dv  # Bullet's solver sees v + gravity impulse (m_externalForceImpulse)

    # Normal row (setupContactConstraint). Restitution uses the body's velocity without gravity.
    approach = dot(normal, vel + cross(ang_vel, arm))
    restitution = torch.where(
        approach.abs() < C.SOLVER_RESTITUTION_VELOCITY_THRESHOLD,
        0.0,
        -mutators.ball_world_contact_restitution * approach,
    ).clamp(min=0)
    torque_n = cross(arm, normal)
    ang_n = torque_n * inv_inertia
    jac_n = 1.0 / (inv_mass + dot(normal, cross(ang_n, arm)))
    rhs_n = (restitution - (dot(normal, vel_ext) + dot(torque_n, ang_vel))) * jac_n

    # Friction row (convertContactInner): direction of the sliding velocity at the contact point.
    vel_at = vel_ext + cross(ang_vel, arm)
    lateral = vel_at - normal * dot(normal, vel_at)[:, None]
    lateral2 = dot(lateral, lateral)
    sliding = lateral2 > C.FRICTION_DIRECTION_EPSILON_SQ
    tangent = torch.where(
        sliding[:, None],
        lateral * torch.rsqrt(torch.where(sliding, lateral2, 1))[:, None],
        _plane_space(normal),
    )
    torque_t = cross(arm, tangent)
    ang_t = torque_t * inv_inertia
    jac_t = 1.0 / (inv_mass + dot(tangent, cross(ang_t, arm)))
    rhs_t = -(dot(tangent, vel_ext) + dot(torque_t, ang_vel)) * jac_t
    friction = mutators.ball_world_contact_friction

    dv = torch.zeros_like(vel)
    dw = torch.zeros_like(ang_vel)
    impulse_n = torch.zeros_like(rhs_n)
    impulse_t = torch.zeros_like(rhs_t)
    for _ in range(C.SOLVER_NUM_ITERATIONS):
        # resolveSingleConstraintRowLowerLimit: the normal impulse never pulls.
        delta = rhs_n - (dot(normal, dv) + dot(torque_n, dw)) * jac_n
        new_n = (impulse_n + delta).clamp(min=0)
        delta = new_n - impulse_n
        impulse_n = new_n
        dv = dv + normal * (inv_mass * delta)[:, None]
        dw = dw + ang_n * delta[:, None]
        # resolveSingleConstraintRowGeneric, only while the normal impulse is positive.
        limit = friction * impulse_n
        delta = rhs_t - (dot(tangent, dv) + dot(torque_t, dw)) * jac_t
        new_t = torch.maximum(torch.minimum(impulse_t + delta, limit), -limit)
        delta = torch.where(impulse_n > 0, new_t - impulse_t, 0.0)
        impulse_t = impulse_t + delta
        dv = dv + tangent * (inv_mass * delta)[:, None]
        dw = dw + ang_t * delta[:, None]
    return torch.where(touching[:, None], dv, 0.0), torch.where(touching[:, None], dw, 0.0)


def split_impulse_push(manifolds: ContactManifolds, dt: float, mutators: MutatorConfig) -> torch.Tensor:
    """Penetration recovery: Bullet's split impulse over the held contact points [N, 3] UU/s.

    The averaged constraint never corrects position; the individual points (skipped by the velocity
    solve) still run Bullet's split-impulse pass, which moves the ball (position only) out by
    erp2 = 0.8 of each penetration per tick. Points in the gap (depth >= 0) do not push.
    """
    n = manifolds.count.shape[0]
    inv_mass = 1.0 / mutators.ball_mass
    inv_inertia = mutators.ball_inv_inertia
    held = torch.arange(MANIFOLD_POINTS, device=manifolds.depth.device) < manifolds.count[..., None]
    penetrating = (held & (manifolds.depth < 0)).reshape(n, -1)
    # The first MAX_PUSH_POINTS penetrating points, in manifold order.
    width = eager_cpu_width(penetrating.sum(1), MAX_PUSH_POINTS)
    order = torch.sort((~penetrating).to(torch.int8), dim=1, stable=True).indices[:, :width]
    active = penetrating.gather(1, order)
    take3 = order[..., None].expand(-1, -1, 3)
    normal = manifolds.normal.reshape(n, -1, 3).gather(1, take3)
    arm = manifolds.offset.reshape(n, -1, 3).gather(1, take3)  # rel_pos1 of the point
    depth = manifolds.depth.reshape(n, -1).gather(1, order)
    torque = cross(arm, normal)
    ang = torque * inv_inertia
    jac = 1.0 / (inv_mass + dot(normal, cross(ang, arm)))
    rhs = torch.where(active, -depth * (C.SOLVER_ERP2 / dt) * jac, 0.0)  # [N, P]
    push = torch.zeros(n, 3, dtype=normal.dtype, device=normal.device)
    turn = torch.zeros_like(push)
    applied = [torch.zeros_like(rhs[:, 0]) for _ in range(normal.shape[1])]
    for _ in range(C.SOLVER_NUM_ITERATIONS):
        for k in range(normal.shape[1]):  # resolveSplitPenetrationImpulse, point by point
            delta = rhs[:, k] - (dot(normal[:, k], push) + dot(torque[:, k], turn)) * jac[:, k]
            new = (applied[k] + delta).clamp(min=0)
            delta = torch.where(active[:, k], new - applied[k], 0.0)
            applied[k] = applied[k] + delta
            push = push + normal[:, k] * (inv_mass * delta)[:, None]
            turn = turn + ang[:, k] * delta[:, None]
    return push


def integrate(pos, vel, ang_vel, dv, dw, push, dt: float, mutators: MutatorConfig):
    """Solver write-back then btDiscreteDynamicsWorld::integrateTransforms (semi-implicit Euler).

    v <- v + dv + g dt (gravity enters as the solver's external impulse), w <- w + dw, the split
    impulse moves the position by push * dt, then the position advances by the new velocity. The
    orientation is not integrated (noBallRot).
    """
    gravity_dv = torch.zeros_like(vel)
    gravity_dv[:, 2] = mutators.gravity_z * dt
    vel = (vel + dv) + gravity_dv
    ang_vel = ang_vel + dw
    pos = (pos + push * dt) + vel * dt
    return pos, vel, ang_vel


def physics_step(
    ball: BallState, sleeping: torch.Tensor, mesh: ArenaMesh, dt: float, mutators: MutatorConfig
) -> BallState:
    """The ball's part of btDiscreteDynamicsWorld::stepSimulation (one substep of ``dt`` seconds)."""
    vel = apply_damping(ball.vel, damping_factor(mutators.ball_drag, dt))
    manifolds = world_contacts(mesh, ball.pos, mutators)
    dv, dw = solve_world_contact(vel, ball.ang_vel, manifolds, dt, mutators)
    push = split_impulse_push(manifolds, dt, mutators)
    pos, vel, ang_vel = integrate(ball.pos, vel, ball.ang_vel, dv, dw, push, dt, mutators)
    awake = ~sleeping[:, None]  # a sleeping ball is neither collided, solved nor integrated
    return dataclasses.replace(
        ball,
        pos=torch.where(awake, pos, ball.pos),
        vel=torch.where(awake, vel, ball.vel),
        ang_vel=torch.where(awake, ang_vel, ball.ang_vel),
    )


def _clamp_norm(v: torch.Tensor, limit: float) -> torch.Tensor:
    """Scale rows of ``v`` longer than ``limit`` down to it (v.normalized() * limit, as Bullet)."""
    norm2 = dot(v, v)
    over = norm2 > limit * limit
    return torch.where(over[:, None], v * (limit * torch.rsqrt(torch.where(over, norm2, 1)))[:, None], v)


def finish_physics_tick(ball: BallState, mutators: MutatorConfig) -> BallState:
    """Ball::_FinishPhysicsTick: add the cached hit velocity, clamp speeds, count the tick."""
    vel = ball.vel + ball.velocity_impulse_cache
    return dataclasses.replace(
        ball,
        vel=_clamp_norm(vel, mutators.ball_max_speed),
        ang_vel=_clamp_norm(ball.ang_vel, C.BALL_MAX_ANG_SPEED),
        velocity_impulse_cache=torch.zeros_like(ball.velocity_impulse_cache),
        tick_count_since_update=ball.tick_count_since_update + 1,
    )


def is_ball_scored(pos: torch.Tensor, mutators: MutatorConfig) -> torch.Tensor:
    """Arena::IsBallScored (soccar): |y| beyond the goal line by a ball radius [N] bool."""
    return pos[:, 1].abs() > (mutators.goal_base_threshold_y + mutators.ball_radius)
