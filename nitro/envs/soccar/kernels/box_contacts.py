"""The kernels' box contacts (separating axes against the cell's triangles and the planes, the K
deepest kept): the twin of `box_contacts.py`. A box is (centre, axes, half extents), axes a 3-tuple
of 3-vectors; a triangle is (v0, v1, v2)."""

from __future__ import annotations

import torch

from nitro.envs.soccar.arena_mesh import ArenaMesh
from nitro.envs.soccar.contacts import BoxContacts
from nitro.envs.soccar.kernels import jit, require_triton, tl, triton, triton_op, warps, wrap_triton
from nitro.envs.soccar.kernels.arena_mesh import cell_candidates, flat_tris, grid, grid_args
from nitro.envs.soccar.kernels.vec import cross, dot, load, load_uniform, scale, store, sub, where
from nitro.envs.soccar.vec import box_support

BLOCK = 64  # boxes per program


@jit
def box_radius(u, axes, half):
    """The box's half extent along unit axis u."""
    return (
        tl.abs(dot(axes[0], u)) * half[0]
        + tl.abs(dot(axes[1], u)) * half[1]
        + tl.abs(dot(axes[2], u)) * half[2]
    )


@jit
def separating_axis(box, tri, k, scale_max, best, normal):
    """Separation of box and triangle along candidate axis k; keep the largest (the first wins)."""
    length = tl.sqrt(dot(k, k))
    usable = length > 1e-6 * scale_max  # parallel edge pairs give no axis
    u = scale(k, 1.0 / tl.where(usable, length, 1.0))
    radius = box_radius(u, box[1], box[2])
    centre = dot(box[0], u)
    p0 = dot(tri[0], u)
    p1 = dot(tri[1], u)
    p2 = dot(tri[2], u)
    below = tl.minimum(tl.minimum(p0, p1), p2) - (centre + radius)  # box entirely on the negative side
    above = (centre - radius) - tl.maximum(tl.maximum(p0, p1), p2)  # box entirely on the positive side
    sep = tl.maximum(below, above)
    take = usable & (sep > best)
    sign = tl.where(below > above, -1.0, 1.0)
    return tl.where(take, sep, best), where(take, scale(u, sign), normal)


@jit
def cross_len2(a, b):
    c = cross(a, b)
    return c[0] * c[0] + c[1] * c[1] + c[2] * c[2]


@jit
def box_triangle_separation(box, v0, v1, v2, BLOCK: tl.constexpr):
    """SAT between the box and triangle (v0, v1, v2): the largest separation over the triangle
    normal, the box's 3 axes and their 9 cross products with the edges, and its axis (from the
    triangle into the box)."""
    axes = box[1]
    edges = (sub(v1, v0), sub(v2, v1), sub(v0, v2))
    tri_n = cross(edges[0], sub(v2, v0))
    # the largest candidate length, for the "parallel edges give no axis" test
    scale_max = tl.maximum(tl.sqrt(dot(tri_n, tri_n)), 1.0)
    for i in tl.static_range(3):
        edge01 = tl.maximum(cross_len2(axes[i], edges[0]), cross_len2(axes[i], edges[1]))
        scale_max = tl.maximum(scale_max, tl.sqrt(tl.maximum(edge01, cross_len2(axes[i], edges[2]))))
    tri = (v0, v1, v2)
    zero = tl.zeros([BLOCK], tl.float32)
    best, normal = separating_axis(
        box, tri, tri_n, scale_max, tl.full([BLOCK], -3.0e38, tl.float32), (zero, zero, zero)
    )
    for i in tl.static_range(3):
        best, normal = separating_axis(box, tri, axes[i], scale_max, best, normal)
    for i in tl.static_range(3):
        for e in tl.static_range(3):
            best, normal = separating_axis(box, tri, cross(axes[i], edges[e]), scale_max, best, normal)
    return best, normal


