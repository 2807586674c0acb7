"""RocketSim's constants, in Unreal units (UU, UU/s, rad/s), plus the Bullet settings the port needs.

Names and values follow RocketSim (ZealanL/RocketSim, MIT) `src/RLConst.h`, `src/BulletLink.h` and the
Bullet 3.24 defaults RocketSim runs with (`libsrc/bullet3-3.24`, "ROCKETSIM CHANGE" markers).
RocketSim simulates in Bullet units (1 BT = 50 UU); we keep UU throughout and convert Bullet's
length-bearing settings here, once, with their BT origin written next to them.
"""

from __future__ import annotations

import math

import numpy as np

# --- Units (BulletLink.h) -------------------------------------------------------------------------
BT_TO_UU = 50.0
UU_TO_BT = 1.0 / 50.0

# --- World and time (RLConst.h, Arena.h) ----------------------------------------------------------
GRAVITY_Z = -650.0  # UU/s^2
DEFAULT_TICK_RATE = 120.0  # ticks per second
MIN_TICK_RATE = 15.0  # Arena::Arena asserts 15 <= tickRate <= 120
MAX_TICK_RATE = 120.0

ARENA_EXTENT_X = 4096.0  # side walls at x = +-4096 (RocketSim's planes)
ARENA_EXTENT_Y = 5120.0  # back walls (mesh); does not include the inner goal
ARENA_HEIGHT = 2048.0  # ceiling plane

ARENA_COLLISION_BASE_FRICTION = 0.6
ARENA_COLLISION_BASE_RESTITUTION = 0.3

# --- Masses (RLConst.h; Bullet mass units) --------------------------------------------------------
CAR_MASS_BT = 180.0
BALL_MASS_BT = CAR_MASS_BT / 6.0

# --- Ball (RLConst.h, MutatorConfig defaults) -----------------------------------------------------
BALL_COLLISION_RADIUS_SOCCAR = 91.25  # UU
BALL_REST_Z = 93.15  # UU; above the radius because contacts start within the breaking threshold
BALL_MAX_SPEED = 6000.0  # UU/s, clamped at the end of each tick
BALL_MAX_ANG_SPEED = 6.0  # rad/s, clamped at the end of each tick
BALL_DRAG = 0.03  # Bullet linear damping: v *= (1 - drag)^dt before forces
BALL_FRICTION = 0.35
BALL_RESTITUTION = 0.6
SOCCAR_GOAL_SCORE_BASE_THRESHOLD_Y = 5124.25  # UU; scored when |y| > this + ball radius

# --- Car-related collision materials (RLConst.h), used by the next soccar issues -------------------
CAR_COLLISION_FRICTION = 0.3
CAR_COLLISION_RESTITUTION = 0.1
CARBALL_COLLISION_FRICTION = 2.0
CARBALL_COLLISION_RESTITUTION = 0.0
CARWORLD_COLLISION_FRICTION = 0.3
CARWORLD_COLLISION_RESTITUTION = 0.3
CARCAR_COLLISION_FRICTION = 0.09
CARCAR_COLLISION_RESTITUTION = 0.1
CAR_MAX_SPEED = 2300.0
CAR_MAX_ANG_SPEED = 5.5
BOOST_MAX = 100.0
BOOST_SPAWN_AMOUNT = BOOST_MAX / 3.0
CAR_SPAWN_REST_Z = 17.0
CAR_RESPAWN_Z = 36.0

# --- Ball-world material combination (btManifoldResult.cpp, ROCKETSIM CHANGE) ----------------------
# Against a static body Bullet takes min(friction) and max(restitution) (dynamic pairs multiply).
BALL_WORLD_FRICTION = min(BALL_FRICTION, ARENA_COLLISION_BASE_FRICTION)  # 0.35
BALL_WORLD_RESTITUTION = max(BALL_RESTITUTION, ARENA_COLLISION_BASE_RESTITUTION)  # 0.6

# --- Bullet settings (btContactSolverInfo.h defaults + Arena::Arena overrides) --------------------
SOLVER_NUM_ITERATIONS = 10
SOLVER_ERP2 = 0.8  # Arena::Arena sets m_erp2 = 0.8 (Bullet default 0.2): split-impulse recovery rate
# m_splitImpulsePenetrationThreshold = 1e30: every penetration goes through the split impulse.
SOLVER_RESTITUTION_VELOCITY_THRESHOLD = 0.2 * BT_TO_UU  # 0.2 BT/s -> 10 UU/s: below it, no bounce
SOLVER_WARMSTARTING_FACTOR = 0.85  # only reaches impulses of persistent points, always 0 for the ball
# gContactBreakingThreshold (0.02) times the ball's angular motion disc: (radius + 0.08 BT) * 0.02.
# RocketSim adds 0.08 BT to sphere bounding radii (btCollisionShape::getBoundingSphere).
CONTACT_BREAKING_THRESHOLD_FACTOR = 0.02
SPHERE_BOUNDING_EXTRA = 0.08 * BT_TO_UU  # 4 UU


