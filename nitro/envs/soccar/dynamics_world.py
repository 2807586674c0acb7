"""btDiscreteDynamicsWorld::stepSimulation for an arena with cars: the ball and the cars together.

Reference: RocketSim (ZealanL/RocketSim, MIT) `Arena::Step` and the Bullet 3.24 it vendors. One
substep per tick, in Bullet's order:

1. `predictUnconstraintMotion`: an awake ball's damping; gravity and the cars' pre-tick forces become
   the solver's external impulses (a sleeping ball gets none).
2. Collision detection at the tick-start transforms: the ball against the arena (`ball`), the car
   bodies against the arena (`car_world`), each car against the ball (`car_ball`) and each pair of
   cars against each other (`car_car`). A demolished car collides with nothing.
3. Islands and order (`island_manager`): bodies whose broadphase boxes overlap share an island; the
   dispatcher's manifolds (the ball's pairs, then each car's, empty ones included) are quicksorted
   by island, and the solver visits their points in that order.
4. The solve (`sequential_impulse`): the ball's arena points are RocketSim's special contacts,
   averaged into one row after all others.
5. Write-back and integration (`ball.integrate`, `car.physics_step`).

`perform_discrete_collision_detection` is steps 1 and 2 and `solve_constraints` steps 3 to 5:
`arena.tick` runs RocketSim's contact-added callbacks (`Ball::_OnHit`, bumps and demos) between them,
on the contacts of step 2 (`BodyContacts`), as Bullet fires them during its collision detection;
`step_simulation` is the two without callbacks. Ball-only arenas keep `ball.physics_step`, which is
this step with no cars.
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import ball as ball_mech
from nitro.envs.soccar import car, car_ball, car_car, car_world
from nitro.envs.soccar import constants as C
from nitro.envs.soccar import rigid_body as rb
from nitro.envs.soccar.contacts import (
    MANIFOLD_POINTS,
    PLANE_OBJECT_BASE,
    BodyContacts,
    BodySolve,
    CarBallContacts,
    CarCarContacts,
    CarWorldContacts,
    ContactManifolds,
    ContactRows,
)
from nitro.envs.soccar.island_manager import (
    MAX_BODY_MANIFOLDS,
    ball_pairs,
    island_tags,
    pair_positions,
    quicksort_positions,
)
from nitro.envs.soccar.mutators import TickParams, ball_mass_props
from nitro.envs.soccar.rigid_body import Forces
from nitro.envs.soccar.sequential_impulse import SolverBodies, compact_rows, solve_contacts
from nitro.envs.soccar.state import BallState, CarState, World
from nitro.envs.soccar.vec import broadcast, constant, dot, mat_vec

_f32 = C.f32
CAR_INV_MASS = _f32(1 / _f32(C.CAR_MASS_BT))


def solver_bodies(ball_vel, ball_ang_vel, awake, cars: CarState, ext_v, ext_w, world: World, params) -> SolverBodies:
    """The ball (0) and the cars (1 + c) as the solver's bodies, Bullet units."""
    n = ball_vel.shape[0]
    inv_mass, inv_inertia, gravity = ball_mass_props(params)
    ball_ext = torch.zeros_like(ball_vel)
    ball_ext[:, 2] = torch.where(awake, gravity, 0.0)
    eye = torch.eye(3, device=ball_vel.device).expand(n, 1, 3, 3)
    car_inv_i = rb.inv_inertia_world(cars.rot_mat, world.cars.hitbox.inv_inertia_local)
    cat = lambda b, c: torch.cat((b[:, None], c), 1)
    return SolverBodies(
        vel=cat(ball_vel * C.UU_TO_BT_F32, cars.vel * C.UU_TO_BT_F32),
        ang_vel=cat(ball_ang_vel, cars.ang_vel),
        ext_v=cat(ball_ext, ext_v * C.UU_TO_BT_F32),
        ext_w=cat(torch.zeros_like(ball_vel), ext_w),
        inv_mass=torch.cat(
            (torch.full((n, 1), inv_mass, device=ball_vel.device), torch.full_like(cars.pos[..., 0], CAR_INV_MASS)), 1
        ),
        inv_inertia=torch.cat((eye * inv_inertia, car_inv_i), 1),
    )


