"""btSubsimplexConvexCast per lane: the twin of `subsimplex_convex_cast.py` (a ray against a convex
shape, Bullet's GJK ray cast), the same functions in the same order, with the btVoronoiSimplexSolver it
runs (the twin of `gjk_pair_detector`'s `Simplex` and its closest-point functions, under the same names).

A shape is (is_sphere, origin, basis, half, margin) in Bullet units: a car's box (``half`` its inner
half extents, the margin added by its support, ``basis`` its rotation's rows) or the ball (a point
grown by ``margin``, its radius; ``basis`` and ``half`` unused); ``is_sphere`` may differ per call
(a runtime value), so one copy of the cast serves both. A simplex is (w, p, q, count, last_w,
cached_v, cached_p1, cached_p2): four vertices of A - B with their points on A and B (4-tuples of
vectors), as the reference's `Simplex` holds them. The loops run while some lane of the program is
still casting (the reference stops once no lane is), so the compiled kernel holds one copy of the
cast's body and of the tetrahedron's face test.
"""

from __future__ import annotations

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.gjk_epa import BT_LARGE_FLOAT as _BT_LARGE_FLOAT
from nitro.envs.soccar.gjk_pair_detector import VORONOI_EQUAL_VERTEX_THRESHOLD as _EQUAL_VERTEX
from nitro.envs.soccar.kernels import constexpr, jit, tl
from nitro.envs.soccar.kernels.rigid_body import mat_vec, vec_mat
from nitro.envs.soccar.kernels.vec import add, cross, dot, neg, scale, sub, where
from nitro.envs.soccar.subsimplex_convex_cast import MAX_CONVEX_CAST_EPSILON as _EPSILON
from nitro.envs.soccar.subsimplex_convex_cast import MAX_CONVEX_CAST_ITERATIONS as _ITERATIONS
from nitro.envs.soccar.subsimplex_convex_cast import NORMAL_MIN_LENGTH2 as _NORMAL_MIN_LENGTH2

MAX_CONVEX_CAST_ITERATIONS = constexpr(_ITERATIONS)
MAX_CONVEX_CAST_EPSILON = constexpr(_EPSILON)
NORMAL_MIN_LENGTH2 = constexpr(_NORMAL_MIN_LENGTH2)
SIMD_EPSILON = constexpr(C.SIMD_EPSILON)
FLT_MAX = constexpr(C.FLT_MAX)
BT_LARGE_FLOAT = constexpr(_BT_LARGE_FLOAT)
VORONOI_EQUAL_VERTEX_THRESHOLD = constexpr(_EQUAL_VERTEX)
DEGENERATE_SIGN2 = constexpr(1e-4 * 1e-4)  # pointOutsideOfPlane's CATCH_DEGENERATE_TETRAHEDRON bound


# --- btVoronoiSimplexSolver (the twin of gjk_pair_detector's) ------------------------------------


@jit
def closest_pt_point_triangle(a, b, c):
    """btVoronoiSimplexSolver::closestPtPointTriangle for p = origin: (closest point, barycentric
    coordinates (3), used vertices (3)), Bullet's if-chain applied last-first as the reference does."""
    ab, ac = sub(b, a), sub(c, a)
    ap, bp, cp = neg(a), neg(b), neg(c)
    d1, d2 = dot(ab, ap), dot(ac, ap)
    d3, d4 = dot(ab, bp), dot(ac, bp)
    d5, d6 = dot(ab, cp), dot(ac, cp)
    vc = d1 * d4 - d3 * d2
    vb = d5 * d2 - d1 * d6
    va = d3 * d6 - d5 * d4
    zero, one = d1 * 0.0, d1 * 0.0 + 1.0
    yes, no = d1 == d1, d1 != d1
    # face region
    denom = 1.0 / (va + vb + vc)
    v, w = vb * denom, vc * denom
    point = add(add(a, scale(ab, v)), scale(ac, w))
    bary = (1 - v - w, v, w)
    used = (yes, yes, yes)
    # edge BC
    m = (va <= 0) & ((d4 - d3) >= 0) & ((d5 - d6) >= 0)
    t = (d4 - d3) / tl.where(m, (d4 - d3) + (d5 - d6), 1.0)
    point, bary, used = region(m, add(b, scale(sub(c, b), t)), (zero, 1 - t, t), (no, yes, yes), point, bary, used)
    # edge AC
    m = (vb <= 0) & (d2 >= 0) & (d6 <= 0)
    t = d2 / tl.where(m, d2 - d6, 1.0)
    point, bary, used = region(m, add(a, scale(ac, t)), (1 - t, zero, t), (yes, no, yes), point, bary, used)
    # vertex C
    m = (d6 >= 0) & (d5 <= d6)
    point, bary, used = region(m, c, (zero, zero, one), (no, no, yes), point, bary, used)
    # edge AB
    m = (vc <= 0) & (d1 >= 0) & (d3 <= 0)
    t = d1 / tl.where(m, d1 - d3, 1.0)
    point, bary, used = region(m, add(a, scale(ab, t)), (1 - t, t, zero), (yes, yes, no), point, bary, used)
    # vertex B
    m = (d3 >= 0) & (d4 <= d3)
    point, bary, used = region(m, b, (zero, one, zero), (no, yes, no), point, bary, used)
    # vertex A
    m = (d1 <= 0) & (d2 <= 0)
    point, bary, used = region(m, a, (one, zero, zero), (yes, no, no), point, bary, used)
    return point, bary, used


