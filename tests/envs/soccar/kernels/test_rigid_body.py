"""`kernels/rigid_body.py` against `rigid_body.py`: the car's rigid body (btRigidBody, btTransformUtil,
btMatrix3x3, btQuaternion) on the same inputs. Rotations are the sampled cars' (`car_states`), some
turned by quarter turns (Shepperd's method takes each branch of the largest diagonal term);
velocities, impulses and solver deltas are random, some zero, some beyond the speed clamps."""

from __future__ import annotations

import pytest
import torch

from nitro.envs.soccar import rigid_body as reference
from nitro.envs.soccar.kernels import rigid_body as twin
from nitro.envs.soccar.kernels.car import car_table, load_car_params
from tests.envs.soccar.kernels.car_states import ATOL, CAR_BLOCK, columns, sample_cars, split, store_outputs
from tests.envs.soccar.kernels.twins import DEVICE, REL_TOL, assert_close, runnable

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable


@triton.jit
def load3(ptr, lane, live):
    return (
        tl.load(ptr + lane * 3, mask=live, other=0.0),
        tl.load(ptr + lane * 3 + 1, mask=live, other=0.0),
        tl.load(ptr + lane * 3 + 2, mask=live, other=0.0),
    )


@triton.jit
def rigid_body_kernel(
    pos_ptr,
    rot_mat_ptr,
    vel_ptr,
    ang_vel_ptr,
    force_ptr,
    torque_ptr,
    dv_ptr,
    dw_ptr,
    push_v_ptr,
    push_w_ptr,
    car_table_ptr,
    out_ptr,
    n,
    tick_time,
    gravity_z,
    WIDTH: tl.constexpr,
    BLOCK: tl.constexpr,
):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    rot_mat = (load3(rot_mat_ptr, lane * 3, live), load3(rot_mat_ptr, lane * 3 + 1, live))
    rot_mat = rot_mat + (load3(rot_mat_ptr, lane * 3 + 2, live),)
    pos, vel, ang_vel = load3(pos_ptr, lane, live), load3(vel_ptr, lane, live), load3(ang_vel_ptr, lane, live)
    force, torque = load3(force_ptr, lane, live), load3(torque_ptr, lane, live)
    dv, dw = load3(dv_ptr, lane, live), load3(dw_ptr, lane, live)
    push_v, push_w = load3(push_v_ptr, lane, live), load3(push_w_ptr, lane, live)
    inv_inertia_local = load_car_params(car_table_ptr, 0)[0]

    inv_inertia = twin.inv_inertia_world(rot_mat, inv_inertia_local)
    out = inv_inertia[0] + inv_inertia[1] + inv_inertia[2]
    inverse = twin.mat_inverse(inv_inertia)
    out = out + inverse[0] + inverse[1] + inverse[2]
    q = twin.quat_from_basis(rot_mat)
    out = out + q
    basis = twin.basis_from_quat(twin.quat_mul(q, (vel[0] * 1e-4, vel[1] * 1e-4, vel[2] * 1e-4, q[3])))
    out = out + basis[0] + basis[1] + basis[2]
    out = out + twin.apply_impulse(vel, ang_vel, inv_inertia, force, torque)[0]
    out = out + twin.apply_impulse(vel, ang_vel, inv_inertia, force, torque)[1]
    force = twin.apply_gravity(force, gravity_z)
    ext_v, ext_w = twin.external_impulses(force, torque, inv_inertia, tick_time)
    out = out + ext_v + ext_w
    new_pos, new_rot_mat, new_vel, new_ang_vel = twin.integrate(
        pos, rot_mat, vel, ang_vel, ext_v, ext_w, dv, dw, push_v, push_w, tick_time
    )
    out = out + new_pos + new_rot_mat[0] + new_rot_mat[1] + new_rot_mat[2] + new_vel + new_ang_vel
    clamped = twin.clamp_speeds(vel, ang_vel)
    out = out + clamped[0] + clamped[1] + twin.safe_normalized(dv)
    store_outputs(out_ptr, lane, out, WIDTH, live)