@dataclasses.dataclass
class IslandOrder:
    """Where each manifold lands in the island manager's sorted list (its position), per source."""

    ball_world: torch.Tensor
    """[N, S] for the ball's manifold slots."""
    car_world: torch.Tensor
    """[N, C, S] for the cars' manifold slots."""
    car_ball: torch.Tensor
    """[N, C]."""
    car_car: torch.Tensor
    """[N, P]."""


def island_order(
    ball_objects, ball_mesh_kept, ball_plane_kept, ball_box, world_c: CarWorldContacts, car_box, car_ball_c,
    car_car_c, alive, world: World,
) -> IslandOrder:
    """The dispatcher's manifold list per env and its quicksort by island (`island_manager`)."""
    n, c = alive.shape
    device = alive.device
    pairs = car_car.car_pairs(c)
    # the ball's pairs with the arena, in the dispatcher's order
    ball_rank = torch.where(
        ball_objects >= PLANE_OBJECT_BASE, ball_objects, world.bullet.load_rank[ball_objects.clamp(0, C.SOCCAR_MESH_COUNT - 1)]
    )
    ball_rank = torch.where(ball_objects >= 0, ball_rank, -1)
    ball = pair_positions(ball_rank, ball_mesh_kept, ball_plane_kept, world.bullet)
    n_ball_world = ball["pair_count"]  # [N]
    with_ball = car_ball_c.has_manifold & alive  # [N, C]
    car_count = world_c.pair_count.reshape(n, c) * alive
    with_car = car_car_c.has_manifold  # [N, P] (masked by alive by the caller)
    # the blocks: the ball's (its arena pairs, then its car pairs), then each car's (likewise)
    ball_block = n_ball_world + with_ball.sum(1)
    car_pairs_of = torch.zeros(n, c, dtype=torch.int64, device=device)
    before_pair = torch.zeros_like(with_car, dtype=torch.int64)
    for p, (a, _) in enumerate(pairs):
        before_pair[:, p] = car_pairs_of[:, a]
        car_pairs_of[:, a] = car_pairs_of[:, a] + with_car[:, p].to(torch.int64)
    blocks = torch.cat((ball_block[:, None], car_count + car_pairs_of), 1)  # [N, 1 + C]
    block_start = torch.cumsum(blocks, 1) - blocks
    car_start = block_start[:, 1:]
    total = blocks.sum(1)
    # islands: the ball's pairs with the cars, then the cars' with each other, where both merge
    box_overlap = lambda a_min, a_max, b_min, b_max: ~((a_min > b_max) | (a_max < b_min)).any(-1)
    body_pairs, live = [], []
    for k in range(c):
        body_pairs.append((0, 1 + k))
        live.append(alive[:, k] & box_overlap(ball_box[0], ball_box[1], car_box[0][:, k], car_box[1][:, k]))
    for a, b in pairs:
        body_pairs.append((1 + a, 1 + b))
        live.append(alive[:, a] & alive[:, b] & box_overlap(car_box[0][:, a], car_box[1][:, a], car_box[0][:, b], car_box[1][:, b]))
    if body_pairs:
        tags = island_tags(
            constant(tuple(body_pairs), device, torch.int64).expand(n, -1, -1), torch.stack(live, 1), 1 + c
        )
    else:
        tags = torch.zeros(n, 1, dtype=torch.int64, device=device)
    # every manifold's element index and key, then the sort
    width = MAX_BODY_MANIFOLDS * (1 + c) + c + len(pairs)
    slots = torch.arange(width, device=device)
    block_of = (slots[None, :, None] >= block_start[:, None, :]).sum(-1) - 1
    keys = tags.gather(1, block_of.clamp(0, c))
    placed = quicksort_positions(keys, total)
    at = lambda index: placed.gather(1, index.reshape(n, -1).clamp(0, width - 1)).reshape(index.shape)
    ball_world_at = at(torch.where(ball["pair_position"] >= 0, ball["pair_position"], 0))
    car_ball_index = n_ball_world[:, None] + torch.cumsum(with_ball.to(torch.int64), 1) - with_ball.to(torch.int64)
    car_world_index = car_start[..., None] + world_c.pair_position.reshape(n, c, -1).clamp(min=0)
    car_car_index = torch.stack(
        [car_start[:, a] + car_count[:, a] + before_pair[:, p] for p, (a, _) in enumerate(pairs)], 1
    ) if pairs else torch.zeros(n, 0, dtype=torch.int64, device=device)
    return IslandOrder(
        ball_world=ball_world_at, car_world=at(car_world_index), car_ball=at(car_ball_index), car_car=at(car_car_index)
    )


