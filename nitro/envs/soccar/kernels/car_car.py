"""Car bodies against each other per lane (one car pair per lane): the twin of `car_car.py`, the same
functions, btBoxBoxDetector's dBoxBox2 with RocketSim's manifold around it.

Rotations are row tuples ((m00, m01, m02), ...) whose columns are the box's axes; the clipped
polygons are tuples of 8 slots (x, y) with a count, as the reference's [P, 8, 2] rows.
"""

from __future__ import annotations

from nitro.envs.soccar import car_car as reference
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.kernels import constexpr, jit, tl
from nitro.envs.soccar.kernels.rigid_body import column, mat_vec
from nitro.envs.soccar.kernels.vec import add, atan2, dot, neg, pick, pick3, put, scale, sub, where

FUDGE_FACTOR = constexpr(reference.FUDGE_FACTOR)
FUDGE2 = constexpr(reference.FUDGE2)
M_PI_F = constexpr(reference.M_PI_F)
TWO_PI_F = constexpr(2 * reference.M_PI_F)
CULL_STEP = constexpr(C.f32(C.f32(2 * reference.M_PI_F) / reference.BOX_BOX_MAX_CONTACTS))
SIMD_EPSILON = constexpr(C.SIMD_EPSILON)
FLT_MAX = constexpr(C.FLT_MAX)
PARALLEL = constexpr(C.f32(0.0001))
SLOTS = constexpr(8)
POINTS = constexpr(reference.BOX_BOX_MAX_CONTACTS)


@jit
def _vec_mat(v, m):
    """v * m (= transpose(m) v): each column of ``m`` dotted with ``v``."""
    return dot(column(m, 0), v), dot(column(m, 1), v), dot(column(m, 2), v)


@jit
def _fill(value, N: tl.constexpr):
    out = ()
    for j in tl.static_range(N):
        out = out + (value,)
    return out


@jit
def line_closest_approach(pa, ua, pb, ub):
    """dLineClosestApproach: the parameters (alpha, beta) of the closest points of two lines."""
    p = sub(pb, pa)
    uaub = dot(ua, ub)
    q1 = dot(ua, p)
    q2 = -dot(ub, p)
    d = 1 - uaub * uaub
    parallel = d <= PARALLEL
    d = 1.0 / tl.where(parallel, 1.0, d)
    alpha = tl.where(parallel, 0.0, (q1 + uaub * q2) * d)
    beta = tl.where(parallel, 0.0, (uaub * q1 + q2) * d)
    return alpha, beta


@jit
def intersect_rect_quad(h, quad_x, quad_y):
    """intersectRectQuad2: the quadrilateral (4 x's and 4 y's) clipped by the rectangle |x| < h[0],
    |y| < h[1], chopping along x = -h0, x = h0, y = -h1, y = h1 in turn and stopping at 8 points.
    Returns (8 x's, 8 y's, count)."""
    zero = h[0] * 0.0
    q = (quad_x + _fill(zero, 4), quad_y + _fill(zero, 4))
    nq = (zero * 0).to(tl.int32) + 4
    done = zero != zero
    for axis in tl.static_range(2):
        for side in tl.static_range(2):
            sign = side * 2.0 - 1.0
            r = (_fill(zero, SLOTS), _fill(zero, SLOTS))
            nr = nq * 0
            full = done & False
            limit = sign * h[axis]
            for i in tl.static_range(SLOTS):
                live = (~done) & (~full) & (i < nq)
                pq = (q[0][i], q[1][i])
                if i + 1 < SLOTS:  # the next point, or the first after the last
                    wraps = i + 1 < nq
                    nxt = (tl.where(wraps, q[0][i + 1], q[0][0]), tl.where(wraps, q[1][i + 1], q[1][0]))
                else:
                    nxt = (q[0][0], q[1][0])
                inside = sign * pq[axis] < h[axis]
                add_it = live & inside
                r = (put(r[0], nr, pq[0], add_it, SLOTS), put(r[1], nr, pq[1], add_it, SLOTS))
                nr = nr + add_it.to(tl.int32)
                full = full | (live & (nr >= SLOTS))
                crosses = live & (~full) & (inside ^ (sign * nxt[axis] < h[axis]))
                t = (nxt[1 - axis] - pq[1 - axis]) / tl.where(crosses, nxt[axis] - pq[axis], 1.0)
                moved = pq[1 - axis] + t * (limit - pq[axis])
                if axis == 0:
                    cut = (limit, moved)
                else:
                    cut = (moved, limit)
                r = (put(r[0], nr, cut[0], crosses, SLOTS), put(r[1], nr, cut[1], crosses, SLOTS))
                nr = nr + crosses.to(tl.int32)
                full = full | (crosses & (nr >= SLOTS))
            qx = ()
            qy = ()
            for i in tl.static_range(SLOTS):
                qx = qx + (tl.where(done, q[0][i], r[0][i]),)
                qy = qy + (tl.where(done, q[1][i], r[1][i]),)
            q = (qx, qy)
            nq = tl.where(done, nq, nr)
            done = done | full
    return q[0], q[1], nq


