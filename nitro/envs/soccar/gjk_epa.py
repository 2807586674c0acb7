"""btGjkEpa2: Bullet's penetration depth for a box against a triangle, batched over pairs.

Reference: the Bullet 3.24 that RocketSim (ZealanL/RocketSim, MIT) vendors: `btGjkEpa2`
(gjkepa2_impl::GJK with the shapes' margins, EncloseOrigin, the EPA polytope) and
`btGjkEpaPenetrationDepthSolver::calcPenDepth`, which `btGjkPairDetector` (`gjk_pair_detector`)
falls back to where the shapes overlap. Also the convex shapes' support functions both use.

Everything here works in Bullet units (1 BT = 50 UU) and float32, because Bullet's tolerances are
absolute lengths in BT (the 1e-4 BT EPA accuracy, ...). Functions are per-pair "lanes" written as
batched tensor code: scalars are [P], vectors [P, 3]; loops run until every lane is done (a fixed
count on CUDA and under compilation).

Names follow Bullet's: the box is shape 0 (its transform ``basis`` [P, 3, 3] with the box axes as
columns, ``origin`` [P, 3]), the triangle is shape 1 (identity transform, vertices ``tri`` [P, 3, 3]).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from nitro.envs.soccar.vec import broadcast, constant, cross, dot, mat_vec, normalize, vec_mat

# --- Bullet's float32 constants --------------------------------------------------------------------
SIMD_EPSILON = float(np.finfo(np.float32).eps)  # FLT_EPSILON
BT_LARGE_FLOAT = 1e18

def vec3(x: float, y: float, z: float, like: torch.Tensor) -> torch.Tensor:
    """(x, y, z) broadcast to the lanes of ``like`` [P, 3]."""
    return constant((x, y, z), like.device, like.dtype).expand(*like.shape[:-1], 3)


def fixed_loops() -> bool:
    """Whether the per-lane loops run fixed counts and never read the device: under torch.compile, and
    while a CUDA graph captures (the eager reference replayed from a graph, where a host read is an
    error)."""
    return torch.compiler.is_compiling() or (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


def loop_count(bound: int, static: int, like: torch.Tensor) -> int:
    """Iterations of a per-lane loop: Bullet's ``bound`` when eager (where `all_done` stops it when
    every lane is done), else (compiled or captured: `fixed_loops`) the fixed ``static`` count."""
    return static if fixed_loops() else bound


def all_done(mask: torch.Tensor) -> bool:
    """Whether no lane of ``mask`` is still running, checked when eager: free on the CPU; on CUDA the
    eager reference waits for the device here, which beats launching a GJK/EPA loop's every step
    (a quarter million launches per tick). Compiled and captured code (`fixed_loops`) runs the fixed
    counts and never waits; the speed path on CUDA is the kernels'."""
    if fixed_loops():
        return False
    return not bool(mask.any())  # sync-ok: eager only (see above)


