"""Sphere contacts (the ball's): the grid query against brute force over all 8,020 triangles and the
four planes at random positions in every part of the arena, and a contact worked by hand."""

from __future__ import annotations

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.sphere_contacts import sphere_contacts, sphere_triangle_contact
from tests.envs.soccar.sampling import BALL_GAP, BALL_R, EXACT, SEED, contact_sets, near_surface_points


def _brute_sphere(mesh, centers, radius, gap):
    """Every triangle and plane within the gap, checked one by one: (feature sets, depth by feature)."""
    v = mesh.tri_verts
    out = []
    for c in centers:
        has, _, _, depth = sphere_triangle_contact(c[None], v[:, 0], v[:, 1], v[:, 2], radius, gap)
        plane_depth = mesh.plane_normals @ c - mesh.plane_offsets - radius
        feats = has.nonzero().flatten().tolist() + [
            mesh.num_triangles + p for p in range(4) if plane_depth[p] < gap
        ]
        depths = {f: float(depth[f]) for f in has.nonzero().flatten().tolist()}
        depths.update(
            {mesh.num_triangles + p: float(plane_depth[p]) for p in range(4) if plane_depth[p] < gap}
        )
        out.append((sorted(feats), depths))
    return out


def test_sphere_query_equals_brute_force_over_all_triangles(mesh):
    rng = np.random.default_rng(SEED)
    centers = near_surface_points(mesh, 600, rng, BALL_R)
    contacts = sphere_contacts(mesh, centers, BALL_R, BALL_GAP, max_contacts=256)
    brute = _brute_sphere(mesh, centers, BALL_R, BALL_GAP)
    grid_sets = contact_sets(contacts, contacts.count.tolist())
    touching = 0
    for i, (feats, depths) in enumerate(brute):
        assert grid_sets[i] == feats, f"point {centers[i].tolist()}"
        for j in range(int(contacts.count[i])):
            f = int(contacts.feature[i, j])
            assert abs(float(contacts.depth[i, j]) - depths[f]) <= EXACT
        touching += bool(feats)
    assert touching > 300  # the sample really exercises contacts
    # Bullet's order: planes first, then each mesh file in BVH visiting order.
    for i in range(len(centers)):
        feats = contacts.feature[i, : int(contacts.count[i])].tolist()
        keys = [(-1, f) if f >= mesh.num_triangles else (int(mesh.tri_order[f]),) * 2 for f in feats]
        assert keys == sorted(keys)


def test_sphere_contact_geometry(mesh):
    """A ball resting on the floor touches only the floor plane, 1.9 UU above it (BALL_REST_Z)."""
    c = torch.tensor([[0.0, 0.0, C.BALL_REST_Z]])
    contacts = sphere_contacts(mesh, c, BALL_R, BALL_GAP)
    assert int(contacts.count[0]) == 1 and int(contacts.feature[0, 0]) == mesh.num_triangles  # the floor
    assert torch.allclose(contacts.depth[0, 0], torch.tensor(C.BALL_REST_Z - BALL_R))
    assert torch.allclose(contacts.normal[0, 0], torch.tensor([0.0, 0.0, 1.0]))
    assert torch.allclose(contacts.offset[0, 0], torch.tensor([0.0, 0.0, -BALL_R]))
