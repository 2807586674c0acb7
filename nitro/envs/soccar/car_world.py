"""Car bodies against the arena: RocketSim's car-world contacts.

Reference: RocketSim (ZealanL/RocketSim, MIT) `Car::_BulletSetup`, `Arena::_BulletContactAddedCallback`
and `_BtCallback_OnCarWorldCollision`, `btRSBroadphase`, and the Bullet 3.24 it vendors ("ROCKETSIM
CHANGE" markers). The car body is a `btCompoundShape` holding one `btBoxShape` (the hitbox, moved by
the hitbox offset). Each tick, at the tick's starting transform, `world_contacts` finds every car's contacts:

1. **Pairs** (`btRSBroadphase`): every tick the broadphase drops and re-adds every pair, so each
   manifold is new (nothing persists). A car pairs with a mesh file registered in its broadphase cell
   and with each plane; the pair keeps a manifold when the box's AABB meets the object's
   (`btCompoundCollisionAlgorithm` drops it otherwise). RocketSim gives its planes thin AABBs.
2. **Planes** (`btConvexPlaneCollisionAlgorithm`, no perturbation: RocketSim's threshold is 0): one
   point, the box corner deepest along the plane normal (margin included), within the threshold.
3. **Meshes** (`btConvexConcaveCollisionAlgorithm` -> `btConvexConvexAlgorithm` per triangle): the
   triangles whose AABB meets the box's, minus those the box is entirely to one side of (the early
   out), in the BVH's order; Bullet's GJK (and EPA where the shapes overlap) gives at most one point
   per triangle (`gjk_pair_detector`).
4. **Manifolds** (`btManifoldResult::addContactPoint`, `btPersistentManifold`): points are filed in
   the order Bullet makes them (mesh files in load order, planes after), 4 per object, a fifth
   replacing the point `manifolds.sort_cached_points` picks by area on the car's side (m_localPointA,
   car frame). RocketSim's contact-added callback sets friction and restitution (0.3, 0.3), records
   the car's world contact (the last point's normal, before edge smoothing) and smooths normals at
   internal triangle edges (`btAdjustInternalEdgeContacts`, as for the ball). `refresh_contact_points`
   then recomputes every point from the car's transform and drops the ones beyond the threshold.

The island manager (`island_manager`) orders these manifolds and the solver (`sequential_impulse`)
solves them with the other bodies' contacts.

Everything here runs in Bullet units (1 BT = 50 UU) and float32, with Bullet's operation order where
a tie can hinge on it (the manifold's area test, the planes, the refresh). Car state goes in and comes
out in UU.
"""

from __future__ import annotations

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar import rigid_body as rb
from nitro.envs.soccar.arena_mesh import ArenaMesh, cell_candidates
from nitro.envs.soccar.arena_mesh.broadphase import ArenaBullet, aabbs_overlap, broadphase_cell
from nitro.envs.soccar.car_config import CarHitbox
from nitro.envs.soccar.contacts import (
    MANIFOLD_POINTS,
    PLANE_OBJECT_BASE,
    CarWorldContacts,
    ContactManifolds,
    SphereContacts,
)
from nitro.envs.soccar.gjk_pair_detector import ConvexShape, gjk_closest_points
from nitro.envs.soccar.internal_edge import adjust_internal_edge_contacts
from nitro.envs.soccar.island_manager import pair_positions
from nitro.envs.soccar.manifolds import build_manifolds
from nitro.envs.soccar.vec import (
    cross,
    dot,
    eager_cpu,
    eager_cpu_width,
    gather_rows,
    mat_vec,
    normalize,
    vec_mat,
)

CAR_MANIFOLD_SLOTS = 6  # arena objects a car touches at once (at most 2 planes, a few mesh files)
MAX_CAR_PAIRS = 64  # triangles per car that pass the AABB test and the early out


def transform_aabb(basis: torch.Tensor, center: torch.Tensor, extent: torch.Tensor):
    """btTransformAabb: the AABB of a box of half ``extent`` [B, 3] (margin included) around
    ``center`` with axes ``basis``: (min, max) [B, 3]."""
    reach = torch.stack([dot(extent, basis[..., i, :].abs()) for i in range(3)], -1)
    return center - reach, center + reach


def box_transform(pos_bt: torch.Tensor, rot: torch.Tensor, hitbox: CarHitbox):
    """The compound's child box at the car's transform (btTransform * child transform): (basis,
    origin) [B, 3, 3] / [B, 3]. The child's basis is the identity, so the car's is exact."""
    return rot, mat_vec(rot, hitbox.offset) + pos_bt


def box_aabb(basis: torch.Tensor, origin: torch.Tensor, hitbox: CarHitbox):
    """btBoxShape::getAabb: the inner box with its margin (min, max) [B, 3]."""
    return transform_aabb(basis, origin, hitbox.inner + hitbox.margin[:, None])


def compound_aabb(basis: torch.Tensor, origin: torch.Tensor, hitbox: CarHitbox):
    """btCompoundShape::getAabb at the car's transform (its margin is 0): (min, max) [B, 3]."""
    local_half = 0.5 * (hitbox.local_max - hitbox.local_min)
    local_center = 0.5 * (hitbox.local_max + hitbox.local_min)
    return transform_aabb(basis, mat_vec(basis, local_center) + origin, local_half)


