"""RocketSim's raycast vehicle (btVehicleRL): four suspension rays, suspension and friction impulses.

Reference: RocketSim (ZealanL/RocketSim, MIT) `src/Sim/btVehicleRL/btVehicleRL.cpp`, with Bullet's
resolveSingleBilateral / resolveSingleCollision (btContactConstraint.cpp). Per tick, in two halves
around the car's control code (`car.pre_tick_update`):

`update_vehicle_first` (before the controls are read)
    `update_wheel_transforms`: each wheel's hard point and steered axle from the chassis transform
    and the *previous* tick's steer angle; `ray_cast`: each wheel's ray against the arena, the other
    cars and the ball (contact, suspension length and velocity, the sticky extra pushback);
    `calc_friction_impulses`: lateral and rolling friction against the body under the wheel, from the
    *previous* tick's engine force, brake and friction values (the one-tick lag of ground controls
    RocketSim has).
`update_vehicle_second` (after the controls, jumps and flips)
    `update_suspension`: spring and damper impulses at the contact points; `apply_friction_impulses`.

A wheel on another car or on the ball (btDefaultVehicleRaycaster tests the whole world, all but the
car itself) counts as touching (is_on_ground, the wheel count) but not as world contact: no sticky
force and no extra pushback; the friction impulses see that body's velocity, mass and inertia, and
nothing pushes back on it (btVehicleRL applies its impulses to the chassis only). The other bodies
are read as they are when the cars' pre-ticks start (`Bodies`): RocketSim runs its cars' pre-ticks
one after another in the order of a std::unordered_set of Car pointers (memory-address order), so a
car whose pre-tick runs later sees the velocity changes of the earlier ones; here every car sees the
others as if its own pre-tick ran first.

Wheels are the last axis but one: [N, C, 4, ...] in btVehicleRL's order (front-right, front-left,
back-right, back-left). Units are UU (RocketSim's Bullet units x 50), masses Bullet's.
"""

from __future__ import annotations

import dataclasses
import itertools

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar import ray_cast as arena_ray_cast
from nitro.envs.soccar.arena_mesh import ArenaMesh
from nitro.envs.soccar.car_config import CarParams
from nitro.envs.soccar.car_world import box_transform
from nitro.envs.soccar.gjk_pair_detector import ConvexShape
from nitro.envs.soccar.mutators import TickParams, ball_radius_bt
from nitro.envs.soccar.rigid_body import (
    INV_MASS,
    apply_impulse,
    basis_from_quat,
    mat_vec,
    quat_from_axis_angle,
    safe_normalized,
    vec_mat,
    where3,
)
from nitro.envs.soccar.state import BallState, CarState
from nitro.envs.soccar.subsimplex_convex_cast import normalized, ray_cast_convex
from nitro.envs.soccar.vec import cross, dot, eager_cpu

FRICTION_SCALE = C.CAR_MASS_BT / 3.0  # calcFrictionImpulses: chassis mass / 3


@dataclasses.dataclass
class GroundBody:
    """The rigid body under each wheel [N, C, 4, ...]: another car or the ball; zeros (an immovable
    body at the origin) on the static arena and off the ground."""

    pos: torch.Tensor
    """Centre of mass, UU [..., 3]."""
    rot_mat: torch.Tensor
    """[..., 3, 3]."""
    vel: torch.Tensor
    """UU/s [..., 3]."""
    ang_vel: torch.Tensor
    """rad/s [..., 3]."""
    inv_mass: torch.Tensor
    """1 / mass (Bullet's masses) [...]."""
    inv_inertia_local: torch.Tensor
    """1 / principal moments of inertia, mass-UU^2 units [..., 3]."""

    @staticmethod
    def static(hard_point: torch.Tensor) -> GroundBody:
        """The arena under every wheel of ``hard_point`` [N, C, 4, 3]."""
        zero = torch.zeros_like(hard_point)
        return GroundBody(zero, zero[..., None].expand(*zero.shape, 3), zero, zero, zero[..., 0], zero)

    def velocity_at(self, rel_pos: torch.Tensor) -> torch.Tensor:
        """btRigidBody::getVelocityInLocalPoint: vel + ang_vel x rel_pos [..., 3]."""
        return self.vel + cross(self.ang_vel, rel_pos)