@jit
def keep_deepest(ok, sep, normal, feature, arrival, keys, K: tl.constexpr):
    """Keep the K smallest (separation, arrival): replace the largest when full. ``keys``: the kept
    separations, arrivals, normal x, y, z and features, [BLOCK, K] each."""
    key_sep, key_arr, kn_x, kn_y, kn_z, kf = keys
    col = tl.arange(0, K)
    worst = tl.max(key_sep, axis=1)
    is_worst = key_sep == worst[:, None]
    worst_col = tl.argmax(tl.where(is_worst, key_arr, -1), axis=1)
    put = ok & (sep < worst)
    at = put[:, None] & (col[None, :] == worst_col[:, None])
    return (
        tl.where(at, sep[:, None], key_sep),
        tl.where(at, arrival[:, None], key_arr),
        tl.where(at, normal[0][:, None], kn_x),
        tl.where(at, normal[1][:, None], kn_y),
        tl.where(at, normal[2][:, None], kn_z),
        tl.where(at, feature[:, None], kf),
    )


@jit
def axis_column(ptr, i: tl.constexpr, mask):
    """Column i of the row-major 3x3 matrix at ptr (identity where masked)."""
    return (
        tl.load(ptr + i, mask=mask, other=1.0 if i == 0 else 0.0),
        tl.load(ptr + (3 + i), mask=mask, other=1.0 if i == 1 else 0.0),
        tl.load(ptr + (6 + i), mask=mask, other=1.0 if i == 2 else 0.0),
    )


