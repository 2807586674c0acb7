"""The kernels' contact manifolds (btPersistentManifold) and the sphere-vs-arena query that fills
them: the twin of `manifolds.py` (with `sphere_contacts.py`'s planes and cell walk, fused).

Per lane, 4 slots of 4 points, as tuples of [BLOCK] tensors: point q of a manifold is slot q // 4,
index q % 4. Each lane (one env, one thread) keeps its own manifold in registers, so filing a contact
is a chain of per-lane selects: no cross-lane reductions, no [BLOCK, 16] layouts (which made the
fused tick take many minutes to compile). A manifold is (obj, count, offset, point, normal, depth):
obj and count 4-tuples (per slot), depth a 16-tuple, offset / point / normal (x, y, z) triples of
16-tuples (point: empty when not kept).
"""

from __future__ import annotations

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh import ArenaMesh
from nitro.envs.soccar.contacts import (
    MANIFOLD_POINTS,
    MANIFOLD_SLOTS,
    MAX_NEW_CONTACTS,
    PLANE_OBJECT_BASE,
    ContactManifolds,
)
from nitro.envs.soccar.kernels import jit, require_triton, tl, triton, triton_op, warps, wrap_triton
from nitro.envs.soccar.kernels.arena_mesh import arena_tensors, cell_candidates, grid, grid_args
from nitro.envs.soccar.kernels.internal_edge import adjust_internal_edge_contacts
from nitro.envs.soccar.kernels.sphere_contacts import sphere_triangle_contact
from nitro.envs.soccar.kernels.vec import add, cross, dot, load, load_uniform, scale, store, sub, where

# The sphere query branches on its whole program per candidate triangle: one warp makes those
# branches warp-wide and the block reductions shuffles.
SPHERE_BLOCK = 32

# --- 16-tuples: one value per manifold point -----------------------------------------------------


@jit
def fill16(x):
    out = ()
    for q in tl.static_range(16):
        out = out + (x,)
    return out


@jit
def fill4(x):
    return (x, x, x, x)


@jit
def point_at(v, q: tl.constexpr):
    """Point q of a manifold's (x, y, z) triple of 16-tuples, as a 3-vector."""
    return v[0][q], v[1][q], v[2][q]


@jit
def in_slot(t, slot, p: tl.constexpr):
    """t[slot * 4 + p] for a 16-tuple t and a per-lane slot in 0..3."""
    return tl.where(slot == 0, t[p], tl.where(slot == 1, t[4 + p], tl.where(slot == 2, t[8 + p], t[12 + p])))


