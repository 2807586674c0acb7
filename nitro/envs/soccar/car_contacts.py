"""The fused kernel's contacts between bodies and its car body against the arena, and their solves:
their reference twin.

The fused kernel (`kernels/arena.py`) replaces Bullet's car-ball detection with a cheaper contact,
takes Bullet's car-car manifolds as they are, fires RocketSim's callbacks from them and solves them
(`solve_bodies`); this module is the PyTorch twin of `kernels/car_contacts.py` that its tests compare against. The reference tick
does not use it: its contacts are Bullet's (`dynamics_world`, `car_ball`, `car_car`).

Both detectors return Bullet's manifolds' fields (`contacts.CarBallContacts`,
`contacts.CarCarContacts`, whose `hits` / `touches` are what RocketSim's contact-added callbacks
receive), from the car bodies' hitboxes (btBoxShape in a btCompoundShape, at the hitbox offset), the
ball's sphere and the manifolds' contact breaking thresholds, at the tick's starting poses. Cars
demolished at the tick's start touch nothing.

`car_ball_contacts` is the sphere-box distance in closed form (in Bullet units, with the box's margin):
the point Bullet's GJK converges on, so a touch mostly comes on the tick RocketSim finds it, but the
ball's frame is taken as the identity. `car_car_contacts` is Bullet's own box-box manifold
(`car_car`: btBoxBoxDetector's points, refreshed), as the kernel computes it per pair lane.

`solve_bodies` solves the rows between bodies alone (Bullet's sequential impulse, the rows in the
island manager's order for one island). `car_world_contacts` and `solve_car_world` are the fused
kernel's car body against the arena: Bullet's pipeline (planes' deepest corner, manifolds, edge
smoothing, the sequential impulse; Bullet's GJK for the mesh triangles) with separating axes in place
of EPA, each car's arena rows solved alone from its deltas of `solve_bodies` (docs/SOCCAR.md says
where that differs from `car_world` and `dynamics_world`'s one joint solve).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from nitro.envs.soccar import ball as ball_mod
from nitro.envs.soccar import car_car
from nitro.envs.soccar import constants as C
from nitro.envs.soccar import rigid_body as rb
from nitro.envs.soccar.arena_mesh import ArenaMesh, cell_candidates
from nitro.envs.soccar.box_contacts import box_triangle_separation
from nitro.envs.soccar.car_config import CarHitbox, CarParams
from nitro.envs.soccar.contacts import (
    PLANE_OBJECT_BASE,
    BodySolve,
    CarBallContacts,
    CarBodyContacts,
    CarCarContacts,
    ContactRows,
    SphereContacts,
)
from nitro.envs.soccar.gjk_pair_detector import ConvexShape, gjk_closest_points
from nitro.envs.soccar.internal_edge import adjust_internal_edge_contacts
from nitro.envs.soccar.manifolds import build_manifolds
from nitro.envs.soccar.mutators import TickParams, ball_radius_bt
from nitro.envs.soccar.sequential_impulse import SolverBodies, SolverResult, solve_contacts
from nitro.envs.soccar.sphere_contacts import closest_point_triangle
from nitro.envs.soccar.dynamics_world import solver_bodies
from nitro.envs.soccar.state import BallState, CarState, World
from nitro.envs.soccar.vec import box_support, broadcast, constant, dot, eager_cpu, gather_rows, mat_vec, vec_mat

CAR_INV_MASS = float(np.float32(1.0) / np.float32(C.CAR_MASS_BT))
"""btRigidBody's inverse mass of a car (1 / 180), float32 as Bullet computes it."""



