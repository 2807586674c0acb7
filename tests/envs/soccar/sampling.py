"""Query points of the soccar query tests (brute force over all 8,020 triangles and the planes)."""

from __future__ import annotations

import numpy as np
import torch

from nitro.envs.soccar import constants as C

SEED = 7  # fixed so a failure reproduces
BALL_R = C.BALL_COLLISION_RADIUS_SOCCAR
BALL_GAP = C.BALL_CONTACT_BREAKING_THRESHOLD
# The grid path and brute force run the same float32 formula on the same operands, so results agree
# exactly; the tolerance only absorbs a different summation order in the matrix product of the planes.
EXACT = 1e-5


def near_surface_points(mesh, n: int, rng: np.random.Generator, reach: float) -> torch.Tensor:
    """Points near random triangles (every part of the mesh) plus points anywhere in the arena box."""
    tri = rng.integers(0, mesh.num_triangles, n)
    bary = rng.random((n, 2))
    bary = np.where(bary.sum(1, keepdims=True) > 1, 1 - bary, bary)
    v = mesh.tri_verts[tri].numpy()
    on = v[:, 0] + bary[:, :1] * (v[:, 1] - v[:, 0]) + bary[:, 1:] * (v[:, 2] - v[:, 0])
    off = mesh.tri_normals[tri].numpy() * rng.uniform(-reach * 0.3, reach * 1.1, (n, 1))
    near = on + off + rng.normal(0, 20, (n, 3))
    anywhere = rng.uniform((-4200, -6100, -50), (4200, 6100, 2100), (n // 2, 3))
    return torch.from_numpy(np.concatenate([near, anywhere]).astype(np.float32))


def contact_sets(contacts, count):
    return [sorted(contacts.feature[i, : count[i]].tolist()) for i in range(len(count))]
