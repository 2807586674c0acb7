"""Triton kernels of the arena queries: each lane (env) loops over just its own grid cell's list.

The PyTorch functions in `mesh.py` / `collide.py` are the reference these must match (a `gpu` test
compares them at scale; `TRITON_INTERPRET=1` runs them on the CPU). They are registered with
``torch.library.triton_op``, so ``torch.compile`` traces through them and CUDA graphs capture them.
Triton ships with CUDA builds of PyTorch only, so this module is imported lazily, on CUDA paths.

Kernels:
- `sphere_manifolds`: Bullet's sphere-vs-arena contacts (planes, SphereTriangleDetector,
  btAdjustInternalEdgeContacts), filed in Bullet's order into 4-point manifolds per arena object.
- `ray_cast`: closest hit of a segment (btTriangleRaycastCallback).
- `box_contacts`: oriented boxes against triangles and planes by separating axes.
"""

from __future__ import annotations

import torch

try:  # Triton comes with CUDA builds of PyTorch; CPU installs use the PyTorch reference instead.
    import triton
    import triton.language as tl
    from torch.library import triton_op, wrap_triton
except ImportError:  # pragma: no cover - exercised on CPU-only installs
    triton = None

from nitro.envs.soccar import collide
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.mesh import PLANE_OBJECT_BASE, ArenaMesh, BoxContacts, RayHits

BLOCK = 64  # queries per program of the ray and box kernels
# The sphere query branches on its whole program per candidate triangle: one warp makes those
# branches warp-wide and the block reductions shuffles.
SPHERE_BLOCK = 32
_SIMD_EPSILON_UU2 = float(torch.finfo(torch.float32).eps) * C.BT_TO_UU**2
_DEGENERATE_L2 = float(torch.finfo(torch.float32).eps) ** 2 * C.BT_TO_UU**4


def available() -> bool:
    """Triton can be imported (a CUDA build of PyTorch, or TRITON_INTERPRET=1 for CPU testing)."""
    return triton is not None


