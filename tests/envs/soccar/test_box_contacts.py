"""Box contacts: the grid query against brute force over all 8,020 triangles and the four planes."""

from __future__ import annotations

import numpy as np
import torch

from nitro.envs.soccar.box_contacts import box_contacts, box_triangle_separation
from tests.envs.soccar.sampling import SEED, near_surface_points


def test_box_query_equals_brute_force_over_all_triangles(mesh):
    rng = np.random.default_rng(SEED + 2)
    centers = near_surface_points(mesh, 200, rng, 40.0)
    q, _ = torch.linalg.qr(torch.from_numpy(rng.normal(size=(len(centers), 3, 3)).astype(np.float32)))
    half = torch.tensor([60.25, 43.35, 19.33])  # the Octane hitbox
    gap = 2.0
    contacts = box_contacts(mesh, centers, q, half, gap, max_contacts=512, use_kernels=False)
    v = mesh.tri_verts
    touching = 0
    for i in range(len(centers)):
        sep, _ = box_triangle_separation(centers[i][None], q[i][None], half[None], v[:, 0], v[:, 1], v[:, 2])
        feats = (sep < gap).nonzero().flatten().tolist()
        radius = (q[i].T @ mesh.plane_normals.T).abs().T @ half
        plane_sep = mesh.plane_normals @ centers[i] - mesh.plane_offsets - radius
        feats += [mesh.num_triangles + p for p in range(4) if plane_sep[p] < gap]
        assert sorted(contacts.feature[i, : int(contacts.count[i])].tolist()) == sorted(feats)
        touching += bool(feats)
    assert touching > 60
