"""Car bodies against each other: RocketSim's car-car contacts, as its Bullet makes them.

Reference: RocketSim (ZealanL/RocketSim, MIT) `Arena::_BtCallback_OnCarCarCollision` (friction 0.09,
restitution 0.1; the bump and demo rules read `CarCarContacts`), and the Bullet 3.24 it vendors.
A pair of cars whose broadphase boxes overlap runs `btCompoundCompoundCollisionAlgorithm`; the cars'
compounds have no AABB tree, so it falls back to `btCompoundCollisionAlgorithm`, which nests one more
for the second car: the two child boxes meet in `btBoxBoxCollisionAlgorithm` when the first box's AABB
meets the second compound's and the second box's AABB meets the first box's. That algorithm's
manifold has the later car (B in pair order, `b`) as body A and the earlier (`a`) as body B, and
`btBoxBoxDetector` (ODE's dBoxBox2: 15 separating axes, an edge-edge point or the incident face
clipped against the reference face, at most 4 points) adds its points; `refreshContactPoints` then
recomputes them from both transforms. Boxes only touch when they overlap. Bullet units, float32.
"""

from __future__ import annotations

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh.broadphase import aabbs_overlap
from nitro.envs.soccar.car_config import CarHitbox
from nitro.envs.soccar.car_world import box_aabb, box_transform, compound_aabb
from nitro.envs.soccar.contacts import CAR_CAR_POINTS, CarCarContacts, car_pairs
from nitro.envs.soccar.gjk_epa import SIMD_EPSILON
from nitro.envs.soccar.vec import constant, dot, mat_vec, vec_mat

BOX_BOX_MAX_CONTACTS = CAR_CAR_POINTS  # btBoxBoxDetector's maxc
FUDGE_FACTOR = 1.05  # dBoxBox2 prefers a face axis over an edge axis unless the edge is 5% shallower
FUDGE2 = float(np.float32(1.0e-5))  # added to |R1'R2| for the edge axes' extents
M_PI_F = float(np.float32(3.14159265))  # dBoxBox2's M__PI


def _col(r: torch.Tensor, k) -> torch.Tensor:
    """Column ``k`` (an int or [P] indices) of matrices [P, 3, 3]."""
    if isinstance(k, int):
        return r[..., :, k]
    return r.gather(-1, k[:, None, None].expand(-1, 3, 1))[..., 0]


def _pick(values: list[torch.Tensor], index: torch.Tensor) -> torch.Tensor:
    """values[index] per lane (values: list of [P] or [P, 3])."""
    stacked = torch.stack(values, 1)
    idx = index.view(-1, 1, *([1] * (stacked.dim() - 2))).expand(-1, 1, *stacked.shape[2:])
    return stacked.gather(1, idx)[:, 0]


def line_closest_approach(pa, ua, pb, ub):
    """dLineClosestApproach: the parameters (alpha, beta) of the closest points of two lines."""
    p = pb - pa
    uaub = dot(ua, ub)
    q1 = dot(ua, p)
    q2 = -dot(ub, p)
    d = 1 - uaub * uaub
    parallel = d <= C.f32(0.0001)
    d = 1.0 / torch.where(parallel, 1.0, d)
    alpha = torch.where(parallel, 0.0, (q1 + uaub * q2) * d)
    beta = torch.where(parallel, 0.0, (uaub * q1 + q2) * d)
    return alpha, beta


