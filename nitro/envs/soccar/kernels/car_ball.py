"""The kernels' car-ball contacts: the twin of `car_ball.py`, one (env, car) pair per lane.

Bullet's GJK of a box against a sphere (a point grown by the radius) converges on the point of the
inner box nearest the sphere's centre; this twin computes that point in closed form (the centre
clamped into the box, in the box's frame) and builds the contact from it as btGjkPairDetector does
(the margins, the reported point on the sphere, addContactPoint's threshold, refreshContactPoints).
The two agree to float rounding; a centre inside the inner box (a ball 93 UU into a car) gives no
contact in both.
"""

from __future__ import annotations

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car_config import CarHitbox
from nitro.envs.soccar.contacts import CarBallContacts
from nitro.envs.soccar.kernels import jit, require_triton, tl, triton, warps
from nitro.envs.soccar.kernels.vec import add, dot, load, scale, store, sub, where
from nitro.envs.soccar.mutators import SPHERE_AABB_EXTRA, TickParams, ball_breaking_threshold, ball_radius_bt

CAR_BALL_BLOCK = 32
UU_TO_BT_F32 = tl.constexpr(C.UU_TO_BT_F32) if tl is not None else C.UU_TO_BT_F32


@jit
def mat_vec(axes, v):
    """basis * v for a basis given as its columns ``axes`` (x, y, z): the row dots, in order."""
    ax, ay, az = axes
    return (
        ax[0] * v[0] + ay[0] * v[1] + az[0] * v[2],
        ax[1] * v[0] + ay[1] * v[1] + az[1] * v[2],
        ax[2] * v[0] + ay[2] * v[1] + az[2] * v[2],
    )


@jit
def vec_mat(v, axes):
    """v * basis (the transpose times v): each column dotted with v."""
    return dot(axes[0], v), dot(axes[1], v), dot(axes[2], v)


@jit
def clamp3(v, half):
    return (
        tl.minimum(tl.maximum(v[0], -half[0]), half[0]),
        tl.minimum(tl.maximum(v[1], -half[1]), half[1]),
        tl.minimum(tl.maximum(v[2], -half[2]), half[2]),
    )


@jit
def car_ball_contacts(
    center, ball_axes, car_pos, axes, offset, inner, margin, threshold, radius, sphere_extent, ball_threshold
):
    """One car's contact with the ball (BT): (has_manifold, touched, held, normal from the ball into
    the car, point on the car, point on the ball, local point on the car, local point on the ball,
    depth). ``axes``: the car's rotation as its columns; ``offset``, ``inner``, ``margin``,
    ``threshold``: its `CarHitbox`; ``ball_axes``: the ball's rotation; ``sphere_extent``: the
    half size of the ball's AABB."""
    origin = add(mat_vec(axes, offset), car_pos)  # the child box (its basis is the car's)
    extent = add(inner, (margin, margin, margin))
    reach_x = dot(extent, (tl.abs(axes[0][0]), tl.abs(axes[1][0]), tl.abs(axes[2][0])))
    reach_y = dot(extent, (tl.abs(axes[0][1]), tl.abs(axes[1][1]), tl.abs(axes[2][1])))
    reach_z = dot(extent, (tl.abs(axes[0][2]), tl.abs(axes[1][2]), tl.abs(axes[2][2])))
    sphere = sphere_extent
    has_manifold = (
        (origin[0] - reach_x <= center[0] + sphere) & (origin[0] + reach_x >= center[0] - sphere)
        & (origin[1] - reach_y <= center[1] + sphere) & (origin[1] + reach_y >= center[1] - sphere)
        & (origin[2] - reach_z <= center[2] + sphere) & (origin[2] + reach_z >= center[2] - sphere)
    )  # fmt: skip
    limit = tl.minimum(threshold, ball_threshold)
    # GJK's limit: the nearest point of the inner box to the centre, then the margins
    local = vec_mat(sub(center, origin), axes)
    nearest = clamp3(local, inner)
    outside = (nearest[0] != local[0]) | (nearest[1] != local[1]) | (nearest[2] != local[2])
    v = sub(add(mat_vec(axes, nearest), origin), center)  # A - B: from the centre to the box
    s2 = dot(v, v)
    s = tl.sqrt(tl.where(s2 > 0, s2, 1.0))
    normal = scale(v, 1.0 / s)
    distance = s - (radius + margin)
    reach = (margin + radius) + limit
    found = outside & (s2 > 0) & ((distance < 0) | (distance * distance < reach * reach))
    touched = has_manifold & found & (distance <= limit)
    point_b = add(center, scale(v, radius / s))  # the sphere's surface toward the box
    # addContactPoint, then refreshContactPoints from the local points
    point_a = add(point_b, scale(normal, distance))
    local_a = vec_mat(sub(point_a, car_pos), axes)
    local_b = vec_mat(sub(point_b, center), ball_axes)
    point_a = add(mat_vec(axes, local_a), car_pos)
    point_b = add(mat_vec(ball_axes, local_b), center)
    depth = dot(sub(point_a, point_b), normal)
    drift = sub(point_b, sub(point_a, scale(normal, depth)))
    held = touched & (depth <= limit) & (dot(drift, drift) <= limit * limit)
    return has_manifold, touched, held, normal, point_a, point_b, local_a, local_b, depth


