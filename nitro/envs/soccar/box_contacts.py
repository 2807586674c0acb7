"""Oriented boxes (car bodies) against the arena, by separating axes: every triangle and plane within a
gap, deepest first.

The kernels' twin is `kernels/box_contacts.py`.
"""

from __future__ import annotations

import torch

from nitro.envs.soccar import kernels
from nitro.envs.soccar.arena_mesh import ArenaMesh, cell_candidates
from nitro.envs.soccar.contacts import BoxContacts
from nitro.envs.soccar.kernels import box_contacts as box_kernels
from nitro.envs.soccar.vec import box_support, cross, dot

_INF = float("inf")


def box_triangle_axes(center, axes, half, v0, v1, v2):
    """Every separating-axis candidate of a box and a triangle, broadcast: (separation [..., 13],
    unit axis pointing from the triangle into the box [..., 13, 3]). Candidates: the triangle normal,
    the box's three axes, their nine cross products with the triangle's edges; a candidate from
    (nearly) parallel edges gives no axis and has separation -inf.

    ``axes`` [..., 3, 3] holds the box axes as columns, ``half`` [..., 3] its half extents.
    """
    batch = torch.broadcast_shapes(center.shape[:-1], axes.shape[:-2], half.shape[:-1], v0.shape[:-1])
    center, half = center.expand(*batch, 3), half.expand(*batch, 3)
    axes = axes.expand(*batch, 3, 3)
    v0, v1, v2 = v0.expand(*batch, 3), v1.expand(*batch, 3), v2.expand(*batch, 3)
    edges = torch.stack((v1 - v0, v2 - v1, v0 - v2), -2)  # [..., 3, 3]
    box_axes = axes.transpose(-1, -2)  # rows = axes
    tri_n = cross(v1 - v0, v2 - v0)[..., None, :]
    crosses = cross(box_axes[..., :, None, :], edges[..., None, :, :]).flatten(-3, -2)  # [..., 9, 3]
    candidates = torch.cat((tri_n, box_axes, crosses), -2)  # [..., 13, 3]
    length = torch.linalg.vector_norm(candidates, dim=-1)
    usable = length > 1e-6 * length.amax(-1, keepdim=True)  # parallel edge pairs give no axis
    u = candidates / torch.where(usable, length, 1)[..., None]
    radius = (dot(box_axes[..., None, :, :], u[..., :, None, :]).abs() * half[..., None, :]).sum(-1)
    centre = dot(center[..., None, :], u)
    proj = torch.stack([dot(v[..., None, :], u) for v in (v0, v1, v2)], -1)  # [..., 13, 3]
    below = proj.amin(-1) - (centre + radius)  # box entirely on the negative side
    above = (centre - radius) - proj.amax(-1)  # box entirely on the positive side
    sep = torch.where(usable, torch.maximum(below, above), -_INF)
    return sep, torch.where((below > above)[..., None], -u, u)


def box_triangle_separation(center, axes, half, v0, v1, v2):
    """SAT between an oriented box and a triangle, broadcast: (separation [...], normal [..., 3]):
    the candidate of `box_triangle_axes` with the largest separation (the first of equal ones)."""
    sep, axis = box_triangle_axes(center, axes, half, v0, v1, v2)
    best = torch.argmax(sep, dim=-1, keepdim=True)
    return sep.gather(-1, best)[..., 0], axis.gather(-2, best[..., None].expand(*best.shape[:-1], 1, 3))[
        ..., 0, :
    ]


def box_contacts(
    mesh: ArenaMesh,
    centers: torch.Tensor,
    axes: torch.Tensor,
    half_extents: torch.Tensor,
    gap: float,
    max_contacts: int = 8,
    use_kernels: bool | None = None,
) -> BoxContacts:
    """Contacts of oriented boxes with the arena (car bodies).

    ``centers`` [N, 3] UU, ``axes`` [N, 3, 3] with the box axes as columns (a rotation matrix),
    ``half_extents`` [3] or [N, 3] UU. The box's half diagonal plus ``gap`` must be within the grid's
    query radius. Returns the ``max_contacts`` deepest features whose separation is below ``gap``.
    On CUDA a Triton kernel (when Triton is importable); ``use_kernels`` forces the kernel or this
    PyTorch reference.
    """
    if kernels.use_kernels(centers, use_kernels):
        return box_kernels.launch_box_contacts(mesh, centers, axes, half_extents, gap, max_contacts)
    n = centers.shape[0]
    half = half_extents.expand(n, 3)
    ids, valid = cell_candidates(mesh, centers)
    v = mesh.tri_verts[ids]
    c, a, h = centers[:, None, :], axes[:, None], half[:, None, :]
    sep, normal = box_triangle_separation(c, a, h, v[..., 0, :], v[..., 1, :], v[..., 2, :])
    has = valid & (sep < gap)
    pn = mesh.plane_normals.expand(n, -1, -1)
    p_radius = (torch.einsum("nij,npi->npj", axes, pn).abs() * half[:, None, :]).sum(-1)
    p_sep = centers @ mesh.plane_normals.T - mesh.plane_offsets - p_radius
    p_has = p_sep < gap
    all_has = torch.cat((p_has, has), 1)
    all_sep = torch.cat((p_sep, sep), 1)
    all_normal = torch.cat((pn, normal), 1)
    plane_ids = mesh.num_triangles + torch.arange(mesh.num_planes, device=centers.device).expand(n, -1)
    all_feature = torch.cat((plane_ids, ids), 1)
    key = torch.where(all_has, all_sep, _INF)
    order = torch.sort(key, dim=1, stable=True).indices[:, :max_contacts]
    slot = all_has.gather(1, order)
    normal_k = all_normal.gather(1, order[..., None].expand(-1, -1, 3))
    point = box_support(centers[:, None, :], axes[:, None], half[:, None, :], -normal_k)
    return BoxContacts(
        count=all_has.sum(1).to(torch.int32),
        normal=torch.where(slot[..., None], normal_k, 0.0),
        depth=torch.where(slot, all_sep.gather(1, order), 0.0),
        point=torch.where(slot[..., None], point, 0.0),
        feature=torch.where(slot, all_feature.gather(1, order), -1).to(torch.int32),
    )
