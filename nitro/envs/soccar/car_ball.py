"""Car bodies against the ball: RocketSim's car-ball contacts, as its Bullet makes them.

Reference: RocketSim (ZealanL/RocketSim, MIT) `Arena::_BulletContactAddedCallback` and
`_BtCallback_OnCarBallCollision` (friction 2.0, restitution 0, and `Ball::_OnHit`, which the game
rules apply from `CarBallContacts`), and the Bullet 3.24 it vendors: the ball-car broadphase pair
runs `btCompoundCollisionAlgorithm` (the car's compound, one child box), whose child box meets the
ball's sphere through `btConvexConvexAlgorithm` when the box's AABB meets the sphere's (RocketSim
widens the sphere's by 0.08 BT). That algorithm makes the manifold with the car as body A and the
ball as body B, and one `btGjkPairDetector` query adds at most one point (`gjk_pair_detector`):
the box with its margin against the ball, a point grown by its radius; then
`refreshContactPoints` recomputes the point from both transforms. Bullet units, float32.
"""

from __future__ import annotations

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar import kernels
from nitro.envs.soccar.arena_mesh.broadphase import aabbs_overlap
from nitro.envs.soccar.car_config import CarHitbox
from nitro.envs.soccar.car_world import box_aabb, box_transform
from nitro.envs.soccar.contacts import CarBallContacts
from nitro.envs.soccar.gjk_pair_detector import ConvexShape, gjk_closest_points
from nitro.envs.soccar.kernels import car_ball as car_ball_kernels
from nitro.envs.soccar.mutators import SPHERE_AABB_EXTRA, TickParams, ball_breaking_threshold, ball_radius_bt
from nitro.envs.soccar.vec import dot, eager_cpu, mat_vec, vec_mat


def car_ball_contacts(
    ball_pos: torch.Tensor,
    ball_rot: torch.Tensor,
    pos_bt: torch.Tensor,
    rot: torch.Tensor,
    hitbox: CarHitbox,
    params: TickParams,
    use_kernels: bool | None = None,
) -> CarBallContacts:
    """Each car's contact with its env's ball at the tick's starting transforms.

    ``ball_pos`` [N, 3] UU, ``ball_rot`` [N, 3, 3]; ``pos_bt`` [N, C, 3] BT, ``rot`` [N, C, 3, 3]: the
    cars; ``hitbox`` per car slot [C]. Returns `CarBallContacts` [N, C] (BT; the normal points from
    the ball into the car). On CUDA a Triton kernel (`kernels/car_ball.py`, when Triton is
    importable); ``use_kernels`` forces the kernel or this PyTorch reference.
    """
    if kernels.use_kernels(pos_bt, use_kernels):
        return car_ball_kernels.launch_car_ball_contacts(ball_pos, ball_rot, pos_bt, rot, hitbox, params)
    n, c = pos_bt.shape[:2]
    hitbox = hitbox.flat(torch.Size((n, c)))
    flat_pos, flat_rot = pos_bt.reshape(-1, 3), rot.reshape(-1, 3, 3)
    basis, origin = box_transform(flat_pos, flat_rot, hitbox)
    center = (ball_pos * C.UU_TO_BT_F32)[:, None].expand(n, c, 3).reshape(-1, 3)
    radius = ball_radius_bt(params)
    box_min, box_max = box_aabb(basis, origin, hitbox)
    extent = C.f32(radius + SPHERE_AABB_EXTRA)
    has_manifold = aabbs_overlap(box_min, box_max, center - extent, center + extent)
    # getNewManifold(car, ball): the smaller of the two bodies' breaking thresholds
    threshold = torch.clamp(hitbox.threshold, max=ball_breaking_threshold(params))
    # btConvexConvexAlgorithm runs where the boxes meet (eager CPU runs just those lanes)
    lanes = has_manifold.nonzero()[:, 0] if eager_cpu(has_manifold) else torch.arange(n * c, device=pos_bt.device)  # sync-ok
    box = ConvexShape("box", origin[lanes], hitbox.margin[lanes], basis=basis[lanes], half=hitbox.inner[lanes])
    sphere = ConvexShape("sphere", center[lanes], torch.full_like(hitbox.margin[lanes], radius))
    reach = (hitbox.margin[lanes] + radius) + threshold[lanes]
    picked = gjk_closest_points(box, sphere, reach * reach)
    hit_normal = torch.zeros_like(origin).index_copy(0, lanes, picked.normal)
    point_b = torch.zeros_like(origin).index_copy(0, lanes, picked.point_on_b)
    distance = torch.zeros_like(threshold).index_copy(0, lanes, picked.distance)
    found = torch.zeros_like(has_manifold).index_copy(0, lanes, picked.found)
    touched = has_manifold & found & (distance <= threshold)
    # addContactPoint, then refreshContactPoints from the local points
    point_a = point_b + hit_normal * distance[:, None]
    local_a = vec_mat(point_a - flat_pos, flat_rot)  # the car's invXform
    ball_basis = ball_rot[:, None].expand(n, c, 3, 3).reshape(-1, 3, 3)
    local_b = vec_mat(point_b - center, ball_basis)
    point_a = mat_vec(flat_rot, local_a) + flat_pos
    point_b = mat_vec(ball_basis, local_b) + center
    depth = dot(point_a - point_b, hit_normal)
    drift = point_b - (point_a - hit_normal * depth[:, None])
    held = touched & (depth <= threshold) & (dot(drift, drift) <= threshold * threshold)
    shape = lambda x: x.reshape(n, c, *x.shape[1:])
    return CarBallContacts(
        has_manifold=shape(has_manifold),
        touched=shape(touched),
        held=shape(held),
        normal=shape(torch.where(touched[:, None], hit_normal, 0.0)),
        point_on_car=shape(torch.where(touched[:, None], point_a, 0.0)),
        point_on_ball=shape(torch.where(touched[:, None], point_b, 0.0)),
        local_point_car=shape(torch.where(touched[:, None], local_a, 0.0)),
        local_point_ball=shape(torch.where(touched[:, None], local_b, 0.0)),
        depth=shape(torch.where(touched, depth, 0.0)),
    )
