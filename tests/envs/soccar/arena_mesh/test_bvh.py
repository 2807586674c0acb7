"""Bullet's BVH visiting order of each mesh file."""

from __future__ import annotations

from nitro.envs.soccar.arena_mesh.bvh import bvh_visit_order
from nitro.envs.soccar.arena_mesh.cmf import find_soccar_meshes, read_cmf


def test_bvh_visit_order_is_a_permutation():
    folder = find_soccar_meshes()
    for k in (0, 4, 8, 10):
        v, idx = read_cmf(folder / f"mesh_{k}.cmf")
        order = bvh_visit_order(v, idx)
        assert sorted(order.tolist()) == list(range(len(idx)))
        assert (bvh_visit_order(v, idx) == order).all()  # deterministic