@dataclasses.dataclass
class Bodies(GroundBody):
    """What a wheel ray can hit besides the arena, per env [N, B, ...]: the C cars, then the ball, as
    they are when the cars' pre-ticks start (`GroundBody`'s fields, one per body)."""

    responds: torch.Tensor
    """The body has contact response [N, B] bool: a demolished car does not, and a ray whose closest
    hit it is touches nothing (btDefaultVehicleRaycaster::castRay)."""

    @staticmethod
    def of(cars: CarState, ball: BallState, config: CarParams, params: TickParams) -> Bodies:
        n, c = cars.is_demoed.shape
        ones = torch.ones(n, 1, device=ball.pos.device)
        return Bodies(
            pos=torch.cat((cars.pos, ball.pos[:, None]), 1),
            rot_mat=torch.cat((cars.rot_mat, ball.rot_mat[:, None]), 1),
            vel=torch.cat((cars.vel, ball.vel[:, None]), 1),
            ang_vel=torch.cat((cars.ang_vel, ball.ang_vel[:, None]), 1),
            inv_mass=torch.cat(
                (torch.full((n, c), INV_MASS, device=ones.device), ones * params.ball_inv_mass), 1
            ),
            inv_inertia_local=torch.cat(
                (
                    config.inv_inertia_local.expand(n, c, 3),
                    (ones * params.ball_inv_inertia)[..., None].expand(n, 1, 3),
                ),
                1,
            ),
            responds=torch.cat((~cars.is_demoed, ones > 0), 1),
        )

    def under(self, body: torch.Tensor) -> GroundBody:
        """The `GroundBody` of each wheel from the index of the body its ray hit [N, C, 4] (-1: none)."""
        n = body.shape[0]
        index = body.clamp(min=0).reshape(n, -1)
        on_body = body >= 0

        def take(x: torch.Tensor) -> torch.Tensor:
            tail = x.shape[2:]
            picked = x.gather(1, index.view(n, -1, *([1] * len(tail))).expand(n, index.shape[1], *tail))
            picked = picked.reshape(*body.shape, *tail)
            return torch.where(on_body.view(*body.shape, *([1] * len(tail))), picked, 0.0)

        fields = dataclasses.fields(GroundBody)
        return GroundBody(**{f.name: take(getattr(self, f.name)) for f in fields})


@dataclasses.dataclass
class Wheels:
    """One tick's wheel infos (btWheelInfoRL's per-tick fields) [N, C, 4, ...]."""

    hard_point: torch.Tensor
    """Ray start (m_hardPointWS), UU [..., 3]."""
    axle: torch.Tensor
    """The steered wheel's lateral axis (its world basis' column 1, previous tick's steer) [..., 3]."""
    is_in_contact: torch.Tensor
    """The ray hit something [...] bool."""
    contact_point: torch.Tensor
    """Hit point (the ray's end when there is no hit), UU [..., 3]."""
    contact_normal: torch.Tensor
    """Unit surface normal at the hit (the chassis' up when there is no hit) [..., 3]."""
    suspension_length: torch.Tensor
    """UU [...]."""
    suspension_relative_velocity: torch.Tensor
    """UU/s [...]."""
    clipped_inv_contact_dot_suspension: torch.Tensor
    """1 / (normal . up), at most 10 [...]."""
    impulse: torch.Tensor
    """Friction impulse per second (m_impulse), zero off the ground [..., 3]."""
    on_world: torch.Tensor
    """The ray hit the static arena (m_isInContactWithWorld) [...] bool."""
    ground: GroundBody
    """The body under the wheel when it is a car or the ball."""


