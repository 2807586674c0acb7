"""Bullet's contact bookkeeping for bodies against the arena: per-object 4-point contact manifolds.

Reference: RocketSim (ZealanL/RocketSim, MIT) and its Bullet 3.24 (btPersistentManifold,
btManifoldResult, btRSBroadphase). Every tick RocketSim's broadphase removes and re-adds every pair,
which destroys its manifold, so each manifold starts empty: nothing persists between ticks (no warm
starting, no old points). Contacts are added in the order Bullet generates them (for a mesh, its BVH
visiting order); a manifold keeps at most 4 points, and once full a new point replaces the one whose
removal leaves the largest contact area (RocketSim never merges nearby points).
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar.mesh import (
    ArenaMesh,
    SphereContacts,
    _use_kernels,
    cross,
    dot,
    eager_cpu_width,
    sphere_contacts_reference,
)

MANIFOLD_SLOTS = 4  # arena objects (mesh files, planes) a body touches at once, at most
MANIFOLD_POINTS = 4  # points per manifold (Bullet's MANIFOLD_CACHE_SIZE)
# Contacts a sphere query hands to the manifolds per tick, in Bullet's order. A ball touching a
# smooth surface finds 1-6; a ball driven hard into the dense goal net has found up to 43.
MAX_NEW_CONTACTS = 64


@dataclasses.dataclass
class ContactManifolds:
    """One tick's contact manifolds of N bodies with the arena: up to 4 points per object touched.

    Slots are filled in the order of each object's first contact; -1 marks a free slot.
    """

    object: torch.Tensor
    """Arena object of each slot: mesh file, or PLANE_OBJECT_BASE + plane; -1 when free [N, S] int32."""
    count: torch.Tensor
    """Points held per slot [N, S] int32."""
    offset: torch.Tensor
    """Point on the body minus the body's origin (m_positionWorldOnA - origin), UU [N, S, 4, 3]."""
    point: torch.Tensor
    """Point on the arena (m_positionWorldOnB), UU [N, S, 4, 3]."""
    normal: torch.Tensor
    """Normal from the arena into the body (m_normalWorldOnB) [N, S, 4, 3]."""
    depth: torch.Tensor
    """Gap along the normal, negative when penetrating, UU [N, S, 4]."""

    def held(self) -> torch.Tensor:
        """Which point slots hold a point [N, S, 4] bool."""
        return torch.arange(MANIFOLD_POINTS, device=self.count.device) < self.count[..., None]


def sort_cached_points(
    offset: torch.Tensor, depth: torch.Tensor, new_offset: torch.Tensor, new_depth: torch.Tensor
) -> torch.Tensor:
    """btPersistentManifold::sortCachedPoints: which of 4 held points a new one replaces [N].

    ``offset`` [N, 4, 3] / ``depth`` [N, 4] are the held points, ``new_*`` [N, 3] / [N] the new one.
    The deepest held point (if deeper than the new one) is kept; of the others, the one whose
    replacement gives the largest area (measured on the body's side, m_localPointA) goes.
    """
    deepest = torch.full_like(new_depth, -1, dtype=torch.int64)
    best = new_depth
    for i in range(MANIFOLD_POINTS):  # KEEP_DEEPEST_POINT, strict <: the first of equal depths wins
        deeper = depth[:, i] < best
        deepest = torch.where(deeper, i, deepest)
        best = torch.where(deeper, depth[:, i], best)
    p0, p1, p2, p3 = offset.unbind(1)
    a = new_offset
    edges = (
        (a - p1, p3 - p2),
        (a - p0, p3 - p2),
        (a - p0, p3 - p1),
        (a - p0, p2 - p1),
    )  # gContactCalcArea3Points
    areas = torch.stack([dot(cross(u, v), cross(u, v)) for u, v in edges], 1)
    areas = torch.where(torch.arange(MANIFOLD_POINTS, device=areas.device) == deepest[:, None], 0.0, areas)
    return torch.argmax(areas, dim=1)  # closestAxis4 / maxAxis4: the first largest wins


