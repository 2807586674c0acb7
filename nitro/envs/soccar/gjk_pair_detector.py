"""btGjkPairDetector: Bullet's closest points of two convex shapes, batched over pairs.

Reference: the Bullet 3.24 that RocketSim (ZealanL/RocketSim, MIT) vendors: `btGjkPairDetector`
(`getClosestPointsNonVirtual`) with `btVoronoiSimplexSolver`, falling back to the penetration depth
solver (`gjk_epa`) where GJK finds no separation. `btConvexConvexAlgorithm` runs it once per pair of
convex shapes (no polyhedral clipping, no perturbation: RocketSim configures neither), so each pair
gives at most one contact point. RocketSim's car body is a `btBoxShape` whose collision margin sits
inside the box (Bullet's `setSafeMargin`): the box GJK sees is the inner box (half extents minus the
margin) grown by a sphere of the margin, a box with rounded edges and corners. The arena's triangles
have no margin; the ball is a point grown by its radius.

Pairs here: a car box (A) against an arena triangle (B), and the ball (A, a sphere) against a car
box (B). Everything works in Bullet units (1 BT = 50 UU) and float32, because Bullet's tolerances
are absolute lengths in BT (the equal-vertex threshold of 0.01 BT, ...). Functions are per-pair
"lanes" written as batched tensor code: scalars are [P], vectors [P, 3]; loops run until every lane
is done (a fixed count on CUDA and under compilation).
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.gjk_epa import (
    BT_LARGE_FLOAT,
    SIMD_EPSILON,
    all_done,
    box_support,
    epa_penetration,
    triangle_support,
    vec3,
)
from nitro.envs.soccar.vec import constant, cross, dot, mat_vec, vec_mat

REL_ERROR2 = 1.0e-6  # btGjkPairDetector: "must be above the machine epsilon"
VORONOI_EQUAL_VERTEX_THRESHOLD = 1e-4  # BT^2: a support point this close to a simplex vertex is "in" it
GJK_MAX_ITERATIONS = 64  # Bullet allows 1000 (invalid input only); box-triangle GJK ends within ~15
DEGENERATE_PENETRATION_DISTANCE = 0.01  # BT: a degenerate GJK this close also runs the EPA


# --- btVoronoiSimplexSolver -----------------------------------------------------------------------


def closest_pt_point_triangle(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
    """btVoronoiSimplexSolver::closestPtPointTriangle for p = origin, broadcast over [..., 3].

    Returns (closest point [..., 3], barycentric coordinates [..., 3], used vertices [..., 3] bool).
    Bullet's if-chain (vertex A, vertex B, edge AB, vertex C, edge AC, edge BC, face) is applied
    last-first so that the first matching region wins.
    """
    ab, ac = b - a, c - a
    ap, bp, cp = -a, -b, -c
    d1, d2 = dot(ab, ap), dot(ac, ap)
    d3, d4 = dot(ab, bp), dot(ac, bp)
    d5, d6 = dot(ab, cp), dot(ac, cp)
    vc = d1 * d4 - d3 * d2
    vb = d5 * d2 - d1 * d6
    va = d3 * d6 - d5 * d4
    zero, one = torch.zeros_like(d1), torch.ones_like(d1)
    # face region
    denom = 1.0 / (va + vb + vc)
    v, w = vb * denom, vc * denom
    point = a + ab * v[..., None] + ac * w[..., None]
    bary = torch.stack((1 - v - w, v, w), -1)
    used = torch.ones(*d1.shape, 3, dtype=torch.bool, device=d1.device)

    def region(mask, p, coords, flags):
        nonlocal point, bary, used
        point = torch.where(mask[..., None], p, point)
        bary = torch.where(mask[..., None], torch.stack(coords, -1), bary)
        flag = constant(tuple(flags), d1.device, torch.bool)
        used = torch.where(mask[..., None], flag, used)

    # edge BC
    m = (va <= 0) & ((d4 - d3) >= 0) & ((d5 - d6) >= 0)
    t = (d4 - d3) / torch.where(m, (d4 - d3) + (d5 - d6), 1)
    region(m, b + t[..., None] * (c - b), (zero, 1 - t, t), (False, True, True))
    # edge AC
    m = (vb <= 0) & (d2 >= 0) & (d6 <= 0)
    t = d2 / torch.where(m, d2 - d6, 1)
    region(m, a + t[..., None] * ac, (1 - t, zero, t), (True, False, True))
    # vertex C
    m = (d6 >= 0) & (d5 <= d6)
    region(m, c, (zero, zero, one), (False, False, True))
    # edge AB
    m = (vc <= 0) & (d1 >= 0) & (d3 <= 0)
    t = d1 / torch.where(m, d1 - d3, 1)
    region(m, a + t[..., None] * ab, (1 - t, t, zero), (True, True, False))
    # vertex B
    m = (d3 >= 0) & (d4 <= d3)
    region(m, b, (zero, one, zero), (False, True, False))
    # vertex A
    m = (d1 <= 0) & (d2 <= 0)
    region(m, a, (one, zero, zero), (True, False, False))
    return point, bary, used


def point_outside_of_plane(a, b, c, d):
    """btVoronoiSimplexSolver::pointOutsideOfPlane for p = origin: 1 / 0, or -1 when degenerate."""
    normal = cross(b - a, c - a)
    signp = dot(-a, normal)
    signd = dot(d - a, normal)
    out = (signp * signd < 0).to(torch.int64)
    return torch.where(signd * signd < 1e-4 * 1e-4, -1, out)  # CATCH_DEGENERATE_TETRAHEDRON


def closest_pt_point_tetrahedron(a, b, c, d):
    """btVoronoiSimplexSolver::closestPtPointTetrahedron for p = origin.

    Returns (separated [...] bool, degenerate [...] bool, barycentric [..., 4], used [..., 4]).
    ``separated`` false with ``degenerate`` false means the origin is inside the tetrahedron.
    """
    faces = (  # (vertices, where their barycentric coordinates go)
        ((a, b, c), (0, 1, 2)),
        ((a, c, d), (0, 2, 3)),
        ((a, d, b), (0, 3, 1)),
        ((b, d, c), (1, 3, 2)),
    )
    outside = [
        point_outside_of_plane(a, b, c, d),
        point_outside_of_plane(a, c, d, b),
        point_outside_of_plane(a, d, b, c),
        point_outside_of_plane(b, d, c, a),
    ]
    degenerate = torch.zeros_like(outside[0], dtype=torch.bool)
    for o in outside:
        degenerate = degenerate | (o < 0)
    any_out = torch.zeros_like(degenerate)
    for o in outside:
        any_out = any_out | (o > 0)
    best = torch.full(a.shape[:-1], C.FLT_MAX, dtype=a.dtype, device=a.device)
    bary = torch.zeros(*a.shape[:-1], 4, dtype=a.dtype, device=a.device)
    used = torch.ones(*a.shape[:-1], 4, dtype=torch.bool, device=a.device)
    for o, ((p, q, r), slots) in zip(outside, faces):
        point, sub_bary, sub_used = closest_pt_point_triangle(p, q, r)
        sq = dot(point, point)
        better = (o > 0) & (sq < best)
        best = torch.where(better, sq, best)
        new_bary = torch.zeros_like(bary)
        new_used = torch.zeros_like(used)
        for k, slot in enumerate(slots):
            new_bary[..., slot] = sub_bary[..., k]
            new_used[..., slot] = sub_used[..., k]
        bary = torch.where(better[..., None], new_bary, bary)
        used = torch.where(better[..., None], new_used, used)
    separated = ~degenerate & any_out
    return separated, degenerate, bary, used


@dataclasses.dataclass
class Simplex:
    """btVoronoiSimplexSolver's state per lane: up to 4 vertices of A - B with their A and B points."""

    w: torch.Tensor  # [P, 4, 3]
    p: torch.Tensor  # [P, 4, 3]
    q: torch.Tensor  # [P, 4, 3]
    count: torch.Tensor  # [P] int64
    last_w: torch.Tensor  # [P, 3]
    cached_v: torch.Tensor  # [P, 3]
    cached_p1: torch.Tensor  # [P, 3]
    cached_p2: torch.Tensor  # [P, 3]

    @staticmethod
    def empty(like: torch.Tensor) -> Simplex:
        n = like.shape[0]
        z4 = torch.zeros(n, 4, 3, dtype=like.dtype, device=like.device)
        z = torch.zeros(n, 3, dtype=like.dtype, device=like.device)
        return Simplex(
            w=z4,
            p=z4.clone(),
            q=z4.clone(),
            count=torch.zeros(n, dtype=torch.int64, device=like.device),
            last_w=torch.full_like(z, BT_LARGE_FLOAT),
            cached_v=z,
            cached_p1=z.clone(),
            cached_p2=z.clone(),
        )

    def in_simplex(self, w: torch.Tensor) -> torch.Tensor:
        """w within the equal-vertex threshold of a held vertex, or equal to the last added one [P]."""
        diff = self.w - w[:, None, :]
        near = dot(diff, diff) <= VORONOI_EQUAL_VERTEX_THRESHOLD
        held = torch.arange(4, device=w.device) < self.count[:, None]
        return (near & held).any(1) | (w == self.last_w).all(1)

    def add_vertex(self, mask: torch.Tensor, w, p, q) -> Simplex:
        at = mask[:, None] & (torch.arange(4, device=w.device) == self.count[:, None])  # [P, 4]
        return dataclasses.replace(
            self,
            w=torch.where(at[..., None], w[:, None], self.w),
            p=torch.where(at[..., None], p[:, None], self.p),
            q=torch.where(at[..., None], q[:, None], self.q),
            count=self.count + mask.to(torch.int64),
            last_w=torch.where(mask[:, None], w, self.last_w),
        )

    def closest(self, mask: torch.Tensor) -> tuple[Simplex, torch.Tensor]:
        """updateClosestVectorAndPoints (then ``cached_v`` is `closest`'s v); returns validity [P]."""
        w, p, q, n = self.w, self.p, self.q, self.count
        w0, w1, w2, w3 = w.unbind(1)
        p0, p1, p2, p3 = p.unbind(1)
        q0, q1, q2, q3 = q.unbind(1)
        zero = torch.zeros_like(w0)
        # one vertex
        v_1, a_1, b_1 = p0 - q0, p0, q0
        used_1 = constant((True, False, False, False), w.device, torch.bool).expand(n.shape[0], 4)
        # two vertices: the closest point of the segment to the origin
        seg = w1 - w0
        t = dot(seg, -w0)
        seg2 = dot(seg, seg)
        inside = (t > 0) & (t < seg2)
        t = torch.where(t > 0, torch.where(inside, t / torch.where(inside, seg2, 1), torch.ones_like(t)), 0)
        a_2 = p0 + t[:, None] * (p1 - p0)
        b_2 = q0 + t[:, None] * (q1 - q0)
        v_2 = a_2 - b_2
        used_2 = torch.stack((t <= 0, t > 0, torch.zeros_like(inside), torch.zeros_like(inside)), -1)
        used_2[:, 0] |= inside
        valid_2 = (1 - t >= 0) & (t >= 0)
        # three vertices
        _, bary3, used3 = closest_pt_point_triangle(w0, w1, w2)
        a_3 = p0 * bary3[:, 0:1] + p1 * bary3[:, 1:2] + p2 * bary3[:, 2:3]
        b_3 = q0 * bary3[:, 0:1] + q1 * bary3[:, 1:2] + q2 * bary3[:, 2:3]
        v_3 = a_3 - b_3
        used_3 = torch.cat((used3, torch.zeros_like(used3[:, :1])), -1)
        valid_3 = (bary3 >= 0).all(-1)
        # four vertices
        separated, degenerate, bary4, used_4 = closest_pt_point_tetrahedron(w0, w1, w2, w3)
        a_4 = p0 * bary4[:, 0:1] + p1 * bary4[:, 1:2] + p2 * bary4[:, 2:3] + p3 * bary4[:, 3:4]
        b_4 = q0 * bary4[:, 0:1] + q1 * bary4[:, 1:2] + q2 * bary4[:, 2:3] + q3 * bary4[:, 3:4]
        v_4 = torch.where(separated[:, None], a_4 - b_4, torch.where(degenerate[:, None], self.cached_v, zero))
        a_4 = torch.where(separated[:, None], a_4, self.cached_p1)  # not updated when not separated
        b_4 = torch.where(separated[:, None], b_4, self.cached_p2)
        valid_4 = torch.where(separated, (bary4 >= 0).all(-1), ~degenerate)
        used_4 = torch.where(separated[:, None], used_4, True)  # no reduction when not separated

        def pick(x1, x2, x3, x4):
            k = n.view(-1, *([1] * (x1.dim() - 1)))
            return torch.where(k == 1, x1, torch.where(k == 2, x2, torch.where(k == 3, x3, x4)))

        v = pick(v_1, v_2, v_3, v_4)
        a = pick(a_1, a_2, a_3, a_4)
        b = pick(b_1, b_2, b_3, b_4)
        used = pick(used_1, used_2, used_3, used_4)
        valid = pick(torch.ones_like(valid_2), valid_2, valid_3, valid_4)
        reduced = self._reduce(used)
        m3 = mask[:, None]
        out = dataclasses.replace(
            reduced,
            w=torch.where(mask[:, None, None], reduced.w, self.w),
            p=torch.where(mask[:, None, None], reduced.p, self.p),
            q=torch.where(mask[:, None, None], reduced.q, self.q),
            count=torch.where(mask, reduced.count, self.count),
            cached_v=torch.where(m3, v, self.cached_v),
            cached_p1=torch.where(m3, a, self.cached_p1),
            cached_p2=torch.where(m3, b, self.cached_p2),
        )
        return out, valid

    def _reduce(self, used: torch.Tensor) -> Simplex:
        """reduceVertices: drop unused vertices D, C, B, A in that order, each replaced by the last."""
        n = self.count
        perm = torch.arange(4, device=n.device).expand(n.shape[0], 4).clone()
        for slot in (3, 2, 1, 0):
            drop = (n >= slot + 1) & ~used[:, slot]
            n = n - drop.to(torch.int64)
            moved = perm.gather(1, n.clamp(max=3)[:, None])[:, 0]
            perm[:, slot] = torch.where(drop, moved, perm[:, slot])
        take = perm[..., None].expand(-1, -1, 3)
        return dataclasses.replace(
            self, w=self.w.gather(1, take), p=self.p.gather(1, take), q=self.q.gather(1, take), count=n
        )