if triton is not None:
    # --- 3-vectors: (x, y, z) tuples of [BLOCK] tensors (one lane = one env) or of scalars ---------
    # Each helper does its float operations in the order the scalar code did, component by component.

    @triton.jit
    def _add(a, b):
        return a[0] + b[0], a[1] + b[1], a[2] + b[2]

    @triton.jit
    def _sub(a, b):
        return a[0] - b[0], a[1] - b[1], a[2] - b[2]

    @triton.jit
    def _scale(a, s):
        return a[0] * s, a[1] * s, a[2] * s

    @triton.jit
    def _dot(a, b):
        return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]

    @triton.jit
    def _cross(a, b):
        return a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]

    @triton.jit
    def _where(c, a, b):
        return tl.where(c, a[0], b[0]), tl.where(c, a[1], b[1]), tl.where(c, a[2], b[2])

    @triton.jit
    def _vec(ptr):
        """ptr[0], ptr[1], ptr[2] (a scalar 3-vector, as the plane normals)."""
        return tl.load(ptr), tl.load(ptr + 1), tl.load(ptr + 2)

    @triton.jit
    def _load(ptr, mask, other):
        """ptr[0], ptr[1], ptr[2] per lane; ``other``: the value of each component where masked."""
        return (
            tl.load(ptr, mask=mask, other=other[0]),
            tl.load(ptr + 1, mask=mask, other=other[1]),
            tl.load(ptr + 2, mask=mask, other=other[2]),
        )

    @triton.jit
    def _store(ptr, v, mask):
        tl.store(ptr, v[0], mask=mask)
        tl.store(ptr + 1, v[1], mask=mask)
        tl.store(ptr + 2, v[2], mask=mask)

    @triton.jit
    def _grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z):
        """The grid's origin, cell size and dimensions, cast: float scalars arrive as fp32 from eager
        launches but as fp64 from torch.compile (Inductor types Python floats as fp64)."""
        origin = (tl.cast(ox0, tl.float32), tl.cast(oy0, tl.float32), tl.cast(oz0, tl.float32))
        dims = (tl.cast(dim_x, tl.int32), tl.cast(dim_y, tl.int32), tl.cast(dim_z, tl.int32))
        return origin, tl.cast(cell_size, tl.float32), dims

    @triton.jit
    def _cell_list(c, live, cell_start_ptr, origin, cell_size, dims):
        """Where the list of the grid cell holding point c starts in ``cell_tris``, and its length."""
        ix = tl.minimum(tl.maximum(tl.floor((c[0] - origin[0]) / cell_size).to(tl.int32), 0), dims[0] - 1)
        iy = tl.minimum(tl.maximum(tl.floor((c[1] - origin[1]) / cell_size).to(tl.int32), 0), dims[1] - 1)
        iz = tl.minimum(tl.maximum(tl.floor((c[2] - origin[2]) / cell_size).to(tl.int32), 0), dims[2] - 1)
        cell = (ix * dims[1] + iy) * dims[2] + iz
        first = tl.load(cell_start_ptr + cell, mask=live, other=0)
        return first, tl.load(cell_start_ptr + cell + 1, mask=live, other=0) - first

    @triton.jit
    def _atan2(y, x):
        """atan2 from Cephes atanf (|error| ~1e-7 rad): libdevice's is missing in the interpreter."""
        ax = tl.abs(x)
        ay = tl.abs(y)
        big = tl.maximum(ax, ay)
        small = tl.minimum(ax, ay)
        t = small / tl.where(big > 0, big, 1.0)
        hi = t > 0.4142135623730950  # tan(pi / 8)
        z = tl.where(hi, (t - 1.0) / (t + 1.0), t)
        base = tl.where(hi, 0.7853981633974483, 0.0)
        zz = z * z
        r = base + (
            (((8.05374449538e-2 * zz - 1.38776856032e-1) * zz + 1.99777106478e-1) * zz - 3.33329491539e-1)
            * zz
            * z
            + z
        )
        r = tl.where(ay > ax, 1.5707963267948966 - r, r)
        r = tl.where(x < 0, 3.141592653589793 - r, r)
        return tl.where(y < 0, -r, r)

    @triton.jit
    def _neg(a):
        return -a[0], -a[1], -a[2]

    @triton.jit
    def _rotate(v, k, angle):
        """Rotate v about axis k (any length) by angle, right-handed (Rodrigues)."""
        k = _scale(k, 1.0 / tl.sqrt(_dot(k, k)))
        c = tl.cos(angle)
        s = tl.sin(angle)
        kv = _dot(k, v) * (1 - c)
        return _add(_add(_scale(v, c), _scale(_cross(k, v), s)), _scale(k, kv))

    # --- sphere vs triangle (SphereTriangleDetector::collide, RocketSim's variant) ---------------

    @triton.jit
    def _closest_point(p, a, b, c):
        ab = _sub(b, a)
        ac = _sub(c, a)
        d1 = _dot(ab, _sub(p, a))
        d2 = _dot(ac, _sub(p, a))
        d3 = _dot(ab, _sub(p, b))
        d4 = _dot(ac, _sub(p, b))
        d5 = _dot(ab, _sub(p, c))
        d6 = _dot(ac, _sub(p, c))
        va = d3 * d6 - d5 * d4
        vb = d5 * d2 - d1 * d6
        vc = d1 * d4 - d3 * d2
        denom = 1.0 / (va + vb + vc)
        o = _add(_add(a, _scale(ab, vb * denom)), _scale(ac, vc * denom))
        m6 = (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0)
        o = _where(m6, _add(b, _scale(_sub(c, b), (d4 - d3) / tl.where(m6, (d4 - d3) + (d5 - d6), 1.0))), o)
        m5 = (vb <= 0) & (d2 >= 0) & (d6 <= 0)
        o = _where(m5, _add(a, _scale(ac, d2 / tl.where(m5, d2 - d6, 1.0))), o)
        m4 = (vc <= 0) & (d1 >= 0) & (d3 <= 0)
        o = _where(m4, _add(a, _scale(ab, d1 / tl.where(m4, d1 - d3, 1.0))), o)
        o = _where((d6 >= 0) & (d5 <= d6), c, o)
        o = _where((d3 >= 0) & (d4 <= d3), b, o)
        return _where((d1 <= 0) & (d2 <= 0), a, o)

    @triton.jit
    def _sphere_triangle(c, a, b, q, radius, reach, DEGENERATE_L2: tl.constexpr, SIMD_EPSILON: tl.constexpr):
        """The contact of the sphere at c with triangle (a, b, q): has, point, normal, depth."""
        e1 = _sub(b, a)
        e2 = _sub(q, a)
        f = _cross(e1, e2)
        l2 = _dot(f, f)
        n = _scale(f, 1.0 / tl.sqrt(tl.where(l2 > 0, l2, 1.0)))
        w = _sub(c, a)
        plane = _dot(w, n)
        n = _where(plane < 0, _neg(n), n)
        plane = tl.abs(plane)
        l2s = tl.where(l2 > 0, l2, 1.0)
        gamma = _dot(_cross(e1, w), f) / l2s
        beta = _dot(_cross(w, e2), f) / l2s
        alpha = 1 - gamma - beta
        inside = (alpha >= 0) & (alpha <= 1) & (beta >= 0) & (beta <= 1) & (gamma >= 0) & (gamma <= 1)
        p = _where(inside, _sub(c, _scale(n, plane)), _closest_point(c, a, b, q))
        t = _sub(c, p)
        dist2 = _dot(t, t)
        has = (l2 >= DEGENERATE_L2) & (plane < reach) & (dist2 < reach * reach)
        tiny = dist2 <= SIMD_EPSILON
        dist = tl.sqrt(dist2)
        g = _where(tiny, n, _scale(t, 1.0 / tl.where(tiny, 1.0, dist)))
        return has, p, g, tl.where(tiny, -radius, dist - radius)

    @triton.jit
    def _edge_distance(p, a, b):
        d = _sub(b, a)
        t = _dot(_sub(p, a), d) / _dot(d, d)
        t = tl.minimum(tl.maximum(t, 0.0), 1.0)
        e = _sub(p, _add(a, _scale(d, t)))
        return tl.sqrt(_dot(e, e))

    @triton.jit
    def _adjust_internal_edge(
        g, p, a, b, q, tn, angles, flags, MAX_ANGLE: tl.constexpr, EDGE_DISTANCE: tl.constexpr
    ):
        """btAdjustInternalEdgeContacts, as `mesh.adjust_internal_edge_contacts`: normal g at point p
        of triangle (a, b, q) (face normal tn, edge angles and flags): the normal, and if it changed."""
        ang0, ang1, ang2 = angles
        d0 = _edge_distance(p, a, b)
        d1 = _edge_distance(p, b, q)
        d2 = _edge_distance(p, q, a)
        h0 = tl.abs(ang0) < MAX_ANGLE
        h1 = tl.abs(ang1) < MAX_ANGLE
        h2 = tl.abs(ang2) < MAX_ANGLE
        big = 3.0e38
        k0 = tl.where(h0, d0, big)
        k1 = tl.where(h1, d1, big)
        k2 = tl.where(h2, d2, big)
        best = tl.where(k1 < k0, 1, 0)
        bestd = tl.minimum(k0, k1)
        best = tl.where(k2 < bestd, 2, best)
        bestd = tl.minimum(bestd, k2)
        hb = tl.where(best == 0, h0, tl.where(best == 1, h1, h2))
        near = hb & (bestd < EDGE_DISTANCE)
        angle = tl.where(best == 0, ang0, tl.where(best == 1, ang1, ang2))
        convex = ((flags >> best) & 1) == 1
        swap_b = ((flags >> (best + 3)) & 1) == 1
        e = _where(best == 0, _sub(a, b), _where(best == 1, _sub(b, q), _sub(q, a)))  # v0 - v1, ...
        ni = _scale(g, 1.0 / tl.sqrt(_dot(g, g)))
        sw = tl.where(convex, 1.0, -1.0)
        na = _scale(tn, sw)
        cb = _rotate(tn, e, angle)
        cb = _where(swap_b, _neg(cb), cb)
        back = (_dot(ni, na) < 0) & (_dot(ni, _scale(cb, sw)) < 0)
        concave = near & ((angle == 0) | back)
        ec = _cross(e, na)
        ec = _scale(ec, 1.0 / tl.sqrt(_dot(ec, ec)))
        cur = _atan2(_dot(g, ec), _dot(g, na))
        clamp = tl.where(angle < 0, cur < angle, cur > angle)
        cl = _rotate(g, e, angle - cur)
        use_clamp = near & (~concave) & clamp & (_dot(cl, tn) > 0)
        use_face = concave & (_dot(tn, ni) >= 0)
        return _where(use_face, tn, _where(use_clamp, cl, g)), use_clamp | use_face

    # --- the 4-point manifolds: per lane, 4 slots of 4 points, as tuples of [BLOCK] tensors ----------
    # Point q of a manifold is slot q // 4, index q % 4. Each lane (one env, one thread) keeps its own
    # manifold in registers, so filing a contact is a chain of per-lane selects: no cross-lane
    # reductions, no [BLOCK, 16] layouts (which made the fused tick take many minutes to compile).
    # A manifold is (obj, cnt, offset, point, normal, depth): obj and cnt 4-tuples (per slot), depth a
    # 16-tuple, offset / point / normal (x, y, z) triples of 16-tuples (point: empty when not kept).

    @triton.jit
    def _fill16(x):
        out = ()
        for q in tl.static_range(16):
            out = out + (x,)
        return out

    @triton.jit
    def _fill4(x):
        return (x, x, x, x)

    @triton.jit
    def _point(v, q: tl.constexpr):
        """Point q of a manifold's (x, y, z) triple of 16-tuples, as a 3-vector."""
        return v[0][q], v[1][q], v[2][q]

    @triton.jit
    def _in_slot(t, slot, p: tl.constexpr):
        """t[slot * 4 + p] for a 16-tuple t and a per-lane slot in 0..3."""
        return tl.where(
            slot == 0, t[p], tl.where(slot == 1, t[4 + p], tl.where(slot == 2, t[8 + p], t[12 + p]))
        )

    @triton.jit
    def _put(t, at, index, value):
        """The 16-tuple t with ``value`` at (slot s, ``index``) wherever the slot mask at[s] holds."""
        out = ()
        for q in tl.static_range(16):
            out = out + (tl.where(at[q // 4] & (index == q % 4), value, t[q]),)
        return out

    @triton.jit
    def _put3(v, at, index, value):
        return (
            _put(v[0], at, index, value[0]),
            _put(v[1], at, index, value[1]),
            _put(v[2], at, index, value[2]),
        )

    @triton.jit
    def _put_first(t, at, value):
        """The 16-tuple t with ``value`` as point 0 of slot s wherever at[s] holds."""
        out = ()
        for q in tl.static_range(16):
            if q % 4 == 0:
                out = out + (tl.where(at[q // 4], value, t[q]),)
            else:
                out = out + (t[q],)
        return out

    @triton.jit
    def _put_first3(v, at, value):
        return _put_first(v[0], at, value[0]), _put_first(v[1], at, value[1]), _put_first(v[2], at, value[2])

    @triton.jit
    def _area2(n, x, y, z, skip):
        """The squared area term of sortCachedPoints for new point n replacing one: |(n - x) × (y - z)|²."""
        u = _cross(_sub(n, x), _sub(y, z))
        return tl.where(skip, 0.0, _dot(u, u))

    @triton.jit
    def _replaced_point(slot, off, dep, new_off, nd):
        """btPersistentManifold::sortCachedPoints over the 4 points of ``slot``: which one the new
        point replaces (keep the deepest; of the others, the replacement giving the largest area)."""
        o = ()
        for i in tl.static_range(4):
            o = o + ((_in_slot(off[0], slot, i), _in_slot(off[1], slot, i), _in_slot(off[2], slot, i)),)
        deepest = tl.full(nd.shape, -1, tl.int32)
        bestd = nd
        for i in tl.static_range(4):
            dd = _in_slot(dep, slot, i)
            deepest = tl.where(dd < bestd, i, deepest)
            bestd = tl.minimum(bestd, dd)
        r0 = _area2(new_off, o[1], o[3], o[2], deepest == 0)
        r1 = _area2(new_off, o[0], o[3], o[2], deepest == 1)
        r2 = _area2(new_off, o[0], o[3], o[1], deepest == 2)
        r3 = _area2(new_off, o[0], o[2], o[1], deepest == 3)
        replaced = tl.where(r1 > r0, 1, 0)
        rbest = tl.maximum(r0, r1)
        replaced = tl.where(r2 > rbest, 2, replaced)
        rbest = tl.maximum(rbest, r2)
        return tl.where(r3 > rbest, 3, replaced)

    @triton.jit
    def _add_point(ok, new_obj, new_off, new_point, new_normal, nd, man, WITH_POINTS: tl.constexpr):
        """btPersistentManifold::addManifoldPoint into the slot of ``new_obj`` (sortCachedPoints when
        full), as `collide.build_manifolds`. The point on the arena is kept only WITH_POINTS (the
        query; the tick never reads it)."""
        obj, cnt, off, point, normal, dep = man
        # the slot holding new_obj, else the first free one; none left: the point is dropped
        match = tl.full(nd.shape, -1, tl.int32)
        free = tl.full(nd.shape, -1, tl.int32)
        for k in tl.static_range(4):
            match = tl.where(obj[3 - k] == new_obj, 3 - k, match)
            free = tl.where(obj[3 - k] < 0, 3 - k, free)
        slot = tl.where(match >= 0, match, free)
        ok = ok & (slot >= 0)
        held = tl.where(slot == 0, cnt[0], tl.where(slot == 1, cnt[1], tl.where(slot == 2, cnt[2], cnt[3])))
        full = held >= 4
        index = held
        if tl.max((ok & full).to(tl.int32), axis=0) > 0:  # a 5th point: sortCachedPoints
            index = tl.where(full, _replaced_point(slot, off, dep, new_off, nd), held)
        at = (ok & (slot == 0), ok & (slot == 1), ok & (slot == 2), ok & (slot == 3))
        grow = ~full
        new_objs = ()
        new_cnt = ()
        for s in tl.static_range(4):
            new_objs = new_objs + (tl.where(at[s], new_obj, obj[s]),)
            new_cnt = new_cnt + (tl.where(at[s] & grow, cnt[s] + 1, cnt[s]),)
        if WITH_POINTS:
            point = _put3(point, at, index, new_point)
        return (
            new_objs,
            new_cnt,
            _put3(off, at, index, new_off),
            point,
            _put3(normal, at, index, new_normal),
            _put(dep, at, index, nd),
        )

    @triton.jit
    def _gather_manifolds(
        c,
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
        """Every contact of the sphere at each lane's c, in Bullet's order, filed into 4-point
        manifolds (see above). ``arena``: the mesh's pointers (triangles, their bounds, meshes, edge
        angles and flags, plane normals and offsets, cell starts and lists); ``grid``: from `_grid`.
        Float arguments must already be float32 (the kernels cast theirs on entry)."""
        tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr = arena[:5]
        plane_n_ptr, plane_d_ptr, cell_start_ptr, cell_tris_ptr = arena[5:]
        reach = radius + gap
        zero = tl.zeros([BLOCK], tl.float32)
        zero3 = (zero, zero, zero)
        vectors = (_fill16(zero), _fill16(zero), _fill16(zero))
        points = ((), (), ())
        if WITH_POINTS:
            points = vectors
        empty = _fill4(tl.full([BLOCK], -1, tl.int32))
        man = (empty, _fill4(tl.zeros([BLOCK], tl.int32)), vectors, points, vectors, _fill16(zero))
        found = tl.zeros([BLOCK], tl.int32)
        # Planes first (btConvexPlaneCollisionAlgorithm), each its own object with one point: the
        # k-th plane a lane touches takes slot k (what `_add_point` does for a new object when the
        # slots before hold the other planes), so no slot search and no reduction.
        for p in range(NUM_PLANES):  # a loop, not unrolled
            pn = _vec(plane_n_ptr + p * 3)
            pd = tl.load(plane_d_ptr + p)
            d = _dot(c, pn) - pd - radius
            has = live & (d < gap) & (found < MAX_CONTACTS)
            if tl.max(has.to(tl.int32), axis=0) > 0:  # skip the bookkeeping when no lane touches
                obj, cnt, off, point, normal, dep = man
                at = (has & (found == 0), has & (found == 1), has & (found == 2), has & (found == 3))
                so = _add(zero3, _scale(pn, -radius))
                if WITH_POINTS:
                    point = _put_first3(point, at, _sub(_add(c, so), _scale(pn, d)))
                man = (
                    (
                        tl.where(at[0], PLANE_BASE + p, obj[0]),
                        tl.where(at[1], PLANE_BASE + p, obj[1]),
                        tl.where(at[2], PLANE_BASE + p, obj[2]),
                        tl.where(at[3], PLANE_BASE + p, obj[3]),
                    ),
                    (
                        tl.where(at[0], 1, cnt[0]),
                        tl.where(at[1], 1, cnt[1]),
                        tl.where(at[2], 1, cnt[2]),
                        tl.where(at[3], 1, cnt[3]),
                    ),
                    _put_first3(off, at, so),
                    point,
                    _put_first3(normal, at, _add(zero3, pn)),
                    _put_first(dep, at, d),
                )
            found += has.to(tl.int32)
        # The cell's triangles, in Bullet's visiting order.
        start, length = _cell_list(c, live, cell_start_ptr, grid[0], grid[1], grid[2])
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
            t = tl.load(cell_tris_ptr + start + j, mask=valid, other=0)
            tn = _load(tri_bounds_ptr + t * 8, valid, (0.0, 0.0, 1.0))
            tnd = tl.load(tri_bounds_ptr + t * 8 + 3, mask=valid, other=0.0)
            bc = _sub(c, _load(tri_bounds_ptr + t * 8 + 4, valid, (0.0, 0.0, 0.0)))
            ball = screen + tl.load(tri_bounds_ptr + t * 8 + 7, mask=valid, other=0.0)
            near = valid & (tl.abs(_dot(c, tn) - tnd) < screen) & (_dot(bc, bc) < ball * ball)
            if tl.max(near.to(tl.int32), axis=0) > 0:
                a = _load(tri_ptr + t * 9, near, (0.0, 0.0, 0.0))
                b = _load(tri_ptr + t * 9 + 3, near, (1.0, 0.0, 0.0))
                q = _load(tri_ptr + t * 9 + 6, near, (0.0, 1.0, 0.0))
                has, sp, g, d = _sphere_triangle(c, a, b, q, radius, reach, DEGENERATE_L2, SIMD_EPSILON)
                has = near & has & (found < MAX_CONTACTS)
                found += has.to(tl.int32)
                if tl.max(has.to(tl.int32), axis=0) > 0:
                    # btManifoldResult::addContactPoint: point on the sphere = surface point + normal * depth
                    so = _sub(_add(sp, _scale(g, d)), c)
                    angles = _load(edge_angle_ptr + t * 3, has, (7.0, 7.0, 7.0))
                    flags = tl.load(edge_flags_ptr + t, mask=has, other=0)
                    cn, changed = _adjust_internal_edge(
                        g, sp, a, b, q, tn, angles, flags, MAX_ANGLE, EDGE_DISTANCE
                    )
                    sp = _where(changed, _sub(_add(c, so), _scale(cn, d)), sp)
                    mesh_id = tl.load(tri_mesh_ptr + t, mask=has, other=0)
                    man = _add_point(has, mesh_id, so, sp, cn, d, man, WITH_POINTS)
            j += 1
        return man

    @triton.jit
    def _sphere_manifolds_kernel(
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
        plane_n_ptr,
        plane_d_ptr,
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
        cnt_out,
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
        grid = _grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
        lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = lane < n
        c = _load(centers_ptr + lane * 3, live, (0.0, 0.0, 0.0))
        arena = (tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr)
        arena = arena + (plane_n_ptr, plane_d_ptr, cell_start_ptr, cell_tris_ptr)
        obj, cnt, off, point, normal, dep = _gather_manifolds(
            c,
            live,
            radius,
            gap,
            arena,
            grid,
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
            tl.store(cnt_out + lane * 4 + s, cnt[s], mask=live)
        for q in tl.static_range(16):
            at = lane * 48 + q * 3
            _store(offset_out + at, _point(off, q), mask=live)
            _store(point_out + at, _point(point, q), mask=live)
            _store(normal_out + at, _point(normal, q), mask=live)
            tl.store(depth_out + lane * 16 + q, dep[q], mask=live)


if triton is not None:
    # --- ray casts (btTriangleRaycastCallback) ------------------------------------------------------

    @triton.jit
    def _ray_cast_kernel(
        start_ptr,
        end_ptr,
        n,
        tri_ptr,
        plane_n_ptr,
        plane_d_ptr,
        cell_start_ptr,
        cell_tris_ptr,
        ox0,
        oy0,
        oz0,
        cell_size,
        dim_x,
        dim_y,
        dim_z,
        num_tris,
        hit_out,
        fraction_out,
        normal_out,
        feature_out,
        NUM_PLANES: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        origin, cell_size, dims = _grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
        num_tris = tl.cast(num_tris, tl.int32)
        lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = lane < n
        s = _load(start_ptr + lane * 3, live, (0.0, 0.0, 0.0))
        e = _load(end_ptr + lane * 3, live, (0.0, 0.0, 0.0))
        best = tl.full([BLOCK], 3.0e38, tl.float32)
        feature = tl.full([BLOCK], -1, tl.int32)
        zero = tl.zeros([BLOCK], tl.float32)
        normal = (zero, zero, zero)
        first, length = _cell_list(s, live, cell_start_ptr, origin, cell_size, dims)
        longest = tl.max(length, axis=0)
        j = 0
        while j < longest:
            valid = live & (j < length)
            t = tl.load(cell_tris_ptr + first + j, mask=valid, other=0)
            a = _load(tri_ptr + t * 9, valid, (0.0, 0.0, 0.0))
            b = _load(tri_ptr + t * 9 + 3, valid, (0.0, 0.0, 0.0))
            q = _load(tri_ptr + t * 9 + 6, valid, (0.0, 0.0, 1.0))
            nrm = _cross(_sub(b, a), _sub(q, a))
            plane = _dot(a, nrm)
            da = _dot(nrm, s) - plane
            db = _dot(nrm, e) - plane
            crosses = da * db < 0
            f = da / tl.where(crosses, da - db, 1.0)
            f = tl.where(crosses, f, 1.0)
            p = _add(_scale(s, 1 - f), _scale(e, f))
            tol = _dot(nrm, nrm) * -0.0001
            pa, pb, pq = _sub(a, p), _sub(b, p), _sub(q, p)
            inside = (
                (_dot(_cross(pa, pb), nrm) >= tol)
                & (_dot(_cross(pb, pq), nrm) >= tol)
                & (_dot(_cross(pq, pa), nrm) >= tol)
            )
            take = valid & crosses & inside & (f < best)
            inv = 1.0 / tl.sqrt(tl.where(take, _dot(nrm, nrm), 1.0))
            sign = tl.where(da <= 0, -inv, inv)
            best = tl.where(take, f, best)
            feature = tl.where(take, t, feature)
            normal = _where(take, _scale(nrm, sign), normal)
            j += 1
        for p in tl.static_range(NUM_PLANES):  # the planes come after the meshes (creation order)
            pn = _vec(plane_n_ptr + p * 3)
            pd = tl.load(plane_d_ptr + p)
            da = _dot(s, pn) - pd
            db = _dot(e, pn) - pd
            crosses = da * db < 0
            f = da / tl.where(crosses, da - db, 1.0)
            take = live & crosses & (f < best)
            sign = tl.where(da <= 0, -1.0, 1.0)
            best = tl.where(take, f, best)
            feature = tl.where(take, num_tris + p, feature)
            normal = _where(take, _scale(pn, sign), normal)
        hit = feature >= 0
        tl.store(hit_out + lane, hit.to(tl.int8), mask=live)
        tl.store(fraction_out + lane, tl.where(hit, best, 1.0), mask=live)
        _store(normal_out + lane * 3, normal, mask=live)
        tl.store(feature_out + lane, feature, mask=live)

    # --- box contacts (separating axes) -------------------------------------------------------------
    # A box is (centre, axes, half extents), axes a 3-tuple of 3-vectors; a triangle is (a, b, q).

    @triton.jit
    def _box_radius(u, axes, half):
        return (
            tl.abs(_dot(axes[0], u)) * half[0]
            + tl.abs(_dot(axes[1], u)) * half[1]
            + tl.abs(_dot(axes[2], u)) * half[2]
        )

    @triton.jit
    def _sat_axis(box, tri, k, scale, best, normal):
        """Separation of box and triangle along candidate axis k; keep the largest (first wins)."""
        length = tl.sqrt(_dot(k, k))
        usable = length > 1e-6 * scale
        u = _scale(k, 1.0 / tl.where(usable, length, 1.0))
        radius = _box_radius(u, box[1], box[2])
        centre = _dot(box[0], u)
        p0 = _dot(tri[0], u)
        p1 = _dot(tri[1], u)
        p2 = _dot(tri[2], u)
        below = tl.minimum(tl.minimum(p0, p1), p2) - (centre + radius)
        above = (centre - radius) - tl.maximum(tl.maximum(p0, p1), p2)
        sep = tl.maximum(below, above)
        take = usable & (sep > best)
        sign = tl.where(below > above, -1.0, 1.0)
        return tl.where(take, sep, best), _where(take, _scale(u, sign), normal)

    @triton.jit
    def _cross_len2(a, b):
        c = _cross(a, b)
        return c[0] * c[0] + c[1] * c[1] + c[2] * c[2]

    @triton.jit
    def _box_keep(ok, sep, normal, feature, arrival, keys, K: tl.constexpr):
        """Keep the K smallest (separation, arrival): replace the largest when full. ``keys``: the kept
        separations, arrivals, normal x, y, z and features, [BLOCK, K] each."""
        key_sep, key_arr, kn_x, kn_y, kn_z, kf = keys
        col = tl.arange(0, K)
        worst = tl.max(key_sep, axis=1)
        is_worst = key_sep == worst[:, None]
        worst_col = tl.argmax(tl.where(is_worst, key_arr, -1), axis=1)
        put = ok & (sep < worst)
        at = put[:, None] & (col[None, :] == worst_col[:, None])
        return (
            tl.where(at, sep[:, None], key_sep),
            tl.where(at, arrival[:, None], key_arr),
            tl.where(at, normal[0][:, None], kn_x),
            tl.where(at, normal[1][:, None], kn_y),
            tl.where(at, normal[2][:, None], kn_z),
            tl.where(at, feature[:, None], kf),
        )

    @triton.jit
    def _axis_column(ptr, i: tl.constexpr, mask):
        """Column i of the row-major 3x3 matrix at ptr (identity where masked)."""
        return (
            tl.load(ptr + i, mask=mask, other=1.0 if i == 0 else 0.0),
            tl.load(ptr + (3 + i), mask=mask, other=1.0 if i == 1 else 0.0),
            tl.load(ptr + (6 + i), mask=mask, other=1.0 if i == 2 else 0.0),
        )

    @triton.jit
    def _box_contacts_kernel(
        center_ptr,
        axes_ptr,
        half_ptr,
        half_stride,
        n,
        gap,
        tri_ptr,
        plane_n_ptr,
        plane_d_ptr,
        cell_start_ptr,
        cell_tris_ptr,
        ox0,
        oy0,
        oz0,
        cell_size,
        dim_x,
        dim_y,
        dim_z,
        num_tris,
        count_out,
        sep_out,
        arrival_out,
        normal_out,
        feature_out,
        NUM_PLANES: tl.constexpr,
        K: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        # fp64 under torch.compile (Inductor types Python floats as fp64): compute in float32
        gap = tl.cast(gap, tl.float32)
        origin, cell_size, dims = _grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
        num_tris = tl.cast(num_tris, tl.int32)
        lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = lane < n
        c = _load(center_ptr + lane * 3, live, (0.0, 0.0, 0.0))
        # axes [N, 3, 3] row-major with the box axes as columns: axis i = (m[0][i], m[1][i], m[2][i])
        axes = (
            _axis_column(axes_ptr + lane * 9, 0, live),
            _axis_column(axes_ptr + lane * 9, 1, live),
            _axis_column(axes_ptr + lane * 9, 2, live),
        )
        half = _load(half_ptr + lane * half_stride, live, (1.0, 1.0, 1.0))
        box = (c, axes, half)
        keys = (
            tl.full([BLOCK, K], 3.0e38, tl.float32),
            tl.full([BLOCK, K], 1 << 30, tl.int32),
            tl.zeros([BLOCK, K], tl.float32),
            tl.zeros([BLOCK, K], tl.float32),
            tl.zeros([BLOCK, K], tl.float32),
            tl.full([BLOCK, K], -1, tl.int32),
        )
        count = tl.zeros([BLOCK], tl.int32)
        for p in tl.static_range(NUM_PLANES):
            pn = _vec(plane_n_ptr + p * 3)
            pd = tl.load(plane_d_ptr + p)
            radius = _box_radius(pn, axes, half)
            sep = _dot(c, pn) - pd - radius
            has = live & (sep < gap)
            count += has.to(tl.int32)
            spread = c[0] * 0  # the plane's normal in every lane
            normal = (pn[0] + spread, pn[1] + spread, pn[2] + spread)
            feature = tl.zeros([BLOCK], tl.int32) + (num_tris + p)
            keys = _box_keep(has, sep, normal, feature, tl.full([BLOCK], p, tl.int32), keys, K)
        first, length = _cell_list(c, live, cell_start_ptr, origin, cell_size, dims)
        longest = tl.max(length, axis=0)
        j = 0
        while j < longest:
            valid = live & (j < length)
            t = tl.load(cell_tris_ptr + first + j, mask=valid, other=0)
            a = _load(tri_ptr + t * 9, valid, (0.0, 0.0, 0.0))
            b = _load(tri_ptr + t * 9 + 3, valid, (1.0, 0.0, 0.0))
            q = _load(tri_ptr + t * 9 + 6, valid, (0.0, 1.0, 0.0))
            edges = (_sub(b, a), _sub(q, b), _sub(a, q))
            tn = _cross(edges[0], _sub(q, a))
            # the largest candidate length, for the "parallel edges give no axis" test
            scale = tl.maximum(tl.sqrt(_dot(tn, tn)), 1.0)
            for i in tl.static_range(3):
                edge01 = tl.maximum(_cross_len2(axes[i], edges[0]), _cross_len2(axes[i], edges[1]))
                scale = tl.maximum(scale, tl.sqrt(tl.maximum(edge01, _cross_len2(axes[i], edges[2]))))
            # the axes: the face normal, the box's 3 axes, then each box axis crossed with each edge
            tri = (a, b, q)
            zero = tl.zeros([BLOCK], tl.float32)
            best, normal = _sat_axis(
                box, tri, tn, scale, tl.full([BLOCK], -3.0e38, tl.float32), (zero, zero, zero)
            )
            for i in tl.static_range(3):
                best, normal = _sat_axis(box, tri, axes[i], scale, best, normal)
            for i in tl.static_range(3):
                for e in tl.static_range(3):
                    best, normal = _sat_axis(box, tri, _cross(axes[i], edges[e]), scale, best, normal)
            has = valid & (best < gap)
            count += has.to(tl.int32)
            keys = _box_keep(has, best, normal, t, tl.full([BLOCK], NUM_PLANES, tl.int32) + j, keys, K)
            j += 1
        key_sep, key_arr, kn_x, kn_y, kn_z, kf = keys
        col = tl.arange(0, K)
        m = live[:, None] & (col[None, :] < K)
        rows = lane[:, None] * K
        tl.store(count_out + lane, count, mask=live)
        tl.store(sep_out + rows + col[None, :], key_sep, mask=m)
        tl.store(arrival_out + rows + col[None, :], key_arr, mask=m)
        _store(normal_out + (rows + col[None, :]) * 3, (kn_x, kn_y, kn_z), mask=m)
        tl.store(feature_out + rows + col[None, :], kf, mask=m)


if triton is not None:
    # --- the whole ball tick, K ticks per launch (ball-only arenas) --------------------------------

    @triton.jit
    def _split_impulse(
        cnt,
        off,
        normal,
        dep,
        inv_mass,
        inv_inertia,
        erp2_over_dt,
        ITERATIONS: tl.constexpr,
        PUSH_POINTS: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        """`ball.split_impulse_push` on registers: Gauss-Seidel over the first PUSH_POINTS penetrating
        points, in manifold order. Walking all 16 manifold points with the others inactive applies the
        same updates in the same order; a point no lane of the block uses is skipped."""
        zero = tl.zeros([BLOCK], tl.float32)
        push = (zero, zero, zero)
        turn = (zero, zero, zero)
        rank = tl.zeros([BLOCK], tl.int32)
        active = ()
        used = ()
        for q in tl.static_range(16):
            pen = ((q % 4) < cnt[q // 4]) & (dep[q] < 0)
            act = pen & (rank < PUSH_POINTS)
            rank += pen.to(tl.int32)
            active = active + (act,)
            used = used + (tl.max(act.to(tl.int32), axis=0) > 0,)
        applied = _fill16(zero)
        for _ in range(ITERATIONS):  # a runtime loop: a tenth of the code of unrolling
            for q in tl.static_range(16):
                if used[q]:
                    o = _point(off, q)
                    n = _point(normal, q)
                    torque = _cross(o, n)
                    ag = _scale(torque, inv_inertia)
                    jac = 1.0 / (inv_mass + _dot(n, _cross(ag, o)))
                    rhs = tl.where(active[q], -dep[q] * erp2_over_dt * jac, 0.0)
                    delta = rhs - (_dot(n, push) + _dot(torque, turn)) * jac
                    new = tl.maximum(applied[q] + delta, 0.0)
                    delta = tl.where(active[q], new - applied[q], 0.0)
                    applied = applied[:q] + (applied[q] + delta,) + applied[q + 1 :]
                    push = _add(push, _scale(n, inv_mass * delta))
                    turn = _add(turn, _scale(ag, delta))
        return push

    @triton.jit
    def _ball_ticks_kernel(
        # state (read and written)
        pos_ptr,
        vel_ptr,
        ang_ptr,
        cache_ptr,
        since_ptr,
        tick_ptr,
        goal_tick_ptr,
        goal_ptr,
        n,
        ticks,
        # tick constants
        dt,
        damping,
        gravity_dv,
        radius,
        gap,
        inv_mass,
        inv_inertia,
        restitution_e,
        friction,
        max_speed,
        max_ang_speed,
        goal_line,
        restitution_threshold,
        friction_eps,
        erp2_over_dt,
        # arena
        tri_ptr,
        tri_bounds_ptr,
        tri_mesh_ptr,
        edge_angle_ptr,
        edge_flags_ptr,
        plane_n_ptr,
        plane_d_ptr,
        cell_start_ptr,
        cell_tris_ptr,
        ox0,
        oy0,
        oz0,
        cell_size,
        dim_x,
        dim_y,
        dim_z,
        NUM_PLANES: tl.constexpr,
        PLANE_BASE: tl.constexpr,
        MAX_CONTACTS: tl.constexpr,
        DEGENERATE_L2: tl.constexpr,
        SIMD_EPSILON: tl.constexpr,
        MAX_ANGLE: tl.constexpr,
        EDGE_DISTANCE: tl.constexpr,
        ITERATIONS: tl.constexpr,
        PUSH_POINTS: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        """`arena.step_ticks` for ball-only arenas in one launch: the same mechanics as `ball.py`.

        One lane (env) per thread; its state stays in registers for all ``ticks`` ticks.
        """
        # Float scalars arrive as fp32 from eager launches but as fp64 from torch.compile (Inductor
        # types Python floats as fp64): cast them once, so every value below is float32.
        dt = tl.cast(dt, tl.float32)
        damping = tl.cast(damping, tl.float32)
        gravity_dv = tl.cast(gravity_dv, tl.float32)
        radius = tl.cast(radius, tl.float32)
        gap = tl.cast(gap, tl.float32)
        inv_mass = tl.cast(inv_mass, tl.float32)
        inv_inertia = tl.cast(inv_inertia, tl.float32)
        restitution_e = tl.cast(restitution_e, tl.float32)
        friction = tl.cast(friction, tl.float32)
        max_speed = tl.cast(max_speed, tl.float32)
        max_ang_speed = tl.cast(max_ang_speed, tl.float32)
        goal_line = tl.cast(goal_line, tl.float32)
        restitution_threshold = tl.cast(restitution_threshold, tl.float32)
        friction_eps = tl.cast(friction_eps, tl.float32)
        erp2_over_dt = tl.cast(erp2_over_dt, tl.float32)
        grid = _grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
        ticks = tl.cast(ticks, tl.int32)
        arena = (tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr)
        arena = arena + (plane_n_ptr, plane_d_ptr, cell_start_ptr, cell_tris_ptr)
        lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = lane < n
        pos = _load(pos_ptr + lane * 3, live, (0.0, 0.0, 0.0))
        vel = _load(vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
        ang = _load(ang_ptr + lane * 3, live, (0.0, 0.0, 0.0))
        cache = _load(cache_ptr + lane * 3, live, (0.0, 0.0, 0.0))
        since = tl.load(since_ptr + lane, mask=live, other=0)
        tick = tl.load(tick_ptr + lane, mask=live, other=0)
        goal_tick = tl.load(goal_tick_ptr + lane, mask=live, other=-1)
        goal = tl.load(goal_ptr + lane, mask=live, other=0).to(tl.int32)  # bit 0: blue, bit 1: orange
        zero = tl.zeros([BLOCK], tl.float32)
        k = 0
        while k < ticks:
            # 1. zero-velocity sleeping
            awake = live & (~((_dot(vel, vel) == 0) & (_dot(ang, ang) == 0)))
            # 5. Bullet step: contacts at the current position, damping, solve, integrate
            man = _gather_manifolds(
                pos,
                awake,
                radius,
                gap,
                arena,
                grid,
                NUM_PLANES,
                PLANE_BASE,
                MAX_CONTACTS,
                DEGENERATE_L2,
                SIMD_EPSILON,
                MAX_ANGLE,
                EDGE_DISTANCE,
                False,
                BLOCK,
            )
            cnt, off, normal, dep = man[1], man[2], man[4], man[5]
            dv = _scale(vel, damping)  # after the contacts: fewer live registers
            # RocketSim's special contact: mean normal and mean lever arm over the held points
            total = tl.zeros([BLOCK], tl.int32)
            penetrating = tl.zeros([BLOCK], tl.int32)
            sn = (zero, zero, zero)
            sarm = zero
            for slot in tl.static_range(4):
                if tl.max(cnt[slot], axis=0) > 0:  # most slots are empty in every lane of the block
                    for i in tl.static_range(4):
                        held = i < cnt[slot]
                        total += held.to(tl.int32)
                        penetrating += (held & (dep[slot * 4 + i] < 0)).to(tl.int32)
                        sn = _add(sn, _where(held, _point(normal, slot * 4 + i), (0.0, 0.0, 0.0)))
                        o = _point(off, slot * 4 + i)
                        sarm += tl.where(held, tl.sqrt(_dot(o, o)), 0.0)
            touching = total > 0
            per = tl.maximum(total, 1).to(tl.float32)
            mn = (sn[0] / per, sn[1] / per, sn[2] / per)
            r = _scale(mn, -(sarm / per))
            ex = (dv[0], dv[1], dv[2] + gravity_dv)
            cw = _cross(ang, r)
            approach = _dot(mn, _add(dv, cw))
            rest = tl.where(tl.abs(approach) < restitution_threshold, 0.0, -restitution_e * approach)
            rest = tl.maximum(rest, 0.0)
            tn = _cross(r, mn)
            an = _scale(tn, inv_inertia)
            jac_n = 1.0 / (inv_mass + _dot(mn, _cross(an, r)))
            rhs_n = (rest - (_dot(mn, ex) + _dot(tn, ang))) * jac_n
            va = _add(ex, cw)
            lat = _sub(va, _scale(mn, _dot(mn, va)))
            lat2 = _dot(lat, lat)
            sliding = lat2 > friction_eps
            linv = tl.rsqrt(tl.where(sliding, lat2, 1.0))
            use_yz = tl.abs(mn[2]) > 0.7071067811865476  # btPlaneSpace1
            kyz = tl.rsqrt(tl.where(use_yz, mn[1] * mn[1] + mn[2] * mn[2], 1.0))
            kxy = tl.rsqrt(tl.where(use_yz, 1.0, mn[0] * mn[0] + mn[1] * mn[1]))
            plane_t = (
                tl.where(use_yz, 0.0, -mn[1] * kxy),
                tl.where(use_yz, -mn[2] * kyz, mn[0] * kxy),
                tl.where(use_yz, mn[1] * kyz, 0.0),
            )
            t = _where(sliding, _scale(lat, linv), plane_t)
            tt = _cross(r, t)
            at = _scale(tt, inv_inertia)
            jac_t = 1.0 / (inv_mass + _dot(t, _cross(at, r)))
            rhs_t = -(_dot(t, ex) + _dot(tt, ang)) * jac_t
            sdv = (zero, zero, zero)
            sdw = (zero, zero, zero)
            if tl.max(touching.to(tl.int32), axis=0) > 0:
                imp_n = zero
                imp_t = zero
                for _ in range(ITERATIONS):
                    delta = rhs_n - (_dot(mn, sdv) + _dot(tn, sdw)) * jac_n
                    new_n = tl.maximum(imp_n + delta, 0.0)
                    delta = new_n - imp_n
                    imp_n = new_n
                    sdv = _add(sdv, _scale(mn, inv_mass * delta))
                    sdw = _add(sdw, _scale(an, delta))
                    limit = friction * imp_n
                    delta = rhs_t - (_dot(t, sdv) + _dot(tt, sdw)) * jac_t
                    new_t = tl.maximum(tl.minimum(imp_t + delta, limit), -limit)
                    delta = tl.where(imp_n > 0, new_t - imp_t, 0.0)
                    imp_t += delta
                    sdv = _add(sdv, _scale(t, inv_mass * delta))
                    sdw = _add(sdw, _scale(at, delta))
                sdv = _where(touching, sdv, (0.0, 0.0, 0.0))
                sdw = _where(touching, sdw, (0.0, 0.0, 0.0))
            # split impulse over the first PUSH_POINTS penetrating points, in manifold order
            push = (zero, zero, zero)
            if tl.max(penetrating, axis=0) > 0:
                push = _split_impulse(
                    cnt, off, normal, dep, inv_mass, inv_inertia, erp2_over_dt, ITERATIONS, PUSH_POINTS, BLOCK
                )
            # write-back (gravity enters here), then integrate the position
            new_vel = ((dv[0] + sdv[0]) + 0.0, (dv[1] + sdv[1]) + 0.0, (dv[2] + sdv[2]) + gravity_dv)
            pos = _where(awake, _add(_add(pos, _scale(push, dt)), _scale(new_vel, dt)), pos)
            vel = _where(awake, new_vel, vel)
            ang = _where(awake, _add(ang, sdw), ang)
            # 8. finish: cached hit velocity, speed clamps
            vel = _add(vel, cache)
            cache = _scale(cache, 0.0)
            v2 = _dot(vel, vel)
            over = v2 > max_speed * max_speed
            vel = _where(
                over, _scale(vel, tl.where(over, max_speed * tl.rsqrt(tl.where(over, v2, 1.0)), 1.0)), vel
            )
            w2 = _dot(ang, ang)
            over = w2 > max_ang_speed * max_ang_speed
            s = tl.where(over, max_ang_speed * tl.rsqrt(tl.where(over, w2, 1.0)), 1.0)
            ang = _where(over, _scale(ang, s), ang)
            since += 1
            # 9. goal, 10. tick count
            tick += 1
            scored = tl.abs(pos[1]) > goal_line
            first = scored & (goal_tick < 0)
            goal_tick = tl.where(first, tick, goal_tick)
            goal = goal | tl.where(scored, tl.where(pos[1] > 0, 1, 2), 0)
            k += 1
        _store(pos_ptr + lane * 3, pos, mask=live)
        _store(vel_ptr + lane * 3, vel, mask=live)
        _store(ang_ptr + lane * 3, ang, mask=live)
        _store(cache_ptr + lane * 3, cache, mask=live)
        tl.store(since_ptr + lane, since, mask=live)
        tl.store(tick_ptr + lane, tick, mask=live)
        tl.store(goal_tick_ptr + lane, goal_tick, mask=live)
        tl.store(goal_ptr + lane, goal.to(tl.int8), mask=live)


def _require_triton():
    if triton is None:
        raise RuntimeError(
            "Triton is not installed: the arena query kernels need a CUDA build of PyTorch "
            "(which ships Triton), or `pip install triton` with TRITON_INTERPRET=1 for CPU tests"
        )


def _warps(block: int) -> int:
    """One lane per thread: a program of ``block`` lanes runs ``block / 32`` warps (Triton's default of 4
    warps would run each lane of a 64-lane program on two threads)."""
    if block < 32 or block & (block - 1):
        raise ValueError(f"the kernels run 32, 64, 128, ... lanes per program, got {block}")
    return block // 32


def _grid_args(mesh: ArenaMesh):
    return (*mesh.grid_origin, mesh.cell_size, *mesh.grid_dims)


def _flat_tris(mesh: ArenaMesh) -> torch.Tensor:
    return mesh.tri_verts.reshape(-1, 9)  # a view: tri_verts is contiguous


if triton is not None:

    @triton_op("nitro::soccar_sphere_manifolds", mutates_args={})
    def _sphere_manifolds_op(
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
        cnt = torch.empty(n, 4, dtype=torch.int32, device=dev)
        offset = torch.empty(n, 4, 4, 3, device=dev)
        point = torch.empty(n, 4, 4, 3, device=dev)
        normal = torch.empty(n, 4, 4, 3, device=dev)
        depth = torch.empty(n, 4, 4, device=dev)
        wrap_triton(_sphere_manifolds_kernel)[(triton.cdiv(n, SPHERE_BLOCK),)](
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
            cnt,
            offset,
            point,
            normal,
            depth,
            NUM_PLANES=4,
            PLANE_BASE=PLANE_OBJECT_BASE,
            MAX_CONTACTS=collide.MAX_NEW_CONTACTS,
            DEGENERATE_L2=_DEGENERATE_L2,
            SIMD_EPSILON=_SIMD_EPSILON_UU2,
            MAX_ANGLE=C.INTERNAL_EDGE_MAX_ANGLE,
            EDGE_DISTANCE=C.INTERNAL_EDGE_DISTANCE_THRESHOLD,
            BLOCK=SPHERE_BLOCK,
            num_warps=_warps(SPHERE_BLOCK),
        )
        return obj, cnt, offset, point, normal, depth


def sphere_manifolds(
    mesh: ArenaMesh, centers: torch.Tensor, radius: float, gap: float
) -> collide.ContactManifolds:
    """Kernel version of `collide.sphere_manifolds` (same result as its PyTorch reference)."""
    _require_triton()
    if collide.MANIFOLD_SLOTS != 4 or collide.MANIFOLD_POINTS != 4:
        raise NotImplementedError("the kernel holds 4 manifolds of 4 points")
    grid = [float(x) for x in _grid_args(mesh)]
    obj, cnt, offset, point, normal, depth = _sphere_manifolds_op(
        centers.contiguous(),
        float(radius),
        float(gap),
        _flat_tris(mesh),
        mesh.tri_bounds,
        mesh.tri_mesh,
        mesh.edge_angle,
        mesh.edge_flags,
        mesh.plane_normals,
        mesh.plane_offsets,
        mesh.cell_start,
        mesh.cell_tris,
        grid,
    )
    return collide.ContactManifolds(
        object=obj, count=cnt, offset=offset, point=point, normal=normal, depth=depth
    )


if triton is not None:

    @triton_op("nitro::soccar_ray_cast", mutates_args={})
    def _ray_cast_op(
        start: torch.Tensor,
        end: torch.Tensor,
        tri: torch.Tensor,
        plane_normals: torch.Tensor,
        plane_offsets: torch.Tensor,
        cell_start: torch.Tensor,
        cell_tris: torch.Tensor,
        grid: list[float],
        num_tris: int,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        n = start.shape[0]
        dev = start.device
        hit = torch.empty(n, dtype=torch.int8, device=dev)
        fraction = torch.empty(n, device=dev)
        normal = torch.empty(n, 3, device=dev)
        feature = torch.empty(n, dtype=torch.int32, device=dev)
        wrap_triton(_ray_cast_kernel)[(triton.cdiv(n, BLOCK),)](
            start,
            end,
            n,
            tri,
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
            num_tris,
            hit,
            fraction,
            normal,
            feature,
            NUM_PLANES=4,
            BLOCK=BLOCK,
            num_warps=_warps(BLOCK),
        )
        return hit, fraction, normal, feature

    @triton_op("nitro::soccar_box_contacts", mutates_args={})
    def _box_contacts_op(
        centers: torch.Tensor,
        axes: torch.Tensor,
        half: torch.Tensor,
        gap: float,
        slots: int,
        tri: torch.Tensor,
        plane_normals: torch.Tensor,
        plane_offsets: torch.Tensor,
        cell_start: torch.Tensor,
        cell_tris: torch.Tensor,
        grid: list[float],
        num_tris: int,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        n = centers.shape[0]
        dev = centers.device
        count = torch.empty(n, dtype=torch.int32, device=dev)
        sep = torch.empty(n, slots, device=dev)
        arrival = torch.empty(n, slots, dtype=torch.int32, device=dev)
        normal = torch.empty(n, slots, 3, device=dev)
        feature = torch.empty(n, slots, dtype=torch.int32, device=dev)
        wrap_triton(_box_contacts_kernel)[(triton.cdiv(n, BLOCK),)](
            centers,
            axes,
            half,
            3,
            n,
            gap,
            tri,
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
            num_tris,
            count,
            sep,
            arrival,
            normal,
            feature,
            NUM_PLANES=4,
            K=slots,
            BLOCK=BLOCK,
            num_warps=_warps(BLOCK),
        )
        return count, sep, arrival, normal, feature


def ray_cast(mesh: ArenaMesh, start: torch.Tensor, end: torch.Tensor) -> RayHits:
    """Kernel version of `mesh.ray_cast`."""
    _require_triton()
    hit, fraction, normal, feature = _ray_cast_op(
        start.contiguous(),
        end.contiguous(),
        _flat_tris(mesh),
        mesh.plane_normals,
        mesh.plane_offsets,
        mesh.cell_start,
        mesh.cell_tris,
        [float(x) for x in _grid_args(mesh)],
        mesh.num_triangles,
    )
    return RayHits(hit=hit.bool(), fraction=fraction, normal=normal, feature=feature)


def box_contacts(
    mesh: ArenaMesh,
    centers: torch.Tensor,
    axes: torch.Tensor,
    half_extents: torch.Tensor,
    gap: float,
    max_contacts: int,
) -> BoxContacts:
    """Kernel version of `mesh.box_contacts` (the kernel keeps the deepest, this orders them)."""
    _require_triton()
    if max_contacts < 1 or max_contacts & (max_contacts - 1):
        raise ValueError(
            f"the kernel keeps a power-of-two number of contacts, got max_contacts={max_contacts}"
        )
    n = centers.shape[0]
    half = (
        half_extents.reshape(-1, 3).expand(n, 3).contiguous()
        if half_extents.dim() == 2
        else half_extents.reshape(1, 3).expand(n, 3).contiguous()
    )
    count, sep, arrival, normal, feature = _box_contacts_op(
        centers.contiguous(),
        axes.contiguous(),
        half,
        float(gap),
        int(max_contacts),
        _flat_tris(mesh),
        mesh.plane_normals,
        mesh.plane_offsets,
        mesh.cell_start,
        mesh.cell_tris,
        [float(x) for x in _grid_args(mesh)],
        mesh.num_triangles,
    )
    # Order as the reference: by separation, ties by Bullet's order (planes, then the cell list).
    order = torch.sort(arrival, dim=1, stable=True).indices
    sep, feature, normal = (
        sep.gather(1, order),
        feature.gather(1, order),
        normal.gather(1, order[..., None].expand(-1, -1, 3)),
    )
    order = torch.sort(sep, dim=1, stable=True).indices
    sep, feature = sep.gather(1, order), feature.gather(1, order)
    normal = normal.gather(1, order[..., None].expand(-1, -1, 3))
    slot = feature >= 0
    from nitro.envs.soccar.mesh import _box_support

    point = _box_support(centers[:, None, :], axes[:, None], half[:, None, :], -normal)
    return BoxContacts(
        count=count,
        normal=torch.where(slot[..., None], normal, 0.0),
        depth=torch.where(slot, sep, 0.0),
        point=torch.where(slot[..., None], point, 0.0),
        feature=feature,
    )


if triton is not None:

    @triton_op(
        "nitro::soccar_ball_ticks_",
        mutates_args={"pos", "vel", "ang_vel", "cache", "since", "tick", "goal_tick", "goal"},
    )
    def _ball_ticks_op(
        pos: torch.Tensor,
        vel: torch.Tensor,
        ang_vel: torch.Tensor,
        cache: torch.Tensor,
        since: torch.Tensor,
        tick: torch.Tensor,
        goal_tick: torch.Tensor,
        goal: torch.Tensor,
        ticks: int,
        consts: list[float],
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
        block: int,
        maxnreg: int = 0,
    ) -> None:
        n = pos.shape[0]
        # ptxas's register cap per thread (trading spills for occupancy): eager launches only, as
        # torch.compile does not pass it through to Triton.
        cap = {"maxnreg": maxnreg} if maxnreg else {}
        wrap_triton(_ball_ticks_kernel)[(triton.cdiv(n, block),)](
            pos,
            vel,
            ang_vel,
            cache,
            since,
            tick,
            goal_tick,
            goal,
            n,
            ticks,
            *consts,
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
            NUM_PLANES=4,
            PLANE_BASE=PLANE_OBJECT_BASE,
            MAX_CONTACTS=collide.MAX_NEW_CONTACTS,
            DEGENERATE_L2=_DEGENERATE_L2,
            SIMD_EPSILON=_SIMD_EPSILON_UU2,
            MAX_ANGLE=C.INTERNAL_EDGE_MAX_ANGLE,
            EDGE_DISTANCE=C.INTERNAL_EDGE_DISTANCE_THRESHOLD,
            ITERATIONS=C.SOLVER_NUM_ITERATIONS,
            PUSH_POINTS=_push_points(),
            BLOCK=block,
            num_warps=_warps(block),
            **cap,
        )


def _push_points() -> int:
    from nitro.envs.soccar import ball

    return ball.MAX_PUSH_POINTS


def _tick_constants(world) -> list[float]:
    from nitro.envs.soccar import ball

    m, dt = world.mutators, world.tick_time
    return [
        dt,
        ball.damping_factor(m.ball_drag, dt),
        m.gravity_z * dt,
        m.ball_radius,
        m.ball_contact_gap,
        1.0 / m.ball_mass,
        m.ball_inv_inertia,
        m.ball_world_contact_restitution,
        m.ball_world_contact_friction,
        m.ball_max_speed,
        C.BALL_MAX_ANG_SPEED,
        m.goal_base_threshold_y + m.ball_radius,
        C.SOLVER_RESTITUTION_VELOCITY_THRESHOLD,
        C.FRICTION_DIRECTION_EPSILON_SQ,
        C.SOLVER_ERP2 / dt,
    ]


FUSED_BLOCK = 32  # envs per program of the fused tick: one warp, so block-wide branches are warp-wide
# The fused tick reads its own grid, made for the ball's reach (radius + gap = 93.2 UU): 64-UU cells
# listing the triangles within 96 UU, where the shared grid (128-UU cells, 112 UU for every query)
# lists 1.5x as many per cell near the walls. Lists stay in Bullet's visiting order and hold every
# triangle the ball can touch, so the contacts, in order, are the same.
BALL_GRID_CELL = 64.0
BALL_GRID_RADIUS = 96.0


def ball_grid(world) -> ArenaMesh:
    """The arena with the fused tick's grid (`BALL_GRID_CELL`), or the world's own when a ball
    mutated bigger than `BALL_GRID_RADIUS` would not fit it."""
    from nitro.envs.soccar.mesh import load_arena_mesh

    m, mesh = world.mutators, world.mesh
    if m.ball_radius + m.ball_contact_gap > BALL_GRID_RADIUS:
        if m.ball_radius + m.ball_contact_gap > mesh.query_radius:
            raise ValueError(
                f"ball reach radius + gap = {m.ball_radius + m.ball_contact_gap} UU exceeds the grid's "
                f"query radius {mesh.query_radius} UU; load the mesh with a larger query_radius"
            )
        return mesh
    key = (mesh.folder, str(mesh.device))
    if key not in _BALL_GRIDS:  # once per folder and device: no file system work per step
        _BALL_GRIDS[key] = load_arena_mesh(
            mesh.folder, mesh.device, query_radius=BALL_GRID_RADIUS, cell_size=BALL_GRID_CELL
        )
    return _BALL_GRIDS[key]


_BALL_GRIDS: dict = {}


def ball_ticks_(state, events, world, ticks: int, block: int = FUSED_BLOCK, maxnreg: int = 0) -> None:
    """Advance ball-only arenas by ``ticks`` ticks in one kernel launch, updating ``state`` and
    ``events`` (`arena.ArenaEvents`) in place. The same mechanics as `arena.step_ticks`.

    ``block``: envs per program (32, 64, ...; one per thread). ``maxnreg``: a cap on registers per
    thread (0: ptxas's choice, about 255 here), for benchmarks of spills against occupancy.

    ``events.goal_blue`` / ``goal_orange`` are rewritten from the kernel's per-env goal bits, so they
    must be the arena's own event buffers.
    """
    _require_triton()
    if state.cars.pos.shape[1]:
        raise NotImplementedError("the fused tick kernel simulates ball-only arenas")
    mesh = ball_grid(world)
    b = state.ball
    goal = events.goal_blue.to(torch.int8) | (events.goal_orange.to(torch.int8) << 1)
    _ball_ticks_op(
        b.pos,
        b.vel,
        b.ang_vel,
        b.velocity_impulse_cache,
        b.tick_count_since_update,
        state.tick_count,
        events.goal_tick,
        goal,
        int(ticks),
        _tick_constants(world),
        _flat_tris(mesh),
        mesh.tri_bounds,
        mesh.tri_mesh,
        mesh.edge_angle,
        mesh.edge_flags,
        mesh.plane_normals,
        mesh.plane_offsets,
        mesh.cell_start,
        mesh.cell_tris,
        [float(v) for v in _grid_args(mesh)],
        int(block),
        int(maxnreg),
    )
    events.goal_blue.copy_((goal & 1) > 0)
    events.goal_orange.copy_((goal & 2) > 0)
