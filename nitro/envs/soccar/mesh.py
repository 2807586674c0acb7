"""The soccar arena geometry: RocketSim's collision meshes, its four planes, and batched queries.

RocketSim (ZealanL/RocketSim, MIT) loads `soccar/mesh_*.cmf` (dumped from Rocket League, 8,020
triangles) into Bullet triangle meshes with internal-edge info, and adds four infinite planes (floor,
ceiling, side walls). We load the same files into device tensors and answer the three queries the
simulation needs, batched over envs:

- `sphere_contacts`: every arena feature within a gap of a sphere (the ball), Bullet's
  `SphereTriangleDetector` + `btAdjustInternalEdgeContacts` (so contact normals on smooth surfaces
  do not catch on internal triangle edges), and the sphere-vs-plane contacts.
- `ray_cast`: the closest hit of a segment (wheel suspension rays), `btTriangleRaycastCallback`.
- `box_contacts`: oriented boxes (car bodies) against triangles and planes, by separating axes.

Acceleration structure: a uniform grid whose cells each list (CSR: ``cell_start`` offsets + flat
``cell_tris`` ids) every triangle that comes within ``query_radius`` of the cell, so one query needs
one cell's list only. The PyTorch functions here are the reference (CPU runs use them); on CUDA the
same queries run as Triton kernels (`nitro.envs.soccar.kernels`) that loop over just their own list.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
import os
import warnings
from pathlib import Path

import numpy as np
import torch

from nitro.envs.soccar import constants as C

# --- Finding and reading the meshes ---------------------------------------------------------------

MESHES_ENV_VAR = "NITRO_MESHES"
_PACKAGE_MESH_DIR = Path("rocket_league", "sim", "collision_meshes")
_INSTALL_HINT = (
    'install them with `pip install "nitro-rl[soccar]"` (or `pip install --no-deps '
    "rlgym-rocket-league==2.0.1`, which ships them), or point NITRO_MESHES (or Arena(meshes=...)) at a "
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


# --- Internal-edge info (btGenerateInternalEdgeInfo) ----------------------------------------------

# btTriangleInfo flags
TRI_INFO_V0V1_CONVEX = 1
TRI_INFO_V1V2_CONVEX = 2
TRI_INFO_V2V0_CONVEX = 4
TRI_INFO_V0V1_SWAP_NORMALB = 8
TRI_INFO_V1V2_SWAP_NORMALB = 16
TRI_INFO_V2V0_SWAP_NORMALB = 32


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _rotate_np(v: np.ndarray, axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Rotate ``v`` about ``axis`` (any length) by ``angle`` (right-handed), as btQuaternion does."""
    k = _unit(axis)
    c, s = np.cos(angle)[..., None], np.sin(angle)[..., None]
    return v * c + np.cross(k, v) * s + k * (k * v).sum(-1, keepdims=True) * (1 - c)


