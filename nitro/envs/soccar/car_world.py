"""Car bodies against the arena: RocketSim's car-world contacts and their sequential-impulse solve.

Reference: RocketSim (ZealanL/RocketSim, MIT) `Car::_BulletSetup`, `Arena::_BulletContactAddedCallback`
and `_BtCallback_OnCarWorldCollision`, `btRSBroadphase`, and the Bullet 3.24 it vendors ("ROCKETSIM
CHANGE" markers). The car body is a `btCompoundShape` holding one `btBoxShape` (the hitbox, moved by
the hitbox offset). Each tick, at the tick's starting transform, `collide_and_solve` runs for every car:

1. **Pairs** (`btRSBroadphase`): every tick the broadphase drops and re-adds every pair, so each
   manifold is new (nothing persists). A car pairs with a mesh file registered in its broadphase cell
   and with each plane; the pair keeps a manifold when the box's AABB meets the object's
   (`btCompoundCollisionAlgorithm` drops it otherwise). RocketSim gives its planes thin AABBs.
2. **Planes** (`btConvexPlaneCollisionAlgorithm`, no perturbation: RocketSim's threshold is 0): one
   point, the box corner deepest along the plane normal (margin included), within the threshold.
3. **Meshes** (`btConvexConcaveCollisionAlgorithm` -> `btConvexConvexAlgorithm` per triangle): the
   triangles whose AABB meets the box's, minus those the box is entirely to one side of (the early
   out), in the BVH's order; Bullet's GJK (and EPA where the shapes overlap) gives at most one point
   per triangle (`gjk_epa`).
4. **Manifolds** (`btManifoldResult::addContactPoint`, `btPersistentManifold`): points are filed in
   the order Bullet makes them (mesh files in load order, planes after), 4 per object, a fifth
   replacing the point `collide.sort_cached_points` picks by area on the car's side (m_localPointA,
   car frame). RocketSim's contact-added callback sets friction and restitution (0.3, 0.3), records
   the car's world contact (the last point's normal, before edge smoothing) and smooths normals at
   internal triangle edges (`btAdjustInternalEdgeContacts`, as for the ball). `refresh_contact_points`
   then recomputes every point from the car's transform and drops the ones beyond the threshold.
5. **Solve** (`btSequentialImpulseConstraintSolver`, RocketSim's settings): one normal row and one
   friction row per point, in the order of the island manager's quicksort of the manifolds;
   split-impulse penetration recovery (erp2 0.8) and 10 Gauss-Seidel iterations, no warm start.

Everything here runs in Bullet units (1 BT = 50 UU) and float32, with Bullet's operation order where
a tie can hinge on it (the manifold's area test, the planes, the refresh). Car state goes in and comes
out in UU. The velocity deltas and split-impulse motion go to `rigid_body.integrate`.
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
from nitro.envs.soccar import gjk_epa
from nitro.envs.soccar import rigid_body as rb
from nitro.envs.soccar.collide import MANIFOLD_POINTS, ContactManifolds, build_manifolds
from nitro.envs.soccar.gjk_epa import mat_vec, vec_mat
from nitro.envs.soccar.mesh import (
    PLANE_OBJECT_BASE,
    ArenaMesh,
    SphereContacts,
    _cell_candidates,
    adjust_internal_edge_contacts,
    bvh_quantization,
    cross,
    dot,
    eager_cpu_width,
    read_cmf,
)
from nitro.envs.soccar.mutators import MutatorConfig

_F32 = np.float32
UU_TO_BT = float(_F32(1.0) / _F32(50.0))  # RocketSim's UU_TO_BT, the float32 1.f / 50.f
CONVEX_DISTANCE_MARGIN = 0.04  # BT: btConvexInternalShape's default margin
SAFE_MARGIN_FACTOR = 0.1  # btBoxShape::setSafeMargin: margin <= 0.1 * the smallest half extent
CONTACT_BREAKING_THRESHOLD = float(_F32(0.02))  # gContactBreakingThreshold, BT
PLANE_AABB_HALF_THICKNESS = float(_F32(0.2))  # RocketSim's btStaticPlaneShape::getAabb slab, BT
CAR_MANIFOLD_SLOTS = 6  # arena objects a car touches at once (at most 2 planes, a few mesh files)
MAX_CAR_PAIRS = 64  # triangles per car that pass the AABB test and the early out
SIMD_SQRT12 = float(_F32(math.sqrt(0.5)))
# Where RocketSim puts its planes' bodies (Arena::_SetupArenaCollisionShapes), UU, with the normals of
# C.ARENA_PLANES: floor, ceiling, side wall x = -4096, side wall x = +4096.
PLANE_ORIGINS = (
    (0.0, 0.0, 0.0),
    (0.0, 0.0, C.ARENA_HEIGHT),
    (-C.ARENA_EXTENT_X, 0.0, C.ARENA_HEIGHT / 2),
    (C.ARENA_EXTENT_X, 0.0, C.ARENA_HEIGHT / 2),
)
# btRSBroadphase's grid (ArenaConfig defaults): minPos, maxPos and maxAABBLen, UU. The cell is
# maxAABBLen in ArenaMemWeightMode::HEAVY (RocketSim's default) and twice that in LIGHT.
BROADPHASE_MIN_POS = (-5600.0, -6000.0, 0.0)
BROADPHASE_MAX_POS = (5600.0, 6000.0, 2200.0)
BROADPHASE_MAX_AABB_LEN = 370.0
BROADPHASE_CELL_MULTIPLIER = {"heavy": 1.0, "light": 2.0}


# --- The car's collision shape --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CarHitbox:
    """Bullet's view of car hitboxes (`Car::_BulletSetup`), BT, one row per car [..., 3] / [...]."""

    inner: torch.Tensor
    """m_implicitShapeDimensions: half extents minus 0.04 BT (btBoxShape subtracts the default
    margin, then setSafeMargin lowers the margin without giving the difference back) [..., 3]."""
    margin: torch.Tensor
    """Collision margin, min(0.04, 0.1 * smallest half extent) [...]."""
    offset: torch.Tensor
    """The box's centre in the car frame (the compound's child transform) [..., 3]."""
    local_min: torch.Tensor
    """The compound's local AABB (the child box's, margin included) [..., 3]."""
    local_max: torch.Tensor
    threshold: torch.Tensor
    """Contact breaking threshold of every car-world manifold: the compound's angular motion disc
    (bounding sphere radius plus its centre's distance from the origin) times 0.02 [...]."""
    inv_inertia_local: torch.Tensor
    """1 / btBoxShape::calculateLocalInertia (mass 180) [..., 3]."""

    def flat(self, shape: torch.Size) -> CarHitbox:
        """The hitboxes broadcast to cars of batch ``shape`` and flattened: [B, 3] / [B]."""
        batch = self.margin.dim()

        def one(x: torch.Tensor) -> torch.Tensor:
            tail = x.shape[batch:]
            return x.expand(*shape, *tail).reshape(-1, *tail)

        return CarHitbox(**{f.name: one(getattr(self, f.name)) for f in dataclasses.fields(self)})


