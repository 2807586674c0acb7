"""The car's rigid body per lane: the twin of `rigid_body.py` (Bullet's btRigidBody, btTransformUtil,
btMatrix3x3 and btQuaternion as RocketSim runs them), the same functions in the same order.

Vectors are (x, y, z) tuples of per-lane values (`vec`), matrices tuples of three rows (as
btMatrix3x3: a rotation's columns are the car's forward, right and up axes), quaternions (x, y, z, w).
Sums run in the order the reference (and Bullet's SSE code) adds.
"""

from __future__ import annotations

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.kernels import constexpr, jit, tl
from nitro.envs.soccar.kernels.vec import add, cross, dot, scale, where

INV_MASS = constexpr(1.0 / C.CAR_MASS_BT)
CAR_MASS_BT = constexpr(C.CAR_MASS_BT)
SIMD_EPSILON = constexpr(C.SIMD_EPSILON)
ANGULAR_MOTION_THRESHOLD = constexpr(C.ANGULAR_MOTION_THRESHOLD)
SOLVER_SPLIT_IMPULSE_TURN_ERP = constexpr(C.SOLVER_SPLIT_IMPULSE_TURN_ERP)
CAR_MAX_SPEED = constexpr(C.CAR_MAX_SPEED)
CAR_MAX_ANG_SPEED = constexpr(C.CAR_MAX_ANG_SPEED)


# --- btMatrix3x3 / btVector3 (SSE summation order) --------------------------------------------------


@jit
def column(m, j: tl.constexpr):
    """Column j of m: the car's forward (0), right (1) or up (2) axis of a rotation."""
    return m[0][j], m[1][j], m[2][j]


@jit
def transpose(m):
    return column(m, 0), column(m, 1), column(m, 2)


@jit
def mat_vec(m, v):
    """m * v: each row dotted with v, (x + y) + z."""
    return dot(m[0], v), dot(m[1], v), dot(m[2], v)


@jit
def vec_mat(v, m):
    """v * m (Bullet's row vector times matrix, m^T v): (v.x row0 + v.y row1) + v.z row2."""
    return add(add(scale(m[0], v[0]), scale(m[1], v[1])), scale(m[2], v[2]))


@jit
def mat_mul(a, b):
    """a * b, each result row (a[i][0] b.row0 + a[i][1] b.row1) + a[i][2] b.row2."""
    return vec_mat(a[0], b), vec_mat(a[1], b), vec_mat(a[2], b)


@jit
def cofac(m, r1: tl.constexpr, c1: tl.constexpr, r2: tl.constexpr, c2: tl.constexpr):
    return m[r1][c1] * m[r2][c2] - m[r1][c2] * m[r2][c1]


@jit
def mat_inverse(m):
    """btMatrix3x3::inverse: cofactors over the determinant."""
    co = (cofac(m, 1, 1, 2, 2), cofac(m, 1, 2, 2, 0), cofac(m, 1, 0, 2, 1))
    s = 1.0 / dot(m[0], co)
    return (
        (co[0] * s, cofac(m, 0, 2, 2, 1) * s, cofac(m, 0, 1, 1, 2) * s),
        (co[1] * s, cofac(m, 0, 0, 2, 2) * s, cofac(m, 0, 2, 1, 0) * s),
        (co[2] * s, cofac(m, 0, 1, 2, 0) * s, cofac(m, 0, 0, 1, 1) * s),
    )


@jit
def inv_inertia_world(rot_mat, inv_inertia_local):
    """btRigidBody::updateInertiaTensor: basis.scaled(I_local^-1) * basis^T."""
    scaled = (
        (rot_mat[0][0] * inv_inertia_local[0], rot_mat[0][1] * inv_inertia_local[1], rot_mat[0][2] * inv_inertia_local[2]),
        (rot_mat[1][0] * inv_inertia_local[0], rot_mat[1][1] * inv_inertia_local[1], rot_mat[1][2] * inv_inertia_local[2]),
        (rot_mat[2][0] * inv_inertia_local[0], rot_mat[2][1] * inv_inertia_local[1], rot_mat[2][2] * inv_inertia_local[2]),
    )
    return mat_mul(scaled, transpose(rot_mat))


@jit
def length2(v):
    return dot(v, v)