@jit
def car_ball_contacts_kernel(
    ball_pos_ptr,
    ball_rot_ptr,
    pos_ptr,
    rot_ptr,
    offset_ptr,
    inner_ptr,
    margin_ptr,
    threshold_ptr,
    out_flags_ptr,
    out_vec_ptr,
    out_depth_ptr,
    n,
    num_cars,
    radius,
    sphere_extent,
    ball_threshold,
    BLOCK: tl.constexpr,
):
    """Lanes are (env, car) pairs; the hitbox tables are per car slot [C, ...]."""
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    env = lane // num_cars
    slot = lane % num_cars
    ball_pos = load(ball_pos_ptr + env * 3, live, (0.0, 0.0, 0.0))
    center = scale(ball_pos, UU_TO_BT_F32)
    ball_axes = (
        (tl.load(ball_rot_ptr + env * 9, mask=live, other=1.0), tl.load(ball_rot_ptr + env * 9 + 3, mask=live, other=0.0), tl.load(ball_rot_ptr + env * 9 + 6, mask=live, other=0.0)),
        (tl.load(ball_rot_ptr + env * 9 + 1, mask=live, other=0.0), tl.load(ball_rot_ptr + env * 9 + 4, mask=live, other=1.0), tl.load(ball_rot_ptr + env * 9 + 7, mask=live, other=0.0)),
        (tl.load(ball_rot_ptr + env * 9 + 2, mask=live, other=0.0), tl.load(ball_rot_ptr + env * 9 + 5, mask=live, other=0.0), tl.load(ball_rot_ptr + env * 9 + 8, mask=live, other=1.0)),
    )  # fmt: skip
    pos = load(pos_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    axes = (
        (tl.load(rot_ptr + lane * 9, mask=live, other=1.0), tl.load(rot_ptr + lane * 9 + 3, mask=live, other=0.0), tl.load(rot_ptr + lane * 9 + 6, mask=live, other=0.0)),
        (tl.load(rot_ptr + lane * 9 + 1, mask=live, other=0.0), tl.load(rot_ptr + lane * 9 + 4, mask=live, other=1.0), tl.load(rot_ptr + lane * 9 + 7, mask=live, other=0.0)),
        (tl.load(rot_ptr + lane * 9 + 2, mask=live, other=0.0), tl.load(rot_ptr + lane * 9 + 5, mask=live, other=0.0), tl.load(rot_ptr + lane * 9 + 8, mask=live, other=1.0)),
    )  # fmt: skip
    offset = load(offset_ptr + slot * 3, live, (0.0, 0.0, 0.0))
    inner = load(inner_ptr + slot * 3, live, (1.0, 1.0, 1.0))
    margin = tl.load(margin_ptr + slot, mask=live, other=0.04)
    threshold = tl.load(threshold_ptr + slot, mask=live, other=0.02)
    has_manifold, touched, held, normal, point_a, point_b, local_a, local_b, depth = car_ball_contacts(
        center, ball_axes, pos, axes, offset, inner, margin, threshold, radius, sphere_extent, ball_threshold
    )
    tl.store(out_flags_ptr + lane * 3, has_manifold.to(tl.int8), mask=live)
    tl.store(out_flags_ptr + lane * 3 + 1, touched.to(tl.int8), mask=live)
    tl.store(out_flags_ptr + lane * 3 + 2, held.to(tl.int8), mask=live)
    zero = (normal[0] * 0.0, normal[1] * 0.0, normal[2] * 0.0)
    store(out_vec_ptr + lane * 15, where(touched, normal, zero), live)
    store(out_vec_ptr + lane * 15 + 3, where(touched, point_a, zero), live)
    store(out_vec_ptr + lane * 15 + 6, where(touched, point_b, zero), live)
    store(out_vec_ptr + lane * 15 + 9, where(touched, local_a, zero), live)
    store(out_vec_ptr + lane * 15 + 12, where(touched, local_b, zero), live)
    tl.store(out_depth_ptr + lane, tl.where(touched, depth, 0.0), mask=live)


def launch_car_ball_contacts(
    ball_pos: torch.Tensor, ball_rot: torch.Tensor, pos_bt: torch.Tensor, rot: torch.Tensor, hitbox: CarHitbox,
    params: TickParams,
) -> CarBallContacts:
    """`car_ball.car_ball_contacts` as a kernel: ``hitbox`` per car slot [C] (not flattened)."""
    require_triton()
    n, c = pos_bt.shape[:2]
    lanes = n * c
    device = pos_bt.device
    flags = torch.empty(lanes, 3, dtype=torch.int8, device=device)
    vecs = torch.empty(lanes, 15, device=device)
    depth = torch.empty(lanes, device=device)
    radius = ball_radius_bt(params)
    sphere_extent = C.f32(radius + SPHERE_AABB_EXTRA)
    if lanes:
        car_ball_contacts_kernel[(triton.cdiv(lanes, CAR_BALL_BLOCK),)](
            ball_pos.contiguous(), ball_rot.contiguous(), pos_bt.contiguous(), rot.contiguous(),
            hitbox.offset.contiguous(), hitbox.inner.contiguous(), hitbox.margin.contiguous(),
            hitbox.threshold.contiguous(), flags, vecs, depth, lanes, c, radius, sphere_extent,
            ball_breaking_threshold(params), BLOCK=CAR_BALL_BLOCK, num_warps=warps(CAR_BALL_BLOCK),
        )  # fmt: skip
    shape = lambda x: x.reshape(n, c, *x.shape[1:])
    f = flags.bool()
    return CarBallContacts(
        has_manifold=shape(f[:, 0]),
        touched=shape(f[:, 1]),
        held=shape(f[:, 2]),
        normal=shape(vecs[:, 0:3]),
        point_on_car=shape(vecs[:, 3:6]),
        point_on_ball=shape(vecs[:, 6:9]),
        local_point_car=shape(vecs[:, 9:12]),
        local_point_ball=shape(vecs[:, 12:15]),
        depth=shape(depth),
    )
