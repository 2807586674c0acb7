"""Ball mechanics, one function per mechanic, in the order RocketSim runs them each tick.

Reference: RocketSim (ZealanL/RocketSim, MIT) `Arena::Step`, `Ball.cpp`, and the Bullet 3.24 it
vendors (btDiscreteDynamicsWorld::stepSimulation, btSequentialImpulseConstraintSolver with RocketSim's
changes). Per tick, for the ball alone:

1. `update_sleeping`: a ball with exactly zero linear and angular velocity sleeps (the kickoff freeze).
2. Bullet step: gravity is queued as a force, `apply_damping` scales the velocity by (1 - drag)^dt,
   `world_contacts` finds the arena features within the contact gap of the ball *where it is now*
   and files them into Bullet's 4-point manifolds (one per arena object), `solve_world_contact`
   solves RocketSim's single averaged ball-world contact over all held points (restitution,
   friction, 10 sequential-impulse iterations), `split_impulse_push` moves penetrating balls back out (position only), and
   `integrate` writes the velocities back (gravity enters here) and advances the position.
3. `finish_physics_tick`: the cached hit impulse is added and the speeds are clamped.
4. `is_ball_scored`: the goal test.

All functions are pure, over [N, ...] tensors, with no host synchronisation; they read the tick's
numbers from `TickParams` by name. The kernels' twin is `kernels/ball.py` (the same stages, per lane).
"""

from __future__ import annotations

import dataclasses
import math

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh import ArenaMesh
from nitro.envs.soccar.contacts import MAX_PUSH_POINTS, ContactManifolds
from nitro.envs.soccar.manifolds import sphere_manifolds
from nitro.envs.soccar.mutators import TickParams
from nitro.envs.soccar.state import BallState
from nitro.envs.soccar.vec import cross, dot, eager_cpu_width


def update_sleeping(ball: BallState) -> torch.Tensor:
    """Arena::Step: the ball sleeps (no gravity, no motion) while both velocities are exactly zero [N]."""
    return (dot(ball.vel, ball.vel) == 0) & (dot(ball.ang_vel, ball.ang_vel) == 0)


def apply_damping(vel: torch.Tensor, params: TickParams) -> torch.Tensor:
    """btRigidBody::applyDamping: v *= (1 - drag)^dt, before gravity (angular damping is 0)."""
    return vel * params.ball_damping


def world_contacts(mesh: ArenaMesh, pos: torch.Tensor, params: TickParams) -> ContactManifolds:
    """The ball's contact manifolds with the arena at the tick's starting position.

    Bullet detects contacts before it integrates, against every feature within the contact gap, and
    files them into one 4-point manifold per arena object (see `manifolds.sphere_manifolds`).
    """
    return sphere_manifolds(mesh, pos, params.ball_radius, params.ball_contact_gap)