def box_support(half: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """btBoxShape support without margin: the corner of ``half`` [.., 3] along ``d`` (btFsels: >= 0 -> +)."""
    return torch.where(d >= 0, half, -half)


def triangle_support(tri: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """btTriangleShape support: the vertex of ``tri`` [.., 3, 3] with the largest dot with ``d``
    (btVector3::maxAxis breaks ties toward the lower index, except y over x... as Bullet does)."""
    x, y, z = dot(tri, d[..., None, :]).unbind(-1)
    idx = torch.where(x < y, torch.where(y < z, 2, 1), torch.where(x < z, 2, 0))
    return tri.gather(-2, idx[..., None, None].expand(*idx.shape, 1, 3))[..., 0, :]


# --- btGjkEpa2: GJK with the shapes' margins, then the expanding polytope ----------------------------

GJK2_MAX_ITERATIONS = 128
GJK2_ACCURACY = 1e-4
GJK2_MIN_DISTANCE = 1e-4
GJK2_DUPLICATED_EPS = 1e-4
EPA_MAX_VERTICES = 128
EPA_MAX_FACES = 2 * EPA_MAX_VERTICES
EPA_MAX_ITERATIONS = 255
EPA_ACCURACY = 1e-4
EPA_PLANE_EPS = 1e-5
# Loop counts where nothing may stop early (compiled code): Bullet's bounds are for invalid
# input, so these cover what box-triangle queries use with room to spare. Measured maxima over 3,000
# random car boxes against arena triangles, touching to 0.4 BT deep: 15 GJK iterations, 11 EPA
# iterations, 83 steps of one horizon walk (eager runs to Bullet's bounds, stopping when done).
GJK2_STATIC_ITERATIONS = 48
EPA_STATIC_ITERATIONS = 32
EPA_STATIC_EXPAND_STEPS = 256
# GJK statuses
GJK2_VALID, GJK2_INSIDE, GJK2_FAILED = 0, 1, 2
# EPA statuses (the subset that decides anything here)
EPA_VALID, EPA_DEGENERATED, EPA_NON_CONVEX, EPA_INVALID_HULL, EPA_OUT_OF_FACES, EPA_OUT_OF_VERTICES = 0, 2, 3, 4, 5, 6
EPA_ACCURACY_REACHED, EPA_FALLBACK = 7, 8


def det(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """gjkepa2_impl::GJK::det, term by term in Bullet's order."""
    ax, ay, az = a.unbind(-1)
    bx, by, bz = b.unbind(-1)
    cx, cy, cz = c.unbind(-1)
    return ay * bz * cx + az * bx * cy - ax * bz * cy - ay * bx * cz + ax * by * cz - az * by * cx


def _normalized(v: torch.Tensor) -> torch.Tensor:
    """v * (1 / |v|) (btVector3 / scalar)."""
    return v * (1.0 / torch.sqrt(dot(v, v)))[..., None]


@dataclasses.dataclass
class MinkowskiDiff:
    """gjkepa2_impl::MinkowskiDiff of the box (shape 0) and the triangle (shape 1), in the box's frame."""

    basis: torch.Tensor  # box basis [P, 3, 3] (m_toshape1 = basis, m_toshape0's basis = basis^T)
    to_shape0: torch.Tensor  # m_toshape0's origin: (origin1 - origin0) * basis [P, 3]
    half: torch.Tensor  # inner half extents [P, 3]
    margin: torch.Tensor  # [P]
    tri: torch.Tensor  # triangle vertices in its own (world) frame [P, 3, 3]
    margins: bool  # EnableMargin

    @staticmethod
    def of(basis, origin0, origin1, half, margin, tri, margins: bool) -> MinkowskiDiff:
        return MinkowskiDiff(basis, vec_mat(origin1 - origin0, basis), half, margin, tri, margins)

    @staticmethod
    def _unit_direction(d: torch.Tensor) -> torch.Tensor:
        """localGetSupportVertexNonVirtual's direction: d normalised, (-1,-1,-1) normalised if ~0."""
        tiny = dot(d, d) < SIMD_EPSILON * SIMD_EPSILON
        return normalize(torch.where(tiny[..., None], vec3(-1.0, -1.0, -1.0, d), d))

    def support0(self, d: torch.Tensor) -> torch.Tensor:
        if not self.margins:
            return box_support(self.half, d)
        dn = self._unit_direction(d)
        return box_support(self.half, dn) + self.margin[..., None] * dn

    def support1(self, d: torch.Tensor) -> torch.Tensor:
        d1 = mat_vec(self.basis, d)
        q = triangle_support(self.tri, self._unit_direction(d1) if self.margins else d1)  # margin 0
        return vec_mat(q, self.basis) + self.to_shape0

    def support(self, d: torch.Tensor) -> torch.Tensor:
        return self.support0(d) - self.support1(-d)


def _proj2(a, b, w_in, m_in):
    """GJK::projectorigin(a, b): (squared distance or -1, weights [P, 2], vertex mask)."""
    d = b - a
    seg = dot(d, d)
    ok = seg > 0
    t = torch.where(ok, -dot(a, d) / torch.where(ok, seg, 1), 0)
    ge1 = t >= 1
    le0 = ~ge1 & (t <= 0)
    mid = a + d * t[..., None]
    sqd = torch.where(ge1, dot(b, b), torch.where(le0, dot(a, a), dot(mid, mid)))
    w0 = torch.where(ge1, 0.0, torch.where(le0, 1.0, 1 - t))
    w1 = torch.where(ge1, 1.0, torch.where(le0, 0.0, t))
    m = torch.where(ge1, 2, torch.where(le0, 1, 3))
    return (
        torch.where(ok, sqd, -1.0),
        torch.where(ok[..., None], torch.stack((w0, w1), -1), w_in),
        torch.where(ok, m, m_in),
    )


_IMD3 = (1, 2, 0)


def _bit(m: torch.Tensor, bit: int, value: int) -> torch.Tensor:
    return torch.where((m & bit) != 0, value, 0)


def _proj3(a, b, c, w_in, m_in):
    """GJK::projectorigin(a, b, c): (squared distance or -1, weights [P, 3], vertex mask)."""
    vt = (a, b, c)
    dl = (a - b, b - c, c - a)
    n = cross(dl[0], dl[1])
    area2 = dot(n, n)
    ok = area2 > 0
    mindist = torch.full_like(area2, -1.0)
    w = w_in.clone()
    m = m_in.clone()
    subw = torch.zeros_like(w_in[..., :2])
    subm = torch.zeros_like(m_in)
    for i in range(3):
        j = _IMD3[i]
        cond = dot(vt[i], cross(dl[i], n)) > 0
        subd, new_w, new_m = _proj2(vt[i], vt[j], subw, subm)
        subw = torch.where(cond[..., None], new_w, subw)
        subm = torch.where(cond, new_m, subm)
        take = cond & ((mindist < 0) | (subd < mindist))
        mindist = torch.where(take, subd, mindist)
        m = torch.where(take, _bit(subm, 1, 1 << i) + _bit(subm, 2, 1 << j), m)
        w[..., i] = torch.where(take, subw[..., 0], w[..., i])
        w[..., j] = torch.where(take, subw[..., 1], w[..., j])
        w[..., _IMD3[j]] = torch.where(take, 0.0, w[..., _IMD3[j]])
    face = mindist < 0
    s = torch.sqrt(area2)
    p = n * (dot(a, n) / torch.where(ok, area2, 1))[..., None]
    w0 = torch.sqrt(dot(cross(dl[1], b - p), cross(dl[1], b - p))) / s
    w1 = torch.sqrt(dot(cross(dl[2], c - p), cross(dl[2], c - p))) / s
    face_w = torch.stack((w0, w1, 1 - (w0 + w1)), -1)
    mindist = torch.where(face, dot(p, p), mindist)
    m = torch.where(face, 7, m)
    w = torch.where(face[..., None], face_w, w)
    return torch.where(ok, mindist, -1.0), torch.where(ok[..., None], w, w_in), torch.where(ok, m, m_in)


def _proj4(a, b, c, d, w_in, m_in):
    """GJK::projectorigin(a, b, c, d): (squared distance or -1, weights [P, 4], vertex mask)."""
    vt = (a, b, c, d)
    dl = (a - d, b - d, c - d)
    vl = det(dl[0], dl[1], dl[2])
    ng = (vl * dot(a, cross(b - c, a - b))) <= 0
    ok = ng & (vl.abs() > 0)
    mindist = torch.full_like(vl, -1.0)
    w = w_in.clone()
    m = m_in.clone()
    subw = torch.zeros_like(w_in[..., :3])
    subm = torch.zeros_like(m_in)
    for i in range(3):
        j = _IMD3[i]
        cond = (vl * dot(d, cross(dl[i], dl[j]))) > 0
        subd, new_w, new_m = _proj3(vt[i], vt[j], d, subw, subm)
        subw = torch.where(cond[..., None], new_w, subw)
        subm = torch.where(cond, new_m, subm)
        take = cond & ((mindist < 0) | (subd < mindist))
        mindist = torch.where(take, subd, mindist)
        m = torch.where(take, _bit(subm, 1, 1 << i) + _bit(subm, 2, 1 << j) + _bit(subm, 4, 8), m)
        w[..., i] = torch.where(take, subw[..., 0], w[..., i])
        w[..., j] = torch.where(take, subw[..., 1], w[..., j])
        w[..., _IMD3[j]] = torch.where(take, 0.0, w[..., _IMD3[j]])
        w[..., 3] = torch.where(take, subw[..., 2], w[..., 3])
    inside = mindist < 0
    safe_vl = torch.where(ok, vl, 1)
    w0 = det(c, b, d) / safe_vl
    w1 = det(a, c, d) / safe_vl
    w2 = det(b, a, d) / safe_vl
    inside_w = torch.stack((w0, w1, w2, 1 - (w0 + w1 + w2)), -1)
    mindist = torch.where(inside, 0.0, mindist)
    m = torch.where(inside, 15, m)
    w = torch.where(inside[..., None], inside_w, w)
    return torch.where(ok, mindist, -1.0), torch.where(ok[..., None], w, w_in), torch.where(ok, m, m_in)


@dataclasses.dataclass
class Gjk2Simplex:
    """GJK::sSimplex as values: support directions ``d`` and points ``w`` [P, 4, 3], weights, rank."""

    d: torch.Tensor
    w: torch.Tensor
    p: torch.Tensor  # [P, 4]
    rank: torch.Tensor  # [P] int64

    def put(self, mask: torch.Tensor, slot: torch.Tensor, d: torch.Tensor, w: torch.Tensor) -> Gjk2Simplex:
        at = (mask[:, None] & (torch.arange(4, device=d.device) == slot[:, None]))[..., None]
        return dataclasses.replace(self, d=torch.where(at, d[:, None], self.d), w=torch.where(at, w[:, None], self.w))


def _getsupport(shape: MinkowskiDiff, v: torch.Tensor):
    """GJK::getsupport: the unit direction and the Minkowski support point along it."""
    d = _normalized(v)
    return d, shape.support(d)


def gjk2_evaluate(shape: MinkowskiDiff, guess: torch.Tensor, lanes: torch.Tensor):
    """gjkepa2_impl::GJK::Evaluate for the ``lanes`` [P] that run it: (status [P], simplex, ray)."""
    n = guess.shape[0]
    dtype, device = guess.dtype, guess.device
    sqrl = dot(guess, guess)
    first = torch.where((sqrl > 0)[:, None], -guess, vec3(1.0, 0.0, 0.0, guess))
    d0, w0 = _getsupport(shape, first)
    zeros4 = torch.zeros(n, 4, 3, dtype=dtype, device=device)
    simplex = Gjk2Simplex(d=zeros4, w=zeros4.clone(), p=torch.zeros(n, 4, dtype=dtype, device=device), rank=torch.ones(n, dtype=torch.int64, device=device))
    simplex = simplex.put(torch.ones_like(lanes), torch.zeros_like(simplex.rank), d0, w0)
    simplex.p[:, 0] = 1
    ray = w0
    alpha = torch.zeros(n, dtype=dtype, device=device)
    lastw = w0[:, None, :].expand(-1, 4, -1).clone()
    clastw = torch.zeros(n, dtype=torch.int64, device=device)
    status = torch.full((n,), GJK2_VALID, dtype=torch.int64, device=device)
    running = lanes.clone()
    arange4 = torch.arange(4, device=device)
    for iteration in range(loop_count(GJK2_MAX_ITERATIONS, GJK2_STATIC_ITERATIONS, lanes)):
        if all_done(running):
            break
        rl = torch.sqrt(dot(ray, ray))
        touching = running & (rl < GJK2_MIN_DISTANCE)
        status = torch.where(touching, GJK2_INSIDE, status)
        running = running & ~touching
        nd, nw = _getsupport(shape, -ray)
        simplex = simplex.put(running, simplex.rank, nd, nw)
        rank = simplex.rank + running.to(torch.int64)
        diff = nw[:, None, :] - lastw
        found = running & (dot(diff, diff) < GJK2_DUPLICATED_EPS).any(1)
        rank = rank - found.to(torch.int64)  # removevertice: return the old simplex
        running = running & ~found
        clastw = torch.where(running, (clastw + 1) & 3, clastw)
        lastw = torch.where((running[:, None] & (arange4 == clastw[:, None]))[..., None], nw[:, None], lastw)
        omega = dot(ray, nw) / torch.where(running, rl, 1)
        alpha = torch.where(running, torch.maximum(omega, alpha), alpha)
        converged = running & (((rl - alpha) - (GJK2_ACCURACY * rl)) <= 0)
        rank = rank - converged.to(torch.int64)
        running = running & ~converged
        simplex = dataclasses.replace(simplex, rank=rank)
        # reduce the simplex to the sub-simplex closest to the origin
        c0, c1, c2, c3 = simplex.w.unbind(1)
        zw = torch.zeros(n, 4, dtype=dtype, device=device)
        zm = torch.zeros(n, dtype=torch.int64, device=device)
        s2, w2, m2 = _proj2(c0, c1, zw[:, :2], zm)
        s3, w3, m3 = _proj3(c0, c1, c2, zw[:, :3], zm)
        s4, w4, m4 = _proj4(c0, c1, c2, c3, zw, zm)
        sqdist = torch.where(rank == 2, s2, torch.where(rank == 3, s3, s4))
        weights = torch.where(
            (rank == 2)[:, None],
            torch.cat((w2, zw[:, :2]), 1),
            torch.where((rank == 3)[:, None], torch.cat((w3, zw[:, :1]), 1), w4),
        )
        mask = torch.where(rank == 2, m2, torch.where(rank == 3, m3, m4))
        reduced = running & (sqdist >= 0)
        failed = running & ~(sqdist >= 0)
        keep = ((mask[:, None] >> arange4) & 1).bool() & (arange4 < rank[:, None])
        order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices
        take = order[..., None].expand(-1, -1, 3)
        kept_w = torch.where(keep[..., None], simplex.w, 0.0)
        new_ray = torch.zeros_like(ray)
        for i in range(4):  # m_ray += c[i]->w * weights[i], kept vertices in order
            new_ray = new_ray + torch.where(keep[:, i, None], kept_w[:, i] * weights[:, i, None], 0.0)
        new = Gjk2Simplex(
            d=simplex.d.gather(1, take),
            w=simplex.w.gather(1, take),
            p=torch.where(keep, weights, 0.0).gather(1, order),
            rank=keep.sum(1),
        )
        simplex = Gjk2Simplex(
            d=torch.where(reduced[:, None, None], new.d, simplex.d),
            w=torch.where(reduced[:, None, None], new.w, simplex.w),
            p=torch.where(reduced[:, None], new.p, simplex.p),
            rank=torch.where(reduced, new.rank, simplex.rank - failed.to(torch.int64)),
        )
        ray = torch.where(reduced[:, None], new_ray, ray)
        status = torch.where(reduced & (mask == 15), GJK2_INSIDE, status)
        running = running & reduced & (mask != 15)
        out_of_iterations = running & (iteration + 1 >= GJK2_MAX_ITERATIONS)
        status = torch.where(out_of_iterations, GJK2_FAILED, status)
        running = running & ~out_of_iterations
    return status, simplex, ray


def enclose_origin(shape: MinkowskiDiff, simplex: Gjk2Simplex, lanes: torch.Tensor):
    """GJK::EncloseOrigin: grow the final GJK simplex (rank 2 to 4) into a tetrahedron of nonzero
    volume, trying Bullet's candidate directions in its recursion order. Returns (enclosed [P], the
    four vertices' directions and points [P, 4, 3])."""
    d, w, rank = simplex.d, simplex.w, simplex.rank
    enclosed = lanes & (rank == 4) & (det(w[:, 0] - w[:, 3], w[:, 1] - w[:, 3], w[:, 2] - w[:, 3]).abs() > 0)
    out_d, out_w = d.clone(), w.clone()

    def try_tetra(ok, base_d, base_w, direction):
        """Append the support along ``direction`` to three vertices; a nonzero volume encloses."""
        nd, nw = _getsupport(shape, direction)
        cand_d = torch.cat((base_d, nd[:, None]), 1)
        cand_w = torch.cat((base_w, nw[:, None]), 1)
        vol = det(cand_w[:, 0] - cand_w[:, 3], cand_w[:, 1] - cand_w[:, 3], cand_w[:, 2] - cand_w[:, 3])
        return ok & (vol.abs() > 0), cand_d, cand_w

    def from_triangle(ok, base_d, base_w):
        """Rank 3: try +n, then -n, with n the triangle's normal."""
        tri_n = cross(base_w[:, 1] - base_w[:, 0], base_w[:, 2] - base_w[:, 0])
        ok = ok & (dot(tri_n, tri_n) > 0)
        results = []
        for sign in (1.0, -1.0):
            results.append(try_tetra(ok, base_d, base_w, tri_n * sign))
        return results

    candidates = []  # (success [P], d [P, 4, 3], w [P, 4, 3]) in Bullet's recursion order
    candidates += from_triangle(lanes & (rank == 3), d[:, :3], w[:, :3])
    seg = w[:, 1] - w[:, 0]
    for i in range(3):
        axis = torch.zeros_like(seg)
        axis[:, i] = 1.0
        p = cross(seg, axis)
        ok = lanes & (rank == 2) & (dot(p, p) > 0)
        for sign in (1.0, -1.0):
            nd, nw = _getsupport(shape, p * sign)
            base_d = torch.cat((d[:, :2], nd[:, None]), 1)
            base_w = torch.cat((w[:, :2], nw[:, None]), 1)
            candidates += from_triangle(ok, base_d, base_w)
    for ok, cand_d, cand_w in candidates:
        take = ok & ~enclosed
        out_d = torch.where(take[:, None, None], cand_d, out_d)
        out_w = torch.where(take[:, None, None], cand_w, out_w)
        enclosed = enclosed | take
    return enclosed, out_d, out_w


_I1M3 = (1, 2, 0)
_I2M3 = (2, 0, 1)


class Polytope:
    """EPA's hull per lane: vertices [P, 4 + 128, 3] (the GJK tetrahedron, then the EPA's support
    points) and faces [P, 256] with Bullet's fields. Bullet keeps the hull and the spare faces in
    linked lists: the hull is walked newest face first (``stamp``) and the spare faces are a stack."""

    def __init__(self, n: int, like: torch.Tensor):
        dtype, device = like.dtype, like.device
        nv, nf = 4 + EPA_MAX_VERTICES, EPA_MAX_FACES
        self.rows = torch.arange(n, device=device)
        self.vd = torch.zeros(n, nv, 3, dtype=dtype, device=device)
        self.vw = torch.zeros(n, nv, 3, dtype=dtype, device=device)
        self.fn = torch.zeros(n, nf, 3, dtype=dtype, device=device)
        self.fdist = torch.zeros(n, nf, dtype=dtype, device=device)
        self.fc = torch.zeros(n, nf, 3, dtype=torch.int64, device=device)
        self.ff = torch.zeros(n, nf, 3, dtype=torch.int64, device=device)
        self.fe = torch.zeros(n, nf, 3, dtype=torch.int64, device=device)
        self.fpass = torch.zeros(n, nf, dtype=torch.int64, device=device)
        self.in_hull = torch.zeros(n, nf, dtype=torch.bool, device=device)
        self.stamp = torch.zeros(n, nf, dtype=torch.int64, device=device)
        self.clock = torch.zeros(n, dtype=torch.int64, device=device)
        self.hull_count = torch.zeros(n, dtype=torch.int64, device=device)
        # the stock: Bullet appends faces 255 .. 0, so face 0 is taken first
        self.stock = torch.arange(nf - 1, -1, -1, device=device).expand(n, nf).clone()
        self.stock_count = torch.full((n,), nf, dtype=torch.int64, device=device)
        self.status = torch.full((n,), EPA_VALID, dtype=torch.int64, device=device)

    def _set(self, t, mask, idx, value):
        idx = torch.where(mask, idx, 0)
        t[self.rows, idx] = torch.where(mask.view(-1, *([1] * (t.dim() - 2))), value, t[self.rows, idx])

    def _set_slot(self, t, mask, face, slot, value):
        """t[lane, face, slot] = value where mask (slot: python int or [P])."""
        face = torch.where(mask, face, 0)
        slot = broadcast(slot, face)
        t[self.rows, face, slot] = torch.where(mask, value, t[self.rows, face, slot])

    def _hull_append(self, mask, face):
        self.clock = self.clock + mask.to(torch.int64)
        self._set(self.in_hull, mask, face, torch.ones_like(mask))
        self._set(self.stamp, mask, face, self.clock)
        self.hull_count = self.hull_count + mask.to(torch.int64)

    def _hull_remove(self, mask, face):
        self._set(self.in_hull, mask, face, torch.zeros_like(mask))
        self.hull_count = self.hull_count - mask.to(torch.int64)

    def _stock_push(self, mask, face):
        self._set(self.stock, mask, self.stock_count, face)
        self.stock_count = self.stock_count + mask.to(torch.int64)

    def bind(self, mask, fa, ea, fb, eb):
        """EPA::bind: faces fa and fb share edge ea of fa / eb of fb."""
        self._set_slot(self.fe, mask, fa, ea, broadcast(eb, fa))
        self._set_slot(self.ff, mask, fa, ea, fb)
        self._set_slot(self.fe, mask, fb, eb, broadcast(ea, fa))
        self._set_slot(self.ff, mask, fb, eb, fa)

    def _edge_dist(self, n, a, b):
        """EPA::getedgedist: (the origin projects outside edge a->b [P], distance [P])."""
        ba = b - a
        n_ab = cross(ba, n)
        outside = dot(a, n_ab) < 0
        ba2 = dot(ba, ba)
        a_dot_ba = dot(a, ba)
        b_dot_ba = dot(b, ba)
        a_dot_b = dot(a, b)
        edge = torch.sqrt(torch.clamp((dot(a, a) * dot(b, b) - a_dot_b * a_dot_b) / torch.where(ba2 > 0, ba2, 1), min=0))
        dist = torch.where(a_dot_ba > 0, torch.sqrt(dot(a, a)), torch.where(b_dot_ba < 0, torch.sqrt(dot(b, b)), edge))
        return outside, dist

    def new_face(self, mask, a, b, c, forced: bool):
        """EPA::newface(a, b, c): the new hull face index, or -1 (the status says why) [P]."""
        has_stock = self.stock_count > 0
        self.status = torch.where(mask & ~has_stock, EPA_OUT_OF_FACES, self.status)
        mask = mask & has_stock
        face = self.stock[self.rows, (self.stock_count - 1).clamp(min=0)]
        self.stock_count = self.stock_count - mask.to(torch.int64)
        self._hull_append(mask, face)
        self._set(self.fpass, mask, face, torch.zeros_like(face))
        va = self.vw[self.rows, a.clamp(min=0)]
        vb = self.vw[self.rows, b.clamp(min=0)]
        vc = self.vw[self.rows, c.clamp(min=0)]
        n = cross(vb - va, vc - va)
        length = torch.sqrt(dot(n, n))
        v = length > EPA_ACCURACY
        out_ab, d_ab = self._edge_dist(n, va, vb)
        out_bc, d_bc = self._edge_dist(n, vb, vc)
        out_ca, d_ca = self._edge_dist(n, vc, va)
        plane = dot(va, n) / torch.where(v, length, 1)
        d = torch.where(out_ab, d_ab, torch.where(out_bc, d_bc, torch.where(out_ca, d_ca, plane)))
        n = n * (1.0 / torch.where(v, length, 1))[:, None]
        accept = v & (d >= -EPA_PLANE_EPS) if not forced else v
        self.status = torch.where(mask & v & ~accept, EPA_NON_CONVEX, self.status)
        self.status = torch.where(mask & ~v, EPA_DEGENERATED, self.status)
        self._set(self.fc, mask, face, torch.stack((a, b, c), -1))
        self._set(self.fn, mask, face, n)
        self._set(self.fdist, mask, face, d)
        rejected = mask & ~accept
        self._hull_remove(rejected, face)
        self._stock_push(rejected, face)
        return torch.where(mask & accept, face, -1)

    def find_best(self):
        """EPA::findbest: the hull face nearest the origin, newest first among equals [P]."""
        d2 = torch.where(self.in_hull, self.fdist * self.fdist, float("inf"))
        nearest = d2.amin(1, keepdim=True)
        return torch.where(self.in_hull & (d2 == nearest), self.stamp, -1).argmax(1)

    def expand(self, lanes, pass_, w, start_f, start_e, horizon):
        """EPA::expand from face start_f across its edge start_e, depth first (an explicit stack
        replays Bullet's recursion). Returns whether the horizon closed [P]; ``horizon`` is the
        (cf, ff, nf) triple of tensors, updated in place."""
        n = lanes.shape[0]
        depth = EPA_MAX_FACES + 1
        dev = lanes.device
        stack_f = torch.zeros(n, depth, dtype=torch.int64, device=dev)
        stack_e = torch.zeros_like(stack_f)
        stack_stage = torch.zeros_like(stack_f)
        sp = lanes.to(torch.int64)
        stack_f[:, 0] = start_f
        stack_e[:, 0] = start_e
        ret = torch.zeros(n, dtype=torch.bool, device=dev)
        cf, ff, nf = horizon
        ww = self.vw[self.rows, w]
        for _ in range(loop_count(8 * EPA_MAX_FACES, EPA_STATIC_EXPAND_STEPS, lanes)):
            running = sp > 0
            if all_done(running):
                break
            top = (sp - 1).clamp(min=0)
            f = stack_f[self.rows, top]
            e = stack_e[self.rows, top]
            stage = stack_stage[self.rows, top]
            e1 = constant(_I1M3, dev, torch.int64)[e]
            e2 = constant(_I2M3, dev, torch.int64)[e]
            fpass = self.fpass[self.rows, f]
            # stage 0: a face already visited this pass gives false
            s0 = running & (stage == 0)
            seen = s0 & (fpass == pass_)
            fresh = s0 & ~seen
            below = dot(self.fn[self.rows, f], ww) - self.fdist[self.rows, f] < -EPA_PLANE_EPS
            make = fresh & below
            corners = self.fc[self.rows, f]
            new = self.new_face(make, corners.gather(1, e1[:, None])[:, 0], corners.gather(1, e[:, None])[:, 0], w, False)
            made = make & (new >= 0)
            self.bind(made, new, 0, f, e)
            chain = made & (cf >= 0)
            self.bind(chain, cf, 1, new, 2)
            ff = torch.where(made & (cf < 0), new, ff)
            cf = torch.where(made, new, cf)
            nf = nf + made.to(torch.int64)
            visit = fresh & ~below
            self._set(self.fpass, visit, f, pass_.expand_as(f) if pass_.dim() else pass_)
            # stage 1: after the first neighbour; stage 2: after the second
            s1 = running & (stage == 1)
            s2 = running & (stage == 2)
            ok2 = s2 & ret
            self._hull_remove(ok2, f)
            self._stock_push(ok2, f)
            # returns: stage 0 leaves (seen: false; make: made), stage 1 false, stage 2 (ret)
            ret = torch.where(seen, False, torch.where(make, made, torch.where(s1 & ~ret, False, ret)))
            pop = seen | make | (s1 & ~ret) | s2
            descend1 = visit
            descend2 = s1 & ret
            child_f = torch.where(descend1, self.ff[self.rows, f].gather(1, e1[:, None])[:, 0], self.ff[self.rows, f].gather(1, e2[:, None])[:, 0])
            child_e = torch.where(descend1, self.fe[self.rows, f].gather(1, e1[:, None])[:, 0], self.fe[self.rows, f].gather(1, e2[:, None])[:, 0])
            descend = descend1 | descend2
            stack_stage[self.rows, top] = torch.where(descend1, 1, torch.where(descend2, 2, stage))
            push_at = torch.where(descend, sp, 0).clamp(max=depth - 1)
            stack_f[self.rows, push_at] = torch.where(descend, child_f, stack_f[self.rows, push_at])
            stack_e[self.rows, push_at] = torch.where(descend, child_e, stack_e[self.rows, push_at])
            stack_stage[self.rows, push_at] = torch.where(descend, 0, stack_stage[self.rows, push_at])
            sp = sp + descend.to(torch.int64) - pop.to(torch.int64)
        horizon[0], horizon[1], horizon[2] = cf, ff, nf
        return ret


@dataclasses.dataclass
class EpaResult:
    """EPA::Evaluate's outcome per lane: the nearest face's normal and depth, and its three
    vertices' support directions [P, 3, 3] with barycentric weights [P, 3] (rank 1 on fallback)."""

    status: torch.Tensor
    normal: torch.Tensor
    depth: torch.Tensor
    dirs: torch.Tensor
    weights: torch.Tensor


def epa_evaluate(shape: MinkowskiDiff, simplex: Gjk2Simplex, guess: torch.Tensor, lanes: torch.Tensor) -> EpaResult:
    """gjkepa2_impl::EPA::Evaluate from GJK's final simplex (the lanes where GJK found the origin inside)."""
    n = guess.shape[0]
    device = guess.device
    rows = torch.arange(n, device=device)
    enclosed, td, tw = enclose_origin(shape, simplex, lanes & (simplex.rank > 1))
    # orient the tetrahedron
    flip = det(tw[:, 0] - tw[:, 3], tw[:, 1] - tw[:, 3], tw[:, 2] - tw[:, 3]) < 0
    swap = constant((1, 0, 2, 3), device, torch.int64)
    td = torch.where(flip[:, None, None], td[:, swap], td)
    tw = torch.where(flip[:, None, None], tw[:, swap], tw)
    hull = Polytope(n, guess)
    hull.vd[:, :4] = td
    hull.vw[:, :4] = tw
    idx = [torch.full((n,), i, dtype=torch.int64, device=device) for i in range(4)]
    tetra = [
        hull.new_face(enclosed, idx[0], idx[1], idx[2], True),
        hull.new_face(enclosed, idx[1], idx[0], idx[3], True),
        hull.new_face(enclosed, idx[2], idx[1], idx[3], True),
        hull.new_face(enclosed, idx[0], idx[2], idx[3], True),
    ]
    built = enclosed & (hull.hull_count == 4)
    hull.status = torch.where(built, EPA_VALID, hull.status)
    best = hull.find_best()
    outer_n = hull.fn[rows, best]
    outer_d = hull.fdist[rows, best]
    outer_c = hull.fc[rows, best]
    for fa, ea, fb, eb in ((0, 0, 1, 0), (0, 1, 2, 0), (0, 2, 3, 0), (1, 1, 3, 2), (1, 2, 2, 1), (2, 2, 3, 1)):
        hull.bind(built, tetra[fa], ea, tetra[fb], eb)
    running = built.clone()
    next_sv = torch.zeros(n, dtype=torch.int64, device=device)
    pass_ = torch.zeros(n, dtype=torch.int64, device=device)
    for _ in range(loop_count(EPA_MAX_ITERATIONS, EPA_STATIC_ITERATIONS, lanes)):
        if all_done(running):
            break
        out_of_vertices = running & (next_sv >= EPA_MAX_VERTICES)
        hull.status = torch.where(out_of_vertices, EPA_OUT_OF_VERTICES, hull.status)
        running = running & ~out_of_vertices
        w = 4 + next_sv.clamp(max=EPA_MAX_VERTICES - 1)
        next_sv = next_sv + running.to(torch.int64)
        pass_ = pass_ + running.to(torch.int64)
        hull._set(hull.fpass, running, best, pass_)
        best_n = hull.fn[rows, best]
        sd, sw = _getsupport(shape, best_n)
        hull._set(hull.vd, running, w, sd)
        hull._set(hull.vw, running, w, sw)
        wdist = dot(best_n, sw) - hull.fdist[rows, best]
        grow = running & (wdist > EPA_ACCURACY)
        reached = running & ~grow
        hull.status = torch.where(reached, EPA_ACCURACY_REACHED, hull.status)
        horizon = [torch.full((n,), -1, dtype=torch.int64, device=device), torch.full((n,), -1, dtype=torch.int64, device=device), torch.zeros(n, dtype=torch.int64, device=device)]
        valid = grow.clone()
        for j in range(3):
            start_f = hull.ff[rows, best, j]
            start_e = hull.fe[rows, best, j]
            valid = valid & hull.expand(valid, pass_, w, start_f, start_e, horizon)
        closed = grow & valid & (horizon[2] >= 3)
        hull.bind(closed, horizon[0], 1, horizon[1], 2)
        hull._hull_remove(closed, best)
        hull._stock_push(closed, best)
        invalid = grow & ~closed
        hull.status = torch.where(invalid, EPA_INVALID_HULL, hull.status)
        new_best = hull.find_best()
        best = torch.where(closed, new_best, best)
        outer_n = torch.where(closed[:, None], hull.fn[rows, best], outer_n)
        outer_d = torch.where(closed, hull.fdist[rows, best], outer_d)
        outer_c = torch.where(closed[:, None], hull.fc[rows, best], outer_c)
        running = closed
    # the barycentric weights of the origin's projection on the outer face
    projection = outer_n * outer_d[:, None]
    cw = hull.vw.gather(1, outer_c[..., None].expand(-1, -1, 3))
    cd = hull.vd.gather(1, outer_c[..., None].expand(-1, -1, 3))

    def area(u, v):
        c = cross(u - projection, v - projection)
        return torch.sqrt(dot(c, c))

    p = torch.stack((area(cw[:, 1], cw[:, 2]), area(cw[:, 2], cw[:, 0]), area(cw[:, 0], cw[:, 1])), -1)
    total = p[:, 0] + p[:, 1] + p[:, 2]
    p = p / total[:, None]
    # fallback: no enclosing tetrahedron (or a degenerate one)
    fallback = ~built
    g = -guess
    gl = torch.sqrt(dot(g, g))
    fb_normal = torch.where((gl > 0)[:, None], g / torch.where(gl > 0, gl, 1)[:, None], vec3(1.0, 0.0, 0.0, g))
    fb_dirs = torch.zeros_like(cd)
    fb_dirs[:, 0] = simplex.d[:, 0]
    fb_weights = torch.zeros_like(p)
    fb_weights[:, 0] = 1
    return EpaResult(
        status=torch.where(fallback, EPA_FALLBACK, hull.status),
        normal=torch.where(fallback[:, None], fb_normal, outer_n),
        depth=torch.where(fallback, 0.0, outer_d),
        dirs=torch.where(fallback[:, None, None], fb_dirs, cd),
        weights=torch.where(fallback[:, None], fb_weights, p),
    )


@dataclasses.dataclass
class Penetration:
    """What btGjkPairDetector takes from its penetration depth solver, per lane (BT, world)."""

    valid: torch.Tensor
    """A result that may replace GJK's [P] bool."""
    distance: torch.Tensor
    point_a: torch.Tensor
    point_b: torch.Tensor
    normal: torch.Tensor
    method: torch.Tensor
    """3: EPA penetration; 6: separated after all (GJK without margins) [P] int64."""


def _safe_normalize(v: torch.Tensor) -> torch.Tensor:
    """btVector3::safeNormalize."""
    l2 = dot(v, v)
    ok = l2 >= SIMD_EPSILON * SIMD_EPSILON
    return torch.where(ok[:, None], v * (1.0 / torch.sqrt(torch.where(ok, l2, 1)))[:, None], vec3(1.0, 0.0, 0.0, v))


def epa_penetration(lanes, basis, origin_a, origin_b, half, margin, tri) -> Penetration:
    """btGjkEpaPenetrationDepthSolver::calcPenDepth as btGjkPairDetector uses its result.

    For each of Bullet's nine guess directions in turn (until one succeeds): btGjkEpaSolver2's
    Penetration (GJK then EPA on the margin-grown shapes) or, when those do not overlap, its Distance
    (GJK on the shapes without margins). ``origin_a`` / ``origin_b`` are the shifted transforms'
    origins, ``tri`` the triangle in its own frame.
    """
    like = origin_a
    guesses = [
        _safe_normalize(origin_b - origin_a),
        _safe_normalize(origin_a - origin_b),
        vec3(0.0, 0.0, 1.0, like),
        vec3(0.0, 1.0, 0.0, like),
        vec3(1.0, 0.0, 0.0, like),
        vec3(1.0, 1.0, 0.0, like),
        vec3(1.0, 1.0, 1.0, like),
        vec3(0.0, 1.0, 1.0, like),
        vec3(1.0, 0.0, 1.0, like),
    ]
    with_margin = MinkowskiDiff.of(basis, origin_a, origin_b, half, margin, tri, True)
    without_margin = MinkowskiDiff.of(basis, origin_a, origin_b, half, margin, tri, False)
    todo = lanes.clone()
    penetrating = torch.zeros_like(lanes)
    separated = torch.zeros_like(lanes)
    wit_a = torch.zeros_like(origin_a)
    wit_b = torch.zeros_like(origin_a)
    v = torch.zeros_like(origin_a)
    for guess in guesses:
        if all_done(todo):
            break
        # Penetration: GJK on the margin-grown shapes, and the EPA where they overlap
        status, simplex, _ = gjk2_evaluate(with_margin, -guess, todo)
        inside = todo & (status == GJK2_INSIDE)
        if not all_done(inside):
            epa = epa_evaluate(with_margin, simplex, guess, inside)  # Bullet passes -(-guess)
            w0 = torch.zeros_like(origin_a)
            for i in range(3):
                w0 = w0 + with_margin.support0(epa.dirs[:, i]) * epa.weights[:, i, None]
            a = mat_vec(basis, w0) + origin_a
            b = mat_vec(basis, w0 - epa.normal * epa.depth[:, None]) + origin_a
            wit_a = torch.where(inside[:, None], a, wit_a)
            wit_b = torch.where(inside[:, None], b, wit_b)
            v = torch.where(inside[:, None], -epa.normal, v)
            penetrating = penetrating | inside
        todo = todo & ~inside
        # Distance: GJK without margins
        status, simplex, _ = gjk2_evaluate(without_margin, guess, todo)
        valid = todo & (status == GJK2_VALID)
        w0 = torch.zeros_like(origin_a)
        w1 = torch.zeros_like(origin_a)
        for i in range(4):
            used = (i < simplex.rank)[:, None]
            c_d, c_p = simplex.d[:, i], simplex.p[:, i, None]
            w0 = w0 + torch.where(used, without_margin.support0(c_d) * c_p, 0.0)
            w1 = w1 + torch.where(used, without_margin.support1(-c_d) * c_p, 0.0)
        normal = w0 - w1
        dist = torch.sqrt(dot(normal, normal))
        normal = normal * (1.0 / torch.where(dist > GJK2_MIN_DISTANCE, dist, 1))[:, None]
        wit_a = torch.where(valid[:, None], mat_vec(basis, w0) + origin_a, wit_a)
        wit_b = torch.where(valid[:, None], mat_vec(basis, w1) + origin_a, wit_b)
        v = torch.where(valid[:, None], normal, v)
        separated = separated | valid
        todo = todo & ~valid
    # btGjkPairDetector's use of the two outcomes
    delta = wit_b - wit_a
    len2 = dot(delta, delta)
    small = len2 <= SIMD_EPSILON * SIMD_EPSILON
    pen_normal = torch.where(small[:, None], v, delta)
    len2 = torch.where(small, dot(v, v), len2)
    pen_ok = penetrating & (len2 > SIMD_EPSILON * SIMD_EPSILON)
    pen_normal = pen_normal * (1.0 / torch.sqrt(torch.where(pen_ok, len2, 1)))[:, None]
    pen_distance = -torch.sqrt(dot(wit_a - wit_b, wit_a - wit_b))
    sep_ok = separated & (dot(v, v) > 0)
    sep_distance = torch.sqrt(dot(wit_a - wit_b, wit_a - wit_b)) - margin
    sep_normal = normalize(torch.where(sep_ok[:, None], v, vec3(1.0, 0.0, 0.0, v)))
    return Penetration(
        valid=pen_ok | sep_ok,
        distance=torch.where(pen_ok, pen_distance, sep_distance),
        point_a=torch.where(pen_ok[:, None], wit_a, wit_a - v * margin[:, None]),
        point_b=wit_b,  # the triangle has no margin
        normal=torch.where(pen_ok[:, None], pen_normal, sep_normal),
        method=torch.where(pen_ok, 3, 6),
    )
