"""The order Bullet solves contact manifolds in: btSimulationIslandManager's sort of the world's
manifolds by island, per env.

Reference: the Bullet 3.24 that RocketSim (ZealanL/RocketSim, MIT) vendors
(`btSimulationIslandManager::buildAndProcessIslands`, `btAlignedObjectArray::quickSort` with
btPersistentManifoldSortPredicate) and RocketSim's `btRSBroadphase`, which re-adds every pair each
tick: the dispatcher lists manifolds in pair order (the ball's pairs, then each car's; a body's
arena pairs in the arena objects' load order, planes last), empty ones included. Gauss-Seidel
visits contacts in the sorted order, so where a body's manifolds sit decides its solve.
"""

from __future__ import annotations

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh.broadphase import ArenaBullet, aabbs_overlap, broadphase_cell
from nitro.envs.soccar.contacts import PLANE_OBJECT_BASE
from nitro.envs.soccar.mutators import TickParams
from nitro.envs.soccar.vec import eager_cpu

MAX_BODY_MANIFOLDS = C.SOCCAR_MESH_COUNT + len(C.ARENA_PLANES)  # a body pairs with each arena object once
ISLAND_SORT_STEPS = 20  # recursion levels of the quicksort: at most 14 in 20,000 random worlds of 7 bodies


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


def island_tags(pairs: torch.Tensor, live: torch.Tensor, num_bodies: int) -> torch.Tensor:
    """Each body's island [N, B] int64 (btUnionFind after findUnions, storeIslandActivationState).

    ``pairs`` [N, P, 2]: the bodies (0 the ball, 1 + c car c) of the broadphase's pairs between
    bodies, in pair order, the lower handle first; ``live`` [N, P]: the pair exists (their
    broadphase boxes overlap). unite(p, q) hangs p's root under q's, so the island takes the root of
    the later body (path compression never changes a root).
    """
    n = pairs.shape[0]
    roots = torch.arange(num_bodies, device=pairs.device).expand(n, num_bodies).clone()
    for k in range(pairs.shape[1]):
        root_p = roots.gather(1, pairs[:, k, :1])
        root_q = roots.gather(1, pairs[:, k, 1:])
        roots = torch.where(live[:, k, None] & (roots == root_p), root_q, roots)
    return roots


