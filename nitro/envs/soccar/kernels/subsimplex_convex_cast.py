"""btSubsimplexConvexCast per lane: the twin of `subsimplex_convex_cast.py` (a ray against a convex
shape, Bullet's GJK ray cast), the same functions in the same order, with the btVoronoiSimplexSolver it
runs (`kernels/gjk_pair_detector.py`).

A shape is (is_sphere, origin, basis, half, margin) in Bullet units: a car's box (``half`` its inner
half extents, the margin added by its support, ``basis`` its rotation's rows) or the ball (a point
grown by ``margin``, its radius; ``basis`` and ``half`` unused); ``is_sphere`` may differ per call
(a runtime value), so one copy of the cast serves both. The loop runs while some lane of the program
is still casting (the reference stops once no lane is).

Where the cast stops turns on the last ulp of its tests, and a step more or less moves a hit by up to
0.25 BT (measured on an H200 against the reference: 30% of 4,096 rays at balls and 15% at boxes
moved by more than 1e-5 of their length with the GPU's default rounding). So its divisions and square
roots round as IEEE's do (`tl.sqrt_rn`, `quotient`, and the simplex solver's), and the pass that casts
(the pre-tick's second, `kernels/arena.UNFUSED_PASSES`) compiles without contracting multiply-adds:
the GPU's hits then equal the reference's to the bit.
"""

from __future__ import annotations

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.kernels import constexpr, jit, tl
from nitro.envs.soccar.kernels.gjk_pair_detector import add_vertex, closest, in_simplex, quotient, simplex_empty
from nitro.envs.soccar.kernels.rigid_body import mat_vec, vec_mat
from nitro.envs.soccar.kernels.vec import add, dot, scale, sub, where
from nitro.envs.soccar.subsimplex_convex_cast import MAX_CONVEX_CAST_EPSILON as _EPSILON
from nitro.envs.soccar.subsimplex_convex_cast import MAX_CONVEX_CAST_ITERATIONS as _ITERATIONS
from nitro.envs.soccar.subsimplex_convex_cast import NORMAL_MIN_LENGTH2 as _NORMAL_MIN_LENGTH2

MAX_CONVEX_CAST_ITERATIONS = constexpr(_ITERATIONS)
MAX_CONVEX_CAST_EPSILON = constexpr(_EPSILON)
NORMAL_MIN_LENGTH2 = constexpr(_NORMAL_MIN_LENGTH2)
SIMD_EPSILON = constexpr(C.SIMD_EPSILON)


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
        lam = tl.where(advance, lam - quotient(v_dot_w, tl.where(advance, v_dot_r, -1.0), True), lam)
        x = where(advance, add(scale(start, 1.0 - lam), scale(end, lam)), x)  # setInterpolate3
        n = where(advance, v, n)
        # w keeps the support points found before the advance, as Bullet's does
        added = active & (~in_simplex(simplex, w))
        simplex = add_vertex(simplex, added, w, sup_a, sup_b)
        simplex, valid = closest(simplex, added, True)
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
    return scale(v, quotient(1.0, tl.sqrt_rn(dot(v, v)), True))