def internal_edge_info(vertices: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per triangle of one mesh file: edge angles [T, 3] (2*pi where no neighbour) and flags [T].

    Port of Bullet's btConnectivityProcessor as RocketSim runs it (btGenerateInternalEdgeInfo per
    file, so seams between files get no smoothing), vectorised over all (triangle, neighbour) pairs.
    The soccar meshes are clean (unique vertex positions, at most two triangles per edge), so shared
    vertices are shared indices.
    """
    verts = vertices.astype(np.float64)
    num_tris = len(indices)
    # Every directed edge slot (triangle a, edge e = v_e -> v_(e+1)); pair it with the other owner.
    a_all = np.repeat(np.arange(num_tris), 3)
    e_all = np.tile(np.arange(3), num_tris)
    i0, i1 = indices[a_all, e_all], indices[a_all, (e_all + 1) % 3]
    key = np.minimum(i0, i1).astype(np.int64) * (len(vertices) + 1) + np.maximum(i0, i1)
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    same_next = sorted_key[1:] == sorted_key[:-1]
    first, second = order[:-1][same_next], order[1:][same_next]
    slot_a = np.concatenate([first, second])  # each shared edge seen from both sides
    slot_b = np.concatenate([second, first])
    a, e, b = a_all[slot_a], e_all[slot_a], a_all[slot_b]
    va, vb = verts[indices[a]], verts[indices[b]]  # [K, 3, 3]
    # Bullet lists the shared vertices of A in ascending order, except (0, 2) -> (2, 0): i.e. the
    # shared pair is edge e's (v_e, v_(e+1)). The matching vertices of B, and B's third vertex:
    ia0, ia1 = indices[a, e], indices[a, (e + 1) % 3]
    ib = indices[b]
    jb0 = np.argmax(ib == ia0[:, None], axis=1)
    jb1 = np.argmax(ib == ia1[:, None], axis=1)
    other_b = 3 - jb0 - jb1
    other_a = (e + 2) % 3
    rows = np.arange(len(a))
    edge = _unit(va[rows, (e + 1) % 3] - va[rows, e])
    normal_a = _unit(np.cross(va[:, 1] - va[:, 0], va[:, 2] - va[:, 0]))
    tb0, tb1, tb2 = vb[rows, jb1], vb[rows, jb0], vb[rows, other_b]  # btTriangleShape tB's order
    normal_b = _unit(np.cross(tb1 - tb0, tb2 - tb0))
    edge_cross_a = _unit(np.cross(edge, normal_a))
    flip = ((va[rows, other_a] - va[rows, e]) * edge_cross_a).sum(-1) < 0
    edge_cross_a[flip] *= -1
    edge_cross_b = _unit(np.cross(edge, normal_b))
    flip = ((vb[rows, other_b] - vb[rows, jb0]) * edge_cross_b).sum(-1) < 0
    edge_cross_b[flip] *= -1
    calculated_edge = np.cross(edge_cross_a, edge_cross_b)
    planar = (calculated_edge * calculated_edge).sum(-1) < C.INTERNAL_EDGE_PLANAR_EPSILON
    with np.errstate(invalid="ignore", divide="ignore"):
        calculated_normal_a = _unit(np.cross(_unit(calculated_edge), edge_cross_a))
        angle2 = np.arctan2(
            (edge_cross_b * calculated_normal_a).sum(-1), (edge_cross_b * edge_cross_a).sum(-1)
        )
    is_convex = ~planar & ((normal_a * edge_cross_b).sum(-1) < 0)
    corrected = np.where(planar, 0.0, np.where(is_convex, np.pi - angle2, angle2 - np.pi))
    rot_edge = va[rows, e] - va[rows, (e + 1) % 3]  # v0 - v1, v1 - v2, v2 - v0
    computed_normal_b = _rotate_np(normal_a, rot_edge, -corrected)
    swap = (computed_normal_b * normal_b).sum(-1) < 0
    angles = np.full((num_tris, 3), C.INTERNAL_EDGE_MAX_ANGLE, np.float64)
    angles[a, e] = -corrected
    flags = np.zeros(num_tris, np.int64)
    np.bitwise_or.at(flags, a, np.where(is_convex, 1 << e, 0) | np.where(swap, 8 << e, 0))
    return angles.astype(np.float32), flags.astype(np.int32)


# --- Bullet's triangle visiting order (btOptimizedBvh, quantized) ---------------------------------

_BVH_SUBTREE_MAX_NODES = 2048 // 16  # MAX_SUBTREE_SIZE_IN_BYTES / sizeof(btQuantizedBvhNode)


def bvh_visit_order(vertices: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Triangle indices of one mesh file in the order Bullet's BVH visits them.

    A sphere's contacts with one mesh go into one 4-point contact manifold in the order the
    triangles are visited, and once it is full each new point replaces one chosen by area, so the
    order decides which contacts survive. RocketSim builds each file into a btBvhTriangleMeshShape
    with quantized AABBs; we replay btQuantizedBvh's build (quantisation, variance split axis,
    mean partition, subtree headers) in float32 to get the same leaf order. A query visits, subtree
    header by header, the leaves whose boxes overlap it, in this order.
    """
    f32 = np.float32
    one = f32(1.0)
    bvh = bvh_quantization(vertices, indices)
    centers = f32(0.5) * (
        _unquantize(bvh.leaf_max, bvh.aabb_min, bvh.quantization)
        + _unquantize(bvh.leaf_min, bvh.aabb_min, bvh.quantization)
    )
    leaves = np.arange(len(indices))  # leaf slot -> triangle; partitioned in place like Bullet's array
    nodes: list[int] = []  # node array: triangle index for a leaf, -1 for an internal node
    headers: list[tuple[int, int]] = []  # (root node index, node count)

    def subtree_size(node: int) -> int:
        return 1 if nodes[node] >= 0 else sizes[node]

    sizes: dict[int, int] = {}

    def mean(start: int, end: int) -> np.ndarray:
        total = np.add.accumulate(centers[leaves[start:end]], axis=0, dtype=f32)[-1]  # sequential, float32
        return total * (one / f32(end - start))

    def build(start: int, end: int) -> None:
        count = end - start
        cur = len(nodes)
        if count == 1:
            nodes.append(int(leaves[start]))
            return
        means = mean(start, end)  # calcSplittingAxis
        diff = centers[leaves[start:end]] - means
        variance = np.add.accumulate(diff * diff, axis=0, dtype=f32)[-1] * (one / (f32(count) - one))
        axis = (
            (2 if variance[1] < variance[2] else 1)
            if variance[0] < variance[1]
            else (2 if variance[0] < variance[2] else 0)
        )
        split_value = mean(start, end)[axis]  # sortAndCalcSplittingIndex
        split = start
        for i in range(start, end):
            if centers[leaves[i], axis] > split_value:
                leaves[i], leaves[split] = leaves[split], leaves[i]
                split += 1
        balanced = count // 3
        if split <= start + balanced or split >= end - 1 - balanced:
            split = start + (count >> 1)
        nodes.append(-1)
        left = len(nodes)
        build(start, split)
        right = len(nodes)
        build(split, end)
        sizes[cur] = len(nodes) - cur
        if sizes[cur] > _BVH_SUBTREE_MAX_NODES:  # updateSubtreeHeaders
            for child in (left, right):
                if subtree_size(child) <= _BVH_SUBTREE_MAX_NODES:
                    headers.append((child, subtree_size(child)))

    build(0, len(indices))
    if not headers:
        headers.append((0, subtree_size(0)))
    order = [nodes[k] for root, size in headers for k in range(root, root + size) if nodes[k] >= 0]
    return np.asarray(order, np.int64)


@dataclasses.dataclass(frozen=True)
class BvhQuantization:
    """A mesh file's btQuantizedBvh quantisation and its leaves' quantized boxes (Bullet units)."""

    aabb_min: np.ndarray
    """m_bvhAabbMin [3]."""
    aabb_max: np.ndarray
    """m_bvhAabbMax [3]."""
    quantization: np.ndarray
    """m_bvhQuantization [3]."""
    leaf_min: np.ndarray
    """Quantized lower corner of each triangle's box, in file order [T, 3] int64."""
    leaf_max: np.ndarray
    """Quantized upper corner [T, 3] int64."""

    def quantize_with_clamp(self, point: np.ndarray, is_max: bool) -> np.ndarray:
        """btQuantizedBvh::quantizeWithClamp: a query corner [..., 3] clamped into the BVH's box."""
        clamped = np.minimum(np.maximum(point, self.aabb_min), self.aabb_max)
        return _quantize(clamped.astype(np.float32), self.aabb_min, self.quantization, is_max)


