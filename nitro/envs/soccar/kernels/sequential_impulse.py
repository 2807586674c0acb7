"""The kernels' btSequentialImpulseConstraintSolver: the twin of `sequential_impulse.py`, one env per
lane. The rows' constants (`setup_rows`) and the bodies' velocity deltas live in per-lane scratch
memory, which the Gauss-Seidel sweeps read and write row by row."""

from __future__ import annotations

import math

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.contacts import ContactRows
from nitro.envs.soccar.kernels import constexpr, jit, require_triton, tl, triton, warps
from nitro.envs.soccar.kernels.vec import add, cross, dot, load, neg, scale, store, sub, where
from nitro.envs.soccar.mutators import TickParams

SOLVE_BLOCK = 32
SETUP_FIELDS = 40  # floats per row in the scratch: the normal row and the friction row
BODY_FIELDS = 12  # dv, dw, push, turn per body
SETUP_STRIDE = constexpr(SETUP_FIELDS)  # the kernels' copy (a kernel reads only constexpr globals)


@jit
def simd_dot3(a, b):
    """btSimdDot3 of the SSE2 solver rows: x + (y + z)."""
    return a[0] * b[0] + (a[1] * b[1] + a[2] * b[2])


@jit
def plane_space(n, SQRT12: tl.constexpr):
    """btPlaneSpace1's first tangent of ``n``."""
    use_yz = tl.abs(n[2]) > SQRT12
    k_yz = 1.0 / tl.sqrt(tl.where(use_yz, n[1] * n[1] + n[2] * n[2], 1.0))
    k_xy = 1.0 / tl.sqrt(tl.where(use_yz, 1.0, n[0] * n[0] + n[1] * n[1]))
    zero = n[0] * 0.0
    return where(use_yz, (zero, -n[2] * k_yz, n[1] * k_yz), (-n[1] * k_xy, n[0] * k_xy, zero))


@jit
def mat_vec9(m, v):
    """A row-major 3x3 (9 values) times v."""
    return (
        m[0] * v[0] + m[1] * v[1] + m[2] * v[2],
        m[3] * v[0] + m[4] * v[1] + m[5] * v[2],
        m[6] * v[0] + m[7] * v[1] + m[8] * v[2],
    )


@jit
def _jacobian(direction, rel_a, rel_b, inv_i_a, inv_i_b, inv_mass_a, inv_mass_b, static_b, FRICTION: tl.constexpr):
    """The rows' body terms: (torque_a, angular_a, normal_b, torque_b, angular_b, jac)."""
    torque_a = cross(rel_a, direction)
    angular_a = mat_vec9(inv_i_a, torque_a)
    if FRICTION:
        torque_b = cross(rel_b, neg(direction))
    else:
        torque_b = neg(cross(rel_b, direction))
    angular_b = mat_vec9(inv_i_b, torque_b)
    denom_a = inv_mass_a + dot(direction, cross(angular_a, rel_a))
    denom_b = tl.where(static_b, 0.0, inv_mass_b + dot(direction, cross(neg(angular_b), rel_b)))
    zero = (direction[0] * 0.0, direction[1] * 0.0, direction[2] * 0.0)
    normal_b = where(static_b, zero, neg(direction))
    torque_b = where(static_b, zero, torque_b)
    angular_b = where(static_b, zero, angular_b)
    return torque_a, angular_a, normal_b, torque_b, angular_b, 1.0 / ((denom_a + denom_b) + 0.0)


