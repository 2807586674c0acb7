"""Car bodies against the arena: RocketSim's car-world contacts and their sequential-impulse solve.

Reference: RocketSim (ZealanL/RocketSim, MIT) `Car::_BulletSetup`, `Arena::_BulletContactAddedCallback`
and `_BtCallback_OnCarWorldCollision`, and the Bullet 3.24 it vendors ("ROCKETSIM CHANGE" markers).
The car body is a `btCompoundShape` holding one `btBoxShape` (the hitbox, moved by the hitbox offset).
Per tick, for each car, at the tick's starting transform:

1. **Planes** (`btConvexPlaneCollisionAlgorithm`; RocketSim sets no perturbation): one point per
   plane, the box corner deepest along the plane normal (the box *with* its margin, sharp corners),
   when it is within the contact breaking threshold.
2. **Meshes** (`btCompoundCollisionAlgorithm` -> `btConvexConcaveCollisionAlgorithm` ->
   `btConvexConvexAlgorithm` per triangle): a mesh file takes part when the box's AABB meets the
   file's AABB; a triangle when its AABB meets the box's AABB and the box reaches its plane within
   the threshold from either side; then Bullet's GJK (and its EPA where the shapes overlap) gives at
   most one point per triangle (`gjk_epa`). RocketSim's contact-added callback smooths the normals of
   internal triangle edges for cars too (`btAdjustInternalEdgeContacts`, as for the ball).
3. **Manifolds**: one 4-point manifold per arena object, filled in Bullet's order (mesh files in the
   order RocketSim loaded them, each in its BVH order, then the planes); RocketSim's broadphase
   re-adds every pair each tick, so manifolds start empty and points are never merged
   (`collide.build_manifolds`). The contact-added callback sets friction 0.3 and restitution 0.3
   (`carWorldFriction` / `carWorldRestitution`) and records the car's world contact (any point, and
   the last point's normal before the edge smoothing) for the next tick's auto-flip and auto-roll.
4. **Solve** (`btSequentialImpulseConstraintSolver`, RocketSim's settings): one normal row and one
   friction row per point, in the order the island manager hands the manifolds over (Bullet sorts
   them with a quicksort that reorders a car's manifolds), split-impulse penetration recovery
   (erp2 0.8, its turn scaled by 0.1), 10 iterations, no warm start (points are new every tick).

The solve returns velocity deltas and the split-impulse motion; the car's Bullet step applies them
(`btSolverBody::writebackVelocityAndTransform`, then `integrateTransforms`).
Narrow phase and solve work in Bullet units (1 BT = 50 UU), like RocketSim; inputs and outputs are UU.
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
from nitro.envs.soccar.collide import MANIFOLD_POINTS, ContactManifolds, build_manifolds
from nitro.envs.soccar.gjk_epa import mat_vec, vec_mat
from nitro.envs.soccar.mesh import (
    PLANE_OBJECT_BASE,
    ArenaMesh,
    SphereContacts,
    _cell_candidates,
    adjust_internal_edge_contacts,
    cross,
    dot,
    eager_cpu_width,
    read_cmf,
)
from nitro.envs.soccar.mutators import MutatorConfig

CONVEX_DISTANCE_MARGIN = 0.04  # BT: btConvexInternalShape's default margin
SAFE_MARGIN_FACTOR = 0.1  # btBoxShape::setSafeMargin: margin <= 0.1 * the smallest half extent
CAR_MANIFOLD_SLOTS = 6  # arena objects a car touches at once: 4 planes are possible, plus meshes
MAX_CAR_PAIRS = 64  # triangles per car that pass the AABB and plane tests, at most
SPLIT_IMPULSE_TURN_ERP = 0.1  # btContactSolverInfo::m_splitImpulseTurnErp
# Where RocketSim puts its planes' bodies (Arena::_SetupArenaCollisionShapes), UU; normals in ARENA_PLANES.
PLANE_ORIGINS = (
    (0.0, 0.0, 0.0),
    (0.0, 0.0, C.ARENA_HEIGHT),
    (-C.ARENA_EXTENT_X, 0.0, C.ARENA_HEIGHT / 2),
    (C.ARENA_EXTENT_X, 0.0, C.ARENA_HEIGHT / 2),
)
_F32 = np.float32
UU_TO_BT = float(_F32(1.0) / _F32(50.0))  # RocketSim's UU_TO_BT, a float32 (1.f / 50.f)


# --- The car's collision shape --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CarHitbox:
    """Bullet's view of car hitboxes (``Car::_BulletSetup``), one row per car or preset [..., 3].

    Built by `car_hitbox` from the hitbox size and offset (UU, `CarConfig`'s ``hitbox_size`` and
    ``hitbox_pos_offset``); everything else is in Bullet units.
    """

    half: torch.Tensor
    """Half extents, (size * UU_TO_BT) / 2, BT [..., 3]."""
    inner: torch.Tensor
    """m_implicitShapeDimensions: half - 0.04 BT. (btBoxShape subtracts the default margin, then
    setSafeMargin lowers the margin without giving the difference back: Bullet 3.24's setMargin is
    not virtual, so btBoxShape's correction never runs.) [..., 3]"""
    margin: torch.Tensor
    """Collision margin, min(0.04, 0.1 * smallest half extent), BT [...]."""
    offset: torch.Tensor
    """Hitbox offset from the car's origin, BT [..., 3]."""
    threshold: torch.Tensor
    """Contact breaking threshold of every car-world manifold: the compound's angular motion disc
    (bounding sphere radius plus its centre's distance from the origin) times 0.02, BT [...]."""
    inertia: torch.Tensor
    """Local inertia (btBoxShape::calculateLocalInertia of the box with its margin, mass 180) [..., 3]."""


def car_hitbox(size: torch.Tensor, offset: torch.Tensor, mass: float = C.CAR_MASS_BT) -> CarHitbox:
    """`CarHitbox` of hitboxes of ``size`` and ``offset`` [..., 3] (UU), as RocketSim builds them."""
    size = torch.as_tensor(size, dtype=torch.float32)
    offset = torch.as_tensor(offset, dtype=torch.float32, device=size.device)
    half = (size * UU_TO_BT) / 2
    inner = half - CONVEX_DISTANCE_MARGIN
    margin = torch.clamp(SAFE_MARGIN_FACTOR * half.amin(-1), max=CONVEX_DISTANCE_MARGIN)
    offset_bt = offset * UU_TO_BT
    # btCompoundShape: its AABB is the child's, then getBoundingSphere and getAngularMotionDisc
    extent = inner + margin[..., None]
    lo, hi = offset_bt - extent, offset_bt + extent
    local_half, local_center = 0.5 * (hi - lo), 0.5 * (hi + lo)
    aabb_lo, aabb_hi = local_center - local_half, local_center + local_half
    radius = torch.linalg.vector_norm(aabb_hi - aabb_lo, dim=-1) * 0.5
    center = (aabb_lo + aabb_hi) * 0.5
    disc = radius + torch.linalg.vector_norm(center, dim=-1)
    threshold = disc * float(_F32(C.CONTACT_BREAKING_THRESHOLD_FACTOR))
    full = 2.0 * extent
    lx, ly, lz = full.unbind(-1)
    inertia = torch.stack((ly * ly + lz * lz, lx * lx + lz * lz, lx * lx + ly * ly), -1) * (mass / 12.0)
    return CarHitbox(half=half, inner=inner, margin=margin, offset=offset_bt, threshold=threshold, inertia=inertia)


# --- The arena as Bullet holds it -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ArenaBullet:
    """The arena's geometry in Bullet units, exactly as RocketSim holds it (not rounded through UU)."""

    tri: torch.Tensor
    """Triangle vertices, BT, in `ArenaMesh` order [T, 3, 3]."""
    mesh_lo: torch.Tensor
    """Each mesh file's AABB (btTriangleMeshShape::getAabb), BT [M, 3]."""
    mesh_hi: torch.Tensor
    load_rank: torch.Tensor
    """Position of each mesh file in RocketSim's load order, which is the file system's directory
    order (std::filesystem::directory_iterator): the order of the car's pairs and manifolds [M]."""
    plane_normals: torch.Tensor
    """[4, 3]"""
    plane_origins: torch.Tensor
    """BT [4, 3]"""


def arena_bullet(mesh: ArenaMesh) -> ArenaBullet:
    """The `ArenaBullet` of ``mesh`` (read once per folder and device)."""
    return _arena_bullet(mesh.folder, str(mesh.device))


@functools.lru_cache(maxsize=8)
def _arena_bullet(folder: str, device: str) -> ArenaBullet:
    files = sorted(
        Path(folder).glob("mesh_*.cmf"),
        key=lambda p: int(p.stem.split("_")[1]) if p.stem.split("_")[1].isdigit() else 1 << 30,
    )
    tris, lo, hi = [], [], []
    for path in files:
        vertices, indices = read_cmf(path)
        tris.append(vertices[indices])
        vmin, vmax = vertices.min(0), vertices.max(0)  # recalcLocalAabb: the support in +-x, y, z
        center, half = _F32(0.5) * (vmax + vmin), _F32(0.5) * (vmax - vmin)
        lo.append(center - half)
        hi.append(center + half)
    listed = [name for name in os.listdir(folder) if name.endswith(".cmf")]  # sync-ok: load time
    rank = [listed.index(p.name) for p in files]
    rank = np.argsort(np.argsort(rank))
    normals = np.array([n for n, _ in C.ARENA_PLANES], np.float32)
    origins = np.array(PLANE_ORIGINS, np.float32) * _F32(UU_TO_BT)
    return ArenaBullet(
        tri=torch.from_numpy(np.concatenate(tris).astype(np.float32)).to(device),
        mesh_lo=torch.from_numpy(np.stack(lo)).to(device),
        mesh_hi=torch.from_numpy(np.stack(hi)).to(device),
        load_rank=torch.from_numpy(rank.astype(np.int64)).to(device),
        plane_normals=torch.from_numpy(normals).to(device),
        plane_origins=torch.from_numpy(origins).to(device),
    )


def quicksort_order(n: int) -> list[int]:
    """btAlignedObjectArray::quickSort of ``n`` equal keys: which original element ends up at each
    position. The island manager sorts the manifolds by island with it, and a car's manifolds all
    share one island, so this fixed shuffle is the order the solver visits them in."""
    items = list(range(n))

    def sort(lo: int, hi: int) -> None:
        i, j = lo, hi
        while True:  # with equal keys neither inner scan moves: every step swaps
            if i <= j:
                items[i], items[j] = items[j], items[i]
                i, j = i + 1, j - 1
            if i > j:
                break
        if lo < j:
            sort(lo, j)
        if i < hi:
            sort(i, hi)

    if n > 1:
        sort(0, n - 1)
    return items


_MAX_MANIFOLDS = C.SOCCAR_MESH_COUNT + len(C.ARENA_PLANES)


@functools.lru_cache(maxsize=4)
def _sorted_position(device: str) -> torch.Tensor:
    """[n, i]: where the quicksort of n manifolds puts manifold i (n up to 16 meshes + 4 planes)."""
    table = torch.zeros(_MAX_MANIFOLDS + 1, _MAX_MANIFOLDS, dtype=torch.int64)
    for n in range(1, _MAX_MANIFOLDS + 1):
        for position, original in enumerate(quicksort_order(n)):
            table[n, original] = position
    return table.to(device)


# --- Contacts -------------------------------------------------------------------------------------


@dataclasses.dataclass
class CarWorldContacts:
    """One tick's car-world contacts of B car bodies (flattened [N, C] -> B = N * C)."""

    manifolds: ContactManifolds
    """Per arena object touched, up to 4 points (UU; offsets from the car's origin) [B, S, ...]."""
    solve_order: torch.Tensor
    """Slots in the order the solver visits them; empty slots last [B, S] int64."""
    has_contact: torch.Tensor
    """The contact-added callback ran for this car (worldContact.hasContact) [B] bool."""
    contact_normal: torch.Tensor
    """The last added point's normal, before internal-edge smoothing (worldContact.contactNormal);
    zero when there is none [B, 3]."""


def _box_transform(pos: torch.Tensor, rot: torch.Tensor, hitbox: CarHitbox):
    """World transform of the hitbox box (body transform * child offset), BT: (basis, origin)."""
    return rot, mat_vec(rot, hitbox.offset) + pos * UU_TO_BT


def _box_aabb(basis, origin, extent):
    """btTransformAabb: the AABB of a box of ``extent`` (half extents with margin) [B, 3]."""
    reach = torch.stack([dot(basis[:, i, :].abs(), extent) for i in range(3)], -1)
    return origin - reach, origin + reach


def plane_contacts(basis, origin, hitbox: CarHitbox, arena: ArenaBullet):
    """btConvexPlaneCollisionAlgorithm::processCollision for the four planes, BT.

    Returns (has [B, 4], point on the plane [B, 4, 3], distance [B, 4]); the normal is the plane's.
    """
    n = arena.plane_normals  # [4, 3]
    extent = (hitbox.inner + hitbox.margin[:, None])[:, None, :]  # localGetSupportingVertex: with margin
    local_dir = vec_mat(-n[None], basis[:, None])  # planeInConvex.basis * -normal
    vertex = torch.where(local_dir >= 0, extent, -extent)
    in_plane = mat_vec(basis[:, None], vertex) + (origin[:, None, :] - arena.plane_origins)
    distance = dot(n, in_plane)
    has = distance < hitbox.threshold[:, None]
    point = (in_plane - distance[..., None] * n) + arena.plane_origins
    return has, point, distance


def _triangle_candidates(mesh, arena, pos, basis, origin, hitbox, box_lo, box_hi):
    """The triangles Bullet hands to GJK for each car, in the grid cell's (BVH) order: of a mesh
    file whose AABB meets the box's, with an AABB meeting the box's (TestTriangleAgainstAabb2),
    and not entirely beyond the breaking threshold on either side of its plane (the early out of
    btConvexTriangleCallback::processTriangle). Returns (ids [B, K], valid [B, K])."""
    ids, valid = _cell_candidates(mesh, pos)
    tri = arena.tri[ids]  # [B, K, 3, 3]
    file = mesh.tri_mesh[ids].to(torch.int64)
    file_hit = ~((box_lo[:, None, :] > arena.mesh_hi[None]) | (box_hi[:, None, :] < arena.mesh_lo[None])).any(-1)
    valid = valid & file_hit.gather(1, file)
    tri_lo, tri_hi = tri.amin(2), tri.amax(2)
    valid = valid & ~((tri_lo > box_hi[:, None]) | (tri_hi < box_lo[:, None])).any(-1)
    v0, v1, v2 = tri.unbind(2)
    normal = cross(v1 - v0, v2 - v0)
    normal = normal / torch.sqrt(dot(normal, normal))[..., None]
    extent = (hitbox.inner + hitbox.margin[:, None])[:, None, :]
    for side in (1.0, -1.0):
        sn = normal * side
        local = vec_mat(sn, basis[:, None])
        point = mat_vec(basis[:, None], torch.where(local >= 0, extent, -extent)) + origin[:, None]
        valid = valid & ~((dot(sn, v0) - dot(sn, point)) > hitbox.threshold[:, None])
    # compact the candidates to the front, keeping their order
    width = eager_cpu_width(valid.sum(1), min(MAX_CAR_PAIRS, valid.shape[1]))
    order = torch.sort((~valid).to(torch.int8), dim=1, stable=True).indices[:, :width]
    return ids.gather(1, order), valid.gather(1, order)


def world_contacts(mesh: ArenaMesh, pos: torch.Tensor, rot_mat: torch.Tensor, hitbox: CarHitbox) -> CarWorldContacts:
    """The contact manifolds of car bodies with the arena at the tick's starting transform.

    ``pos`` [..., 3] (UU) and ``rot_mat`` [..., 3, 3] (columns forward, right, up) of every car;
    ``hitbox`` rows broadcast against them. Returns contacts of the flattened cars.
    """
    arena = arena_bullet(mesh)
    pos = pos.reshape(-1, 3)
    rot = rot_mat.reshape(-1, 3, 3)
    b = pos.shape[0]
    hitbox = CarHitbox(**{f.name: getattr(hitbox, f.name).expand(*pos.shape[:1], *getattr(hitbox, f.name).shape[-1:]) if getattr(hitbox, f.name).dim() > 1 or getattr(hitbox, f.name).shape[-1:] == (3,) else getattr(hitbox, f.name).expand(b) for f in dataclasses.fields(hitbox)})
    basis, origin = _box_transform(pos, rot, hitbox)
    box_lo, box_hi = _box_aabb(basis, origin, hitbox.inner + hitbox.margin[:, None])
    device = pos.device
    # meshes: GJK per candidate triangle
    ids, valid = _triangle_candidates(mesh, arena, pos, basis, origin, hitbox, box_lo, box_hi)
    k = ids.shape[1]
    flat = lambda x: x[:, None].expand(b, k, *x.shape[1:]).reshape(b * k, *x.shape[1:])  # noqa: E731
    hit = gjk_epa.gjk_closest_points(
        flat(basis),
        flat(origin),
        flat(hitbox.inner),
        flat(hitbox.margin),
        arena.tri[ids].reshape(b * k, 3, 3),
        flat((hitbox.margin + hitbox.threshold) ** 2),
    )
    found = (hit.found & (hit.distance <= flat(hitbox.threshold))).reshape(b, k) & valid  # addContactPoint
    normal = hit.normal.reshape(b, k, 3)
    point_b = hit.point_on_b.reshape(b, k, 3) * C.BT_TO_UU
    depth = hit.distance.reshape(b, k) * C.BT_TO_UU
    point_a = point_b + normal * depth[..., None]
    v = mesh.tri_verts[ids]
    smoothed, changed = adjust_internal_edge_contacts(
        normal, point_b, v[..., 0, :], v[..., 1, :], v[..., 2, :],
        mesh.tri_normals[ids], mesh.edge_angle[ids], mesh.edge_flags[ids],
    )
    smoothed_b = torch.where(changed[..., None], point_a - smoothed * depth[..., None], point_b)
    file = mesh.tri_mesh[ids].to(torch.int64)
    rank = arena.load_rank[file]
    # Bullet's order: mesh files in load order, each in BVH order (the cell lists are in file, BVH order)
    key = torch.where(found, rank * (1 << 16) + (mesh.tri_order[ids].to(torch.int64) & 0xFFFF), 1 << 30)
    order = torch.sort(key, dim=1, stable=True).indices
    pick = lambda x: x.gather(1, order if x.dim() == 2 else order[..., None].expand(-1, -1, 3))  # noqa: E731
    m_found, m_rank = pick(found), pick(rank)
    m_normal, m_smoothed, m_a, m_b, m_depth = pick(normal), pick(smoothed), pick(point_a), pick(smoothed_b), pick(depth)
    # planes, after every mesh
    p_has, p_point, p_dist = plane_contacts(basis, origin, hitbox, arena)
    p_normal = arena.plane_normals.expand(b, -1, -1)
    p_b = p_point * C.BT_TO_UU
    p_depth = p_dist * C.BT_TO_UU
    p_a = p_b + p_normal * p_depth[..., None]
    all_has = torch.cat((m_found, p_has), 1)
    objects = torch.cat((m_rank, PLANE_OBJECT_BASE + torch.arange(4, device=device).expand(b, -1)), 1)
    raw_normal = torch.cat((m_normal, p_normal), 1)
    normal_all = torch.cat((m_smoothed, p_normal), 1)
    a_all = torch.cat((m_a, p_a), 1)
    b_all = torch.cat((m_b, p_b), 1)
    depth_all = torch.cat((m_depth, p_depth), 1)
    compact = torch.sort((~all_has).to(torch.int8), dim=1, stable=True).indices
    take = lambda x: x.gather(1, compact if x.dim() == 2 else compact[..., None].expand(-1, -1, 3))  # noqa: E731
    has = take(all_has)
    contacts = SphereContacts(
        count=all_has.sum(1).to(torch.int32),
        object=torch.where(has, take(objects), -1).to(torch.int32),
        feature=torch.zeros_like(objects, dtype=torch.int32),
        normal=take(normal_all),
        point=take(b_all),
        offset=take(a_all) - pos[:, None, :],
        depth=take(depth_all),
    )
    manifolds = build_manifolds(contacts, slots=CAR_MANIFOLD_SLOTS)
    # the world contact the callback records: the last added point's (unsmoothed) normal
    count = all_has.sum(1)
    last = (count - 1).clamp(min=0)
    last_normal = take(raw_normal).gather(1, last[:, None, None].expand(-1, 1, 3))[:, 0]
    has_contact = count > 0
    # the order the solver visits the manifolds: every existing manifold (planes always; mesh files
    # whose AABB meets the box's) in pair order, shuffled by the island manager's quicksort
    file_hit = ~((box_lo[:, None, :] > arena.mesh_hi[None]) | (box_hi[:, None, :] < arena.mesh_lo[None])).any(-1)
    by_rank = torch.zeros_like(file_hit).scatter(1, arena.load_rank.expand(b, -1), file_hit)
    meshes_before = torch.cumsum(by_rank.to(torch.int64), 1) - by_rank.to(torch.int64)  # [B, 16] by rank
    existing = by_rank.sum(1) + 4
    obj = manifolds.object.to(torch.int64)
    is_plane = obj >= PLANE_OBJECT_BASE
    position = torch.where(is_plane, existing[:, None] - 4 + (obj - PLANE_OBJECT_BASE), meshes_before.gather(1, obj.clamp(0, C.SOCCAR_MESH_COUNT - 1)))
    table = _sorted_position(str(device))
    sorted_pos = table[existing[:, None], position.clamp(0, _MAX_MANIFOLDS - 1)]
    solve_key = torch.where(obj >= 0, sorted_pos, _MAX_MANIFOLDS + 1)
    solve_order = torch.sort(solve_key, dim=1, stable=True).indices
    return CarWorldContacts(
        manifolds=manifolds,
        solve_order=solve_order,
        has_contact=has_contact,
        contact_normal=torch.where(has_contact[:, None], last_normal, 0.0),
    )


# --- The sequential-impulse solve -----------------------------------------------------------------


def inv_inertia_world(rot: torch.Tensor, inertia: torch.Tensor) -> torch.Tensor:
    """btRigidBody::updateInertiaTensor: basis.scaled(1 / inertia) * basis^T [B, 3, 3]."""
    scaled = rot * (1.0 / inertia)[..., None, :]
    return scaled @ rot.transpose(-1, -2)


def _plane_space(n: torch.Tensor) -> torch.Tensor:
    """btPlaneSpace1's first tangent of ``n`` [..., 3]."""
    nx, ny, nz = n.unbind(-1)
    use_yz = nz.abs() > math.sqrt(0.5)
    k_yz = 1.0 / torch.sqrt(torch.where(use_yz, ny * ny + nz * nz, 1))
    k_xy = 1.0 / torch.sqrt(torch.where(use_yz, 1, nx * nx + ny * ny))
    zero = torch.zeros_like(nx)
    yz = torch.stack((zero, -nz * k_yz, ny * k_yz), -1)
    xy = torch.stack((-ny * k_xy, nx * k_xy, zero), -1)
    return torch.where(use_yz[..., None], yz, xy)


def solve_world_contacts(
    contacts: CarWorldContacts,
    vel: torch.Tensor,
    ang_vel: torch.Tensor,
    ext_dv: torch.Tensor,
    ext_dw: torch.Tensor,
    rot_mat: torch.Tensor,
    hitbox: CarHitbox,
    dt: float,
    mutators: MutatorConfig,
):
    """Bullet's sequential-impulse solve of the car-world contacts (RocketSim's solver settings).

    ``vel`` / ``ang_vel`` [..., 3]: the car's velocities after damping (UU/s, rad/s); ``ext_dv`` /
    ``ext_dw``: what this tick's forces and torques add (gravity, boost, air control: Bullet's
    m_externalForceImpulse / m_externalTorqueImpulse); ``rot_mat``: the tick's starting orientation.
    Returns (dv, dw, push_v, push_w) [..., 3]: velocity deltas of the contacts (UU/s, rad/s), and the
    split-impulse motion (UU/s, rad/s, the turn already scaled by 0.1) that
    btSolverBody::writebackVelocityAndTransform integrates into the transform before the step's
    integration. All zero where a car touches nothing.
    """
    shape = vel.shape
    b = contacts.has_contact.shape[0]
    v = vel.reshape(b, 3) * UU_TO_BT
    w = ang_vel.reshape(b, 3)
    ext_v = ext_dv.reshape(b, 3) * UU_TO_BT
    ext_w = ext_dw.reshape(b, 3)
    rot = rot_mat.reshape(b, 3, 3)
    inertia = hitbox.inertia.expand(b, 3) if hitbox.inertia.dim() == 1 else hitbox.inertia.reshape(-1, 3).expand(b, 3)
    inv_i = inv_inertia_world(rot, inertia)
    inv_mass = 1.0 / mutators.car_mass
    m = contacts.manifolds
    # rows in solver order: manifolds as the island manager sorts them, points in manifold order
    order = contacts.solve_order
    held = m.held().gather(1, order[..., None].expand(-1, -1, MANIFOLD_POINTS)).reshape(b, -1)
    gather3 = lambda x: x.gather(1, order[..., None, None].expand(-1, -1, MANIFOLD_POINTS, 3)).reshape(b, -1, 3)  # noqa: E731
    normal, rel_pos, depth = gather3(m.normal), gather3(m.offset) * UU_TO_BT, m.depth.gather(1, order[..., None].expand(-1, -1, MANIFOLD_POINTS)).reshape(b, -1) * UU_TO_BT
    width = eager_cpu_width(held.sum(1), held.shape[1])
    row_order = torch.sort((~held).to(torch.int8), dim=1, stable=True).indices[:, :width]
    active = held.gather(1, row_order)
    take = row_order[..., None].expand(-1, -1, 3)
    normal, rel_pos, depth = normal.gather(1, take), rel_pos.gather(1, take), depth.gather(1, row_order)
    inv_i_rows = inv_i[:, None]
    # setupContactConstraint (relaxation 1, cfm 0, no warm start: the points are new)
    torque_n = cross(rel_pos, normal)
    ang_n = (inv_i_rows @ torque_n[..., None])[..., 0]
    jac_n = 1.0 / (inv_mass + dot(normal, cross(ang_n, rel_pos)))
    approach = dot(normal, v[:, None] + cross(w[:, None].expand_as(rel_pos), rel_pos))  # getVelocityInLocalPoint
    restitution = torch.where(
        approach.abs() < C.SOLVER_RESTITUTION_VELOCITY_THRESHOLD * UU_TO_BT, 0.0, -mutators.car_world_restitution * approach
    ).clamp(min=0)
    rel_vel = dot(normal, v[:, None] + ext_v[:, None]) + dot(torque_n, w[:, None] + ext_w[:, None])
    rhs_n = (restitution - rel_vel) * jac_n
    rhs_push = torch.where(depth > 0, 0.0, -depth * (C.SOLVER_ERP2 / dt)) * jac_n
    # convertContactInner: one friction row along the sliding velocity (else btPlaneSpace1)
    vel_at = v[:, None] + ext_v[:, None] + cross((w + ext_w)[:, None].expand_as(rel_pos), rel_pos)
    lateral = vel_at - normal * dot(normal, vel_at)[..., None]
    lateral2 = dot(lateral, lateral)
    sliding = lateral2 > gjk_epa.SIMD_EPSILON
    tangent = torch.where(sliding[..., None], lateral * (1.0 / torch.sqrt(torch.where(sliding, lateral2, 1)))[..., None], _plane_space(normal))
    torque_t = cross(rel_pos, tangent)
    ang_t = (inv_i_rows @ torque_t[..., None])[..., 0]
    jac_t = 1.0 / (inv_mass + dot(tangent, cross(ang_t, rel_pos)))
    rhs_t = -(dot(tangent, v[:, None] + ext_v[:, None]) + dot(torque_t, w[:, None])) * jac_t
    friction = mutators.car_world_friction
    rows = range(normal.shape[1])
    # split-impulse penetration recovery (solveGroupCacheFriendlySplitImpulseIterations), first
    push = torch.zeros_like(v)
    turn = torch.zeros_like(w)
    applied = torch.zeros_like(depth)
    pushing = active & (rhs_push != 0)
    for _ in range(C.SOLVER_NUM_ITERATIONS):
        for k in rows:
            delta = rhs_push[:, k] - (dot(normal[:, k], push) + dot(torque_n[:, k], turn)) * jac_n[:, k]
            new = (applied[:, k] + delta).clamp(min=0)
            delta = torch.where(pushing[:, k], new - applied[:, k], 0.0)
            applied[:, k] = applied[:, k] + delta
            push = push + normal[:, k] * (inv_mass * delta)[:, None]
            turn = turn + ang_n[:, k] * delta[:, None]
    # velocity iterations: every normal row, then every friction row
    dv = torch.zeros_like(v)
    dw = torch.zeros_like(w)
    impulse_n = torch.zeros_like(depth)
    impulse_t = torch.zeros_like(depth)
    for _ in range(C.SOLVER_NUM_ITERATIONS):
        for k in rows:  # resolveSingleConstraintRowLowerLimit
            delta = rhs_n[:, k] - (dot(normal[:, k], dv) + dot(torque_n[:, k], dw)) * jac_n[:, k]
            new = (impulse_n[:, k] + delta).clamp(min=0)
            delta = torch.where(active[:, k], new - impulse_n[:, k], 0.0)
            impulse_n[:, k] = impulse_n[:, k] + delta
            dv = dv + normal[:, k] * (inv_mass * delta)[:, None]
            dw = dw + ang_n[:, k] * delta[:, None]
        for k in rows:  # resolveSingleConstraintRowGeneric, while the normal impulse is positive
            limit = friction * impulse_n[:, k]
            delta = rhs_t[:, k] - (dot(tangent[:, k], dv) + dot(torque_t[:, k], dw)) * jac_t[:, k]
            new = torch.maximum(torch.minimum(impulse_t[:, k] + delta, limit), -limit)
            delta = torch.where(active[:, k] & (impulse_n[:, k] > 0), new - impulse_t[:, k], 0.0)
            impulse_t[:, k] = impulse_t[:, k] + delta
            dv = dv + tangent[:, k] * (inv_mass * delta)[:, None]
            dw = dw + ang_t[:, k] * delta[:, None]
    return (
        (dv * C.BT_TO_UU).reshape(shape),
        dw.reshape(shape),
        (push * C.BT_TO_UU).reshape(shape),
        (turn * SPLIT_IMPULSE_TURN_ERP).reshape(shape),
    )
