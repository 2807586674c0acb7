"""What the arena queries return: contacts, contact manifolds and ray hits, as batched dataclasses.

Data only (the queries are `sphere_contacts`, `manifolds`, `ray_cast`, `box_contacts` and their
kernels). Fields follow Bullet's btManifoldPoint: normals point from the arena into the body.
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import constants as C

# Contact "objects": what Bullet keeps one contact manifold for. Mesh files 0..15, then the planes.
PLANE_OBJECT_BASE = C.SOCCAR_MESH_COUNT
MANIFOLD_SLOTS = 4  # arena objects (mesh files, planes) a body touches at once, at most
MANIFOLD_POINTS = 4  # points per manifold (Bullet's MANIFOLD_CACHE_SIZE)
# Contacts a sphere query hands to the manifolds per tick, in Bullet's order. A ball touching a
# smooth surface finds 1-6; a ball driven hard into the dense goal net has found up to 43.
MAX_NEW_CONTACTS = 64
# Penetrating points that take part in the ball's split-impulse recovery, in manifold order. Points of
# one manifold mostly share a normal, and Gauss-Seidel resolves a repeated normal on its first point.
MAX_PUSH_POINTS = 8


@dataclasses.dataclass
class SphereContacts:
    """New contacts of N spheres with the arena: every feature whose gap is below the query's ``gap``.

    Listed in the order Bullet generates them (planes, then each mesh file's triangles in its BVH
    visiting order); the first ``max_contacts`` are kept. Empty slots have object and feature -1.
    """

    count: torch.Tensor
    """Number of contacts found per sphere (may exceed the slots) [N] int32."""
    object: torch.Tensor
    """Which contact manifold the point belongs to: mesh file, or PLANE_OBJECT_BASE + plane [N, K] int32."""
    feature: torch.Tensor
    """Triangle id, or num_triangles + plane index [N, K] int32."""
    normal: torch.Tensor
    """Contact normal into the sphere, after internal-edge smoothing [N, K, 3]."""
    point: torch.Tensor
    """Contact point on the feature (m_positionWorldOnB), UU [N, K, 3]."""
    offset: torch.Tensor
    """Contact point on the sphere minus its centre (m_positionWorldOnA - centre), UU [N, K, 3]."""
    depth: torch.Tensor
    """Signed gap along the normal, negative when penetrating, UU [N, K]."""


@dataclasses.dataclass
class ContactManifolds:
    """One tick's contact manifolds of N bodies with the arena: up to 4 points per object touched.

    Slots are filled in the order of each object's first contact; -1 marks a free slot.
    """

    object: torch.Tensor
    """Arena object of each slot: mesh file, or PLANE_OBJECT_BASE + plane; -1 when free [N, S] int32."""
    count: torch.Tensor
    """Points held per slot [N, S] int32."""
    offset: torch.Tensor
    """Point on the body minus the body's origin (m_positionWorldOnA - origin), UU [N, S, 4, 3]."""
    point: torch.Tensor
    """Point on the arena (m_positionWorldOnB), UU [N, S, 4, 3]."""
    normal: torch.Tensor
    """Normal from the arena into the body (m_normalWorldOnB) [N, S, 4, 3]."""
    depth: torch.Tensor
    """Gap along the normal, negative when penetrating, UU [N, S, 4]."""

    def held(self) -> torch.Tensor:
        """Which point slots hold a point [N, S, 4] bool."""
        return torch.arange(MANIFOLD_POINTS, device=self.count.device) < self.count[..., None]


@dataclasses.dataclass
class RayHits:
    """Closest hit of each segment start -> end with the arena (btCollisionWorld::rayTest)."""

    hit: torch.Tensor
    """The segment hits something [N] bool."""
    fraction: torch.Tensor
    """Hit position along the segment, 0 at start, 1 at end (1 when no hit) [N]."""
    normal: torch.Tensor
    """Unit surface normal facing the segment's start (zero when no hit) [N, 3]."""
    feature: torch.Tensor
    """Triangle id, or num_triangles + plane index; -1 when no hit [N] int32."""