@jit
def safe_normalized(v):
    """btVector3::safeNormalized: v / |v|, or (1, 0, 0) when |v|^2 < SIMD_EPSILON^2."""
    l2 = length2(v)
    ok = l2 >= SIMD_EPSILON * SIMD_EPSILON
    length = tl.sqrt(tl.where(ok, l2, 1.0))
    return tl.where(ok, v[0] / length, 1.0), tl.where(ok, v[1] / length, 0.0), tl.where(ok, v[2] / length, 0.0)


@jit
def normalized(v):
    """btVector3::normalized (the reference divides by the length too)."""
    length = tl.sqrt(length2(v))
    return v[0] / length, v[1] / length, v[2] / length


# --- btQuaternion (x, y, z, w) ----------------------------------------------------------------------


@jit
def quat_length2(q):
    """btQuaternion::length2 in the SSE order: (x^2 + z^2) + (y^2 + w^2)."""
    return (q[0] * q[0] + q[2] * q[2]) + (q[1] * q[1] + q[3] * q[3])


@jit
def quat_mul(q1, q2):
    """btQuaternion operator* (the Hamilton product q1 q2), in the SSE build's order."""
    x1, y1, z1, w1 = q1
    x2, y2, z2, w2 = q2
    return (
        (w1 * x2 - z1 * y2) + (x1 * w2 + y1 * z2),
        (w1 * y2 - x1 * z2) + (y1 * w2 + z1 * x2),
        (w1 * z2 - y1 * x2) + (z1 * w2 + x1 * y2),
        (w1 * w2 - z1 * z2) + -(x1 * x2 + y1 * y2),
    )


@jit
def quat_from_axis_angle(axis, angle):
    """btQuaternion(axis, angle): axis * sin(angle / 2) / |axis|, cos(angle / 2)."""
    s = tl.sin(angle * 0.5) / tl.sqrt(length2(axis))
    return axis[0] * s, axis[1] * s, axis[2] * s, tl.cos(angle * 0.5)


@jit
def basis_from_quat(q):
    """btMatrix3x3::setRotation (SSE build): the rotation matrix of a quaternion of any length."""
    x, y, z, w = q
    s = 2.0 / quat_length2(q)
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, z * x, y * z
    wx, wy, wz = w * x, w * y, w * z
    return (
        (1.0 + s * (-yy - zz), s * (xy - wz), s * (xz + wy)),
        (s * (xy + wz), 1.0 + s * (-xx - zz), s * (yz - wx)),
        (s * (xz - wy), s * (yz + wx), 1.0 + s * (-xx - yy)),
    )


@jit
def quat_from_basis(m):
    """btMatrix3x3::getRotation (SSE build): Shepperd's method on the largest diagonal term."""
    m00, m01, m02 = m[0]
    m10, m11, m12 = m[1]
    m20, m21, m22 = m[2]
    trace = (m00 + m11) + m22
    # The largest diagonal i picks temp[i] = x and the other three from the off-diagonal sums.
    i = tl.where(m00 < m11, tl.where(m11 < m22, 2, 1), tl.where(m00 < m22, 2, 0))
    x = tl.where(
        trace > 0,
        trace + 1.0,
        tl.where(i == 0, ((m00 - m11) - m22) + 1.0, tl.where(i == 1, ((m11 - m22) - m00) + 1.0, ((m22 - m00) - m11) + 1.0)),
    )
    s = 0.5 / tl.sqrt(x)
    qx = tl.where(trace > 0, m21 - m12, tl.where(i == 0, x, tl.where(i == 1, m01 + m10, m02 + m20)))
    qy = tl.where(trace > 0, m02 - m20, tl.where(i == 0, m10 + m01, tl.where(i == 1, x, m12 + m21)))
    qz = tl.where(trace > 0, m10 - m01, tl.where(i == 0, m20 + m02, tl.where(i == 1, m21 + m12, x)))
    qw = tl.where(trace > 0, x, tl.where(i == 0, m21 - m12, tl.where(i == 1, m02 - m20, m10 - m01)))
    return qx * s, qy * s, qz * s, qw * s


# --- Forces, impulses, integration -----------------------------------------------------------------


@jit
def apply_impulse(vel, ang_vel, inv_inertia, impulse, rel_pos):
    """btRigidBody::applyImpulse at ``rel_pos`` from the centre of mass: (vel, ang_vel)."""
    return add(vel, scale(impulse, INV_MASS)), add(ang_vel, mat_vec(inv_inertia, cross(rel_pos, impulse)))


