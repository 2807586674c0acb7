"""Sphere-vs-arena contacts (the ball's): Bullet's SphereTriangleDetector against the mesh's
triangles, btConvexPlaneCollisionAlgorithm against RocketSim's planes, each triangle contact's normal
smoothed over internal edges (`internal_edge`), every feature in Bullet's order.

Reference: RocketSim (ZealanL/RocketSim, MIT) and its Bullet 3.24 (SphereTriangleDetector.cpp, with
RocketSim's changes). The tick files these contacts into manifolds (`manifolds.sphere_manifolds`);
the kernels' twin is `kernels/sphere_contacts.py`.
"""

from __future__ import annotations

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh import ArenaMesh, cell_candidates
from nitro.envs.soccar.contacts import PLANE_OBJECT_BASE, SphereContacts
from nitro.envs.soccar.internal_edge import adjust_internal_edge_contacts
from nitro.envs.soccar.vec import cross, dot


def closest_point_triangle(p, a, b, c):
    """closestPointTriangle of RocketSim's SphereTriangleDetector (Ericson), over [..., 3] tensors."""
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = dot(ab, ap), dot(ac, ap)
    bp = p - b
    d3, d4 = dot(ab, bp), dot(ac, bp)
    cp = p - c
    d5, d6 = dot(ab, cp), dot(ac, cp)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    denom = 1.0 / (va + vb + vc)
    out = a + (vb * denom)[..., None] * ab + (vc * denom)[..., None] * ac  # region 0: the face
    # Later regions in Bullet's if-chain are overridden by earlier ones: apply them last-first.
    m6 = (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0)
    out = torch.where(
        m6[..., None], b + ((d4 - d3) / torch.where(m6, (d4 - d3) + (d5 - d6), 1))[..., None] * (c - b), out
    )
    m5 = (vb <= 0) & (d2 >= 0) & (d6 <= 0)
    out = torch.where(m5[..., None], a + (d2 / torch.where(m5, d2 - d6, 1))[..., None] * ac, out)
    m4 = (vc <= 0) & (d1 >= 0) & (d3 <= 0)
    out = torch.where(m4[..., None], a + (d1 / torch.where(m4, d1 - d3, 1))[..., None] * ab, out)
    out = torch.where(((d6 >= 0) & (d5 <= d6))[..., None], c, out)
    out = torch.where(((d3 >= 0) & (d4 <= d3))[..., None], b, out)
    out = torch.where(((d1 <= 0) & (d2 <= 0))[..., None], a, out)
    return out


def sphere_triangle_contact(center, v0, v1, v2, radius: float, gap: float):
    """Bullet's SphereTriangleDetector::collide (RocketSim's variant), broadcast over [..., 3].

    Returns (has_contact [...], point on the triangle [..., 3], normal into the sphere [..., 3],
    depth = distance - radius [...]). ``gap`` is the contact breaking threshold.
    """
    reach = radius + gap
    e1, e2 = v1 - v0, v2 - v0
    face_n = cross(e1, e2)
    l2 = dot(face_n, face_n)
    n = face_n / torch.sqrt(l2)[..., None]
    w = center - v0
    plane_dist = dot(w, n)
    n = torch.where((plane_dist < 0)[..., None], -n, n)  # the triangle is two-sided
    plane_dist = plane_dist.abs()
    # facecontains: barycentric coordinates of the centre's projection all in [0, 1]
    gamma = dot(cross(e1, w), face_n) / l2
    beta = dot(cross(w, e2), face_n) / l2
    alpha = 1 - gamma - beta
    inside = (alpha >= 0) & (alpha <= 1) & (beta >= 0) & (beta <= 1) & (gamma >= 0) & (gamma <= 1)
    nearest = closest_point_triangle(center, v0, v1, v2)
    point = torch.where(inside[..., None], center - n * plane_dist[..., None], nearest)
    to_centre = center - point
    dist2 = dot(to_centre, to_centre)
    has = (l2 >= C.DEGENERATE_TRIANGLE_L2) & (plane_dist < reach) & (dist2 < reach * reach)
    dist = torch.sqrt(dist2)
    tiny = dist2 <= C.SIMD_EPSILON_UU2
    normal = torch.where(tiny[..., None], n, to_centre / torch.where(tiny, 1, dist)[..., None])
    depth = torch.where(tiny, -radius, dist - radius)
    return has, point, normal, depth