@dataclasses.dataclass
class BoxContacts:
    """Contacts of N oriented boxes with the arena, deepest first; empty slots have feature -1.

    Each triangle or plane in reach is tested by separating axes (the triangle normal, the box's
    three axes and their nine cross products with the triangle's edges): ``depth`` is the largest
    separation over those axes (negative: the penetration depth; positive: a lower bound of the gap)
    and ``normal`` that axis, pointing from the feature into the box.
    """

    count: torch.Tensor
    """Features within the gap [N] int32."""
    normal: torch.Tensor
    """Separating axis with the least penetration, from the feature into the box [N, K, 3]."""
    depth: torch.Tensor
    """Separation along the normal, UU, negative when penetrating [N, K]."""
    point: torch.Tensor
    """The box's deepest point along -normal (its support point; face or edge centre on ties), UU [N, K, 3]."""
    feature: torch.Tensor
    """Triangle id, or num_triangles + plane index; -1 for an empty slot [N, K] int32."""


# --- Contacts between the bodies as RocketSim's contact-added callbacks receive them ---------------------
# The reference tick fills these from Bullet's real contacts (`CarBallContacts.hits`,
# `CarCarContacts.touches`); the fused kernel from its own (`car_contacts`, with the kernel twin
# `kernels/car_contacts`, and `kernels/car_car`).
CAR_CAR_POINTS = 4  # points per car pair: btBoxBoxDetector's maxc


@dataclasses.dataclass
class CarBallHits:
    """One tick's car-ball contacts, as Arena::_BtCallback_OnCarBallCollision receives them [N, C].

    Bullet adds at most one point per car-ball pair per tick, found at the tick's starting transforms,
    before the solver.
    """

    is_hit: torch.Tensor
    """A contact point between the car and the ball was added this tick [N, C] bool."""
    relative_pos_on_ball: torch.Tensor
    """The point on the ball in the ball's frame (m_localPoint of the ball: Ball::_OnHit's relPos),
    UU [N, C, 3]."""


@dataclasses.dataclass
class CarCarTouches:
    """One tick's car-car contact points, as Arena::_BtCallback_OnCarCarCollision receives them.

    Pairs (a, b) of car indices with a < b in the order `car_pairs` lists them, P = C (C - 1) / 2;
    K point slots per pair in the order Bullet adds them (each added point fires the callback once).
    Car b is the manifold's body A, so the callback's first car.
    """

    is_contact: torch.Tensor
    """Point k of pair p was added this tick [N, P, K] bool."""
    local_point_a: torch.Tensor
    """The point on car a in car a's frame (m_localPointB: from its origin, the centre of mass), UU [N, P, K, 3]."""
    local_point_b: torch.Tensor
    """The point on car b in car b's frame (m_localPointA), UU [N, P, K, 3]."""


def car_pairs(num_cars: int) -> list[tuple[int, int]]:
    """The car pairs (a, b), a < b, in the broadphase's pair order (a's pairs first), the order
    `CarCarContacts` and `CarCarTouches` hold them."""
    return [(a, b) for a in range(num_cars) for b in range(a + 1, num_cars)]


@dataclasses.dataclass
class CarWorldContacts:
    """One tick's car-world contacts of B car bodies, in Bullet units.

    The manifolds hold m_localPointA (the point on the car, car frame) in ``offset``, the refreshed
    m_positionWorldOnB in ``point`` and m_distance1 in ``depth``, the (edge-smoothed) normal from the
    arena into the car in ``normal``.
    """

    manifolds: ContactManifolds
    """Per arena object touched, up to 4 points [B, S, ...]."""
    pair_count: torch.Tensor
    """How many manifolds the car has, empty ones included (its pairs that keep one) [B] int64."""
    pair_position: torch.Tensor
    """Each slot's manifold's place among them, in the dispatcher's order (mesh files in load order,
    then the planes) [B, S] int64; -1 for a free slot."""
    has_contact: torch.Tensor
    """The contact-added callback ran for this car (worldContact.hasContact) [B] bool."""
    contact_normal: torch.Tensor
    """The last added point's normal, before edge smoothing (worldContact.contactNormal) [B, 3]."""


