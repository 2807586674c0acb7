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

# --- Ball::_OnHit's extra impulse (RLConst.h) --------------------------------------------------------
BALL_CAR_EXTRA_IMPULSE_Z_SCALE = 0.35  # the hit direction's z is scaled by this before normalising
BALL_CAR_EXTRA_IMPULSE_FORWARD_SCALE = 0.65  # ... and its part along the car's forward axis by this
BALL_CAR_EXTRA_IMPULSE_MAXDELTAVEL_UU = 4600.0  # relative speeds above this count as this

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


def f32(x: float) -> float:
    """``x`` rounded to float32 (to nearest, ties to even), as a Python float: float(np.float32(x)),
    in plain Python so compiled code folds it to a constant (Dynamo traces numpy scalars as tensors).
    One float32 operation on float32 values is exactly ``f32`` of the same operation in double."""
    if x == 0.0 or not math.isfinite(x):
        return x
    shift = max(math.frexp(x)[1], -125) - 24  # the float32 ulp's exponent (subnormals: 2^-149)
    y = math.ldexp(round(math.ldexp(abs(x), -shift)), shift)
    return math.copysign(y if y < 2.0**128 else math.inf, x)


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

# Where RocketSim puts its planes' bodies (Arena::_SetupArenaCollisionShapes), UU, in ARENA_PLANES' order.
ARENA_PLANE_ORIGINS = (
    (0.0, 0.0, 0.0),
    (0.0, 0.0, ARENA_HEIGHT),
    (-ARENA_EXTENT_X, 0.0, ARENA_HEIGHT / 2),
    (ARENA_EXTENT_X, 0.0, ARENA_HEIGHT / 2),
)

# --- Bullet's view of the bodies (RocketSim's Bullet 3.24, BT units) ------------------------------
UU_TO_BT_F32 = float(np.float32(1.0) / np.float32(50.0))  # RocketSim's UU_TO_BT, the float32 1.f / 50.f
CONVEX_DISTANCE_MARGIN = 0.04  # BT: btConvexInternalShape's default margin
BOX_SAFE_MARGIN_FACTOR = 0.1  # btBoxShape::setSafeMargin: margin <= 0.1 * the smallest half extent
CONTACT_BREAKING_THRESHOLD = float(np.float32(0.02))  # gContactBreakingThreshold, BT
PLANE_AABB_HALF_THICKNESS = float(np.float32(0.2))  # RocketSim's btStaticPlaneShape::getAabb slab, BT
# btRSBroadphase's grid (ArenaConfig defaults): minPos, maxPos and maxAABBLen, UU. The cell is
# maxAABBLen in ArenaMemWeightMode::HEAVY (RocketSim's default) and twice that in LIGHT.
BROADPHASE_MIN_POS = (-5600.0, -6000.0, 0.0)
BROADPHASE_MAX_POS = (5600.0, 6000.0, 2200.0)
BROADPHASE_MAX_AABB_LEN = 370.0
BROADPHASE_CELL_MULTIPLIER = {"heavy": 1.0, "light": 2.0}

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
BOOST_PADS = BOOST_PADS_BIG + BOOST_PADS_SMALL
BOOST_PAD_CYL_HEIGHT = 95.0  # pickup cylinder half-height about the pad, UU
BOOST_PAD_CYL_RAD_BIG = 208.0
BOOST_PAD_CYL_RAD_SMALL = 144.0
BOOST_PAD_BOX_HEIGHT = 64.0  # lock box (the car that held the pad last tick), UU above the pad
BOOST_PAD_BOX_RAD_BIG = 160.0
BOOST_PAD_BOX_RAD_SMALL = 120.0
BOOST_PAD_COOLDOWN_BIG = 10.0  # s
BOOST_PAD_COOLDOWN_SMALL = 4.0
BOOST_PAD_AMOUNT_BIG = 100.0
BOOST_PAD_AMOUNT_SMALL = 12.0
# BoostPadGrid: 8 x 10 cells of 1024 UU over the field; a car is tested against the pads of the 3 x 3
# cells around its own, and not at all above BOOST_PAD_GRID_EXTENT_Z.
BOOST_PAD_GRID_EXTENT_Z = BOOST_PAD_CYL_HEIGHT + 250.0
BOOST_PAD_GRID_CELLS = (8, 10)
BOOST_PAD_GRID_CELL_SIZE = (1024.0, 1024.0)  # (int)(EXTENT_X / (CELLS_X / 2)), likewise y
# The RLBot / RLGym pad order (RLBot's field info, which the binding's get_gym_state follows): pads
# row by row from blue's back wall, (x, y) with RLBot's y of 3310 for RocketSim's (-940, 3308).
BOOST_PADS_RLBOT_XY = (
    (0, -4240), (-1792, -4184), (1792, -4184), (-3072, -4096), (3072, -4096), (-940, -3308),
    (940, -3308), (0, -2816), (-3584, -2484), (3584, -2484), (-1788, -2300), (1788, -2300),
    (-2048, -1036), (0, -1024), (2048, -1036), (-3584, 0), (-1024, 0), (1024, 0), (3584, 0),
    (-2048, 1036), (0, 1024), (2048, 1036), (-1788, 2300), (1788, 2300), (-3584, 2484), (3584, 2484),
    (0, 2816), (-940, 3310), (940, 3308), (-3072, 4096), (3072, 4096), (-1792, 4184), (1792, 4184),
    (0, 4240),
)  # fmt: skip
BOOST_PAD_RLBOT_ORDER = tuple(
    min(range(len(BOOST_PADS)), key=lambda i: abs(BOOST_PADS[i][0] - x) + abs(BOOST_PADS[i][1] - y))
    for x, y in BOOST_PADS_RLBOT_XY
)
"""RocketSim's index of RLBot's k-th pad: ``pads.is_active[:, BOOST_PAD_RLBOT_ORDER]`` is in RLBot order."""