def piecewise(curve, x: torch.Tensor) -> torch.Tensor:
    """LinearPieceCurve::GetOutput: linear between the points, constant beyond them (float32 maths)."""
    pts = [(C.f32(a), C.f32(b)) for a, b in curve]
    out = torch.full_like(x, pts[-1][1])
    for (x0, y0), (x1, y1) in reversed(list(itertools.pairwise(pts))):
        inner = y0 + C.f32(y1 - y0) * ((x - x0) / C.f32(x1 - x0))
        out = torch.where(x < x1, inner, out)
    return torch.where(x <= pts[0][0], pts[0][1], out)


def chassis_axes(rot_mat: torch.Tensor):
    """The chassis' forward, right, up axes (the rotation's columns), broadcast over the wheels."""
    return rot_mat[..., None, :, 0], rot_mat[..., None, :, 1], rot_mat[..., None, :, 2]


def get_forward_speed(car: CarState) -> torch.Tensor:
    """btVehicleRL::getForwardSpeed: velocity along the chassis' forward axis, UU/s [N, C]."""
    return dot(car.vel, car.rot_mat[..., :, 0])


def get_upwards_dir_from_wheel_contacts(wheels: Wheels, up: torch.Tensor) -> torch.Tensor:
    """The normalised sum of the touching wheels' contact normals; the chassis' up if none [N, C, 3]."""
    total = torch.zeros_like(up)
    for i in range(4):
        total = total + where3(wheels.is_in_contact[..., i], wheels.contact_normal[..., i, :], 0.0)
    none = (total == 0).all(-1)
    return where3(none, up, safe_normalized(total))


def update_wheel_transforms(car: CarState, config: CarParams):
    """btVehicleRL::updateWheelTransform for every wheel: (hard_point, axle) [N, C, 4, 3].

    The hard point is the connection point in world space; the axle is the chassis' right axis
    turned about its up axis by the wheel's steer angle (front wheels; last tick's angle).
    """
    _, right, up = chassis_axes(car.rot_mat)
    hard_point = mat_vec(car.rot_mat[..., None, :, :], config.wheel_connection) + car.pos[..., None, :]
    steer = torch.where(config.is_front, car.steer_angle[..., None], 0.0)
    steering = basis_from_quat(quat_from_axis_angle(up.expand_as(hard_point), steer))
    axle = mat_vec(steering, right)
    return hard_point, axle


def resolve_single_collision(car: CarState, inv_inertia, point, normal, distance, solver_dt):
    """Bullet's resolveSingleCollision against a static object, without applying it: the normal
    impulse (>= 0) that would stop the approach and remove erp (0.2) of ``distance`` per solver step."""
    rel_pos = point - car.pos[..., None, :]
    rel_vel = dot(normal, car.vel[..., None, :] + cross(car.ang_vel[..., None, :], rel_pos))
    positional_error = (C.SOLVER_ERP * -distance) / solver_dt[:, None, None]
    velocity_error = -rel_vel
    denom = INV_MASS + dot(
        normal, cross(vec_mat(cross(rel_pos, normal), inv_inertia[..., None, :, :]), rel_pos)
    )
    jac_inv = 1.0 / denom
    return (positional_error * jac_inv + velocity_error * jac_inv).clamp(min=0)


def _cast_where(candidate: torch.Tensor, shape_at, start: torch.Tensor, end: torch.Tensor):
    """`ray_cast_convex` of the rays start -> end [..., 3] where ``candidate`` [...] is set, against
    ``shape_at(lanes)``, the `ConvexShape` of the flat lanes ``lanes``: (hit, fraction, normal) in
    ``candidate``'s shape (no hit elsewhere). Eager CPU runs cast the candidate lanes only."""
    flat = candidate.reshape(-1)
    lanes = (
        flat.nonzero()[:, 0] if eager_cpu(flat) else torch.arange(flat.numel(), device=flat.device)
    )  # sync-ok
    hit, fraction, normal = ray_cast_convex(
        shape_at(lanes), start.reshape(-1, 3)[lanes], end.reshape(-1, 3)[lanes]
    )
    hit = hit & flat[lanes]
    scatter = lambda base, x: base.index_copy(0, lanes, x).reshape(*candidate.shape, *x.shape[1:])
    return (
        scatter(torch.zeros_like(flat), hit),
        scatter(torch.ones_like(flat, dtype=fraction.dtype), torch.where(hit, fraction, 1.0)),
        scatter(start.new_zeros(flat.numel(), 3), normal),
    )