@dataclasses.dataclass
class CarBodyContacts:
    """The fused kernel's car-world contacts of N envs' cars (`car_contacts.car_world_contacts`)."""

    manifolds: ContactManifolds
    """Per arena object touched, up to 4 points [N * C, 4, ...]: ``offset`` the point on the car
    relative to its origin (world axes), ``normal`` from the arena into the car (edge-smoothed),
    ``depth`` the signed distance; BT. ``point`` is not kept (zeros)."""
    has_contact: torch.Tensor
    """The car body touched the arena (worldContact.hasContact) [N, C] bool."""
    contact_normal: torch.Tensor
    """The last point's normal before edge smoothing (worldContact.contactNormal), zero without one
    [N, C, 3]."""


@dataclasses.dataclass
class CarBallContacts:
    """One tick's car-ball contacts, per car [N, C, ...] (Bullet units, 1 BT = 50 UU): Bullet's
    manifold of each car's box with its env's ball, at most one point, the car its body A and the
    ball its body B.

    ``touched`` is RocketSim's car-ball contact callback (`Arena::_BtCallback_OnCarBallCollision`,
    which calls `Ball::_OnHit` with ``local_point_ball`` * BT_TO_UU as relPos); the other fields
    describe that point (zero where not touched).
    """

    has_manifold: torch.Tensor
    """The box's AABB meets the ball's, so the pair keeps a manifold (empty or not) [N, C] bool."""
    touched: torch.Tensor
    """A contact point was added this tick: the car touched the ball [N, C] bool."""
    held: torch.Tensor
    """The point is still in the manifold after refreshContactPoints: the solver sees it [N, C] bool."""
    normal: torch.Tensor
    """m_normalWorldOnB: unit normal from the ball into the car [N, C, 3]."""
    point_on_car: torch.Tensor
    """m_positionWorldOnA: the point on the car's box, world [N, C, 3]."""
    point_on_ball: torch.Tensor
    """m_positionWorldOnB: the point on the ball's surface, world [N, C, 3]."""
    local_point_car: torch.Tensor
    """m_localPointA: the car's point in the car's frame (from its centre of mass) [N, C, 3]."""
    local_point_ball: torch.Tensor
    """m_localPointB: the ball's point in the ball's frame (Ball::_OnHit's relPos) [N, C, 3]."""
    depth: torch.Tensor
    """m_distance1: the gap along the normal, negative when penetrating [N, C]."""

    def hits(self) -> CarBallHits:
        """What RocketSim's car-ball callback receives: the touches and relPos = m_localPointB * BT_TO_UU."""
        return CarBallHits(is_hit=self.touched, relative_pos_on_ball=self.local_point_ball * C.BT_TO_UU)


