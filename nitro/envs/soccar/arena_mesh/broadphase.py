"""The arena as RocketSim's Bullet holds it for the car bodies: triangles in Bullet units, each mesh
file's and plane's broadphase AABB, and btRSBroadphase's grid of cells with the mesh files each
lists. Load time, once per mesh folder, ArenaMemWeightMode and device.

Reference: RocketSim (ZealanL/RocketSim, MIT) `btRSBroadphase` (`_UpdateCellsStatic`), its planes'
`btStaticPlaneShape::getAabb`, and `Arena::_SetupArenaCollisionShapes` (the load order).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from pathlib import Path

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh.bvh import bvh_quantization
from nitro.envs.soccar.arena_mesh.cmf import read_cmf
from nitro.envs.soccar.arena_mesh.mesh import ArenaMesh
from nitro.envs.soccar.vec import constant

_F32 = np.float32
BT_LARGE_FLOAT = 1e18


@dataclasses.dataclass(frozen=True)
class ArenaBullet:
    """The arena's geometry and broadphase in Bullet units, as RocketSim holds them."""

    tri: torch.Tensor
    """Triangle vertices, BT, in `ArenaMesh` order [T, 3, 3]."""
    mesh_min: torch.Tensor
    """Each mesh file's AABB (btTriangleMeshShape::getAabb at the identity) [M, 3]."""
    mesh_max: torch.Tensor
    load_rank: torch.Tensor
    """Position of each mesh file in RocketSim's load order, the file system's directory order
    (std::filesystem::directory_iterator): the order of its collision objects and pairs [M]."""
    plane_normals: torch.Tensor
    """[4, 3]"""
    plane_origins: torch.Tensor
    """[4, 3]"""
    plane_min: torch.Tensor
    """RocketSim's plane AABBs: a slab 0.2 BT deep around the plane, unbounded behind it [4, 3]."""
    plane_max: torch.Tensor
    cell_meshes: torch.Tensor
    """Bit m (by load rank) set where mesh file m is registered in a broadphase cell [cells] int32."""
    cell_min: tuple[float, float, float]
    """btRSBroadphase minPos, BT."""
    cell_size: float
    """Edge of a broadphase cell, BT."""
    cell_dims: tuple[int, int, int]


def arena_bullet(mesh: ArenaMesh, mem_weight_mode: str = "heavy") -> ArenaBullet:
    """The `ArenaBullet` of ``mesh`` for RocketSim's ArenaMemWeightMode ``"heavy"`` (its default) or
    ``"light"`` (they differ in broadphase cell size only). Read once per folder, mode and device."""
    if mem_weight_mode not in C.BROADPHASE_CELL_MULTIPLIER:
        raise ValueError(
            f"mem_weight_mode must be one of {sorted(C.BROADPHASE_CELL_MULTIPLIER)}, got {mem_weight_mode!r}"
        )
    return _arena_bullet(mesh.folder, mem_weight_mode, str(mesh.device))


@functools.lru_cache(maxsize=8)
def _arena_bullet(folder: str, mem_weight_mode: str, device: str) -> ArenaBullet:
    files = sorted(
        Path(folder).glob("mesh_*.cmf"),
        key=lambda p: int(p.stem.split("_")[1]) if p.stem.split("_")[1].isdigit() else 1 << 30,
    )
    listed = [name for name in os.listdir(folder) if name.endswith(".cmf")]  # sync-ok: load time
    rank = np.argsort(np.argsort([listed.index(p.name) for p in files]))
    # btRSBroadphase's grid (float32, as Arena::Arena builds it)
    cell_min = np.array(C.BROADPHASE_MIN_POS, _F32) * _F32(C.UU_TO_BT_F32)
    cell_max = np.array(C.BROADPHASE_MAX_POS, _F32) * _F32(C.UU_TO_BT_F32)
    cell_size = _F32(_F32(C.BROADPHASE_MAX_AABB_LEN) * _F32(C.UU_TO_BT_F32)) * _F32(
        C.BROADPHASE_CELL_MULTIPLIER[mem_weight_mode]
    )
    dims = tuple(max(1, int(math.ceil(float(r)))) for r in (cell_max - cell_min) / cell_size)
    cell_meshes = np.zeros(dims, np.int32)
    tris, lo, hi = [], [], []
    for file_index, path in enumerate(files):
        vertices, indices = read_cmf(path)
        tris.append(vertices[indices])
        vmin, vmax = vertices.min(0), vertices.max(0)  # recalcLocalAabb: the support along +-x, y, z
        center, half = _F32(0.5) * (vmax + vmin), _F32(0.5) * (vmax - vmin)
        lo.append(center - half)
        hi.append(center + half)
        registered = _registered_cells(
            bvh_quantization(vertices, indices), lo[-1], hi[-1], cell_min, cell_max, cell_size, dims
        )
        cell_meshes |= np.where(registered, np.int32(1 << int(rank[file_index])), np.int32(0))
    normals = np.array([n for n, _ in C.ARENA_PLANES], _F32)
    origins = np.array(C.ARENA_PLANE_ORIGINS, _F32) * _F32(C.UU_TO_BT_F32)
    plane_min, plane_max = _plane_aabbs(normals, origins)
    as_t = lambda x, dtype=torch.float32: torch.from_numpy(np.ascontiguousarray(x)).to(device, dtype)
    return ArenaBullet(
        tri=as_t(np.concatenate(tris).astype(_F32)),
        mesh_min=as_t(np.stack(lo)),
        mesh_max=as_t(np.stack(hi)),
        load_rank=as_t(rank, torch.int64),
        plane_normals=as_t(normals),
        plane_origins=as_t(origins),
        plane_min=as_t(plane_min),
        plane_max=as_t(plane_max),
        cell_meshes=as_t(cell_meshes.reshape(-1), torch.int32),
        cell_min=tuple(float(x) for x in cell_min),
        cell_size=float(cell_size),
        cell_dims=dims,
    )