def _rows(body_a, body_b, normal, rel_a, rel_b, depth, friction, restitution, special, active) -> ContactRows:
    """ContactRows from [N, R, ...] pieces, the scalars broadcast."""
    return ContactRows(
        body_a=broadcast(body_a, active).to(torch.int64),
        body_b=broadcast(body_b, active).to(torch.int64),
        normal=normal,
        rel_pos_a=rel_a,
        rel_pos_b=rel_b,
        depth=depth,
        friction=broadcast(friction, depth).to(depth.dtype),
        restitution=broadcast(restitution, depth).to(depth.dtype),
        special=broadcast(special, active).to(torch.bool),
        active=active,
    )


def _cat_rows(parts: list[tuple[ContactRows, torch.Tensor]]) -> tuple[ContactRows, torch.Tensor]:
    fields = [f.name for f in dataclasses.fields(ContactRows)]
    rows = ContactRows(**{name: torch.cat([getattr(r, name) for r, _ in parts], 1) for name in fields})
    return rows, torch.cat([k for _, k in parts], 1)


def contact_rows(
    ball_m: ContactManifolds, world_c: CarWorldContacts, car_ball_c: CarBallContacts, car_car_c: CarCarContacts,
    order: IslandOrder, alive, awake, ball_center, pos_bt, rot, params: TickParams,
) -> tuple[ContactRows, torch.Tensor]:
    """Every contact point as a solver row [N, R] and its place in the solve (manifold position * 4
    + point index)."""
    n, c = alive.shape
    points = torch.arange(MANIFOLD_POINTS, device=alive.device)
    flat = lambda x: x.reshape(n, -1)  # [N, ...] scalars per point -> [N, R]
    flat3 = lambda x: x.reshape(n, -1, 3)  # vectors per point -> [N, R, 3]
    # the ball against the arena: RocketSim's special points
    held = ball_m.held() & awake[:, None, None]
    zero = torch.zeros_like(ball_m.offset)
    ball_rows = _rows(
        0, -1, flat3(ball_m.normal), flat3(ball_m.offset * C.UU_TO_BT_F32), flat3(zero), flat(ball_m.depth * C.UU_TO_BT_F32),
        params.ball_friction, params.ball_restitution, True, flat(held),
    )
    ball_key = flat(order.ball_world[..., None] * MANIFOLD_POINTS + points)
    # the cars against the arena
    m = world_c.manifolds
    shape = (n, c) + m.count.shape[1:]
    held = (m.held().reshape(*shape, MANIFOLD_POINTS) & alive[..., None, None])
    car_pos, car_rot = pos_bt[:, :, None, None], rot[:, :, None, None]
    offset = m.offset.reshape(*shape, MANIFOLD_POINTS, 3)
    rel = (mat_vec(car_rot, offset) + car_pos) - car_pos
    body = (1 + torch.arange(c, device=alive.device))[None, :, None, None].expand(held.shape)
    world_rows = _rows(
        flat(body), -1, flat3(m.normal), flat3(rel), flat3(torch.zeros_like(rel)),
        flat(m.depth.reshape(*shape, MANIFOLD_POINTS)), params.car_world_friction, params.car_world_restitution,
        False, flat(held),
    )
    world_key = flat(order.car_world[..., None] * MANIFOLD_POINTS + points)
    # each car against the ball: the car is A, the ball B
    cb = car_ball_c
    ball_rows_cb = _rows(
        1 + torch.arange(c, device=alive.device).expand(n, c), 0, cb.normal, cb.point_on_car - pos_bt,
        cb.point_on_ball - ball_center[:, None], cb.depth, C.CARBALL_COLLISION_FRICTION,
        C.CARBALL_COLLISION_RESTITUTION, False, cb.held & alive,
    )
    car_ball_key = order.car_ball * MANIFOLD_POINTS
    # each pair of cars: car b is A, car a B
    cc = car_car_c
    ia, ib = cc.pairs[:, 0], cc.pairs[:, 1]
    held = points < cc.count[..., None]
    pos_a, pos_b = pos_bt[:, ia, None], pos_bt[:, ib, None]
    pair_rows = _rows(
        flat((1 + ib)[None, :, None].expand(held.shape)), flat((1 + ia)[None, :, None].expand(held.shape)),
        flat3(cc.normal), flat3(cc.point_on_b - pos_b), flat3(cc.point_on_a - pos_a), flat(cc.depth),
        C.CARCAR_COLLISION_FRICTION, C.CARCAR_COLLISION_RESTITUTION, False, flat(held),
    )
    pair_key = flat(order.car_car[..., None] * MANIFOLD_POINTS + points)
    return _cat_rows(
        [(ball_rows, ball_key), (world_rows, world_key), (ball_rows_cb, car_ball_key), (pair_rows, pair_key)]
    )


