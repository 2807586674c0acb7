"""`kernels/car_contacts.py`'s car-world stage against `car_contacts.py`'s: each car body's contact
manifolds with the arena (`car_world_contacts`) and their solve for the car alone (`solve_car_world`),
on car boxes of every preset placed at random orientations against the floor, the ceiling, the side
walls, the back walls and their corners, the goals and their posts (about half of them touching)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nitro.envs.soccar import car_contacts as reference
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.car_config import PRESETS
from nitro.envs.soccar.contacts import PLANE_OBJECT_BASE
from nitro.envs.soccar.kernels import car_contacts as twin
from nitro.envs.soccar.kernels.arena import ball_grid
from nitro.envs.soccar.kernels.arena_mesh import flat_tris, grid, grid_args
from nitro.envs.soccar.kernels.manifolds import point_at
from nitro.envs.soccar.kernels.vec import load, store
from nitro.envs.soccar.sequential_impulse import SolverResult
from tests.envs.soccar.kernels.kernel_checks import random_rotations
from tests.envs.soccar.kernels.twins import (
    BLOCK,
    DEVICE,
    NORMAL_TOL,
    REL_TOL,
    VALUE_TOL,
    assert_close,
    assert_same,
    programs,
    runnable,
)

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable
ENVS = 96
OFFSET_TOL = VALUE_TOL * 0.02
"""BT: the points on the car, from arena coordinates (`VALUE_TOL`, 16 ulps of them) converted."""
VELOCITY_TOL = 5e-3
"""UU/s and rad/s beside `REL_TOL`: the solve's deltas of speeds up to 2,300 UU/s share ulps among the
rows (an ulp there: 2.4e-4 UU/s), so a small component carries ~10 ulps of the largest (measured 2.3e-3)."""
RAW_NORMAL_TOL = NORMAL_TOL if DEVICE == "cpu" else 2e-3
"""The last contact's raw normal (GJK's, before the internal-edge smoothing), on a GPU: at a box's
edge or corner it is the difference of two points some 40 BT from the origin (an ulp 3.8e-6 BT) over
the inner shapes' distance (~0.07 BT), so each ulp that FMA contraction moves a point by turns it by
~1e-4. Measured on an H200: 6.3e-4, a car 0.033-0.040 BT from a side wall's edge; 2e-3 is ~16 ulps.
(The manifolds' smoothed normals stay within `NORMAL_TOL`; without FMA contraction the raw one does too.)"""
PUSH_TOL = 0.05
"""UU/s: split-impulse pushes reach 5,000 UU/s for a box deep in a wall; 10 Gauss-Seidel sweeps over up
to 16 rows sharing a normal share the push among them by ulp-sized differences, ~100 ulps of the
largest (4.9e-4 UU/s each) on a small component (measured: 0.034). It moves the car 4e-4 UU a tick."""


@triton.jit
def car_world_kernel(
    pos_ptr, rot_ptr, vel_ptr, ang_vel_ptr, ext_v_ptr, ext_w_ptr, alive_ptr, hitbox_ptr,
    tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr, plane_offsets_ptr,
    cell_start_ptr, cell_tris_ptr, ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z,
    start_ptr, manifold_ptr, solve_ptr, untouched_ptr, n, friction, restitution, tick_time,
    NUM_PLANES: tl.constexpr, PLANE_BASE: tl.constexpr, MAX_ANGLE: tl.constexpr, EDGE_DISTANCE: tl.constexpr,
    ITERATIONS: tl.constexpr, BLOCK: tl.constexpr, ACROSS_LANES: tl.constexpr,
):  # fmt: skip
    if ACROSS_LANES:  # one car per program, in every lane (`kernels/arena.deferred_car`)
        lane = tl.program_id(0) + tl.arange(0, BLOCK) * 0
    else:
        lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    pos = load(pos_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    rot = (
        load(rot_ptr + lane * 9, live, (1.0, 0.0, 0.0)), load(rot_ptr + lane * 9 + 3, live, (0.0, 1.0, 0.0)),
        load(rot_ptr + lane * 9 + 6, live, (0.0, 0.0, 1.0)),
    )  # fmt: skip
    alive = live & (tl.load(alive_ptr + lane, mask=live, other=0) != 0)
    arena = (tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr)
    arena = arena + (plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr)
    arena_grid = grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
    hitbox = twin.load_hitbox(hitbox_ptr, 0)
    if ACROSS_LANES:
        contacts = twin.car_world_contacts_across_lanes(
            pos, rot, hitbox, alive, arena, arena_grid, NUM_PLANES, PLANE_BASE, MAX_ANGLE, EDGE_DISTANCE, BLOCK
        )
    else:
        contacts = twin.car_world_contacts(
            pos, rot, hitbox, alive, arena, arena_grid, NUM_PLANES, PLANE_BASE, MAX_ANGLE, EDGE_DISTANCE, BLOCK
        )
    manifolds, has_contact, last = contacts
    out = manifold_ptr + lane * 128  # count (4), has, last normal (3), then per point: offset, normal, depth
    for s in tl.static_range(4):
        tl.store(out + s, manifolds[1][s].to(tl.float32), mask=live)
    tl.store(out + 4, has_contact.to(tl.float32), mask=live)
    store(out + 5, last, live)
    for q in tl.static_range(16):
        store(out + 8 + q * 7, point_at(manifolds[2], q), live)
        store(out + 11 + q * 7, point_at(manifolds[4], q), live)
        tl.store(out + 14 + q * 7, manifolds[5][q], mask=live)
    inv_inertia_local = twin.load_inv_inertia(hitbox_ptr, 0)
    solved = twin.solve_car_world(
        contacts, rot, load(vel_ptr + lane * 3, live, (0.0, 0.0, 0.0)), load(ang_vel_ptr + lane * 3, live, (0.0, 0.0, 0.0)),
        load(ext_v_ptr + lane * 3, live, (0.0, 0.0, 0.0)), load(ext_w_ptr + lane * 3, live, (0.0, 0.0, 0.0)),
        inv_inertia_local, friction, restitution, tick_time,
        (load(start_ptr + lane * 12, live, (0.0, 0.0, 0.0)), load(start_ptr + lane * 12 + 3, live, (0.0, 0.0, 0.0)),
         load(start_ptr + lane * 12 + 6, live, (0.0, 0.0, 0.0)), load(start_ptr + lane * 12 + 9, live, (0.0, 0.0, 0.0))),
        ITERATIONS, BLOCK,
    )  # fmt: skip
    for i in tl.static_range(4):
        store(solve_ptr + lane * 12 + 3 * i, solved[i], live)
    # the car step's fast lanes: whether the body may touch the arena, and the solve without contacts
    touch = twin.may_touch_arena(pos, rot, hitbox, alive, arena, arena_grid, NUM_PLANES)
    tl.store(out + 120, touch.to(tl.float32), mask=live)
    start = (load(start_ptr + lane * 12, live, (0.0, 0.0, 0.0)), load(start_ptr + lane * 12 + 3, live, (0.0, 0.0, 0.0)),
             load(start_ptr + lane * 12 + 6, live, (0.0, 0.0, 0.0)), load(start_ptr + lane * 12 + 9, live, (0.0, 0.0, 0.0)))  # fmt: skip
    alone = twin.untouched(start)
    for i in tl.static_range(4):
        store(untouched_ptr + lane * 12 + 3 * i, alone[i], live)


def body_scenes(n: int, seed: int):
    """Car poses [n, 1, ...] against each part of the arena (see the module's docstring), moving at
    up to 2,300 UU/s and 5.5 rad/s."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 7, n)
    u = lambda lo, hi: rng.uniform(lo, hi, n)
    x, y, z = u(-3500, 3500), u(-4500, 4500), u(0, 100)  # the floor
    x = np.where(kind == 1, rng.choice([-1, 1], n) * u(4000, 4100), x)  # the side walls
    z = np.where(kind == 1, u(100, 1800), z)
    y = np.where(kind == 2, rng.choice([-1, 1], n) * u(5020, 5120), y)  # the back walls beside the goals
    x = np.where(kind == 2, rng.choice([-1, 1], n) * u(1100, 3000), x)
    z = np.where(kind == 2, u(100, 1800), z)
    z = np.where(kind == 3, u(1950, 2050), z)  # the ceiling
    corner = (kind == 4)[:, None] * np.stack(
        (rng.choice([-1, 1], n) * u(3450, 3700), rng.choice([-1, 1], n) * u(4450, 4700)), 1
    )
    x, y = np.where(kind == 4, corner[:, 0], x), np.where(kind == 4, corner[:, 1], y)
    z = np.where(kind == 4, u(50, 1500), z)
    x = np.where(kind == 5, u(-950, 950), x)  # into the goals: posts, crossbar, net, ramps
    y = np.where(kind == 5, rng.choice([-1, 1], n) * u(5050, 5950), y)
    z = np.where(kind == 5, u(0, 700), z)
    z = np.where(kind == 6, u(0, 300), z)  # the floor's curved transitions into the walls
    x = np.where(kind == 6, rng.choice([-1, 1], n) * u(3700, 4096), x)
    pos = torch.tensor(np.stack((x, y, z), 1), dtype=torch.float32)
    rot = random_rotations(n, seed)
    vel = torch.tensor(rng.normal(size=(n, 3)) * 900, dtype=torch.float32)
    ang_vel = torch.tensor(rng.normal(size=(n, 3)) * 2, dtype=torch.float32)
    return pos, rot, vel, ang_vel


@pytest.mark.parametrize("across_lanes", [False, True], ids=["car per lane", "car per program"])
@pytest.mark.parametrize("preset", ["octane"])  # every preset's hitbox goes through the same code
def test_car_world_stage(preset, across_lanes):
    """The contacts' manifolds (counts identical; offsets, normals and depths close) and the solve's
    velocity deltas and pushes, every car at once, one per lane or one per program (the car step's
    second pass on large and on small batches; a tenth of them demolished: no contact)."""
    assert preset in PRESETS
    arena = Arena(ENVS, blue=1, orange=0, car=preset)
    world, params = arena.world, arena.world.params
    pos, rot, vel, ang_vel = body_scenes(ENVS, 11 if preset == "octane" else 12)
    g = torch.Generator().manual_seed(3)
    ext_v = torch.randn(ENVS, 3, generator=g) * 10
    ext_w = torch.randn(ENVS, 3, generator=g) * 0.05
    alive = torch.rand(ENVS, generator=g) > 0.1
    # the deltas a solve between bodies left (BT: ~UU/s / 50, rad/s), half of the cars without any
    start = torch.randn(ENVS, 4, 3, generator=g) * torch.tensor([2.0, 0.5, 2.0, 0.5])[:, None]
    start = start * (torch.rand(ENVS, 1, 1, generator=g) < 0.5)
    cars = arena.cars
    cars.pos, cars.rot_mat, cars.vel, cars.ang_vel = (
        pos[:, None],
        rot[:, None],
        vel[:, None],
        ang_vel[:, None],
    )
    expected = reference.car_world_contacts(world.mesh, cars, world.cars, alive[:, None])
    expected_solve = reference.solve_car_world(
        expected, cars, ext_v[:, None], ext_w[:, None], world.cars, params,
        start=SolverResult(*(start[:, None, i] for i in range(4))),
    )  # fmt: skip
    mesh = ball_grid(world).to(DEVICE)
    manifold_out = torch.zeros(ENVS, 128, device=DEVICE)
    solve_out = torch.zeros(ENVS, 12, device=DEVICE)
    untouched_out = torch.zeros(ENVS, 12, device=DEVICE)
    d = lambda x: x.contiguous().to(DEVICE)
    car_world_kernel[(ENVS,) if across_lanes else programs(ENVS)](
        d(pos), d(rot), d(vel), d(ang_vel), d(ext_v), d(ext_w), d(alive.to(torch.int8)),
        d(twin.hitbox_table(world.cars)), flat_tris(mesh), mesh.tri_bounds, mesh.tri_mesh, mesh.edge_angle,
        mesh.edge_flags, mesh.plane_normals, mesh.plane_offsets, mesh.cell_start, mesh.cell_tris, *grid_args(mesh),
        d(start), manifold_out, solve_out, untouched_out, ENVS, params.car_world_friction, params.car_world_restitution, params.tick_time,
        NUM_PLANES=4, PLANE_BASE=PLANE_OBJECT_BASE, MAX_ANGLE=C.INTERNAL_EDGE_MAX_ANGLE,
        EDGE_DISTANCE=C.INTERNAL_EDGE_DISTANCE_THRESHOLD, ITERATIONS=C.SOLVER_NUM_ITERATIONS, BLOCK=BLOCK,
        ACROSS_LANES=across_lanes,
    )  # fmt: skip
    out = manifold_out.cpu()
    m = expected.manifolds
    touching = expected.has_contact[:, 0]
    assert 0.3 < float(touching.float().mean()) < 0.8  # the sample touches, and misses
    assert int((m.count.sum(1) > 4).sum()) >= 3  # several objects or full manifolds
    same = assert_same(out[:, :5], torch.cat((m.count.float(), touching[:, None].float()), 1))
    held = m.held().reshape(ENVS, 16) & same[:, None]
    points = out[:, 8:120].reshape(ENVS, 16, 7)
    assert_close(points[..., :3][held], m.offset.reshape(ENVS, 16, 3)[held], atol=OFFSET_TOL)
    assert_close(points[..., 3:6][held], m.normal.reshape(ENVS, 16, 3)[held], atol=NORMAL_TOL)
    assert_close(points[..., 6][held], m.depth.reshape(ENVS, 16)[held], atol=OFFSET_TOL)
    assert_close(out[:, 5:8], expected.contact_normal[:, 0], atol=RAW_NORMAL_TOL, rows=same)
    got = solve_out.cpu().reshape(ENVS, 4, 3)
    for i, (name, atol) in enumerate(
        (("dv", VELOCITY_TOL), ("dw", VELOCITY_TOL), ("push_v", PUSH_TOL), ("push_w", VELOCITY_TOL))
    ):
        assert_close(got[:, i], getattr(expected_solve, name)[:, 0], atol=atol, rtol=REL_TOL, rows=same)
    # the car step's fast lanes (`kernels/arena.car_step_kernel`): a body that touches is never among
    # them, their solve is the twin's to the bit, and they are most of the cars away from the arena
    may_touch = out[:, 120] != 0
    assert not bool((touching & ~may_touch).any()), "a touching body was put on the car step's fast path"
    assert int((~may_touch).sum()) >= ENVS // 5
    assert torch.equal(untouched_out.cpu()[~may_touch], solve_out.cpu()[~may_touch])