@dataclasses.dataclass
class CarCarContacts:
    """One tick's car-car contacts, per pair of cars (a, b), a < b (`car_pairs` order), up to 4 points
    [N, P, 4, ...] (Bullet units): Bullet's box-box manifold, with car b its body A and car a its
    body B.

    The manifold (``count``, ``normal``, the world points, ``depth``) is what the solver sees after
    refreshContactPoints. RocketSim's car-car callback (`Arena::_BtCallback_OnCarCarCollision`: bumps
    and demos, tested both ways) runs before that, once per added point (``added``, btBoxBoxDetector's
    order), with car b as its first car; it reads the point's local positions (m_localPointA on car b,
    m_localPointB on car a), which the refresh does not change.
    """

    pairs: torch.Tensor
    """The two car slots of each pair [P, 2] int64 (a, b)."""
    has_manifold: torch.Tensor
    """The boxes' AABBs meet, so the pair keeps a manifold (empty or not) [N, P] bool."""
    added: torch.Tensor
    """btBoxBoxDetector's point k was added this tick: RocketSim's car-car callback runs for it, in
    k order [N, P, 4] bool."""
    count: torch.Tensor
    """Points held after refreshContactPoints, the first ``count`` slots [N, P] int64."""
    normal: torch.Tensor
    """m_normalWorldOnB: unit normal from car a into car b [N, P, 4, 3]."""
    point_on_b: torch.Tensor
    """m_positionWorldOnA: the point on car b's box, world [N, P, 4, 3]."""
    point_on_a: torch.Tensor
    """m_positionWorldOnB: the point on car a's box, world [N, P, 4, 3]."""
    local_point_b: torch.Tensor
    """m_localPointA of the detector's point k: on car b, in car b's frame (zero where not added)
    [N, P, 4, 3]."""
    local_point_a: torch.Tensor
    """m_localPointB of the detector's point k: on car a, in car a's frame (zero where not added)
    [N, P, 4, 3]."""
    depth: torch.Tensor
    """m_distance1: the gap along the normal, negative when penetrating [N, P, 4]."""

    def touches(self) -> CarCarTouches:
        """What RocketSim's car-car callback receives: the added points and their local positions, UU."""
        return CarCarTouches(
            is_contact=self.added,
            local_point_a=self.local_point_a * C.BT_TO_UU,
            local_point_b=self.local_point_b * C.BT_TO_UU,
        )


@dataclasses.dataclass
class ContactRows:
    """Contact points as the solver takes them, one per row [N, R, ...] (Bullet units): body A and
    body B (the ball 0, car c at 1 + c; -1 for the arena) and btManifoldPoint's fields."""

    body_a: torch.Tensor
    """[N, R] int64."""
    body_b: torch.Tensor
    """[N, R] int64, -1 for the arena."""
    normal: torch.Tensor
    """m_normalWorldOnB: from B into A [N, R, 3]."""
    rel_pos_a: torch.Tensor
    """The point on A minus A's origin [N, R, 3]."""
    rel_pos_b: torch.Tensor
    """The point on B minus B's origin (zero for the arena's points: unused) [N, R, 3]."""
    depth: torch.Tensor
    """m_distance1, negative when penetrating [N, R]."""
    friction: torch.Tensor
    """m_combinedFriction [N, R]."""
    restitution: torch.Tensor
    """m_combinedRestitution [N, R]."""
    special: torch.Tensor
    """RocketSim's special (ball-world) point: in the split impulse only [N, R] bool."""
    active: torch.Tensor
    """The row holds a point [N, R] bool."""


@dataclasses.dataclass
class BodyContacts:
    """One tick's contacts between bodies, for the game rules (Bullet units)."""

    car_ball: CarBallContacts
    """Each car with the ball [N, C]."""
    car_car: CarCarContacts
    """Each pair of cars [N, P]."""


@dataclasses.dataclass
class BodySolve:
    """What the contact solve gives the cars [N, C, 3] (UU, rad/s), and their arena contact."""

    dv: torch.Tensor
    """Velocity delta (btSolverBody::m_deltaLinearVelocity), UU/s."""
    dw: torch.Tensor
    """Angular velocity delta, rad/s."""
    push_v: torch.Tensor
    """Split-impulse push velocity (m_pushVelocity), UU/s: moves the transform only."""
    push_w: torch.Tensor
    """Split-impulse turn velocity (m_turnVelocity, before the 0.1 turn erp), rad/s."""
    has_world_contact: torch.Tensor
    """The car body touched the arena (RocketSim's worldContact.hasContact) [N, C] bool."""
    world_contact_normal: torch.Tensor
    """The normal of the last arena contact added (worldContact.contactNormal), zero without one."""

