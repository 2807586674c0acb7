"""btSequentialImpulseConstraintSolver with RocketSim's settings: the contact solve of one tick.

Reference: the Bullet 3.24 that RocketSim (ZealanL/RocketSim, MIT) vendors ("ROCKETSIM CHANGE"
markers) and `Arena::Arena`'s solver settings. Each contact point is a normal row and a friction row
(setupContactConstraint, convertContactInner), in the island manager's order (`island_manager`);
RocketSim's "special" ball-world points are left out of the velocity solve and replaced by one
averaged row per body, after every other (convertContactSpecial). Split-impulse penetration recovery
(erp2 0.8, every penetration split off) runs first, then 10 Gauss-Seidel iterations of every normal
row, then every friction row; no warm starting (every manifold is new each tick). Bodies are an env's
ball (0) and cars (1 + c); a row's body B may be the arena (static). Bullet units (1 BT = 50 UU),
float32, in the SSE2 solver's operation order.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar import kernels
from nitro.envs.soccar.contacts import ContactRows
from nitro.envs.soccar.gjk_epa import SIMD_EPSILON
from nitro.envs.soccar.kernels import sequential_impulse as solver_kernels
from nitro.envs.soccar.mutators import TickParams
from nitro.envs.soccar.vec import constant, cross, dot, eager_cpu, eager_cpu_width, gather_rows, mat_vec

SIMD_SQRT12 = float(np.float32(np.sqrt(0.5)))


@dataclasses.dataclass
class SolverBodies:
    """The solver bodies of N envs [N, B, ...] (btSolverBody), BT: the ball, then the cars."""

    vel: torch.Tensor
    """m_linearVelocity when the solve starts (after damping, before gravity) [N, B, 3]."""
    ang_vel: torch.Tensor
    """m_angularVelocity [N, B, 3]."""
    ext_v: torch.Tensor
    """m_externalForceImpulse: what this tick's forces add to the velocity [N, B, 3]."""
    ext_w: torch.Tensor
    """m_externalTorqueImpulse [N, B, 3]."""
    inv_mass: torch.Tensor
    """[N, B] (0 for a body that does not move)."""
    inv_inertia: torch.Tensor
    """The world inverse inertia tensor [N, B, 3, 3]."""


@dataclasses.dataclass
class SolverResult:
    """What the solve gives each body [N, B, 3] (btSolverBody's deltas), BT."""

    dv: torch.Tensor
    """m_deltaLinearVelocity."""
    dw: torch.Tensor
    """m_deltaAngularVelocity."""
    push: torch.Tensor
    """m_pushVelocity (split impulse: moves the transform only)."""
    turn: torch.Tensor
    """m_turnVelocity (before m_splitImpulseTurnErp)."""


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
    """btSolverConstraint rows [N, R, ...] in solve order."""

    body_a: torch.Tensor
    """Solver body index of A [N, R] int64."""
    body_b: torch.Tensor
    """Solver body index of B [N, R] int64 (the static body for the arena)."""
    normal_a: torch.Tensor
    """m_contactNormal1 [N, R, 3]."""
    torque_a: torch.Tensor
    """m_relpos1CrossNormal [N, R, 3]."""
    angular_a: torch.Tensor
    """m_angularComponentA [N, R, 3]."""
    normal_b: torch.Tensor
    """m_contactNormal2 [N, R, 3]."""
    torque_b: torch.Tensor
    """m_relpos2CrossNormal [N, R, 3]."""
    angular_b: torch.Tensor
    """m_angularComponentB [N, R, 3]."""
    jac: torch.Tensor
    """m_jacDiagABInv [N, R]."""
    rhs: torch.Tensor
    """m_rhs [N, R]."""