def plane_space(n: torch.Tensor) -> torch.Tensor:
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
    vel: torch.Tensor,
    ang_vel: torch.Tensor,
    manifolds: ContactManifolds,
    params: TickParams,
    start: tuple[torch.Tensor, torch.Tensor] | None = None,
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
    dw [N, 3] rad/s), zero where the ball touches nothing, or ``start``'s (dv, dw): the deltas the
    iterations start from (the fused tick's car-ball solve, `car_contacts.solve_bodies`).
    """
    inv_mass = params.ball_inv_mass
    inv_inertia = params.ball_inv_inertia
    held = manifolds.held()  # [N, S, 4]
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
    gravity_dv[:, 2].fill_(params.gravity_dv)  # (a fill: nothing copied from the host)
    vel_ext = vel + gravity_dv  # Bullet's solver sees v + gravity impulse (m_externalForceImpulse)

    # Normal row (setupContactConstraint). Restitution uses the body's velocity without gravity.
    approach = dot(normal, vel + cross(ang_vel, arm))
    restitution = torch.where(
        approach.abs() < params.restitution_velocity_threshold,
        0.0,
        -params.ball_restitution * approach,
    ).clamp(min=0)
    torque_n = cross(arm, normal)
    ang_n = torque_n * inv_inertia
    jac_n = 1.0 / (inv_mass + dot(normal, cross(ang_n, arm)))
    rhs_n = (restitution - (dot(normal, vel_ext) + dot(torque_n, ang_vel))) * jac_n

    # Friction row (convertContactInner): direction of the sliding velocity at the contact point.
    vel_at = vel_ext + cross(ang_vel, arm)
    lateral = vel_at - normal * dot(normal, vel_at)[:, None]
    lateral2 = dot(lateral, lateral)
    sliding = lateral2 > params.friction_direction_epsilon_sq
    tangent = torch.where(
        sliding[:, None],
        lateral * torch.rsqrt(torch.where(sliding, lateral2, 1))[:, None],
        plane_space(normal),
    )
    torque_t = cross(arm, tangent)
    ang_t = torque_t * inv_inertia
    jac_t = 1.0 / (inv_mass + dot(tangent, cross(ang_t, arm)))
    rhs_t = -(dot(tangent, vel_ext) + dot(torque_t, ang_vel)) * jac_t
    friction = params.ball_friction

    dv0, dw0 = (torch.zeros_like(vel), torch.zeros_like(ang_vel)) if start is None else start
    dv, dw = dv0, dw0
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
    return torch.where(touching[:, None], dv, dv0), torch.where(touching[:, None], dw, dw0)


def split_impulse_push(
    manifolds: ContactManifolds, params: TickParams, start: tuple[torch.Tensor, torch.Tensor] | None = None
) -> torch.Tensor:
    """Penetration recovery: Bullet's split impulse over the held contact points [N, 3] UU/s.

    The averaged constraint never corrects position; the individual points (skipped by the velocity
    solve) still run Bullet's split-impulse pass, which moves the ball (position only) out by
    erp2 = 0.8 of each penetration per tick. Points in the gap (depth >= 0) do not push. ``start``:
    the (push, turn) the iterations start from (as `solve_world_contact`'s).
    """
    n = manifolds.count.shape[0]
    inv_mass = params.ball_inv_mass
    inv_inertia = params.ball_inv_inertia
    held = manifolds.held()
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
    rhs = torch.where(active, -depth * params.erp2_over_dt * jac, 0.0)  # [N, P]
    if start is None:
        push = torch.zeros(n, 3, dtype=normal.dtype, device=normal.device)
        turn = torch.zeros_like(push)
    else:
        push, turn = start
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


def integrate(pos, vel, ang_vel, dv, dw, push, params: TickParams):
    """Solver write-back then btDiscreteDynamicsWorld::integrateTransforms (semi-implicit Euler).

    v <- v + dv + g dt (gravity enters as the solver's external impulse), w <- w + dw, the split
    impulse moves the position by push * dt, then the position advances by the new velocity. The
    orientation is not integrated (noBallRot).
    """
    dt = params.tick_time
    gravity_dv = torch.zeros_like(vel)
    gravity_dv[:, 2].fill_(params.gravity_dv)  # (a fill: nothing copied from the host)
    vel = (vel + dv) + gravity_dv
    ang_vel = ang_vel + dw
    pos = (pos + push * dt) + vel * dt
    return pos, vel, ang_vel


def physics_step(
    ball: BallState,
    sleeping: torch.Tensor,
    mesh: ArenaMesh,
    params: TickParams,
    start: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> BallState:
    """The ball's part of btDiscreteDynamicsWorld::stepSimulation (one substep of a tick).

    ``start``: (dv, dw, push, turn), UU/s and rad/s, the ball's deltas from the fused tick's car-ball
    solve (`car_contacts.solve_bodies`), which its arena contact's iterations start from; a sleeping
    ball takes them without gravity and without arena contacts, as Bullet integrates a ball a car
    woke."""
    vel = apply_damping(ball.vel, params)
    manifolds = world_contacts(mesh, ball.pos, params)
    dv, dw = solve_world_contact(vel, ball.ang_vel, manifolds, params, None if start is None else start[:2])
    push = split_impulse_push(manifolds, params, None if start is None else start[2:])
    pos, vel, ang_vel = integrate(ball.pos, vel, ball.ang_vel, dv, dw, push, params)
    awake = ~sleeping[:, None]  # a sleeping ball is neither collided, solved nor integrated
    if start is not None:  # ... unless a car moves it
        woken = integrate(ball.pos, ball.vel, ball.ang_vel, *start[:3], dataclasses.replace(params, gravity_dv=0.0))
        pos, vel, ang_vel = (torch.where(awake, a, b) for a, b in zip((pos, vel, ang_vel), woken))
        return dataclasses.replace(ball, pos=pos, vel=vel, ang_vel=ang_vel)
    return dataclasses.replace(
        ball,
        pos=torch.where(awake, pos, ball.pos),
        vel=torch.where(awake, vel, ball.vel),
        ang_vel=torch.where(awake, ang_vel, ball.ang_vel),
    )


def clamp_norm(v: torch.Tensor, limit: float) -> torch.Tensor:
    """Scale rows of ``v`` longer than ``limit`` down to it (v.normalized() * limit, as Bullet)."""
    norm2 = dot(v, v)
    over = norm2 > limit * limit
    return torch.where(over[:, None], v * (limit * torch.rsqrt(torch.where(over, norm2, 1)))[:, None], v)


def finish_physics_tick(ball: BallState, params: TickParams) -> BallState:
    """Ball::_FinishPhysicsTick: add the cached hit velocity, clamp speeds, count the tick."""
    vel = ball.vel + ball.velocity_impulse_cache
    return dataclasses.replace(
        ball,
        vel=clamp_norm(vel, params.ball_max_speed),
        ang_vel=clamp_norm(ball.ang_vel, params.ball_max_ang_speed),
        velocity_impulse_cache=torch.zeros_like(ball.velocity_impulse_cache),
        tick_count_since_update=ball.tick_count_since_update + 1,
    )


def is_ball_scored(pos: torch.Tensor, params: TickParams) -> torch.Tensor:
    """Arena::IsBallScored (soccar): |y| beyond the goal line by a ball radius [N] bool."""
    return pos[:, 1].abs() > params.goal_y