# --- Soccar collision meshes (rlgym-rocket-league 2.0.1 sdist) ------------------------------------
SOCCAR_MESH_COUNT = 16
SOCCAR_TRIANGLE_COUNT = 8020

# --- Cars (RLConst.h; RocketSim's car code in Car.cpp and btVehicleRL.cpp) --------------------------
# Accelerations and speeds are UU/s^2 and UU/s; forces are written, as in RocketSim, as accelerations
# times CAR_MASS_BT. Bullet-unit lengths of RLConst::BTVehicle are converted to UU here.
BOOST_USED_PER_SECOND = BOOST_MAX / 3.0
BOOST_MIN_TIME = 0.1  # s: once started, boosting lasts at least this long
BOOST_ACCEL_GROUND = 2975.0 / 3.0  # with >= 3 wheels touching
BOOST_ACCEL_AIR = 3175.0 / 3.0
SUPERSONIC_START_SPEED = 2200.0
SUPERSONIC_MAINTAIN_MIN_SPEED = SUPERSONIC_START_SPEED - 100.0
SUPERSONIC_MAINTAIN_MAX_TIME = 1.0  # s
POWERSLIDE_RISE_RATE = 5.0  # handbrake_val per second
POWERSLIDE_FALL_RATE = 2.0
THROTTLE_TORQUE_AMOUNT = CAR_MASS_BT * 400.0  # engine force per wheel (UU units; RocketSim * UU_TO_BT)
BRAKE_TORQUE_AMOUNT = CAR_MASS_BT * (14.25 + 1.0 / 3.0)  # 2625
STOPPING_FORWARD_VEL = 25.0  # below this forward speed coasting is a full brake
COASTING_BRAKE_FACTOR = 0.15
BRAKING_NO_THROTTLE_SPEED_THRESH = 0.01
THROTTLE_DEADZONE = 0.001
THROTTLE_AIR_ACCEL = 200.0 / 3.0
JUMP_ACCEL = 4375.0 / 3.0
JUMP_IMMEDIATE_FORCE = 875.0 / 3.0  # UU/s, the jump and double-jump impulse
JUMP_MIN_TIME = 0.025
JUMP_RESET_TIME_PAD = 1.0 / 40.0
JUMP_MAX_TIME = 0.2
JUMP_PRE_MIN_ACCEL_SCALE = 0.62  # Car::_UpdateJump's constexpr: hold force before JUMP_MIN_TIME
DOUBLEJUMP_MAX_DELAY = 1.25
FLIP_Z_DAMP_120 = 0.35
FLIP_Z_DAMP_START = 0.15
FLIP_Z_DAMP_END = 0.21
FLIP_TORQUE_TIME = 0.65
FLIP_PITCHLOCK_EXTRA_TIME = 0.3
FLIP_INITIAL_VEL_SCALE = 500.0
FLIP_TORQUE_X = 260.0  # roll (left/right flips)
FLIP_TORQUE_Y = 224.0  # pitch (forward/backward flips)
FLIP_FORWARD_IMPULSE_MAX_SPEED_SCALE = 1.0
FLIP_SIDE_IMPULSE_MAX_SPEED_SCALE = 1.9
FLIP_BACKWARD_IMPULSE_MAX_SPEED_SCALE = 2.5
FLIP_BACKWARD_IMPULSE_SCALE_X = 16.0 / 15.0
CAR_TORQUE_SCALE = 2 * math.pi / (1 << 16) * 1000  # 0.0958738
CAR_AUTOFLIP_IMPULSE = 200.0
CAR_AUTOFLIP_TORQUE = 50.0
CAR_AUTOFLIP_TIME = 0.4
CAR_AUTOFLIP_NORMZ_THRESH = math.sqrt(0.5)
CAR_AUTOFLIP_ROLL_THRESH = 2.8
CAR_AUTOROLL_FORCE = 100.0
CAR_AUTOROLL_TORQUE = 80.0
CAR_AIR_CONTROL_TORQUE = (130.0, 95.0, 400.0)  # pitch, yaw, roll
CAR_AIR_CONTROL_DAMPING = (30.0, 20.0, 50.0)
BUMP_COOLDOWN_TIME = 0.25  # s before the same car can bump (or demolish) the same victim again
BUMP_MIN_FORWARD_DIST = 64.5  # UU: a bump needs the contact point this far ahead of the car's origin
DEMO_RESPAWN_TIME = 3.0  # s from a demolition to the respawn
# Car::_UpdateAirTorque / btRigidBody: ANGULAR_MOTION_THRESHOLD is 0.5 * pi / 2 rad per tick.
ANGULAR_MOTION_THRESHOLD = 0.25 * math.pi
SIMD_EPSILON = float(np.finfo(np.float32).eps)  # FLT_EPSILON, Bullet's SIMD_EPSILON in float builds
FLT_MAX = float(np.finfo(np.float32).max)

