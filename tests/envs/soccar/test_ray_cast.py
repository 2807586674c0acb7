"""Ray casts: the grid query against brute force over all 8,020 triangles and the four planes, on
the shared grid and on the fused tick's wheel-ray grid."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nitro.envs.soccar.arena_mesh import load_arena_mesh
from nitro.envs.soccar.kernels.arena import RAY_GRID_CELL, RAY_GRID_RADIUS
from nitro.envs.soccar.ray_cast import ray_cast, ray_triangle_fraction
from tests.envs.soccar.sampling import EXACT, SEED, near_surface_points


@pytest.mark.parametrize("grid", ["shared", "wheel rays"])
def test_ray_query_equals_brute_force_over_all_triangles(mesh, grid):
    """Segments up to twice the grid's query radius long (the midpoint lookup's limit) hit what a walk
    over every triangle hits, at the same fraction."""
    if grid == "wheel rays":
        mesh = load_arena_mesh(mesh.folder, query_radius=RAY_GRID_RADIUS, cell_size=RAY_GRID_CELL)
    rng = np.random.default_rng(SEED + 1)
    start = near_surface_points(mesh, 600, rng, 50.0)
    direction = torch.from_numpy(rng.normal(size=(len(start), 3)).astype(np.float32))
    direction = direction / direction.norm(dim=1, keepdim=True)
    length = torch.from_numpy(rng.uniform(10, 2 * mesh.query_radius, (len(start), 1)).astype(np.float32))
    end = start + direction * length
    hits = ray_cast(mesh, start, end, use_kernels=False)
    v = mesh.tri_verts
    hit_count = 0
    for i in range(len(start)):
        hit, fraction, _ = ray_triangle_fraction(start[i][None], end[i][None], v[:, 0], v[:, 1], v[:, 2])
        da = mesh.plane_normals @ start[i] - mesh.plane_offsets
        db = mesh.plane_normals @ end[i] - mesh.plane_offsets
        plane_fraction = torch.where(da * db < 0, da / (da - db), torch.inf)
        best = min(float(fraction[hit].min()) if hit.any() else np.inf, float(plane_fraction.min()))
        if np.isfinite(best):
            hit_count += 1
            assert bool(hits.hit[i]) and abs(float(hits.fraction[i]) - best) <= EXACT
        else:
            assert not bool(hits.hit[i])
    assert hit_count > 100  # (261 on the shared grid, 112 on the wheel-ray grid's shorter rays)