def special_row(rows: ContactRows, params: TickParams) -> ContactRows:
    """convertContactSpecial: the ball's special points (``rows`` in solve order) as one row [N, 1]:
    the mean normal (not renormalised) and, as the lever arm, minus the normal times the mean
    distance of the points from the ball's centre, against the arena."""
    total_normal = torch.zeros_like(rows.normal[:, 0])
    total_dist = torch.zeros_like(rows.depth[:, 0])
    count = torch.zeros_like(rows.depth[:, 0])
    special = rows.special & rows.active
    for k in range(rows.active.shape[1]):  # m_totalNormal and m_totalDist, point by point
        on = special[:, k]
        total_normal = torch.where(on[:, None], total_normal + rows.normal[:, k], total_normal)
        length = torch.sqrt(dot(rows.rel_pos_a[:, k], rows.rel_pos_a[:, k]))
        total_dist = torch.where(on, total_dist + length, total_dist)
        count = count + on.to(count.dtype)
    some = count > 0
    safe = torch.where(some, count, 1.0)
    distance = total_dist / safe
    normal = total_normal * (1.0 / safe)[:, None]
    one = lambda x: x[:, None]
    return _rows(
        0, -1, one(normal), one(normal * -distance[:, None]), one(torch.zeros_like(normal)), one(distance),
        params.ball_friction, params.ball_restitution, False, one(some),
    )


