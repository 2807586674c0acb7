"""Finding and reading RocketSim's soccar collision meshes (`CollisionMeshFile`): the ``.cmf`` files
and their hash (RocketSim.cpp's whitelist). Load time only."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np

MESHES_ENV_VAR = "NITRO_MESHES"
_PACKAGE_MESH_DIR = Path("rocket_league", "sim", "collision_meshes")
MESHES_PIP = "pip install --no-deps rlgym-rocket-league==2.0.1"
"""Installs the package that ships the meshes. Without its dependencies: we read only its files, and its
declared numpy<2 would downgrade numpy."""
_INSTALL_HINT = (
    f"install them with `{MESHES_PIP}`, or point NITRO_MESHES (or Arena(meshes=...)) at a "
    "folder holding soccar/mesh_0.cmf ... mesh_15.cmf"
)

# RocketSim's whitelist of soccar mesh hashes (CollisionMeshFile::UpdateHash, RocketSim.cpp). Like
# RocketSim we only warn on an unknown hash: a modified arena is allowed, but it is not the real one.
SOCCAR_MESH_HASHES = frozenset(
    (
        0xA160BAF9,
        0x2811EEE8,
        0xB81AC8B9,
        0x760358D3,
        0x73AE4940,
        0x918F4A4E,
        0x1F8EE550,
        0x255BA8C1,
        0x14B84668,
        0xEC759EBF,
        0x94FB0D5C,
        0xDEA07102,
        0xBD4FBEA8,
        0x39A47F63,
        0x3D79D25D,
        0xD84C7A68,
    )
)
_MAX_CMF_COUNT = 1_000_000  # CollisionMeshFile::ReadFromStream's bound on triangle/vertex counts


class MeshesNotFoundError(FileNotFoundError):
    """The soccar collision meshes could not be found."""


def _soccar_dir(folder: Path) -> Path | None:
    """``folder`` itself if it holds mesh_*.cmf, else its ``soccar`` subfolder if that does."""
    for candidate in (folder, folder / "soccar"):
        if candidate.is_dir() and any(candidate.glob("mesh_*.cmf")):
            return candidate
    return None


def find_soccar_meshes(meshes: str | os.PathLike | None = None) -> Path:
    """The folder holding ``mesh_*.cmf``: ``meshes``, then $NITRO_MESHES, then rlgym-rocket-league.

    ``meshes`` / $NITRO_MESHES may name the collision-meshes folder (the parent of ``soccar/``) or the
    ``soccar`` folder itself. The installed package is found without importing it (its
    ``__init__`` needs rlgym-api): every location of the ``rlgym`` namespace package is searched.
    """
    if meshes is not None:
        found = _soccar_dir(Path(meshes))
        if found is None:
            raise MeshesNotFoundError(f"no soccar/mesh_*.cmf under meshes={str(meshes)!r}; {_INSTALL_HINT}.")
        return found
    env = os.environ.get(MESHES_ENV_VAR)
    if env:
        found = _soccar_dir(Path(env))
        if found is None:
            raise MeshesNotFoundError(
                f"no soccar/mesh_*.cmf under ${MESHES_ENV_VAR}={env!r}; {_INSTALL_HINT}."
            )
        return found
    try:
        spec = importlib.util.find_spec("rlgym")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        found = _soccar_dir(Path(location) / _PACKAGE_MESH_DIR)
        if found is not None:
            return found
    raise MeshesNotFoundError(f"the Rocket League soccar collision meshes were not found; {_INSTALL_HINT}.")


def read_cmf(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Read one ``.cmf`` file: (vertices [V, 3] float32 in Bullet units, indices [T, 3] int32).

    Format (RLArenaCollisionDumper / RocketSim CollisionMeshFile, little-endian, no header): int32
    triangle count, int32 vertex count, the triangles' vertex indices, then the vertices.
    """
    data = Path(path).read_bytes()
    if len(data) < 8:
        raise ValueError(f"{path}: not a collision mesh file ({len(data)} bytes, need at least 8)")
    num_tris, num_verts = (int(x) for x in np.frombuffer(data[:8], "<i4"))
    if min(num_tris, num_verts) <= 0 or max(num_tris, num_verts) > _MAX_CMF_COUNT:
        raise ValueError(f"{path}: bad triangle/vertex counts ({num_tris}, {num_verts})")
    expected = 8 + 12 * num_tris + 12 * num_verts
    if len(data) != expected:
        raise ValueError(
            f"{path}: {len(data)} bytes, expected {expected} for {num_tris} tris, {num_verts} verts"
        )
    indices = np.frombuffer(data[8 : 8 + 12 * num_tris], "<i4").reshape(num_tris, 3).astype(np.int32)
    vertices = np.frombuffer(data[8 + 12 * num_tris :], "<f4").reshape(num_verts, 3).astype(np.float32)
    if indices.min() < 0 or indices.max() >= num_verts:
        raise ValueError(f"{path}: triangle vertex index out of range [0, {num_verts})")
    if not np.isfinite(vertices).all():
        raise ValueError(f"{path}: non-finite vertex coordinates")
    return vertices, indices


def cmf_hash(vertices: np.ndarray, indices: np.ndarray) -> int:
    """RocketSim's 32-bit mesh hash (CollisionMeshFile::UpdateHash) of one file's triangles."""
    mask = 0xFFFFFFFF
    # Each coordinate is value-cast float -> uint32 (truncation; negatives wrap as on x86-64).
    values = np.trunc(vertices[indices].reshape(-1).astype(np.float64)).astype(np.int64) & mask
    for _ in range(2):
        values = (((values >> 16) ^ values) * 0x45D9F3B) & mask
    values = ((values >> 16) ^ values) & mask
    h = (len(vertices) + len(indices) * len(vertices)) & mask
    for v in values.tolist():  # sync-ok: numpy, at mesh load; sequential boost-style combine
        h ^= (v + 0x9E3779B9 + ((h << 6) & mask) + (h >> 2)) & mask
    return h