@jit
def region(m, p, coords, flags, point, bary, used):
    """`closest_pt_point_triangle`'s step: where ``m``, the region's point, coordinates and flags."""
    return (
        where(m, p, point),
        (tl.where(m, coords[0], bary[0]), tl.where(m, coords[1], bary[1]), tl.where(m, coords[2], bary[2])),
        (tl.where(m, flags[0], used[0]), tl.where(m, flags[1], used[1]), tl.where(m, flags[2], used[2])),
    )


@jit
def point_outside_of_plane(a, b, c, d):
    """btVoronoiSimplexSolver::pointOutsideOfPlane for p = origin: 1 / 0, or -1 when degenerate."""
    normal = cross(sub(b, a), sub(c, a))
    signp = dot(neg(a), normal)
    signd = dot(sub(d, a), normal)
    out = (signp * signd < 0).to(tl.int32)
    return tl.where(signd * signd < DEGENERATE_SIGN2, -1, out)


@jit
def pick4(values, k):
    """``values[k]`` of a 4-tuple of vectors for an index ``k`` known only at run time."""
    return where(k == 0, values[0], where(k == 1, values[1], where(k == 2, values[2], values[3])))


@jit
def closest_pt_point_tetrahedron(a, b, c, d):
    """btVoronoiSimplexSolver::closestPtPointTetrahedron for p = origin: (separated, degenerate,
    barycentric (4), used (4)); ``separated`` false with ``degenerate`` false: the origin is inside.
    Also returns `closest_pt_point_triangle`'s barycentric coordinates and used vertices of the face
    (a, b, c), the simplex's three-vertex case, so that the kernel holds one copy of the triangle's code.

    The faces ((a, b, c), (a, c, d), (a, d, b), (b, d, c), each against the fourth vertex) are visited
    in that order by a loop that is not unrolled; the closest outside face wins (the first of equals)."""
    zero = a[0] * 0.0
    degenerate = a[0] != a[0]
    any_out = degenerate
    best = zero + FLT_MAX
    bary = (zero, zero, zero, zero)
    used = (a[0] == a[0], a[0] == a[0], a[0] == a[0], a[0] == a[0])
    face_bary = (zero, zero, zero)
    face_used = (degenerate, degenerate, degenerate)
    vertices = (a, b, c, d)
    for f in range(4):
        # the face's vertices (slots i, j, k of the tetrahedron) and the one off it (slot l)
        i = tl.where(f == 3, 1, 0)
        j = tl.where(f == 0, 1, tl.where(f == 1, 2, 3))
        k = tl.where(f == 0, 2, tl.where(f == 1, 3, tl.where(f == 2, 1, 2)))
        l = tl.where(f == 0, 3, tl.where(f == 1, 1, tl.where(f == 2, 2, 0)))
        p, q, r = pick4(vertices, i), pick4(vertices, j), pick4(vertices, k)
        o = point_outside_of_plane(p, q, r, pick4(vertices, l))
        degenerate = degenerate | (o < 0)
        any_out = any_out | (o > 0)
        point, sub_bary, sub_used = closest_pt_point_triangle(p, q, r)
        first = f == 0
        face_bary = where(first, sub_bary, face_bary)
        face_used = where(first, sub_used, face_used)
        sq = dot(point, point)
        better = (o > 0) & (sq < best)
        best = tl.where(better, sq, best)
        new_bary = ()
        new_used = ()
        for s in tl.static_range(4):
            new_bary = new_bary + (
                tl.where(i == s, sub_bary[0], tl.where(j == s, sub_bary[1], tl.where(k == s, sub_bary[2], 0.0))),
            )
            new_used = new_used + ((i == s) & sub_used[0] | (j == s) & sub_used[1] | (k == s) & sub_used[2],)
        bary = (
            tl.where(better, new_bary[0], bary[0]),
            tl.where(better, new_bary[1], bary[1]),
            tl.where(better, new_bary[2], bary[2]),
            tl.where(better, new_bary[3], bary[3]),
        )
        used = (
            tl.where(better, new_used[0], used[0]),
            tl.where(better, new_used[1], used[1]),
            tl.where(better, new_used[2], used[2]),
            tl.where(better, new_used[3], used[3]),
        )
    separated = (~degenerate) & any_out
    return separated, degenerate, bary, used, face_bary, face_used