def _passes_near(start, end, center, radius) -> torch.Tensor:
    """Whether the segments start -> end pass within ``radius`` (+ 0.01 BT) of ``center`` (a cheap
    bound: a ray farther from a body's bounding sphere cannot hit it) [...]."""
    seg = end - start
    to_center = center - start
    t = (dot(to_center, seg) / dot(seg, seg)).clamp(0.0, 1.0)
    near = to_center - seg * t[..., None]
    return dot(near, near) <= (radius + 0.01) ** 2


def ray_cast_bodies(bodies: Bodies, config: CarParams, params: TickParams, start, end):
    """btCollisionWorld::rayTest of every wheel ray start -> end [N, C, 4, 3] (UU) against the other
    cars' boxes and the ball (`subsimplex_convex_cast`, in BT): (hit [N, C, 4], fraction, unit normal,
    index of the closest body hit in ``bodies``). The car's own box is ignored (the raycaster's ignore
    object); of equal fractions the first body (the cars in order, then the ball) is kept."""
    n, c = start.shape[:2]
    s, e = start * C.UU_TO_BT_F32, end * C.UU_TO_BT_F32
    hitbox = config.hitbox.flat(torch.Size((n, c)))
    basis, origin = box_transform(
        bodies.pos[:, :c].reshape(-1, 3) * C.UU_TO_BT_F32, bodies.rot_mat[:, :c].reshape(-1, 3, 3), hitbox
    )
    # the cars' boxes: lanes [N, C (the ray's car), 4, C (the box's car)]
    box_of = torch.arange(n * c, device=s.device).view(n, 1, 1, c).expand(n, c, 4, c).reshape(-1)
    half = hitbox.inner + hitbox.margin[:, None]
    box_s, box_e = s[..., None, :].expand(n, c, 4, c, 3), e[..., None, :].expand(n, c, 4, c, 3)
    own = torch.eye(c, dtype=torch.bool, device=s.device)[None, :, None, :]
    near = _passes_near(
        box_s, box_e, origin.view(n, 1, 1, c, 3), torch.linalg.vector_norm(half, dim=-1).view(n, 1, 1, c)
    )
    box_hit, box_fraction, box_normal = _cast_where(
        ~own & near,
        lambda lanes: ConvexShape(
            "box",
            origin[box_of[lanes]],
            hitbox.margin[box_of[lanes]],
            basis=basis[box_of[lanes]],
            half=hitbox.inner[box_of[lanes]],
        ),
        box_s,
        box_e,
    )
    # the ball: lanes [N, C, 4]
    radius = ball_radius_bt(params)
    center = (bodies.pos[:, c] * C.UU_TO_BT_F32).view(n, 1, 1, 3).expand(n, c, 4, 3).reshape(-1, 3)
    ball_hit, ball_fraction, ball_normal = _cast_where(
        _passes_near(s, e, center.view(n, c, 4, 3), radius),
        lambda lanes: ConvexShape("sphere", center[lanes], torch.full_like(center[lanes, 0], radius)),
        s,
        e,
    )
    hit = torch.cat((box_hit, ball_hit[..., None]), -1)  # [N, C, 4, C + 1], the bodies' order
    fraction = torch.cat((box_fraction, ball_fraction[..., None]), -1)
    normal = torch.cat((box_normal, ball_normal[..., None, :]), -2)
    closest = torch.argmin(torch.where(hit, fraction, 2.0), dim=-1, keepdim=True)
    fraction = fraction.gather(-1, closest)[..., 0]
    normal = normal.gather(-2, closest[..., None].expand(n, c, 4, 1, 3))[..., 0, :]
    hit = hit.any(-1)
    return hit, torch.where(hit, fraction, 1.0), normal, torch.where(hit, closest[..., 0], -1)