@jit
def box_contacts_kernel(
    center_ptr,
    axes_ptr,
    half_ptr,
    half_stride,
    n,
    gap,
    tri_ptr,
    plane_normals_ptr,
    plane_offsets_ptr,
    cell_start_ptr,
    cell_tris_ptr,
    ox0,
    oy0,
    oz0,
    cell_size,
    dim_x,
    dim_y,
    dim_z,
    num_tris,
    count_out,
    sep_out,
    arrival_out,
    normal_out,
    feature_out,
    NUM_PLANES: tl.constexpr,
    K: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Each lane's box against the planes and its cell's triangles, in Bullet's order (planes, then
    the cell list); the K deepest kept with their arrival rank (the launch orders them)."""
    # fp64 under torch.compile (Inductor types Python floats as fp64): compute in float32
    gap = tl.cast(gap, tl.float32)
    origin, cell_size, dims = grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
    num_tris = tl.cast(num_tris, tl.int32)
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    center = load(center_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    # axes [N, 3, 3] row-major with the box axes as columns: axis i = (m[0][i], m[1][i], m[2][i])
    axes = (
        axis_column(axes_ptr + lane * 9, 0, live),
        axis_column(axes_ptr + lane * 9, 1, live),
        axis_column(axes_ptr + lane * 9, 2, live),
    )
    half = load(half_ptr + lane * half_stride, live, (1.0, 1.0, 1.0))
    box = (center, axes, half)
    keys = (
        tl.full([BLOCK, K], 3.0e38, tl.float32),
        tl.full([BLOCK, K], 1 << 30, tl.int32),
        tl.zeros([BLOCK, K], tl.float32),
        tl.zeros([BLOCK, K], tl.float32),
        tl.zeros([BLOCK, K], tl.float32),
        tl.full([BLOCK, K], -1, tl.int32),
    )
    count = tl.zeros([BLOCK], tl.int32)
    for p in tl.static_range(NUM_PLANES):
        plane_normal = load_uniform(plane_normals_ptr + p * 3)
        plane_d = tl.load(plane_offsets_ptr + p)
        radius = box_radius(plane_normal, axes, half)
        sep = dot(center, plane_normal) - plane_d - radius
        has = live & (sep < gap)
        count += has.to(tl.int32)
        spread = center[0] * 0  # the plane's normal in every lane
        normal = (plane_normal[0] + spread, plane_normal[1] + spread, plane_normal[2] + spread)
        feature = tl.zeros([BLOCK], tl.int32) + (num_tris + p)
        keys = keep_deepest(has, sep, normal, feature, tl.full([BLOCK], p, tl.int32), keys, K)
    first, length = cell_candidates(center, live, cell_start_ptr, origin, cell_size, dims)
    longest = tl.max(length, axis=0)
    j = 0
    while j < longest:
        valid = live & (j < length)
        tri = tl.load(cell_tris_ptr + first + j, mask=valid, other=0)
        v0 = load(tri_ptr + tri * 9, valid, (0.0, 0.0, 0.0))
        v1 = load(tri_ptr + tri * 9 + 3, valid, (1.0, 0.0, 0.0))
        v2 = load(tri_ptr + tri * 9 + 6, valid, (0.0, 1.0, 0.0))
        sep, normal = box_triangle_separation(box, v0, v1, v2, BLOCK)
        has = valid & (sep < gap)
        count += has.to(tl.int32)
        keys = keep_deepest(has, sep, normal, tri, tl.full([BLOCK], NUM_PLANES, tl.int32) + j, keys, K)
        j += 1
    key_sep, key_arr, kn_x, kn_y, kn_z, kf = keys
    col = tl.arange(0, K)
    m = live[:, None] & (col[None, :] < K)
    rows = lane[:, None] * K
    tl.store(count_out + lane, count, mask=live)
    tl.store(sep_out + rows + col[None, :], key_sep, mask=m)
    tl.store(arrival_out + rows + col[None, :], key_arr, mask=m)
    store(normal_out + (rows + col[None, :]) * 3, (kn_x, kn_y, kn_z), mask=m)
    tl.store(feature_out + rows + col[None, :], kf, mask=m)


@triton_op("nitro::soccar_box_contacts", mutates_args={})
def box_contacts_op(
    centers: torch.Tensor,
    axes: torch.Tensor,
    half: torch.Tensor,
    gap: float,
    slots: int,
    tri: torch.Tensor,
    plane_normals: torch.Tensor,
    plane_offsets: torch.Tensor,
    cell_start: torch.Tensor,
    cell_tris: torch.Tensor,
    grid: list[float],
    num_tris: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    n = centers.shape[0]
    dev = centers.device
    count = torch.empty(n, dtype=torch.int32, device=dev)
    sep = torch.empty(n, slots, device=dev)
    arrival = torch.empty(n, slots, dtype=torch.int32, device=dev)
    normal = torch.empty(n, slots, 3, device=dev)
    feature = torch.empty(n, slots, dtype=torch.int32, device=dev)
    wrap_triton(box_contacts_kernel)[(triton.cdiv(n, BLOCK),)](
        centers,
        axes,
        half,
        3,
        n,
        gap,
        tri,
        plane_normals,
        plane_offsets,
        cell_start,
        cell_tris,
        grid[0],
        grid[1],
        grid[2],
        grid[3],
        int(grid[4]),
        int(grid[5]),
        int(grid[6]),
        num_tris,
        count,
        sep,
        arrival,
        normal,
        feature,
        NUM_PLANES=4,
        K=slots,
        BLOCK=BLOCK,
        num_warps=warps(BLOCK),
    )
    return count, sep, arrival, normal, feature


def launch_box_contacts(
    mesh: ArenaMesh,
    centers: torch.Tensor,
    axes: torch.Tensor,
    half_extents: torch.Tensor,
    gap: float,
    max_contacts: int,
) -> BoxContacts:
    """`box_contacts.box_contacts` in one kernel launch (the kernel keeps the deepest, this orders them)."""
    require_triton()
    if max_contacts < 1 or max_contacts & (max_contacts - 1):
        raise ValueError(
            f"the kernel keeps a power-of-two number of contacts, got max_contacts={max_contacts}"
        )
    n = centers.shape[0]
    half = (
        half_extents.reshape(-1, 3).expand(n, 3).contiguous()
        if half_extents.dim() == 2
        else half_extents.reshape(1, 3).expand(n, 3).contiguous()
    )
    count, sep, arrival, normal, feature = box_contacts_op(
        centers.contiguous(),
        axes.contiguous(),
        half,
        float(gap),
        int(max_contacts),
        flat_tris(mesh),
        mesh.plane_normals,
        mesh.plane_offsets,
        mesh.cell_start,
        mesh.cell_tris,
        grid_args(mesh),
        mesh.num_triangles,
    )
    # Order as the reference: by separation, ties by Bullet's order (planes, then the cell list).
    order = torch.sort(arrival, dim=1, stable=True).indices
    sep, feature, normal = (
        sep.gather(1, order),
        feature.gather(1, order),
        normal.gather(1, order[..., None].expand(-1, -1, 3)),
    )
    order = torch.sort(sep, dim=1, stable=True).indices
    sep, feature = sep.gather(1, order), feature.gather(1, order)
    normal = normal.gather(1, order[..., None].expand(-1, -1, 3))
    slot = feature >= 0
    point = box_support(centers[:, None, :], axes[:, None], half[:, None, :], -normal)
    return BoxContacts(
        count=count,
        normal=torch.where(slot[..., None], normal, 0.0),
        depth=torch.where(slot, sep, 0.0),
        point=torch.where(slot[..., None], point, 0.0),
        feature=feature,
    )