@jit
def apply_gravity(force, gravity_z):
    """btDiscreteDynamicsWorld::applyGravity: the weight joins the forces after the pre-tick's."""
    return force[0], force[1], force[2] + gravity_z * CAR_MASS_BT


@jit
def external_impulses(force, torque, inv_inertia, tick_time):
    """The solver body's m_externalForceImpulse / m_externalTorqueImpulse: (F / m dt, T I^-1 dt)."""
    return scale(scale(force, INV_MASS), tick_time), scale(vec_mat(torque, inv_inertia), tick_time)


@jit
def integrate_transform(pos, rot_mat, lin_vel, ang_vel, tick_time):
    """btTransformUtil::integrateTransform: (pos, rot_mat) advanced by the velocities over dt: the
    exponential map through a quaternion (Taylor expansion below 0.001 rad/s), renormalised."""
    dt = tick_time
    pos = add(pos, scale(lin_vel, dt))
    angle2 = length2(ang_vel)
    angle = tl.where(angle2 > SIMD_EPSILON, tl.sqrt(tl.maximum(angle2, 0.0)), 0.0)
    angle = tl.where(angle * dt > ANGULAR_MOTION_THRESHOLD, ANGULAR_MOTION_THRESHOLD / dt, angle)
    taylor = 0.5 * dt - (((dt * dt * dt) * 0.020833333333) * angle) * angle
    small = angle < 0.001
    sync = tl.where(small, taylor, tl.sin((0.5 * angle) * dt) / tl.where(small, 1.0, angle))
    dorn = (ang_vel[0] * sync, ang_vel[1] * sync, ang_vel[2] * sync, tl.cos((angle * dt) * 0.5))
    orn = quat_mul(dorn, quat_from_basis(rot_mat))
    l2 = quat_length2(orn)
    inv = tl.where(l2 > SIMD_EPSILON, 1.0 / tl.sqrt(tl.where(l2 > SIMD_EPSILON, l2, 1.0)), 1.0)
    orn = (orn[0] * inv, orn[1] * inv, orn[2] * inv, orn[3] * inv)
    keep = quat_length2(orn) > SIMD_EPSILON
    return pos, where_mat(keep, basis_from_quat(orn), rot_mat)


@jit
def where_mat(c, a, b):
    return where(c, a[0], b[0]), where(c, a[1], b[1]), where(c, a[2], b[2])


@jit
def integrate(pos, rot_mat, vel, ang_vel, ext_v, ext_w, dv, dw, push_v, push_w, tick_time):
    """The solver's write-back (with split impulse) and btDiscreteDynamicsWorld::integrateTransforms:
    (pos, rot_mat, vel, ang_vel)."""
    vel = add(add(vel, dv), ext_v)
    ang_vel = add(add(ang_vel, dw), ext_w)
    pushed = (length2_nonzero(push_v)) | (length2_nonzero(push_w))  # writebackVelocityAndTransform's test
    push_pos, push_rot = integrate_transform(pos, rot_mat, push_v, scale(push_w, SOLVER_SPLIT_IMPULSE_TURN_ERP), tick_time)
    pos = where(pushed, push_pos, pos)
    rot_mat = where_mat(pushed, push_rot, rot_mat)
    pos, rot_mat = integrate_transform(pos, rot_mat, vel, ang_vel, tick_time)
    return pos, rot_mat, vel, ang_vel


@jit
def length2_nonzero(v):
    """Any component nonzero (the reference's (v != 0).any())."""
    return (v[0] != 0) | (v[1] != 0) | (v[2] != 0)


@jit
def clamp_speeds(vel, ang_vel):
    """Car::_FinishPhysicsTick's clamps: |v| <= CAR_MAX_SPEED, |w| <= CAR_MAX_ANG_SPEED."""
    over = length2(vel) > CAR_MAX_SPEED * CAR_MAX_SPEED
    vel = where(over, scale(normalized(vel), CAR_MAX_SPEED), vel)
    over = length2(ang_vel) > CAR_MAX_ANG_SPEED * CAR_MAX_ANG_SPEED
    ang_vel = where(over, scale(normalized(ang_vel), CAR_MAX_ANG_SPEED), ang_vel)
    return vel, ang_vel