def intersect_rect_quad(h: torch.Tensor, quad: torch.Tensor):
    """intersectRectQuad2: the quadrilateral ``quad`` [P, 4, 2] clipped by the rectangle
    |x| < h[0], |y| < h[1] ([P, 2]), chopping along x = -h0, x = h0, y = -h1, y = h1 in turn and
    stopping at 8 points. Returns (points [P, 8, 2], count [P])."""
    p = quad.shape[0]
    rows = torch.arange(p, device=quad.device)
    q = torch.cat((quad, torch.zeros_like(quad)), 1)  # [P, 8, 2]
    nq = torch.full((p,), 4, dtype=torch.int64, device=quad.device)
    done = torch.zeros(p, dtype=torch.bool, device=quad.device)
    for axis in (0, 1):
        for sign in (-1.0, 1.0):
            r = torch.zeros(p, 9, 2, dtype=quad.dtype, device=quad.device)  # a spare slot takes no-ops
            nr = torch.zeros_like(nq)
            full = torch.zeros_like(done)
            limit = sign * h[:, axis]
            for i in range(8):
                live = ~done & ~full & (i < nq)
                pq = q[:, i]
                nxt = torch.where((i + 1 < nq)[:, None], q[:, (i + 1) % 8], q[:, 0])
                inside = sign * pq[:, axis] < h[:, axis]
                add = live & inside
                r[rows, torch.where(add, nr, 8)] = torch.where(add[:, None], pq, r[rows, torch.where(add, nr, 8)])
                nr = nr + add.to(torch.int64)
                full = full | (live & (nr >= 8))
                crosses = live & ~full & (inside ^ (sign * nxt[:, axis] < h[:, axis]))
                other = 1 - axis
                t = (nxt[:, other] - pq[:, other]) / torch.where(crosses, nxt[:, axis] - pq[:, axis], 1.0)
                cut = torch.empty_like(pq)
                cut[:, other] = pq[:, other] + t * (limit - pq[:, axis])
                cut[:, axis] = limit
                slot = torch.where(crosses, nr, 8)
                r[rows, slot] = torch.where(crosses[:, None], cut, r[rows, slot])
                nr = nr + crosses.to(torch.int64)
                full = full | (crosses & (nr >= 8))
            q = torch.where(done[:, None, None], q, r[:, :8])
            nq = torch.where(done, nq, nr)
            done = done | full
    return q, nq