def _jacobian(direction, rel_a, rel_b, inv_i_a, inv_i_b, inv_mass_a, inv_mass_b, static_b, friction: bool):
    """The rows' body terms: (torque_a, angular_a, normal_b, torque_b, angular_b, jac). A contact
    row's torque B is -(r_B x n) with angular B = I_B^-1 (-(r_B x n)) (setupContactConstraint); a
    friction row's is r_B x (-d) (setupFrictionConstraint)."""
    torque_a = cross(rel_a, direction)
    angular_a = mat_vec(inv_i_a, torque_a)
    if friction:
        torque_b = cross(rel_b, -direction)
        angular_b = mat_vec(inv_i_b, torque_b)
    else:
        torque_b = -cross(rel_b, direction)
        angular_b = mat_vec(inv_i_b, torque_b)
    denom_a = inv_mass_a + dot(direction, cross(angular_a, rel_a))
    denom_b = torch.where(static_b, 0.0, inv_mass_b + dot(direction, cross(-angular_b, rel_b)))
    zero = torch.zeros_like(direction)
    normal_b = torch.where(static_b[..., None], zero, -direction)
    torque_b = torch.where(static_b[..., None], zero, torque_b)
    angular_b = torch.where(static_b[..., None], zero, angular_b)
    return torque_a, angular_a, normal_b, torque_b, angular_b, 1.0 / ((denom_a + denom_b) + 0.0)


