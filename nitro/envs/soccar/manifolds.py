"""Bullet's contact manifolds of a body against the arena: one per arena object, 4 points at most.

Reference: RocketSim (ZealanL/RocketSim, MIT) and its Bullet 3.24 (btPersistentManifold,
btManifoldResult, btRSBroadphase). Every tick RocketSim's broadphase removes and re-adds every pair,
which destroys its manifold, so each manifold starts empty: nothing persists between ticks (no warm
starting, no old points). Contacts are added in the order Bullet generates them (for a mesh, its BVH
visiting order); a manifold keeps at most 4 points, and once full a new point replaces the one whose
removal leaves the largest contact area (RocketSim never merges nearby points). The kernels' twin is
`kernels/manifolds.py`.
"""

from __future__ import annotations

import torch

from nitro.envs.soccar import kernels
from nitro.envs.soccar.arena_mesh import ArenaMesh
from nitro.envs.soccar.contacts import (
    MANIFOLD_POINTS,
    MANIFOLD_SLOTS,
    MAX_NEW_CONTACTS,
    ContactManifolds,
    SphereContacts,
)
from nitro.envs.soccar.kernels import manifolds as manifold_kernels
from nitro.envs.soccar.sphere_contacts import check_reach, sphere_contacts
from nitro.envs.soccar.vec import cross, dot, eager_cpu_width


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


def empty_manifolds(
    n: int, dtype: torch.dtype, device: torch.device, slots: int = MANIFOLD_SLOTS
) -> ContactManifolds:
    """N bodies' manifolds before the tick's first contact: ``slots`` free slots each."""
    offset = torch.zeros(n, slots, MANIFOLD_POINTS, 3, dtype=dtype, device=device)
    return ContactManifolds(
        object=torch.full((n, slots), -1, dtype=torch.int32, device=device),
        count=torch.zeros(n, slots, dtype=torch.int32, device=device),
        offset=offset,
        point=torch.zeros_like(offset),
        normal=torch.zeros_like(offset),
        depth=torch.zeros(n, slots, MANIFOLD_POINTS, dtype=dtype, device=device),
    )


def add_manifold_point(
    manifolds: ContactManifolds,
    new_object: torch.Tensor,
    new_offset: torch.Tensor,
    new_point: torch.Tensor,
    new_normal: torch.Tensor,
    new_depth: torch.Tensor,
) -> ContactManifolds:
    """btManifoldResult::addContactPoint / btPersistentManifold::addManifoldPoint of one new contact
    per body (object [N], -1 for none; offset, point, normal [N, 3]; depth [N]).

    The contact goes to its object's manifold (else the first free slot; objects beyond the
    manifolds' slots are ignored), appended or, once that holds 4 points, replacing the one
    `sort_cached_points` picks.
    """
    obj, count = manifolds.object, manifolds.count
    device = obj.device
    rows = torch.arange(obj.shape[0], device=device)
    slots = torch.arange(obj.shape[1], device=device)
    points = torch.arange(MANIFOLD_POINTS, device=device)
    match = obj == new_object[:, None]
    free = obj < 0
    has_slot = match.any(1)
    slot = torch.where(has_slot, torch.argmax(match.to(torch.int8), 1), torch.argmax(free.to(torch.int8), 1))
    ok = (new_object >= 0) & (has_slot | free.any(1))
    held = count[rows, slot]
    full = held >= MANIFOLD_POINTS
    replaced = sort_cached_points(
        manifolds.offset[rows, slot], manifolds.depth[rows, slot], new_offset, new_depth
    )
    index = torch.where(full, replaced, held.to(torch.int64))
    at_slot = ok[:, None] & (slots == slot[:, None])  # [N, S]
    at_point = at_slot[:, :, None] & (points == index[:, None, None])  # [N, S, 4]
    return ContactManifolds(
        object=torch.where(at_slot, new_object[:, None], obj),
        count=torch.where(at_slot & ~full[:, None], count + 1, count),
        offset=torch.where(at_point[..., None], new_offset[:, None, None, :], manifolds.offset),
        point=torch.where(at_point[..., None], new_point[:, None, None, :], manifolds.point),
        normal=torch.where(at_point[..., None], new_normal[:, None, None, :], manifolds.normal),
        depth=torch.where(at_point, new_depth[:, None, None], manifolds.depth),
    )


def build_manifolds(contacts: SphereContacts, slots: int = MANIFOLD_SLOTS) -> ContactManifolds:
    """File one tick's contacts, in Bullet's order, into ``slots`` per-object manifolds
    (`add_manifold_point`).

    Of the many triangles a ball can touch in the dense goal net, only 4 per mesh file count, chosen
    by Bullet's visiting order.
    """
    n = contacts.object.shape[0]
    manifolds = empty_manifolds(n, contacts.offset.dtype, contacts.object.device, slots)
    for k in range(eager_cpu_width(contacts.count, contacts.object.shape[1])):  # in Bullet's order
        manifolds = add_manifold_point(
            manifolds,
            contacts.object[:, k],
            contacts.offset[:, k],
            contacts.point[:, k],
            contacts.normal[:, k],
            contacts.depth[:, k],
        )
    # btPersistentManifold::refreshContactPoints runs next in Bullet; on points made this tick it
    # changes nothing (same transforms), so it is left out.
    return manifolds


def sphere_manifolds(
    mesh: ArenaMesh, centers: torch.Tensor, radius: float, gap: float, use_kernels: bool | None = None
) -> ContactManifolds:
    """Contact manifolds of spheres [N, 3] (UU) of ``radius`` with the arena, as Bullet builds them.

    Every feature within ``gap`` of the sphere contributes a point (`sphere_contacts`), filed per
    arena object, 4 at most. On CUDA one Triton kernel does both (when Triton is importable);
    ``use_kernels`` forces the kernel or this PyTorch reference.
    """
    if kernels.use_kernels(centers, use_kernels):
        check_reach(mesh, radius, gap)
        return manifold_kernels.launch_sphere_manifolds(mesh, centers, radius, gap)
    return build_manifolds(sphere_contacts(mesh, centers, radius, gap, MAX_NEW_CONTACTS))