@dataclasses.dataclass
class Detection:
    """What `perform_discrete_collision_detection` leaves for the callbacks and `solve_constraints`:
    the bodies' velocities and external impulses after predictUnconstraintMotion, and every contact."""

    alive: torch.Tensor
    """The car bodies in the world this tick [N, C] bool (a car demolished at the tick's start is not)."""
    awake: torch.Tensor
    """The ball moves this tick [N] bool."""
    ball_vel: torch.Tensor
    """The ball's velocity after damping: what RocketSim's callbacks read, UU/s [N, 3]."""
    ext_v: torch.Tensor
    """The cars' external impulses as velocity, UU/s [N, C, 3]."""
    ext_w: torch.Tensor
    """The cars' external impulses as angular velocity, rad/s [N, C, 3]."""
    ball_world: ContactManifolds
    """The ball's manifolds with the arena (UU)."""
    ball_box: tuple[torch.Tensor, torch.Tensor]
    """The ball's broadphase AABB (min, max), BT [N, 3] each."""
    ball_mesh_kept: torch.Tensor
    """Which of the ball's mesh pairs keep a manifold (`island_manager.ball_pairs`)."""
    ball_plane_kept: torch.Tensor
    """Which of the ball's plane pairs keep a manifold."""
    car_world: CarWorldContacts
    """The cars' contacts with the arena [N * C, ...]."""
    car_box: tuple[torch.Tensor, torch.Tensor]
    """The cars' broadphase AABBs (min, max), BT [N, C, 3] each."""
    contacts: BodyContacts
    """The contacts between bodies: what RocketSim's car-ball and car-car callbacks receive."""


def perform_discrete_collision_detection(
    ball: BallState, sleeping: torch.Tensor, cars: CarState, forces: Forces, world: World, params: TickParams,
    alive: torch.Tensor | None = None,
) -> Detection:
    """Steps 1 and 2 of the module's docstring: predictUnconstraintMotion, then every contact at the
    tick-start transforms. ``alive`` [N, C]: the car bodies in the world (default: not demolished).
    RocketSim's contact-added callbacks run on ``contacts`` between this and `solve_constraints`."""
    n, c = cars.pos.shape[:2]
    hitbox = world.cars.hitbox.flat(torch.Size((n, c)))
    alive = ~cars.is_demoed if alive is None else alive
    awake = ~sleeping
    dt = params.tick_time
    # 1. predictUnconstraintMotion and the external impulses
    ball_vel = torch.where(awake[:, None], ball_mech.apply_damping(ball.vel, params), ball.vel)
    ext_v, ext_w = car.external_impulses(cars, forces, world.cars, params)
    # 2. collision detection at the tick-start transforms
    pos_bt, vel_bt, rot = cars.pos * C.UU_TO_BT_F32, cars.vel * C.UU_TO_BT_F32, cars.rot_mat
    flat = lambda x: x.reshape(n * c, *x.shape[2:])
    world_c = car_world.world_contacts(
        world.mesh, world.bullet, flat(pos_bt), flat(rot), flat(vel_bt), flat(cars.ang_vel), hitbox, dt
    )
    ball_m = ball_mech.world_contacts(world.mesh, ball.pos, params)
    ball_box_min, ball_box_max, mesh_kept, plane_kept = ball_pairs(world.bullet, ball.pos, ball_vel, sleeping, params)
    car_ball_c = car_ball.car_ball_contacts(ball.pos, ball.rot_mat, pos_bt, rot, world.cars.hitbox, params)
    car_ball_c = dataclasses.replace(
        car_ball_c, touched=car_ball_c.touched & alive, held=car_ball_c.held & alive, has_manifold=car_ball_c.has_manifold & alive
    )
    car_car_c = car_car.car_car_contacts(pos_bt, rot, hitbox)
    both = alive[:, car_car_c.pairs[:, 0]] & alive[:, car_car_c.pairs[:, 1]]
    car_car_c = dataclasses.replace(
        car_car_c, has_manifold=car_car_c.has_manifold & both, added=car_car_c.added & both[..., None],
        count=car_car_c.count * both,
    )
    car_box = car_world.broadphase_aabb(flat(pos_bt), flat(rot), flat(vel_bt), flat(cars.ang_vel), hitbox, dt)
    return Detection(
        alive=alive, awake=awake, ball_vel=ball_vel, ext_v=ext_v, ext_w=ext_w, ball_world=ball_m,
        ball_box=(ball_box_min, ball_box_max), ball_mesh_kept=mesh_kept, ball_plane_kept=plane_kept,
        car_world=world_c, car_box=tuple(x.reshape(n, c, 3) for x in car_box),
        contacts=BodyContacts(car_ball=car_ball_c, car_car=car_car_c),
    )