def _take(bodies: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Per-row values of bodies [N, B + 1, ...] at ``index`` [N, R]."""
    return gather_rows(bodies, index)


def setup_rows(rows: ContactRows, bodies: SolverBodies, params: TickParams):
    """setupContactConstraint and convertContactInner for every row: (normal rows, push rhs
    [N, R], friction rows)."""
    b = bodies.inv_mass.shape[1]
    pad = lambda x: torch.cat((x, torch.zeros_like(x[:, :1])), 1)  # the static body last
    vel, ang, ext_v, ext_w = pad(bodies.vel), pad(bodies.ang_vel), pad(bodies.ext_v), pad(bodies.ext_w)
    inv_mass, inv_i = pad(bodies.inv_mass), pad(bodies.inv_inertia)
    static_b = rows.body_b < 0
    ia, ib = rows.body_a, torch.where(static_b, b, rows.body_b)
    # rows without a point get a harmless unit normal: their zero impulses then add exact zeros, never NaN
    n_ = torch.where(rows.active[..., None], rows.normal, constant((0.0, 0.0, 1.0), rows.normal.device))
    va, wa, ea, eva = _take(vel, ia), _take(ang, ia), _take(ext_v, ia), _take(ext_w, ia)
    vb, wb, eb, ewb = _take(vel, ib), _take(ang, ib), _take(ext_v, ib), _take(ext_w, ib)
    ma, mb = _take(inv_mass, ia), _take(inv_mass, ib)
    iia, iib = _take(inv_i, ia), _take(inv_i, ib)
    torque_a, angular_a, normal_b, torque_b, angular_b, jac = _jacobian(
        n_, rows.rel_pos_a, rows.rel_pos_b, iia, iib, ma, mb, static_b, friction=False
    )
    # restitution from the approach speed (btRigidBody::getVelocityInLocalPoint, without this tick's forces)
    vel_a = va + cross(wa, rows.rel_pos_a)
    vel_b = torch.where(static_b[..., None], 0.0, vb + cross(wb, rows.rel_pos_b))
    approach = dot(n_, vel_a - vel_b)
    restitution = torch.where(
        approach.abs() < C.SOLVER_RESTITUTION_VELOCITY_THRESHOLD * C.UU_TO_BT_F32, 0.0, rows.restitution * -approach
    ).clamp(min=0.0)
    rel_vel = (dot(n_, va + ea) + dot(torque_a, wa + eva)) + (dot(normal_b, vb + eb) + dot(torque_b, wb + ewb))
    rhs = (restitution - rel_vel) * jac
    inv_dt = C.f32(1 / C.f32(params.tick_time))
    push = torch.where(rows.depth > 0, 0.0, ((-rows.depth) * C.f32(C.SOLVER_ERP2)) * inv_dt) * jac
    normal_rows = SolverRows(ia, ib, n_, torque_a, angular_a, normal_b, torque_b, angular_b, jac, rhs)
    # one friction row along the sliding velocity (getVelocityInLocalPointNoDelta), else btPlaneSpace1
    slide_a = (va + ea) + cross(wa + eva, rows.rel_pos_a)
    slide_b = torch.where(static_b[..., None], 0.0, (vb + eb) + cross(wb + ewb, rows.rel_pos_b))
    slide = slide_a - slide_b
    lateral = slide - n_ * dot(n_, slide)[..., None]
    lateral2 = dot(lateral, lateral)
    sliding = lateral2 > SIMD_EPSILON
    tangent = torch.where(
        sliding[..., None], lateral * (1.0 / torch.sqrt(torch.where(sliding, lateral2, 1.0)))[..., None], plane_space(n_)
    )
    f_torque_a, f_angular_a, f_normal_b, f_torque_b, f_angular_b, f_jac = _jacobian(
        tangent, rows.rel_pos_a, rows.rel_pos_b, iia, iib, ma, mb, static_b, friction=True
    )
    f_rel = (dot(tangent, va + ea) + dot(f_torque_a, wa)) + (dot(f_normal_b, vb + eb) + dot(f_torque_b, wb))
    f_rhs = (0.0 - f_rel) * f_jac
    friction_rows = SolverRows(
        ia, ib, tangent, f_torque_a, f_angular_a, f_normal_b, f_torque_b, f_angular_b, f_jac, f_rhs
    )
    return normal_rows, push, friction_rows


def _apply(dv, dw, row: SolverRows, k: int, inv_mass, delta):
    """internalApplyImpulse on both bodies of row ``k`` [N]: the new (dv, dw) [N, B + 1, 3]."""
    for body, normal, angular in ((row.body_a, row.normal_a, row.angular_a), (row.body_b, row.normal_b, row.angular_b)):
        index = body[:, k, None, None].expand(-1, 1, 3)
        mass = inv_mass.gather(1, body[:, k, None])
        dv = dv.scatter_add(1, index, ((normal[:, k] * mass) * delta[:, None])[:, None])
        dw = dw.scatter_add(1, index, (angular[:, k] * delta[:, None])[:, None])
    return dv, dw


def _row_delta(dv, dw, row: SolverRows, k: int, rhs):
    """deltaImpulse = rhs - (n1 . dv_A + t1 . dw_A) J - (n2 . dv_B + t2 . dw_B) J, as the SSE2 rows."""
    take = lambda x, body: x.gather(1, body[:, k, None, None].expand(-1, 1, 3))[:, 0]
    d1 = simd_dot3(row.normal_a[:, k], take(dv, row.body_a)) + simd_dot3(row.torque_a[:, k], take(dw, row.body_a))
    d2 = simd_dot3(row.normal_b[:, k], take(dv, row.body_b)) + simd_dot3(row.torque_b[:, k], take(dw, row.body_b))
    return (rhs - d1 * row.jac[:, k]) - d2 * row.jac[:, k]


def solve_contacts(
    rows: ContactRows,
    bodies: SolverBodies,
    params: TickParams,
    use_kernels: bool | None = None,
    start: SolverResult | None = None,
) -> SolverResult:
    """Bullet's solve of N envs' contact rows (in solve order, the averaged special rows last).

    Returns each body's velocity deltas and split-impulse push and turn velocities; bodies without
    rows get zeros, or ``start``'s: the deltas the sweeps start from (the fused tick's arena rows
    start from its body-body solve, `car_contacts.solve_bodies`). On CUDA a Triton kernel
    (`kernels/sequential_impulse.py`, when Triton is importable, without ``start``); ``use_kernels``
    forces the kernel or this PyTorch reference.
    """
    if start is None and kernels.use_kernels(bodies.vel, use_kernels):
        return SolverResult(*solver_kernels.launch_solve_contacts(rows, bodies, params))
    n, b = bodies.inv_mass.shape
    zeros = torch.zeros(n, b + 1, 3, dtype=bodies.vel.dtype, device=bodies.vel.device)
    pad = lambda x: torch.cat((x, zeros[:, :1]), 1)  # the static body last
    initial = (zeros,) * 4 if start is None else tuple(pad(x) for x in (start.dv, start.dw, start.push, start.turn))
    result = lambda dv, dw, push, turn: SolverResult(dv[:, :b], dw[:, :b], push[:, :b], turn[:, :b])
    if eager_cpu(rows.active) and not bool(rows.active.any()):  # sync-ok: eager CPU only; no contacts
        return result(*initial)
    normal_rows, push_rhs, friction_rows = setup_rows(rows, bodies, params)
    inv_mass = torch.cat((bodies.inv_mass, torch.zeros_like(bodies.inv_mass[:, :1])), 1)
    active, special = rows.active, rows.special
    count = rows.active.shape[1]
    # solveGroupCacheFriendlySplitImpulseIterations: rows without a penetration term are skipped
    dv, dw, push, turn = initial
    applied = torch.zeros_like(push_rhs)
    pushing = active & (push_rhs != 0)
    for _ in range(C.SOLVER_NUM_ITERATIONS):
        for k in range(count):
            delta = _row_delta(push, turn, normal_rows, k, push_rhs[:, k])
            total = applied[:, k] + delta
            below = total < 0
            delta = torch.where(pushing[:, k], torch.where(below, 0.0 - applied[:, k], delta), 0.0)
            applied = applied.clone()
            applied[:, k] = torch.where(pushing[:, k], torch.where(below, 0.0, total), applied[:, k])
            push, turn = _apply(push, turn, normal_rows, k, inv_mass, delta)
    # solveSingleIteration: every normal row but the special points, then every friction row
    normal_applied = torch.zeros_like(push_rhs)
    friction_applied = torch.zeros_like(push_rhs)
    solving = active & ~special
    friction = rows.friction
    for _ in range(C.SOLVER_NUM_ITERATIONS):
        for k in range(count):  # gResolveSingleConstraintRowLowerLimit_sse2
            delta = _row_delta(dv, dw, normal_rows, k, normal_rows.rhs[:, k])
            total = normal_applied[:, k] + delta
            below = total < 0
            delta = torch.where(solving[:, k], torch.where(below, 0.0 - normal_applied[:, k], delta), 0.0)
            normal_applied = normal_applied.clone()
            normal_applied[:, k] = torch.where(solving[:, k], torch.where(below, 0.0, total), normal_applied[:, k])
            dv, dw = _apply(dv, dw, normal_rows, k, inv_mass, delta)
        for k in range(count):  # gResolveSingleConstraintRowGeneric_sse2, while the normal impulse > 0
            limit = friction[:, k] * normal_applied[:, k]
            delta = _row_delta(dv, dw, friction_rows, k, friction_rows.rhs[:, k])
            old = friction_applied[:, k]
            total = old + delta
            below, under = total < -limit, total < limit
            delta = torch.where(below, -limit - old, delta)
            new = torch.where(below, -limit, total)
            delta = torch.where(under, delta, limit - old)
            new = torch.where(under, new, limit)
            on = solving[:, k] & (normal_applied[:, k] > 0)
            delta = torch.where(on, delta, 0.0)
            friction_applied = friction_applied.clone()
            friction_applied[:, k] = torch.where(on, new, old)
            dv, dw = _apply(dv, dw, friction_rows, k, inv_mass, delta)
    return result(dv, dw, push, turn)


def compact_rows(rows: ContactRows, key: torch.Tensor) -> ContactRows:
    """The rows sorted by ``key`` [N, R] (solve order; inactive rows last), trimmed on eager CPU to
    the batch's longest list."""
    order = torch.sort(torch.where(rows.active, key, torch.iinfo(torch.int64).max), dim=1, stable=True).indices
    width = eager_cpu_width(rows.active.sum(1), rows.active.shape[1])
    order = order[:, :width]
    return ContactRows(**{f.name: gather_rows(getattr(rows, f.name), order) for f in dataclasses.fields(rows)})