def car_hitbox(size: torch.Tensor, offset: torch.Tensor) -> CarHitbox:
    """The `CarHitbox` of hitboxes of ``size`` and ``offset`` [..., 3] (UU, `CarConfig`'s
    ``hitbox_size`` and ``hitbox_pos_offset``), in float32 as Bullet computes it."""
    size = torch.as_tensor(size, dtype=torch.float32)
    offset = torch.as_tensor(offset, dtype=torch.float32, device=size.device)
    half = (size * UU_TO_BT) / 2.0
    inner = half - CONVEX_DISTANCE_MARGIN
    margin = torch.clamp(SAFE_MARGIN_FACTOR * half.amin(-1), max=CONVEX_DISTANCE_MARGIN)
    offset_bt = offset * UU_TO_BT
    # btCompoundShape::recalculateLocalAabb (the child's getAabb), then getBoundingSphere at identity
    extent = inner + margin[..., None]
    local_min, local_max = offset_bt - extent, offset_bt + extent
    local_half, local_center = 0.5 * (local_max - local_min), 0.5 * (local_max + local_min)
    aabb_min, aabb_max = local_center - local_half, local_center + local_half
    diag = aabb_max - aabb_min
    center = (aabb_min + aabb_max) * 0.5
    disc = torch.sqrt(dot(diag, diag)) * 0.5 + torch.sqrt(dot(center, center))
    # btBoxShape::calculateLocalInertia (mass / 12 = 15 exactly), inverted in double by setMassProps
    lx, ly, lz = (2.0 * extent).unbind(-1)
    inertia = torch.stack((ly * ly + lz * lz, lx * lx + lz * lz, lx * lx + ly * ly), -1) * (
        C.CAR_MASS_BT / 12.0
    )
    return CarHitbox(
        inner=inner,
        margin=margin,
        offset=offset_bt,
        local_min=local_min,
        local_max=local_max,
        threshold=disc * CONTACT_BREAKING_THRESHOLD,
        inv_inertia_local=(1.0 / inertia.double()).float(),
    )


