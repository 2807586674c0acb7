"""`kernels/ball.py` against `ball.py`, stage by stage: the same inputs into both, the outputs compared.

The solver stages read manifolds: the reference's own (`manifolds.sphere_manifolds` on balls near
random triangles), loaded into the kernel's per-lane layout, so both solve the same contacts (the
contact query itself is checked by `kernel_checks`).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from nitro.envs.soccar import ball as reference
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.contacts import MAX_PUSH_POINTS
from nitro.envs.soccar.kernels import ball as twin
from nitro.envs.soccar.kernels.vec import load, store
from nitro.envs.soccar.manifolds import sphere_manifolds
from nitro.envs.soccar.mutators import MutatorConfig, TickParams
from nitro.envs.soccar.state import BallState
from tests.envs.soccar.kernels.kernel_checks import query_points
from tests.envs.soccar.kernels.twins import (
    BLOCK,
    DEVICE,
    REL_TOL,
    assert_close,
    assert_same,
    programs,
    runnable,
)

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable
PARAMS = TickParams.from_mutators(MutatorConfig(), float(torch.tensor(1 / 120, dtype=torch.float32)))
SPEED_TOL = 1e-3
"""UU/s (rad/s for spins) beside `REL_TOL`: velocities of zero where the reference's order of a sum
of contact normals differs from the kernel's by an ulp of the normal, times lever-arm terms."""
POS_TOL = 2e-3
"""UU: positions of up to 6,000 UU, an ulp is 4.9e-4; integrate adds three terms (4 ulps)."""


def random_balls(n: int, seed: int):
    """Velocities (up to ~4,000 UU/s, some exactly zero or above the clamp) and spins (some above 6 rad/s)."""
    g = torch.Generator().manual_seed(seed)
    vel = torch.randn(n, 3, generator=g) * 1500
    ang_vel = torch.randn(n, 3, generator=g) * 3
    vel[:4], ang_vel[:4] = 0.0, 0.0  # sleeping balls
    ang_vel[4:6] = 0.0  # moving, not spinning
    vel[6:10] *= 4  # beyond the speed clamp
    return vel, ang_vel


@triton.jit
def load_manifolds(obj_ptr, count_ptr, offset_ptr, normal_ptr, depth_ptr, lane, live):
    """[N, 4] objects and counts, [N, 4, 4, 3] offsets and normals and [N, 4, 4] depths as the
    kernels hold a manifold (`kernels/manifolds.py`; the arena points are not kept)."""
    obj = ()
    count = ()
    for s in tl.static_range(4):
        obj = obj + (tl.load(obj_ptr + lane * 4 + s, mask=live, other=-1),)
        count = count + (tl.load(count_ptr + lane * 4 + s, mask=live, other=0),)
    ox, oy, oz, nx, ny, nz, depth = (), (), (), (), (), (), ()
    for q in tl.static_range(16):
        o = load(offset_ptr + lane * 48 + q * 3, live, (0.0, 0.0, 0.0))
        n = load(normal_ptr + lane * 48 + q * 3, live, (0.0, 0.0, 1.0))
        ox, oy, oz = ox + (o[0],), oy + (o[1],), oz + (o[2],)
        nx, ny, nz = nx + (n[0],), ny + (n[1],), nz + (n[2],)
        depth = depth + (tl.load(depth_ptr + lane * 16 + q, mask=live, other=0.0),)
    return obj, count, (ox, oy, oz), ((), (), ()), (nx, ny, nz), depth


