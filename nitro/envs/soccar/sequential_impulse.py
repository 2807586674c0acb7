"""btSequentialImpulseConstraintSolver with RocketSim's settings: the contact solve of one tick.

Reference: the Bullet 3.24 that RocketSim (ZealanL/RocketSim, MIT) vendors ("ROCKETSIM CHANGE"
markers) and `Arena::Arena`'s solver settings: one normal row and one friction row per contact
point, in the island manager's order (`island_manager`); split-impulse penetration recovery (erp2
0.8, every penetration split off) and 10 Gauss-Seidel iterations, no warm starting (every manifold
is new each tick). Bullet units (1 BT = 50 UU), float32, in Bullet's operation order.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar import rigid_body as rb
from nitro.envs.soccar.car_config import CarHitbox
from nitro.envs.soccar.contacts import CarWorldContacts
from nitro.envs.soccar.gjk_epa import SIMD_EPSILON
from nitro.envs.soccar.mutators import TickParams
from nitro.envs.soccar.vec import cross, dot, eager_cpu, eager_cpu_width, gather_rows, mat_vec

SIMD_SQRT12 = float(np.float32(np.sqrt(0.5)))


def simd_dot3(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """btSimdDot3 of the SSE2 solver rows: x + (y + z)."""
    return a[..., 0] * b[..., 0] + (a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2])


def plane_space(n: torch.Tensor) -> torch.Tensor:
    """btPlaneSpace1's first tangent of ``n`` [..., 3]."""
    nx, ny, nz = n.unbind(-1)
    use_yz = nz.abs() > SIMD_SQRT12
    k_yz = 1.0 / torch.sqrt(torch.where(use_yz, ny * ny + nz * nz, 1))
    k_xy = 1.0 / torch.sqrt(torch.where(use_yz, 1, nx * nx + ny * ny))
    zero = torch.zeros_like(nx)
    yz = torch.stack((zero, -nz * k_yz, ny * k_yz), -1)
    xy = torch.stack((-ny * k_xy, nx * k_xy, zero), -1)
    return torch.where(use_yz[..., None], yz, xy)


@dataclasses.dataclass
class SolverRows:
    """One contact's normal or friction row (btSolverConstraint), [B, R] / [B, R, 3] per car."""

    normal: torch.Tensor
    """m_contactNormal1 [B, R, 3]."""
    torque: torch.Tensor
    """m_relpos1CrossNormal [B, R, 3]."""
    angular: torch.Tensor
    """m_angularComponentA: the inverse world inertia times the torque axis [B, R, 3]."""
    jac: torch.Tensor
    """m_jacDiagABInv [B, R]."""
    rhs: torch.Tensor
    """m_rhs [B, R]."""


def contact_rows(rel_pos, normal, inv_inertia, inv_mass: float) -> tuple[torch.Tensor, ...]:
    """The Jacobian part of setupContactConstraint / setupFrictionConstraint: (torque axis, angular
    component, 1 / effective mass)."""
    torque = cross(rel_pos, normal)
    angular = mat_vec(inv_inertia[:, None], torque)
    jac = 1.0 / (inv_mass + dot(normal, cross(angular, rel_pos)))
    return torque, angular, jac


def resolve_row_lower_limit(delta_v, delta_w, row: SolverRows, k: int, applied, inv_mass: float, active):
    """gResolveSingleConstraintRowLowerLimit_sse2 for row ``k`` (lower limit 0). Returns the new
    (delta_v, delta_w, applied)."""
    delta = (
        row.rhs[:, k]
        - (simd_dot3(row.normal[:, k], delta_v) + simd_dot3(row.torque[:, k], delta_w)) * row.jac[:, k]
    )
    total = applied[:, k] + delta
    below = total < 0
    delta = torch.where(active, torch.where(below, 0.0 - applied[:, k], delta), 0.0)
    applied = applied.clone()
    applied[:, k] = torch.where(active, torch.where(below, 0.0, total), applied[:, k])
    delta_v = delta_v + (row.normal[:, k] * inv_mass) * delta[:, None]
    delta_w = delta_w + row.angular[:, k] * delta[:, None]
    return delta_v, delta_w, applied