@jit
def _body(vel_ptr, ang_ptr, ext_v_ptr, ext_w_ptr, inv_mass_ptr, inv_i_ptr, env, body, num_bodies, live):
    """One body's (vel, ang_vel, ext_v, ext_w, inv_mass, inv_inertia) from the tables; the arena
    (body -1) reads zeros."""
    static = body < 0
    index = env * num_bodies + tl.where(static, 0, body)
    mask = live & ~static
    zero = (0.0, 0.0, 0.0)
    vel = load(vel_ptr + index * 3, mask, zero)
    ang = load(ang_ptr + index * 3, mask, zero)
    ext_v = load(ext_v_ptr + index * 3, mask, zero)
    ext_w = load(ext_w_ptr + index * 3, mask, zero)
    inv_mass = tl.load(inv_mass_ptr + index, mask=mask, other=0.0)
    inv_i = (
        tl.load(inv_i_ptr + index * 9, mask=mask, other=0.0), tl.load(inv_i_ptr + index * 9 + 1, mask=mask, other=0.0),
        tl.load(inv_i_ptr + index * 9 + 2, mask=mask, other=0.0), tl.load(inv_i_ptr + index * 9 + 3, mask=mask, other=0.0),
        tl.load(inv_i_ptr + index * 9 + 4, mask=mask, other=0.0), tl.load(inv_i_ptr + index * 9 + 5, mask=mask, other=0.0),
        tl.load(inv_i_ptr + index * 9 + 6, mask=mask, other=0.0), tl.load(inv_i_ptr + index * 9 + 7, mask=mask, other=0.0),
        tl.load(inv_i_ptr + index * 9 + 8, mask=mask, other=0.0),
    )  # fmt: skip
    return vel, ang, ext_v, ext_w, inv_mass, inv_i


@jit
def setup_rows(
    n_, rel_a, rel_b, depth, friction_coef, restitution_coef, static_b, body_a, body_b,
    inv_dt, erp2, restitution_threshold, SIMD_EPSILON: tl.constexpr, SQRT12: tl.constexpr,
):  # fmt: skip
    """setupContactConstraint and convertContactInner for one row (per lane): the normal row, its
    push rhs and the friction row, as flat tuples."""
    va, wa, ea, eva, ma, iia = body_a
    vb, wb, eb, ewb, mb, iib = body_b
    torque_a, angular_a, normal_b, torque_b, angular_b, jac = _jacobian(
        n_, rel_a, rel_b, iia, iib, ma, mb, static_b, False
    )
    vel_a = add(va, cross(wa, rel_a))
    vel_b = where(static_b, (0.0, 0.0, 0.0), add(vb, cross(wb, rel_b)))
    approach = dot(n_, sub(vel_a, vel_b))
    restitution = tl.where(tl.abs(approach) < restitution_threshold, 0.0, restitution_coef * -approach)
    restitution = tl.maximum(restitution, 0.0)
    rel_vel = (dot(n_, add(va, ea)) + dot(torque_a, add(wa, eva))) + (dot(normal_b, add(vb, eb)) + dot(torque_b, add(wb, ewb)))
    rhs = (restitution - rel_vel) * jac
    push = tl.where(depth > 0, 0.0, ((-depth) * erp2) * inv_dt) * jac
    slide_a = add(add(va, ea), cross(add(wa, eva), rel_a))
    slide_b = where(static_b, (0.0, 0.0, 0.0), add(add(vb, eb), cross(add(wb, ewb), rel_b)))
    slide = sub(slide_a, slide_b)
    lateral = sub(slide, scale(n_, dot(n_, slide)))
    lateral2 = dot(lateral, lateral)
    sliding = lateral2 > SIMD_EPSILON
    tangent = where(sliding, scale(lateral, 1.0 / tl.sqrt(tl.where(sliding, lateral2, 1.0))), plane_space(n_, SQRT12))
    f_torque_a, f_angular_a, f_normal_b, f_torque_b, f_angular_b, f_jac = _jacobian(
        tangent, rel_a, rel_b, iia, iib, ma, mb, static_b, True
    )
    f_rel = (dot(tangent, add(va, ea)) + dot(f_torque_a, wa)) + (dot(f_normal_b, add(vb, eb)) + dot(f_torque_b, wb))
    f_rhs = (0.0 - f_rel) * f_jac
    return (
        (n_, torque_a, angular_a, normal_b, torque_b, angular_b, jac, rhs),
        push,
        (tangent, f_torque_a, f_angular_a, f_normal_b, f_torque_b, f_angular_b, f_jac, f_rhs),
    )


