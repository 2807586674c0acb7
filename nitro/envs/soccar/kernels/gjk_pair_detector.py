"""btGjkPairDetector per lane: the twin of `gjk_pair_detector.py`, the same functions under the same
names: btVoronoiSimplexSolver (its closest-point functions and the simplex, which the GJK ray cast of
`kernels/subsimplex_convex_cast.py` runs too) and GJK's closest points of a car's box (with its
margin) and an arena triangle.

A simplex is (w, p, q, count, last_w, cached_v, cached_p1, cached_p2): four vertices of A - B with
their points on A and B (4-tuples of vectors), as the reference's `Simplex` holds them. The loops run
while some lane of the program is still running (the reference stops once no lane is), so the
compiled kernel holds one copy of each loop's body. The simplex solver divides as IEEE does (and the
reference) for the ray cast (``EXACT``: `quotient`), whose answer turns on the last ulp; GJK's closest
points keep the GPU's faster division (measured on an H200: IEEE's in both made the car step's second
pass 0.46 -> 0.64 ms per tick, 1v1 at 1M envs).

The penetration depth solver (btGjkEpa2's EPA, `gjk_epa`) is not here: where Bullet would run it,
`gjk_closest_points` reports nothing and marks the lane (``needs_penetration``), as the reference
does with ``penetration=False``; the car's contacts take the separating axes there
(`kernels/car_contacts.box_triangle_contacts`).
"""

from __future__ import annotations

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.gjk_epa import BT_LARGE_FLOAT as _BT_LARGE_FLOAT
from nitro.envs.soccar.gjk_pair_detector import DEGENERATE_PENETRATION_DISTANCE as _DEGENERATE_PENETRATION
from nitro.envs.soccar.gjk_pair_detector import GJK_MAX_ITERATIONS as _GJK_MAX_ITERATIONS
from nitro.envs.soccar.gjk_pair_detector import REL_ERROR2 as _REL_ERROR2
from nitro.envs.soccar.gjk_pair_detector import VORONOI_EQUAL_VERTEX_THRESHOLD as _EQUAL_VERTEX
from nitro.envs.soccar.kernels import constexpr, jit, tl
from nitro.envs.soccar.kernels.rigid_body import mat_vec, vec_mat
from nitro.envs.soccar.kernels.vec import add, cross, dot, neg, scale, sub, where

SIMD_EPSILON = constexpr(C.SIMD_EPSILON)
FLT_MAX = constexpr(C.FLT_MAX)
BT_LARGE_FLOAT = constexpr(_BT_LARGE_FLOAT)
VORONOI_EQUAL_VERTEX_THRESHOLD = constexpr(_EQUAL_VERTEX)
DEGENERATE_SIGN2 = constexpr(1e-4 * 1e-4)  # pointOutsideOfPlane's CATCH_DEGENERATE_TETRAHEDRON bound
REL_ERROR2 = constexpr(_REL_ERROR2)
GJK_MAX_ITERATIONS = constexpr(_GJK_MAX_ITERATIONS)
DEGENERATE_PENETRATION_DISTANCE = constexpr(_DEGENERATE_PENETRATION)


# --- btVoronoiSimplexSolver -----------------------------------------------------------------------


@jit
def quotient(a, b, EXACT: tl.constexpr):
    """a / b, rounded as IEEE's (and the reference's) division with ``EXACT``, else the GPU's default
    division (approximate; the interpreter's is IEEE's either way)."""
    if EXACT:
        q = tl.div_rn(a, b)
    else:
        q = a / b
    return q


@jit
def closest_pt_point_triangle(a, b, c, EXACT: tl.constexpr):
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
    denom = quotient(1.0, va + vb + vc, EXACT)
    v, w = vb * denom, vc * denom
    point = add(add(a, scale(ab, v)), scale(ac, w))
    bary = (1 - v - w, v, w)
    used = (yes, yes, yes)
    # edge BC
    m = (va <= 0) & ((d4 - d3) >= 0) & ((d5 - d6) >= 0)
    t = quotient(d4 - d3, tl.where(m, (d4 - d3) + (d5 - d6), 1.0), EXACT)
    point, bary, used = region(m, add(b, scale(sub(c, b), t)), (zero, 1 - t, t), (no, yes, yes), point, bary, used)
    # edge AC
    m = (vb <= 0) & (d2 >= 0) & (d6 <= 0)
    t = quotient(d2, tl.where(m, d2 - d6, 1.0), EXACT)
    point, bary, used = region(m, add(a, scale(ac, t)), (1 - t, zero, t), (yes, no, yes), point, bary, used)
    # vertex C
    m = (d6 >= 0) & (d5 <= d6)
    point, bary, used = region(m, c, (zero, zero, one), (no, no, yes), point, bary, used)
    # edge AB
    m = (vc <= 0) & (d1 >= 0) & (d3 <= 0)
    t = quotient(d1, tl.where(m, d1 - d3, 1.0), EXACT)
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
def closest_pt_point_tetrahedron(a, b, c, d, EXACT: tl.constexpr):
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
        point, sub_bary, sub_used = closest_pt_point_triangle(p, q, r, EXACT)
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
def closest(simplex, mask, EXACT: tl.constexpr = False):
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
    t = tl.where(t > 0, tl.where(inside, quotient(t, tl.where(inside, seg2, 1.0), EXACT), 1.0), 0.0)
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
        separated, degenerate, bary4, used4, bary3, used3 = closest_pt_point_tetrahedron(w0, w1, w2, w3, EXACT)
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


# --- btGjkPairDetector ----------------------------------------------------------------------------