def bvh_quantization(vertices: np.ndarray, indices: np.ndarray) -> BvhQuantization:
    """The quantisation btQuantizedBvh::setQuantizationValues (margin 1) picks for a mesh file, and
    the leaf boxes QuantizedNodeTriangleCallback stores (widened where thinner than 0.002), float32."""
    f32 = np.float32
    tris = vertices[indices].astype(f32)  # [T, 3, 3], Bullet units
    lo, hi = vertices.min(0).astype(f32), vertices.max(0).astype(f32)
    one = f32(1.0)
    bmin, bmax = lo - one, hi + one
    quant = f32(65533.0) / (bmax - bmin)
    bmin = np.minimum(bmin, _unquantize(_quantize(bmin, bmin, quant, False), bmin, quant) - one)
    quant = f32(65533.0) / (bmax - bmin)
    bmax = np.maximum(bmax, _unquantize(_quantize(bmax, bmin, quant, True), bmin, quant) + one)
    quant = f32(65533.0) / (bmax - bmin)
    tmin, tmax = tris.min(1), tris.max(1)
    thin = (tmax - tmin) < f32(0.002)
    tmax = np.where(thin, tmax + f32(0.001), tmax)
    tmin = np.where(thin, tmin - f32(0.001), tmin)
    return BvhQuantization(
        aabb_min=bmin,
        aabb_max=bmax,
        quantization=quant,
        leaf_min=_quantize(tmin, bmin, quant, False),
        leaf_max=_quantize(tmax, bmin, quant, True),
    )


def _quantize(point: np.ndarray, bmin: np.ndarray, quant: np.ndarray, is_max: bool) -> np.ndarray:
    v = (point - bmin) * quant
    if is_max:
        return (np.trunc(v + np.float32(1.0)).astype(np.int64) & 0xFFFF) | 1
    return np.trunc(v).astype(np.int64) & 0xFFFE


def _unquantize(q: np.ndarray, bmin: np.ndarray, quant: np.ndarray) -> np.ndarray:
    return q.astype(np.float32) / quant + bmin


# --- The arena mesh on a device -------------------------------------------------------------------

GRID_CELL_SIZE = 128.0  # UU. With a 112-UU query radius the fullest cell lists 234 triangles.
# Largest query a grid cell must answer, in UU: the ball's 91.25 + 1.905 contact reach, a car body's
# bounding radius (94.8 for the longest preset, from the car origin) or a 50-UU wheel ray, with room.
DEFAULT_QUERY_RADIUS = 112.0


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
        origin = torch.tensor(self.grid_origin, dtype=points.dtype, device=points.device)
        dims = torch.tensor(self.grid_dims, device=points.device)
        ijk = torch.floor((points - origin) / self.cell_size).to(torch.int64)
        ijk = torch.minimum(torch.clamp(ijk, min=0), dims - 1)
        return (ijk[..., 0] * self.grid_dims[1] + ijk[..., 1]) * self.grid_dims[2] + ijk[..., 2]


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