def _plane_aabbs(normals: np.ndarray, origins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RocketSim's btStaticPlaneShape::getAabb: along its one axis, origin + (0 -+ 0.2), and
    BT_LARGE_FLOAT away behind the plane; unbounded along the other axes."""
    big = _F32(BT_LARGE_FLOAT)
    lo = np.full_like(origins, -big)
    hi = np.full_like(origins, big)
    for i, (n, o) in enumerate(zip(normals, origins)):
        axis = int(np.argmax(np.abs(n)))
        lo[i, axis] = o[axis] + (_F32(0) - _F32(C.PLANE_AABB_HALF_THICKNESS))
        hi[i, axis] = o[axis] + (_F32(0) + _F32(C.PLANE_AABB_HALF_THICKNESS))
        if n[axis] < 0:
            hi[i, axis] = big
        else:
            lo[i, axis] = -big
    return lo, hi


def _cell_indices_np(pos: np.ndarray, cell_min: np.ndarray, cell_size: np.float32, dims) -> np.ndarray:
    """btRSBroadphase::GetCellIndices: (int)((pos - minPos) * (1 / cellSize)), clamped into the grid."""
    scaled = (pos - cell_min) * (_F32(1.0) / cell_size)
    return np.clip(np.trunc(scaled).astype(np.int64), 0, np.array(dims) - 1)


def _registered_cells(bvh, mesh_min, mesh_max, cell_min, cell_max, cell_size, dims) -> np.ndarray:
    """The broadphase cells a mesh file's proxy is listed in (_UpdateCellsStatic) [X, Y, Z] bool.

    Of the cells the file's broadphase AABB (its AABB grown by 0.02, capped at maxPos) spans, those
    where its BVH reports a triangle (quantized boxes overlapping the cell's) list it, and so does
    every neighbour of such a cell.
    """
    bp_min = mesh_min - _F32(C.CONTACT_BREAKING_THRESHOLD)
    bp_max = np.minimum(mesh_max + _F32(C.CONTACT_BREAKING_THRESHOLD), cell_max)
    first = _cell_indices_np(bp_min, cell_min, cell_size, dims)
    last = _cell_indices_np(bp_max, cell_min, cell_size, dims)
    hit_ranges = []
    for axis in range(3):
        cells = np.arange(first[axis], last[axis] + 1)
        lo = cell_min[axis] + cells.astype(_F32) * cell_size  # GetCellMinPos
        hi = lo + cell_size
        q_lo = bvh.quantize_with_clamp(
            np.stack([np.full_like(lo, bvh.aabb_min[a]) if a != axis else lo for a in range(3)], -1), False
        )[:, axis]
        q_hi = bvh.quantize_with_clamp(
            np.stack([np.full_like(hi, bvh.aabb_min[a]) if a != axis else hi for a in range(3)], -1), True
        )[:, axis]
        # leaf t overlaps cell c along this axis (testQuantizedAabbAgainstQuantizedAabb)
        hit_ranges.append(
            (bvh.leaf_min[:, axis, None] <= q_hi[None]) & (bvh.leaf_max[:, axis, None] >= q_lo[None])
        )
    hit = np.zeros(tuple(int(b - a + 1) for a, b in zip(first, last)), bool)
    for t in range(bvh.leaf_min.shape[0]):
        xs, ys, zs = (np.nonzero(r[t])[0] for r in hit_ranges)
        if len(xs) and len(ys) and len(zs):
            hit[xs[0] : xs[-1] + 1, ys[0] : ys[-1] + 1, zs[0] : zs[-1] + 1] = True
    registered = np.zeros(dims, bool)
    for i, j, k in zip(*np.nonzero(hit)):
        c = np.array((i, j, k)) + first
        lo_c, hi_c = np.maximum(c - 1, 0), np.minimum(c + 1, np.array(dims) - 1)
        registered[lo_c[0] : hi_c[0] + 1, lo_c[1] : hi_c[1] + 1, lo_c[2] : hi_c[2] + 1] = True
    return registered


def broadphase_cell(arena: ArenaBullet, point: torch.Tensor) -> torch.Tensor:
    """btRSBroadphase::GetCellIdx of points [..., 3] (BT): the flat cell index [...]."""
    origin = constant(tuple(arena.cell_min), point.device, point.dtype)
    scaled = (point - origin) * float(_F32(1.0) / _F32(arena.cell_size))
    dims = constant(tuple(arena.cell_dims), point.device, torch.int64)
    ijk = torch.minimum(torch.trunc(scaled).to(torch.int64).clamp(min=0), dims - 1)
    return (ijk[..., 0] * arena.cell_dims[1] + ijk[..., 1]) * arena.cell_dims[2] + ijk[..., 2]


def aabbs_overlap(a_min, a_max, b_min, b_max) -> torch.Tensor:
    """TestAabbAgainstAabb2 over [..., 3] boxes: [...] bool."""
    return ~((a_min > b_max) | (a_max < b_min)).any(-1)
