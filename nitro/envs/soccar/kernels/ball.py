"""The ball's mechanics per lane, one stage per function of `ball.py` (its twin), in the same order
and with the same names. `kernels/arena.ball_and_rules_kernel` calls them; the state stays in registers.

Float arguments must be float32 already (`kernels/arena.py` casts the tick parameters on entry).
"""

from __future__ import annotations

from nitro.envs.soccar.kernels import jit, tl
from nitro.envs.soccar.kernels.manifolds import fill16, point_at, sphere_manifolds
from nitro.envs.soccar.kernels.vec import add, cross, dot, scale, sub, where


@jit
def update_sleeping(vel, ang_vel):
    """Arena::Step: the ball sleeps (no gravity, no motion) while both velocities are exactly zero."""
    return (dot(vel, vel) == 0) & (dot(ang_vel, ang_vel) == 0)


@jit
def apply_damping(vel, ball_damping):
    """btRigidBody::applyDamping: v *= (1 - drag)^dt, before gravity (angular damping is 0)."""
    return scale(vel, ball_damping)


@jit
def world_contacts(
    pos,
    awake,
    ball_radius,
    ball_contact_gap,
    arena,
    grid,
    NUM_PLANES: tl.constexpr,
    PLANE_BASE: tl.constexpr,
    MAX_CONTACTS: tl.constexpr,
    DEGENERATE_L2: tl.constexpr,
    SIMD_EPSILON: tl.constexpr,
    MAX_ANGLE: tl.constexpr,
    EDGE_DISTANCE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """The ball's contact manifolds with the arena at the tick's starting position (the points on
    the arena are not kept: the tick never reads them)."""
    return sphere_manifolds(
        pos,
        awake,
        ball_radius,
        ball_contact_gap,
        arena,
        grid,
        NUM_PLANES,
        PLANE_BASE,
        MAX_CONTACTS,
        DEGENERATE_L2,
        SIMD_EPSILON,
        MAX_ANGLE,
        EDGE_DISTANCE,
        False,
        BLOCK,
    )


@jit
def plane_space(n):
    """btPlaneSpace1's first tangent of n (used when there is no sliding direction)."""
    use_yz = tl.abs(n[2]) > 0.7071067811865476
    k_yz = tl.rsqrt(tl.where(use_yz, n[1] * n[1] + n[2] * n[2], 1.0))
    k_xy = tl.rsqrt(tl.where(use_yz, 1.0, n[0] * n[0] + n[1] * n[1]))
    return (
        tl.where(use_yz, 0.0, -n[1] * k_xy),
        tl.where(use_yz, -n[2] * k_yz, n[0] * k_xy),
        tl.where(use_yz, n[1] * k_yz, 0.0),
    )


@jit
def solve_world_contact(
    vel,
    ang_vel,
    manifolds,
    gravity_dv,
    ball_inv_mass,
    ball_inv_inertia,
    ball_restitution,
    ball_friction,
    restitution_velocity_threshold,
    friction_direction_epsilon_sq,
    start,
    ITERATIONS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """RocketSim's "special" ball-world contact (the mean normal and lever arm over the held points),
    solved as Bullet's sequential-impulse solver does: the velocity deltas (dv, dw), ``start``'s (dv,
    dw) where the ball touches nothing (the iterations start from them: the car-ball solve's, or
    zeros). ``vel`` is the damped velocity before gravity."""
    count, offset, normals = manifolds[1], manifolds[2], manifolds[4]  # held points: [slot * 4 + i]
    inv_mass = ball_inv_mass
    inv_inertia = ball_inv_inertia
    zero = tl.zeros([BLOCK], tl.float32)
    total = tl.zeros([BLOCK], tl.int32)
    normal_sum = (zero, zero, zero)
    arm_sum = zero
    for slot in tl.static_range(4):
        if tl.max(count[slot], axis=0) > 0:  # most slots are empty in every lane of the block
            for i in tl.static_range(4):
                held = i < count[slot]
                total += held.to(tl.int32)
                normal_sum = add(normal_sum, where(held, point_at(normals, slot * 4 + i), (0.0, 0.0, 0.0)))
                o = point_at(offset, slot * 4 + i)
                arm_sum += tl.where(held, tl.sqrt(dot(o, o)), 0.0)
    touching = total > 0
    per_point = tl.maximum(total, 1).to(tl.float32)
    normal = (normal_sum[0] / per_point, normal_sum[1] / per_point, normal_sum[2] / per_point)
    arm = scale(normal, -(arm_sum / per_point))  # rel_pos1 of the averaged point
    vel_ext = (vel[0], vel[1], vel[2] + gravity_dv)  # Bullet's solver sees v + gravity impulse

    # Normal row (setupContactConstraint). Restitution uses the body's velocity without gravity.
    spin = cross(ang_vel, arm)
    approach = dot(normal, add(vel, spin))
    restitution = tl.where(
        tl.abs(approach) < restitution_velocity_threshold, 0.0, -ball_restitution * approach
    )
    restitution = tl.maximum(restitution, 0.0)
    torque_n = cross(arm, normal)
    ang_n = scale(torque_n, inv_inertia)
    jac_n = 1.0 / (inv_mass + dot(normal, cross(ang_n, arm)))
    rhs_n = (restitution - (dot(normal, vel_ext) + dot(torque_n, ang_vel))) * jac_n

    # Friction row (convertContactInner): direction of the sliding velocity at the contact point.
    vel_at = add(vel_ext, spin)
    lateral = sub(vel_at, scale(normal, dot(normal, vel_at)))
    lateral2 = dot(lateral, lateral)
    sliding = lateral2 > friction_direction_epsilon_sq
    tangent = where(sliding, scale(lateral, tl.rsqrt(tl.where(sliding, lateral2, 1.0))), plane_space(normal))
    torque_t = cross(arm, tangent)
    ang_t = scale(torque_t, inv_inertia)
    jac_t = 1.0 / (inv_mass + dot(tangent, cross(ang_t, arm)))
    rhs_t = -(dot(tangent, vel_ext) + dot(torque_t, ang_vel)) * jac_t
    friction = ball_friction

    dv0, dw0 = start
    dv = dv0
    dw = dw0
    if tl.max(touching.to(tl.int32), axis=0) > 0:
        impulse_n = zero
        impulse_t = zero
        for _ in range(ITERATIONS):
            # resolveSingleConstraintRowLowerLimit: the normal impulse never pulls.
            delta = rhs_n - (dot(normal, dv) + dot(torque_n, dw)) * jac_n
            new_n = tl.maximum(impulse_n + delta, 0.0)
            delta = new_n - impulse_n
            impulse_n = new_n
            dv = add(dv, scale(normal, inv_mass * delta))
            dw = add(dw, scale(ang_n, delta))
            # resolveSingleConstraintRowGeneric, only while the normal impulse is positive.
            limit = friction * impulse_n
            delta = rhs_t - (dot(tangent, dv) + dot(torque_t, dw)) * jac_t
            new_t = tl.maximum(tl.minimum(impulse_t + delta, limit), -limit)
            delta = tl.where(impulse_n > 0, new_t - impulse_t, 0.0)
            impulse_t += delta
            dv = add(dv, scale(tangent, inv_mass * delta))
            dw = add(dw, scale(ang_t, delta))
        dv = where(touching, dv, dv0)
        dw = where(touching, dw, dw0)
    return dv, dw


@jit
def split_impulse_push(
    manifolds,
    ball_inv_mass,
    ball_inv_inertia,
    erp2_over_dt,
    start,
    ITERATIONS: tl.constexpr,
    PUSH_POINTS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Penetration recovery, Bullet's split impulse: Gauss-Seidel over the first PUSH_POINTS
    penetrating points, in manifold order. Walking all 16 manifold points with the others inactive
    applies the same updates in the same order; a point no lane of the block uses is skipped."""
    count, offset, normal, depth = manifolds[1], manifolds[2], manifolds[4], manifolds[5]
    inv_mass = ball_inv_mass
    inv_inertia = ball_inv_inertia
    zero = tl.zeros([BLOCK], tl.float32)
    push, turn = start  # (push, turn) the iterations start from (the car-ball solve's)
    penetrating = tl.zeros([BLOCK], tl.int32)
    for k in tl.static_range(16):
        penetrating += (((k % 4) < count[k // 4]) & (depth[k] < 0)).to(tl.int32)
    if tl.max(penetrating, axis=0) > 0:
        rank = tl.zeros([BLOCK], tl.int32)
        active = ()
        used = ()
        for k in tl.static_range(16):
            pen = ((k % 4) < count[k // 4]) & (depth[k] < 0)
            act = pen & (rank < PUSH_POINTS)
            rank += pen.to(tl.int32)
            active = active + (act,)
            used = used + (tl.max(act.to(tl.int32), axis=0) > 0,)
        applied = fill16(zero)
        for _ in range(ITERATIONS):  # a runtime loop: a tenth of the code of unrolling
            for k in tl.static_range(16):  # resolveSplitPenetrationImpulse, point by point
                if used[k]:
                    arm = point_at(offset, k)
                    normal_k = point_at(normal, k)
                    torque = cross(arm, normal_k)
                    ang = scale(torque, inv_inertia)
                    jac = 1.0 / (inv_mass + dot(normal_k, cross(ang, arm)))
                    rhs = tl.where(active[k], -depth[k] * erp2_over_dt * jac, 0.0)
                    delta = rhs - (dot(normal_k, push) + dot(torque, turn)) * jac
                    new = tl.maximum(applied[k] + delta, 0.0)
                    delta = tl.where(active[k], new - applied[k], 0.0)
                    applied = applied[:k] + (applied[k] + delta,) + applied[k + 1 :]
                    push = add(push, scale(normal_k, inv_mass * delta))
                    turn = add(turn, scale(ang, delta))
    return push


@jit
def integrate(pos, vel, ang_vel, dv, dw, push, tick_time, gravity_dv):
    """Solver write-back then btDiscreteDynamicsWorld::integrateTransforms (semi-implicit Euler)."""
    dt = tick_time
    vel = ((vel[0] + dv[0]) + 0.0, (vel[1] + dv[1]) + 0.0, (vel[2] + dv[2]) + gravity_dv)
    ang_vel = add(ang_vel, dw)
    pos = add(add(pos, scale(push, dt)), scale(vel, dt))
    return pos, vel, ang_vel


@jit
def physics_step(
    ball_pos,
    ball_vel,
    ball_ang_vel,
    awake,
    tick_time,
    gravity_dv,
    ball_damping,
    ball_radius,
    ball_contact_gap,
    ball_inv_mass,
    ball_inv_inertia,
    ball_restitution,
    ball_friction,
    restitution_velocity_threshold,
    friction_direction_epsilon_sq,
    erp2_over_dt,
    arena,
    grid,
    start,
    NUM_PLANES: tl.constexpr,
    PLANE_BASE: tl.constexpr,
    MAX_CONTACTS: tl.constexpr,
    DEGENERATE_L2: tl.constexpr,
    SIMD_EPSILON: tl.constexpr,
    MAX_ANGLE: tl.constexpr,
    EDGE_DISTANCE: tl.constexpr,
    ITERATIONS: tl.constexpr,
    PUSH_POINTS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """The ball's part of btDiscreteDynamicsWorld::stepSimulation; a sleeping ball (not ``awake``) is
    neither collided nor solved, and is integrated without gravity (it moves only by ``start``).
    ``start``: (dv, dw, push, turn), UU/s and rad/s, what the iterations start from (the fused
    tick's car-ball solve, `kernels/car_contacts.solve_bodies`; zeros for the ball alone)."""
    manifolds = world_contacts(
        ball_pos,
        awake,
        ball_radius,
        ball_contact_gap,
        arena,
        grid,
        NUM_PLANES,
        PLANE_BASE,
        MAX_CONTACTS,
        DEGENERATE_L2,
        SIMD_EPSILON,
        MAX_ANGLE,
        EDGE_DISTANCE,
        BLOCK,
    )
    vel = apply_damping(ball_vel, ball_damping)  # after the contacts (independent): fewer live registers
    dv, dw = solve_world_contact(
        vel,
        ball_ang_vel,
        manifolds,
        gravity_dv,
        ball_inv_mass,
        ball_inv_inertia,
        ball_restitution,
        ball_friction,
        restitution_velocity_threshold,
        friction_direction_epsilon_sq,
        (start[0], start[1]),
        ITERATIONS,
        BLOCK,
    )
    push = split_impulse_push(
        manifolds, ball_inv_mass, ball_inv_inertia, erp2_over_dt, (start[2], start[3]), ITERATIONS, PUSH_POINTS,
        BLOCK,
    )  # fmt: skip
    pos, vel, ang_vel = integrate(ball_pos, vel, ball_ang_vel, dv, dw, push, tick_time, gravity_dv)
    woken = integrate(ball_pos, ball_vel, ball_ang_vel, start[0], start[1], start[2], tick_time, 0.0)
    return where(awake, pos, woken[0]), where(awake, vel, woken[1]), where(awake, ang_vel, woken[2])


@jit
def clamp_norm(v, limit):
    """Scale v down to ``limit`` where it is longer (v.normalized() * limit, as Bullet)."""
    norm2 = dot(v, v)
    over = norm2 > limit * limit
    return where(over, scale(v, tl.where(over, limit * tl.rsqrt(tl.where(over, norm2, 1.0)), 1.0)), v)


@jit
def finish_physics_tick(
    vel, ang_vel, velocity_impulse_cache, tick_count_since_update, ball_max_speed, ball_max_ang_speed
):
    """Ball::_FinishPhysicsTick: add the cached hit velocity, clamp speeds, count the tick."""
    vel = add(vel, velocity_impulse_cache)
    return (
        clamp_norm(vel, ball_max_speed),
        clamp_norm(ang_vel, ball_max_ang_speed),
        scale(velocity_impulse_cache, 0.0),
        tick_count_since_update + 1,
    )


@jit
def is_ball_scored(pos, goal_y):
    """Arena::IsBallScored (soccar): |y| beyond the goal line by a ball radius."""
    return tl.abs(pos[1]) > goal_y