# --- btGjkPairDetector ----------------------------------------------------------------------------


@dataclasses.dataclass
class ConvexShape:
    """A batch of one kind of Bullet convex shape at its world transforms, BT: a box (``half``: the
    inner half extents, m_implicitShapeDimensions), a triangle (``tri``: its vertices in its own
    frame) or a sphere (a point grown by its margin, the radius)."""

    kind: str
    """"box", "triangle" or "sphere"."""
    origin: torch.Tensor
    """World position of the shape's frame [P, 3]."""
    margin: torch.Tensor
    """Collision margin [P]."""
    basis: torch.Tensor | None = None
    """World rotation, columns the shape's axes [P, 3, 3]; None for the identity."""
    half: torch.Tensor | None = None
    """Box: inner half extents [P, 3]."""
    tri: torch.Tensor | None = None
    """Triangle: vertices in its frame [P, 3, 3]."""

    def support(self, d: torch.Tensor) -> torch.Tensor:
        """localGetSupportVertexWithoutMarginNonVirtual along a local direction [P, 3]."""
        if self.kind == "box":
            return box_support(self.half, d)
        if self.kind == "triangle":
            return triangle_support(self.tri, d)
        return torch.zeros_like(d)

    def to_local(self, d: torch.Tensor) -> torch.Tensor:
        """A world direction in the shape's frame (d * basis)."""
        return d if self.basis is None else vec_mat(d, self.basis)

    def to_world(self, p: torch.Tensor, origin: torch.Tensor) -> torch.Tensor:
        """A local point moved to the (shifted) world ``origin`` [P, 3]."""
        return p + origin if self.basis is None else mat_vec(self.basis, p) + origin

    def aabb_center(self, origin: torch.Tensor) -> torch.Tensor:
        """The centre of getAabb at the (shifted) ``origin``: the triangle's box, else the origin."""
        if self.kind == "triangle":
            tri = self.tri + origin[:, None, :]
            return (tri.amin(1) + tri.amax(1)) * 0.5
        return origin