def build_manifolds(contacts: SphereContacts, slots: int = MANIFOLD_SLOTS) -> ContactManifolds:
    """File one tick's contacts, in Bullet's order, into per-object manifolds (addManifoldPoint).

    Each contact is appended to its object's manifold or, once that holds 4 points, replaces the one
    `sort_cached_points` picks. Of the many triangles a ball can touch in the dense goal net, only 4
    per mesh file count, chosen by Bullet's visiting order. Objects beyond ``slots`` are ignored.
    """
    n = contacts.object.shape[0]
    device = contacts.object.device
    rows = torch.arange(n, device=device)
    slot_ids = torch.arange(slots, device=device)
    points = torch.arange(MANIFOLD_POINTS, device=device)
    obj = torch.full((n, slots), -1, dtype=torch.int32, device=device)
    count = torch.zeros(n, slots, dtype=torch.int32, device=device)
    offset = torch.zeros(n, slots, MANIFOLD_POINTS, 3, dtype=contacts.offset.dtype, device=device)
    point, normal = torch.zeros_like(offset), torch.zeros_like(offset)
    depth = torch.zeros(n, slots, MANIFOLD_POINTS, dtype=contacts.depth.dtype, device=device)
    for k in range(eager_cpu_width(contacts.count, contacts.object.shape[1])):  # addContactPoint, in order
        new_obj = contacts.object[:, k]
        match = obj == new_obj[:, None]
        free = obj < 0
        has_slot = match.any(1)
        slot = torch.where(
            has_slot, torch.argmax(match.to(torch.int8), 1), torch.argmax(free.to(torch.int8), 1)
        )
        ok = (new_obj >= 0) & (has_slot | free.any(1))
        held = count[rows, slot]
        full = held >= MANIFOLD_POINTS
        replaced = sort_cached_points(
            offset[rows, slot], depth[rows, slot], contacts.offset[:, k], contacts.depth[:, k]
        )
        index = torch.where(full, replaced, held.to(torch.int64))
        at_slot = ok[:, None] & (slot_ids == slot[:, None])  # [N, S]
        at_point = at_slot[:, :, None] & (points == index[:, None, None])  # [N, S, 4]
        obj = torch.where(at_slot, new_obj[:, None], obj)
        count = torch.where(at_slot & ~full[:, None], count + 1, count)
        offset = torch.where(at_point[..., None], contacts.offset[:, k, None, None, :], offset)
        point = torch.where(at_point[..., None], contacts.point[:, k, None, None, :], point)
        normal = torch.where(at_point[..., None], contacts.normal[:, k, None, None, :], normal)
        depth = torch.where(at_point, contacts.depth[:, k, None, None], depth)
    # btPersistentManifold::refreshContactPoints runs next in Bullet; on points made this tick it
    # changes nothing (same transforms), so it is left out.
    return ContactManifolds(object=obj, count=count, offset=offset, point=point, normal=normal, depth=depth)


def sphere_manifolds(
    mesh: ArenaMesh, centers: torch.Tensor, radius: float, gap: float, use_kernels: bool | None = None
) -> ContactManifolds:
    """Contact manifolds of spheres [N, 3] (UU) of ``radius`` with the arena, as Bullet builds them.

    Every feature within ``gap`` of the sphere contributes a point (`mesh.sphere_contacts`), filed
    per arena object, 4 at most. On CUDA one Triton kernel does both (when Triton is importable);
    ``use_kernels`` forces the kernel or this PyTorch reference.
    """
    if radius + gap > mesh.query_radius:
        raise ValueError(
            f"sphere reach radius + gap = {radius + gap} UU exceeds the grid's query radius "
            f"{mesh.query_radius} UU; load the mesh with a larger query_radius"
        )
    if _use_kernels(centers, use_kernels):
        from nitro.envs.soccar import kernels

        return kernels.sphere_manifolds(mesh, centers, radius, gap)
    return build_manifolds(sphere_contacts_reference(mesh, centers, radius, gap, MAX_NEW_CONTACTS))
