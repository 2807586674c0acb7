"""The car body against the arena (`car_world`): shape setup, planes, manifolds and the island order,
against hand-worked answers and brute force. Tick-by-tick parity with RocketSim is in
tests/parity/test_car_body_parity.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nitro.envs.soccar import car_world
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car_config import PRESETS, CarParams

DEVICE = torch.device("cpu")


def _hitboxes(names):
    params = CarParams.build(list(names), DEVICE)
    return car_world.car_hitbox(params.hitbox_size, params.hitbox_pos_offset)


def _random_rotations(rng, n):
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    w, x, y, z = q.T
    rot = np.stack(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    ).transpose(2, 0, 1)
    return torch.tensor(rot, dtype=torch.float32)


def test_octane_hitbox_is_bullets_box():
    box = _hitboxes(["octane"])
    # Worked by hand: half extents 120.507 / 86.6994 / 38.6591 UU x 0.02 / 2 = 1.20507 / 0.866994 /
    # 0.386591 BT; btBoxShape keeps them minus 0.04; setSafeMargin lowers the margin to 0.1 x 0.386591.
    assert box.inner[0].tolist() == pytest.approx([1.16507, 0.826994, 0.346591], abs=1e-6)
    assert box.margin[0].item() == pytest.approx(0.0386591, abs=1e-7)
    assert box.offset[0].tolist() == pytest.approx([0.277514, 0.0, 0.4151], abs=1e-6)
    # getAngularMotionDisc: the child AABB's half diagonal plus its centre's distance from the
    # origin, times gContactBreakingThreshold 0.02
    half = np.array([1.16507, 0.826994, 0.346591]) + 0.0386591
    disc = np.linalg.norm(half) + math.hypot(0.277514, 0.4151)
    assert box.threshold[0].item() == pytest.approx(disc * 0.02, rel=1e-6)


def test_every_preset_fits_the_grid_cells(mesh):
    # A car's contacts are looked for among its origin's grid cell list, which holds every triangle
    # within mesh.query_radius of the cell: the box's farthest corner plus the breaking threshold
    # must be inside that reach.
    box = _hitboxes(PRESETS)
    corner = (box.inner + box.margin[:, None]).norm(dim=-1) + box.offset.norm(dim=-1)
    reach = (corner + box.threshold) * C.BT_TO_UU
    assert reach.max().item() < mesh.query_radius


def test_plane_contact_is_the_deepest_corner():
    rng = np.random.default_rng(0)
    n = 64
    box = _hitboxes(["octane"] * n)
    rot = _random_rotations(rng, n)
    arena_planes = car_world._plane_aabbs(
        np.array([p for p, _ in C.ARENA_PLANES], np.float32),
        np.array(car_world.PLANE_ORIGINS, np.float32) * np.float32(car_world.UU_TO_BT),
    )
    assert arena_planes[1][0, 2] == pytest.approx(0.2)  # the floor's AABB ends 0.2 BT above it
    origin = torch.tensor(rng.uniform([-10, -10, 0.5], [10, 10, 1.5], (n, 3)), dtype=torch.float32)

    class Planes:  # the floor and the side wall at x = -4096 UU only, as the arena holds them
        plane_normals = torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
        plane_origins = torch.tensor([[0.0, 0.0, 0.0], [-81.92, 0.0, 20.48]])

    has, point, distance = car_world.plane_contacts(rot, origin, box, Planes)
    # brute force: the 8 corners of the box with its margin; the lowest one along each normal
    signs = torch.tensor(
        [[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=torch.float32
    )
    extent = box.inner + box.margin[:, None]
    corners = origin[:, None] + torch.einsum("nij,nkj->nki", rot, signs * extent[:, None])  # [n, 8, 3]
    for p in range(2):
        normal, plane_origin = Planes.plane_normals[p], Planes.plane_origins[p]
        heights = (corners - plane_origin) @ normal
        lowest = heights.argmin(1)
        expected = corners[torch.arange(n), lowest] - heights.min(1).values[:, None] * normal
        assert torch.allclose(distance[:, p], heights.min(1).values, atol=1e-5)
        assert torch.allclose(point[:, p], expected, atol=1e-5)
        assert torch.equal(has[:, p], distance[:, p] < box.threshold)


def test_quicksort_order_is_bullets_quicksort():
    # btAlignedObjectArray::quickSort on keys [0, 0, 0, 0]: one partition around the middle swaps
    # every pair from the outside in (0 <-> 3, 1 <-> 2), and the halves [3, 2] and [1, 0] then swap
    # again: positions end up holding 2, 3, 0, 1 (worked by hand from quickSortInternal).
    assert car_world.quicksort_order([0, 0, 0, 0]) == [2, 3, 0, 1]
    assert car_world.quicksort_order([0]) == [0]
    assert car_world.quicksort_order([0, 0]) == [1, 0]
    keys = [3, 1, 2, 1, 0, 3]
    order = car_world.quicksort_order(keys)
    assert [keys[i] for i in order] == sorted(keys)  # a sort, whatever it does to equal keys


def test_island_positions_follow_the_quicksort():
    # Every manifold's place after btAlignedObjectArray::quickSort, for random bodies (the ball and up
    # to 6 cars) each with up to 20 manifolds, against the sort itself.
    rng = np.random.default_rng(1)
    counts = torch.tensor(rng.integers(0, car_world.MAX_BODY_MANIFOLDS + 1, (300, 7)))
    counts[:100, 2:] = 0  # a ball and one car
    got = car_world.island_positions(counts)
    for env, row in enumerate(counts.tolist()):
        keys = [body for body, count in enumerate(row) for _ in range(count)]
        expected = [0] * len(keys)
        for place, original in enumerate(car_world.quicksort_order(keys)):
            expected[original] = place
        mine = [got[env, body, e].item() for body, count in enumerate(row) for e in range(count)]
        assert mine == expected


def test_broadphase_registers_meshes_near_their_triangles(mesh):
    arena = car_world.arena_bullet(mesh, "heavy")
    light = car_world.arena_bullet(mesh, "light")
    # RocketSim's grid: (11200, 12000, 2200) UU over 370-UU cells (740 in LIGHT), rounded up
    assert arena.cell_dims == (31, 33, 6) and light.cell_dims == (16, 17, 3)
    # At the centre of the field, on the floor, no mesh file has a triangle within a cell: no pairs.
    centre = torch.tensor([[0.0, 0.0, 0.2]])
    assert arena.cell_meshes[car_world.broadphase_cell(arena, centre)].item() == 0
    # Against the back wall beside the goal, the wall's mesh file is registered.
    wall = torch.tensor([[2000.0, 5050.0, 500.0]]) * car_world.UU_TO_BT
    assert arena.cell_meshes[car_world.broadphase_cell(arena, wall)].item() != 0
    with pytest.raises(ValueError, match="mem_weight_mode must be one of"):
        car_world.arena_bullet(mesh, "medium")