def _before(cumulative: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """cumulative [N, M] at positions ``first`` [N, M], 0 where first < 0."""
    return torch.where(first >= 0, cumulative.gather(1, first.clamp(min=0)), 0)


def quicksort_positions(keys: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Where btAlignedObjectArray::quickSort (key <) puts each of the first ``count`` [N] elements of
    ``keys`` [N, M]: [N, M] int64 (the element's index past ``count``).

    Every partition of quickSortInternal swaps, for k = 0, 1, ..., the k-th element from the left
    with key >= the pivot and the k-th from the right with key <= it, while the first lies left of
    the second, and then recurses on the two ends. Partitions of disjoint ranges do not interact, so
    all ranges of a recursion level are partitioned at once, each from its candidates' ranks.
    """
    n, m = keys.shape
    device = keys.device
    positions = torch.arange(m, device=device).expand(n, m)
    element = positions.clone()  # which original element sits at each position
    key = keys.clone()
    lo = torch.zeros_like(element)
    hi = (count[:, None] - 1).expand(n, m).clone()
    active = (positions < count[:, None]) & (lo < hi)
    none_left, none_right = m + 1, -2
    for _ in range(ISLAND_SORT_STEPS):
        if eager_cpu(active) and not bool(active.any()):  # sync-ok: eager CPU only
            break
        pivot = key.gather(1, torch.div(lo + hi, 2, rounding_mode="floor").clamp(min=0))
        ge, le = active & (key >= pivot), active & (key <= pivot)
        first = lo - 1  # the position before each range: cumulative counts are taken from there
        c_ge = torch.cumsum(ge.to(torch.int64), 1)
        rank_ge = c_ge - _before(c_ge, first) - 1  # k of a left candidate
        c_le = torch.cumsum(le.to(torch.int64), 1)
        rank_le = c_le.gather(1, hi.clamp(min=0)) - c_le  # k of a right candidate (from the right)
        # the k-th candidates of each range, stored at position lo + k
        left_at = torch.full((n, m + 1), none_left, dtype=torch.int64, device=device)
        left_at = left_at.scatter(1, torch.where(ge, lo + rank_ge, m), torch.where(ge, positions, none_left))[:, :m]
        right_at = torch.full((n, m + 1), none_right, dtype=torch.int64, device=device)
        right_at = right_at.scatter(1, torch.where(le, lo + rank_le, m), torch.where(le, positions, none_right))[:, :m]
        swapped = (left_at <= right_at) & (right_at >= 0)  # at lo + k: the k-th pair swaps
        c_sw = torch.cumsum(swapped.to(torch.int64), 1)
        swaps = c_sw.gather(1, hi.clamp(min=0)) - _before(c_sw, first)  # K, per position's range
        # the swaps, as a permutation of positions
        source = torch.cat((positions, positions[:, :1]), 1)  # a spare last column takes the non-swaps
        source = source.scatter(1, torch.where(swapped, left_at, m), torch.where(swapped, right_at, m))
        source = source.scatter(1, torch.where(swapped, right_at, m), torch.where(swapped, left_at, m))[:, :m]
        element, key = element.gather(1, source), key.gather(1, source)
        # where the ranges split: after the last swap, i and j scan on to the next candidates
        last_left = left_at.gather(1, (lo + swaps - 1).clamp(0, m - 1))
        last_right = right_at.gather(1, (lo + swaps - 1).clamp(0, m - 1))
        next_left = torch.where(lo + swaps <= hi, left_at.gather(1, (lo + swaps).clamp(0, m - 1)), none_left)
        next_right = torch.where(lo + swaps <= hi, right_at.gather(1, (lo + swaps).clamp(0, m - 1)), none_right)
        i0, j0 = last_left + 1, last_right - 1
        scans = i0 <= j0
        i = torch.where(scans, torch.minimum(next_left, last_right), i0)
        j = torch.where(scans, torch.maximum(next_right, last_left), j0)
        left_part, right_part = active & (positions <= j), active & (positions >= i)
        hi = torch.where(left_part, j, hi)
        lo = torch.where(right_part, i, lo)
        active = (left_part | right_part) & (lo < hi)
    placed = torch.empty_like(element).scatter(1, element, positions)
    return placed


def ball_pairs(arena: ArenaBullet, pos: torch.Tensor, vel: torch.Tensor, sleeping: torch.Tensor, params: TickParams):
    """The ball's broadphase box and its pairs with the arena: (aabb_min, aabb_max [N, 3] BT,
    mesh_kept [N, M] by file, plane_kept [N, 4]). The box is the sphere's (0.08 BT wider in
    RocketSim) at its position and its predicted one, grown by 0.02; it pairs with the planes and
    the mesh files registered in its cell whose boxes it meets. A sleeping ball collides with nothing
    in the arena (both sides asleep). ``pos`` / ``vel`` (damped) [N, 3] UU."""
    center = pos * C.UU_TO_BT_F32
    extent = C.f32(C.f32(C.f32(params.ball_radius) * C.UU_TO_BT_F32) + C.f32(0.08))
    predicted = center + (vel * C.UU_TO_BT_F32) * params.tick_time
    bp_min = torch.minimum(center - extent, predicted - extent) - C.CONTACT_BREAKING_THRESHOLD
    bp_max = torch.maximum(center + extent, predicted + extent) + C.CONTACT_BREAKING_THRESHOLD
    registered = arena.cell_meshes[broadphase_cell(arena, bp_min)]
    by_rank = ((registered[:, None] >> torch.arange(C.SOCCAR_MESH_COUNT, device=pos.device)) & 1) == 1
    mesh_pair = by_rank.gather(1, arena.load_rank.expand(pos.shape[0], -1))
    t = C.CONTACT_BREAKING_THRESHOLD
    meshes = mesh_pair & aabbs_overlap(bp_min[:, None], bp_max[:, None], arena.mesh_min - t, arena.mesh_max + t)
    planes = aabbs_overlap(bp_min[:, None], bp_max[:, None], arena.plane_min - t, arena.plane_max + t)
    awake = ~sleeping[:, None]
    return bp_min, bp_max, meshes & awake, planes & awake