@jit
def box_support(half, d):
    """`gjk_epa.box_support`: the box's corner of ``half`` along ``d``, without margin (btFsels: >= 0 -> +)."""
    return (
        tl.where(d[0] >= 0, half[0], -half[0]),
        tl.where(d[1] >= 0, half[1], -half[1]),
        tl.where(d[2] >= 0, half[2], -half[2]),
    )


@jit
def triangle_support(tri, d):
    """`gjk_epa.triangle_support`: the vertex of ``tri`` with the largest dot with ``d``, ties as the
    reference breaks them."""
    x, y, z = dot(tri[0], d), dot(tri[1], d), dot(tri[2], d)
    third = tl.where(x < y, y < z, x < z)
    second = (x < y) & (~(y < z))
    return where(third, tri[2], where(second, tri[1], tri[0]))


@jit
def gjk_closest_points(origin, basis, half, margin, tri, max_distance2, live):
    """`gjk_pair_detector.gjk_closest_points` with ``penetration=False`` for a car's box A (``origin``,
    ``basis`` its rotation's rows, ``half`` its inner half extents, ``margin``) against a triangle B
    (``tri``: its vertices, no margin), Bullet units, on the lanes ``live``: (found, unit normal from the
    triangle into the box, the point on the triangle, the signed distance of the margin-grown shapes,
    needs_penetration)."""
    offset = scale(origin, 0.5)  # both transforms shifted by half the sum of their origins
    origin_a = sub(origin, offset)
    origin_b = neg(offset)
    zero = origin[0] * 0.0
    axis = (zero, zero + 1.0, zero)
    sqdist = zero + BT_LARGE_FLOAT
    simplex = simplex_empty(origin)
    active = live
    check_simplex = zero != zero
    degenerate = tl.zeros_like(zero).to(tl.int32)
    it = 0
    while (it < GJK_MAX_ITERATIONS) & (tl.max(active.to(tl.int32), axis=0) > 0):
        p_world = add(mat_vec(basis, box_support(half, vec_mat(neg(axis), basis))), origin_a)
        q_world = add(triangle_support(tri, axis), origin_b)
        w = sub(p_world, q_world)
        delta = dot(axis, w)
        # potential exit: they do not overlap
        stop = active & (delta > 0) & (delta * delta > sqdist * max_distance2)
        degenerate = tl.where(stop, 10, degenerate)
        check_simplex = check_simplex | stop
        active = active & (~stop)
        # the new point is already in the simplex, or we did not come any closer
        stop = active & in_simplex(simplex, w)
        degenerate = tl.where(stop, 1, degenerate)
        check_simplex = check_simplex | stop
        active = active & (~stop)
        f0 = sqdist - delta
        f1 = sqdist * REL_ERROR2
        stop = active & (f0 <= f1)
        degenerate = tl.where(stop, tl.where(f0 <= 0, 2, 11), degenerate)
        check_simplex = check_simplex | stop
        active = active & (~stop)
        simplex = add_vertex(simplex, active, w, p_world, q_world)
        simplex, valid = closest(simplex, active)
        new_axis = simplex[5]
        stop = active & (~valid)
        degenerate = tl.where(stop, 3, degenerate)
        check_simplex = check_simplex | stop
        active = active & (~stop)
        tiny = active & (dot(new_axis, new_axis) < REL_ERROR2)
        axis = where(tiny, new_axis, axis)
        degenerate = tl.where(tiny, 6, degenerate)
        check_simplex = check_simplex | tiny
        active = active & (~tiny)
        previous = sqdist
        sqdist = tl.where(active, dot(new_axis, new_axis), sqdist)
        stop = active & (previous - sqdist <= SIMD_EPSILON * previous)
        degenerate = tl.where(stop, 12, degenerate)
        check_simplex = check_simplex | stop
        active = active & (~stop)
        axis = where(active, new_axis, axis)
        full = active & (simplex[3] == 4)  # ends without checkSimplex: the EPA decides
        degenerate = tl.where(full, 13, degenerate)
        active = active & (~full)
        it += 1
    # checkSimplex: the closest point of the simplex on the triangle (which has no margin; the car's
    # point, moved out to its margin, is not used)
    point_b = simplex[7]
    len2 = dot(axis, axis)
    degenerate = tl.where(check_simplex & (len2 < 0.0001), 5, degenerate)
    valid = check_simplex & (len2 > SIMD_EPSILON * SIMD_EPSILON)
    rlen = 1.0 / tl.sqrt(tl.where(valid, len2, 1.0))
    normal = scale(axis, rlen)
    distance = tl.where(valid, 1.0 / rlen - margin, 0.0)
    catch = (degenerate != 0) & (distance + margin < DEGENERATE_PENETRATION_DISTANCE)
    needs_penetration = live & ((~valid) | catch)
    valid = valid & (~needs_penetration)
    found = valid & ((distance < 0) | (distance * distance < max_distance2))
    # fixContactNormalDirection: the normal must point from B's AABB centre toward A's
    a, b, c = add(tri[0], origin_b), add(tri[1], origin_b), add(tri[2], origin_b)
    lo = (
        tl.minimum(tl.minimum(a[0], b[0]), c[0]),
        tl.minimum(tl.minimum(a[1], b[1]), c[1]),
        tl.minimum(tl.minimum(a[2], b[2]), c[2]),
    )
    hi = (
        tl.maximum(tl.maximum(a[0], b[0]), c[0]),
        tl.maximum(tl.maximum(a[1], b[1]), c[1]),
        tl.maximum(tl.maximum(a[2], b[2]), c[2]),
    )
    flip = dot(sub(origin_a, scale(add(lo, hi), 0.5)), normal) < 0
    normal = where(flip, neg(normal), normal)
    return found, normal, add(point_b, offset), distance, needs_penetration