def build_grid(
    tri_verts: np.ndarray, query_radius: float, cell_size: float, tri_order: np.ndarray | None = None
):
    """CSR grid: each cell lists the triangles within ``query_radius`` of some point of the cell.

    A triangle goes into a cell when its distance to the cell centre is at most query_radius plus
    the cell's half diagonal (conservative: it never misses a triangle a query in the cell can
    reach). Within a cell, triangles are listed by ``tri_order`` (default: by id). Returns
    (cell_start [G+1] int32, cell_tris [L] int32, origin [3], dims [3], max count).
    """
    tv = tri_verts.astype(np.float64)
    lo = tv.reshape(-1, 3).min(0) - query_radius
    hi = tv.reshape(-1, 3).max(0) + query_radius
    dims = np.maximum(np.ceil((hi - lo) / cell_size).astype(np.int64), 1)
    reach = query_radius + math.sqrt(3.0) * cell_size / 2
    first = np.floor((tv.min(1) - query_radius - lo) / cell_size).astype(np.int64)
    last = np.floor((tv.max(1) + query_radius - lo) / cell_size).astype(np.int64)
    first, last = np.clip(first, 0, dims - 1), np.clip(last, 0, dims - 1)
    span = last - first + 1
    counts = span.prod(1)
    tri_of = np.repeat(np.arange(len(tv)), counts)
    local = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    sy, sz = span[tri_of, 1], span[tri_of, 2]
    ijk = first[tri_of] + np.stack([local // (sy * sz), (local // sz) % sy, local % sz], 1)
    centres = lo + (ijk + 0.5) * cell_size
    nearest = closest_point_on_triangle_np(centres, tv[tri_of, 0], tv[tri_of, 1], tv[tri_of, 2])
    keep = np.linalg.norm(nearest - centres, axis=1) <= reach
    flat = (ijk[keep, 0] * dims[1] + ijk[keep, 1]) * dims[2] + ijk[keep, 2]
    tri_kept = tri_of[keep]
    key = tri_kept if tri_order is None else tri_order[tri_kept]
    order = np.lexsort((key, flat))  # by cell, then visiting order
    flat, tri_kept = flat[order], tri_kept[order]
    per_cell = np.bincount(flat, minlength=int(dims.prod()))
    start = np.concatenate([[0], np.cumsum(per_cell)]).astype(np.int32)
    return start, tri_kept.astype(np.int32), lo, dims, int(per_cell.max(initial=0))


def closest_point_on_triangle_np(p, a, b, c):
    """Closest point of triangle abc to p (Ericson's regions), row-wise over [M, 3] arrays."""
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = (ab * ap).sum(-1), (ac * ap).sum(-1)
    bp = p - b
    d3, d4 = (ab * bp).sum(-1), (ac * bp).sum(-1)
    cp = p - c
    d5, d6 = (ab * cp).sum(-1), (ac * cp).sum(-1)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = 1.0 / (va + vb + vc)
        out = a + (vb * denom)[:, None] * ab + (vc * denom)[:, None] * ac
        m = (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0)
        out = np.where(m[:, None], b + ((d4 - d3) / ((d4 - d3) + (d5 - d6)))[:, None] * (c - b), out)
        m = (vb <= 0) & (d2 >= 0) & (d6 <= 0)
        out = np.where(m[:, None], a + (d2 / (d2 - d6))[:, None] * ac, out)
        m = (vc <= 0) & (d1 >= 0) & (d3 <= 0)
        out = np.where(m[:, None], a + (d1 / (d1 - d3))[:, None] * ab, out)
    out = np.where(((d6 >= 0) & (d5 <= d6))[:, None], c, out)
    out = np.where(((d3 >= 0) & (d4 <= d3))[:, None], b, out)
    out = np.where(((d1 <= 0) & (d2 <= 0))[:, None], a, out)
    return out


# --- Vector helpers (last axis = xyz) -------------------------------------------------------------


def dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """x*x' + y*y' + z*z', summed in that order (as Bullet's btVector3::dot and the kernels)."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ax, ay, az = a.unbind(-1)
    bx, by, bz = b.unbind(-1)
    return torch.stack((ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx), -1)


def rotate(v: torch.Tensor, axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotate ``v`` about ``axis`` (any nonzero length) by ``angle`` rad, right-handed (btQuaternion)."""
    k = axis / torch.linalg.vector_norm(axis, dim=-1, keepdim=True)
    c, s = torch.cos(angle)[..., None], torch.sin(angle)[..., None]
    return v * c + cross(k, v) * s + k * dot(k, v)[..., None] * (1 - c)


# --- Sphere contacts ------------------------------------------------------------------------------

# SIMD_EPSILON (FLT_EPSILON) as Bullet compares it against squared lengths in BT^2, here in UU^2.
_SIMD_EPSILON_UU2 = float(np.finfo(np.float32).eps) * C.BT_TO_UU**2
_INF = float("inf")
# SIMD_EPSILON^2 against |(v1 - v0) x (v2 - v0)|^2 (a length^4): degenerate triangles never touch.
_DEGENERATE_L2 = float(np.finfo(np.float32).eps) ** 2 * C.BT_TO_UU**4


# Contact "objects": what Bullet keeps one contact manifold for. Mesh files 0..15, then the planes.
PLANE_OBJECT_BASE = C.SOCCAR_MESH_COUNT


@dataclasses.dataclass
class SphereContacts:
    """New contacts of N spheres with the arena: every feature whose gap is below the query's ``gap``.

    Listed in the order Bullet generates them (planes, then each mesh file's triangles in its BVH
    visiting order); the first ``max_contacts`` are kept. Empty slots have object and feature -1.
    Fields follow btManifoldPoint: the normal points from the feature into the sphere.
    """

    count: torch.Tensor
    """Number of contacts found per sphere (may exceed the slots) [N] int32."""
    object: torch.Tensor
    """Which contact manifold the point belongs to: mesh file, or PLANE_OBJECT_BASE + plane [N, K] int32."""
    feature: torch.Tensor
    """Triangle id, or num_triangles + plane index [N, K] int32."""
    normal: torch.Tensor
    """Contact normal into the sphere, after internal-edge smoothing [N, K, 3]."""
    point: torch.Tensor
    """Contact point on the feature (m_positionWorldOnB), UU [N, K, 3]."""
    offset: torch.Tensor
    """Contact point on the sphere minus its centre (m_positionWorldOnA - centre), UU [N, K, 3]."""
    depth: torch.Tensor
    """Signed gap along the normal, negative when penetrating, UU [N, K]."""


def _closest_point_bullet(p, a, b, c):
    """closestPointTriangle of RocketSim's SphereTriangleDetector (Ericson), over [..., 3] tensors."""
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = dot(ab, ap), dot(ac, ap)
    bp = p - b
    d3, d4 = dot(ab, bp), dot(ac, bp)
    cp = p - c
    d5, d6 = dot(ab, cp), dot(ac, cp)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    denom = 1.0 / (va + vb + vc)
    out = a + (vb * denom)[..., None] * ab + (vc * denom)[..., None] * ac  # region 0: the face
    # Later regions in Bullet's if-chain are overridden by earlier ones: apply them last-first.
    m6 = (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0)
    out = torch.where(
        m6[..., None], b + ((d4 - d3) / torch.where(m6, (d4 - d3) + (d5 - d6), 1))[..., None] * (c - b), out
    )
    m5 = (vb <= 0) & (d2 >= 0) & (d6 <= 0)
    out = torch.where(m5[..., None], a + (d2 / torch.where(m5, d2 - d6, 1))[..., None] * ac, out)
    m4 = (vc <= 0) & (d1 >= 0) & (d3 <= 0)
    out = torch.where(m4[..., None], a + (d1 / torch.where(m4, d1 - d3, 1))[..., None] * ab, out)
    out = torch.where(((d6 >= 0) & (d5 <= d6))[..., None], c, out)
    out = torch.where(((d3 >= 0) & (d4 <= d3))[..., None], b, out)
    out = torch.where(((d1 <= 0) & (d2 <= 0))[..., None], a, out)
    return out


def sphere_triangle_contact(center, v0, v1, v2, radius: float, gap: float):
    """Bullet's SphereTriangleDetector::collide (RocketSim's variant), broadcast over [..., 3].

    Returns (has_contact [...], point on the triangle [..., 3], normal into the sphere [..., 3],
    depth = distance - radius [...]). ``gap`` is the contact breaking threshold.
    """
    reach = radius + gap
    e1, e2 = v1 - v0, v2 - v0
    face_n = cross(e1, e2)
    l2 = dot(face_n, face_n)
    n = face_n / torch.sqrt(l2)[..., None]
    w = center - v0
    plane_dist = dot(w, n)
    n = torch.where((plane_dist < 0)[..., None], -n, n)  # the triangle is two-sided
    plane_dist = plane_dist.abs()
    # facecontains: barycentric coordinates of the centre's projection all in [0, 1]
    gamma = dot(cross(e1, w), face_n) / l2
    beta = dot(cross(w, e2), face_n) / l2
    alpha = 1 - gamma - beta
    inside = (alpha >= 0) & (alpha <= 1) & (beta >= 0) & (beta <= 1) & (gamma >= 0) & (gamma <= 1)
    nearest = _closest_point_bullet(center, v0, v1, v2)
    point = torch.where(inside[..., None], center - n * plane_dist[..., None], nearest)
    to_centre = center - point
    dist2 = dot(to_centre, to_centre)
    has = (l2 >= _DEGENERATE_L2) & (plane_dist < reach) & (dist2 < reach * reach)
    dist = torch.sqrt(dist2)
    tiny = dist2 <= _SIMD_EPSILON_UU2
    normal = torch.where(tiny[..., None], n, to_centre / torch.where(tiny, 1, dist)[..., None])
    depth = torch.where(tiny, -radius, dist - radius)
    return has, point, normal, depth


def adjust_internal_edge_contacts(
    normal, point, v0, v1, v2, tri_normal, edge_angle, edge_flags, forced_edge=None
):
    """btAdjustInternalEdgeContacts (default flags), over [...] contacts of triangles.

    A contact close to an edge shared with a neighbour gets a normal that the neighbour pair allows:
    near a flat or concave edge, the triangle's face normal (so a ball rolling over a seam of a smooth
    surface does not bump); near a convex edge, the normal clamped into the edge's wedge.
    ``normal`` points from the triangle into the other body, ``point`` is on the triangle.
    Returns (normal, changed): ``changed`` marks where Bullet rewrote the normal. ``forced_edge`` [...] (0: v0v1,
    1: v1v2, 2: v2v0) forces the edge tested instead of the nearest one with a neighbour (the kernel
    checks use it for a point at a vertex, where two edges are both at distance 0).
    """
    seg_a = torch.stack((v0, v1, v2), -2)
    seg_b = torch.stack((v1, v2, v0), -2)
    delta = seg_b - seg_a
    t = dot(point[..., None, :] - seg_a, delta) / dot(delta, delta)
    nearest = seg_a + t.clamp(0, 1)[..., None] * delta  # btNearestPointInLineSegment
    edge_dist = torch.linalg.vector_norm(point[..., None, :] - nearest, dim=-1)  # [..., 3]
    has_neighbour = edge_angle.abs() < C.INTERNAL_EDGE_MAX_ANGLE
    # bestedge: the nearest edge with a neighbour (strict <, so the lowest edge wins ties)
    if forced_edge is None:
        best = torch.argmin(torch.where(has_neighbour, edge_dist, _INF), dim=-1, keepdim=True)
    else:
        best = forced_edge.expand(edge_dist.shape[:-1])[..., None].to(torch.int64)
    best_dist = edge_dist.gather(-1, best)[..., 0]
    near = has_neighbour.gather(-1, best)[..., 0] & (best_dist < C.INTERNAL_EDGE_DISTANCE_THRESHOLD)
    angle = edge_angle.gather(-1, best)[..., 0]
    bit = torch.tensor([0, 1, 2], device=best.device).gather(0, best.reshape(-1)).reshape(best.shape)[..., 0]
    convex = ((edge_flags >> bit) & 1) == 1  # TRI_INFO_V0V1_CONVEX << e
    swap_b = ((edge_flags >> (bit + 3)) & 1) == 1  # TRI_INFO_V0V1_SWAP_NORMALB << e
    edge = -delta.gather(-2, best[..., None].expand(*best.shape[:-1], 1, 3))[..., 0, :]  # v0 - v1, ...
    n_in = normal / torch.linalg.vector_norm(normal, dim=-1, keepdim=True)
    swap = torch.where(convex, 1.0, -1.0)[..., None]
    n_a = swap * tri_normal
    computed_b = rotate(tri_normal, edge, angle)
    n_b = swap * torch.where(swap_b[..., None], -computed_b, computed_b)
    back_facing = (dot(n_in, n_a) < 0) & (dot(n_in, n_b) < 0)
    concave = near & ((angle == 0) | back_facing)
    # btClampNormal: keep the normal inside the wedge the neighbour allows
    edge_cross = cross(edge, n_a)
    edge_cross = edge_cross / torch.linalg.vector_norm(edge_cross, dim=-1, keepdim=True)
    cur = torch.atan2(dot(normal, edge_cross), dot(normal, n_a))
    clamp = torch.where(angle < 0, cur < angle, cur > angle)
    clamped = rotate(normal, edge, angle - cur)
    use_clamp = near & ~concave & clamp & (dot(clamped, tri_normal) > 0)
    out = torch.where(use_clamp[..., None], clamped, normal)
    use_face = concave & (dot(tri_normal, n_in) >= 0)  # single-sided: only from the front
    return torch.where(use_face[..., None], tri_normal.expand_as(out), out), use_clamp | use_face


def eager_cpu_width(values: torch.Tensor, static: int) -> int:
    """A padding width for ragged per-env lists: ``static`` (the worst case), or on eager CPU runs the
    batch's own maximum, which there costs no device synchronisation and saves most of the work.
    CUDA and compiled code always get the static width, so they never sync or recompile."""
    if values.device.type != "cpu" or torch.compiler.is_compiling() or values.numel() == 0:
        return static
    return min(static, max(1, int(values.max())))


def _cell_candidates(mesh: ArenaMesh, points: torch.Tensor):
    """Triangle ids listed in each point's cell, padded to the longest list: (ids [N, M], valid [N, M])."""
    cell = mesh.cell_index(points)
    start = mesh.cell_start[cell].to(torch.int64)
    length = mesh.cell_start[cell + 1].to(torch.int64) - start
    j = torch.arange(eager_cpu_width(length, mesh.max_cell_count), device=points.device)
    valid = j < length[:, None]
    flat = torch.where(valid, start[:, None] + j, 0)
    ids = mesh.cell_tris[flat.clamp(max=max(mesh.cell_tris.numel() - 1, 0))].to(torch.int64)
    return torch.where(valid, ids, 0), valid


def sphere_contacts_reference(
    mesh: ArenaMesh, centers: torch.Tensor, radius: float, gap: float, max_contacts: int = 16
) -> SphereContacts:
    """PyTorch reference of `sphere_contacts` (what CPU runs use; the kernel must match it)."""
    n = centers.shape[0]
    device = centers.device
    # Planes (btConvexPlaneCollisionAlgorithm): the sphere's support point against the plane.
    plane_depth = centers @ mesh.plane_normals.T - mesh.plane_offsets - radius  # [N, P]
    plane_has = plane_depth < gap
    plane_normal = mesh.plane_normals.expand(n, -1, -1)
    plane_offset = plane_normal * -radius
    plane_point = centers[:, None, :] + plane_offset - plane_normal * plane_depth[..., None]
    # Triangles of the centre's cell (btConvexConcaveCollisionAlgorithm + SphereTriangleDetector).
    ids, valid = _cell_candidates(mesh, centers)
    v = mesh.tri_verts[ids]  # [N, M, 3, 3]
    c = centers[:, None, :]
    v0, v1, v2 = v[..., 0, :], v[..., 1, :], v[..., 2, :]
    has, point, geo_normal, depth = sphere_triangle_contact(c, v0, v1, v2, radius, gap)
    has = has & valid
    # btManifoldResult::addContactPoint: the point on the sphere is the surface point + normal * depth.
    offset = (point + geo_normal * depth[..., None]) - c
    # The contact-added callback smooths normals over internal edges and re-derives the surface point.
    normal, changed = adjust_internal_edge_contacts(
        geo_normal, point, v0, v1, v2, mesh.tri_normals[ids], mesh.edge_angle[ids], mesh.edge_flags[ids]
    )
    point = torch.where(changed[..., None], (c + offset) - normal * depth[..., None], point)
    # Every feature in Bullet's order: planes, then the cell list (already in visiting order).
    all_has = torch.cat((plane_has, has), 1)
    plane_ids = torch.arange(mesh.num_planes, device=device).expand(n, -1)
    all_object = torch.cat((PLANE_OBJECT_BASE + plane_ids, mesh.tri_mesh[ids].to(torch.int64)), 1)
    all_feature = torch.cat((mesh.num_triangles + plane_ids, ids), 1)
    all_normal = torch.cat((plane_normal, normal), 1)
    all_point = torch.cat((plane_point, point), 1)
    all_offset = torch.cat((plane_offset, offset), 1)
    all_depth = torch.cat((plane_depth, depth), 1)
    # Compact the contacts to the front, keeping their order (a stable sort on "no contact"); pad
    # to max_contacts slots when there are fewer candidates.
    short = max_contacts - all_has.shape[1]
    if short > 0:

        def pad(x):
            return torch.cat((x, x.new_zeros(n, short, *x.shape[2:])), 1)

        all_has, all_object, all_feature, all_normal, all_point, all_offset, all_depth = (
            pad(x) for x in (all_has, all_object, all_feature, all_normal, all_point, all_offset, all_depth)
        )
    order = torch.sort((~all_has).to(torch.int8), dim=1, stable=True).indices[:, :max_contacts]
    slot_has = all_has.gather(1, order)
    take3 = order[..., None].expand(-1, -1, 3)

    def pick(x, fill):
        x = x.gather(1, take3) if x.dim() == 3 else x.gather(1, order)
        return torch.where(slot_has[..., None] if x.dim() == 3 else slot_has, x, fill)

    return SphereContacts(
        count=all_has.sum(1).to(torch.int32),
        object=pick(all_object, -1).to(torch.int32),
        feature=pick(all_feature, -1).to(torch.int32),
        normal=pick(all_normal, 0.0),
        point=pick(all_point, 0.0),
        offset=pick(all_offset, 0.0),
        depth=pick(all_depth, 0.0),
    )


def _use_kernels(tensor: torch.Tensor, use_kernels: bool | None) -> bool:
    if use_kernels is None:
        if not tensor.is_cuda:
            return False
        from nitro.envs.soccar import kernels  # lazy: Triton only on CUDA paths

        return kernels.available()
    return use_kernels


def sphere_contacts(
    mesh: ArenaMesh, centers: torch.Tensor, radius: float, gap: float, max_contacts: int = 16
) -> SphereContacts:
    """Contacts of spheres [N, 3] (UU) of ``radius`` with every arena feature closer than ``gap``,
    in Bullet's order (the first ``max_contacts`` of them).

    The tick uses `collide.sphere_manifolds`, which files these into Bullet's manifolds (on CUDA, in
    one Triton kernel); this unreduced list is for inspection and tests, on any device.
    """
    if radius + gap > mesh.query_radius:
        raise ValueError(
            f"sphere reach radius + gap = {radius + gap} UU exceeds the grid's query radius "
            f"{mesh.query_radius} UU; load the mesh with a larger query_radius"
        )
    return sphere_contacts_reference(mesh, centers, radius, gap, max_contacts)


# --- Ray casts ------------------------------------------------------------------------------------


@dataclasses.dataclass
class RayHits:
    """Closest hit of each segment start -> end with the arena (btCollisionWorld::rayTest)."""

    hit: torch.Tensor
    """The segment hits something [N] bool."""
    fraction: torch.Tensor
    """Hit position along the segment, 0 at start, 1 at end (1 when no hit) [N]."""
    normal: torch.Tensor
    """Unit surface normal facing the segment's start (zero when no hit) [N, 3]."""
    feature: torch.Tensor
    """Triangle id, or num_triangles + plane index; -1 when no hit [N] int32."""


def ray_triangle_fraction(start, end, v0, v1, v2):
    """btTriangleRaycastCallback::processTriangle, broadcast: (hit [...], fraction [...], normal [..., 3]).

    Two-sided; the edge test is tolerant by 1e-4 of |n|^2, as Bullet's. The normal faces ``start``.
    """
    n = cross(v1 - v0, v2 - v0)
    plane = dot(v0, n)
    dist_a = dot(n, start) - plane
    dist_b = dot(n, end) - plane
    crosses = dist_a * dist_b < 0
    fraction = dist_a / torch.where(crosses, dist_a - dist_b, 1)
    point = start * (1 - fraction)[..., None] + end * fraction[..., None]  # setInterpolate3
    tolerance = dot(n, n) * -0.0001
    p0, p1, p2 = v0 - point, v1 - point, v2 - point
    inside = (
        (dot(cross(p0, p1), n) >= tolerance)
        & (dot(cross(p1, p2), n) >= tolerance)
        & (dot(cross(p2, p0), n) >= tolerance)
    )
    unit = n / torch.linalg.vector_norm(n, dim=-1, keepdim=True)
    normal = torch.where((dist_a <= 0)[..., None], -unit, unit)
    return crosses & inside, torch.where(crosses, fraction, 1.0), normal


def ray_cast_reference(mesh: ArenaMesh, start: torch.Tensor, end: torch.Tensor) -> RayHits:
    """PyTorch reference of `ray_cast`: closest hit over the start point's cell list and the planes."""
    n = start.shape[0]
    ids, valid = _cell_candidates(mesh, start)
    v = mesh.tri_verts[ids]
    s, e = start[:, None, :], end[:, None, :]
    hit, fraction, normal = ray_triangle_fraction(s, e, v[..., 0, :], v[..., 1, :], v[..., 2, :])
    hit = hit & valid
    # Planes: Bullet casts against two triangles covering the plane; same hit, same flipped normal.
    pn = mesh.plane_normals.expand(n, -1, -1)
    da = start @ mesh.plane_normals.T - mesh.plane_offsets
    db = end @ mesh.plane_normals.T - mesh.plane_offsets
    p_hit = da * db < 0
    p_fraction = torch.where(p_hit, da / torch.where(p_hit, da - db, 1), 1.0)
    p_normal = torch.where((da <= 0)[..., None], -pn, pn)
    # Meshes are visited before the planes (creation order); the first of equal fractions is kept.
    all_hit = torch.cat((hit, p_hit), 1)
    all_fraction = torch.where(all_hit, torch.cat((fraction, p_fraction), 1), _INF)
    plane_ids = mesh.num_triangles + torch.arange(mesh.num_planes, device=start.device).expand(n, -1)
    all_feature = torch.cat((ids, plane_ids), 1)
    best = torch.argmin(all_fraction, dim=1, keepdim=True)
    any_hit = all_hit.any(1)
    return RayHits(
        hit=any_hit,
        fraction=torch.where(any_hit, all_fraction.gather(1, best)[:, 0], 1.0),
        normal=torch.where(
            any_hit[:, None],
            torch.cat((normal, p_normal), 1).gather(1, best[..., None].expand(-1, -1, 3))[:, 0],
            0.0,
        ),
        feature=torch.where(any_hit, all_feature.gather(1, best)[:, 0], -1).to(torch.int32),
    )


def ray_cast(
    mesh: ArenaMesh, start: torch.Tensor, end: torch.Tensor, use_kernels: bool | None = None
) -> RayHits:
    """Closest hit of segments start [N, 3] -> end [N, 3] (UU) with the arena's triangles and planes.

    Segments must be at most ``mesh.query_radius`` long: a query reads the grid cell of its start,
    which lists every triangle within that distance (wheel rays are about 50 UU).
    """
    if _use_kernels(start, use_kernels):
        from nitro.envs.soccar import kernels

        return kernels.ray_cast(mesh, start, end)
    return ray_cast_reference(mesh, start, end)


# --- Box contacts ---------------------------------------------------------------------------------


# |direction . axis| below which a box axis does not decide its support point (cos 89.9994 deg).
BOX_SUPPORT_TIE = 1e-5


@dataclasses.dataclass
class BoxContacts:
    """Contacts of N oriented boxes with the arena, deepest first; empty slots have feature -1.

    Each triangle or plane in reach is tested by separating axes (the triangle normal, the box's
    three axes and their nine cross products with the triangle's edges): ``depth`` is the largest
    separation over those axes (negative: the penetration depth; positive: a lower bound of the gap)
    and ``normal`` that axis, pointing from the feature into the box.
    """

    count: torch.Tensor
    """Features within the gap [N] int32."""
    normal: torch.Tensor
    """Separating axis with the least penetration, from the feature into the box [N, K, 3]."""
    depth: torch.Tensor
    """Separation along the normal, UU, negative when penetrating [N, K]."""
    point: torch.Tensor
    """The box's deepest point along -normal (its support point; face or edge centre on ties), UU [N, K, 3]."""
    feature: torch.Tensor
    """Triangle id, or num_triangles + plane index; -1 for an empty slot [N, K] int32."""


def _box_support(center, axes, half, direction):
    """The box's points furthest along ``direction`` [..., 3], averaged where a face or edge ties
    (so a face-on contact reports the face centre); ``axes`` [..., 3, 3] has the axes as columns."""
    along = torch.einsum("...ij,...i->...j", axes, direction)  # direction in box coordinates
    signs = torch.where(along.abs() <= BOX_SUPPORT_TIE, 0.0, torch.sign(along))
    return center + torch.einsum("...ij,...j->...i", axes, signs * half)


def box_triangle_axes(center, axes, half, v0, v1, v2):
    """Every separating-axis candidate of a box and a triangle, broadcast: (separation [..., 13],
    unit axis pointing from the triangle into the box [..., 13, 3]). Candidates: the triangle normal,
    the box's three axes, their nine cross products with the triangle's edges; a candidate from
    (nearly) parallel edges gives no axis and has separation -inf.

    ``axes`` [..., 3, 3] holds the box axes as columns, ``half`` [..., 3] its half extents.
    """
    batch = torch.broadcast_shapes(center.shape[:-1], axes.shape[:-2], half.shape[:-1], v0.shape[:-1])
    center, half = center.expand(*batch, 3), half.expand(*batch, 3)
    axes = axes.expand(*batch, 3, 3)
    v0, v1, v2 = v0.expand(*batch, 3), v1.expand(*batch, 3), v2.expand(*batch, 3)
    edges = torch.stack((v1 - v0, v2 - v1, v0 - v2), -2)  # [..., 3, 3]
    box_axes = axes.transpose(-1, -2)  # rows = axes
    tri_n = cross(v1 - v0, v2 - v0)[..., None, :]
    crosses = cross(box_axes[..., :, None, :], edges[..., None, :, :]).flatten(-3, -2)  # [..., 9, 3]
    candidates = torch.cat((tri_n, box_axes, crosses), -2)  # [..., 13, 3]
    length = torch.linalg.vector_norm(candidates, dim=-1)
    usable = length > 1e-6 * length.amax(-1, keepdim=True)  # parallel edge pairs give no axis
    u = candidates / torch.where(usable, length, 1)[..., None]
    radius = (dot(box_axes[..., None, :, :], u[..., :, None, :]).abs() * half[..., None, :]).sum(-1)
    centre = dot(center[..., None, :], u)
    proj = torch.stack([dot(v[..., None, :], u) for v in (v0, v1, v2)], -1)  # [..., 13, 3]
    below = proj.amin(-1) - (centre + radius)  # box entirely on the negative side
    above = (centre - radius) - proj.amax(-1)  # box entirely on the positive side
    sep = torch.where(usable, torch.maximum(below, above), -_INF)
    return sep, torch.where((below > above)[..., None], -u, u)


def box_triangle_separation(center, axes, half, v0, v1, v2):
    """SAT between an oriented box and a triangle, broadcast: (separation [...], normal [..., 3]):
    the candidate of `box_triangle_axes` with the largest separation (the first of equal ones)."""
    sep, axis = box_triangle_axes(center, axes, half, v0, v1, v2)
    best = torch.argmax(sep, dim=-1, keepdim=True)
    return sep.gather(-1, best)[..., 0], axis.gather(-2, best[..., None].expand(*best.shape[:-1], 1, 3))[
        ..., 0, :
    ]


def box_contacts_reference(
    mesh: ArenaMesh,
    centers: torch.Tensor,
    axes: torch.Tensor,
    half_extents: torch.Tensor,
    gap: float,
    max_contacts: int = 8,
) -> BoxContacts:
    """PyTorch reference of `box_contacts`."""
    n = centers.shape[0]
    half = half_extents.expand(n, 3)
    ids, valid = _cell_candidates(mesh, centers)
    v = mesh.tri_verts[ids]
    c, a, h = centers[:, None, :], axes[:, None], half[:, None, :]
    sep, normal = box_triangle_separation(c, a, h, v[..., 0, :], v[..., 1, :], v[..., 2, :])
    has = valid & (sep < gap)
    pn = mesh.plane_normals.expand(n, -1, -1)
    p_radius = (torch.einsum("nij,npi->npj", axes, pn).abs() * half[:, None, :]).sum(-1)
    p_sep = centers @ mesh.plane_normals.T - mesh.plane_offsets - p_radius
    p_has = p_sep < gap
    all_has = torch.cat((p_has, has), 1)
    all_sep = torch.cat((p_sep, sep), 1)
    all_normal = torch.cat((pn, normal), 1)
    plane_ids = mesh.num_triangles + torch.arange(mesh.num_planes, device=centers.device).expand(n, -1)
    all_feature = torch.cat((plane_ids, ids), 1)
    key = torch.where(all_has, all_sep, _INF)
    order = torch.sort(key, dim=1, stable=True).indices[:, :max_contacts]
    slot = all_has.gather(1, order)
    normal_k = all_normal.gather(1, order[..., None].expand(-1, -1, 3))
    point = _box_support(centers[:, None, :], axes[:, None], half[:, None, :], -normal_k)
    return BoxContacts(
        count=all_has.sum(1).to(torch.int32),
        normal=torch.where(slot[..., None], normal_k, 0.0),
        depth=torch.where(slot, all_sep.gather(1, order), 0.0),
        point=torch.where(slot[..., None], point, 0.0),
        feature=torch.where(slot, all_feature.gather(1, order), -1).to(torch.int32),
    )


def box_contacts(
    mesh: ArenaMesh,
    centers: torch.Tensor,
    axes: torch.Tensor,
    half_extents: torch.Tensor,
    gap: float,
    max_contacts: int = 8,
    use_kernels: bool | None = None,
) -> BoxContacts:
    """Contacts of oriented boxes with the arena (car bodies).

    ``centers`` [N, 3] UU, ``axes`` [N, 3, 3] with the box axes as columns (a rotation matrix),
    ``half_extents`` [3] or [N, 3] UU. The box's half diagonal plus ``gap`` must be within the grid's
    query radius. Returns the ``max_contacts`` deepest features whose separation is below ``gap``.
    """
    if _use_kernels(centers, use_kernels):
        from nitro.envs.soccar import kernels

        return kernels.box_contacts(mesh, centers, axes, half_extents, gap, max_contacts)
    return box_contacts_reference(mesh, centers, axes, half_extents, gap, max_contacts)