@jit
def simplex_empty(like):
    """`Simplex.empty`: no vertices, last_w far away, the cached vector and points at the origin."""
    zero = like[0] * 0.0
    z = (zero, zero, zero)
    far = zero + BT_LARGE_FLOAT
    return (z, z, z, z), (z, z, z, z), (z, z, z, z), zero.to(tl.int32), (far, far, far), z, z, z


@jit
def in_simplex(simplex, w):
    """`Simplex.in_simplex`: w within the equal-vertex threshold of a held vertex, or the last added."""
    vertices, count, last_w = simplex[0], simplex[3], simplex[4]
    found = (w[0] == last_w[0]) & (w[1] == last_w[1]) & (w[2] == last_w[2])
    for k in tl.static_range(4):
        diff = sub(vertices[k], w)
        found = found | ((dot(diff, diff) <= VORONOI_EQUAL_VERTEX_THRESHOLD) & (k < count))
    return found


@jit
def add_vertex(simplex, mask, w, p, q):
    """`Simplex.add_vertex`: (w, p, q) at slot ``count`` where ``mask``."""
    sw, sp, sq, count, last_w, cached_v, cached_p1, cached_p2 = simplex
    new_w = ()
    new_p = ()
    new_q = ()
    for k in tl.static_range(4):
        at = mask & (count == k)
        new_w = new_w + (where(at, w, sw[k]),)
        new_p = new_p + (where(at, p, sp[k]),)
        new_q = new_q + (where(at, q, sq[k]),)
    return new_w, new_p, new_q, count + mask.to(tl.int32), where(mask, w, last_w), cached_v, cached_p1, cached_p2


@jit
def reduce_vertices(simplex, used):
    """`Simplex._reduce` (reduceVertices): drop the unused vertices D, C, B, A in that order, each
    replaced by the last held one (removeVertex)."""
    w, p, q, n = simplex[0], simplex[1], simplex[2], simplex[3]
    for slot in tl.static_range(3, -1, -1):
        drop = (n >= slot + 1) & (~used[slot])
        n = n - drop.to(tl.int32)
        if tl.max(drop.to(tl.int32), axis=0) > 0:  # most reductions drop nothing in every lane
            new_w = ()
            new_p = ()
            new_q = ()
            for k in tl.static_range(4):
                if k == slot:
                    new_w = new_w + (where(drop, pick4(w, n), w[k]),)
                    new_p = new_p + (where(drop, pick4(p, n), p[k]),)
                    new_q = new_q + (where(drop, pick4(q, n), q[k]),)
                else:
                    new_w = new_w + (w[k],)
                    new_p = new_p + (p[k],)
                    new_q = new_q + (q[k],)
            w, p, q = new_w, new_p, new_q
    return w, p, q, n


