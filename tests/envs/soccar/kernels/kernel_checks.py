"""Kernel against reference, query by query, telling float ties from bugs.

The Triton kernels (`nitro.envs.soccar.kernels`) and the PyTorch references evaluate the same
float32 formulas in the same order, but not with the same rounding: on the GPU Triton contracts
``a * b + c`` into fused multiply-adds and its ``sqrt`` and ``/`` are the fast approximate ones, so a
result may differ from the reference by a few ulps. Continuous outputs then agree to a few ulps of
the arena's coordinates. Discrete decisions agree too, except where the decision's own margin is
within the rounding: there both answers are right. Such decisions are

- thresholds: a contact just inside the gap or not, a ray endpoint on a plane, an edge-distance test
  that picks the face normal or the contact's own;
- near-equal candidates: which point a full 4-point manifold drops when two candidate areas (or the
  deepest depths) are equal, as on a regular mesh or for contacts at a vertex shared by several
  triangles (same point, same depth, different normals); which of two triangles a ray meets first at
  their shared edge; which of two near-parallel separating axes a box takes; the order of two box
  contacts of equal depth, or which of them is the 8th kept.

So each query lands in one of three classes:

1. **agree**: the same discrete result (contact objects and counts, hit and triangle, features) and
   every value within `VALUE_TOL` (positions, depths, UU) or `NORMAL_TOL` (unit normals) of the
   reference;
2. **tie**: not 1, but the kernel's answer is one the reference's own algorithm gives when decisions
   whose margin is within the rounding go the other way: (a) near-equal candidates, re-decided with
   tolerances: the manifold reduction is searched over every tied choice (`_manifold_outcomes`), box
   contacts compare as sorted depth lists whose features carry a tied axis (`_box_equivalent`); or
   (b) thresholds: the kernel's answer is the reference's (strictly, or with (a)) at an input moved
   by at most `DELTA` along one axis: 18 neighbours (+-x, +-y, +-z at DELTA, DELTA/2, DELTA/4; for a
   ray, both endpoints or either one), within the tolerances plus the drift that move can cause;
3. **unexplained**: neither. That is a bug; a check passes with none.

Every check reports its share of ties. It is the share of queries whose answer the float32 rounding
itself decides, not a tolerance (a float64 evaluation of the reference differs from the float32 one
on about as many), and a check also fails when it exceeds `MAX_TIE_FRACTION`. Even on the CPU,
under Triton's interpreter (numpy float32, no fused multiply-adds), a rare query ties: the kernel
normalises by multiplying with 1 / sqrt(x.x) as Bullet does, the reference divides by
`torch.linalg.vector_norm`, an ulp apart.

Tolerances (UU unless said otherwise):

- `ULP` = 2^-11 UU, the spacing of float32 numbers in [4096, 8192): arena coordinates reach ~6000 UU.
- `VALUE_TOL` = 16 ulps (0.0078 UU). Outputs are chains of about ten float32 operations on such
  coordinates, some with cancellation (the closest point on a long thin triangle). Measured: the
  float32 reference against a float64 evaluation (the triangle contacts of 4 x 12288 sphere queries,
  half the check's, half balls 0-91 UU from a triangle), offsets and points within 0.00075 UU and
  depths within 0.00051 UU where the centre is at least `LEVER` from the contact (closer: Lever,
  below); in manifolds the worst agreeing query is 0.0048 UU off, where of two contacts of equal
  depth 0.0048 UU apart the other is kept. The H200 kernels against the reference, 0.00054 UU
  (sphere) and 0.0015 UU (box). Two float32 evaluations can each be off by the float64 gap: 16 ulps
  is 5 times twice the worst contact, and covers such a near-identical contact.
- `NORMAL_TOL` = 2e-4 (unitless): normals are differences of such points over lever arms of 80 UU or
  more (16 ulps / 80 UU = 1e-4), doubled; rotations use angles good to 1e-7 rad.
- Lever (`lever_scale`): those two hold for a triangle contact whose ball centre is at least
  `LEVER` = 80 UU (r - 10 UU, as in play) from it. Closer (the check's balls "anywhere" may sit
  inside the mesh) the contact is ill-conditioned: its normal is (centre - p) / dist with p the
  closest point on the triangle, its offset p + normal * depth - centre is -r * normal, so the
  rounding error e of p (about an ulp) turns the normal by e / dist and moves the offset, and the
  edge-corrected point made from it, by r * e / dist. There offsets, points and normals are compared
  within the tolerances times LEVER / dist; depths (dist - r) are not amplified and keep VALUE_TOL.
  Measured on the contacts above: float32 offsets up to 0.475 UU off float64 (dist 0.08 UU), but at
  every dist their error times dist / LEVER is within 0.00053 UU, the margin at the lever. The H200
  run's one unexplained sphere query (seed 0, query 75190) was such a contact: a ball 1.58 UU from
  triangle 1771 (scale 50), kernel and reference offsets 0.011 UU apart, each 0.005 / 0.007 UU off
  float64 (and 0.0125 UU for triangle 1773, 0.40 UU away, where the two happened to agree). With
  the scale the H200 check finds none unexplained on seeds 0, 1 and 2 (311, 358, 293 ties).
- `DELTA` = 16 ulps: a neighbour moves the input by more than the rounding can, so every threshold
  whose margin is within reach of the rounding is crossed by some neighbour.
- Drift: a move of d changes a depth or a separation by at most d, a point on the sphere or the
  arena by at most ~2.1 d (the edge-corrected point), a contact normal by at most 2 d / (r - 10 UU),
  so a neighbour at distance d is matched within VALUE_TOL + 3 d and NORMAL_TOL + 0.03 d / UU (for a
  contact closer than the lever, both times its scale, as its drift grows as 1 / dist too). A
  ray's hit fraction has no such bound (it grows as 1 / sin of the grazing angle), so a tied ray's
  fraction must lie in the range its neighbours span.
- Near-equal candidates: two depths within 2 VALUE_TOL tie; two manifold areas |u x v|^2 tie when
  their |u x v| are within the bound that errors of VALUE_TOL (times the lever scale) in each offset
  coordinate allow; two box axes tie when their separations are within 2 VALUE_TOL.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh import ArenaMesh, cell_candidates
from nitro.envs.soccar.box_contacts import box_contacts, box_triangle_axes
from nitro.envs.soccar.contacts import MAX_NEW_CONTACTS, PLANE_OBJECT_BASE, ContactManifolds
from nitro.envs.soccar.internal_edge import adjust_internal_edge_contacts
from nitro.envs.soccar.kernels.box_contacts import launch_box_contacts
from nitro.envs.soccar.kernels.manifolds import launch_sphere_manifolds
from nitro.envs.soccar.kernels.ray_cast import launch_ray_cast
from nitro.envs.soccar.manifolds import sphere_manifolds
from nitro.envs.soccar.ray_cast import ray_cast, ray_triangle_fraction
from nitro.envs.soccar.sphere_contacts import sphere_contacts, sphere_triangle_contact

ULP = 2.0**-11
VALUE_TOL = 16 * ULP
NORMAL_TOL = 2e-4
DELTA = 16 * ULP
SCALES = (1.0, 0.5, 0.25)
POSITION_DRIFT = 3.0  # UU per UU of input move
NORMAL_DRIFT = 0.03  # per UU of input move
MAX_TIE_FRACTION = 0.01
"""A check also fails when more of its queries are ties (2 are always allowed, for small samples):
on the random queries of `check_queries` they are a few per thousand (mostly balls pressed 5-10 UU
into finely meshed surfaces)."""
MAX_OUTCOMES = 4096  # tied manifold reductions followed at once, per query, before giving up
LEVER = 80.0
"""UU: the distance from a ball's centre to a triangle contact that VALUE_TOL and NORMAL_TOL assume
(r - 10 UU: a ball sinks 10 UU at most in play). A contact whose centre is closer has its offset,
point and normal compared within those tolerances times `lever_scale`."""
_MIN_LEVER = math.sqrt(C.SIMD_EPSILON_UU2)  # UU: below it Bullet takes the face normal (no 1 / dist)


def lever_scale(radius: float, depth: torch.Tensor, on_triangle: torch.Tensor) -> torch.Tensor:
    """The condition number of a triangle contact's offset, point and normal, relative to the one
    VALUE_TOL and NORMAL_TOL assume: max(1, LEVER / dist), dist = radius + depth the centre's distance
    to the contact point (1 for a plane contact, whose offset is exactly -radius * plane normal).

    Bullet's normal is (centre - p) / dist with p the closest point on the triangle, and the offset
    p + normal * depth - centre is -radius * normal: an error e of p (the rounding of arena
    coordinates) turns the normal by e / dist and moves the offset, and the edge-corrected point
    made from it, by radius * e / dist."""
    dist = (radius + depth).clamp(min=_MIN_LEVER)
    return torch.where(on_triangle, (LEVER / dist).clamp(min=1.0), 1.0)


@dataclasses.dataclass
class Verdict:
    """The three classes of a kernel-vs-reference comparison over N queries."""

    agree: torch.Tensor
    """[N] bool: class 1."""
    tie: torch.Tensor
    """[N] bool: class 2."""
    unexplained: torch.Tensor
    """[N] bool: class 3."""
    errors: dict
    """Largest differences over the agreeing queries, per value (a sphere contact's offset, point and
    normal divided by its `lever_scale`, so they compare with the tolerances)."""
    capped: int = 0
    """Ties counted because the tied reductions outgrew MAX_OUTCOMES (not proven either way)."""
    examples: list = dataclasses.field(default_factory=list)
    """The first unexplained queries: index, input, reference's and kernel's answers (for debugging)."""

    def summary(self, name: str, **extra) -> dict:
        n = int(self.agree.numel())
        ties = int(self.tie.sum())
        bad = int(self.unexplained.sum())
        return {
            "check": name,
            "queries": n,
            **extra,
            "agree": int(self.agree.sum()),
            "ties": ties,
            "tie_fraction": ties / max(n, 1),
            "ties_capped": self.capped,
            "unexplained": bad,
            "unexplained_examples": self.examples,
            **{f"max_{k}": v for k, v in self.errors.items()},
            "tolerances": {
                "value_uu": VALUE_TOL,
                "normal": NORMAL_TOL,
                "neighbour_move_uu": DELTA,
                "max_tie_fraction": MAX_TIE_FRACTION,
            },
            "passed": bad == 0 and ties <= max(2, MAX_TIE_FRACTION * n),
        }


def _neighbour_moves(device) -> list[tuple[float, torch.Tensor]]:
    """(distance, move [3]) for the 18 axis moves."""
    moves = []
    for s in SCALES:
        for axis in range(3):
            for sign in (1.0, -1.0):
                v = torch.zeros(3, device=device)
                v[axis] = sign * s * DELTA
                moves.append((s * DELTA, v))
    return moves


def _max_over(x: torch.Tensor, mask: torch.Tensor) -> float:
    return float(x[mask].max()) if bool(mask.any()) else 0.0


def _examples(unexplained: torch.Tensor, inputs: dict, ref, ker, limit: int = 3) -> list[dict]:
    """The first ``limit`` unexplained queries, as plain lists: their inputs and both answers."""

    def row(obj, i):
        return {
            f.name: getattr(obj, f.name)[i].tolist() for f in dataclasses.fields(obj)
        }  # sync-ok: verification, off the hot path

    return [
        {
            "index": i,
            **{k: v[i].tolist() for k, v in inputs.items()},  # sync-ok: verification, off the hot path
            "reference": row(ref, i),
            "kernel": row(ker, i),
        }
        for i in unexplained.nonzero().flatten()[:limit].tolist()  # sync-ok: verification, off the hot path
    ]


def _rows(obj, rows: torch.Tensor):
    """The dataclass ``obj`` of [N, ...] tensors restricted to ``rows``."""
    return type(obj)(**{f.name: getattr(obj, f.name)[rows] for f in dataclasses.fields(obj)})


# --- sphere manifolds -------------------------------------------------------------------------------


def _sphere_match(ref: ContactManifolds, ker: ContactManifolds, radius: float, pos_tol, normal_tol):
    """[N] bool: same objects and counts, every held value within tolerance (offsets, points and
    normals within it times their `lever_scale`); and the per-lane errors (those three divided by
    their lever scale, so they compare with the tolerances)."""
    held = ref.held()
    same = (ref.object == ker.object).all(1) & (ref.count == ker.count).all(1)
    on_triangle = ((ref.object >= 0) & (ref.object < PLANE_OBJECT_BASE))[..., None]
    scale = lever_scale(radius, ref.depth, on_triangle)
    err = {}
    for name in ("offset", "point", "depth", "normal"):
        d = (getattr(ref, name) - getattr(ker, name)).abs()
        d = d.amax(-1) if d.dim() == 4 else d
        d = d if name == "depth" else d / scale
        err[name] = torch.where(held, d, 0.0).amax((1, 2))
    ok = same & (err["offset"] <= pos_tol) & (err["point"] <= pos_tol) & (err["depth"] <= pos_tol)
    return ok & (err["normal"] <= normal_tol), err


def _replace_choices(held_offset, held_depth, new_offset, new_depth, pos_tol, held_tol, new_tol) -> set[int]:
    """Every point `sort_cached_points` may drop when its near-equal depths (within
    ``pos_tol``) and areas (within what errors of ``held_tol`` / ``new_tol`` per offset coordinate
    allow) go either way. Plain float64 Python (tuples of 3 floats): this runs thousands of times
    per tied query."""
    depths = (new_depth, *held_depth)
    lowest = min(depths)
    deepest_options = [j - 1 for j in range(5) if depths[j] <= lowest + 2 * pos_tol]
    p0, p1, p2, p3 = held_offset
    a = new_offset

    def sub(u, v):
        return (u[0] - v[0], u[1] - v[1], u[2] - v[2])

    def norm(u):
        return math.sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2])

    t0, t1, t2, t3 = held_tol
    length, bound = [], []
    for u, v, tu, tv in (
        (sub(a, p1), sub(p3, p2), new_tol + t1, t3 + t2),
        (sub(a, p0), sub(p3, p2), new_tol + t0, t3 + t2),
        (sub(a, p0), sub(p3, p1), new_tol + t0, t3 + t1),
        (sub(a, p0), sub(p2, p1), new_tol + t0, t2 + t1),
    ):
        c = (u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0])
        length.append(norm(c))
        # |u x v| moves by at most |du| |v| + |u| |dv| + |du| |dv|, |du| <= sqrt(3) tu
        bound.append(math.sqrt(3) * (tu * norm(v) + tv * norm(u)) + 3 * tu * tv)
    choices = set()
    for deepest in deepest_options:
        lk, bk = list(length), list(bound)
        if deepest >= 0:
            lk[deepest], bk[deepest] = 0.0, 0.0
        best = max(range(4), key=lambda i: (lk[i], -i))
        choices |= {i for i in range(4) if lk[i] + bk[i] >= lk[best] - bk[best]}
    return choices


def _manifold_outcomes(obj, offset, depth, count, pos_tol, offset_tol):
    """Every manifold `build_manifolds` can build from one query's contacts (Bullet's order)
    when its tied decisions go either way: a set of 4 slots (object, contact indices), or None past
    MAX_OUTCOMES. Contacts of one object with the same offset and depth (within ``offset_tol`` [K],
    each contact's, and ``pos_tol``; several triangles touching at a shared vertex) are
    interchangeable in every decision, so each is represented by the first of them."""
    n = min(int(count), len(obj))
    points = [tuple(float(x) for x in offset[k]) for k in range(n)]
    depths = [float(x) for x in depth[:n]]
    tols = [float(x) for x in offset_tol[:n]]
    rep = list(range(n))
    for k in range(n):
        for j in range(k):
            if (
                rep[j] == j
                and obj[j] == obj[k]
                and abs(depths[j] - depths[k]) <= pos_tol
                and max(abs(points[j][i] - points[k][i]) for i in range(3)) <= max(tols[j], tols[k])
            ):
                rep[k] = j
                break
    empty = (-1, ())
    states = {(empty, empty, empty, empty)}
    for k in range(n):
        grown = set()
        for state in states:
            slot = next((s for s in range(4) if state[s][0] == obj[k]), None)
            if slot is None:
                slot = next((s for s in range(4) if state[s][0] < 0), None)
            if slot is None:  # no free slot: Bullet ignores the object
                grown.add(state)
                continue
            held = state[slot][1]
            if len(held) < 4:
                options = [(*held, rep[k])]
            else:
                options = [
                    tuple(rep[k] if i == r else p for i, p in enumerate(held))
                    for r in _replace_choices(
                        [points[p] for p in held],
                        [depths[p] for p in held],
                        points[k],
                        depths[k],
                        pos_tol,
                        [tols[p] for p in held],
                        tols[k],
                    )
                ]
            for pts in options:
                grown.add(tuple((int(obj[k]), pts) if s == slot else state[s] for s in range(4)))
        states = grown
        if len(states) > MAX_OUTCOMES:
            return None, rep
    return states, rep


def _edge_alternatives(mesh, centers, contacts, radius, gap):
    """Each contact's (normal, point) for every edge its internal-edge correction may test: the
    nearest edge with a neighbour, or any edge within 2 VALUE_TOL of it (a contact at a vertex is at
    distance 0 from two edges, and the rounding picks one). Returns normals and points [R, K, 4, 3]
    and valid [R, K, 4]; alternative 0 is the contact as the reference made it."""
    r, k = contacts.object.shape
    num_tris = mesh.num_triangles
    on_tri = (contacts.feature >= 0) & (contacts.feature < num_tris)
    ids = contacts.feature.clamp(0, num_tris - 1).long()
    v = mesh.tri_verts[ids]
    v0, v1, v2 = v[..., 0, :], v[..., 1, :], v[..., 2, :]
    c = centers[:, None, :].expand(r, k, 3)
    _, point, geo_normal, depth = sphere_triangle_contact(c, v0, v1, v2, radius, gap)
    seg_a, seg_b = torch.stack((v0, v1, v2), -2), torch.stack((v1, v2, v0), -2)
    delta = seg_b - seg_a
    t = ((point[..., None, :] - seg_a) * delta).sum(-1) / (delta * delta).sum(-1)
    dist = (point[..., None, :] - (seg_a + t.clamp(0, 1)[..., None] * delta)).norm(dim=-1)
    has_neighbour = mesh.edge_angle[ids].abs() < C.INTERNAL_EDGE_MAX_ANGLE
    nearest = torch.where(has_neighbour, dist, math.inf).amin(-1, keepdim=True)
    tied = has_neighbour & (dist <= nearest + 2 * VALUE_TOL) & on_tri[..., None]
    normals, points, valid = [contacts.normal], [contacts.point], [torch.ones_like(on_tri)]
    for e in range(3):
        normal, changed = adjust_internal_edge_contacts(
            geo_normal,
            point,
            v0,
            v1,
            v2,
            mesh.tri_normals[ids],
            mesh.edge_angle[ids],
            mesh.edge_flags[ids],
            forced_edge=torch.full((r, k), e, device=centers.device),
        )
        normals.append(normal)
        points.append(
            torch.where(changed[..., None], (c + contacts.offset) - normal * depth[..., None], point)
        )
        valid.append(tied[..., e])
    return torch.stack(normals, 2), torch.stack(points, 2), torch.stack(valid, 2)


def _search_sphere(mesh, centers, radius, gap, ker, pos_tol, normal_tol):
    """For each query: is the kernel's manifold one of the tied outcomes of the reference's contacts
    at ``centers`` (each contact with any of its `_edge_alternatives`)? ([R] found, [R] capped)."""
    contacts = sphere_contacts(mesh, centers, radius, gap, MAX_NEW_CONTACTS)
    alt_normal, alt_point, alt_valid = _edge_alternatives(mesh, centers, contacts, radius, gap)
    on_triangle = (contacts.feature >= 0) & (contacts.feature < mesh.num_triangles)
    scale = lever_scale(radius, contacts.depth, on_triangle)

    def host(x):
        return (
            x.double().cpu().numpy() if x.is_floating_point() else x.cpu().numpy()
        )  # sync-ok: verification, off the hot path

    c_obj, c_count, c_off, c_dep = (
        host(x) for x in (contacts.object, contacts.count, contacts.offset, contacts.depth)
    )
    a_n, a_p, a_ok, c_scale = host(alt_normal), host(alt_point), host(alt_valid), host(scale)
    k_obj, k_cnt, k_off, k_pt, k_n, k_dep = (
        host(x) for x in (ker.object, ker.count, ker.offset, ker.point, ker.normal, ker.depth)
    )
    found = np.zeros(len(c_obj), bool)
    capped = np.zeros(len(c_obj), bool)
    for i in range(len(c_obj)):
        outcomes, rep = _manifold_outcomes(
            c_obj[i], c_off[i], c_dep[i], c_count[i], pos_tol, pos_tol * c_scale[i]
        )
        if outcomes is None:
            capped[i] = True
            continue
        n = len(rep)

        def holds(p, s, j, i=i, rep=rep, n=n):
            """Kernel point (s, j) is contact p's class: one member, one of its alternatives."""
            for m in range(n):
                if rep[m] != p:
                    continue
                lever = c_scale[i, m]
                if (
                    abs(c_dep[i, m] - k_dep[i, s, j]) > pos_tol
                    or np.abs(c_off[i, m] - k_off[i, s, j]).max() > pos_tol * lever
                ):
                    continue
                fits = (
                    a_ok[i, m]
                    & (np.abs(a_n[i, m] - k_n[i, s, j]).max(-1) <= normal_tol * lever)
                    & (np.abs(a_p[i, m] - k_pt[i, s, j]).max(-1) <= pos_tol * lever)
                )
                if fits.any():
                    return True
            return False

        for state in outcomes:
            if all(
                state[s][0] == k_obj[i, s]
                and len(state[s][1]) == k_cnt[i, s]
                and all(holds(p, s, j) for j, p in enumerate(state[s][1]))
                for s in range(4)
            ):
                found[i] = True
                break
    dev = centers.device
    return torch.from_numpy(found).to(dev), torch.from_numpy(capped).to(dev)


def compare_sphere_manifolds(
    mesh: ArenaMesh, centers: torch.Tensor, radius: float, gap: float, ker: ContactManifolds
) -> Verdict:
    """Classify the kernel's manifolds ``ker`` of spheres at ``centers`` against the reference."""
    ref = sphere_manifolds(mesh, centers, radius, gap, use_kernels=False)
    agree, err = _sphere_match(ref, ker, radius, VALUE_TOL, NORMAL_TOL)
    tie = torch.zeros_like(agree)
    capped = torch.zeros_like(agree)
    rows = (~agree).nonzero().flatten()
    if rows.numel():
        kin = _rows(ker, rows)
        found, cap = _search_sphere(mesh, centers[rows], radius, gap, kin, VALUE_TOL, NORMAL_TOL)
        moves = _neighbour_moves(centers.device)
        for d, move in moves:  # thresholds: the strict answer at a neighbour
            near = sphere_manifolds(mesh, centers[rows] + move, radius, gap, use_kernels=False)
            pos_tol, normal_tol = VALUE_TOL + POSITION_DRIFT * d, NORMAL_TOL + NORMAL_DRIFT * d
            found |= _sphere_match(near, kin, radius, pos_tol, normal_tol)[0]
        for d, move in moves:  # both at once: a tied outcome at a neighbour
            left = (~found).nonzero().flatten()
            if not left.numel():
                break
            pos_tol, normal_tol = VALUE_TOL + POSITION_DRIFT * d, NORMAL_TOL + NORMAL_DRIFT * d
            hit, more = _search_sphere(
                mesh, centers[rows[left]] + move, radius, gap, _rows(kin, left), pos_tol, normal_tol
            )
            found[left] |= hit
            cap[left] |= more & ~hit
        tie[rows] = found | cap
        capped[rows] = cap & ~found
    errors = {f"{k}_error": _max_over(v, agree) for k, v in err.items()}
    bad = ~agree & ~tie
    examples = _examples(bad, {"center": centers}, ref, ker)
    return Verdict(
        agree=agree, tie=tie, unexplained=bad, errors=errors, capped=int(capped.sum()), examples=examples
    )


# --- ray casts ----------------------------------------------------------------------------------


def _ray_discrete_match(ref, ker, normal_tol):
    same = (ref.hit == ker.hit) & (ref.feature == ker.feature)
    return same & ((ref.normal - ker.normal).abs().amax(-1) <= normal_tol)


def _ray_equivalent(mesh, start, end, ker, tol, normal_tol):
    """[R] bool: the kernel's hit is the reference's up to near-equal candidates: any feature the
    reference's segment meets at a fraction within 2 ``tol`` (UU along the segment) of the nearest
    one (two coplanar triangles both count a hit on their shared edge within Bullet's tolerance, at
    fractions equal in exact arithmetic), with the kernel's fraction and that feature's normal."""
    r = start.shape[0]
    ids, valid = cell_candidates(mesh, start)
    v = mesh.tri_verts[ids]
    hit, fraction, normal = ray_triangle_fraction(
        start[:, None, :], end[:, None, :], v[..., 0, :], v[..., 1, :], v[..., 2, :]
    )
    hit = hit & valid
    da = start @ mesh.plane_normals.T - mesh.plane_offsets
    db = end @ mesh.plane_normals.T - mesh.plane_offsets
    p_hit = da * db < 0
    p_fraction = torch.where(p_hit, da / torch.where(p_hit, da - db, 1), 1.0)
    p_normal = torch.where((da <= 0)[..., None], -mesh.plane_normals, mesh.plane_normals)
    plane_ids = mesh.num_triangles + torch.arange(mesh.num_planes, device=start.device).expand(r, -1)
    hit, fraction = torch.cat((hit, p_hit), 1), torch.cat((fraction, p_fraction), 1)
    feature, normal = torch.cat((ids, plane_ids), 1), torch.cat((normal, p_normal), 1)
    length = (end - start).norm(dim=1, keepdim=True).clamp(min=1e-6)
    nearest = torch.where(hit, fraction, math.inf).amin(1, keepdim=True)
    tied = hit & ((fraction - nearest) * length <= 2 * tol)
    fits = (
        tied
        & (feature == ker.feature[:, None])
        & ((fraction - ker.fraction[:, None]).abs() * length <= tol)
        & ((normal - ker.normal[:, None, :]).abs().amax(-1) <= normal_tol)
    )
    return torch.where(ker.hit, fits.any(1), ~hit.any(1))


def compare_ray_cast(mesh: ArenaMesh, start: torch.Tensor, end: torch.Tensor, ker) -> Verdict:
    """Classify the kernel's ray hits ``ker`` (`contacts.RayHits`) against the reference."""
    ref = ray_cast(mesh, start, end, use_kernels=False)
    length = (end - start).norm(dim=1).clamp(min=1e-6)
    f_err = (ref.fraction - ker.fraction).abs()
    n_err = (ref.normal - ker.normal).abs().amax(-1)
    agree = _ray_discrete_match(ref, ker, NORMAL_TOL) & (f_err * length <= VALUE_TOL)
    tie = torch.zeros_like(agree)
    rows = (~agree).nonzero().flatten()
    if rows.numel():
        s, e = start[rows], end[rows]
        kin = _rows(ker, rows)
        found = _ray_equivalent(mesh, s, e, kin, VALUE_TOL, NORMAL_TOL)
        lo = torch.full((rows.numel(),), math.inf, device=start.device)
        hi = -lo
        matched = torch.zeros(rows.numel(), dtype=torch.bool, device=start.device)
        for d, move in _neighbour_moves(start.device):
            for s2, e2 in ((s + move, e + move), (s + move, e), (s, e + move)):
                near = ray_cast(mesh, s2, e2, use_kernels=False)
                ok = _ray_discrete_match(near, kin, NORMAL_TOL)
                matched |= ok
                lo = torch.where(ok, torch.minimum(lo, near.fraction), lo)
                hi = torch.where(ok, torch.maximum(hi, near.fraction), hi)
                found |= _ray_equivalent(mesh, s2, e2, kin, VALUE_TOL + d, NORMAL_TOL)
        # the reference's own fraction counts as one end of the range
        ok = _ray_discrete_match(_rows(ref, rows), kin, NORMAL_TOL)
        lo = torch.where(ok, torch.minimum(lo, ref.fraction[rows]), lo)
        hi = torch.where(ok, torch.maximum(hi, ref.fraction[rows]), hi)
        slack = VALUE_TOL / length[rows]
        found |= (matched | ok) & (kin.fraction >= lo - slack) & (kin.fraction <= hi + slack)
        tie[rows] = found
    errors = {
        "fraction_error": _max_over(f_err, agree),
        "hit_point_error_uu": _max_over(f_err * length, agree),
        "normal_error": _max_over(n_err, agree),
    }
    bad = ~agree & ~tie
    examples = _examples(bad, {"start": start, "end": end}, ref, ker)
    return Verdict(agree=agree, tie=tie, unexplained=bad, errors=errors, examples=examples)


# --- box contacts -------------------------------------------------------------------------------


def _box_match(ref, ker, depth_tol, normal_tol):
    held = ref.feature >= 0
    same = (ref.count == ker.count) & (ref.feature == ker.feature).all(1)
    depth = torch.where(held, (ref.depth - ker.depth).abs(), 0.0).amax(1)
    normal = torch.where(held, (ref.normal - ker.normal).abs().amax(-1), 0.0).amax(1)
    return same & (depth <= depth_tol) & (normal <= normal_tol), depth, normal


def _box_equivalent(mesh, centers, axes, half, ref, ker, depth_tol, normal_tol):
    """[R] bool: the kernel's contacts are the reference's up to near-equal candidates: the same
    count, the same sorted depths, and each kernel feature has the kernel's depth in the reference,
    along one of its near-tied separating axes (so the order of equal depths, which of equal depths
    is kept last, and which of near-parallel axes is taken may differ)."""
    r, k = ker.feature.shape
    slot = ker.feature >= 0
    distinct = torch.ones(r, dtype=torch.bool, device=centers.device)
    for i in range(k):
        for j in range(i + 1, k):
            distinct &= ~(slot[:, i] & slot[:, j] & (ker.feature[:, i] == ker.feature[:, j]))
    same = (ref.count == ker.count) & (slot == (ref.feature >= 0)).all(1) & distinct
    sorted_depths = torch.where(slot, (ref.depth - ker.depth).abs(), 0.0).amax(1) <= depth_tol
    # every separating-axis candidate of each kernel feature, at the query's box
    num_tris = mesh.num_triangles
    tri = ker.feature.clamp(0, num_tris - 1).long()
    v = mesh.tri_verts[tri]  # [R, K, 3, 3]
    half = half.expand(r, 3)
    sep, axis = box_triangle_axes(
        centers[:, None], axes[:, None], half[:, None], v[..., 0, :], v[..., 1, :], v[..., 2, :]
    )  # [R, K, 13], [R, K, 13, 3]
    plane = (ker.feature >= num_tris) & slot
    p = (ker.feature - num_tris).clamp(0, mesh.num_planes - 1).long()
    pn = mesh.plane_normals[p]  # [R, K, 3]
    p_radius = (torch.einsum("rij,rki->rkj", axes, pn).abs() * half[:, None]).sum(-1)
    p_sep = (centers[:, None] * pn).sum(-1) - mesh.plane_offsets[p] - p_radius
    only_plane = torch.cat([p_sep[..., None], torch.full_like(sep[..., 1:], -math.inf)], -1)
    sep = torch.where(plane[..., None], only_plane, sep)
    axis = torch.where(plane[..., None, None], pn[..., None, :].expand_as(axis), axis)
    best = sep.amax(-1)
    tied = sep >= best[..., None] - 2 * depth_tol
    along = (axis - ker.normal[..., None, :]).abs().amax(-1) <= normal_tol
    per_slot = ((best - ker.depth).abs() <= depth_tol) & (tied & along).any(-1)
    return same & sorted_depths & (per_slot | ~slot).all(1)


def compare_box_contacts(
    mesh: ArenaMesh,
    centers: torch.Tensor,
    axes: torch.Tensor,
    half_extents: torch.Tensor,
    gap: float,
    max_contacts: int,
    ker,
) -> Verdict:
    """Classify the kernel's box contacts ``ker`` (`contacts.BoxContacts`) against the reference."""
    ref = box_contacts(mesh, centers, axes, half_extents, gap, max_contacts, use_kernels=False)
    agree, depth, normal = _box_match(ref, ker, VALUE_TOL, NORMAL_TOL)
    tie = torch.zeros_like(agree)
    rows = (~agree).nonzero().flatten()
    if rows.numel():
        kin = _rows(ker, rows)
        half = half_extents if half_extents.dim() == 1 else half_extents[rows]
        c, a = centers[rows], axes[rows]
        found = _box_equivalent(mesh, c, a, half, _rows(ref, rows), kin, VALUE_TOL, NORMAL_TOL)
        for d, move in _neighbour_moves(centers.device):
            near = box_contacts(mesh, c + move, a, half, gap, max_contacts, use_kernels=False)
            found |= _box_match(near, kin, VALUE_TOL + d, NORMAL_TOL)[0]
            found |= _box_equivalent(mesh, c + move, a, half, near, kin, VALUE_TOL + d, NORMAL_TOL)
        tie[rows] = found
    errors = {"depth_error": _max_over(depth, agree), "normal_error": _max_over(normal, agree)}
    bad = ~agree & ~tie
    examples = _examples(bad, {"center": centers, "axes": axes}, ref, ker)
    return Verdict(agree=agree, tie=tie, unexplained=bad, errors=errors, examples=examples)


# --- the queries a check runs -------------------------------------------------------------------


OCTANE_HALF_EXTENTS = (60.25, 43.35, 19.33)  # UU, a car body's size (the next issue's box queries)


def query_points(mesh: ArenaMesh, n: int, seed: int, lo: float, hi: float) -> torch.Tensor:
    """n points at a distance U(lo, hi) along the normal of random triangles (every part of the
    mesh), then n // 2 points anywhere in the arena's box: [n + n // 2, 3] float32 on the CPU."""
    rng = np.random.default_rng(seed)
    tri = rng.integers(0, mesh.num_triangles, n)
    bary = rng.random((n, 2))
    bary = np.where(bary.sum(1, keepdims=True) > 1, 1 - bary, bary)
    v = mesh.tri_verts.cpu()[tri].numpy()  # sync-ok: verification, off the hot path
    on = v[:, 0] + bary[:, :1] * (v[:, 1] - v[:, 0]) + bary[:, 1:] * (v[:, 2] - v[:, 0])
    near = on + mesh.tri_normals.cpu()[tri].numpy() * rng.uniform(
        lo, hi, (n, 1)
    )  # sync-ok: verification, off the hot path
    anywhere = rng.uniform((-4200, -6100, -50), (4200, 6100, 2100), (n // 2, 3))
    return torch.from_numpy(np.concatenate([near, anywhere]).astype(np.float32))


def check_sphere_manifolds(mesh: ArenaMesh, n: int, seed: int = 0) -> dict:
    """The sphere kernel on n balls 10 UU deep to 2 UU beyond the gap from random triangles (a ball
    never sinks more than ~10 UU: one tick of travel at 1200 UU/s, less the recovery) and n // 2
    anywhere: its `Verdict.summary`."""
    r, gap = C.BALL_COLLISION_RADIUS_SOCCAR, C.BALL_CONTACT_BREAKING_THRESHOLD
    centers = query_points(mesh, n, seed, r - 10.0, r + gap + 2.0).to(mesh.device)
    ker = launch_sphere_manifolds(mesh, centers, r, gap)
    verdict = compare_sphere_manifolds(mesh, centers, r, gap, ker)
    return verdict.summary("sphere_manifolds", touching=int((ker.count.sum(1) > 0).sum()))


def check_ray_cast(mesh: ArenaMesh, n: int, seed: int = 0) -> dict:
    """The ray kernel on n rays from 0-60 UU off random triangles and n // 2 from anywhere, 10 UU
    to the grid's query radius long, in random directions: its `Verdict.summary`."""
    rng = np.random.default_rng(seed + 1)
    start = query_points(mesh, n, seed + 1, 0.0, 60.0)
    direction = torch.from_numpy(rng.normal(size=(len(start), 3)).astype(np.float32))
    length = torch.from_numpy(rng.uniform(10, mesh.query_radius, (len(start), 1)).astype(np.float32))
    end = (start + direction / direction.norm(dim=1, keepdim=True) * length).to(mesh.device)
    start = start.to(mesh.device)
    hits = launch_ray_cast(mesh, start, end)
    return compare_ray_cast(mesh, start, end, hits).summary("ray_cast", hits=int(hits.hit.sum()))


def check_box_contacts(mesh: ArenaMesh, n: int, seed: int = 0) -> dict:
    """The box kernel on n car-sized boxes in random orientations 0-40 UU off random triangles and
    n // 2 anywhere: its `Verdict.summary`."""
    centers = query_points(mesh, n, seed + 2, 0.0, 40.0).to(mesh.device)
    axes = random_rotations(len(centers), seed + 3).to(mesh.device)
    half = torch.tensor(OCTANE_HALF_EXTENTS, device=mesh.device)
    boxes = launch_box_contacts(mesh, centers, axes, half, 2.0, 8)
    verdict = compare_box_contacts(mesh, centers, axes, half, 2.0, 8, boxes)
    return verdict.summary("box_contacts", touching=int((boxes.count > 0).sum()))


def check_queries(mesh: ArenaMesh, n: int, seed: int = 0) -> list[dict]:
    """The three query checks, n + n // 2 queries each."""
    return [check(mesh, n, seed) for check in (check_sphere_manifolds, check_ray_cast, check_box_contacts)]


def random_rotations(n: int, seed: int) -> torch.Tensor:
    """n uniformly random rotation matrices [n, 3, 3] float32 on the CPU (from unit quaternions)."""
    q = np.random.default_rng(seed).normal(size=(n, 4))
    w, x, y, z = (q / np.linalg.norm(q, axis=1, keepdims=True)).T
    m = np.stack(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
    return torch.from_numpy(np.moveaxis(m, -1, 0).astype(np.float32))