@jit
def _store_row(ptr, row, mask):
    n_, torque_a, angular_a, normal_b, torque_b, angular_b, jac, rhs = row
    store(ptr, n_, mask)
    store(ptr + 3, torque_a, mask)
    store(ptr + 6, angular_a, mask)
    store(ptr + 9, normal_b, mask)
    store(ptr + 12, torque_b, mask)
    store(ptr + 15, angular_b, mask)
    tl.store(ptr + 18, jac, mask=mask)
    tl.store(ptr + 19, rhs, mask=mask)


@jit
def _load_row(ptr, mask):
    zero = (0.0, 0.0, 0.0)
    return (
        load(ptr, mask, zero), load(ptr + 3, mask, zero), load(ptr + 6, mask, zero), load(ptr + 9, mask, zero),
        load(ptr + 12, mask, zero), load(ptr + 15, mask, zero), tl.load(ptr + 18, mask=mask, other=0.0),
        tl.load(ptr + 19, mask=mask, other=0.0),
    )  # fmt: skip


@jit
def row_impulse(row, rhs, applied, lower, upper, on, lin_a, ang_a, lin_b, ang_b):
    """A row's impulse on bodies A and B with these (linear, angular) deltas, as the SSE2 rows compute
    it: (the impulse to apply, 0 where the row is off; the row's new applied impulse, clamped to its
    limits)."""
    n_, torque_a, normal_b, torque_b, jac = row[0], row[1], row[3], row[4], row[6]
    d1 = simd_dot3(n_, lin_a) + simd_dot3(torque_a, ang_a)
    d2 = simd_dot3(normal_b, lin_b) + simd_dot3(torque_b, ang_b)
    delta, new = clamp_impulse(applied, (rhs - d1 * jac) - d2 * jac, lower, upper)
    return tl.where(on, delta, 0.0), new


@jit
def clamp_impulse(applied, delta, lower, upper=None):
    """A row's impulse ``delta`` with its sum over the solve clamped to ``lower`` (and ``upper``), as the
    SSE2 rows clamp it: (the impulse to apply, the row's new applied impulse)."""
    total = applied + delta
    below = total < lower
    delta = tl.where(below, lower - applied, delta)
    new = tl.where(below, lower, total)
    if upper is not None:
        under = total < upper
        delta = tl.where(under, delta, upper - applied)
        new = tl.where(under, new, upper)
    return delta, new


@jit
def _resolve(state_ptr, row, rhs, applied, lower, upper, on, body_a, body_b, inv_mass_a, inv_mass_b, mask, OFFSET: tl.constexpr):
    """One row's impulse (the SSE2 rows: the limits clamp, then both bodies take it). ``state_ptr``
    [lane] points at the lane's bodies' (dv, dw, push, turn) table; ``OFFSET`` picks (dv, dw) or
    (push, turn). Returns the new applied impulse."""
    n_, _, angular_a, normal_b, _, angular_b, _, _ = row
    pa = state_ptr + body_a * 12 + OFFSET
    pb = state_ptr + body_b * 12 + OFFSET
    zero = (0.0, 0.0, 0.0)
    lin_a, ang_a = load(pa, mask, zero), load(pa + 3, mask, zero)
    lin_b, ang_b = load(pb, mask, zero), load(pb + 3, mask, zero)
    delta, new = row_impulse(row, rhs, applied, lower, upper, on, lin_a, ang_a, lin_b, ang_b)
    store(pa, add(lin_a, scale(scale(n_, inv_mass_a), delta)), mask)
    store(pa + 3, add(ang_a, scale(angular_a, delta)), mask)
    # the arena's body is a spare slot, which takes zeros
    store(pb, add(lin_b, scale(scale(normal_b, inv_mass_b), delta)), mask)
    store(pb + 3, add(ang_b, scale(angular_b, delta)), mask)
    return tl.where(on, new, applied)