@jit
def cull_points(x, y, n, first):
    """cullPoints2 with m = 4: from ``n`` (5 to 8) points (x's, y's), the deepest ``first`` and the
    three whose angles about the centroid lie nearest the deepest's plus 90, 180 and 270 degrees.
    Returns their indices (4)."""
    zero = x[0] * 0.0
    a = zero
    cx = zero
    cy = zero
    for i in tl.static_range(SLOTS - 1):  # the polygon's signed area and centroid, edges i -> i + 1 < n
        live = i < n - 1
        q = x[i] * y[i + 1] - x[i + 1] * y[i]
        a = tl.where(live, a + q, a)
        cx = tl.where(live, cx + q * (x[i] + x[i + 1]), cx)
        cy = tl.where(live, cy + q * (y[i] + y[i + 1]), cy)
    last = tl.maximum(n - 1, 0)
    xl = pick(x, last, SLOTS)
    yl = pick(y, last, SLOTS)
    q = xl * y[0] - x[0] * yl
    area = a + q
    big = tl.abs(area) > SIMD_EPSILON
    a = tl.where(big, 1.0 / (3.0 * tl.where(big, area, 1.0)), 1e18)
    cx = a * (cx + q * (xl + x[0]))
    cy = a * (cy + q * (yl + y[0]))
    angles = ()
    taken = ()
    for i in tl.static_range(SLOTS):
        angles = angles + (atan2(y[i] - cy, x[i] - cx),)
        taken = taken + ((i >= n) | (first == i),)
    a0 = pick(angles, first, SLOTS)
    chosen = (first,)
    for j in tl.static_range(1, POINTS):
        target = j * CULL_STEP + a0
        target = tl.where(target > M_PI_F, target - TWO_PI_F, target)
        best = zero + 1e9
        nearest = first
        for i in tl.static_range(SLOTS):  # strict <: the first nearest wins
            diff = tl.abs(angles[i] - target)
            diff = tl.where(diff > M_PI_F, TWO_PI_F - diff, diff)
            better = (~taken[i]) & (diff < best)
            best = tl.where(better, diff, best)
            nearest = tl.where(better, i, nearest)
        taken = put(taken, nearest, True, True, SLOTS)
        chosen = chosen + (nearest,)
    return chosen