def contact_breaking_threshold(radius: float) -> float:
    """Bullet's manifold breaking threshold for a sphere of ``radius`` UU against the arena, in UU.

    Contacts are created, and kept, only while the surface gap is below this (1.905 UU for the
    soccar ball); the ball rests at radius + about this much above the floor (BALL_REST_Z).
    """
    radius_bt = np.float32(radius) * np.float32(UU_TO_BT)
    disc_bt = float(radius_bt) + 0.08  # getBoundingSphere (double literal, as in the source)
    return float(np.float32(np.float32(disc_bt) * np.float32(CONTACT_BREAKING_THRESHOLD_FACTOR))) * BT_TO_UU


BALL_CONTACT_BREAKING_THRESHOLD = contact_breaking_threshold(BALL_COLLISION_RADIUS_SOCCAR)

# btTriangleInfoMap defaults (internal-edge smoothing), converted to UU where they are lengths.
INTERNAL_EDGE_DISTANCE_THRESHOLD = 0.1 * BT_TO_UU  # m_edgeDistanceThreshold: contact "hits the edge"
INTERNAL_EDGE_PLANAR_EPSILON = 0.0001  # m_planarEpsilon (dimensionless, on unit vectors)
INTERNAL_EDGE_EQUAL_VERTEX_THRESHOLD_SQ = (0.0001 * BT_TO_UU) ** 2  # m_equalVertexThreshold, UU^2
INTERNAL_EDGE_MAX_ANGLE = 2.0 * math.pi  # m_maxEdgeAngleThreshold; edges without a neighbour keep 2*pi

# SIMD_EPSILON (FLT_EPSILON) as Bullet compares it against squared lengths in BT^2, here in UU^2
# (SphereTriangleDetector: below it the contact normal is the face normal).
SIMD_EPSILON_UU2 = float(np.finfo(np.float32).eps) * BT_TO_UU**2
# SIMD_EPSILON^2 against |(v1 - v0) x (v2 - v0)|^2 (a length^4): degenerate triangles never touch.
DEGENERATE_TRIANGLE_L2 = float(np.finfo(np.float32).eps) ** 2 * BT_TO_UU**4

# FLT_EPSILON in BT^2/s^2 (btSequentialImpulseConstraintSolver::convertContactInner), in UU^2/s^2:
# below it the friction direction is not taken from the sliding velocity.
FRICTION_DIRECTION_EPSILON_SQ = float(np.finfo(np.float32).eps) * BT_TO_UU**2

# --- Arena planes (Arena::_SetupArenaCollisionShapes) ---------------------------------------------
# Each row: outward-facing normal (into the field) and the plane offset d, plane = {x : n.x = d}.
ARENA_PLANES = (
    ((0.0, 0.0, 1.0), 0.0),  # floor z = 0
    ((0.0, 0.0, -1.0), -ARENA_HEIGHT),  # ceiling z = 2048
    ((1.0, 0.0, 0.0), -ARENA_EXTENT_X),  # side wall x = -4096
    ((-1.0, 0.0, 0.0), -ARENA_EXTENT_X),  # side wall x = +4096
)

# --- Boost pads (RLConst::BoostPads; RocketSim order: 6 big, then 28 small) -----------------------
BOOST_PADS_BIG = (
    (-3584.0, 0.0, 73.0),
    (3584.0, 0.0, 73.0),
    (-3072.0, 4096.0, 73.0),
    (3072.0, 4096.0, 73.0),
    (-3072.0, -4096.0, 73.0),
    (3072.0, -4096.0, 73.0),
)
BOOST_PADS_SMALL = (
    (0.0, -4240.0, 70.0),
    (-1792.0, -4184.0, 70.0),
    (1792.0, -4184.0, 70.0),
    (-940.0, -3308.0, 70.0),
    (940.0, -3308.0, 70.0),
    (0.0, -2816.0, 70.0),
    (-3584.0, -2484.0, 70.0),
    (3584.0, -2484.0, 70.0),
    (-1788.0, -2300.0, 70.0),
    (1788.0, -2300.0, 70.0),
    (-2048.0, -1036.0, 70.0),
    (0.0, -1024.0, 70.0),
    (2048.0, -1036.0, 70.0),
    (-1024.0, 0.0, 70.0),
    (1024.0, 0.0, 70.0),
    (-2048.0, 1036.0, 70.0),
    (0.0, 1024.0, 70.0),
    (2048.0, 1036.0, 70.0),
    (-1788.0, 2300.0, 70.0),
    (1788.0, 2300.0, 70.0),
    (-3584.0, 2484.0, 70.0),
    (3584.0, 2484.0, 70.0),
    (0.0, 2816.0, 70.0),
    (-940.0, 3308.0, 70.0),
    (940.0, 3308.0, 70.0),
    (-1792.0, 4184.0, 70.0),
    (1792.0, 4184.0, 70.0),
    (0.0, 4240.0, 70.0),
)
BOOST_PAD_COUNT = len(BOOST_PADS_BIG) + len(BOOST_PADS_SMALL)  # 34

# --- Soccar collision meshes (rlgym-rocket-league 2.0.1 sdist) ------------------------------------
SOCCAR_MESH_COUNT = 16
SOCCAR_TRIANGLE_COUNT = 8020