@jit
def solve_contacts_kernel(
    body_a_ptr, body_b_ptr, normal_ptr, rel_a_ptr, rel_b_ptr, depth_ptr, friction_ptr, restitution_ptr,
    special_ptr, active_ptr, vel_ptr, ang_ptr, ext_v_ptr, ext_w_ptr, inv_mass_ptr, inv_i_ptr,
    setup_ptr, applied_ptr, state_ptr, n, num_rows, num_bodies, inv_dt, erp2, restitution_threshold,
    ITERATIONS: tl.constexpr, SIMD_EPSILON: tl.constexpr, SQRT12: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """solve_contacts for one env per lane: ``state_ptr`` [N, B + 1, 12] (zeroed) receives each body's
    (dv, dw, push, turn), the last slot standing for the arena."""
    env = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = env < n
    state = state_ptr + env * ((num_bodies + 1) * 12)
    for k in range(num_rows):  # setup
        r = env * num_rows + k
        active = tl.load(active_ptr + r, mask=live, other=0) != 0
        body_a = tl.load(body_a_ptr + r, mask=live, other=0)
        body_b = tl.load(body_b_ptr + r, mask=live, other=-1)
        static_b = body_b < 0
        normal = where(active, load(normal_ptr + r * 3, live, (0.0, 0.0, 1.0)), (0.0, 0.0, 1.0))
        rel_a = load(rel_a_ptr + r * 3, live, (0.0, 0.0, 0.0))
        rel_b = load(rel_b_ptr + r * 3, live, (0.0, 0.0, 0.0))
        row, push, friction_row = setup_rows(
            normal, rel_a, rel_b, tl.load(depth_ptr + r, mask=live, other=0.0),
            tl.load(friction_ptr + r, mask=live, other=0.0), tl.load(restitution_ptr + r, mask=live, other=0.0),
            static_b,
            _body(vel_ptr, ang_ptr, ext_v_ptr, ext_w_ptr, inv_mass_ptr, inv_i_ptr, env, body_a, num_bodies, live),
            _body(vel_ptr, ang_ptr, ext_v_ptr, ext_w_ptr, inv_mass_ptr, inv_i_ptr, env, body_b, num_bodies, live),
            inv_dt, erp2, restitution_threshold, SIMD_EPSILON, SQRT12,
        )  # fmt: skip
        _store_row(setup_ptr + r * SETUP_STRIDE, row, live)
        _store_row(setup_ptr + r * SETUP_STRIDE + 20, friction_row, live)
        tl.store(applied_ptr + r * 4, push, mask=live)  # the push rhs, then three applied impulses
        tl.store(applied_ptr + r * 4 + 1, 0.0, mask=live)
        tl.store(applied_ptr + r * 4 + 2, 0.0, mask=live)
        tl.store(applied_ptr + r * 4 + 3, 0.0, mask=live)
    big = 1e30
    for _ in range(ITERATIONS):  # the split impulse: rows without a penetration term are skipped
        for k in range(num_rows):
            r = env * num_rows + k
            active = tl.load(active_ptr + r, mask=live, other=0) != 0
            push = tl.load(applied_ptr + r * 4, mask=live, other=0.0)
            body_a = tl.load(body_a_ptr + r, mask=live, other=0)
            body_b = tl.load(body_b_ptr + r, mask=live, other=-1)
            body_b = tl.where(body_b < 0, num_bodies, body_b)
            ma = tl.load(inv_mass_ptr + env * num_bodies + body_a, mask=live, other=0.0)
            mb = tl.load(inv_mass_ptr + env * num_bodies + body_b, mask=live & (body_b < num_bodies), other=0.0)
            row = _load_row(setup_ptr + r * SETUP_STRIDE, live)
            applied = tl.load(applied_ptr + r * 4 + 1, mask=live, other=0.0)
            applied = _resolve(state, row, push, applied, 0.0, big, active & (push != 0), body_a, body_b, ma, mb, live, 6)
            tl.store(applied_ptr + r * 4 + 1, applied, mask=live)
    for _ in range(ITERATIONS):  # every normal row but the special points, then every friction row
        for k in range(num_rows):
            r = env * num_rows + k
            on = (tl.load(active_ptr + r, mask=live, other=0) != 0) & (tl.load(special_ptr + r, mask=live, other=1) == 0)
            body_a = tl.load(body_a_ptr + r, mask=live, other=0)
            body_b = tl.load(body_b_ptr + r, mask=live, other=-1)
            body_b = tl.where(body_b < 0, num_bodies, body_b)
            ma = tl.load(inv_mass_ptr + env * num_bodies + body_a, mask=live, other=0.0)
            mb = tl.load(inv_mass_ptr + env * num_bodies + body_b, mask=live & (body_b < num_bodies), other=0.0)
            row = _load_row(setup_ptr + r * SETUP_STRIDE, live)
            applied = tl.load(applied_ptr + r * 4 + 2, mask=live, other=0.0)
            applied = _resolve(state, row, row[7], applied, 0.0, big, on, body_a, body_b, ma, mb, live, 0)
            tl.store(applied_ptr + r * 4 + 2, applied, mask=live)
        for k in range(num_rows):
            r = env * num_rows + k
            on = (tl.load(active_ptr + r, mask=live, other=0) != 0) & (tl.load(special_ptr + r, mask=live, other=1) == 0)
            normal_applied = tl.load(applied_ptr + r * 4 + 2, mask=live, other=0.0)
            limit = tl.load(friction_ptr + r, mask=live, other=0.0) * normal_applied
            body_a = tl.load(body_a_ptr + r, mask=live, other=0)
            body_b = tl.load(body_b_ptr + r, mask=live, other=-1)
            body_b = tl.where(body_b < 0, num_bodies, body_b)
            ma = tl.load(inv_mass_ptr + env * num_bodies + body_a, mask=live, other=0.0)
            mb = tl.load(inv_mass_ptr + env * num_bodies + body_b, mask=live & (body_b < num_bodies), other=0.0)
            row = _load_row(setup_ptr + r * SETUP_STRIDE + 20, live)
            applied = tl.load(applied_ptr + r * 4 + 3, mask=live, other=0.0)
            applied = _resolve(state, row, row[7], applied, -limit, limit, on & (normal_applied > 0), body_a, body_b, ma, mb, live, 0)
            tl.store(applied_ptr + r * 4 + 3, applied, mask=live)


def launch_solve_contacts(rows: ContactRows, bodies, params: TickParams):
    """`sequential_impulse.solve_contacts` as a kernel (``bodies``: `SolverBodies`). Returns the
    reference's `SolverResult` fields (dv, dw, push, turn) [N, B, 3]."""
    require_triton()
    n, r = rows.active.shape
    b = bodies.inv_mass.shape[1]
    device = bodies.vel.device
    setup = torch.empty(n, max(r, 1), SETUP_FIELDS, device=device)
    applied = torch.empty(n, max(r, 1), 4, device=device)
    state = torch.zeros(n, b + 1, BODY_FIELDS, device=device)
    c = lambda x, dtype=None: (x if dtype is None else x.to(dtype)).contiguous()
    inv_dt = C.f32(1 / C.f32(params.tick_time))  # plain Python floats: compiled code folds them
    solve_contacts_kernel[(triton.cdiv(n, SOLVE_BLOCK),)](
        c(rows.body_a, torch.int32), c(rows.body_b, torch.int32), c(rows.normal), c(rows.rel_pos_a), c(rows.rel_pos_b),
        c(rows.depth), c(rows.friction), c(rows.restitution), c(rows.special, torch.int8), c(rows.active, torch.int8),
        c(bodies.vel), c(bodies.ang_vel), c(bodies.ext_v), c(bodies.ext_w), c(bodies.inv_mass),
        c(bodies.inv_inertia.reshape(n, b, 9)), setup, applied, state, n, r, b, inv_dt,
        C.f32(C.SOLVER_ERP2),
        C.SOLVER_RESTITUTION_VELOCITY_THRESHOLD * C.UU_TO_BT_F32,
        ITERATIONS=C.SOLVER_NUM_ITERATIONS, SIMD_EPSILON=C.SIMD_EPSILON,
        SQRT12=C.f32(math.sqrt(0.5)), BLOCK=SOLVE_BLOCK, num_warps=warps(SOLVE_BLOCK),
    )  # fmt: skip
    return state[:, :b, 0:3], state[:, :b, 3:6], state[:, :b, 6:9], state[:, :b, 9:12]
