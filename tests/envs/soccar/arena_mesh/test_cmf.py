"""Finding and reading the soccar collision meshes: the real files, RocketSim's hash whitelist, the
lookup order and the errors."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.arena_mesh import load_arena_mesh
from nitro.envs.soccar.arena_mesh.cmf import (
    MESHES_PIP,
    SOCCAR_MESH_HASHES,
    MeshesNotFoundError,
    cmf_hash,
    find_soccar_meshes,
    read_cmf,
)


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
    with pytest.raises(MeshesNotFoundError, match=re.escape(MESHES_PIP)):  # one command, no numpy downgrade
        find_soccar_meshes(tmp_path)
    monkeypatch.setenv("NITRO_MESHES", str(tmp_path))
    with pytest.raises(MeshesNotFoundError, match="NITRO_MESHES"):
        find_soccar_meshes()


def test_arena_without_meshes_is_an_error_not_a_substitute(tmp_path):
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


def test_meshes_env_var_is_read_at_load_time(monkeypatch, tmp_path):
    monkeypatch.setenv("NITRO_MESHES", os.fspath(tmp_path))
    with pytest.raises(MeshesNotFoundError):
        load_arena_mesh()