@jit
def box_box(p1, r1, a, p2, r2, b):
    """dBoxBox2 as btBoxBoxDetector calls it (maxc 4): box 1 at ``p1`` with axes the columns of
    ``r1`` and half extents ``a``, box 2 likewise. Returns (count, normal on B, 4 points on B, 4
    depths) as reported to addContactPoint: the normal points from box 2 into box 1 and depths are
    negative."""
    p = sub(p2, p1)
    c1 = (column(r1, 0), column(r1, 1), column(r1, 2))
    c2 = (column(r2, 0), column(r2, 1), column(r2, 2))
    pp = (dot(c1[0], p), dot(c1[1], p), dot(c1[2], p))  # p in box 1's frame
    rm = ()
    for i in tl.static_range(3):
        rm = rm + ((dot(c1[i], c2[0]), dot(c1[i], c2[1]), dot(c1[i], c2[2])),)  # R1'R2
    qm = ()
    for i in tl.static_range(3):
        qm = qm + ((tl.abs(rm[i][0]), tl.abs(rm[i][1]), tl.abs(rm[i][2])),)
    zero = p[0] * 0.0
    s = zero - FLT_MAX
    separated = zero != zero
    invert = separated
    code = (zero * 0).to(tl.int32)
    normal_c = (zero, zero, zero)
    pr2 = (dot(c2[0], p), dot(c2[1], p), dot(c2[2], p))
    faces = (
        (pp[0], a[0] + b[0] * qm[0][0] + b[1] * qm[0][1] + b[2] * qm[0][2]),
        (pp[1], a[1] + b[0] * qm[1][0] + b[1] * qm[1][1] + b[2] * qm[1][2]),
        (pp[2], a[2] + b[0] * qm[2][0] + b[1] * qm[2][1] + b[2] * qm[2][2]),
        (pr2[0], a[0] * qm[0][0] + a[1] * qm[1][0] + a[2] * qm[2][0] + b[0]),
        (pr2[1], a[0] * qm[0][1] + a[1] * qm[1][1] + a[2] * qm[2][1] + b[1]),
        (pr2[2], a[0] * qm[0][2] + a[1] * qm[1][2] + a[2] * qm[2][2] + b[2]),
    )
    for k in tl.static_range(6):
        expr1 = faces[k][0]
        s2 = tl.abs(expr1) - faces[k][1]
        separated = separated | (s2 > 0)
        better = s2 > s
        s = tl.where(better, s2, s)
        invert = tl.where(better, expr1 < 0, invert)
        code = tl.where(better, k + 1, code)
    q = ()
    for i in tl.static_range(3):
        q = q + ((qm[i][0] + FUDGE2, qm[i][1] + FUDGE2, qm[i][2] + FUDGE2),)
    r = rm
    edges = (
        (pp[2] * r[1][0] - pp[1] * r[2][0], a[1] * q[2][0] + a[2] * q[1][0] + b[1] * q[0][2] + b[2] * q[0][1], (zero, -r[2][0], r[1][0])),
        (pp[2] * r[1][1] - pp[1] * r[2][1], a[1] * q[2][1] + a[2] * q[1][1] + b[0] * q[0][2] + b[2] * q[0][0], (zero, -r[2][1], r[1][1])),
        (pp[2] * r[1][2] - pp[1] * r[2][2], a[1] * q[2][2] + a[2] * q[1][2] + b[0] * q[0][1] + b[1] * q[0][0], (zero, -r[2][2], r[1][2])),
        (pp[0] * r[2][0] - pp[2] * r[0][0], a[0] * q[2][0] + a[2] * q[0][0] + b[1] * q[1][2] + b[2] * q[1][1], (r[2][0], zero, -r[0][0])),
        (pp[0] * r[2][1] - pp[2] * r[0][1], a[0] * q[2][1] + a[2] * q[0][1] + b[0] * q[1][2] + b[2] * q[1][0], (r[2][1], zero, -r[0][1])),
        (pp[0] * r[2][2] - pp[2] * r[0][2], a[0] * q[2][2] + a[2] * q[0][2] + b[0] * q[1][1] + b[1] * q[1][0], (r[2][2], zero, -r[0][2])),
        (pp[1] * r[0][0] - pp[0] * r[1][0], a[0] * q[1][0] + a[1] * q[0][0] + b[1] * q[2][2] + b[2] * q[2][1], (-r[1][0], r[0][0], zero)),
        (pp[1] * r[0][1] - pp[0] * r[1][1], a[0] * q[1][1] + a[1] * q[0][1] + b[0] * q[2][2] + b[2] * q[2][0], (-r[1][1], r[0][1], zero)),
        (pp[1] * r[0][2] - pp[0] * r[1][2], a[0] * q[1][2] + a[1] * q[0][2] + b[0] * q[2][1] + b[1] * q[2][0], (-r[1][2], r[0][2], zero)),
    )  # fmt: skip
    for k in tl.static_range(9):
        expr1 = edges[k][0]
        n_ = edges[k][2]
        s2 = tl.abs(expr1) - edges[k][1]
        separated = separated | (s2 > SIMD_EPSILON)
        length = tl.sqrt((n_[0] * n_[0] + n_[1] * n_[1]) + n_[2] * n_[2])
        usable = length > SIMD_EPSILON
        s2 = s2 / tl.where(usable, length, 1.0)
        better = usable & (s2 * FUDGE_FACTOR > s)
        s = tl.where(better, s2, s)
        safe = tl.where(usable, length, 1.0)
        normal_c = where(better, (n_[0] / safe, n_[1] / safe, n_[2] / safe), normal_c)
        invert = tl.where(better, expr1 < 0, invert)
        code = tl.where(better, k + 7, code)
    touching = (~separated) & (code > 0)
    face_normal = where(code <= 3, pick3(c1, tl.minimum(tl.maximum(code - 1, 0), 2), 3),
                        pick3(c2, tl.minimum(tl.maximum(code - 4, 0), 2), 3))  # fmt: skip
    normal = where(code <= 6, face_normal, mat_vec(r1, normal_c))
    normal = where(invert, neg(normal), normal)
    depth = -s

    # an edge of box 1 against an edge of box 2: one point, on box 2's edge
    pa = p1
    for j in tl.static_range(3):
        sign = tl.where(dot(normal, c1[j]) > 0, 1.0, -1.0)
        pa = add(pa, scale(c1[j], sign * a[j]))
    pb = p2
    for j in tl.static_range(3):
        sign = tl.where(dot(normal, c2[j]) > 0, -1.0, 1.0)
        pb = add(pb, scale(c2[j], sign * b[j]))
    ua = pick3(c1, tl.minimum(tl.maximum((code - 7) // 3, 0), 2), 3)
    ub = pick3(c2, (code + 2) % 3, 3)  # (code - 7) mod 3, non-negative
    _, beta = line_closest_approach(pa, ua, pb, ub)
    edge_point = add(pb, scale(ub, beta))

    # a face: the incident face of the other box, clipped against the reference face
    on_1 = code <= 3
    ra = (where(on_1, c1[0], c2[0]), where(on_1, c1[1], c2[1]), where(on_1, c1[2], c2[2]))  # columns
    rb = (where(on_1, c2[0], c1[0]), where(on_1, c2[1], c1[1]), where(on_1, c2[2], c1[2]))
    pa_f = where(on_1, p1, p2)
    pb_f = where(on_1, p2, p1)
    sa = where(on_1, a, b)
    sb = where(on_1, b, a)
    normal2 = where(on_1, normal, neg(normal))
    nr = (dot(normal2, rb[0]), dot(normal2, rb[1]), dot(normal2, rb[2]))
    anr = (tl.abs(nr[0]), tl.abs(nr[1]), tl.abs(nr[2]))
    lanr = tl.where(anr[1] > anr[0], tl.where(anr[1] > anr[2], 1, 2), tl.where(anr[0] > anr[2], 0, 2))
    a1i = tl.where(lanr == 0, 1, 0)
    a2i = tl.where(lanr == 2, 1, 2)
    sb_l = pick(sb, lanr, 3)
    rb_l = pick3(rb, lanr, 3)
    nr_l = pick(nr, lanr, 3)
    offset = sub(pb_f, pa_f)
    center = where(nr_l < 0, add(offset, scale(rb_l, sb_l)), sub(offset, scale(rb_l, sb_l)))
    code_n = tl.minimum(tl.maximum(tl.where(on_1, code - 1, code - 4), 0), 2)
    code1 = tl.where(code_n == 0, 1, 0)
    code2 = tl.where(code_n == 2, 1, 2)
    ra1 = pick3(ra, code1, 3)
    ra2 = pick3(ra, code2, 3)
    rb1 = pick3(rb, a1i, 3)
    rb2 = pick3(rb, a2i, 3)
    cc1 = dot(center, ra1)
    cc2 = dot(center, ra2)
    m11 = dot(ra1, rb1)
    m12 = dot(ra1, rb2)
    m21 = dot(ra2, rb1)
    m22 = dot(ra2, rb2)
    sb1 = pick(sb, a1i, 3)
    sb2 = pick(sb, a2i, 3)
    k1 = m11 * sb1
    k2 = m21 * sb1
    k3 = m12 * sb2
    k4 = m22 * sb2
    quad_x = (cc1 - k1 - k3, cc1 - k1 + k3, cc1 + k1 + k3, cc1 + k1 - k3)
    quad_y = (cc2 - k2 - k4, cc2 - k2 + k4, cc2 + k2 + k4, cc2 + k2 - k4)
    rx, ry, n = intersect_rect_quad((pick(sa, code1, 3), pick(sa, code2, 3)), quad_x, quad_y)
    det1 = 1.0 / (m11 * m22 - m12 * m21)
    m11 = m11 * det1
    m12 = m12 * det1
    m21 = m21 * det1
    m22 = m22 * det1
    sa_n = pick(sa, code_n, 3)
    # the points inside the reference face's slab, compacted in order: (x, y, point, depth)
    kx = _fill(zero, SLOTS)
    ky = kx
    px = kx
    py = kx
    pz = kx
    dep = kx
    cnum = n * 0
    for i in tl.static_range(SLOTS):
        dx = rx[i] - cc1
        dy = ry[i] - cc2
        kk1 = m22 * dx - m12 * dy
        kk2 = -m21 * dx + m11 * dy
        point = add(add(center, scale(rb1, kk1)), scale(rb2, kk2))
        d = sa_n - dot(normal2, point)
        keep = (i < n) & (d >= 0)
        kx = put(kx, cnum, rx[i], keep, SLOTS)
        ky = put(ky, cnum, ry[i], keep, SLOTS)
        px = put(px, cnum, point[0], keep, SLOTS)
        py = put(py, cnum, point[1], keep, SLOTS)
        pz = put(pz, cnum, point[2], keep, SLOTS)
        dep = put(dep, cnum, d, keep, SLOTS)
        cnum = cnum + keep.to(tl.int32)
    deepest = cnum * 0
    best = dep[0]
    for i in tl.static_range(1, SLOTS):
        better = (i < cnum) & (dep[i] > best)
        best = tl.where(better, dep[i], best)
        deepest = tl.where(better, i, deepest)
    many = cnum > POINTS
    slots = (deepest * 0, deepest * 0 + 1, deepest * 0 + 2, deepest * 0 + 3)
    if tl.max(many.to(tl.int32), axis=0) > 0:
        culled = cull_points(kx, ky, cnum, deepest)
        slots = (tl.where(many, culled[0], slots[0]), tl.where(many, culled[1], slots[1]),
                tl.where(many, culled[2], slots[2]), tl.where(many, culled[3], slots[3]))  # fmt: skip
    count = tl.where(touching, tl.where(code > 6, 1, tl.minimum(cnum, POINTS)), 0)
    points = ()
    depths = ()
    for j in tl.static_range(POINTS):
        face_point = (pick(px, slots[j], SLOTS), pick(py, slots[j], SLOTS), pick(pz, slots[j], SLOTS))
        face_point = add(face_point, pa_f)
        face_dep = pick(dep, slots[j], SLOTS)
        face_point = where(on_1, face_point, sub(face_point, scale(normal, face_dep)))
        points = points + (where(code > 6, edge_point, face_point),)
        depths = depths + (-tl.where(code > 6, depth, face_dep),)
    return count, neg(normal), points, depths


@jit
def aabbs_overlap(a_min, a_max, b_min, b_max):
    """TestAabbAgainstAabb2."""
    apart = (a_min[0] > b_max[0]) | (a_max[0] < b_min[0])
    apart = apart | (a_min[1] > b_max[1]) | (a_max[1] < b_min[1])
    apart = apart | (a_min[2] > b_max[2]) | (a_max[2] < b_min[2])
    return ~apart


@jit
def transform_aabb(rot_mat, center, extent):
    """btTransformAabb: the AABB of a box of half ``extent`` around ``center`` with axes the columns
    of ``rot_mat``: (min, max)."""
    reach = ()
    for i in tl.static_range(3):
        row = rot_mat[i]
        reach = reach + (dot(extent, (tl.abs(row[0]), tl.abs(row[1]), tl.abs(row[2]))),)
    return sub(center, reach), add(center, reach)


@jit
def car_car_contacts(pos_a, rot_a, hitbox_a, pos_b, rot_b, hitbox_b):
    """One pair's contacts at the tick's start (`car_car.car_car_contacts`): ``pos`` BT, ``hitbox``
    (inner, margin, offset, threshold, local_min, local_max) BT. Returns (added (4), the detector's
    points' local positions (4 each): on car b in b's frame, on car a in a's frame; the manifold after
    refreshContactPoints: count, normal from car a into car b, points on car b (4), on car a (4),
    depths (4))."""
    inner_a, margin_a, offset_a, threshold_a, local_min_a, local_max_a = hitbox_a
    inner_b, margin_b, offset_b, threshold_b, local_min_b, local_max_b = hitbox_b
    origin_a = add(mat_vec(rot_a, offset_a), pos_a)
    origin_b = add(mat_vec(rot_b, offset_b), pos_b)
    half_a = add(inner_a, (margin_a, margin_a, margin_a))
    half_b = add(inner_b, (margin_b, margin_b, margin_b))
    box_min_a, box_max_a = transform_aabb(rot_a, origin_a, half_a)
    box_min_b, box_max_b = transform_aabb(rot_b, origin_b, half_b)
    local_half_b = scale(sub(local_max_b, local_min_b), 0.5)
    local_center_b = scale(add(local_max_b, local_min_b), 0.5)
    comp_min_b, comp_max_b = transform_aabb(rot_b, add(mat_vec(rot_b, local_center_b), pos_b), local_half_b)
    # the outer compound (car a's box against car b's compound), then the inner (b's box against a's)
    has = aabbs_overlap(box_min_a, box_max_a, comp_min_b, comp_max_b)
    has = has & aabbs_overlap(box_min_b, box_max_b, box_min_a, box_max_a)
    count, normal, points, depths = box_box(origin_b, rot_b, half_b, origin_a, rot_a, half_a)
    limit = tl.minimum(threshold_a, threshold_b)  # getNewManifold: the smaller
    # the manifold: car b is body A, car a body B; then refreshContactPoints
    added = ()
    detected_a = ()
    detected_b = ()
    gone = ()
    world = ()  # per point: the point on car b, on car a, the depth (7 values)
    for k in tl.static_range(POINTS):
        is_added = has & (k < count) & (depths[k] <= limit)  # addContactPoint's test
        point_a = add(points[k], scale(normal, depths[k]))
        local_a = _vec_mat(sub(point_a, pos_b), rot_b)
        local_b = _vec_mat(sub(points[k], pos_a), rot_a)
        world_a = add(mat_vec(rot_b, local_a), pos_b)
        world_b = add(mat_vec(rot_a, local_b), pos_a)
        depth = dot(sub(world_a, world_b), normal)
        drift = sub(world_b, sub(world_a, scale(normal, depth)))
        held = is_added & (depth <= limit) & (dot(drift, drift) <= limit * limit)
        added = added + (is_added,)
        detected_a = detected_a + (local_a,)
        detected_b = detected_b + (local_b,)
        gone = gone + (is_added & ~held,)
        world = world + (world_a + world_b + (depth,),)
    # removeContactPoint from the last down (the last point moves into the gap)
    kept = count * 0
    for k in tl.static_range(POINTS):
        kept = kept + added[k].to(tl.int32)
    columns = ()
    for f in tl.static_range(7):
        columns = columns + ((world[0][f], world[1][f], world[2][f], world[3][f]),)
    for j in tl.static_range(POINTS):  # point POINTS - 1 - j
        last = tl.maximum(kept - 1, 0)
        moved = ()
        for f in tl.static_range(7):
            moved = moved + (
                put(columns[f], POINTS - 1 - j + last * 0, pick(columns[f], last, POINTS), gone[POINTS - 1 - j], POINTS),
            )
        columns = moved
        kept = kept - gone[POINTS - 1 - j].to(tl.int32)
    on_b = ()
    on_a = ()
    depth = ()
    for k in tl.static_range(POINTS):
        present = k < kept
        on_b = on_b + (where(present, (columns[0][k], columns[1][k], columns[2][k]), (0.0, 0.0, 0.0)),)
        on_a = on_a + (where(present, (columns[3][k], columns[4][k], columns[5][k]), (0.0, 0.0, 0.0)),)
        depth = depth + (tl.where(present, columns[6][k], 0.0),)
    return added, detected_a, detected_b, kept, normal, on_b, on_a, depth