def test_rigid_body():
    """inv_inertia_world, mat_inverse, quat_from_basis, quat_mul and basis_from_quat, apply_impulse,
    apply_gravity, external_impulses, integrate (with and without split-impulse pushes) and
    clamp_speeds."""
    sample = sample_cars()
    config, params = sample.arena.world.cars, sample.arena.world.params
    rot_mat = sample.cars.rot_mat[:, 0]
    n = len(rot_mat)
    g = torch.Generator().manual_seed(9)
    # quarter turns about x, y or z so every diagonal term of the rotation gets to be the largest
    quarter = torch.tensor(
        [
            [[1.0, 0, 0], [0, 1, 0], [0, 0, 1]],
            [[1.0, 0, 0], [0, 0, -1], [0, 1, 0]],
            [[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]],
            [[0.0, -1, 0], [1, 0, 0], [0, 0, 1]],
        ]
    )
    turn = torch.randint(0, 4, (n,), generator=g)
    rot_mat = reference.mat_mul(rot_mat, quarter[turn])
    pos = sample.cars.pos[:, 0]
    vel = torch.randn(n, 3, generator=g) * 1500
    ang_vel = torch.randn(n, 3, generator=g) * 4
    ang_vel[:8] = torch.randn(8, 3, generator=g) * 1e-4  # the exponential map's Taylor branch
    force = torch.randn(n, 3, generator=g) * 5e4
    torque = torch.randn(n, 3, generator=g) * 5e6
    dv = torch.randn(n, 3, generator=g) * 300 * (torch.rand(n, 1, generator=g) < 0.5)
    dv[:4] = 1e-12  # safe_normalized's fallback
    dw = torch.randn(n, 3, generator=g) * 2 * (torch.rand(n, 1, generator=g) < 0.5)
    pushing = torch.rand(n, 1, generator=g) < 0.5
    push_v, push_w = torch.randn(n, 3, generator=g) * 50 * pushing, torch.randn(n, 3, generator=g) * pushing

    ii = reference.inv_inertia_world(rot_mat, config.inv_inertia_local[0])
    q = reference.quat_from_basis(rot_mat)
    turned = torch.cat((vel * 1e-4, q[:, 3:]), 1)
    forces = reference.Forces(force=force, torque=torque)
    ext_v, ext_w = reference.external_impulses(reference.apply_gravity(forces, params.gravity_z), ii, params.tick_time)
    expected = {
        "inv_inertia_world": ii,
        "mat_inverse": reference.mat_inverse(ii),
        "quat_from_basis": q,
        "basis_from_quat": reference.basis_from_quat(reference.quat_mul(q, turned)),
        "apply_impulse.vel": reference.apply_impulse(vel, ang_vel, ii, force, torque)[0],
        "apply_impulse.ang_vel": reference.apply_impulse(vel, ang_vel, ii, force, torque)[1],
        "external_impulses.vel": ext_v,
        "external_impulses.ang_vel": ext_w,
    }
    names = ("pos", "rot_mat", "vel", "ang_vel")
    integrated = reference.integrate(pos, rot_mat, vel, ang_vel, ext_v, ext_w, dv, dw, push_v, push_w, params.tick_time)
    expected |= {f"integrate.{name}": value for name, value in zip(names, integrated)}
    expected["clamp_speeds.vel"], expected["clamp_speeds.ang_vel"] = reference.clamp_speeds(vel, ang_vel)
    expected["safe_normalized"] = reference.safe_normalized(dv)
    expected = {name: columns(value, n) for name, value in expected.items()}
    widths = {name: value.shape[1] for name, value in expected.items()}
    out = torch.empty(n, sum(widths.values()), device=DEVICE)
    inputs = [x.contiguous().to(DEVICE) for x in (pos, rot_mat, vel, ang_vel, force, torque, dv, dw, push_v, push_w)]
    rigid_body_kernel[(triton.cdiv(n, CAR_BLOCK),)](
        *inputs, car_table(config).to(DEVICE), out, n, params.tick_time, params.gravity_z,
        WIDTH=out.shape[1], BLOCK=CAR_BLOCK, num_warps=CAR_BLOCK // 32,
    )  # fmt: skip
    got = split(out, widths)
    assert int((expected["clamp_speeds.vel"] != vel).any(1).sum()) > 0  # the clamps act on some
    for name, value in expected.items():
        stage_output = name.split(".")[-1]
        atol = ATOL.get(stage_output, 1e-5)
        if name in ("inv_inertia_world", "mat_inverse"):
            # inertias are ~1e-7 (1 / (mass x UU^2)) and their inverses ~1e7; entries near zero come
            # from cancelling products of the largest ones: tolerances relative to the largest entry
            atol = REL_TOL * float(value.abs().max())
        try:
            assert_close(got[name], value, atol=atol, rtol=REL_TOL)
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from None