def broadphase_aabb(pos_bt, rot, vel_bt, ang_vel, hitbox: CarHitbox, dt: float):
    """The car's broadphase box (btCollisionWorld::updateSingleAabb): the compound's AABB at its
    transform and at the one predicted from its velocities, grown by 0.02 BT: (min, max) [B, 3]."""
    now_min, now_max = compound_aabb(rot, pos_bt, hitbox)
    pred_pos, pred_rot = rb.integrate_transform(pos_bt, rot, vel_bt, ang_vel, dt)
    pred_min, pred_max = compound_aabb(pred_rot, pred_pos, hitbox)
    t = C.CONTACT_BREAKING_THRESHOLD
    return torch.minimum(now_min - t, pred_min - t), torch.maximum(now_max + t, pred_max + t)


# --- Contacts -------------------------------------------------------------------------------------


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
    ids, valid = cell_candidates(mesh, pos_bt * C.BT_TO_UU)
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
    pick = lanes.nonzero()[:, 0] if eager_cpu(lanes) else torch.arange(b * k, device=lanes.device)  # sync-ok
    car = torch.div(pick, k, rounding_mode="floor")
    found = torch.zeros(b * k, dtype=torch.bool, device=lanes.device)
    normal = torch.zeros(b * k, 3, device=lanes.device)
    point, distance = torch.zeros_like(normal), torch.zeros(b * k, device=lanes.device)
    if pick.numel():
        grown = hitbox.margin + hitbox.threshold
        tri = arena.tri[ids.reshape(-1)[pick]]
        box = ConvexShape("box", origin[car], hitbox.margin[car], basis=basis[car], half=hitbox.inner[car])
        triangle = ConvexShape("triangle", torch.zeros_like(tri[:, 0]), torch.zeros_like(tri[:, 0, 0]), tri=tri)
        hit = gjk_closest_points(box, triangle, (grown * grown)[car])
        found[pick] = lanes[pick] & hit.found & (hit.distance <= hitbox.threshold[car])
        normal[pick], point[pick], distance[pick] = hit.normal, hit.point_on_b, hit.distance
    return found.reshape(b, k), normal.reshape(b, k, 3), point.reshape(b, k, 3), distance.reshape(b, k)


def world_contacts(
    mesh: ArenaMesh, arena: ArenaBullet, pos_bt, rot, vel_bt, ang_vel, hitbox: CarHitbox, dt: float
):
    """The contact manifolds of B car bodies with the arena at the tick's starting transform, BT.

    ``pos_bt`` [B, 3], ``rot`` [B, 3, 3] (columns forward, right, up), ``vel_bt`` / ``ang_vel`` [B, 3]
    (the velocities Bullet predicts the broadphase AABB with), ``hitbox`` flattened [B].
    """
    b = pos_bt.shape[0]
    device = pos_bt.device
    basis, origin = box_transform(pos_bt, rot, hitbox)
    box_min, box_max = box_aabb(basis, origin, hitbox)

    # Pairs: registered in the car's broadphase cell (its AABB with the predicted one, grown by 0.02)
    bp_min, _ = broadphase_aabb(pos_bt, rot, vel_bt, ang_vel, hitbox, dt)
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
    # btAdjustInternalEdgeContacts (RocketSim's callback, after the point is filed), in Bullet units:
    # a box corner touches at a triangle's vertex, where which edge is nearer hinges on ulps
    v0, v1, v2 = arena.tri[ids].unbind(-2)
    smoothed, changed = adjust_internal_edge_contacts(
        m_normal,
        m_point,
        v0,
        v1,
        v2,
        normalize(cross(v1 - v0, v2 - v0)),  # btTriangleShape::calcNormal
        mesh.edge_angle[ids],
        mesh.edge_flags[ids],
        edge_distance=C.INTERNAL_EDGE_DISTANCE_THRESHOLD * C.UU_TO_BT,
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

    has = torch.cat((gather_rows(found, order), p_has), 1)
    objects = torch.cat(
        (gather_rows(rank, order), PLANE_OBJECT_BASE + torch.arange(4, device=device).expand(b, -1)), 1
    )
    raw_normal = torch.cat((gather_rows(m_normal, order), p_normal), 1)
    normal = torch.cat((gather_rows(smoothed, order), p_normal), 1)
    point = torch.cat((gather_rows(m_point, order), p_point), 1)
    point_a = torch.cat((gather_rows(m_point_a, order), p_point_a), 1)
    depth = torch.cat((gather_rows(m_depth, order), p_depth), 1)
    local_a = vec_mat(point_a - pos_bt[:, None], rot[:, None])  # the car's invXform(pointA)
    compact = torch.sort((~has).to(torch.int8), dim=1, stable=True).indices
    count = has.sum(1)
    held = gather_rows(has, compact)
    contacts = SphereContacts(
        count=count.to(torch.int32),
        object=torch.where(held, gather_rows(objects, compact), -1).to(torch.int32),
        feature=torch.zeros_like(held, dtype=torch.int32),
        normal=gather_rows(normal, compact),
        point=gather_rows(point, compact),
        offset=gather_rows(local_a, compact),
        depth=gather_rows(depth, compact),
    )
    manifolds = refresh_contact_points(
        build_manifolds(contacts, slots=CAR_MANIFOLD_SLOTS), pos_bt, rot, hitbox.threshold, arena
    )
    last = gather_rows(gather_rows(raw_normal, compact), (count - 1).clamp(min=0)[:, None])[:, 0]
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
