"""The kernels' sphere-vs-triangle contact (RocketSim's SphereTriangleDetector): the twin of
`sphere_contacts.py`. The planes and the walk over a cell's triangles are in
`kernels/manifolds.sphere_manifolds`, which files each contact as it is found."""

from __future__ import annotations

from nitro.envs.soccar.kernels import jit, tl
from nitro.envs.soccar.kernels.vec import add, cross, dot, neg, scale, sub, where


@jit
def closest_point_triangle(p, a, b, c):
    """closestPointTriangle of RocketSim's SphereTriangleDetector (Ericson)."""
    ab = sub(b, a)
    ac = sub(c, a)
    d1 = dot(ab, sub(p, a))
    d2 = dot(ac, sub(p, a))
    d3 = dot(ab, sub(p, b))
    d4 = dot(ac, sub(p, b))
    d5 = dot(ab, sub(p, c))
    d6 = dot(ac, sub(p, c))
    va = d3 * d6 - d5 * d4
    vb = d5 * d2 - d1 * d6
    vc = d1 * d4 - d3 * d2
    denom = 1.0 / (va + vb + vc)
    out = add(add(a, scale(ab, vb * denom)), scale(ac, vc * denom))  # region 0: the face
    # Later regions in Bullet's if-chain are overridden by earlier ones: apply them last-first.
    m6 = (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0)
    out = where(m6, add(b, scale(sub(c, b), (d4 - d3) / tl.where(m6, (d4 - d3) + (d5 - d6), 1.0))), out)
    m5 = (vb <= 0) & (d2 >= 0) & (d6 <= 0)
    out = where(m5, add(a, scale(ac, d2 / tl.where(m5, d2 - d6, 1.0))), out)
    m4 = (vc <= 0) & (d1 >= 0) & (d3 <= 0)
    out = where(m4, add(a, scale(ab, d1 / tl.where(m4, d1 - d3, 1.0))), out)
    out = where((d6 >= 0) & (d5 <= d6), c, out)
    out = where((d3 >= 0) & (d4 <= d3), b, out)
    return where((d1 <= 0) & (d2 <= 0), a, out)


@jit
def sphere_triangle_contact(
    center, v0, v1, v2, radius, reach, DEGENERATE_L2: tl.constexpr, SIMD_EPSILON: tl.constexpr
):
    """SphereTriangleDetector::collide of the sphere at ``center`` (``reach`` = radius + gap) with
    triangle (v0, v1, v2): (has_contact, point on the triangle, normal into the sphere, depth)."""
    e1 = sub(v1, v0)
    e2 = sub(v2, v0)
    face_n = cross(e1, e2)
    l2 = dot(face_n, face_n)
    n = scale(face_n, 1.0 / tl.sqrt(tl.where(l2 > 0, l2, 1.0)))
    w = sub(center, v0)
    plane_dist = dot(w, n)
    n = where(plane_dist < 0, neg(n), n)  # the triangle is two-sided
    plane_dist = tl.abs(plane_dist)
    # facecontains: barycentric coordinates of the centre's projection all in [0, 1]
    l2s = tl.where(l2 > 0, l2, 1.0)
    gamma = dot(cross(e1, w), face_n) / l2s
    beta = dot(cross(w, e2), face_n) / l2s
    alpha = 1 - gamma - beta
    inside = (alpha >= 0) & (alpha <= 1) & (beta >= 0) & (beta <= 1) & (gamma >= 0) & (gamma <= 1)
    point = where(inside, sub(center, scale(n, plane_dist)), closest_point_triangle(center, v0, v1, v2))
    to_centre = sub(center, point)
    dist2 = dot(to_centre, to_centre)
    has = (l2 >= DEGENERATE_L2) & (plane_dist < reach) & (dist2 < reach * reach)
    tiny = dist2 <= SIMD_EPSILON
    dist = tl.sqrt(dist2)
    normal = where(tiny, n, scale(to_centre, 1.0 / tl.where(tiny, 1.0, dist)))
    return has, point, normal, tl.where(tiny, -radius, dist - radius)