def ray_cast(
    car: CarState,
    config: CarParams,
    hard_point,
    mesh: ArenaMesh,
    bodies: Bodies | None,
    params: TickParams,
    inv_inertia,
    solver_dt,
):
    """btVehicleRL::rayCast for every wheel: (contact fields, the `GroundBody` under each wheel,
    extra_pushback [N, C, 4]).

    The ray runs from the hard point down the chassis' up axis for rest + travel + radius - 2.5 UU,
    and stops at the closest of the arena (tested first: it wins ties), the other cars and the ball
    (``bodies``; None: the arena alone).
    A hit sets the suspension length (clamped to rest +- 12 UU), its velocity along the contact normal
    (the chassis' velocity only, projected, clipped where the normal is far from up), and, when the
    wheel is pushed more than 2.5 UU past its rest against the static arena, the extra pushback
    impulse (a quarter of resolveSingleCollision's), which then persists while the wheel keeps
    touching (on a car or the ball too: RocketSim leaves it as it was).
    """
    n, c = car.pos.shape[:2]
    _, _, up = chassis_axes(car.rot_mat)
    rest = config.suspension_rest_length
    radius = config.wheel_radius
    target = hard_point + -up * config.ray_length[..., None]
    hits = arena_ray_cast.ray_cast(mesh, hard_point.reshape(-1, 3), target.reshape(-1, 3))
    on_arena = hits.hit.reshape(n, c, 4)
    fraction = torch.where(on_arena, hits.fraction.reshape(n, c, 4), 1.0)
    normal = hits.normal.reshape(n, c, 4, 3)
    hit, on_body, ground = on_arena, torch.zeros_like(on_arena), GroundBody.static(hard_point)
    if bodies is not None:  # the closest of the arena, the other cars and the ball
        body_hit, body_fraction, body_normal, body = ray_cast_bodies(
            bodies, config, params, hard_point, target
        )
        on_body = body_hit & (body_fraction < fraction)
        responds = bodies.responds.gather(1, body.clamp(min=0).reshape(n, -1)).reshape(n, c, 4)
        hit = on_arena & ~on_body | on_body & responds
        fraction = torch.where(on_body, body_fraction, fraction)
        normal = where3(
            on_body, normalized(torch.where(on_body[..., None], body_normal, 1.0)), normal
        )  # castRay's
        ground = bodies.under(torch.where(hit & on_body, body, -1))
    on_world = hit & ~on_body
    fraction = fraction[..., None]
    point = where3(hit, hard_point * (1.0 - fraction) + target * fraction, target)
    normal = where3(hit, normal, up.expand_as(hard_point))
    trace = dot(hard_point - point, up)
    length = torch.minimum(
        torch.maximum(trace - radius, rest - C.MAX_SUSPENSION_TRAVEL), rest + C.MAX_SUSPENSION_TRAVEL
    )
    length = torch.where(hit, length, rest + C.MAX_SUSPENSION_TRAVEL)
    denominator = dot(normal, up)
    rel_pos = point - car.pos[..., None, :]
    proj_vel = dot(normal, car.vel[..., None, :] + cross(car.ang_vel[..., None, :], rel_pos))
    steep = denominator > 0.1
    inv = 1.0 / torch.where(steep, denominator, 1.0)
    relative_velocity = torch.where(hit & steep, proj_vel * inv, 0.0)
    clipped_inv = torch.where(hit, torch.where(steep, inv, 10.0), 1.0)
    threshold = (rest + radius) - C.SUSPENSION_SUBTRACTION
    pushed = on_world & (trace < threshold)
    pushback = resolve_single_collision(car, inv_inertia, point, normal, trace - threshold, solver_dt) / 4
    extra_pushback = torch.where(pushed, pushback, torch.where(hit, car.extra_pushback, 0.0))
    contact = {
        "is_in_contact": hit,
        "on_world": on_world,
        "contact_point": point,
        "contact_normal": normal,
        "suspension_length": length,
        "suspension_relative_velocity": relative_velocity,
        "clipped_inv_contact_dot_suspension": clipped_inv,
    }
    return contact, ground, extra_pushback


