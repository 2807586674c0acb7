"""The car's rigid body: what Bullet's btRigidBody, btTransformUtil and btMatrix3x3 do to it.

Reference: the Bullet 3.24 RocketSim vendors (`libsrc/bullet3-3.24`: btRigidBody.{h,cpp},
btDiscreteDynamicsWorld.cpp, btSequentialImpulseConstraintSolver.cpp's body write-back,
btTransformUtil.h, btMatrix3x3.h and btQuaternion.h in their SSE builds, which RocketSim's x86-64
wheels use). RocketSim runs these in Bullet units; we run them in UU with the mass in Bullet's units,
so lengths, velocities and impulses are 50 x Bullet's and inertias 2500 x.

The car's tick through Bullet (btDiscreteDynamicsWorld::stepSimulation, one substep):

1. During the pre-tick the car code applies impulses (straight to the velocities, `apply_impulse`)
   and accumulates forces and torques (`Forces`); `apply_gravity` adds the weight last.
2. Damping: cars have none (linear and angular damping 0), so Bullet's factor is exactly 1.
3. Collision detection and the solver give velocity deltas (dv, dw) and split-impulse pushes
   (push_v, push_w) for the body's contacts with the arena (`car_world`), zeros without contacts.
4. `integrate`: the solver's write-back (v = v + dv + F dt / m, w = w + dw + I^-1 T dt; the pushes
   move the transform), then the transform advances with the new velocities (the exponential map
   through a quaternion, as btTransformUtil::integrateTransform).

Vectors are [..., 3], matrices [..., 3, 3] (rows first, as btMatrix3x3; a rotation's columns are the
car's forward, right and up axes). Sums run in the order Bullet's SSE code adds.
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.vec import cross, dot

INV_MASS = 1.0 / C.CAR_MASS_BT


@dataclasses.dataclass
class Forces:
    """Force and torque accumulated on each car during one tick (btRigidBody::m_totalForce, m_totalTorque).

    Forces are in mass x UU/s^2 (Bullet's units x 50), torques in mass x UU^2/s^2 (x 2500).
    """

    force: torch.Tensor
    """[N, C, 3]."""
    torque: torch.Tensor
    """[N, C, 3]."""

    @staticmethod
    def zeros_like(vel: torch.Tensor) -> Forces:
        return Forces(force=torch.zeros_like(vel), torque=torch.zeros_like(vel))


def where3(mask: torch.Tensor, a: torch.Tensor, b) -> torch.Tensor:
    """``a`` where ``mask`` [...] else ``b``, over vectors [..., 3]."""
    return torch.where(mask[..., None], a, b)


# --- btMatrix3x3 / btVector3 (SSE summation order) --------------------------------------------------


def mat_vec(m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """m * v: each row dotted with v, (x + y) + z."""
    return m[..., 0] * v[..., None, 0] + m[..., 1] * v[..., None, 1] + m[..., 2] * v[..., None, 2]


def vec_mat(v: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """v * m (Bullet's row vector times matrix, m^T v): (v.x row0 + v.y row1) + v.z row2."""
    return v[..., 0, None] * m[..., 0, :] + v[..., 1, None] * m[..., 1, :] + v[..., 2, None] * m[..., 2, :]


def mat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a * b, each result row (a[i][0] b.row0 + a[i][1] b.row1) + a[i][2] b.row2."""
    return (a[..., :, 0, None] * b[..., None, 0, :] + a[..., :, 1, None] * b[..., None, 1, :]) + a[
        ..., :, 2, None
    ] * b[..., None, 2, :]


def mat_inverse(m: torch.Tensor) -> torch.Tensor:
    """btMatrix3x3::inverse: cofactors over the determinant."""

    def cofac(r1, c1, r2, c2):
        return m[..., r1, c1] * m[..., r2, c2] - m[..., r1, c2] * m[..., r2, c1]

    co = torch.stack((cofac(1, 1, 2, 2), cofac(1, 2, 2, 0), cofac(1, 0, 2, 1)), -1)
    s = 1.0 / dot(m[..., 0, :], co)
    rows = (
        (co[..., 0] * s, cofac(0, 2, 2, 1) * s, cofac(0, 1, 1, 2) * s),
        (co[..., 1] * s, cofac(0, 0, 2, 2) * s, cofac(0, 2, 1, 0) * s),
        (co[..., 2] * s, cofac(0, 1, 2, 0) * s, cofac(0, 0, 1, 1) * s),
    )
    return torch.stack([torch.stack(r, -1) for r in rows], -2)


def inv_inertia_world(rot_mat: torch.Tensor, inv_inertia_local: torch.Tensor) -> torch.Tensor:
    """btRigidBody::updateInertiaTensor: basis.scaled(I_local^-1) * basis^T [..., 3, 3]."""
    return mat_mul(rot_mat * inv_inertia_local[..., None, :], rot_mat.transpose(-1, -2))


def length2(v: torch.Tensor) -> torch.Tensor:
    return dot(v, v)


def safe_normalized(v: torch.Tensor) -> torch.Tensor:
    """btVector3::safeNormalized: v / |v|, or (1, 0, 0) when |v|^2 < SIMD_EPSILON^2."""
    l2 = length2(v)
    ok = l2 >= C.SIMD_EPSILON * C.SIMD_EPSILON
    unit = torch.zeros_like(v)
    unit[..., 0].fill_(1.0)
    return where3(ok, v / torch.sqrt(torch.where(ok, l2, 1.0))[..., None], unit)


def normalized(v: torch.Tensor) -> torch.Tensor:
    """btVector3::normalized (Bullet's SSE build refines a hardware 1/sqrt estimate; we divide)."""
    return v / torch.sqrt(length2(v))[..., None]


# --- btQuaternion (x, y, z, w) ----------------------------------------------------------------------


def _quat_length2(q: torch.Tensor) -> torch.Tensor:
    """btQuaternion::length2 in the SSE order: (x^2 + z^2) + (y^2 + w^2)."""
    qq = q * q
    return (qq[..., 0] + qq[..., 2]) + (qq[..., 1] + qq[..., 3])


def quat_mul(q1: torch.Tensor, q2: torch.Tensor) -> torch.Tensor:
    """btQuaternion operator* (q1 then... Hamilton product q1 q2), in the SSE build's order."""
    x1, y1, z1, w1 = q1.unbind(-1)
    x2, y2, z2, w2 = q2.unbind(-1)
    return torch.stack(
        (
            (w1 * x2 - z1 * y2) + (x1 * w2 + y1 * z2),
            (w1 * y2 - x1 * z2) + (y1 * w2 + z1 * x2),
            (w1 * z2 - y1 * x2) + (z1 * w2 + x1 * y2),
            (w1 * w2 - z1 * z2) + -(x1 * x2 + y1 * y2),
        ),
        -1,
    )


def quat_from_axis_angle(axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """btQuaternion(axis, angle): axis * sin(angle / 2) / |axis|, cos(angle / 2)."""
    s = torch.sin(angle * 0.5) / torch.sqrt(length2(axis))
    return torch.cat((axis * s[..., None], torch.cos(angle * 0.5)[..., None]), -1)


def basis_from_quat(q: torch.Tensor) -> torch.Tensor:
    """btMatrix3x3::setRotation (SSE build): the rotation matrix of a quaternion of any length."""
    x, y, z, w = q.unbind(-1)
    s = 2.0 / _quat_length2(q)
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, z * x, y * z
    wx, wy, wz = w * x, w * y, w * z
    rows = (
        (1.0 + s * (-yy - zz), s * (xy - wz), s * (xz + wy)),
        (s * (xy + wz), 1.0 + s * (-xx - zz), s * (yz - wx)),
        (s * (xz - wy), s * (yz + wx), 1.0 + s * (-xx - yy)),
    )
    return torch.stack([torch.stack(r, -1) for r in rows], -2)


def quat_from_basis(m: torch.Tensor) -> torch.Tensor:
    """btMatrix3x3::getRotation (SSE build): Shepperd's method on the largest diagonal term."""
    m00, m01, m02 = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    m10, m11, m12 = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    m20, m21, m22 = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    trace = (m00 + m11) + m22
    # (x, temp) for the trace and for each largest diagonal i: temp[i] = x, temp[j], temp[k], temp[3].
    candidates = (
        (trace + 1.0, (m21 - m12, m02 - m20, m10 - m01)),
        (((m00 - m11) - m22) + 1.0, (None, m10 + m01, m20 + m02, m21 - m12)),
        (((m11 - m22) - m00) + 1.0, (m01 + m10, None, m21 + m12, m02 - m20)),
        (((m22 - m00) - m11) + 1.0, (m02 + m20, m12 + m21, None, m10 - m01)),
    )
    quats = []
    for k, (x, temp) in enumerate(candidates):
        parts = list(temp) + [x] if k == 0 else [x if t is None else t for t in temp]
        quats.append(torch.stack(parts, -1) * (0.5 / torch.sqrt(x))[..., None])
    i = torch.where(m00 < m11, torch.where(m11 < m22, 2, 1), torch.where(m00 < m22, 2, 0))
    choice = torch.where(trace > 0, 0, i + 1)
    return torch.stack(quats, -2).gather(-2, choice[..., None, None].expand(*choice.shape, 1, 4))[..., 0, :]


def angle_to_rot_mat(yaw: torch.Tensor, pitch: torch.Tensor, roll: torch.Tensor) -> torch.Tensor:
    """RocketSim's Angle::ToRotMat (btMatrix3x3::setEulerYPR(yaw, -pitch, -roll)) [..., 3, 3]."""
    ci, cj, ch = torch.cos(-roll), torch.cos(-pitch), torch.cos(yaw)
    si, sj, sh = torch.sin(-roll), torch.sin(-pitch), torch.sin(yaw)
    cc, cs, sc, ss = ci * ch, ci * sh, si * ch, si * sh
    rows = (
        (cj * ch, sj * sc - cs, sj * cc + ss),
        (cj * sh, sj * ss + cc, sj * cs - sc),
        (-sj, cj * si, cj * ci),
    )
    return torch.stack([torch.stack(r, -1) for r in rows], -2)


# --- Forces, impulses, integration -----------------------------------------------------------------


def apply_central_impulse(vel: torch.Tensor, impulse: torch.Tensor) -> torch.Tensor:
    """btRigidBody::applyCentralImpulse: v += impulse / m."""
    return vel + impulse * INV_MASS


def apply_impulse(vel, ang_vel, inv_inertia, impulse, rel_pos):
    """btRigidBody::applyImpulse at ``rel_pos`` from the centre of mass: (vel, ang_vel)."""
    return vel + impulse * INV_MASS, ang_vel + mat_vec(inv_inertia, cross(rel_pos, impulse))


def apply_gravity(forces: Forces, gravity_z: float) -> Forces:
    """btDiscreteDynamicsWorld::applyGravity: the weight joins the forces after the pre-tick's."""
    weight = torch.zeros_like(forces.force)
    weight[..., 2].fill_(gravity_z * C.CAR_MASS_BT)
    return dataclasses.replace(forces, force=forces.force + weight)


def external_impulses(forces: Forces, inv_inertia: torch.Tensor, dt: float):
    """The solver body's m_externalForceImpulse / m_externalTorqueImpulse: (F / m dt, T I^-1 dt).

    The body-contact solve sees the velocities plus these (btSequentialImpulseConstraintSolver).
    """
    return (forces.force * INV_MASS) * dt, vec_mat(forces.torque, inv_inertia) * dt


def integrate_transform(pos, rot_mat, lin_vel, ang_vel, dt: float):
    """btTransformUtil::integrateTransform: (pos, rot_mat) advanced by the velocities over ``dt``.

    The rotation goes through the exponential map: a quaternion step (Taylor expansion below 0.001
    rad/s) applied to the basis's quaternion, renormalised, back to a matrix.
    """
    pos = pos + lin_vel * dt
    angle2 = length2(ang_vel)
    angle = torch.where(angle2 > C.SIMD_EPSILON, torch.sqrt(angle2), 0.0)
    angle = torch.where(angle * dt > C.ANGULAR_MOTION_THRESHOLD, C.ANGULAR_MOTION_THRESHOLD / dt, angle)
    taylor = 0.5 * dt - (((dt * dt * dt) * 0.020833333333) * angle) * angle
    small = angle < 0.001
    sync = torch.where(small, taylor, torch.sin((0.5 * angle) * dt) / torch.where(small, 1.0, angle))
    dorn = torch.cat((ang_vel * sync[..., None], torch.cos((angle * dt) * 0.5)[..., None]), -1)
    orn = quat_mul(dorn, quat_from_basis(rot_mat))
    l2 = _quat_length2(orn)
    orn = torch.where((l2 > C.SIMD_EPSILON)[..., None], orn * (1.0 / torch.sqrt(l2))[..., None], orn)
    keep = _quat_length2(orn) > C.SIMD_EPSILON
    return pos, torch.where(keep[..., None, None], basis_from_quat(orn), rot_mat)


def integrate(pos, rot_mat, vel, ang_vel, ext_v, ext_w, dv, dw, push_v, push_w, dt: float):
    """The solver's write-back (with split impulse) and btDiscreteDynamicsWorld::integrateTransforms.

    ``ext_v``/``ext_w``: `external_impulses`; ``dv``/``dw``: the contact solve's velocity deltas;
    ``push_v``/``push_w``: its split-impulse push and turn velocities (all zero without contacts).
    Returns (pos, rot_mat, vel, ang_vel).
    """
    vel = (vel + dv) + ext_v
    ang_vel = (ang_vel + dw) + ext_w
    pushed = (push_v != 0).any(-1) | (push_w != 0).any(-1)  # writebackVelocityAndTransform's test
    push_pos, push_rot = integrate_transform(
        pos, rot_mat, push_v, push_w * C.SOLVER_SPLIT_IMPULSE_TURN_ERP, dt
    )
    pos = where3(pushed, push_pos, pos)
    rot_mat = torch.where(pushed[..., None, None], push_rot, rot_mat)
    pos, rot_mat = integrate_transform(pos, rot_mat, vel, ang_vel, dt)
    return pos, rot_mat, vel, ang_vel


def clamp_speeds(vel: torch.Tensor, ang_vel: torch.Tensor):
    """Car::_FinishPhysicsTick's clamps: |v| <= CAR_MAX_SPEED, |w| <= CAR_MAX_ANG_SPEED."""
    out = []
    for v, limit in ((vel, C.CAR_MAX_SPEED), (ang_vel, C.CAR_MAX_ANG_SPEED)):
        over = length2(v) > limit * limit
        out.append(where3(over, normalized(v) * limit, v))
    return tuple(out)