def cull_points(points: torch.Tensor, n: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """cullPoints2 with m = 4: from ``n`` [P] (5 to 8) points [P, 8, 2], the deepest ``first`` [P]
    and the three whose angles about the centroid lie nearest the deepest's plus 90, 180 and 270
    degrees. Returns their indices [P, 4]."""
    x, y = points[..., 0], points[..., 1]
    a = torch.zeros_like(x[:, 0])
    cx, cy = torch.zeros_like(a), torch.zeros_like(a)
    for i in range(7):  # the polygon's signed area and centroid, edges i -> i + 1 < n
        live = i < n - 1
        q = x[:, i] * y[:, i + 1] - x[:, i + 1] * y[:, i]
        a = torch.where(live, a + q, a)
        cx = torch.where(live, cx + q * (x[:, i] + x[:, i + 1]), cx)
        cy = torch.where(live, cy + q * (y[:, i] + y[:, i + 1]), cy)
    last = (n - 1).clamp(min=0)[:, None]
    xl, yl = x.gather(1, last)[:, 0], y.gather(1, last)[:, 0]
    q = xl * y[:, 0] - x[:, 0] * yl
    area = a + q
    big = area.abs() > SIMD_EPSILON
    a = torch.where(big, 1.0 / (3.0 * torch.where(big, area, 1.0)), 1e18)
    cx = a * (cx + q * (xl + x[:, 0]))
    cy = a * (cy + q * (yl + y[:, 0]))
    angle = torch.atan2(y - cy[:, None], x - cx[:, None])  # [P, 8]
    slots = torch.arange(8, device=points.device)
    avail = (slots < n[:, None]) & (slots != first[:, None])
    chosen = [first]
    a0 = angle.gather(1, first[:, None])[:, 0]
    step = C.f32(C.f32(2 * M_PI_F) / BOX_BOX_MAX_CONTACTS)
    for j in range(1, BOX_BOX_MAX_CONTACTS):
        target = j * step + a0
        target = torch.where(target > M_PI_F, target - 2 * M_PI_F, target)
        diff = (angle - target[:, None]).abs()
        diff = torch.where(diff > M_PI_F, 2 * M_PI_F - diff, diff)
        best = torch.full_like(a0, 1e9)
        pick = first.clone()
        for i in range(8):  # strict <: the first nearest wins
            better = avail[:, i] & (diff[:, i] < best)
            best = torch.where(better, diff[:, i], best)
            pick = torch.where(better, i, pick)
        avail = avail & (slots != pick[:, None])
        chosen.append(pick)
    return torch.stack(chosen, 1)


def box_box(p1, r1, a, p2, r2, b):
    """dBoxBox2 as btBoxBoxDetector calls it (maxc 4): box 1 at ``p1`` [P, 3] with axes ``r1``
    [P, 3, 3] (columns) and half extents ``a`` [P, 3], box 2 likewise. Returns (count [P],
    normal on B [P, 3], points on B [P, 4, 3], depths [P, 4]) as the points are reported to
    addContactPoint: the normal points from box 2 into box 1 and depths are negative."""
    lanes = p1.shape[0]
    device = p1.device
    p = p2 - p1
    pp = vec_mat(p, r1)  # p in box 1's frame
    rm = [[dot(_col(r1, i), _col(r2, j)) for j in range(3)] for i in range(3)]  # R1'R2
    qm = [[rm[i][j].abs() for j in range(3)] for i in range(3)]
    a0, a1, a2 = a.unbind(-1)
    b0, b1, b2 = b.unbind(-1)
    s = torch.full((lanes,), -C.FLT_MAX, dtype=p.dtype, device=device)
    separated = torch.zeros(lanes, dtype=torch.bool, device=device)
    invert = torch.zeros_like(separated)
    code = torch.zeros(lanes, dtype=torch.int64, device=device)
    normal_c = torch.zeros_like(p)
    pr2 = [dot(_col(r2, k), p) for k in range(3)]
    faces = (
        (pp[:, 0], a0 + b0 * qm[0][0] + b1 * qm[0][1] + b2 * qm[0][2]),
        (pp[:, 1], a1 + b0 * qm[1][0] + b1 * qm[1][1] + b2 * qm[1][2]),
        (pp[:, 2], a2 + b0 * qm[2][0] + b1 * qm[2][1] + b2 * qm[2][2]),
        (pr2[0], a0 * qm[0][0] + a1 * qm[1][0] + a2 * qm[2][0] + b0),
        (pr2[1], a0 * qm[0][1] + a1 * qm[1][1] + a2 * qm[2][1] + b1),
        (pr2[2], a0 * qm[0][2] + a1 * qm[1][2] + a2 * qm[2][2] + b2),
    )
    for k, (expr1, expr2) in enumerate(faces):
        s2 = expr1.abs() - expr2
        separated = separated | (s2 > 0)
        better = s2 > s
        s = torch.where(better, s2, s)
        invert = torch.where(better, expr1 < 0, invert)
        code = torch.where(better, k + 1, code)
    q = [[qm[i][j] + FUDGE2 for j in range(3)] for i in range(3)]
    r = rm
    zero = torch.zeros_like(s)
    edges = (
        (pp[:, 2] * r[1][0] - pp[:, 1] * r[2][0], a1 * q[2][0] + a2 * q[1][0] + b1 * q[0][2] + b2 * q[0][1], (zero, -r[2][0], r[1][0])),
        (pp[:, 2] * r[1][1] - pp[:, 1] * r[2][1], a1 * q[2][1] + a2 * q[1][1] + b0 * q[0][2] + b2 * q[0][0], (zero, -r[2][1], r[1][1])),
        (pp[:, 2] * r[1][2] - pp[:, 1] * r[2][2], a1 * q[2][2] + a2 * q[1][2] + b0 * q[0][1] + b1 * q[0][0], (zero, -r[2][2], r[1][2])),
        (pp[:, 0] * r[2][0] - pp[:, 2] * r[0][0], a0 * q[2][0] + a2 * q[0][0] + b1 * q[1][2] + b2 * q[1][1], (r[2][0], zero, -r[0][0])),
        (pp[:, 0] * r[2][1] - pp[:, 2] * r[0][1], a0 * q[2][1] + a2 * q[0][1] + b0 * q[1][2] + b2 * q[1][0], (r[2][1], zero, -r[0][1])),
        (pp[:, 0] * r[2][2] - pp[:, 2] * r[0][2], a0 * q[2][2] + a2 * q[0][2] + b0 * q[1][1] + b1 * q[1][0], (r[2][2], zero, -r[0][2])),
        (pp[:, 1] * r[0][0] - pp[:, 0] * r[1][0], a0 * q[1][0] + a1 * q[0][0] + b1 * q[2][2] + b2 * q[2][1], (-r[1][0], r[0][0], zero)),
        (pp[:, 1] * r[0][1] - pp[:, 0] * r[1][1], a0 * q[1][1] + a1 * q[0][1] + b0 * q[2][2] + b2 * q[2][0], (-r[1][1], r[0][1], zero)),
        (pp[:, 1] * r[0][2] - pp[:, 0] * r[1][2], a0 * q[1][2] + a1 * q[0][2] + b0 * q[2][1] + b1 * q[2][0], (-r[1][2], r[0][2], zero)),
    )
    for k, (expr1, expr2, (n1, n2, n3)) in enumerate(edges):
        s2 = expr1.abs() - expr2
        separated = separated | (s2 > SIMD_EPSILON)
        length = torch.sqrt((n1 * n1 + n2 * n2) + n3 * n3)
        usable = length > SIMD_EPSILON
        s2 = s2 / torch.where(usable, length, 1.0)
        better = usable & (s2 * FUDGE_FACTOR > s)
        s = torch.where(better, s2, s)
        safe = torch.where(usable, length, 1.0)
        normal_c = torch.where(better[:, None], torch.stack((n1 / safe, n2 / safe, n3 / safe), -1), normal_c)
        invert = torch.where(better, expr1 < 0, invert)
        code = torch.where(better, k + 7, code)
    touching = ~separated & (code > 0)
    face_normal = torch.where((code <= 3)[:, None], _col(r1, (code - 1).clamp(0, 2)), _col(r2, (code - 4).clamp(0, 2)))
    normal = torch.where((code <= 6)[:, None], face_normal, mat_vec(r1, normal_c))
    normal = torch.where(invert[:, None], -normal, normal)
    depth = -s

    # an edge of box 1 against an edge of box 2: one point, on box 2's edge
    pa = p1.clone()
    for j in range(3):
        sign = torch.where(dot(normal, _col(r1, j)) > 0, 1.0, -1.0)
        pa = pa + (sign * a[:, j])[:, None] * _col(r1, j)
    pb = p2.clone()
    for j in range(3):
        sign = torch.where(dot(normal, _col(r2, j)) > 0, -1.0, 1.0)
        pb = pb + (sign * b[:, j])[:, None] * _col(r2, j)
    ua = _col(r1, torch.div(code - 7, 3, rounding_mode="floor").clamp(0, 2))
    ub = _col(r2, torch.remainder(code - 7, 3))
    _, beta = line_closest_approach(pa, ua, pb, ub)
    edge_point = pb + ub * beta[:, None]

    # a face: the incident face of the other box, clipped against the reference face
    on_1 = code <= 3
    ra, rb = torch.where(on_1[:, None, None], r1, r2), torch.where(on_1[:, None, None], r2, r1)
    pa_f, pb_f = torch.where(on_1[:, None], p1, p2), torch.where(on_1[:, None], p2, p1)
    sa, sb = torch.where(on_1[:, None], a, b), torch.where(on_1[:, None], b, a)
    normal2 = torch.where(on_1[:, None], normal, -normal)
    nr = vec_mat(normal2, rb)
    anr = nr.abs()
    y_gt_x, y_gt_z, x_gt_z = anr[:, 1] > anr[:, 0], anr[:, 1] > anr[:, 2], anr[:, 0] > anr[:, 2]
    lanr = torch.where(y_gt_x, torch.where(y_gt_z, 1, 2), torch.where(x_gt_z, 0, 2))
    a1i = torch.where(lanr == 0, 1, 0)
    a2i = torch.where(lanr == 2, 1, 2)
    sb_l = sb.gather(1, lanr[:, None])[:, 0]
    rb_l = _col(rb, lanr)
    nr_l = nr.gather(1, lanr[:, None])[:, 0]
    center = torch.where((nr_l < 0)[:, None], (pb_f - pa_f) + sb_l[:, None] * rb_l, (pb_f - pa_f) - sb_l[:, None] * rb_l)
    code_n = torch.where(on_1, code - 1, code - 4).clamp(0, 2)
    code1 = torch.where(code_n == 0, 1, 0)
    code2 = torch.where(code_n == 2, 1, 2)
    ra1, ra2 = _col(ra, code1), _col(ra, code2)
    rb1, rb2 = _col(rb, a1i), _col(rb, a2i)
    c1, c2 = dot(center, ra1), dot(center, ra2)
    m11, m12, m21, m22 = dot(ra1, rb1), dot(ra1, rb2), dot(ra2, rb1), dot(ra2, rb2)
    sb1, sb2 = sb.gather(1, a1i[:, None])[:, 0], sb.gather(1, a2i[:, None])[:, 0]
    k1, k2, k3, k4 = m11 * sb1, m21 * sb1, m12 * sb2, m22 * sb2
    quad = torch.stack(
        (
            torch.stack((c1 - k1 - k3, c2 - k2 - k4), -1),
            torch.stack((c1 - k1 + k3, c2 - k2 + k4), -1),
            torch.stack((c1 + k1 + k3, c2 + k2 + k4), -1),
            torch.stack((c1 + k1 - k3, c2 + k2 - k4), -1),
        ),
        1,
    )
    rect = torch.stack((sa.gather(1, code1[:, None])[:, 0], sa.gather(1, code2[:, None])[:, 0]), -1)
    ret, n = intersect_rect_quad(rect, quad)
    det1 = 1.0 / (m11 * m22 - m12 * m21)
    m11, m12, m21, m22 = m11 * det1, m12 * det1, m21 * det1, m22 * det1
    dx, dy = ret[..., 0] - c1[:, None], ret[..., 1] - c2[:, None]
    kk1 = m22[:, None] * dx - m12[:, None] * dy
    kk2 = -m21[:, None] * dx + m11[:, None] * dy
    point = (center[:, None] + kk1[..., None] * rb1[:, None]) + kk2[..., None] * rb2[:, None]  # [P, 8, 3]
    sa_n = sa.gather(1, code_n[:, None])[:, 0]
    dep = sa_n[:, None] - dot(normal2[:, None], point)
    slots = torch.arange(8, device=device)
    keep = (slots < n[:, None]) & (dep >= 0)
    order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices  # the kept points, compacted
    cnum = keep.sum(1)
    take = lambda x: x.gather(1, order.view(lanes, 8, *([1] * (x.dim() - 2))).expand_as(x))
    point, dep, ret = take(point), take(dep), take(ret)
    deepest = torch.zeros_like(cnum)
    best = dep[:, 0]
    for i in range(1, 8):
        better = (i < cnum) & (dep[:, i] > best)
        best = torch.where(better, dep[:, i], best)
        deepest = torch.where(better, i, deepest)
    culled = cull_points(ret, cnum, deepest)
    straight = torch.arange(BOX_BOX_MAX_CONTACTS, device=device).expand(lanes, -1)
    pick = torch.where((cnum > BOX_BOX_MAX_CONTACTS)[:, None], culled, straight)
    face_point = point.gather(1, pick[..., None].expand(-1, -1, 3)) + pa_f[:, None]
    face_dep = dep.gather(1, pick)
    face_point = torch.where(on_1[:, None, None], face_point, face_point - normal[:, None] * face_dep[..., None])
    face_count = cnum.clamp(max=BOX_BOX_MAX_CONTACTS)

    is_edge = code > 6
    count = torch.where(touching, torch.where(is_edge, 1, face_count), 0)
    points = torch.where(is_edge[:, None, None], edge_point[:, None].expand(-1, 4, 3), face_point)
    depths = torch.where(is_edge[:, None], depth[:, None].expand(-1, 4), face_dep)
    return count, -normal, points, -depths


def car_car_contacts(pos_bt: torch.Tensor, rot: torch.Tensor, hitbox: CarHitbox) -> CarCarContacts:
    """Every pair of cars' contacts at the tick's starting transforms.

    ``pos_bt`` [N, C, 3] BT, ``rot`` [N, C, 3, 3], ``hitbox`` flattened to [N * C]. Returns
    `CarCarContacts` over `car_pairs(C)` (BT; normals from car ``a`` into car ``b``).
    """
    n, c = pos_bt.shape[:2]
    pairs = car_pairs(c)
    device = pos_bt.device
    flat_pos, flat_rot = pos_bt.reshape(-1, 3), rot.reshape(-1, 3, 3)
    basis, origin = box_transform(flat_pos, flat_rot, hitbox)
    box_min, box_max = box_aabb(basis, origin, hitbox)
    comp_min, comp_max = compound_aabb(flat_rot, flat_pos, hitbox)
    half = hitbox.inner + hitbox.margin[:, None]  # getHalfExtentsWithMargin
    per_car = lambda x: x.reshape(n, c, *x.shape[1:])
    basis, origin, half, flat_rot, flat_pos = map(per_car, (basis, origin, half, flat_rot, flat_pos))
    box_min, box_max, comp_min, comp_max = map(per_car, (box_min, box_max, comp_min, comp_max))
    threshold = per_car(hitbox.threshold)
    if not pairs:
        empty = torch.zeros(n, 0, 4, 3, device=device)
        return CarCarContacts(
            pairs=torch.zeros(0, 2, dtype=torch.int64, device=device),
            has_manifold=torch.zeros(n, 0, dtype=torch.bool, device=device),
            count=torch.zeros(n, 0, dtype=torch.int64, device=device),
            added=torch.zeros(n, 0, 4, dtype=torch.bool, device=device),
            normal=empty,
            point_on_b=empty,
            point_on_a=empty,
            local_point_b=empty,
            local_point_a=empty,
            depth=torch.zeros(n, 0, 4, device=device),
        )
    ia = constant(tuple(a for a, _ in pairs), device, torch.int64)
    ib = constant(tuple(b for _, b in pairs), device, torch.int64)
    lanes = lambda x, i: x[:, i].reshape(-1, *x.shape[2:])  # [N * P, ...]
    # the outer compound (car a's box against car b's compound), then the inner (b's box against a's)
    has = aabbs_overlap(lanes(box_min, ia), lanes(box_max, ia), lanes(comp_min, ib), lanes(comp_max, ib))
    has = has & aabbs_overlap(lanes(box_min, ib), lanes(box_max, ib), lanes(box_min, ia), lanes(box_max, ia))
    count, normal, points, depths = box_box(
        lanes(origin, ib), lanes(basis, ib), lanes(half, ib), lanes(origin, ia), lanes(basis, ia), lanes(half, ia)
    )
    limit = torch.minimum(lanes(threshold, ia), lanes(threshold, ib))  # getNewManifold: the smaller
    slots = torch.arange(BOX_BOX_MAX_CONTACTS, device=device)
    added = has[:, None] & (slots < count[:, None]) & (depths <= limit[:, None])  # addContactPoint's test
    # the manifold: car b is body A, car a body B; then refreshContactPoints
    pos_a, rot_a = lanes(flat_pos, ib)[:, None], lanes(flat_rot, ib)[:, None]
    pos_b, rot_b = lanes(flat_pos, ia)[:, None], lanes(flat_rot, ia)[:, None]
    point_a = points + normal[:, None] * depths[..., None]
    local_a = vec_mat(point_a - pos_a, rot_a)
    local_b = vec_mat(points - pos_b, rot_b)
    point_a = mat_vec(rot_a, local_a) + pos_a
    point_b = mat_vec(rot_b, local_b) + pos_b
    normal4 = normal[:, None].expand(-1, BOX_BOX_MAX_CONTACTS, 3)
    depth = dot(point_a - point_b, normal4)
    drift = point_b - (point_a - normal4 * depth[..., None])
    lim = limit[:, None]
    held = added & (depth <= lim) & (dot(drift, drift) <= lim * lim)
    detected_a, detected_b = local_a, local_b  # what the callback reads, per detector point
    # removeContactPoint from the last down (the last point moves into the gap)
    packed = torch.cat((local_a, local_b, point_a, point_b, depth[..., None]), -1)
    kept = added.sum(1)
    for i in reversed(range(BOX_BOX_MAX_CONTACTS)):
        gone = added[:, i] & ~held[:, i]
        last = (kept - 1).clamp(min=0)
        moved = packed.gather(1, last[:, None, None].expand(-1, 1, packed.shape[-1]))
        packed = torch.where((gone[:, None] & (slots == i))[..., None], moved, packed)
        kept = kept - gone.to(torch.int64)
    local_a, local_b, point_a, point_b, depth = packed.split((3, 3, 3, 3, 1), -1)
    present = (slots < kept[:, None])[..., None]
    back = lambda x: x.reshape(n, len(pairs), *x.shape[1:])
    held_only = lambda x: back(torch.where(present, x, 0.0))
    return CarCarContacts(
        pairs=torch.stack((ia, ib), -1),
        has_manifold=back(has),
        count=back(kept),
        added=back(added),
        normal=back(torch.where(present, normal4, 0.0)),
        point_on_b=held_only(point_a),
        point_on_a=held_only(point_b),
        local_point_b=back(torch.where(added[..., None], detected_a, 0.0)),
        local_point_a=back(torch.where(added[..., None], detected_b, 0.0)),
        depth=back(torch.where(present[..., 0], depth[..., 0], 0.0)),
    )