def resolve_single_bilateral(car: CarState, config: CarParams, ground: GroundBody, point, axis):
    """Bullet's resolveSingleBilateral of the chassis (body 1) against the body under the wheel (body
    2; immovable on the arena): -0.2 x the relative velocity along ``axis`` at ``point`` times the
    effective mass of the pair (the lateral friction impulse) [N, C, 4]."""
    rel_pos = point - car.pos[..., None, :]
    rel_pos2 = point - ground.pos
    vel = (car.vel[..., None, :] + cross(car.ang_vel[..., None, :], rel_pos)) - ground.velocity_at(rel_pos2)
    a_j = mat_vec(car.rot_mat.transpose(-1, -2)[..., None, :, :], cross(rel_pos, axis))
    b_j = mat_vec(ground.rot_mat.transpose(-1, -2), cross(rel_pos2, -axis))
    jac_diag = ((INV_MASS + dot(config.inv_inertia_local[:, None, :] * a_j, a_j)) + ground.inv_mass) + dot(
        ground.inv_inertia_local * b_j, b_j
    )
    return (-C.VEHICLE_CONTACT_DAMPING * dot(axis, vel)) * (1.0 / jac_diag)


def calc_friction_impulses(car: CarState, config: CarParams, wheels: Wheels, dt: float) -> torch.Tensor:
    """btVehicleRL::calcFrictionImpulses: each touching wheel's friction impulse per second [N, C, 4, 3].

    Lateral: resolveSingleBilateral along the axle projected onto the contact plane, times the
    wheel's lateral friction. Longitudinal: the engine force, or without throttle the brake's
    rolling friction (the contact speed relative to the body under the wheel times 113.74, clamped
    to the brake), times the longitudinal friction. RocketSim takes that body's velocity at the
    contact point's offset from the *car's* centre (calcFrictionImpulses' "simplified
    calcRollingFriction"), and so does this. Engine force, brake and frictions are the values the previous tick's controls set.
    """
    normal = wheels.contact_normal
    axle = safe_normalized(wheels.axle - normal * dot(wheels.axle, normal)[..., None])
    forward = safe_normalized(cross(normal, axle))
    side_impulse = resolve_single_bilateral(car, config, wheels.ground, wheels.contact_point, axle)
    rel_pos = wheels.contact_point - car.pos[..., None, :]
    contact_vel = (
        car.vel[..., None, :] + cross(car.ang_vel[..., None, :], rel_pos)
    ) - wheels.ground.velocity_at(rel_pos)
    rel_vel = dot(contact_vel, forward)
    f32 = C.f32
    if f32(dt) > f32(1 / 80):  # RocketSim rounds small rolling friction off below 80 ticks/s
        threshold = f32(-f32(1 / f32(f32(dt) * 150)) + f32(0.8)) * C.BT_TO_UU  # float32, in BT
        rel_vel = torch.where(rel_vel.abs() < threshold, 0.0, rel_vel)
    brake = car.brake[..., None]
    rolling = torch.minimum(torch.maximum(-rel_vel * C.ROLLING_FRICTION_SCALE_MAGIC, -brake), brake)
    engine = car.engine_force[..., None]
    rolling = torch.where(engine == 0, torch.where(brake != 0, rolling, 0.0), -engine / FRICTION_SCALE)
    total = (forward * rolling[..., None]) * car.long_friction[..., None] + (
        axle * side_impulse[..., None]
    ) * car.lat_friction[..., None]
    return where3(wheels.is_in_contact, total * FRICTION_SCALE, 0.0)