def check_reach(mesh: ArenaMesh, radius: float, gap: float) -> None:
    """A sphere query reads one grid cell: its reach must be within the grid's query radius."""
    if radius + gap > mesh.query_radius:
        raise ValueError(
            f"sphere reach radius + gap = {radius + gap} UU exceeds the grid's query radius "
            f"{mesh.query_radius} UU; load the mesh with a larger query_radius"
        )


def sphere_contacts(
    mesh: ArenaMesh, centers: torch.Tensor, radius: float, gap: float, max_contacts: int = 16
) -> SphereContacts:
    """Contacts of spheres [N, 3] (UU) of ``radius`` with every arena feature closer than ``gap``,
    in Bullet's order (the first ``max_contacts`` of them).

    The tick files them into Bullet's manifolds (`manifolds.sphere_manifolds`, which on CUDA runs
    both steps in one kernel); the unreduced list is also for inspection and tests, on any device.
    """
    check_reach(mesh, radius, gap)
    n = centers.shape[0]
    device = centers.device
    # Planes (btConvexPlaneCollisionAlgorithm): the sphere's support point against the plane.
    plane_depth = centers @ mesh.plane_normals.T - mesh.plane_offsets - radius  # [N, P]
    plane_has = plane_depth < gap
    plane_normal = mesh.plane_normals.expand(n, -1, -1)
    plane_offset = plane_normal * -radius
    plane_point = centers[:, None, :] + plane_offset - plane_normal * plane_depth[..., None]
    # Triangles of the centre's cell (btConvexConcaveCollisionAlgorithm + SphereTriangleDetector).
    ids, valid = cell_candidates(mesh, centers)
    v = mesh.tri_verts[ids]  # [N, M, 3, 3]
    c = centers[:, None, :]
    v0, v1, v2 = v[..., 0, :], v[..., 1, :], v[..., 2, :]
    has, point, geo_normal, depth = sphere_triangle_contact(c, v0, v1, v2, radius, gap)
    has = has & valid
    # btManifoldResult::addContactPoint: the point on the sphere is the surface point + normal * depth.
    offset = (point + geo_normal * depth[..., None]) - c
    # The contact-added callback smooths normals over internal edges and re-derives the surface point.
    normal, changed = adjust_internal_edge_contacts(
        geo_normal, point, v0, v1, v2, mesh.tri_normals[ids], mesh.edge_angle[ids], mesh.edge_flags[ids]
    )
    point = torch.where(changed[..., None], (c + offset) - normal * depth[..., None], point)
    # Every feature in Bullet's order: planes, then the cell list (already in visiting order).
    all_has = torch.cat((plane_has, has), 1)
    plane_ids = torch.arange(mesh.num_planes, device=device).expand(n, -1)
    all_object = torch.cat((PLANE_OBJECT_BASE + plane_ids, mesh.tri_mesh[ids].to(torch.int64)), 1)
    all_feature = torch.cat((mesh.num_triangles + plane_ids, ids), 1)
    all_normal = torch.cat((plane_normal, normal), 1)
    all_point = torch.cat((plane_point, point), 1)
    all_offset = torch.cat((plane_offset, offset), 1)
    all_depth = torch.cat((plane_depth, depth), 1)
    # Compact the contacts to the front, keeping their order (a stable sort on "no contact"); pad
    # to max_contacts slots when there are fewer candidates.
    short = max_contacts - all_has.shape[1]
    if short > 0:

        def pad(x):
            return torch.cat((x, x.new_zeros(n, short, *x.shape[2:])), 1)

        all_has, all_object, all_feature, all_normal, all_point, all_offset, all_depth = (
            pad(x) for x in (all_has, all_object, all_feature, all_normal, all_point, all_offset, all_depth)
        )
    order = torch.sort((~all_has).to(torch.int8), dim=1, stable=True).indices[:, :max_contacts]
    slot_has = all_has.gather(1, order)
    take3 = order[..., None].expand(-1, -1, 3)

    def pick(x, fill):
        x = x.gather(1, take3) if x.dim() == 3 else x.gather(1, order)
        return torch.where(slot_has[..., None] if x.dim() == 3 else slot_has, x, fill)

    return SphereContacts(
        count=all_has.sum(1).to(torch.int32),
        object=pick(all_object, -1).to(torch.int32),
        feature=pick(all_feature, -1).to(torch.int32),
        normal=pick(all_normal, 0.0),
        point=pick(all_point, 0.0),
        offset=pick(all_offset, 0.0),
        depth=pick(all_depth, 0.0),
    )