@jit
def closest(simplex, mask):
    """`Simplex.closest` (updateClosestVectorAndPoints) where ``mask``: (the simplex with its closest
    vector ``cached_v`` and points, reduced to the vertices used; validity)."""
    w, p, q, n, last_w, cached_v, cached_p1, cached_p2 = simplex
    w0, w1, w2, w3 = w
    p0, p1, p2, p3 = p
    q0, q1, q2, q3 = q
    yes, no = n == n, n != n
    used_1 = (yes, no, no, no)
    # one vertex
    v_1, a_1, b_1 = sub(p0, q0), p0, q0
    # two vertices: the closest point of the segment to the origin
    seg = sub(w1, w0)
    t = dot(seg, neg(w0))
    seg2 = dot(seg, seg)
    inside = (t > 0) & (t < seg2)
    t = tl.where(t > 0, tl.where(inside, t / tl.where(inside, seg2, 1.0), 1.0), 0.0)
    a_2 = add(p0, scale(sub(p1, p0), t))
    b_2 = add(q0, scale(sub(q1, q0), t))
    v_2 = sub(a_2, b_2)
    used_2 = ((t <= 0) | inside, t > 0, no, no)
    valid_2 = (1 - t >= 0) & (t >= 0)
    # three and four vertices, computed only when some lane of the program holds that many: the
    # tetrahedron's first face is the triangle (w0, w1, w2), closest_pt_point_triangle's three-vertex case
    v_3, a_3, b_3, used_3, valid_3 = v_1, a_1, b_1, used_1, yes
    v_4, a_4, b_4, used_4, valid_4 = v_1, a_1, b_1, used_1, yes
    if tl.max((n >= 3).to(tl.int32), axis=0) > 0:
        separated, degenerate, bary4, used4, bary3, used3 = closest_pt_point_tetrahedron(w0, w1, w2, w3)
        a_3 = add(add(scale(p0, bary3[0]), scale(p1, bary3[1])), scale(p2, bary3[2]))
        b_3 = add(add(scale(q0, bary3[0]), scale(q1, bary3[1])), scale(q2, bary3[2]))
        v_3 = sub(a_3, b_3)
        used_3 = used3 + (no,)
        valid_3 = (bary3[0] >= 0) & (bary3[1] >= 0) & (bary3[2] >= 0)
        a_4 = add(add(add(scale(p0, bary4[0]), scale(p1, bary4[1])), scale(p2, bary4[2])), scale(p3, bary4[3]))
        b_4 = add(add(add(scale(q0, bary4[0]), scale(q1, bary4[1])), scale(q2, bary4[2])), scale(q3, bary4[3]))
        zero = (w0[0] * 0.0, w0[0] * 0.0, w0[0] * 0.0)
        v_4 = where(separated, sub(a_4, b_4), where(degenerate, cached_v, zero))
        a_4 = where(separated, a_4, cached_p1)  # not updated when not separated
        b_4 = where(separated, b_4, cached_p2)
        all4 = (bary4[0] >= 0) & (bary4[1] >= 0) & (bary4[2] >= 0) & (bary4[3] >= 0)
        valid_4 = tl.where(separated, all4, ~degenerate)
        used_4 = (used4[0] | ~separated, used4[1] | ~separated, used4[2] | ~separated, used4[3] | ~separated)

    v = where(n == 1, v_1, where(n == 2, v_2, where(n == 3, v_3, v_4)))
    a = where(n == 1, a_1, where(n == 2, a_2, where(n == 3, a_3, a_4)))
    b = where(n == 1, b_1, where(n == 2, b_2, where(n == 3, b_3, b_4)))
    used = ()
    for k in tl.static_range(4):
        used = used + (
            tl.where(n == 1, used_1[k], tl.where(n == 2, used_2[k], tl.where(n == 3, used_3[k], used_4[k]))),
        )
    valid = tl.where(n == 1, yes, tl.where(n == 2, valid_2, tl.where(n == 3, valid_3, valid_4)))
    rw, rp, rq, rn = reduce_vertices(simplex, used)
    new_w = ()
    new_p = ()
    new_q = ()
    for k in tl.static_range(4):
        new_w = new_w + (where(mask, rw[k], w[k]),)
        new_p = new_p + (where(mask, rp[k], p[k]),)
        new_q = new_q + (where(mask, rq[k], q[k]),)
    out = (
        new_w,
        new_p,
        new_q,
        tl.where(mask, rn, n),
        last_w,
        where(mask, v, cached_v),
        where(mask, a, cached_p1),
        where(mask, b, cached_p2),
    )
    return out, valid


# --- btSubsimplexConvexCast ---------------------------------------------------------------------


