"""The car body against the arena (`car_world`): the planes' contacts against brute force.
Tick-by-tick parity with RocketSim is in tests/parity/test_car_body_parity.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nitro.envs.soccar import car_world
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh.broadphase import _plane_aabbs
from nitro.envs.soccar.car_config import CarParams


def _hitboxes(names):
    return CarParams.build(list(names), torch.device("cpu")).hitbox


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


def test_plane_contact_is_the_deepest_corner():
    rng = np.random.default_rng(0)
    n = 64
    box = _hitboxes(["octane"] * n)
    rot = _random_rotations(rng, n)
    arena_planes = _plane_aabbs(
        np.array([p for p, _ in C.ARENA_PLANES], np.float32),
        np.array(C.ARENA_PLANE_ORIGINS, np.float32) * np.float32(C.UU_TO_BT_F32),
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
