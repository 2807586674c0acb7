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

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh.broadphase import ArenaBullet, aabbs_overlap, broadphase_cell
from nitro.envs.soccar.contacts import PLANE_OBJECT_BASE, CarWorldContacts
from nitro.envs.soccar.mutators import TickParams
from nitro.envs.soccar.vec import eager_cpu

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
        if eager_cpu(running) and not bool(running.any()):  # sync-ok: eager CPU only
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


def ball_manifold_count(
    arena: ArenaBullet, pos: torch.Tensor, vel: torch.Tensor, sleeping: torch.Tensor, params: TickParams
) -> torch.Tensor:
    """The ball's manifolds [N] int64: one per pair with an arena object, which its broadphase box
    (the sphere's, 0.08 BT wider in RocketSim, grown by 0.02 and stretched to the predicted
    position) overlaps: the planes, and the mesh files registered in its cell. A sleeping ball
    collides with nothing. ``pos`` / ``vel`` (damped) [N, 3] UU."""
    center = pos * C.UU_TO_BT_F32
    extent = float(np.float32(np.float32(params.ball_radius) * np.float32(C.UU_TO_BT_F32)) + np.float32(0.08))
    predicted = center + (vel * C.UU_TO_BT_F32) * params.tick_time
    bp_min = torch.minimum(center - extent, predicted - extent) - C.CONTACT_BREAKING_THRESHOLD
    bp_max = torch.maximum(center + extent, predicted + extent) + C.CONTACT_BREAKING_THRESHOLD
    registered = arena.cell_meshes[broadphase_cell(arena, bp_min)]
    by_rank = ((registered[:, None] >> torch.arange(C.SOCCAR_MESH_COUNT, device=pos.device)) & 1) == 1
    mesh_pair = by_rank.gather(1, arena.load_rank.expand(pos.shape[0], -1))
    t = C.CONTACT_BREAKING_THRESHOLD
    meshes = mesh_pair & aabbs_overlap(bp_min[:, None], bp_max[:, None], arena.mesh_min - t, arena.mesh_max + t)
    planes = aabbs_overlap(bp_min[:, None], bp_max[:, None], arena.plane_min - t, arena.plane_max + t)
    return torch.where(sleeping, 0, meshes.sum(1) + planes.sum(1))
