"""The arena geometry: reading the .cmf files, the grid, and the sphere / ray / box queries.

The grid queries are checked against brute force over all 8,020 triangles (and the four planes) at
random positions in every part of the arena.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.mesh import (
    SOCCAR_MESH_HASHES,
    MeshesNotFoundError,
    box_contacts_reference,
    box_triangle_separation,
    bvh_visit_order,
    cmf_hash,
    find_soccar_meshes,
    ray_cast_reference,
    ray_triangle_fraction,
    read_cmf,
    sphere_contacts_reference,
    sphere_triangle_contact,
)

SEED = 7  # fixed so a failure reproduces
BALL_R = C.BALL_COLLISION_RADIUS_SOCCAR
BALL_GAP = C.BALL_CONTACT_BREAKING_THRESHOLD
# The grid path and brute force run the same float32 formula on the same operands, so results agree
# exactly; the tolerance only absorbs a different summation order in the matrix product of the planes.
EXACT = 1e-5


def _near_surface_points(mesh, n: int, rng: np.random.Generator, reach: float) -> torch.Tensor:
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


def _contact_sets(contacts, count):
    return [sorted(contacts.feature[i, : count[i]].tolist()) for i in range(len(count))]


# --- files ----------------------------------------------------------------------------------------


def test_the_real_meshes_are_found_and_whitelisted(mesh):
    folder = find_soccar_meshes()
    files = sorted(folder.glob("mesh_*.cmf"))
    assert len(files) == C.SOCCAR_MESH_COUNT
    assert mesh.num_triangles == C.SOCCAR_TRIANGLE_COUNT
    assert {cmf_hash(*read_cmf(f)) for f in files} == set(SOCCAR_MESH_HASHES)  # RocketSim's whitelist


def test_mesh_folder_lookup_order(tmp_path, monkeypatch):
    real = find_soccar_meshes()
    assert find_soccar_meshes(real) == real  # the soccar folder itself
    assert find_soccar_meshes(real.parent) == real  # or its parent
    monkeypatch.setenv("NITRO_MESHES", str(real.parent))
    assert find_soccar_meshes() == real
    with pytest.raises(MeshesNotFoundError, match=r'pip install "nitro-rl\[soccar\]"'):
        find_soccar_meshes(tmp_path)
    monkeypatch.setenv("NITRO_MESHES", str(tmp_path))
    with pytest.raises(MeshesNotFoundError, match="NITRO_MESHES"):
        find_soccar_meshes()


def test_arena_without_meshes_is_an_error_not_a_substitute(tmp_path):
    from nitro.envs.soccar.arena import Arena

    with pytest.raises(MeshesNotFoundError, match="rlgym-rocket-league==2.0.1"):
        Arena(1, blue=0, orange=0, meshes=tmp_path)


def test_read_cmf_validates(tmp_path):
    good = tmp_path / "mesh_0.cmf"
    verts = np.zeros((3, 3), "<f4")
    good.write_bytes(
        np.array([1, 3], "<i4").tobytes() + np.array([0, 1, 2], "<i4").tobytes() + verts.tobytes()
    )
    v, idx = read_cmf(good)
    assert v.shape == (3, 3) and idx.tolist() == [[0, 1, 2]]
    cases = {
        "short": np.array([1], "<i4").tobytes(),
        "counts": np.array([0, 3], "<i4").tobytes(),
        "length": np.array([1, 3], "<i4").tobytes() + np.array([0, 1, 2], "<i4").tobytes(),
        "index": np.array([1, 3], "<i4").tobytes() + np.array([0, 1, 3], "<i4").tobytes() + verts.tobytes(),
    }
    for name, data in cases.items():
        bad = tmp_path / f"{name}.cmf"
        bad.write_bytes(data)
        with pytest.raises(ValueError):
            read_cmf(bad)


def test_bvh_visit_order_is_a_permutation():
    folder = find_soccar_meshes()
    for k in (0, 4, 8, 10):
        v, idx = read_cmf(folder / f"mesh_{k}.cmf")
        order = bvh_visit_order(v, idx)
        assert sorted(order.tolist()) == list(range(len(idx)))
        assert (bvh_visit_order(v, idx) == order).all()  # deterministic


def test_internal_edge_info(mesh):
    """Every triangle edge shared within a file has an angle; flat neighbours have angle 0 exactly."""
    angle = mesh.edge_angle.numpy()
    has_neighbour = np.abs(angle) < C.INTERNAL_EDGE_MAX_ANGLE
    # 884 of the 24,060 triangle edges sit on a file's boundary (counted from the files).
    assert (~has_neighbour).sum() == 884
    tv = mesh.tri_verts.numpy().astype(np.float64)
    flat = has_neighbour & (angle == 0)
    assert flat.sum() > 0 and (has_neighbour & ~flat).sum() > 0
    # Bullet calls an edge planar when its faces differ by under 0.01 rad (|sin|^2 < 1e-4).
    assert np.abs(angle[has_neighbour & ~flat]).min() > 0.01
    assert np.isfinite(tv).all()


# --- the grid against brute force -----------------------------------------------------------------


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
    centers = _near_surface_points(mesh, 600, rng, BALL_R)
    contacts = sphere_contacts_reference(mesh, centers, BALL_R, BALL_GAP, max_contacts=256)
    brute = _brute_sphere(mesh, centers, BALL_R, BALL_GAP)
    grid_sets = _contact_sets(contacts, contacts.count.tolist())
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


def test_ray_query_equals_brute_force_over_all_triangles(mesh):
    rng = np.random.default_rng(SEED + 1)
    start = _near_surface_points(mesh, 600, rng, 50.0)
    direction = torch.from_numpy(rng.normal(size=(len(start), 3)).astype(np.float32))
    direction = direction / direction.norm(dim=1, keepdim=True)
    length = torch.from_numpy(rng.uniform(10, mesh.query_radius, (len(start), 1)).astype(np.float32))
    end = start + direction * length
    hits = ray_cast_reference(mesh, start, end)
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
    assert hit_count > 150


def test_box_query_equals_brute_force_over_all_triangles(mesh):
    rng = np.random.default_rng(SEED + 2)
    centers = _near_surface_points(mesh, 200, rng, 40.0)
    q, _ = torch.linalg.qr(torch.from_numpy(rng.normal(size=(len(centers), 3, 3)).astype(np.float32)))
    half = torch.tensor([60.25, 43.35, 19.33])  # the Octane hitbox
    gap = 2.0
    contacts = box_contacts_reference(mesh, centers, q, half, gap, max_contacts=512)
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


def test_sphere_contact_geometry(mesh):
    """A ball resting on the floor touches only the floor plane, 1.9 UU above it (BALL_REST_Z)."""
    c = torch.tensor([[0.0, 0.0, C.BALL_REST_Z]])
    contacts = sphere_contacts_reference(mesh, c, BALL_R, BALL_GAP)
    assert int(contacts.count[0]) == 1 and int(contacts.feature[0, 0]) == mesh.num_triangles  # the floor
    assert torch.allclose(contacts.depth[0, 0], torch.tensor(C.BALL_REST_Z - BALL_R))
    assert torch.allclose(contacts.normal[0, 0], torch.tensor([0.0, 0.0, 1.0]))
    assert torch.allclose(contacts.offset[0, 0], torch.tensor([0.0, 0.0, -BALL_R]))


def test_meshes_env_var_is_read_at_load_time(monkeypatch, tmp_path):
    monkeypatch.setenv("NITRO_MESHES", os.fspath(tmp_path))
    from nitro.envs.soccar.mesh import load_arena_mesh

    with pytest.raises(MeshesNotFoundError):
        load_arena_mesh()
