"""`ArenaMesh`: the static soccar geometry as tensors on a device, and `load_arena_mesh`.

RocketSim (ZealanL/RocketSim, MIT) loads `soccar/mesh_*.cmf` (dumped from Rocket League, 8,020
triangles) into Bullet triangle meshes with internal-edge info and adds four infinite planes (floor,
ceiling, side walls). We load the same files (`cmf`), compute Bullet's internal-edge info
(`internal_edge_info`) and visiting order (`bvh`), and build the grid (`grid`) once per folder and
device. `cell_candidates` is the grid's lookup, which every per-tick query starts with.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
from pathlib import Path

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh.bvh import bvh_visit_order
from nitro.envs.soccar.arena_mesh.cmf import (
    _INSTALL_HINT,
    SOCCAR_MESH_HASHES,
    MeshesNotFoundError,
    cmf_hash,
    find_soccar_meshes,
    read_cmf,
)
from nitro.envs.soccar.arena_mesh.grid import DEFAULT_QUERY_RADIUS, GRID_CELL_SIZE, build_grid
from nitro.envs.soccar.arena_mesh.internal_edge_info import internal_edge_info
from nitro.envs.soccar.vec import eager_cpu_width


@dataclasses.dataclass(frozen=True)
class ArenaMesh:
    """Static soccar geometry, as tensors on one device (all lengths in UU).

    ====================  ==========================================================  ===========
    field                 meaning                                                     shape
    ====================  ==========================================================  ===========
    tri_verts             triangle vertices, in file order (mesh 0 first)             [T, 3, 3]
    tri_normals           unit winding normal, (v1 - v0) x (v2 - v0) normalised       [T, 3]
    tri_bounds            unit normal, normal . v0, centroid, and the radius of the   [T, 8]
                          ball about the centroid holding the triangle (rounded up):
                          the kernels' cheap test that a triangle is out of reach
    tri_mesh              index of the .cmf file each triangle came from              [T]
    tri_order             Bullet's visiting order: mesh index * 2^16 + BVH rank       [T]
    edge_angle            internal-edge angle per edge v0v1, v1v2, v2v0 (2*pi: none)  [T, 3]
    edge_flags            btTriangleInfo flags (convex / swap-normal bits per edge)   [T]
    plane_normals         RocketSim's planes: unit normal into the field              [P, 3]
    plane_offsets         plane = {x : normal . x = offset}                           [P]
    cell_start            CSR offsets into cell_tris, one per grid cell, plus one     [G + 1]
    cell_tris             triangle ids of every cell, in Bullet's visiting order      [L]
    ====================  ==========================================================  ===========
    """

    tri_verts: torch.Tensor
    tri_normals: torch.Tensor
    tri_bounds: torch.Tensor
    tri_mesh: torch.Tensor
    tri_order: torch.Tensor
    edge_angle: torch.Tensor
    edge_flags: torch.Tensor
    plane_normals: torch.Tensor
    plane_offsets: torch.Tensor
    cell_start: torch.Tensor
    cell_tris: torch.Tensor
    grid_origin: tuple[float, float, float]
    """Lower corner of the grid, UU."""
    grid_dims: tuple[int, int, int]
    """Cells along x, y, z."""
    cell_size: float
    """Edge of a cubic cell, UU."""
    query_radius: float
    """Every triangle within this distance of a cell is in its list: the reach of any query, UU."""
    max_cell_count: int
    """Length of the longest cell list (the reference pads every query to it)."""
    folder: str
    """Where the .cmf files were read from."""

    @property
    def device(self) -> torch.device:
        return self.tri_verts.device

    @property
    def num_triangles(self) -> int:
        return self.tri_verts.shape[0]

    @property
    def num_planes(self) -> int:
        return self.plane_normals.shape[0]

    def to(self, device: torch.device | str) -> ArenaMesh:
        """The same mesh on another device."""
        moved = {
            f.name: getattr(self, f.name).to(device)
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), torch.Tensor)
        }
        return dataclasses.replace(self, **moved)

    def cell_index(self, points: torch.Tensor) -> torch.Tensor:
        """Flat index of the grid cell holding each point [..., 3] (clamped to the grid) -> [...]."""
        i, j, k = (
            torch.floor((points[..., axis] - self.grid_origin[axis]) / self.cell_size).to(torch.int64)
            .clamp(0, self.grid_dims[axis] - 1)
            for axis in range(3)
        )  # fmt: skip
        return (i * self.grid_dims[1] + j) * self.grid_dims[2] + k


def load_arena_mesh(
    meshes: str | os.PathLike | None = None,
    device: torch.device | str | None = None,
    query_radius: float = DEFAULT_QUERY_RADIUS,
    cell_size: float = GRID_CELL_SIZE,
) -> ArenaMesh:
    """Load the soccar meshes (see `find_soccar_meshes`) and build the grid, on ``device``.

    Built once per (folder, grid settings) and cached; moving to a device is cached per device.
    """
    folder = find_soccar_meshes(meshes).resolve()
    cpu = _load_cpu(str(folder), float(query_radius), float(cell_size))
    device = torch.device(device) if device is not None else torch.device("cpu")
    return cpu if device.type == "cpu" else _on_device(cpu, str(device))


@functools.lru_cache(maxsize=8)
def _on_device(mesh: ArenaMesh, device: str) -> ArenaMesh:
    return mesh.to(device)


@functools.lru_cache(maxsize=4)
def _load_cpu(folder: str, query_radius: float, cell_size: float) -> ArenaMesh:
    files = sorted(
        Path(folder).glob("mesh_*.cmf"),
        key=lambda p: int(p.stem.split("_")[1]) if p.stem.split("_")[1].isdigit() else 1 << 30,
    )
    if not files:
        raise MeshesNotFoundError(f"no mesh_*.cmf in {folder}; {_INSTALL_HINT}.")
    tri_verts, mesh_ids, orders, angles, flags = [], [], [], [], []
    for k, path in enumerate(files):
        vertices, indices = read_cmf(path)
        digest = cmf_hash(vertices, indices)
        if digest not in SOCCAR_MESH_HASHES:
            warnings.warn(
                f"{path.name}: hash 0x{digest:08X} is not one of RocketSim's soccar meshes; "
                "the arena will not match Rocket League's",
                stacklevel=3,
            )
        # Bullet units -> UU, rounding once from the exact product.
        verts_uu = (vertices.astype(np.float64) * C.BT_TO_UU).astype(np.float32)
        tri_verts.append(verts_uu[indices])
        mesh_ids.append(np.full(len(indices), k, np.int32))
        rank = np.empty(len(indices), np.int64)
        rank[bvh_visit_order(vertices, indices)] = np.arange(len(indices))
        orders.append(k * (1 << 16) + rank)
        a, f = internal_edge_info(vertices, indices)
        angles.append(a)
        flags.append(f)
    tv = np.concatenate(tri_verts)
    normals = np.cross(tv[:, 1].astype(np.float64) - tv[:, 0], tv[:, 2].astype(np.float64) - tv[:, 0])
    normals = (normals / np.linalg.norm(normals, axis=1, keepdims=True)).astype(np.float32)
    centroid = tv.astype(np.float64).mean(1)
    bound_radius = np.linalg.norm(tv - centroid[:, None, :], axis=2).max(1)
    bounds = np.concatenate(
        [
            normals,
            np.einsum("ij,ij->i", normals.astype(np.float64), tv[:, 0].astype(np.float64))[:, None],
            centroid,
            bound_radius[:, None],
        ],
        1,
    ).astype(np.float32)
    bounds[:, 7] = np.nextafter(bounds[:, 7], np.float32(np.inf))  # a radius rounded up
    tri_order = np.concatenate(orders)
    start, tris, origin, dims, max_count = build_grid(tv, query_radius, cell_size, tri_order)
    planes_n = np.array([n for n, _ in C.ARENA_PLANES], np.float32)
    planes_d = np.array([d for _, d in C.ARENA_PLANES], np.float32)
    return ArenaMesh(
        tri_verts=torch.from_numpy(tv),
        tri_normals=torch.from_numpy(normals),
        tri_bounds=torch.from_numpy(bounds),
        tri_mesh=torch.from_numpy(np.concatenate(mesh_ids)),
        tri_order=torch.from_numpy(tri_order.astype(np.int32)),
        edge_angle=torch.from_numpy(np.concatenate(angles)),
        edge_flags=torch.from_numpy(np.concatenate(flags)),
        plane_normals=torch.from_numpy(planes_n),
        plane_offsets=torch.from_numpy(planes_d),
        cell_start=torch.from_numpy(start),
        cell_tris=torch.from_numpy(tris),
        grid_origin=tuple(float(x) for x in origin),
        grid_dims=tuple(int(x) for x in dims),
        cell_size=cell_size,
        query_radius=query_radius,
        max_cell_count=int(max_count),
        folder=folder,
    )


def cell_candidates(mesh: ArenaMesh, points: torch.Tensor):
    """The grid's lookup (where each query starts): the triangle ids listed in each point's cell, in
    Bullet's visiting order, padded to the longest list: (ids [N, M], valid [N, M])."""
    cell = mesh.cell_index(points)
    start = mesh.cell_start[cell].to(torch.int64)
    length = mesh.cell_start[cell + 1].to(torch.int64) - start
    j = torch.arange(eager_cpu_width(length, mesh.max_cell_count), device=points.device)
    valid = j < length[:, None]
    flat = torch.where(valid, start[:, None] + j, 0)
    ids = mesh.cell_tris[flat.clamp(max=max(mesh.cell_tris.numel() - 1, 0))].to(torch.int64)
    return torch.where(valid, ids, 0), valid