def car_ball_contacts(
    ball_pos: torch.Tensor, cars: CarState, car_params: CarParams, frozen: torch.Tensor, params: TickParams
) -> CarBallContacts:
    """btSphereBoxCollisionAlgorithm::getSphereDistance of the ball against each car's hitbox: the
    contact RocketSim's callback receives (`CarBallContacts.hits`) and the solver's car-ball row.

    ``ball_pos`` [N, 3], cars [N, C] at the tick's start; ``frozen`` [N, C]: cars demolished at the
    tick's start. The contact point on the ball is the sphere's deepest point, pOnBox + n x depth.
    Every point found is held (the sphere-box closed form has no refresh to drop it).
    """
    hitbox = car_params.hitbox
    inner, margin, offset = hitbox.inner, hitbox.margin, hitbox.offset  # BT [C, 3], [C], [C, 3]
    basis = cars.rot_mat  # [N, C, 3, 3]
    car_pos = cars.pos * C.UU_TO_BT
    origin = car_pos + mat_vec(basis, offset)
    center = ball_pos[:, None] * C.UU_TO_BT  # [N, 1, 3]
    rel = vec_mat(center - origin, basis)  # invXform: basis^T (p - origin)
    closest = torch.maximum(torch.minimum(rel, inner), -inner)
    radius = ball_radius_bt(params)  # RocketSim's float product (1.8249999 BT, not 1.825)
    intersection_dist = radius + margin  # [C]
    # the manifold's breaking threshold: the smaller of the car's and the ball's (ball_contact_gap)
    threshold = torch.clamp(hitbox.threshold, max=C.f32(C.f32(params.ball_contact_gap) * C.UU_TO_BT_F32))
    contact_dist = intersection_dist + threshold
    normal = rel - closest
    dist2 = dot(normal, normal)
    touching = (dist2 <= contact_dist * contact_dist) & ~frozen
    inside = dist2 <= C.SIMD_EPSILON
    distance = torch.sqrt(torch.where(inside, 1.0, dist2))
    normal = normal / distance[..., None]
    # the ball's centre inside the box: out through the nearest face (getSpherePenetration)
    face_dist = torch.cat((inner - rel, inner + rel), -1)  # [N, C, 6]: +x, +y, +z, -x, -y, -z faces
    face = face_dist.argmin(-1)
    face_normal = constant(((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (-1.0, 0.0, 0.0), (0.0, -1.0, 0.0), (0.0, 0.0, -1.0)), rel.device)
    normal = torch.where(inside[..., None], face_normal[face], normal)
    distance = torch.where(inside, -face_dist.gather(-1, face[..., None])[..., 0], distance)
    closest = torch.where(inside[..., None], torch.where(face_normal[face] != 0, face_normal[face] * inner, rel), closest)
    point_on_box = closest + normal * margin[:, None]
    depth = distance - intersection_dist
    point_on_car = mat_vec(basis, point_on_box) + origin
    world_normal = mat_vec(basis, normal)  # from the car into the ball
    point_on_ball = point_on_car + world_normal * depth[..., None]
    return CarBallContacts(
        has_manifold=touching,
        touched=touching,
        held=touching,
        normal=-world_normal,
        point_on_car=point_on_car,
        point_on_ball=point_on_ball,
        local_point_car=vec_mat(point_on_car - car_pos, basis),
        local_point_ball=point_on_ball - center,  # the ball's frame taken as the identity
        depth=depth,
    )


def car_car_contacts(cars: CarState, car_params: CarParams, frozen: torch.Tensor) -> CarCarContacts:
    """Every car pair's Bullet box-box manifold at the tick's start (`car_car.car_car_contacts`, with
    the kernel's twin `kernels/car_car.py`); a car ``frozen`` [N, C] (demolished at the tick's start)
    touches nothing."""
    n, c = cars.pos.shape[:2]
    found = car_car.car_car_contacts(cars.pos * C.UU_TO_BT_F32, cars.rot_mat, car_params.hitbox.flat(torch.Size((n, c))))
    both = ~frozen[:, found.pairs[:, 0]] & ~frozen[:, found.pairs[:, 1]]
    return dataclasses.replace(
        found, has_manifold=found.has_manifold & both, added=found.added & both[..., None], count=found.count * both
    )


# --- The car body against the arena ---------------------------------------------------------------


def deepest_corner(center: torch.Tensor, rot: torch.Tensor, half: torch.Tensor, direction: torch.Tensor):
    """btBoxShape::localGetSupportingVertex: the box's corner furthest along ``direction`` [..., 3]
    (a non-negative component takes the + side, as btFsels), ``rot`` [..., 3, 3] its axes as columns."""
    local = vec_mat(direction, rot)  # basis^T direction
    return center + mat_vec(rot, torch.where(local >= 0, half, -half))


def box_triangle_contacts(center, rot, hitbox: CarHitbox, v0, v1, v2, valid):
    """Each car box's contact with each candidate triangle as the fused kernel finds it
    (`kernels/car_contacts.box_triangle_contacts`): Bullet's GJK (btGjkPairDetector,
    `gjk_pair_detector.gjk_closest_points`) on the box grown by its margin against the triangle, in
    Bullet units; where Bullet would run its penetration depth solver (EPA: the inner box overlaps the
    triangle), the separating axes of the inner box (`box_contacts.box_triangle_separation`), the point
    on the triangle nearest its support feature along the axis (`vec.box_support`: a corner, or a face
    centre or edge midpoint where those lie flat against the triangle) and the margin taken off the
    separation. ``center`` [B, 3] UU the box's centre, ``rot`` [B, 3, 3], ``hitbox`` flattened [B]
    (BT), ``v0``.. [B, K, 3] UU, ``valid`` [B, K]. Returns (has: within the contact breaking threshold
    [B, K], normal from the triangle into the box [B, K, 3], point on the triangle [B, K, 3] UU, signed
    distance [B, K] UU). Eager CPU runs GJK on the valid pairs only."""
    b, k = valid.shape
    lanes = valid.reshape(-1)
    pick = lanes.nonzero()[:, 0] if eager_cpu(lanes) else torch.arange(b * k, device=lanes.device)  # sync-ok
    car = torch.div(pick, k, rounding_mode="floor")
    flat = lambda x: x.reshape(b * k, 3)[pick]
    tri = torch.stack((flat(v0), flat(v1), flat(v2)), -2) * C.UU_TO_BT
    margin, threshold = hitbox.margin[car], hitbox.threshold[car]
    box = ConvexShape("box", center[car] * C.UU_TO_BT, margin, basis=rot[car], half=hitbox.inner[car])
    triangle = ConvexShape("triangle", torch.zeros_like(tri[:, 0]), torch.zeros_like(tri[:, 0, 0]), tri=tri)
    grown = margin + threshold
    hit = gjk_closest_points(box, triangle, grown * grown, penetration=False)
    has = torch.zeros(b * k, dtype=torch.bool, device=lanes.device)
    normal = torch.zeros(b * k, 3, device=lanes.device)
    point, distance = torch.zeros_like(normal), torch.zeros(b * k, device=lanes.device)
    has[pick] = hit.found & (hit.distance <= threshold)
    normal[pick], point[pick], distance[pick] = hit.normal, hit.point_on_b * C.BT_TO_UU, hit.distance * C.BT_TO_UU
    # the lanes GJK leaves to the penetration depth solver: the inner box's separating axes
    inner = hitbox.inner * C.BT_TO_UU
    sep, axis = box_triangle_separation(center[:, None], rot[:, None], inner[:, None], v0, v1, v2)
    support = box_support(center[:, None], rot[:, None], inner[:, None], -axis)
    deep = torch.zeros_like(has)
    deep[pick] = hit.needs_penetration
    deep = deep.reshape(b, k)
    sep = sep - (hitbox.margin * C.BT_TO_UU)[:, None]
    has = torch.where(deep, valid & (sep <= (hitbox.threshold * C.BT_TO_UU)[:, None]), has.reshape(b, k))
    normal = torch.where(deep[..., None], axis, normal.reshape(b, k, 3))
    point = torch.where(deep[..., None], closest_point_triangle(support, v0, v1, v2), point.reshape(b, k, 3))
    return has, normal, point, torch.where(deep, sep, distance.reshape(b, k))


def car_world_contacts(
    mesh: ArenaMesh, cars: CarState, car_params: CarParams, alive: torch.Tensor
) -> CarBodyContacts:
    """Each car body's contact manifolds with the arena at the tick's starting transform (the fused
    kernel's car-world detection; `car_world.world_contacts` is Bullet's).

    The box is the hitbox with its margin, at the hitbox offset; ``alive`` [N, C]: the bodies in the
    world. Mesh triangles of the box's grid cell, in Bullet's visiting order, each give at most one
    point (`box_triangle_contacts`: Bullet's GJK, separating axes where Bullet runs EPA), the point on
    the car lying the distance above the one on the triangle (Bullet's pointA); the normal is then
    smoothed at internal edges. The planes follow, each giving the box's deepest corner (as
    `car_world.plane_contacts`). A point is kept within the car's contact breaking threshold and filed
    into 4-point manifolds per arena object (`manifolds.build_manifolds`). Manifold offsets are the
    points on the car relative to its origin (world axes), depths and offsets in Bullet units, for the
    solve.
    """
    n, c = cars.pos.shape[:2]
    rot = cars.rot_mat.reshape(n * c, 3, 3)
    pos = cars.pos.reshape(n * c, 3)
    each = car_params.hitbox.flat((n, c))  # BT
    half = (each.inner + each.margin[:, None]) * C.BT_TO_UU  # UU
    threshold = each.threshold * C.BT_TO_UU
    center = pos + mat_vec(rot, each.offset * C.BT_TO_UU)
    live = alive.reshape(n * c)
    # the cell's triangles: GJK (separating axes where Bullet runs EPA) where the whole box's separating
    # axes, a lower bound of the distance, are within the threshold; then the internal-edge smoothing
    ids, valid = cell_candidates(mesh, center)
    v0, v1, v2 = mesh.tri_verts[ids].unbind(-2)
    bound, _ = box_triangle_separation(center[:, None], rot[:, None], half[:, None], v0, v1, v2)
    near = valid & live[:, None] & (bound <= threshold[:, None])
    has, raw_normal, point_b, sep = box_triangle_contacts(center, rot, each, v0, v1, v2, near)
    point_a = point_b + raw_normal * sep[..., None]
    normal, _ = adjust_internal_edge_contacts(
        raw_normal, point_b, v0, v1, v2, mesh.tri_normals[ids], mesh.edge_angle[ids], mesh.edge_flags[ids]
    )
    # the planes, after the meshes: the deepest corner along each plane's normal
    p_normal = mesh.plane_normals.expand(n * c, -1, -1)
    p_point = deepest_corner(center[:, None], rot[:, None], half[:, None], -p_normal)
    p_depth = dot(p_point, p_normal) - mesh.plane_offsets
    p_has = live[:, None] & (p_depth < threshold[:, None])
    all_has = torch.cat((has, p_has), 1)
    order = torch.sort((~all_has).to(torch.int8), dim=1, stable=True).indices  # found points, in order
    pick = lambda x: gather_rows(x, order)
    plane_object = PLANE_OBJECT_BASE + torch.arange(mesh.num_planes, device=pos.device).expand(n * c, -1)
    count = all_has.sum(1)
    held = pick(all_has)
    bt = C.UU_TO_BT_F32
    found = SphereContacts(
        count=count.to(torch.int32),
        object=torch.where(held, pick(torch.cat((mesh.tri_mesh[ids].to(torch.int64), plane_object), 1)), -1).to(torch.int32),
        feature=torch.zeros_like(held, dtype=torch.int32),
        normal=pick(torch.cat((normal, p_normal), 1)),
        point=torch.zeros_like(pick(torch.cat((point_a, p_point), 1))),
        offset=(pick(torch.cat((point_a, p_point), 1)) - pos[:, None]) * bt,
        depth=pick(torch.cat((sep, p_depth), 1)) * bt,
    )
    last = gather_rows(pick(torch.cat((raw_normal, p_normal), 1)), (count - 1).clamp(min=0)[:, None])[:, 0]
    some = count > 0
    return CarBodyContacts(
        manifolds=build_manifolds(found),
        has_contact=some.reshape(n, c),
        contact_normal=torch.where(some[:, None], last, 0.0).reshape(n, c, 3),
    )


def solve_bodies(
    ball: BallState, sleeping: torch.Tensor, cars: CarState, ext_v: torch.Tensor, ext_w: torch.Tensor,
    car_ball: CarBallContacts, car_car: CarCarContacts, world: World, params: TickParams,
) -> SolverResult:
    """Bullet's sequential-impulse solve of the contacts between bodies alone: each car's row with the
    ball (car A, ball B; friction 2.0, restitution 0), then each pair's rows (car b A, car a B;
    friction 0.09, restitution 0.1), in the island manager's order for one island (the ball's pairs,
    then each car's): the split-impulse push, then 10 iterations of the normal rows and the friction
    rows. ``ball``: at the tick's start (a sleeping ball is not damped and has no gravity); ``cars``
    after their pre-tick, with their external impulses ``ext_v``, ``ext_w`` [N, C, 3]. Returns each
    body's deltas, the ball's (body 0) and the cars' (1 + c) [N, 1 + C, 3], BT; the arena rows of
    each body (`ball.physics_step`, `solve_car_world`) start from them."""
    n, c = cars.pos.shape[:2]
    device = cars.pos.device
    awake = ~sleeping
    ball_vel = torch.where(awake[:, None], ball_mod.apply_damping(ball.vel, params), ball.vel)
    bodies = solver_bodies(ball_vel, ball.ang_vel, awake, cars, ext_v, ext_w, world, params)
    pos_bt, center = cars.pos * C.UU_TO_BT_F32, ball.pos * C.UU_TO_BT_F32
    cb, cc = car_ball, car_car
    ball_rows = ContactRows(
        body_a=broadcast(1 + torch.arange(c, device=device), cb.held).to(torch.int64),
        body_b=broadcast(0, cb.held).to(torch.int64),
        normal=cb.normal,
        rel_pos_a=cb.point_on_car - pos_bt,
        rel_pos_b=cb.point_on_ball - center[:, None],
        depth=cb.depth,
        friction=broadcast(C.CARBALL_COLLISION_FRICTION, cb.depth).float(),
        restitution=broadcast(C.CARBALL_COLLISION_RESTITUTION, cb.depth).float(),
        special=torch.zeros_like(cb.held),
        active=cb.held,
    )
    k = cc.added.shape[2]
    flat = lambda x: x.reshape(n, -1, *x.shape[3:])
    each = lambda x: x[None, :, None].expand(n, -1, k).reshape(n, -1)
    pos_a, pos_b = pos_bt[:, cc.pairs[:, 0], None], pos_bt[:, cc.pairs[:, 1], None]
    pair_rows = ContactRows(
        body_a=each(1 + cc.pairs[:, 1]),
        body_b=each(1 + cc.pairs[:, 0]),
        normal=flat(cc.normal),
        rel_pos_a=flat(cc.point_on_b - pos_b),
        rel_pos_b=flat(cc.point_on_a - pos_a),
        depth=flat(cc.depth),
        friction=torch.full_like(flat(cc.depth), C.CARCAR_COLLISION_FRICTION),
        restitution=torch.full_like(flat(cc.depth), C.CARCAR_COLLISION_RESTITUTION),
        special=torch.zeros_like(flat(cc.added)),
        active=flat(torch.arange(k, device=device) < cc.count[..., None]),  # the held points, first
    )
    rows = ContactRows(
        **{f.name: torch.cat((getattr(ball_rows, f.name), getattr(pair_rows, f.name)), 1) for f in dataclasses.fields(ContactRows)}
    )
    return solve_contacts(rows, bodies, params, use_kernels=False)


def solve_car_world(
    contacts: CarBodyContacts, cars: CarState, ext_v: torch.Tensor, ext_w: torch.Tensor, car_params: CarParams,
    params: TickParams, start: SolverResult | None = None,
) -> BodySolve:
    """Bullet's sequential-impulse solve of each car's arena contacts alone (`sequential_impulse`:
    the split-impulse push, then 10 iterations of the normal rows and the friction rows; friction and
    restitution from the mutators' car_world_friction / car_world_restitution), the points in manifold
    order, starting from ``start``'s deltas [N, C, 3] (`solve_bodies`' for the cars, BT; zeros when
    None). Returns what `car.physics_step` takes."""
    n, c = cars.pos.shape[:2]
    m = contacts.manifolds
    b = n * c
    held = m.held().reshape(b, -1)
    normal = m.normal.reshape(b, -1, 3)
    rows = ContactRows(
        body_a=torch.zeros_like(held, dtype=torch.int64),
        body_b=torch.full_like(held, -1, dtype=torch.int64),
        normal=normal,
        rel_pos_a=m.offset.reshape(b, -1, 3),
        rel_pos_b=torch.zeros_like(normal),
        depth=m.depth.reshape(b, -1),
        friction=torch.full_like(held, params.car_world_friction, dtype=normal.dtype),
        restitution=torch.full_like(held, params.car_world_restitution, dtype=normal.dtype),
        special=torch.zeros_like(held),
        active=held,
    )
    bt = C.UU_TO_BT_F32
    one = lambda x: x.reshape(b, 1, *x.shape[2:])
    inv_inertia = rb.inv_inertia_world(cars.rot_mat, car_params.hitbox.inv_inertia_local)
    bodies = SolverBodies(
        vel=one(cars.vel * bt), ang_vel=one(cars.ang_vel), ext_v=one(ext_v * bt), ext_w=one(ext_w),
        inv_mass=torch.full((b, 1), CAR_INV_MASS, device=normal.device), inv_inertia=one(inv_inertia),
    )
    first = None if start is None else SolverResult(*(one(x) for x in (start.dv, start.dw, start.push, start.turn)))
    solved = solve_contacts(rows, bodies, params, use_kernels=False, start=first)
    back = lambda x: x[:, 0].reshape(n, c, 3)
    return BodySolve(
        dv=back(solved.dv) * C.BT_TO_UU, dw=back(solved.dw), push_v=back(solved.push) * C.BT_TO_UU,
        push_w=back(solved.turn), has_world_contact=contacts.has_contact,
        world_contact_normal=contacts.contact_normal,
    )