@dataclasses.dataclass
class ClosestPoints:
    """What btGjkPairDetector::getClosestPoints reports per lane (all in BT)."""

    found: torch.Tensor
    """A contact is reported (distance below the maximum) [P] bool."""
    normal: torch.Tensor
    """Unit normal from B toward A [P, 3]."""
    point_on_b: torch.Tensor
    """Contact point on B, world [P, 3]."""
    distance: torch.Tensor
    """Signed distance of the margin-grown shapes, negative when penetrating [P]."""
    method: torch.Tensor
    """m_lastUsedMethod (1: GJK, 3: EPA, 6: GJK after a failed EPA, 8: GJK kept over EPA) [P] int64."""
    needs_penetration: torch.Tensor
    """Where Bullet runs its penetration depth solver and this call did not (``penetration=False``):
    no contact is reported there [P] bool."""


def gjk_closest_points(
    a: ConvexShape, b: ConvexShape, max_distance2: torch.Tensor, penetration: bool = True
) -> ClosestPoints:
    """btGjkPairDetector::getClosestPointsNonVirtual of shapes A and B, per lane.

    ``max_distance2`` [P]: (margin A + margin B + contact breaking threshold)^2. Where GJK finds no
    separation (or a degenerate one within 0.01 BT), Bullet's penetration depth solver decides
    (`epa_penetration`, for a box A against a triangle B; a sphere's centre inside a car's inner box,
    93 UU deep, never happens in a game and keeps GJK's answer); with ``penetration=False`` those lanes
    report nothing and are marked (``needs_penetration``): the fused tick's GJK stops there too
    (`kernels/gjk_pair_detector.py`). Returns the reported contact per lane.
    """
    origin = a.origin
    p_count = origin.shape[0]
    dtype, device = origin.dtype, origin.device
    # Both transforms are shifted by half the sum of their origins (positionOffset).
    offset = (a.origin + b.origin) * 0.5
    origin_a = a.origin - offset
    origin_b = b.origin - offset
    margin = a.margin + b.margin
    axis = vec3(0.0, 1.0, 0.0, origin).clone()
    sqdist = torch.full((p_count,), BT_LARGE_FLOAT, dtype=dtype, device=device)
    simplex = Simplex.empty(origin)
    active = torch.ones(p_count, dtype=torch.bool, device=device)
    check_simplex = torch.zeros_like(active)
    degenerate = torch.zeros(p_count, dtype=torch.int64, device=device)
    for _ in range(GJK_MAX_ITERATIONS):
        if all_done(active):
            break
        p_world = a.to_world(a.support(a.to_local(-axis)), origin_a)
        q_world = b.to_world(b.support(b.to_local(axis)), origin_b)
        w = p_world - q_world
        delta = dot(axis, w)
        # potential exit: they do not overlap
        stop = active & (delta > 0) & (delta * delta > sqdist * max_distance2)
        degenerate = torch.where(stop, 10, degenerate)
        check_simplex |= stop
        active &= ~stop
        # the new point is already in the simplex, or we did not come any closer
        stop = active & simplex.in_simplex(w)
        degenerate = torch.where(stop, 1, degenerate)
        check_simplex |= stop
        active &= ~stop
        f0 = sqdist - delta
        f1 = sqdist * REL_ERROR2
        stop = active & (f0 <= f1)
        degenerate = torch.where(stop, torch.where(f0 <= 0, 2, 11), degenerate)
        check_simplex |= stop
        active &= ~stop
        simplex = simplex.add_vertex(active, w, p_world, q_world)
        simplex, valid = simplex.closest(active)
        new_axis = simplex.cached_v
        stop = active & ~valid
        degenerate = torch.where(stop, 3, degenerate)
        check_simplex |= stop
        active &= ~stop
        tiny = active & (dot(new_axis, new_axis) < REL_ERROR2)
        axis = torch.where(tiny[:, None], new_axis, axis)
        degenerate = torch.where(tiny, 6, degenerate)
        check_simplex |= tiny
        active &= ~tiny
        previous = sqdist
        sqdist = torch.where(active, dot(new_axis, new_axis), sqdist)
        stop = active & (previous - sqdist <= SIMD_EPSILON * previous)
        degenerate = torch.where(stop, 12, degenerate)
        check_simplex |= stop
        active &= ~stop
        axis = torch.where(active[:, None], new_axis, axis)
        full = active & (simplex.count == 4)  # ends without checkSimplex: the EPA decides
        degenerate = torch.where(full, 13, degenerate)
        active &= ~full
    # checkSimplex: the closest points of the simplex, moved out to the margins
    point_a, point_b = simplex.cached_p1, simplex.cached_p2
    len2 = dot(axis, axis)
    degenerate = torch.where(check_simplex & (len2 < 0.0001), 5, degenerate)
    valid = check_simplex & (len2 > SIMD_EPSILON * SIMD_EPSILON)
    rlen = 1.0 / torch.sqrt(torch.where(valid, len2, 1))
    normal = axis * rlen[:, None]
    s = torch.sqrt(torch.where(valid, sqdist, 1))
    point_a = point_a - axis * (a.margin / s)[:, None]
    point_b = point_b + axis * (b.margin / s)[:, None]
    distance = torch.where(valid, 1.0 / rlen - margin, 0.0)
    method = torch.where(valid, 1, torch.where(check_simplex, 2, -1))
    catch = (degenerate != 0) & (distance + margin < DEGENERATE_PENETRATION_DISTANCE)
    need_epa = ~valid | catch
    if not penetration:
        valid = valid & ~need_epa
    elif (a.kind, b.kind) == ("box", "triangle") and not all_done(need_epa):
        epa = epa_penetration(need_epa, a.basis, origin_a, origin_b, a.half, a.margin, b.tri)
        use = need_epa & epa.valid & (~valid | (epa.distance < distance))
        distance = torch.where(use, epa.distance, distance)
        point_a = torch.where(use[:, None], epa.point_a, point_a)
        point_b = torch.where(use[:, None], epa.point_b, point_b)
        normal = torch.where(use[:, None], epa.normal, normal)
        kept = need_epa & epa.valid & valid & ~use
        method = torch.where(use, epa.method, torch.where(kept, epa.method + 5, method))  # 8 / 11
        valid = valid | use
    found = valid & ((distance < 0) | (distance * distance < max_distance2))
    # fixContactNormalDirection: the normal must point from B's AABB centre toward A's
    flip = dot(a.aabb_center(origin_a) - b.aabb_center(origin_b), normal) < 0
    normal = torch.where(flip[:, None], -normal, normal)
    return ClosestPoints(
        found=found,
        normal=normal,
        point_on_b=point_b + offset,
        distance=distance,
        method=torch.where(found, method, -1),
        needs_penetration=need_epa if not penetration else torch.zeros_like(need_epa),
    )