# RLConst::BTVehicle (lengths converted from BT to UU).
SUSPENSION_FORCE_SCALE_FRONT = 36.0 - 1.0 / 4.0  # 35.75
SUSPENSION_FORCE_SCALE_BACK = 54.0 + 1.0 / 4.0 + 1.5 / 100.0  # 54.265
SUSPENSION_STIFFNESS = 500.0
WHEELS_DAMPING_COMPRESSION = 25.0
WHEELS_DAMPING_RELAXATION = 40.0
MAX_SUSPENSION_TRAVEL = 12.0  # UU
SUSPENSION_SUBTRACTION = 0.05 * BT_TO_UU  # 2.5 UU
ROLLING_FRICTION_SCALE_MAGIC = 113.73963  # btVehicleRL::calcFrictionImpulses
VEHICLE_CONTACT_DAMPING = 0.2  # resolveSingleBilateral's contactDamping
SOLVER_ERP = 0.2  # btContactSolverInfo::m_erp, used by the wheels' extra pushback
SOLVER_DEFAULT_TIME_STEP = 1.0 / 60.0  # btContactSolverInfo::m_timeStep before the world's first step
SOLVER_SPLIT_IMPULSE_TURN_ERP = 0.1  # btContactSolverInfo::m_splitImpulseTurnErp

# LinearPieceCurves (RLConst.h): (input, output) points; below the first point the first output,
# above the last the last output.
STEER_ANGLE_FROM_SPEED_CURVE = (
    (0.0, 0.53356),
    (500.0, 0.31930),
    (1000.0, 0.18203),
    (1500.0, 0.10570),
    (1750.0, 0.08507),
    (3000.0, 0.03454),
)
BALL_CAR_EXTRA_IMPULSE_FACTOR_CURVE = ((0.0, 0.65), (500.0, 0.65), (2300.0, 0.55), (4600.0, 0.30))
BUMP_VEL_AMOUNT_GROUND_CURVE = ((0.0, 5.0 / 6.0), (1400.0, 1100.0), (2200.0, 1530.0))
BUMP_VEL_AMOUNT_AIR_CURVE = ((0.0, 5.0 / 6.0), (1400.0, 1390.0), (2200.0, 1945.0))
BUMP_UPWARD_VEL_AMOUNT_CURVE = ((0.0, 2.0 / 6.0), (1400.0, 278.0), (2200.0, 417.0))
POWERSLIDE_STEER_ANGLE_FROM_SPEED_CURVE = ((0.0, 0.39235), (2500.0, 0.12610))
DRIVE_SPEED_TORQUE_FACTOR_CURVE = ((0.0, 1.0), (1400.0, 0.1), (1410.0, 0.0))
NON_STICKY_FRICTION_FACTOR_CURVE = ((0.0, 0.1), (0.7075, 0.5), (1.0, 1.0))
LAT_FRICTION_CURVE = ((0.0, 1.0), (1.0, 0.2))
# LONG_FRICTION_CURVE is empty in RocketSim: its output is the default, 1.
HANDBRAKE_LAT_FRICTION_FACTOR_CURVE = ((0.0, 0.1),)
HANDBRAKE_LONG_FRICTION_FACTOR_CURVE = ((0.0, 0.5), (1.0, 0.9))

# Kickoff spots for blue (RLConst::CAR_SPAWN_LOCATIONS_SOCCAR): x, y, yaw; orange is mirrored
# through (-x, -y) with yaw + pi. Arena::ResetToRandomKickoff shuffles them; cars past the fifth per
# team go to the respawn spots, CAR_SPAWN_EXTRA_OFFSET_Y further along y for each car already there.
CAR_SPAWN_LOCATIONS_SOCCAR = (
    (-2048.0, -2560.0, math.pi / 4),
    (2048.0, -2560.0, 3 * math.pi / 4),
    (-256.0, -3840.0, math.pi / 2),
    (256.0, -3840.0, math.pi / 2),
    (0.0, -4608.0, math.pi / 2),
)
CAR_SPAWN_EXTRA_OFFSET_Y = 250.0

# Respawn spots for blue (RLConst::CAR_RESPAWN_LOCATIONS_SOCCAR): x, y, yaw; orange is mirrored.
CAR_RESPAWN_LOCATIONS_SOCCAR = (
    (-2304.0, -4608.0, math.pi / 2),
    (-2688.0, -4608.0, math.pi / 2),
    (2304.0, -4608.0, math.pi / 2),
    (2688.0, -4608.0, math.pi / 2),
)