@jit
def put(t, at, index, value):
    """The 16-tuple t with ``value`` at (slot s, ``index``) wherever the slot mask at[s] holds."""
    out = ()
    for q in tl.static_range(16):
        out = out + (tl.where(at[q // 4] & (index == q % 4), value, t[q]),)
    return out


@jit
def put3(v, at, index, value):
    return (
        put(v[0], at, index, value[0]),
        put(v[1], at, index, value[1]),
        put(v[2], at, index, value[2]),
    )


@jit
def put_first(t, at, value):
    """The 16-tuple t with ``value`` as point 0 of slot s wherever at[s] holds."""
    out = ()
    for q in tl.static_range(16):
        if q % 4 == 0:
            out = out + (tl.where(at[q // 4], value, t[q]),)
        else:
            out = out + (t[q],)
    return out


@jit
def put_first3(v, at, value):
    return put_first(v[0], at, value[0]), put_first(v[1], at, value[1]), put_first(v[2], at, value[2])


# --- btPersistentManifold ------------------------------------------------------------------------


@jit
def area_sq(a, x, y, z, skip):
    """The squared area term of sortCachedPoints for new point a replacing one: |(a - x) × (y - z)|²."""
    u = cross(sub(a, x), sub(y, z))
    return tl.where(skip, 0.0, dot(u, u))


@jit
def sort_cached_points(slot, offset, depth, new_offset, new_depth):
    """btPersistentManifold::sortCachedPoints over the 4 points of ``slot``: which one the new
    point replaces (keep the deepest; of the others, the replacement giving the largest area)."""
    p = ()
    for i in tl.static_range(4):
        p = p + ((in_slot(offset[0], slot, i), in_slot(offset[1], slot, i), in_slot(offset[2], slot, i)),)
    deepest = tl.full(new_depth.shape, -1, tl.int32)
    best = new_depth
    for i in tl.static_range(4):  # KEEP_DEEPEST_POINT, strict <: the first of equal depths wins
        held_depth = in_slot(depth, slot, i)
        deepest = tl.where(held_depth < best, i, deepest)
        best = tl.minimum(best, held_depth)
    area0 = area_sq(new_offset, p[1], p[3], p[2], deepest == 0)  # gContactCalcArea3Points
    area1 = area_sq(new_offset, p[0], p[3], p[2], deepest == 1)
    area2 = area_sq(new_offset, p[0], p[3], p[1], deepest == 2)
    area3 = area_sq(new_offset, p[0], p[2], p[1], deepest == 3)
    replaced = tl.where(area1 > area0, 1, 0)  # closestAxis4 / maxAxis4: the first largest wins
    largest = tl.maximum(area0, area1)
    replaced = tl.where(area2 > largest, 2, replaced)
    largest = tl.maximum(largest, area2)
    return tl.where(area3 > largest, 3, replaced)


@jit
def add_manifold_point(
    ok, new_object, new_offset, new_point, new_normal, new_depth, manifolds, WITH_POINTS: tl.constexpr
):
    """btPersistentManifold::addManifoldPoint into the slot of ``new_object`` (`sort_cached_points`
    when full). The point on the arena is kept only WITH_POINTS (the query; the tick never reads it)."""
    obj, count, offset, point, normal, depth = manifolds
    # the slot holding new_object, else the first free one; none left: the point is dropped
    match = tl.full(new_depth.shape, -1, tl.int32)
    free = tl.full(new_depth.shape, -1, tl.int32)
    for k in tl.static_range(4):
        match = tl.where(obj[3 - k] == new_object, 3 - k, match)
        free = tl.where(obj[3 - k] < 0, 3 - k, free)
    slot = tl.where(match >= 0, match, free)
    ok = ok & (slot >= 0)
    held = tl.where(
        slot == 0, count[0], tl.where(slot == 1, count[1], tl.where(slot == 2, count[2], count[3]))
    )
    full = held >= 4
    index = held
    if tl.max((ok & full).to(tl.int32), axis=0) > 0:  # a 5th point: sortCachedPoints
        index = tl.where(full, sort_cached_points(slot, offset, depth, new_offset, new_depth), held)
    at = (ok & (slot == 0), ok & (slot == 1), ok & (slot == 2), ok & (slot == 3))
    grow = ~full
    new_obj = ()
    new_count = ()
    for s in tl.static_range(4):
        new_obj = new_obj + (tl.where(at[s], new_object, obj[s]),)
        new_count = new_count + (tl.where(at[s] & grow, count[s] + 1, count[s]),)
    if WITH_POINTS:
        point = put3(point, at, index, new_point)
    return (
        new_obj,
        new_count,
        put3(offset, at, index, new_offset),
        point,
        put3(normal, at, index, new_normal),
        put(depth, at, index, new_depth),
    )


@jit
def sphere_manifolds(
    center,
    live,
    radius,
    gap,
    arena,
    grid,
    NUM_PLANES: tl.constexpr,
    PLANE_BASE: tl.constexpr,
    MAX_CONTACTS: tl.constexpr,
    DEGENERATE_L2: tl.constexpr,
    SIMD_EPSILON: tl.constexpr,
    MAX_ANGLE: tl.constexpr,
    EDGE_DISTANCE: tl.constexpr,
    WITH_POINTS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Every contact of the sphere at each lane's ``center``, in Bullet's order, filed into 4-point
    manifolds. ``arena``: the mesh's pointers (triangles, their bounds, meshes, edge angles and
    flags, plane normals and offsets, cell starts and lists); ``grid``: from `arena_mesh.grid`.
    Float arguments must already be float32 (the kernels cast theirs on entry)."""
    tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr = arena[:5]
    plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr = arena[5:]
    reach = radius + gap
    zero = tl.zeros([BLOCK], tl.float32)
    zero3 = (zero, zero, zero)
    vectors = (fill16(zero), fill16(zero), fill16(zero))
    points = ((), (), ())
    if WITH_POINTS:
        points = vectors
    empty = fill4(tl.full([BLOCK], -1, tl.int32))
    manifolds = (empty, fill4(tl.zeros([BLOCK], tl.int32)), vectors, points, vectors, fill16(zero))
    found = tl.zeros([BLOCK], tl.int32)
    # Planes first (btConvexPlaneCollisionAlgorithm), each its own object with one point: the
    # k-th plane a lane touches takes slot k (what `add_manifold_point` does for a new object when
    # the slots before hold the other planes), so no slot search and no reduction.
    for p in range(NUM_PLANES):  # a loop, not unrolled
        plane_normal = load_uniform(plane_normals_ptr + p * 3)
        plane_d = tl.load(plane_offsets_ptr + p)
        plane_depth = dot(center, plane_normal) - plane_d - radius
        plane_has = live & (plane_depth < gap) & (found < MAX_CONTACTS)
        if tl.max(plane_has.to(tl.int32), axis=0) > 0:  # skip the bookkeeping when no lane touches
            obj, count, offset, point, normal, depth = manifolds
            at = (
                plane_has & (found == 0),
                plane_has & (found == 1),
                plane_has & (found == 2),
                plane_has & (found == 3),
            )
            plane_offset = add(zero3, scale(plane_normal, -radius))
            if WITH_POINTS:
                point = put_first3(
                    point, at, sub(add(center, plane_offset), scale(plane_normal, plane_depth))
                )
            manifolds = (
                (
                    tl.where(at[0], PLANE_BASE + p, obj[0]),
                    tl.where(at[1], PLANE_BASE + p, obj[1]),
                    tl.where(at[2], PLANE_BASE + p, obj[2]),
                    tl.where(at[3], PLANE_BASE + p, obj[3]),
                ),
                (
                    tl.where(at[0], 1, count[0]),
                    tl.where(at[1], 1, count[1]),
                    tl.where(at[2], 1, count[2]),
                    tl.where(at[3], 1, count[3]),
                ),
                put_first3(offset, at, plane_offset),
                point,
                put_first3(normal, at, add(zero3, plane_normal)),
                put_first(depth, at, plane_depth),
            )
        found += plane_has.to(tl.int32)
    # The cell's triangles, in Bullet's visiting order.
    start, length = cell_candidates(center, live, cell_start_ptr, grid[0], grid[1], grid[2])
    length = tl.where(live, length, 0)
    longest = tl.max(length, axis=0)
    # A triangle whose plane, or whose bounding ball, is out of the sphere's reach cannot touch
    # it: a cheap test on precomputed bounds (`ArenaMesh.tri_bounds`) skips the full test when
    # no lane of the block is in reach. The 0.05-UU margin is 10x what the tests can be off by
    # (the normals agree with the reference's float32 ones to 2.2e-7, over lever arms under
    # 4,100 UU; the dot products round by ~0.002 UU), so no contact of the reference is skipped.
    screen = reach + 0.05
    j = 0
    while j < longest:  # a while loop: Triton's interpreter cannot range() over a reduced value
        valid = live & (j < length)
        tri = tl.load(cell_tris_ptr + start + j, mask=valid, other=0)
        tri_normal = load(tri_bounds_ptr + tri * 8, valid, (0.0, 0.0, 1.0))
        tri_plane_d = tl.load(tri_bounds_ptr + tri * 8 + 3, mask=valid, other=0.0)
        to_centroid = sub(center, load(tri_bounds_ptr + tri * 8 + 4, valid, (0.0, 0.0, 0.0)))
        bound = screen + tl.load(tri_bounds_ptr + tri * 8 + 7, mask=valid, other=0.0)
        in_reach = (
            valid
            & (tl.abs(dot(center, tri_normal) - tri_plane_d) < screen)
            & (dot(to_centroid, to_centroid) < bound * bound)
        )
        if tl.max(in_reach.to(tl.int32), axis=0) > 0:
            v0 = load(tri_ptr + tri * 9, in_reach, (0.0, 0.0, 0.0))
            v1 = load(tri_ptr + tri * 9 + 3, in_reach, (1.0, 0.0, 0.0))
            v2 = load(tri_ptr + tri * 9 + 6, in_reach, (0.0, 1.0, 0.0))
            has, point, geo_normal, depth = sphere_triangle_contact(
                center, v0, v1, v2, radius, reach, DEGENERATE_L2, SIMD_EPSILON
            )
            has = in_reach & has & (found < MAX_CONTACTS)
            found += has.to(tl.int32)
            if tl.max(has.to(tl.int32), axis=0) > 0:
                # btManifoldResult::addContactPoint: the point on the sphere = surface point + normal * depth
                offset = sub(add(point, scale(geo_normal, depth)), center)
                edge_angle = load(edge_angle_ptr + tri * 3, has, (7.0, 7.0, 7.0))
                edge_flags = tl.load(edge_flags_ptr + tri, mask=has, other=0)
                normal, changed = adjust_internal_edge_contacts(
                    geo_normal,
                    point,
                    v0,
                    v1,
                    v2,
                    tri_normal,
                    edge_angle,
                    edge_flags,
                    MAX_ANGLE,
                    EDGE_DISTANCE,
                )
                point = where(changed, sub(add(center, offset), scale(normal, depth)), point)
                tri_mesh = tl.load(tri_mesh_ptr + tri, mask=has, other=0)
                manifolds = add_manifold_point(
                    has, tri_mesh, offset, point, normal, depth, manifolds, WITH_POINTS
                )
        j += 1
    return manifolds


@jit
def sphere_manifolds_kernel(
    # queries
    centers_ptr,
    n,
    radius,
    gap,
    # arena
    tri_ptr,
    tri_bounds_ptr,
    tri_mesh_ptr,
    edge_angle_ptr,
    edge_flags_ptr,
    plane_normals_ptr,
    plane_offsets_ptr,
    cell_start_ptr,
    cell_tris_ptr,
    ox0,
    oy0,
    oz0,
    cell_size,
    dim_x,
    dim_y,
    dim_z,
    # outputs
    obj_out,
    count_out,
    offset_out,
    point_out,
    normal_out,
    depth_out,
    NUM_PLANES: tl.constexpr,
    PLANE_BASE: tl.constexpr,
    MAX_CONTACTS: tl.constexpr,
    DEGENERATE_L2: tl.constexpr,
    SIMD_EPSILON: tl.constexpr,
    MAX_ANGLE: tl.constexpr,
    EDGE_DISTANCE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # Float scalars arrive as fp32 from eager launches but as fp64 from torch.compile (Inductor
    # types Python floats as fp64): cast them once, so every value below is float32.
    radius = tl.cast(radius, tl.float32)
    gap = tl.cast(gap, tl.float32)
    arena_grid = grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    center = load(centers_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    arena = (tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr)
    arena = arena + (plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr)
    obj, count, offset, point, normal, depth = sphere_manifolds(
        center,
        live,
        radius,
        gap,
        arena,
        arena_grid,
        NUM_PLANES,
        PLANE_BASE,
        MAX_CONTACTS,
        DEGENERATE_L2,
        SIMD_EPSILON,
        MAX_ANGLE,
        EDGE_DISTANCE,
        True,
        BLOCK,
    )
    for s in tl.static_range(4):
        tl.store(obj_out + lane * 4 + s, obj[s], mask=live)
        tl.store(count_out + lane * 4 + s, count[s], mask=live)
    for q in tl.static_range(16):
        at = lane * 48 + q * 3
        store(offset_out + at, point_at(offset, q), mask=live)
        store(point_out + at, point_at(point, q), mask=live)
        store(normal_out + at, point_at(normal, q), mask=live)
        tl.store(depth_out + lane * 16 + q, depth[q], mask=live)


@triton_op("nitro::soccar_sphere_manifolds", mutates_args={})
def sphere_manifolds_op(
    centers: torch.Tensor,
    radius: float,
    gap: float,
    tri: torch.Tensor,
    tri_bounds: torch.Tensor,
    tri_mesh: torch.Tensor,
    edge_angle: torch.Tensor,
    edge_flags: torch.Tensor,
    plane_normals: torch.Tensor,
    plane_offsets: torch.Tensor,
    cell_start: torch.Tensor,
    cell_tris: torch.Tensor,
    grid: list[float],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    n = centers.shape[0]
    dev = centers.device
    obj = torch.empty(n, 4, dtype=torch.int32, device=dev)
    count = torch.empty(n, 4, dtype=torch.int32, device=dev)
    offset = torch.empty(n, 4, 4, 3, device=dev)
    point = torch.empty(n, 4, 4, 3, device=dev)
    normal = torch.empty(n, 4, 4, 3, device=dev)
    depth = torch.empty(n, 4, 4, device=dev)
    wrap_triton(sphere_manifolds_kernel)[(triton.cdiv(n, SPHERE_BLOCK),)](
        centers,
        n,
        radius,
        gap,
        tri,
        tri_bounds,
        tri_mesh,
        edge_angle,
        edge_flags,
        plane_normals,
        plane_offsets,
        cell_start,
        cell_tris,
        grid[0],
        grid[1],
        grid[2],
        grid[3],
        int(grid[4]),
        int(grid[5]),
        int(grid[6]),
        obj,
        count,
        offset,
        point,
        normal,
        depth,
        NUM_PLANES=4,
        PLANE_BASE=PLANE_OBJECT_BASE,
        MAX_CONTACTS=MAX_NEW_CONTACTS,
        DEGENERATE_L2=C.DEGENERATE_TRIANGLE_L2,
        SIMD_EPSILON=C.SIMD_EPSILON_UU2,
        MAX_ANGLE=C.INTERNAL_EDGE_MAX_ANGLE,
        EDGE_DISTANCE=C.INTERNAL_EDGE_DISTANCE_THRESHOLD,
        BLOCK=SPHERE_BLOCK,
        num_warps=warps(SPHERE_BLOCK),
    )
    return obj, count, offset, point, normal, depth


def launch_sphere_manifolds(
    mesh: ArenaMesh, centers: torch.Tensor, radius: float, gap: float
) -> ContactManifolds:
    """`manifolds.sphere_manifolds` in one kernel launch (the same result as its PyTorch reference)."""
    require_triton()
    if MANIFOLD_SLOTS != 4 or MANIFOLD_POINTS != 4:
        raise NotImplementedError("the kernel holds 4 manifolds of 4 points")
    obj, count, offset, point, normal, depth = sphere_manifolds_op(
        centers.contiguous(),
        float(radius),
        float(gap),
        *arena_tensors(mesh),
        grid_args(mesh),
    )
    return ContactManifolds(object=obj, count=count, offset=offset, point=point, normal=normal, depth=depth)