def update_vehicle_first(
    car: CarState,
    config: CarParams,
    mesh: ArenaMesh,
    bodies: Bodies | None,
    params: TickParams,
    inv_inertia,
    solver_dt: torch.Tensor,
) -> tuple[Wheels, CarState]:
    """Wheel transforms, the four rays (against the arena and ``bodies``), and the (lagged) friction
    impulses. Returns the tick's wheels and the car with its updated extra pushback.

    ``solver_dt`` [N] is Bullet's solver time step as the pushback reads it: the tick length, but
    1/60 s before an arena's first step (btContactSolverInfo's default).
    """
    hard_point, axle = update_wheel_transforms(car, config)
    contact, ground, extra_pushback = ray_cast(
        car, config, hard_point, mesh, bodies, params, inv_inertia, solver_dt
    )
    wheels = Wheels(
        hard_point=hard_point, axle=axle, impulse=torch.zeros_like(axle), ground=ground, **contact
    )
    impulse = calc_friction_impulses(car, config, wheels, params.tick_time)
    wheels = dataclasses.replace(wheels, impulse=impulse)
    return wheels, dataclasses.replace(car, extra_pushback=extra_pushback)


def update_suspension(car: CarState, config: CarParams, wheels: Wheels, inv_inertia, dt: float):
    """btVehicleRL::updateSuspension: (vel, ang_vel) after each touching wheel's spring impulse.

    Force = (rest - length) x 500 x clipped 1/(n.up) - damping (25 compressing, 40 relaxing) x the
    suspension velocity, times the front/back scale, never pulling; the impulse force x dt + the
    extra pushback goes along the contact normal at the contact point.
    """
    force = (
        (config.suspension_rest_length - wheels.suspension_length) * C.SUSPENSION_STIFFNESS
    ) * wheels.clipped_inv_contact_dot_suspension
    rel_vel = wheels.suspension_relative_velocity
    damping = torch.where(rel_vel < 0, C.WHEELS_DAMPING_COMPRESSION, C.WHEELS_DAMPING_RELAXATION)
    force = ((force - damping * rel_vel) * config.suspension_force_scale).clamp(min=0)
    force = torch.where(wheels.is_in_contact, force, 0.0)
    vel, ang_vel = car.vel, car.ang_vel
    for i in range(4):
        impulse = (
            wheels.contact_normal[..., i, :] * (force[..., i] * dt + car.extra_pushback[..., i])[..., None]
        )
        offset = wheels.contact_point[..., i, :] - car.pos
        new_vel, new_ang_vel = apply_impulse(vel, ang_vel, inv_inertia, impulse, offset)
        applied = force[..., i] != 0
        vel, ang_vel = where3(applied, new_vel, vel), where3(applied, new_ang_vel, ang_vel)
    return vel, ang_vel


def apply_friction_impulses(car: CarState, wheels: Wheels, inv_inertia, dt: float):
    """btVehicleRL::applyFrictionImpulses: (vel, ang_vel) after each wheel's friction impulse x dt,
    applied at its contact point moved into the chassis' plane through the centre of mass."""
    up = car.rot_mat[..., :, 2]
    vel, ang_vel = car.vel, car.ang_vel
    for i in range(4):
        offset = wheels.contact_point[..., i, :] - car.pos
        rel_pos = offset - up * dot(up, offset)[..., None]
        impulse = wheels.impulse[..., i, :]
        new_vel, new_ang_vel = apply_impulse(vel, ang_vel, inv_inertia, impulse * dt, rel_pos)
        applied = (impulse != 0).any(-1)
        vel, ang_vel = where3(applied, new_vel, vel), where3(applied, new_ang_vel, ang_vel)
    return vel, ang_vel


def update_vehicle_second(
    car: CarState, config: CarParams, wheels: Wheels, inv_inertia, dt: float
) -> CarState:
    """Suspension impulses, then the friction impulses computed in `update_vehicle_first`."""
    vel, ang_vel = update_suspension(car, config, wheels, inv_inertia, dt)
    car = dataclasses.replace(car, vel=vel, ang_vel=ang_vel)
    vel, ang_vel = apply_friction_impulses(car, wheels, inv_inertia, dt)
    return dataclasses.replace(car, vel=vel, ang_vel=ang_vel)