@triton.jit
def solver_kernel(
    vel_ptr,
    ang_vel_ptr,
    obj_ptr,
    count_ptr,
    offset_ptr,
    normal_ptr,
    depth_ptr,
    dv_out,
    dw_out,
    push_out,
    n,
    gravity_dv,
    ball_inv_mass,
    ball_inv_inertia,
    ball_restitution,
    ball_friction,
    restitution_velocity_threshold,
    friction_direction_epsilon_sq,
    erp2_over_dt,
    ITERATIONS: tl.constexpr,
    PUSH_POINTS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    vel = load(vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    ang_vel = load(ang_vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    manifolds = load_manifolds(obj_ptr, count_ptr, offset_ptr, normal_ptr, depth_ptr, lane, live)
    zero = (vel[0] * 0.0, vel[0] * 0.0, vel[0] * 0.0)
    dv, dw = twin.solve_world_contact(
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
        (zero, zero),
        ITERATIONS,
        BLOCK,
    )
    push = twin.split_impulse_push(
        manifolds, ball_inv_mass, ball_inv_inertia, erp2_over_dt, (zero, zero), ITERATIONS, PUSH_POINTS, BLOCK
    )
    store(dv_out + lane * 3, dv, live)
    store(dw_out + lane * 3, dw, live)
    store(push_out + lane * 3, push, live)


def test_solve_world_contact_and_split_impulse_push(mesh):
    n = 4 * BLOCK
    # balls 10 UU deep to 1 UU inside the gap of random triangles (every one touches), some anywhere
    pos = query_points(mesh, n, 11, PARAMS.ball_radius - 10.0, PARAMS.ball_radius + 1.0)[:n]
    manifolds = sphere_manifolds(mesh, pos, PARAMS.ball_radius, PARAMS.ball_contact_gap)
    vel, ang_vel = random_balls(n, 12)
    vel = reference.apply_damping(vel, PARAMS)
    on = [x.to(DEVICE).contiguous() for x in (vel, ang_vel)]
    on += [
        getattr(manifolds, f).to(DEVICE).contiguous()
        for f in ("object", "count", "offset", "normal", "depth")
    ]
    dv, dw, push = (torch.empty(n, 3, device=DEVICE) for _ in range(3))
    solver_kernel[programs(n)](
        *on,
        dv,
        dw,
        push,
        n,
        **{
            name: getattr(PARAMS, name)
            for name in (
                "gravity_dv",
                "ball_inv_mass",
                "ball_inv_inertia",
                "ball_restitution",
                "ball_friction",
                "restitution_velocity_threshold",
                "friction_direction_epsilon_sq",
                "erp2_over_dt",
            )
        },
        ITERATIONS=C.SOLVER_NUM_ITERATIONS,
        PUSH_POINTS=MAX_PUSH_POINTS,
        BLOCK=BLOCK,
    )
    ref_dv, ref_dw = reference.solve_world_contact(vel, ang_vel, manifolds, PARAMS)
    ref_push = reference.split_impulse_push(manifolds, PARAMS)
    # the sample exercises bounces, rolling contacts and pushes out of the arena
    assert int((ref_dv.norm(dim=1) > 0).sum()) >= n // 2 and int((ref_push.norm(dim=1) > 0).sum()) >= n // 4
    assert_close(dv, ref_dv, atol=SPEED_TOL, rtol=REL_TOL)
    assert_close(dw, ref_dw, atol=SPEED_TOL, rtol=REL_TOL)
    assert_close(push, ref_push, atol=SPEED_TOL, rtol=REL_TOL)


@triton.jit
def stages_kernel(
    pos_ptr,
    vel_ptr,
    ang_vel_ptr,
    velocity_impulse_cache_ptr,
    tick_count_since_update_ptr,
    dv_ptr,
    push_ptr,
    sleeping_out,
    damped_out,
    tangent_out,
    pos_out,
    vel_out,
    ang_vel_out,
    finished_vel_out,
    finished_ang_vel_out,
    finished_cache_out,
    finished_count_out,
    scored_out,
    n,
    tick_time,
    gravity_dv,
    ball_damping,
    ball_max_speed,
    ball_max_ang_speed,
    goal_y,
    BLOCK: tl.constexpr,
):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    pos = load(pos_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    vel = load(vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    ang_vel = load(ang_vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    dv = load(dv_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    push = load(push_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    tl.store(sleeping_out + lane, twin.update_sleeping(vel, ang_vel).to(tl.int8), mask=live)
    store(damped_out + lane * 3, twin.apply_damping(vel, ball_damping), live)
    # plane_space of a unit vector: the velocity's direction stands in for a contact normal (+z at rest)
    moving = (vel[0] * vel[0] + vel[1] * vel[1] + vel[2] * vel[2]) > 0
    k = 1.0 / tl.sqrt(tl.where(moving, vel[0] * vel[0] + vel[1] * vel[1] + vel[2] * vel[2], 1.0))
    unit = (
        tl.where(moving, vel[0] * k, 0.0),
        tl.where(moving, vel[1] * k, 0.0),
        tl.where(moving, vel[2] * k, 1.0),
    )
    store(tangent_out + lane * 3, twin.plane_space(unit), live)
    new_pos, new_vel, new_ang_vel = twin.integrate(
        pos, vel, ang_vel, dv, ang_vel, push, tick_time, gravity_dv
    )
    store(pos_out + lane * 3, new_pos, live)
    store(vel_out + lane * 3, new_vel, live)
    store(ang_vel_out + lane * 3, new_ang_vel, live)
    vel, ang_vel, cache, count = twin.finish_physics_tick(
        vel,
        ang_vel,
        load(velocity_impulse_cache_ptr + lane * 3, live, (0.0, 0.0, 0.0)),
        tl.load(tick_count_since_update_ptr + lane, mask=live, other=0),
        ball_max_speed,
        ball_max_ang_speed,
    )
    store(finished_vel_out + lane * 3, vel, live)
    store(finished_ang_vel_out + lane * 3, ang_vel, live)
    store(finished_cache_out + lane * 3, cache, live)
    tl.store(finished_count_out + lane, count, mask=live)
    tl.store(scored_out + lane, twin.is_ball_scored(pos, goal_y).to(tl.int8), mask=live)


def test_stages_without_contacts():
    """update_sleeping, apply_damping, plane_space, integrate, finish_physics_tick, is_ball_scored."""
    n = 2 * BLOCK
    g = torch.Generator().manual_seed(13)
    vel, ang_vel = random_balls(n, 14)
    pos = torch.rand(n, 3, generator=g) * torch.tensor([8000.0, 11000.0, 2000.0]) - torch.tensor(
        [4000.0, 5500.0, 0.0]
    )
    pos[:8, 1] = PARAMS.goal_y + torch.tensor([-0.01, 0.01, 100.0, -100.0, 0.0, 0.0, 0.0, 0.0])
    pos[4:8, 1] = -pos[:4, 1]
    cache = torch.randn(n, 3, generator=g) * 500
    count = torch.randint(0, 1000, (n,), generator=g)
    dv = torch.randn(n, 3, generator=g) * 300
    push = torch.randn(n, 3, generator=g) * 50
    inputs = [x.to(DEVICE) for x in (pos, vel, ang_vel, cache, count, dv, push)]
    flags = [torch.empty(n, dtype=torch.int8, device=DEVICE)]
    vectors = [torch.empty(n, 3, device=DEVICE) for _ in range(8)]
    finished_count = torch.empty(n, dtype=torch.int64, device=DEVICE)
    scored = torch.empty(n, dtype=torch.int8, device=DEVICE)
    stages_kernel[programs(n)](
        *inputs,
        *flags,
        *vectors[:5],
        *vectors[5:],
        finished_count,
        scored,
        n,
        **{
            name: getattr(PARAMS, name)
            for name in (
                "tick_time",
                "gravity_dv",
                "ball_damping",
                "ball_max_speed",
                "ball_max_ang_speed",
                "goal_y",
            )
        },
        BLOCK=BLOCK,
    )
    damped, tangent, new_pos, new_vel, new_ang_vel, fin_vel, fin_ang_vel, fin_cache = vectors
    state = BallState.rest(n, "cpu")
    state = dataclasses.replace(
        state, pos=pos, vel=vel, ang_vel=ang_vel, velocity_impulse_cache=cache, tick_count_since_update=count
    )
    assert_same(flags[0].bool(), reference.update_sleeping(state))
    assert_close(damped, reference.apply_damping(vel, PARAMS), atol=0.0, rtol=REL_TOL)
    moving = (vel != 0).any(1, keepdim=True)
    unit = torch.where(
        moving, vel / vel.norm(dim=1, keepdim=True).where(moving, 1.0), torch.tensor([0.0, 0.0, 1.0])
    )
    # the kernel normalises by 1 / sqrt, the reference divides by the norm; rsqrt is numpy's 1 / sqrt
    # on the interpreter, PyTorch's own in the reference: a few ulps of a unit vector
    assert_close(tangent, reference.plane_space(unit), atol=1e-6)
    ref_pos, ref_vel, ref_ang_vel = reference.integrate(pos, vel, ang_vel, dv, ang_vel, push, PARAMS)
    assert_close(new_pos, ref_pos, atol=POS_TOL)
    assert_close(new_vel, ref_vel, atol=SPEED_TOL, rtol=REL_TOL)
    assert_close(new_ang_vel, ref_ang_vel, atol=0.0, rtol=REL_TOL)
    finished = reference.finish_physics_tick(state, PARAMS)
    assert_close(fin_vel, finished.vel, atol=SPEED_TOL, rtol=REL_TOL)
    assert_close(fin_ang_vel, finished.ang_vel, atol=0.0, rtol=REL_TOL)
    assert_close(fin_cache, finished.velocity_impulse_cache, atol=0.0)
    assert torch.equal(finished_count.cpu(), finished.tick_count_since_update)
    assert_same(scored.bool(), reference.is_ball_scored(pos, PARAMS))
    assert scored[:8].tolist() == [0, 1, 1, 0, 0, 1, 1, 0]