# --- The arena as Bullet holds it -----------------------------------------------------------------


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
    if mem_weight_mode not in BROADPHASE_CELL_MULTIPLIER:
        raise ValueError(
            f"mem_weight_mode must be one of {sorted(BROADPHASE_CELL_MULTIPLIER)}, got {mem_weight_mode!r}"
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
    cell_min = np.array(BROADPHASE_MIN_POS, _F32) * _F32(UU_TO_BT)
    cell_max = np.array(BROADPHASE_MAX_POS, _F32) * _F32(UU_TO_BT)
    cell_size = _F32(_F32(BROADPHASE_MAX_AABB_LEN) * _F32(UU_TO_BT)) * _F32(
        BROADPHASE_CELL_MULTIPLIER[mem_weight_mode]
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
    origins = np.array(PLANE_ORIGINS, _F32) * _F32(UU_TO_BT)
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
    big = _F32(gjk_epa.BT_LARGE_FLOAT)
    lo = np.full_like(origins, -big)
    hi = np.full_like(origins, big)
    for i, (n, o) in enumerate(zip(normals, origins)):
        axis = int(np.argmax(np.abs(n)))
        lo[i, axis] = o[axis] + (_F32(0) - _F32(PLANE_AABB_HALF_THICKNESS))
        hi[i, axis] = o[axis] + (_F32(0) + _F32(PLANE_AABB_HALF_THICKNESS))
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
    bp_min = mesh_min - _F32(CONTACT_BREAKING_THRESHOLD)
    bp_max = np.minimum(mesh_max + _F32(CONTACT_BREAKING_THRESHOLD), cell_max)
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
    origin = torch.tensor(arena.cell_min, dtype=point.dtype, device=point.device)
    scaled = (point - origin) * float(_F32(1.0) / _F32(arena.cell_size))
    dims = torch.tensor(arena.cell_dims, device=point.device)
    ijk = torch.minimum(torch.trunc(scaled).to(torch.int64).clamp(min=0), dims - 1)
    return (ijk[..., 0] * arena.cell_dims[1] + ijk[..., 1]) * arena.cell_dims[2] + ijk[..., 2]


# --- Transforms and AABBs -------------------------------------------------------------------------


def transform_aabb(basis: torch.Tensor, center: torch.Tensor, extent: torch.Tensor):
    """btTransformAabb: the AABB of a box of half ``extent`` [B, 3] (margin included) around
    ``center`` with axes ``basis``: (min, max) [B, 3]."""
    reach = torch.stack([dot(extent, basis[..., i, :].abs()) for i in range(3)], -1)
    return center - reach, center + reach


def compound_aabb(basis: torch.Tensor, origin: torch.Tensor, hitbox: CarHitbox):
    """btCompoundShape::getAabb at the car's transform (its margin is 0): (min, max) [B, 3]."""
    local_half = 0.5 * (hitbox.local_max - hitbox.local_min)
    local_center = 0.5 * (hitbox.local_max + hitbox.local_min)
    return transform_aabb(basis, mat_vec(basis, local_center) + origin, local_half)


def aabbs_overlap(a_min, a_max, b_min, b_max) -> torch.Tensor:
    """TestAabbAgainstAabb2 over [..., 3] boxes: [...] bool."""
    return ~((a_min > b_max) | (a_max < b_min)).any(-1)


# --- Contacts -------------------------------------------------------------------------------------


@dataclasses.dataclass
class CarWorldContacts:
    """One tick's car-world contacts of B car bodies, in Bullet units.

    The manifolds hold m_localPointA (the point on the car, car frame) in ``offset``, the refreshed
    m_positionWorldOnB in ``point`` and m_distance1 in ``depth``, the (edge-smoothed) normal from the
    arena into the car in ``normal``.
    """

    manifolds: ContactManifolds
    """Per arena object touched, up to 4 points [B, S, ...]."""
    pair_count: torch.Tensor
    """How many manifolds the car has, empty ones included (its pairs that keep one) [B] int64."""
    pair_position: torch.Tensor
    """Each slot's manifold's place among them, in the dispatcher's order (mesh files in load order,
    then the planes) [B, S] int64; -1 for a free slot."""
    has_contact: torch.Tensor
    """The contact-added callback ran for this car (worldContact.hasContact) [B] bool."""
    contact_normal: torch.Tensor
    """The last added point's normal, before edge smoothing (worldContact.contactNormal) [B, 3]."""


def plane_contacts(basis: torch.Tensor, origin: torch.Tensor, hitbox: CarHitbox, arena: ArenaBullet):
    """btConvexPlaneCollisionAlgorithm::collideSingleContact of the box with each plane.

    Returns (has [B, 4], point on the plane [B, 4, 3], distance [B, 4]); the normal is the plane's.
    """
    n = arena.plane_normals  # [4, 3]
    o = arena.plane_origins
    extent = (hitbox.inner + hitbox.margin[:, None])[:, None, :]  # localGetSupportingVertex: with margin
    local_dir = vec_mat(-n, basis[:, None])  # planeInConvex.getBasis() * -planeNormal
    vertex = torch.where(local_dir >= 0, extent, -extent)
    in_plane = mat_vec(basis[:, None], vertex) + (origin[:, None, :] - o)  # convexInPlaneTrans(vtx)
    distance = dot(n, in_plane) - 0.0
    point = (in_plane - distance[..., None] * n) + o
    return distance < hitbox.threshold[:, None], point, distance


def triangle_candidates(
    mesh: ArenaMesh, arena: ArenaBullet, pos_bt, basis, origin, hitbox: CarHitbox, box_min, box_max
):
    """The triangles Bullet hands to GJK for each car, in BVH order: of mesh files whose AABB meets
    the box's, those whose AABB meets it (TestTriangleAgainstAabb2) and that the box is not
    entirely to one side of beyond the threshold (btConvexTriangleCallback::processTriangle's early
    out). Returns (ids [B, K], valid [B, K]), compacted to the front."""
    ids, valid = _cell_candidates(mesh, pos_bt * C.BT_TO_UU)
    tri = arena.tri[ids]  # [B, K, 3, 3]
    file = mesh.tri_mesh[ids].to(torch.int64)
    file_hit = aabbs_overlap(box_min[:, None], box_max[:, None], arena.mesh_min, arena.mesh_max)
    valid = valid & file_hit.gather(1, file)
    valid = valid & aabbs_overlap(tri.amin(2), tri.amax(2), box_min[:, None], box_max[:, None])
    v0, v1, v2 = tri.unbind(2)
    normal = cross(v1 - v0, v2 - v0)
    normal = normal * (1.0 / torch.sqrt(dot(normal, normal)))[..., None]
    extent = (hitbox.inner + hitbox.margin[:, None])[:, None, :]
    inverse = rb.mat_inverse(basis)[:, None]
    for side in (1.0, -1.0):
        side_n = normal * side
        local = mat_vec(inverse, side_n)  # getBasis().inverse() * normal
        point = mat_vec(basis[:, None], torch.where(local >= 0, extent, -extent)) + origin[:, None]
        valid = valid & ~((dot(side_n, v0) - dot(side_n, point)) > hitbox.threshold[:, None])
    width = eager_cpu_width(valid.sum(1), min(MAX_CAR_PAIRS, valid.shape[1]))
    order = torch.sort((~valid).to(torch.int8), dim=1, stable=True).indices[:, :width]
    return ids.gather(1, order), valid.gather(1, order)


def mesh_contacts(arena: ArenaBullet, ids, valid, basis, origin, hitbox: CarHitbox):
    """btConvexConvexAlgorithm per candidate triangle: GJK (EPA where the shapes overlap) and
    addContactPoint's threshold test. Returns (found [B, K], normal [B, K, 3] from the triangle into
    the car, point on the triangle [B, K, 3], distance [B, K]). Eager CPU runs only the valid pairs."""
    b, k = ids.shape
    lanes = valid.reshape(-1)
    pick = lanes.nonzero()[:, 0] if _eager_cpu(lanes) else torch.arange(b * k, device=lanes.device)  # sync-ok
    car = torch.div(pick, k, rounding_mode="floor")
    found = torch.zeros(b * k, dtype=torch.bool, device=lanes.device)
    normal = torch.zeros(b * k, 3, device=lanes.device)
    point, distance = torch.zeros_like(normal), torch.zeros(b * k, device=lanes.device)
    if pick.numel():
        grown = hitbox.margin + hitbox.threshold
        hit = gjk_epa.gjk_closest_points(
            basis[car],
            origin[car],
            hitbox.inner[car],
            hitbox.margin[car],
            arena.tri[ids.reshape(-1)[pick]],
            (grown * grown)[car],
        )
        found[pick] = lanes[pick] & hit.found & (hit.distance <= hitbox.threshold[car])
        normal[pick], point[pick], distance[pick] = hit.normal, hit.point_on_b, hit.distance
    return found.reshape(b, k), normal.reshape(b, k, 3), point.reshape(b, k, 3), distance.reshape(b, k)


def _eager_cpu(x: torch.Tensor) -> bool:
    """Eager CPU runs may size work to the data (no device to synchronise, nothing compiled)."""
    return x.device.type == "cpu" and not torch.compiler.is_compiling()


def _gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x [B, K, ...] gathered along dim 1 by index [B, J]."""
    return x.gather(1, index.reshape(*index.shape, *([1] * (x.dim() - 2))).expand(*index.shape, *x.shape[2:]))


def world_contacts(
    mesh: ArenaMesh, arena: ArenaBullet, pos_bt, rot, vel_bt, ang_vel, hitbox: CarHitbox, dt: float
):
    """The contact manifolds of B car bodies with the arena at the tick's starting transform, BT.

    ``pos_bt`` [B, 3], ``rot`` [B, 3, 3] (columns forward, right, up), ``vel_bt`` / ``ang_vel`` [B, 3]
    (the velocities Bullet predicts the broadphase AABB with), ``hitbox`` flattened [B].
    """
    b = pos_bt.shape[0]
    device = pos_bt.device
    basis = rot  # the child's basis: the car's times the child's identity (exact)
    origin = mat_vec(rot, hitbox.offset) + pos_bt  # btTransform * child transform
    extent = hitbox.inner + hitbox.margin[:, None]
    box_min, box_max = transform_aabb(basis, origin, extent)

    # Pairs: registered in the car's broadphase cell (its AABB with the predicted one, grown by 0.02)
    now_min, now_max = compound_aabb(rot, pos_bt, hitbox)
    pred_pos, pred_rot = rb.integrate_transform(pos_bt, rot, vel_bt, ang_vel, dt)
    pred_min, pred_max = compound_aabb(pred_rot, pred_pos, hitbox)
    bp_min = torch.minimum(now_min - CONTACT_BREAKING_THRESHOLD, pred_min - CONTACT_BREAKING_THRESHOLD)
    registered = arena.cell_meshes[broadphase_cell(arena, bp_min)]  # [B] bitmask by load rank
    by_rank = ((registered[:, None] >> torch.arange(C.SOCCAR_MESH_COUNT, device=device)) & 1) == 1
    mesh_pair = by_rank.gather(1, arena.load_rank.expand(b, -1))  # [B, M] by file
    mesh_kept = mesh_pair & aabbs_overlap(box_min[:, None], box_max[:, None], arena.mesh_min, arena.mesh_max)
    plane_kept = aabbs_overlap(box_min[:, None], box_max[:, None], arena.plane_min, arena.plane_max)

    # Meshes: GJK per candidate triangle, in BVH order per file, files in load order
    ids, valid = triangle_candidates(mesh, arena, pos_bt, basis, origin, hitbox, box_min, box_max)
    file = mesh.tri_mesh[ids].to(torch.int64)
    valid = valid & mesh_kept.gather(1, file)
    found, m_normal, m_point, m_depth = mesh_contacts(arena, ids, valid, basis, origin, hitbox)
    # btAdjustInternalEdgeContacts (RocketSim's callback, after the point is filed)
    v = mesh.tri_verts[ids]
    smoothed, changed = adjust_internal_edge_contacts(
        m_normal,
        m_point * C.BT_TO_UU,
        v[..., 0, :],
        v[..., 1, :],
        v[..., 2, :],
        mesh.tri_normals[ids],
        mesh.edge_angle[ids],
        mesh.edge_flags[ids],
    )
    m_point_a = m_point + m_normal * m_depth[..., None]
    m_point = torch.where(changed[..., None], m_point_a - smoothed * m_depth[..., None], m_point)
    rank = arena.load_rank[file]
    key = torch.where(found, rank * (1 << 16) + (mesh.tri_order[ids].to(torch.int64) & 0xFFFF), 1 << 30)
    order = torch.sort(key, dim=1, stable=True).indices

    # Planes, after every mesh file
    p_has, p_point, p_depth = plane_contacts(basis, origin, hitbox, arena)
    p_has = p_has & plane_kept
    p_normal = arena.plane_normals.expand(b, -1, -1)
    p_point_a = p_point + p_normal * p_depth[..., None]

    has = torch.cat((_gather(found, order), p_has), 1)
    objects = torch.cat(
        (_gather(rank, order), PLANE_OBJECT_BASE + torch.arange(4, device=device).expand(b, -1)), 1
    )
    raw_normal = torch.cat((_gather(m_normal, order), p_normal), 1)
    normal = torch.cat((_gather(smoothed, order), p_normal), 1)
    point = torch.cat((_gather(m_point, order), p_point), 1)
    point_a = torch.cat((_gather(m_point_a, order), p_point_a), 1)
    depth = torch.cat((_gather(m_depth, order), p_depth), 1)
    local_a = vec_mat(point_a - pos_bt[:, None], rot[:, None])  # the car's invXform(pointA)
    compact = torch.sort((~has).to(torch.int8), dim=1, stable=True).indices
    count = has.sum(1)
    held = _gather(has, compact)
    contacts = SphereContacts(
        count=count.to(torch.int32),
        object=torch.where(held, _gather(objects, compact), -1).to(torch.int32),
        feature=torch.zeros_like(held, dtype=torch.int32),
        normal=_gather(normal, compact),
        point=_gather(point, compact),
        offset=_gather(local_a, compact),
        depth=_gather(depth, compact),
    )
    manifolds = refresh_contact_points(
        build_manifolds(contacts, slots=CAR_MANIFOLD_SLOTS), pos_bt, rot, hitbox.threshold, arena
    )
    last = _gather(_gather(raw_normal, compact), (count - 1).clamp(min=0)[:, None])[:, 0]
    return CarWorldContacts(
        manifolds=manifolds,
        **pair_positions(manifolds.object, mesh_kept, plane_kept, arena),
        has_contact=count > 0,
        contact_normal=torch.where((count > 0)[:, None], last, 0.0),
    )


def refresh_contact_points(
    m: ContactManifolds, pos_bt, rot, threshold, arena: ArenaBullet
) -> ContactManifolds:
    """btPersistentManifold::refreshContactPoints at the car's transform: every point's world
    positions and distance recomputed (trA(m_localPointA), trB(m_localPointB)); points farther than
    the threshold along the normal, or drifted sideways beyond it, are removed, from the last point
    down, the last point moving into the gap (removeContactPoint)."""
    held = m.held()
    plane = (m.object.to(torch.int64) - PLANE_OBJECT_BASE).clamp(0, len(C.ARENA_PLANES) - 1)
    obj_origin = torch.where((m.object >= PLANE_OBJECT_BASE)[..., None], arena.plane_origins[plane], 0.0)[
        :, :, None
    ]
    point_a = mat_vec(rot[:, None, None], m.offset) + pos_bt[:, None, None]
    point_b = (m.point - obj_origin) + obj_origin
    depth = dot(point_a - point_b, m.normal)
    drift = point_b - (point_a - m.normal * depth[..., None])
    limit = threshold[:, None, None]
    gone = held & ((depth > limit) | (dot(drift, drift) > limit * limit))
    packed = torch.cat((m.offset, point_b, m.normal, depth[..., None]), -1)  # [B, S, 4, 10]
    count = m.count
    for i in reversed(range(MANIFOLD_POINTS)):
        last = (count - 1).clamp(min=0).to(torch.int64)
        moved = packed.gather(2, last[..., None, None].expand(*last.shape, 1, packed.shape[-1]))
        at_i = gone[..., i, None, None] & (torch.arange(MANIFOLD_POINTS, device=count.device) == i)[:, None]
        packed = torch.where(at_i, moved, packed)
        count = torch.where(gone[..., i], count - 1, count)
    offset, point, normal, depth = packed.split((3, 3, 3, 1), -1)
    return ContactManifolds(
        object=m.object, count=count, offset=offset, point=point, normal=normal, depth=depth[..., 0]
    )


# --- The island manager's order -------------------------------------------------------------------


def quicksort_order(keys: list[int]) -> list[int]:
    """btAlignedObjectArray::quickSort of ``keys`` (btPersistentManifoldSortPredicate, key <): which
    original element ends up at each position. (Reference for `island_positions`.)"""
    items = list(range(len(keys)))

    def sort(lo: int, hi: int) -> None:
        i, j = lo, hi
        pivot = keys[items[(lo + hi) // 2]]
        while True:
            while keys[items[i]] < pivot:
                i += 1
            while pivot < keys[items[j]]:
                j -= 1
            if i <= j:
                items[i], items[j] = items[j], items[i]
                i, j = i + 1, j - 1
            if i > j:
                break
        if lo < j:
            sort(lo, j)
        if i < hi:
            sort(i, hi)

    if len(keys) > 1:
        sort(0, len(keys) - 1)
    return items


MAX_BODY_MANIFOLDS = C.SOCCAR_MESH_COUNT + len(C.ARENA_PLANES)  # a body pairs with each arena object once
ISLAND_SORT_STEPS = 16  # partitions an element goes through: at most 10 in 30,000 random worlds of 7 bodies


def pair_positions(objects: torch.Tensor, mesh_kept: torch.Tensor, plane_kept: torch.Tensor, arena: ArenaBullet):
    """The car's manifolds as the dispatcher lists them: one per kept pair, mesh files in load order,
    then the planes. Returns `CarWorldContacts`' pair_count [B] and pair_position [B, S]."""
    b = objects.shape[0]
    by_rank = torch.zeros_like(mesh_kept).scatter(1, arena.load_rank.expand(b, -1), mesh_kept).to(torch.int64)
    meshes_before = torch.cumsum(by_rank, 1) - by_rank  # [B, M] by load rank
    planes = plane_kept.to(torch.int64)
    planes_before = torch.cumsum(planes, 1) - planes
    obj = objects.to(torch.int64)
    position = torch.where(
        obj >= PLANE_OBJECT_BASE,
        by_rank.sum(1, keepdim=True) + planes_before.gather(1, (obj - PLANE_OBJECT_BASE).clamp(0, 3)),
        meshes_before.gather(1, obj.clamp(0, C.SOCCAR_MESH_COUNT - 1)),
    )
    return {"pair_count": by_rank.sum(1) + planes.sum(1), "pair_position": torch.where(obj >= 0, position, -1)}


def island_positions(counts: torch.Tensor) -> torch.Tensor:
    """Where the island manager's quicksort puts every manifold of an env's bodies [N, B, 20] int64.

    ``counts`` [N, B]: manifolds per body in the dispatcher's order (the ball's pairs, then each
    car's), each body its own island, so the keys come in ascending blocks. On such input every
    partition of btAlignedObjectArray::quickSort swaps the block holding the pivot end to end and
    splits the range at that block's middle: each element's path follows from the block bounds
    alone, step by step (checked against `quicksort_order`).
    """
    n, blocks = counts.shape
    device = counts.device
    bounds = torch.cat((torch.zeros(n, 1, dtype=torch.int64, device=device), torch.cumsum(counts, 1)), 1)  # [N, B+1]
    element = torch.arange(MAX_BODY_MANIFOLDS, device=device)
    q = bounds[:, :-1, None] + element  # [N, B, 20]
    lo = torch.zeros_like(q)
    hi = (bounds[:, -1, None, None] - 1).expand_as(q).clone()
    running = (element < counts[..., None]) & (lo < hi)
    for _ in range(ISLAND_SORT_STEPS):
        if _eager_cpu(running) and not bool(running.any()):  # sync-ok: eager CPU only
            break
        mid = torch.div(lo + hi, 2, rounding_mode="floor")
        # the block holding mid (the last block starting at or before it)
        block = ((bounds[:, None, None, :-1] <= mid[..., None]).sum(-1) - 1).clamp(0, blocks - 1)
        start = bounds.gather(1, block.reshape(n, -1)).reshape(block.shape)
        end = bounds.gather(1, (block + 1).reshape(n, -1)).reshape(block.shape) - 1
        a, b = torch.maximum(start, lo), torch.minimum(end, hi)
        q = torch.where(running & (a <= q) & (q <= b), a + b - q, q)  # the pivot block, reversed
        length = b - a + 1
        j = torch.where(length % 2 == 0, a + length // 2 - 1, a + (length - 1) // 2 - 1)
        i = torch.where(length % 2 == 0, j + 1, j + 2)
        left, right = q <= j, q >= i
        hi = torch.where(running & left, j, hi)
        lo = torch.where(running & right, i, lo)
        running = running & (left | right) & (lo < hi)
    return q


def solve_order(contacts: CarWorldContacts, ball_manifolds: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """The order the solver visits each car's manifold slots [B, S] int64 (free slots last).

    The island manager gathers every manifold of the world in the dispatcher's order (the ball's,
    then each car's, empty ones included) and quicksorts them by island (`island_positions`); the
    sequential-impulse solver then visits them in that order. ``ball_manifolds`` [N]: the ball's
    manifold count (`ball_manifold_count`); ``shape`` (N, C): the cars' batch shape. Bodies are
    separate islands: cars and the ball whose broadphase boxes overlap (car-ball and car-car
    contacts) share one, which comes with those contacts.
    """
    n, c = shape
    counts = torch.cat((ball_manifolds.reshape(n, 1), contacts.pair_count.reshape(n, c)), 1)
    sorted_at = island_positions(counts)[:, 1:].reshape(n * c, MAX_BODY_MANIFOLDS)  # [B, 20]
    position = contacts.pair_position
    key = torch.where(position >= 0, sorted_at.gather(1, position.clamp(min=0)), 1 << 20)
    return torch.sort(key, dim=1, stable=True).indices


def ball_manifold_count(arena: ArenaBullet, pos: torch.Tensor, vel: torch.Tensor, sleeping: torch.Tensor, radius: float, dt: float) -> torch.Tensor:
    """The ball's manifolds [N] int64: one per pair with an arena object, which its broadphase box
    (the sphere's, 0.08 BT wider in RocketSim, grown by 0.02 and stretched to the predicted
    position) overlaps: the planes, and the mesh files registered in its cell. A sleeping ball
    collides with nothing. ``pos`` / ``vel`` (damped) [N, 3] UU."""
    center = pos * UU_TO_BT
    extent = float(_F32(_F32(radius) * _F32(UU_TO_BT)) + _F32(0.08))
    predicted = center + (vel * UU_TO_BT) * dt
    bp_min = torch.minimum(center - extent, predicted - extent) - CONTACT_BREAKING_THRESHOLD
    bp_max = torch.maximum(center + extent, predicted + extent) + CONTACT_BREAKING_THRESHOLD
    registered = arena.cell_meshes[broadphase_cell(arena, bp_min)]
    by_rank = ((registered[:, None] >> torch.arange(C.SOCCAR_MESH_COUNT, device=pos.device)) & 1) == 1
    mesh_pair = by_rank.gather(1, arena.load_rank.expand(pos.shape[0], -1))
    t = CONTACT_BREAKING_THRESHOLD
    meshes = mesh_pair & aabbs_overlap(bp_min[:, None], bp_max[:, None], arena.mesh_min - t, arena.mesh_max + t)
    planes = aabbs_overlap(bp_min[:, None], bp_max[:, None], arena.plane_min - t, arena.plane_max + t)
    return torch.where(sleeping, 0, meshes.sum(1) + planes.sum(1))


# --- The sequential-impulse solve -----------------------------------------------------------------


def simd_dot3(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """btSimdDot3 of the SSE2 solver rows: x + (y + z)."""
    return a[..., 0] * b[..., 0] + (a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2])


def plane_space(n: torch.Tensor) -> torch.Tensor:
    """btPlaneSpace1's first tangent of ``n`` [..., 3]."""
    nx, ny, nz = n.unbind(-1)
    use_yz = nz.abs() > SIMD_SQRT12
    k_yz = 1.0 / torch.sqrt(torch.where(use_yz, ny * ny + nz * nz, 1))
    k_xy = 1.0 / torch.sqrt(torch.where(use_yz, 1, nx * nx + ny * ny))
    zero = torch.zeros_like(nx)
    yz = torch.stack((zero, -nz * k_yz, ny * k_yz), -1)
    xy = torch.stack((-ny * k_xy, nx * k_xy, zero), -1)
    return torch.where(use_yz[..., None], yz, xy)


@dataclasses.dataclass
class SolverRows:
    """One contact's normal or friction row (btSolverConstraint), [B, R] / [B, R, 3] per car."""

    normal: torch.Tensor
    """m_contactNormal1 [B, R, 3]."""
    torque: torch.Tensor
    """m_relpos1CrossNormal [B, R, 3]."""
    angular: torch.Tensor
    """m_angularComponentA: the inverse world inertia times the torque axis [B, R, 3]."""
    jac: torch.Tensor
    """m_jacDiagABInv [B, R]."""
    rhs: torch.Tensor
    """m_rhs [B, R]."""


def contact_rows(rel_pos, normal, inv_inertia, inv_mass: float) -> tuple[torch.Tensor, ...]:
    """The Jacobian part of setupContactConstraint / setupFrictionConstraint: (torque axis, angular
    component, 1 / effective mass)."""
    torque = cross(rel_pos, normal)
    angular = mat_vec(inv_inertia[:, None], torque)
    jac = 1.0 / (inv_mass + dot(normal, cross(angular, rel_pos)))
    return torque, angular, jac


def resolve_row_lower_limit(delta_v, delta_w, row: SolverRows, k: int, applied, inv_mass: float, active):
    """gResolveSingleConstraintRowLowerLimit_sse2 for row ``k`` (lower limit 0). Returns the new
    (delta_v, delta_w, applied)."""
    delta = (
        row.rhs[:, k]
        - (simd_dot3(row.normal[:, k], delta_v) + simd_dot3(row.torque[:, k], delta_w)) * row.jac[:, k]
    )
    total = applied[:, k] + delta
    below = total < 0
    delta = torch.where(active, torch.where(below, 0.0 - applied[:, k], delta), 0.0)
    applied = applied.clone()
    applied[:, k] = torch.where(active, torch.where(below, 0.0, total), applied[:, k])
    delta_v = delta_v + (row.normal[:, k] * inv_mass) * delta[:, None]
    delta_w = delta_w + row.angular[:, k] * delta[:, None]
    return delta_v, delta_w, applied


def solve_world_contacts(
    contacts: CarWorldContacts,
    order: torch.Tensor,
    pos_bt,
    rot,
    vel_bt,
    ang_vel,
    ext_v,
    ext_w,
    hitbox: CarHitbox,
    dt: float,
    mutators: MutatorConfig,
):
    """Bullet's sequential-impulse solve of B cars' arena contacts (RocketSim's solver settings), BT.

    ``order`` [B, S]: the manifold slots in solver order (`solve_order`); ``vel_bt`` / ``ang_vel``
    [B, 3]: the velocities entering Bullet's step; ``ext_v`` / ``ext_w``: what
    this tick's forces and torques add (btSolverBody's m_externalForceImpulse / TorqueImpulse).
    Returns (dv, dw, push, turn) [B, 3]: the solver's velocity deltas and its split-impulse push and
    turn velocities (turn not yet scaled by m_splitImpulseTurnErp). Zero where a car touches nothing.
    """
    b = pos_bt.shape[0]
    inv_mass = float(_F32(1.0) / _F32(C.CAR_MASS_BT))
    inv_inertia = rb.inv_inertia_world(rot, hitbox.inv_inertia_local)
    m = contacts.manifolds
    # rows in solver order: manifolds as the island manager sorts them, points in manifold order
    slot = order
    held = _gather(m.held(), slot).reshape(b, -1)
    take = lambda x: _gather(x, slot).reshape(b, -1, *x.shape[3:])
    zero = torch.zeros_like(vel_bt)
    if _eager_cpu(held) and not bool(held.any()):  # sync-ok: eager CPU only; no car touches anything
        return zero, zero, zero, zero
    width = eager_cpu_width(held.sum(1), held.shape[1])
    rows = torch.sort((~held).to(torch.int8), dim=1, stable=True).indices[:, :width]
    active = held.gather(1, rows)
    normal, local_a, depth = (
        _gather(take(m.normal), rows),
        _gather(take(m.offset), rows),
        _gather(take(m.depth), rows),
    )
    # padding rows get a harmless unit normal: their zero impulses then add exact zeros, never NaN
    normal = torch.where(active[..., None], normal, torch.tensor((0.0, 0.0, 1.0), device=normal.device))
    rel_pos = (mat_vec(rot[:, None], local_a) + pos_bt[:, None]) - pos_bt[:, None]
    vel_ext, ang_ext = vel_bt + ext_v, ang_vel + ext_w
    # setupContactConstraint (relaxation 1, cfm 0, linear slop 0)
    torque, angular, jac = contact_rows(rel_pos, normal, inv_inertia, inv_mass)
    approach = dot(normal, vel_bt[:, None] + cross(ang_vel[:, None].expand_as(rel_pos), rel_pos))
    restitution = torch.where(
        approach.abs() < C.SOLVER_RESTITUTION_VELOCITY_THRESHOLD * UU_TO_BT,
        0.0,
        mutators.car_world_restitution * -approach,
    ).clamp(min=0.0)
    rel_vel = dot(normal, vel_ext[:, None]) + dot(torque, ang_ext[:, None])
    rhs = (restitution - rel_vel) * jac
    inv_dt = float(_F32(1.0) / _F32(dt))
    rhs_push = torch.where(depth > 0, 0.0, ((-depth) * float(_F32(C.SOLVER_ERP2))) * inv_dt) * jac
    normal_rows = SolverRows(normal=normal, torque=torque, angular=angular, jac=jac, rhs=rhs)
    push_rows = dataclasses.replace(normal_rows, rhs=rhs_push)
    # convertContactInner: one friction row along the sliding velocity (else btPlaneSpace1)
    vel_at = vel_ext[:, None] + cross(ang_ext[:, None].expand_as(rel_pos), rel_pos)
    lateral = vel_at - normal * dot(normal, vel_at)[..., None]
    lateral2 = dot(lateral, lateral)
    sliding = lateral2 > gjk_epa.SIMD_EPSILON
    tangent = torch.where(
        sliding[..., None],
        lateral * (1.0 / torch.sqrt(torch.where(sliding, lateral2, 1.0)))[..., None],
        plane_space(normal),
    )
    f_torque, f_angular, f_jac = contact_rows(rel_pos, tangent, inv_inertia, inv_mass)
    f_rhs = (0.0 - (dot(tangent, vel_ext[:, None]) + dot(f_torque, ang_vel[:, None]))) * f_jac
    friction_rows = SolverRows(normal=tangent, torque=f_torque, angular=f_angular, jac=f_jac, rhs=f_rhs)
    friction = mutators.car_world_friction
    count = normal.shape[1]

    # solveGroupCacheFriendlySplitImpulseIterations: rows without a penetration term are skipped
    push, turn = torch.zeros_like(vel_bt), torch.zeros_like(ang_vel)
    applied_push = torch.zeros_like(depth)
    pushing = active & (rhs_push != 0)
    for _ in range(C.SOLVER_NUM_ITERATIONS):
        for k in range(count):
            push, turn, applied_push = resolve_row_lower_limit(
                push, turn, push_rows, k, applied_push, inv_mass, pushing[:, k]
            )
    # solveSingleIteration: every normal row, then every friction row (while its normal impulse > 0)
    dv, dw = torch.zeros_like(vel_bt), torch.zeros_like(ang_vel)
    applied = torch.zeros_like(depth)
    applied_friction = torch.zeros_like(depth)
    for _ in range(C.SOLVER_NUM_ITERATIONS):
        for k in range(count):
            dv, dw, applied = resolve_row_lower_limit(dv, dw, normal_rows, k, applied, inv_mass, active[:, k])
        for k in range(count):  # gResolveSingleConstraintRowGeneric_sse2
            limit = friction * applied[:, k]
            delta = (
                friction_rows.rhs[:, k]
                - (simd_dot3(tangent[:, k], dv) + simd_dot3(f_torque[:, k], dw)) * f_jac[:, k]
            )
            old = applied_friction[:, k]
            total = old + delta
            below, under = total < -limit, total < limit
            delta = torch.where(below, -limit - old, delta)
            new = torch.where(below, -limit, total)
            delta = torch.where(under, delta, limit - old)
            new = torch.where(under, new, limit)
            solving = active[:, k] & (applied[:, k] > 0)
            delta = torch.where(solving, delta, 0.0)
            applied_friction = applied_friction.clone()
            applied_friction[:, k] = torch.where(solving, new, old)
            dv = dv + (tangent[:, k] * inv_mass) * delta[:, None]
            dw = dw + f_angular[:, k] * delta[:, None]
    return dv, dw, push, turn


# --- The stage the car tick calls -----------------------------------------------------------------


@dataclasses.dataclass
class CarWorldResult:
    """What Bullet's step does to B car bodies through their arena contacts (UU, rad/s) [..., 3]."""

    dv: torch.Tensor
    """Velocity delta of the contact solve (btSolverBody::m_deltaLinearVelocity), UU/s."""
    dw: torch.Tensor
    """Angular velocity delta, rad/s."""
    push_v: torch.Tensor
    """Split-impulse push velocity (m_pushVelocity), UU/s: moves the transform only."""
    push_w: torch.Tensor
    """Split-impulse turn velocity (m_turnVelocity, before the 0.1 turn erp), rad/s."""
    has_contact: torch.Tensor
    """The car body touched the arena (worldContact.hasContact) [...] bool."""
    contact_normal: torch.Tensor
    """The normal of the last contact added (worldContact.contactNormal), zero without one."""


def collide_and_solve(
    mesh: ArenaMesh,
    arena: ArenaBullet,
    pos: torch.Tensor,
    rot_mat: torch.Tensor,
    vel: torch.Tensor,
    ang_vel: torch.Tensor,
    ext_v: torch.Tensor,
    ext_w: torch.Tensor,
    hitbox: CarHitbox,
    ball_manifolds: torch.Tensor,
    dt: float,
    mutators: MutatorConfig,
) -> CarWorldResult:
    """The car bodies' part of Bullet's step: arena contacts at the tick's starting transform and
    their sequential-impulse solve.

    ``pos`` [N, C, 3] UU, ``rot_mat`` [N, C, 3, 3], ``vel`` UU/s and ``ang_vel`` rad/s (after the
    pre-tick's impulses), ``ext_v`` / ``ext_w``: this tick's forces and torques as velocity changes
    (`rigid_body.external_impulses`); ``hitbox`` broadcasts against the cars; ``ball_manifolds`` [N]:
    the ball's manifold count (`ball_manifold_count`), which shifts the solver's order.
    """
    shape = pos.shape[:-1]
    flat = lambda x: x.reshape(-1, 3)
    boxes = hitbox.flat(shape)
    pos_bt, vel_bt = flat(pos) * UU_TO_BT, flat(vel) * UU_TO_BT
    rot = rot_mat.reshape(-1, 3, 3)
    w = flat(ang_vel)
    contacts = world_contacts(mesh, arena, pos_bt, rot, vel_bt, w, boxes, dt)
    order = solve_order(contacts, ball_manifolds, shape)
    dv, dw, push, turn = solve_world_contacts(
        contacts, order, pos_bt, rot, vel_bt, w, flat(ext_v) * UU_TO_BT, flat(ext_w), boxes, dt, mutators
    )
    back = lambda x: x.reshape(*shape, 3)
    return CarWorldResult(
        dv=back(dv * C.BT_TO_UU),
        dw=back(dw),
        push_v=back(push * C.BT_TO_UU),
        push_w=back(turn),
        has_contact=contacts.has_contact.reshape(shape),
        contact_normal=back(contacts.contact_normal),
    )