@jit
def support_with_margin(shape, d):
    """localGetSupportingVertex along a local direction: the box's corner of half extents inner +
    margin (btBoxShape), or the sphere's point at its radius (btSphereShape: (-1, -1, -1) normalised
    for a direction shorter than SIMD_EPSILON); ``shape``'s kind picks one per lane."""
    is_sphere, _, _, half, margin = shape
    box = (
        tl.where(d[0] >= 0, half[0] + margin, -(half[0] + margin)),
        tl.where(d[1] >= 0, half[1] + margin, -(half[1] + margin)),
        tl.where(d[2] >= 0, half[2] + margin, -(half[2] + margin)),
    )
    tiny = dot(d, d) < SIMD_EPSILON * SIMD_EPSILON
    toward = where(tiny, (-1.0, -1.0, -1.0), d)
    return where(is_sphere, scale(normalized(toward), margin), box)


@jit
def support_b(shape, direction):
    """The shape's support point along a world direction, in world space (its frame's to_local and
    to_world around `support_with_margin`; the sphere's frame is the identity)."""
    is_sphere, origin, basis, _, _ = shape
    local = where(is_sphere, direction, vec_mat(direction, basis))
    point = support_with_margin(shape, local)
    return add(where(is_sphere, point, mat_vec(basis, point)), origin)


@jit
def ray_cast_convex(shape, start, end, cast):
    """The ray start -> end against ``shape`` on the lanes ``cast``: (hit, fraction, unit normal facing
    the start), as rayTestSingleInternal reports it: calcTimeOfImpact succeeded (its last step may
    overshoot the ray's end), the normal is longer than 0.01 and the fraction below 1. A ray starting
    inside the shape does not hit; lanes not cast do not hit."""
    r = sub(end, start)
    v = sub(start, support_b(shape, r))
    zero = r[0] * 0.0
    lam = zero
    x = start
    n = (zero, zero, zero)
    dist2 = dot(v, v)
    simplex = simplex_empty(start)
    active = cast & (dist2 > MAX_CONVEX_CAST_EPSILON)
    failed = zero != zero
    it = 0
    while (it < MAX_CONVEX_CAST_ITERATIONS) & (tl.max(active.to(tl.int32), axis=0) > 0):
        sup_a = x
        sup_b = support_b(shape, v)
        w = sub(sup_a, sup_b)
        v_dot_w = dot(v, w)
        beyond = active & (lam > 1.0)
        failed = failed | beyond
        active = active & (~beyond)
        v_dot_r = dot(v, r)
        advance = active & (v_dot_w > 0)
        away = advance & (v_dot_r >= -(SIMD_EPSILON * SIMD_EPSILON))
        failed = failed | away
        active = active & (~away)
        advance = advance & (~away)
        lam = tl.where(advance, lam - v_dot_w / tl.where(advance, v_dot_r, -1.0), lam)
        x = where(advance, add(scale(start, 1.0 - lam), scale(end, lam)), x)  # setInterpolate3
        n = where(advance, v, n)
        # w keeps the support points found before the advance, as Bullet's does
        added = active & (~in_simplex(simplex, w))
        simplex = add_vertex(simplex, added, w, sup_a, sup_b)
        simplex, valid = closest(simplex, added)
        v = where(active, simplex[5], v)
        dist2 = tl.where(active, tl.where(added & (~valid), 0.0, dot(v, v)), dist2)
        active = active & (dist2 > MAX_CONVEX_CAST_EPSILON)
        it += 1
    has_normal = dot(n, n) >= SIMD_EPSILON * SIMD_EPSILON
    normal = where(has_normal, normalized(where(has_normal, n, (1.0, 1.0, 1.0))), (0.0, 0.0, 0.0))
    hit = cast & (~failed) & (dot(normal, r) < 0) & (dot(normal, normal) > NORMAL_MIN_LENGTH2) & (lam < 1.0)
    normal = where(hit, normalized(where(hit, normal, (1.0, 1.0, 1.0))), (0.0, 0.0, 0.0))  # and again
    return hit, tl.where(hit, lam, 1.0), normal


@jit
def normalized(v):
    """btVector3::normalized: v times 1 / |v| (callers mask zero vectors)."""
    return scale(v, 1.0 / tl.sqrt(dot(v, v)))