def solve_world_contacts(
    contacts: CarWorldContacts,
    order: torch.Tensor,
    pos_bt,
    rot,
    vel_bt,
    ang_vel,
    ext_v,
    ext_w,
    hitbox: CarHitbox,
    params: TickParams,
):
    """Bullet's sequential-impulse solve of B cars' arena contacts (RocketSim's solver settings), BT.

    ``order`` [B, S]: the manifold slots in solver order (`solve_order`); ``vel_bt`` / ``ang_vel``
    [B, 3]: the velocities entering Bullet's step; ``ext_v`` / ``ext_w``: what
    this tick's forces and torques add (btSolverBody's m_externalForceImpulse / TorqueImpulse).
    Returns (dv, dw, push, turn) [B, 3]: the solver's velocity deltas and its split-impulse push and
    turn velocities (turn not yet scaled by m_splitImpulseTurnErp). Zero where a car touches nothing.
    """
    b = pos_bt.shape[0]
    inv_mass = float(np.float32(1.0) / np.float32(C.CAR_MASS_BT))
    inv_inertia = rb.inv_inertia_world(rot, hitbox.inv_inertia_local)
    m = contacts.manifolds
    # rows in solver order: manifolds as the island manager sorts them, points in manifold order
    slot = order
    held = gather_rows(m.held(), slot).reshape(b, -1)
    take = lambda x: gather_rows(x, slot).reshape(b, -1, *x.shape[3:])
    zero = torch.zeros_like(vel_bt)
    if eager_cpu(held) and not bool(held.any()):  # sync-ok: eager CPU only; no car touches anything
        return zero, zero, zero, zero
    width = eager_cpu_width(held.sum(1), held.shape[1])
    rows = torch.sort((~held).to(torch.int8), dim=1, stable=True).indices[:, :width]
    active = held.gather(1, rows)
    normal, local_a, depth = (
        gather_rows(take(m.normal), rows),
        gather_rows(take(m.offset), rows),
        gather_rows(take(m.depth), rows),
    )
    # padding rows get a harmless unit normal: their zero impulses then add exact zeros, never NaN
    normal = torch.where(active[..., None], normal, torch.tensor((0.0, 0.0, 1.0), device=normal.device))
    rel_pos = (mat_vec(rot[:, None], local_a) + pos_bt[:, None]) - pos_bt[:, None]
    vel_ext, ang_ext = vel_bt + ext_v, ang_vel + ext_w
    # setupContactConstraint (relaxation 1, cfm 0, linear slop 0)
    torque, angular, jac = contact_rows(rel_pos, normal, inv_inertia, inv_mass)
    approach = dot(normal, vel_bt[:, None] + cross(ang_vel[:, None].expand_as(rel_pos), rel_pos))
    restitution = torch.where(
        approach.abs() < C.SOLVER_RESTITUTION_VELOCITY_THRESHOLD * C.UU_TO_BT_F32,
        0.0,
        params.car_world_restitution * -approach,
    ).clamp(min=0.0)
    rel_vel = dot(normal, vel_ext[:, None]) + dot(torque, ang_ext[:, None])
    rhs = (restitution - rel_vel) * jac
    inv_dt = float(np.float32(1.0) / np.float32(params.tick_time))
    rhs_push = torch.where(depth > 0, 0.0, ((-depth) * float(np.float32(C.SOLVER_ERP2))) * inv_dt) * jac
    normal_rows = SolverRows(normal=normal, torque=torque, angular=angular, jac=jac, rhs=rhs)
    push_rows = dataclasses.replace(normal_rows, rhs=rhs_push)
    # convertContactInner: one friction row along the sliding velocity (else btPlaneSpace1)
    vel_at = vel_ext[:, None] + cross(ang_ext[:, None].expand_as(rel_pos), rel_pos)
    lateral = vel_at - normal * dot(normal, vel_at)[..., None]
    lateral2 = dot(lateral, lateral)
    sliding = lateral2 > SIMD_EPSILON
    tangent = torch.where(
        sliding[..., None],
        lateral * (1.0 / torch.sqrt(torch.where(sliding, lateral2, 1.0)))[..., None],
        plane_space(normal),
    )
    f_torque, f_angular, f_jac = contact_rows(rel_pos, tangent, inv_inertia, inv_mass)
    f_rhs = (0.0 - (dot(tangent, vel_ext[:, None]) + dot(f_torque, ang_vel[:, None]))) * f_jac
    friction_rows = SolverRows(normal=tangent, torque=f_torque, angular=f_angular, jac=f_jac, rhs=f_rhs)
    friction = params.car_world_friction
    count = normal.shape[1]

    # solveGroupCacheFriendlySplitImpulseIterations: rows without a penetration term are skipped
    push, turn = torch.zeros_like(vel_bt), torch.zeros_like(ang_vel)
    applied_push = torch.zeros_like(depth)
    pushing = active & (rhs_push != 0)
    for _ in range(C.SOLVER_NUM_ITERATIONS):
        for k in range(count):
            push, turn, applied_push = resolve_row_lower_limit(
                push, turn, push_rows, k, applied_push, inv_mass, pushing[:, k]
            )
    # solveSingleIteration: every normal row, then every friction row (while its normal impulse > 0)
    dv, dw = torch.zeros_like(vel_bt), torch.zeros_like(ang_vel)
    applied = torch.zeros_like(depth)
    applied_friction = torch.zeros_like(depth)
    for _ in range(C.SOLVER_NUM_ITERATIONS):
        for k in range(count):
            dv, dw, applied = resolve_row_lower_limit(dv, dw, normal_rows, k, applied, inv_mass, active[:, k])
        for k in range(count):  # gResolveSingleConstraintRowGeneric_sse2
            limit = friction * applied[:, k]
            delta = (
                friction_rows.rhs[:, k]
                - (simd_dot3(tangent[:, k], dv) + simd_dot3(f_torque[:, k], dw)) * f_jac[:, k]
            )
            old = applied_friction[:, k]
            total = old + delta
            below, under = total < -limit, total < limit
            delta = torch.where(below, -limit - old, delta)
            new = torch.where(below, -limit, total)
            delta = torch.where(under, delta, limit - old)
            new = torch.where(under, new, limit)
            solving = active[:, k] & (applied[:, k] > 0)
            delta = torch.where(solving, delta, 0.0)
            applied_friction = applied_friction.clone()
            applied_friction[:, k] = torch.where(solving, new, old)
            dv = dv + (tangent[:, k] * inv_mass) * delta[:, None]
            dw = dw + f_angular[:, k] * delta[:, None]
    return dv, dw, push, turn