def solve_constraints(
    ball: BallState, cars: CarState, found: Detection, world: World, params: TickParams
) -> tuple[BallState, CarState]:
    """Steps 3 to 5 of the module's docstring on ``found``'s contacts: islands and order, the solve,
    write-back and integration. ``ball`` and ``cars`` as the callbacks left them (their caches, hit
    info and demolitions); the bodies ``found.alive`` holds are simulated to the step's end, a car the
    callbacks demolished included, and keep their ``is_demoed``."""
    n, c = cars.pos.shape[:2]
    pos_bt, rot = cars.pos * C.UU_TO_BT_F32, cars.rot_mat
    contacts = found.contacts
    # 3. islands and the solver's order
    order = island_order(
        found.ball_world.object.to(torch.int64), found.ball_mesh_kept, found.ball_plane_kept, found.ball_box,
        found.car_world, found.car_box, contacts.car_ball, contacts.car_car, found.alive, world,
    )
    # 4. the solve
    rows, key = contact_rows(
        found.ball_world, found.car_world, contacts.car_ball, contacts.car_car, order, found.alive, found.awake,
        ball.pos * C.UU_TO_BT_F32, pos_bt, rot, params,
    )
    rows = compact_rows(rows, key)
    rows, _ = _cat_rows([(rows, key[:, :0]), (special_row(rows, params), key[:, :1])])
    bodies = solver_bodies(found.ball_vel, ball.ang_vel, found.awake, cars, found.ext_v, found.ext_w, world, params)
    solved = solve_contacts(rows, bodies, params)
    # 5. write-back and integration
    to_uu = C.BT_TO_UU
    dv, dw, push = solved.dv[:, 0] * to_uu, solved.dw[:, 0], solved.push[:, 0] * to_uu
    awake, ball_vel = found.awake, found.ball_vel
    moved = ball_mech.integrate(ball.pos, ball_vel, ball.ang_vel, dv, dw, push, params)
    woken = ball_mech.integrate(ball.pos, ball_vel, ball.ang_vel, dv, dw, push, dataclasses.replace(params, gravity_dv=0.0))
    pos, vel, ang_vel = (torch.where(awake[:, None], a, b) for a, b in zip(moved, woken))  # no gravity when asleep
    ball = dataclasses.replace(ball, pos=pos, vel=vel, ang_vel=ang_vel)
    contact = found.car_world.has_contact.reshape(n, c) & found.alive
    body = BodySolve(
        dv=solved.dv[:, 1:] * to_uu,
        dw=solved.dw[:, 1:],
        push_v=solved.push[:, 1:] * to_uu,
        push_w=solved.turn[:, 1:],
        has_world_contact=contact,
        world_contact_normal=found.car_world.contact_normal.reshape(n, c, 3),
    )
    simulated = car.physics_step(dataclasses.replace(cars, is_demoed=~found.alive), found.ext_v, found.ext_w, body, params)
    return ball, dataclasses.replace(simulated, is_demoed=cars.is_demoed)


def step_simulation(
    ball: BallState, sleeping: torch.Tensor, cars: CarState, forces: Forces, world: World, params: TickParams
) -> tuple[BallState, CarState, BodyContacts]:
    """One Bullet step of the ball and the cars without RocketSim's callbacks (see the module's
    docstring): the new ball and cars, and the tick's contacts between bodies."""
    found = perform_discrete_collision_detection(ball, sleeping, cars, forces, world, params)
    ball, cars = solve_constraints(ball, cars, found, world, params)
    return ball, cars, found.contacts
