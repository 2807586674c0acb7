"""The fused step: the twin of `arena.py`'s `tick` / `fold_tick` / `step_ticks` in Triton, each tick
its stage kernels in Arena::Step order (`tick`), one thread per lane:

- `bodies_near_kernel`, one env per lane: the tick's bounds, which cars' wheel rays pass near another
  body, and which envs' bodies may touch: it finishes the envs whose bodies are apart and lists the
  others, which the stages of the contacts between bodies take alone;
- `wheel_rays_kernel`, one wheel per lane: the wheels' rays against the arena;
- `pre_tick_kernel`, one car per lane, in two passes: a demolished car's countdown and respawn,
  Car::_PreTickUpdate;
- `car_pairs_kernel`, one car pair per lane: Bullet's box-box contacts between the cars that may meet,
  their solver rows and the pair's bump parts (what the bump rule reads of the two cars);
- `collisions_kernel`, one env per lane: the car-ball contacts and their rows, then the contact
  callbacks, car-ball hits and the chain of car-car bumps;
- `body_solve_kernel`, one env per lane: the rows between bodies solved alone (the sequential impulse
  of `sequential_impulse.py`), each body's deltas into `body_solve`;
- `car_step_kernel`, in two passes: the body against the arena, its solve (from the car's deltas),
  integration, post-tick; one car per lane, then on small batches one per program for the cars whose
  body may touch the arena, its lanes sharing the triangles of its grid cell; on large batches
  `car_world_pairs_kernel` lists those cars' near triangles and `car_world_points_kernel` finds each
  pair's contact point, 32 pairs to a warp, before the second pass;
- `car_events_kernel`, one env per lane: the pads, the cars' events;
- `ball_and_rules_kernel`, one env per lane: the ball's step (its arena solve from its deltas), goals,
  events and kickoffs.

Each calls the stages of `kernels/ball.py`, `kernels/car.py` and the game rules (`kernels/rules.py`,
`ball_hit.py`, `car_contacts.py`, `car_bump.py`, `boost_pads.py`) as the reference tick does. The cars
travel between the kernels as their packed rows (`kernels/car.pack_cars`' layout: `car_rows_kernel`
both ways), `car_tick` (forces, frozen flags, callback results), `pair_contacts`, `body_rows`,
`body_mask` and `body_solve`; an env kernel walks its cars with
static loops, a car kernel runs one car slot per program (its tables load once per block), its lanes'
envs in their own order (the wheel rays' in `car_order`'s, which can sort them by the arena each car
meets: `SORT_FROM_LANES`). The two car kernels
run twice per tick: a first pass finishes the cars that cannot take their heavy path (the wheel rays
against the other bodies; the body's contacts with the arena) and defers the others (`defer_lanes`)
to a second pass that runs it (on small batches one car per program, `deferred_car`);
the stages between bodies take the envs whose bodies may touch (`bodies_near_kernel`). The env kernels read
and write only the car columns they use. Ball-only
arenas run all K ticks in one launch of `ball_and_rules_kernel`, the ball in registers throughout.
(One kernel with every car unrolled did not compile: Triton's coalesce pass grows with the number of
memory operations times the square of the kernel's size, 600 s of a CPU for one car with its body.)

What differs from the reference tick: each car body meets the arena in Bullet's step through
`car_contacts.car_world_contacts` (Bullet's GJK for the mesh triangles, separating axes where the
reference runs EPA, the deepest corner for the planes, as `car_world.plane_contacts`) and is solved by
`car_contacts.solve_car_world`; the car-ball contact comes from `kernels/car_contacts.py` (the
distance in closed form, where the reference runs GJK; the car pairs' are btBoxBoxDetector's, as the
reference's, `kernels/car_car.py`), and Bullet's one joint solve of every row is split in two:
the rows between bodies solved alone (`solve_bodies`), then each body's arena rows starting from
their deltas (docs/SOCCAR.md measures what that costs). The callbacks fire from the same contacts.
The wheels' rays, as the reference's, meet the arena, the other cars and the ball
(`kernels/vehicle.ray_cast_bodies`), read as they stand when the pre-ticks start from a second buffer of
the cars' rows (`tick`). Its PyTorch twin in the tests is `tests/envs/soccar/kernels/stand_in_tick.py`.
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh import ArenaMesh, load_arena_mesh
from nitro.envs.soccar.contacts import CAR_CAR_POINTS as _CAR_CAR_POINTS
from nitro.envs.soccar.contacts import MAX_NEW_CONTACTS, MAX_PUSH_POINTS, PLANE_OBJECT_BASE
from nitro.envs.soccar.kernels import (
    ball_hit,
    boost_pads,
    car_bump,
    car_car,
    car_contacts,
    constexpr,
    jit,
    require_triton,
    rules,
    settle_cache_keys,
    stage_jit,
    tl,
    triton,
    triton_op,
    warps,
    wrap_triton,
)
from nitro.envs.soccar.kernels import car as car_kernels
from nitro.envs.soccar.kernels.arena_mesh import ARENA_NAMES, arena_tensors, grid, grid_args
from nitro.envs.soccar.kernels.ball import apply_damping, finish_physics_tick, physics_step, update_sleeping
from nitro.envs.soccar.kernels.car import (
    CAR_STEP_CHUNKS,
    CAR_WIDTH,
    PACKED,
    PRE_TICK_CHUNKS,
    SOLVER_DEFAULT_TIME_STEP,
    car_of_row,
    car_row_values,
    car_table,
    load_car_columns,
    load_car_row,
    load_car_params,
    load_controls,
    car_rows_kernel,
    int8_view,
    store_car_chunks,
    store_car_columns,
    store_car_row,
)
from nitro.envs.soccar.kernels.car_contacts import BODY_ROW_WIDTH, PAIR_COUNT_BITS
from nitro.envs.soccar.kernels.rigid_body import INV_MASS, column, inv_inertia_world, mat_vec
from nitro.envs.soccar.kernels.vec import (
    add,
    chunked_at,
    chunked_rows,
    dot,
    load,
    load_columns,
    load_row,
    neg,
    scale,
    store,
    store_columns,
    store_row,
    sub,
    where,
)
from nitro.envs.soccar.kernels.ray_cast import ray_cast
from nitro.envs.soccar.kernels.vehicle import (
    ARENA_HIT_WIDTH,
    NEAR_SPARE,
    bodies_of,
    hard_point_of,
    pick,
    pick_vec,
    ray_length_of,
    rays_near_bodies,
    sphere_meets_box,
    store_arena_hit,
)
from nitro.envs.soccar.mutators import TickParams, ball_mass_props
from nitro.envs.soccar.state import ArenaEvents, CarState, GameState, World

FUSED_BLOCK = 32  # lanes per program of the stage kernels: one warp, so block-wide branches are warp-wide
# The fused tick reads its own grid, made for the ball's reach (radius + gap = 93.2 UU): 64-UU cells
# listing the triangles within 96 UU, where the shared grid (128-UU cells, 112 UU for every query)
# lists 1.5x as many per cell near the walls. Lists stay in Bullet's visiting order and hold every
# triangle the ball can touch, so the contacts, in order, are the same.
BALL_GRID_CELL = 64.0
BALL_GRID_RADIUS = 96.0
# The wheels' rays read a grid of their own, looked up at each ray's midpoint (`ray_cast`): 48-UU
# cells listing the triangles within 26.5 UU, half the longest preset's ray (52.0 UU, the merc's front
# wheels) with room. In the benchmark's 1v1 games after 96 ticks (2,048 envs, the cars in `car_order`),
# a warp of 32 cars walks 3.1 listed triangles a tick for its four wheels (148 at most) where the
# ball's grid, looked up at the wheels' hard points, gave it 11.7 (460). Measured on an H200, 1v1 at 1M
# envs, the pre-tick's first pass 2.05 -> 1.82 ms per tick (docs/PERFORMANCE.md).
RAY_GRID_CELL = 48.0
RAY_GRID_RADIUS = 26.5
CAR_CAR_POINTS = constexpr(_CAR_CAR_POINTS)
BOOST_PAD_COUNT = constexpr(C.BOOST_PAD_COUNT)
BALL_REST_Z = constexpr(C.BALL_REST_Z)
BODY_SOLVE_WIDTH = constexpr(16)
"""Floats per body in `body_solve`: the solve between bodies' (dv, dw, push, turn), BT, four spare."""
CARBALL_FRICTION = constexpr(C.CARBALL_COLLISION_FRICTION)
CARBALL_RESTITUTION = constexpr(C.CARBALL_COLLISION_RESTITUTION)
CARCAR_FRICTION = constexpr(C.CARCAR_COLLISION_FRICTION)
CARCAR_RESTITUTION = constexpr(C.CARCAR_COLLISION_RESTITUTION)
UU_TO_BT = constexpr(C.UU_TO_BT)
BT_TO_UU = constexpr(C.BT_TO_UU)
AT = car_kernels.AT.value
BOOST_AT = constexpr(AT[PACKED.index("boost")])
ON_GROUND_AT = constexpr(AT[PACKED.index("is_on_ground")])
SUPERSONIC_AT = constexpr(AT[PACKED.index("is_supersonic")])
BUMP_AT = constexpr(AT[PACKED.index("car_contact_cooldown_timer")])
"""Where a car row's car_contact_cooldown_timer, is_demoed and demo_respawn_timer sit, side by side."""
IMPULSE_CACHE_AT = constexpr(AT[PACKED.index("velocity_impulse_cache")])
HIT_INFO_AT = car_kernels.CAR_TUPLE_FLOATS
"""Where the ball hit info's floats start in a packed car row: right after `load_car`'s fields."""
HIT_INFO_FLOATS = constexpr(10)
assert PACKED[PACKED.index("car_contact_cooldown_timer") :][:3] == (
    "car_contact_cooldown_timer", "is_demoed", "demo_respawn_timer"
)  # fmt: skip
assert PACKED[PACKED.index("ball_hit_info_is_valid") :] == (
    "ball_hit_info_is_valid", "ball_hit_info_relative_pos_on_ball", "ball_hit_info_ball_pos", "ball_hit_info_extra_hit_vel"
)  # fmt: skip
PARAM_NAMES = tuple(f.name for f in dataclasses.fields(TickParams))
"""The kernel's parameters named as `TickParams`' fields (the op carries them as a list in this order)."""


CAR_TICK_WIDTH = constexpr(16)
"""Floats per car in `car_tick`, what one tick's stage kernels hand each other: the pre-tick's force
(3) and torque (3), whether the body is frozen this tick (demolished at its start), one spare, the
car's test against the pad it may touch (`PAD_TESTS_AT`), the callbacks' touched, demoed_by and
bumped_by (-1 none; the pre-tick writes these, the callbacks' second pass the ones that happen), two
spare (rows a power of two wide)."""
FORCE_AT = constexpr(0)
TORQUE_AT = constexpr(3)
FROZEN_AT = constexpr(6)
PAD_TESTS_AT = constexpr(8)
"""Where the car's test against the one pad it may touch lies (`car_pad_tests`: the pad or -1, in its
cylinder, in its box; the pre-tick writes none, the car step the pad a car touches), the callbacks'
after it: the row's second 32 bytes, one memory sector, which `car_events_kernel` reads for every car."""
TOUCHED_AT = constexpr(11)
"""Where the callbacks' touched, demoed_by and bumped_by start, side by side."""


def tick(args: dict, envs: int, cars: int, block: int, maxnreg: int) -> None:
    """One RocketSim tick (Arena::Step) of each env, as `arena.tick` orders its stages: each stage
    kernel a launch over the lanes it needs (one per car or car pair, one slot per program; or one
    per env, its cars walked by static loops); they hand each other the cars' packed rows,
    `car_tick` and `pair_contacts`. ``args``: every kernel argument by name (`step_ticks_op`);
    ``envs`` envs of ``cars`` cars each.

    The pre-tick stage reads the cars' rows as the tick starts (``car_rows_ptr``) and writes them to the
    spare buffer (``car_spare_rows_ptr``), which the later stages then update in place: the buffers
    swap in ``args`` every tick (no copy; one extra buffer of the cars' rows). With one car per env the
    two are one buffer, which the pre-tick too updates in place. ``args["deferred_counts"]``:
    this tick's zeroed counts of the deferred cars and envs ([4, C]: the pre-tick's, the car step's, in
    column 0 the envs `bodies_near_kernel` lists, and in column 0 the (car, triangle) pairs
    `car_world_pairs_kernel` lists)."""
    if cars:
        # 2. a demolished car's countdown and respawn, the cars' pre-tick, whose wheel rays meet the
        #    other cars and the ball as they stand now
        #    (the cars whose rays pass near no body first, then the others: `pre_tick_kernel`)
        start, args["car_rows_ptr"] = args["car_rows_ptr"], args["car_spare_rows_ptr"]
        args["car_spare_rows_ptr"] = start
        counts = args["deferred_counts"]  # this tick's, one row per two-pass stage
        rays = {**args, **args["wheel_rays"], "car_start_rows_ptr": start}  # (their own grid: `RAY_GRID_CELL`)
        # the bounds at the tick-start transforms: which cars' rays pass near a body, which envs' bodies
        # may touch (listed for stage 5 in `near_envs`, apart from the cars' lists), `bodies_near_kernel`
        near_envs = {**args, "deferred_count_ptr": counts[2], "deferred_ptr": args["near_envs_ptr"]}
        launch(bodies_near_kernel, envs, 1, {**near_envs, "car_start_rows_ptr": start}, NEAR_BLOCK, maxnreg)
        launch(wheel_rays_kernel, envs, cars * 4, rays, block, maxnreg)  # the rays against the arena first
        for deferred in (False, True):  # (the second pass a list's, `LIST_PROGRAMS`, or one car per program)
            passes = car_pass(deferred, envs, cars)
            launch(pre_tick_kernel, envs, cars, {**rays, "deferred_count_ptr": counts[0], **passes}, block,
                   maxnreg, listed=deferred)  # fmt: skip
        # 5. collision detection between the cars, then the contact callbacks (hits, bumps), then the
        #    contacts between bodies solved alone (the arena rows start from their deltas), in the
        #    listed envs alone
        if cars > 1:
            launch(car_pairs_kernel, envs, cars * (cars - 1) // 2, near_envs, block, maxnreg, listed=True)
        launch(collisions_kernel, envs, 1, near_envs, block, maxnreg, listed=True)
        launch(body_solve_kernel, envs, 1, near_envs, block, maxnreg, listed=True)
        # 5. each car body's contacts with the arena, solve and integration; 6. post-tick and finish
        #    (the cars whose body touches nothing first, then the others: `car_step_kernel`; on large
        #    batches their contact points found pair by pair first: `car_world_pairs_kernel`)
        for deferred in (False, True):
            passes = car_pass(deferred, envs, cars)
            if deferred and not passes["CAR_PER_PROGRAM"]:  # the second pass's near triangles, then points
                pairs = {**args, "deferred_count_ptr": counts[1], "world_pair_total_ptr": counts[3]}
                launch(car_world_pairs_kernel, envs, cars,
                       {**pairs, "programs": min(envs * cars, DEFERRED_PROGRAMS)}, block, maxnreg)  # fmt: skip
                launch(car_world_points_kernel, args["world_pairs_capacity"], 1, pairs, block, maxnreg, listed=True)
            launch(car_step_kernel, envs, cars, {**args, "deferred_count_ptr": counts[1], **passes}, block,
                   maxnreg, listed=deferred)  # fmt: skip
        # 3. and 7. the pads; the cars' events of the tick
        launch(car_events_kernel, envs, 1, args, PADS_BLOCK, maxnreg)
    # 1. and 5. the ball's sleeping and step; 8. ball finish; 9. goals; 10.
    launch(ball_and_rules_kernel, envs, 1, args, block, maxnreg)


def car_pass(deferred: bool, envs: int, cars: int) -> dict:
    """A two-pass car kernel's pass arguments: the second (``deferred``) one car per program over
    `DEFERRED_PROGRAMS` programs up to `CAR_PER_PROGRAM_UP_TO` lanes (`deferred_car`), else a list's."""
    one_car = deferred and envs * cars <= CAR_PER_PROGRAM_UP_TO
    programs = {"programs": min(envs * cars, DEFERRED_PROGRAMS)} if one_car else {}
    return {"DEFERRED": deferred, "CAR_PER_PROGRAM": one_car, **programs}


REGISTER_CAPS: dict[str, int] = {}
"""ptxas's register cap per thread of a stage kernel by its `pass_name` (`launch`; a step's own
``maxnreg`` comes first): fewer registers, more warps per SM, the rest spilled."""
UNFUSED_PASSES = frozenset({"pre_tick_kernel (deferred)"})
"""Stage kernels (by `pass_name`) compiled without contracting a multiply and an add into one FMA,
which rounds once where the reference (PyTorch on the CPU, as RocketSim) rounds twice: the pre-tick's
second pass casts the wheels' rays against the ball and the cars (`kernels/subsimplex_convex_cast`),
whose hits turn on the last ulp. Measured on an H200, 4,096 rays at balls and at car boxes against
the reference: with FMAs 30% and 15% moved by more than 1e-5 of their length (up to 0.25 BT); without,
and with IEEE divisions and square roots, none (docs/FIDELITY.md). Eager launches only: torch.compile
drops the option, as it does ``maxnreg``."""


def pass_name(name: str, deferred) -> str:
    """A stage kernel's name as the benchmarks and `REGISTER_CAPS` name it: a two-pass car kernel's
    second pass (``DEFERRED``) as ``NAME (deferred)``."""
    return name + (" (deferred)" if deferred else "")


def launch(kernel, envs: int, per_env: int, args: dict, block: int, maxnreg: int, listed: bool = False) -> None:
    """``kernel`` over ``envs`` envs, ``block`` per program, times ``per_env`` (each car slot for the car
    kernels), its arguments picked by name from ``args``: a list's pass (``listed``) over at most
    `LIST_PROGRAMS` programs per slot, each taking its places in turn (`list_places`); or over
    ``args["programs"]`` programs where given (a pass taking one car per program)."""
    name = pass_name(kernel.fn.__name__, args.get("DEFERRED"))
    maxnreg = maxnreg or REGISTER_CAPS.get(name, 0)
    cap = {"maxnreg": maxnreg} if maxnreg else {}  # eager launches only: torch.compile drops it
    cap |= {"enable_fp_fusion": False} if name in UNFUSED_PASSES else {}
    named = {name: args[name] for name in kernel.arg_names if name not in ("n", "BLOCK")}
    programs = triton.cdiv(envs, block)
    programs = args.get("programs") or (min(programs, LIST_PROGRAMS) if listed else programs) * per_env
    settle_cache_keys(kernel)  # the same cache key in every process
    wrap_triton(kernel)[(programs,)](**named, n=envs, BLOCK=block, num_warps=warps(block), **cap)


@jit
def f32(x):
    """A float scalar argument as float32: eager launches pass fp32, torch.compile fp64 (Inductor types
    Python floats as fp64)."""
    return tl.cast(x, tl.float32)


@jit
def flag(x):
    """A bool scalar argument (passed as a float) as an int32 0 / 1."""
    return tl.cast(tl.cast(x, tl.float32), tl.int32)


@jit
def car_lanes(car_order_ptr, n, q, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr, count=None, spread_programs=0,
              PER_CAR: tl.constexpr = 1):  # fmt: skip
    """A car kernel's lanes at program place ``q`` (`list_places`): BLOCK envs' cars of one slot per
    program, so the slot's tables load once for the block, the envs taken in `car_order`'s order ([C, n]:
    each slot's envs): (row = env * NUM_CARS + slot, live, env int64, slot). With ``count`` (a pointer to
    one count per slot), the first count envs of the slot's list (`defer_lanes`'), spread
    (`spread_lanes`): of the places that take them, place q's lanes take the list's places q, q + that
    many, q + twice as many, ... The first pass lists its deferred cars in its own order; spread, each
    warp of the second pass holds a few of those that lay together, and lasts as long as its slowest car
    (measured on an H200, 1v1, when the first pass took `car_order`'s sorted order, the car step's second
    pass in list order / spread: 0.74 / 0.52 ms per tick at 262,144 envs, 1.06 / 0.92 at 1,048,576;
    docs/PERFORMANCE.md). Without ``car_order_ptr`` (None), the envs in their own order. With
    ``PER_CAR`` lanes per car (no count), BLOCK / PER_CAR cars per program, each in PER_CAR lanes side by
    side (`wheel_rays_kernel`)."""
    slot = tl.program_id(0) % NUM_CARS
    if count is None:
        at = q * (BLOCK // PER_CAR) + tl.arange(0, BLOCK) // PER_CAR
        live = at < n
    else:
        at, live = spread_lanes(tl.load(count + slot), q, n, spread_programs, BLOCK)
    if car_order_ptr is None:
        env = at
    else:
        env = tl.load(car_order_ptr + slot * tl.cast(n, tl.int64) + at, mask=live, other=0)
    return env * NUM_CARS + slot, live, env.to(tl.int64), slot


SPREAD_PROGRAMS = 128
"""A list's pass (`spread_lanes`, the kernels' ``spread_programs``) spreads its entries over at least this
many programs, where it has as many entries and launched programs: about one warp per SM of an
H100/H200 (132 SMs). A short list's entries then take warps of their own on every SM (a warp lasts as
long as its slowest lane) rather than pack 32 to a warp on a few SMs while the others idle; a long
list's pack 32 to a warp, which costs the SMs fewer warps' worth of instructions. Measured on an H200
(docs/PERFORMANCE.md), 1v1, device ms per tick of the second passes with 0 / 128 / 512 / 1024: at
16,384 envs the pre-tick's 0.074 / 0.055 / 0.055 / 0.055, the solve between bodies' 0.060 / 0.046 /
0.046 / 0.046; at 262,144 envs the car step's 0.537 / 0.525 / 0.700 / 1.046; at 1,048,576 envs the car
step's 0.930 / 0.926 / 0.933 / 1.467."""


LIST_PROGRAMS = 4096
"""Programs per car slot (per pair: `car_pairs_kernel`) a list's pass launches at most (`tick`), each
taking its places of the list in turn (`list_places`), as many as `DEFERRED_PROGRAMS`. A list holds a
few % of a large batch's cars or envs; a grid of one program per BLOCK envs launched as many programs
again with nothing to do (at 3v3 and 4,063,232 envs, 1.9M for the car pairs alone), each at a cost (an
H200 ran 131,072 such programs in at most 0.085 ms, docs/PERFORMANCE.md)."""


@jit
def list_places(listed, n, spread_programs, PER: tl.constexpr, BLOCK: tl.constexpr, LISTED: tl.constexpr = True):
    """The program places q (range(first, stop, step)) a program of a pass takes in turn, ``PER``
    programs side by side (a car kernel's slots, `car_pairs_kernel`'s pairs): of a list's pass
    (``LISTED``), those a list of ``listed`` entries of at most ``n`` spreads over (`list_stop`), each
    program from its own, a launched grid's width apart (`LIST_PROGRAMS`); of any other pass, its own
    alone."""
    first = tl.program_id(0) // PER
    if LISTED:
        places = (first, list_stop(listed, n, spread_programs, BLOCK), tl.num_programs(0) // PER)
    else:
        places = (first, first + 1, 1)
    return places


@jit
def list_stop(listed, n, spread_programs, BLOCK: tl.constexpr):
    """How many places take a list of ``listed`` entries of at most ``n``: cdiv(listed, BLOCK), or more,
    up to ``spread_programs`` (`SPREAD_PROGRAMS`)."""
    fill = tl.minimum(listed, tl.minimum(tl.cdiv(n, BLOCK), spread_programs))
    return tl.maximum(tl.cdiv(listed, BLOCK), fill)


@jit
def spread_lanes(listed, q, n, spread_programs, BLOCK: tl.constexpr):
    """Place ``q``'s entries in a list of ``listed`` entries of at most ``n`` (q below `list_stop`),
    spread (`car_lanes`): place q takes entries q, q + as many as the places, ... (entries, live)"""
    at = tl.arange(0, BLOCK) * list_stop(listed, n, spread_programs, BLOCK) + q
    return at, at < listed


@jit
def listed_envs(deferred_ptr, deferred_count_ptr, q, n, spread_programs, BLOCK: tl.constexpr):
    """Place ``q``'s envs of the list `bodies_near_kernel` makes (`spread_lanes`): (env int64, live)."""
    at, live = spread_lanes(tl.load(deferred_count_ptr), q, n, spread_programs, BLOCK)
    return tl.load(deferred_ptr + at, mask=live, other=0).to(tl.int64), live


@jit
def pass_lanes(deferred_ptr, deferred_count_ptr, n, q, spread_programs, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr,
               DEFERRED: tl.constexpr):  # fmt: skip
    """A two-pass car kernel's lanes at place ``q`` (`car_lanes`): every car, in the envs' own order, on
    the first pass (a warp's lanes read and write whole memory sectors of the chunked car rows,
    `vec.chunked_at`); the cars it deferred (`defer_lanes`) on the second (``DEFERRED``)."""
    if DEFERRED:
        lanes = car_lanes(deferred_ptr, n, q, NUM_CARS, BLOCK, deferred_count_ptr, spread_programs)
    else:
        lanes = car_lanes(None, n, q, NUM_CARS, BLOCK)
    return lanes


@jit
def deferred_total(deferred_count_ptr, NUM_CARS: tl.constexpr):
    """How many cars the first pass deferred, all slots together (`defer_lanes`)."""
    total = tl.load(deferred_count_ptr)
    for s in tl.static_range(1, NUM_CARS):
        total += tl.load(deferred_count_ptr + s)
    return total


@jit
def deferred_car(deferred_ptr, deferred_count_ptr, k, n, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr):
    """The ``k``-th deferred car (car slot 0's list, then slot 1's, ...) in every lane, as `car_lanes`
    gives a car kernel's lanes: (row, live, env int64, slot)."""
    slot = k * 0
    at = k
    for s in tl.static_range(NUM_CARS - 1):
        count = tl.load(deferred_count_ptr + s)
        past = (slot == s) & (at >= count)
        at = tl.where(past, at - count, at)
        slot = tl.where(past, s + 1, slot)
    lanes = tl.arange(0, BLOCK)
    env = tl.load(deferred_ptr + slot * tl.cast(n, tl.int64) + at + lanes * 0)
    return env * NUM_CARS + slot, lanes >= 0, env.to(tl.int64), slot


DEFERRED_PROGRAMS = 4096
"""Programs of a second pass one car per program (`pre_tick_kernel`'s and `car_step_kernel`'s
``CAR_PER_PROGRAM``), each taking the deferred cars in turn: enough to fill an H100/H200 several times
over (132 SMs, each holding 8 one-warp programs at 255 registers), so the cars' unequal work evens out
across them."""
CAR_PER_PROGRAM_UP_TO = 262_144
"""The second passes of the pre-tick and the car step take one car per program up to this many (env,
car) lanes, one car per lane above it (`pre_tick_kernel`, `car_step_kernel`). The car step's, measured
on an H200, 1v1 (about 1% of the cars deferred), ms per tick of plain steps one car per program / one
per lane: 16,384 envs 0.99 / 2.10, 131,072 envs 1.80 / 1.79, 1,048,576 envs 7.45 / 6.34; 1v0 at
1,048,576 envs 2.93 / 2.83 (docs/PERFORMANCE.md)."""


@jit
def defer_lanes(deferred_count_ptr, slot, defer):
    """Places in car slot ``slot``'s list ([C, n]) of cars for a second pass (`car_lanes` with its count)
    for the lanes ``defer``, one relaxed atomic add per program: (the program's first place, each lane's
    offset from it, ``defer``), for `store_deferred` at the kernel's end, so that nothing in between waits
    for the add's answer. Their order in the list is the programs' order of adding, which changes which
    lane runs which car, never a result."""
    d = defer.to(tl.int32)
    first = tl.atomic_add(deferred_count_ptr + slot, tl.sum(d, axis=0), sem="relaxed")
    return first, tl.cumsum(d, axis=0) - d, defer


@jit
def store_deferred(deferred_ptr, env, slot, deferral, n):
    """The envs of `defer_lanes`' lanes into their places of car slot ``slot``'s list."""
    first, offset, defer = deferral
    tl.store(deferred_ptr + slot * tl.cast(n, tl.int64) + first + offset, env.to(tl.int32), mask=defer)


@jit
def env_lanes(n, BLOCK: tl.constexpr):
    """An env kernel's lanes: (lane, live, env int64)."""
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    return lane, lane < n, lane.to(tl.int64)


@jit
def load_car_and_hit_info(
    rows_ptr, car_contact_id_ptr, tick_count_since_update_ptr, car_ints_ptr, row, live, NUM_CARS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """A car (`load_car`) and its ball hit info (`load_hit_info`), its row read once."""
    v = load_car_row(rows_ptr, row, live, NUM_CARS, BLOCK)
    car = car_of_row(
        v, tl.load(car_contact_id_ptr + row, mask=live, other=0), tl.load(tick_count_since_update_ptr + row, mask=live, other=0)
    )
    return car, hit_info_of(v, load_hit_ticks(car_ints_ptr, row, live, BLOCK))


@jit
def load_hit_ticks(car_ints_ptr, row, live, BLOCK: tl.constexpr):
    """A car's ball hit info's two tick counts, the first two columns of its `car_ints` row."""
    return load_columns(car_ints_ptr, row, live, CAR_INTS_WIDTH, 2, 2, BLOCK)


@jit
def store_hit_ticks(car_ints_ptr, row, live, hit_ticks, BLOCK: tl.constexpr):
    """`load_hit_ticks`' inverse (``hit_ticks``: a hit info's last two fields)."""
    store_columns(car_ints_ptr, row, hit_ticks, live, CAR_INTS_WIDTH, 2, 2, BLOCK)


@jit
def load_car_events(car_ints_ptr, row, live, BLOCK: tl.constexpr):
    """A car's events so far, columns 2-5 of its `car_ints` row: (touched, demoed_by, bumped_by, pickup pad)."""
    ints = load_columns(car_ints_ptr + EVENTS_AT, row, live, CAR_INTS_WIDTH, 4, 4, BLOCK)
    return ints[0] != 0, ints[1].to(tl.int32), ints[2].to(tl.int32), ints[3].to(tl.int32)


@jit
def store_car_events(car_ints_ptr, row, live, events, BLOCK: tl.constexpr):
    """`load_car_events`' inverse."""
    touch, demoer, bumper, pad = events
    ints = (touch.to(tl.int64), demoer.to(tl.int64), bumper.to(tl.int64), pad.to(tl.int64))
    store_columns(car_ints_ptr + EVENTS_AT, row, ints, live, CAR_INTS_WIDTH, 4, 4, BLOCK)


@jit
def store_car_tick(car_tick_ptr, row, live, force, torque, frozen, BLOCK: tl.constexpr):
    """A car's `car_tick` row as the pre-tick leaves it: no pad touched, no touch, no attacker yet (the
    car step writes the pad a car touches, the callbacks theirs)."""
    zero = force[0] * 0.0
    values = force + torque + (frozen.to(tl.float32), zero, zero - 1.0, zero, zero, zero, zero - 1.0, zero - 1.0)
    store_row(car_tick_ptr, row, values + (zero, zero), live, CAR_TICK_WIDTH, BLOCK)


@jit
def load_car_tick(car_tick_ptr, row, live, BLOCK: tl.constexpr):
    """What the physics reads of `store_car_tick`'s row: (force, torque, frozen)."""
    v = load_columns(car_tick_ptr, row, live, CAR_TICK_WIDTH, FROZEN_AT + 1, 8, BLOCK)
    force = (v[FORCE_AT], v[FORCE_AT + 1], v[FORCE_AT + 2])
    torque = (v[TORQUE_AT], v[TORQUE_AT + 1], v[TORQUE_AT + 2])
    return force, torque, v[FROZEN_AT] != 0


@jit
def arena_of(tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr,
             plane_offsets_ptr, cell_start_ptr, cell_tris_ptr):  # fmt: skip
    """The arena's pointers as the queries take them."""
    arena = (tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr)
    return arena + (plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr)


@stage_jit
def wheel_rays_kernel(
    car_order_ptr, car_start_rows_ptr, car_table_ptr, wheel_hits_ptr,
    tri_ptr, plane_normals_ptr, plane_offsets_ptr, cell_start_ptr, cell_tris_ptr, ox0, oy0, oz0, cell_size,
    dim_x, dim_y, dim_z, n, NUM_CARS: tl.constexpr, NUM_PLANES: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """Stage 2's wheel rays against the arena (btVehicleRL::rayCast's cast), one wheel per lane, before
    `pre_tick_kernel`: each program takes BLOCK / 4 cars of one car slot, in `car_order`'s order (which
    can group the cars at the walls, as a warp walks as many triangles as its longest lane:
    `SORT_FROM_LANES`), each car's four wheels in four lanes side by side, from the cars' rows as the
    tick starts (``car_start_rows``); the hits go to each car's row of ``wheel_hits`` (`wheel_hits_of`:
    a car's 64 bytes written by its four lanes at once), which the pre-tick's first pass reads. A car's
    four rays, in four lanes of a kernel of few registers rather than one after another in the car's
    lane, wait on the grid together."""
    row, live, _, slot = car_lanes(car_order_ptr, n, tl.program_id(0) // NUM_CARS, NUM_CARS, BLOCK, None, 0, 4)
    wheel = tl.arange(0, BLOCK) % 4
    v = load_car_columns(car_start_rows_ptr, row, live, 0, 12, NUM_CARS, BLOCK)
    pos, rot_mat = (v[0], v[1], v[2]), ((v[3], v[4], v[5]), (v[6], v[7], v[8]), (v[9], v[10], v[11]))
    _, wheel_connection, wheel_radius, suspension_rest_length, _, _ = load_car_params(car_table_ptr, slot)
    start = hard_point_of(pos, rot_mat, pick_vec(wheel_connection, wheel))
    length = ray_length_of(pick(suspension_rest_length, wheel), pick(wheel_radius, wheel))
    hit, fraction, normal, _ = ray_cast(
        start, add(start, scale(neg(column(rot_mat, 2)), length)), live, tri_ptr, plane_normals_ptr,
        plane_offsets_ptr, cell_start_ptr, cell_tris_ptr, grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z), 0,
        NUM_PLANES, BLOCK,
    )  # fmt: skip
    store_arena_hit(wheel_hits_of(wheel_hits_ptr, row), wheel, live, hit, fraction, normal, BLOCK)


@jit
def wheel_hits_of(wheel_hits_ptr, row):
    """Car row ``row``'s hits in ``wheel_hits`` ([rows, 4 wheels, ARENA_HIT_WIDTH]: a car's in one piece)
    as `vehicle.store_arena_hit` and `load_arena_hit` take them."""
    return wheel_hits_ptr, row.to(tl.int64)


@stage_jit
def pre_tick_kernel(
    wheel_hits_ptr, car_start_rows_ptr, car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, car_ints_ptr, car_tick_ptr,
    rays_near_ptr, deferred_ptr, deferred_count_ptr, tick_count_ptr, controls_ptr, car_table_ptr, hitbox_table_ptr, respawn_spawns_ptr,
    pos_ptr, vel_ptr, ang_vel_ptr,
    tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr, plane_offsets_ptr,
    cell_start_ptr, cell_tris_ptr, ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z,
    n, spread_programs, hashed_seed, tick_time, ball_radius, ball_inv_mass, ball_inv_inertia,
    car_spawn_boost_amount,
    jump_immediate_force, jump_accel, boost_used_per_second, boost_accel_ground, boost_accel_air, unlimited_flips,
    unlimited_double_jumps, flip_z_damp_factor,
    NUM_CARS: tl.constexpr, BLUE: tl.constexpr, NUM_PLANES: tl.constexpr, BLOCK: tl.constexpr,
    DEFERRED: tl.constexpr, CAR_PER_PROGRAM: tl.constexpr,
):  # fmt: skip
    """Stage 2, one car per lane: a demolished car's countdown and respawn (`rules.update_demo`), then
    Car::_PreTickUpdate (suspension, controls, jump, flip, air control, boost). Its forces and torques
    go to `car_tick`, beside whether Bullet skips its body this tick (demolished at the tick's start).
    The cars' rows as the tick starts are read from ``car_start_rows`` (the car's own, and the other
    cars' for its wheel rays, `vehicle.Bodies`), the updated ones written to ``car_rows``: two buffers,
    because each lane writes the row another lane's wheels read (`tick` swaps them every tick). With one
    car per env they are one buffer, and the first pass writes only the chunks of its row it changes
    (`car.PRE_TICK_WRITES`); the pre-tick changes neither integer field nor the ball hit info.

    Two passes (`tick`): the first takes every car, in the envs' own order (its warps read neighbouring
    cars' rows; the rays' walks of the arena, which `car_order` groups, are `wheel_rays_kernel`'s: measured
    on an H200 at 1M 1v1 envs, the first pass 1.08 ms per tick so, 1.49 in `car_order`'s order), and
    finishes those that are not demolished and whose wheel rays pass near no other car and no ball
    (`bodies_near_kernel`'s ``rays_near``: the rays meet the arena alone, their hits read from
    `wheel_hits_of`),
    deferring the others to ``deferred`` (`defer_lanes`); the second (``DEFERRED``) runs those, with the
    countdown and respawn and the rays against the bodies. The bodies' casts, what their hits carry, a
    respawned car and the car a demolished one keeps take registers every lane pays for, and most cars
    are far from the rest, and alive, most of the time.

    With ``CAR_PER_PROGRAM`` (small batches, as the car step's: `CAR_PER_PROGRAM_UP_TO`) the second
    pass takes one car per program, the same car in every lane (`deferred_car`), its wheels' casts at
    the arena and the bodies side by side (`vehicle.ray_cast`'s ``ACROSS_LANES``): at one wave the pass
    lasts as long as its slowest car, whose casts one lane ran one after another."""
    tick_time = f32(tick_time)  # (before the branch: an fp64 argument may not change type inside it)
    if CAR_PER_PROGRAM:
        first, stop, step = tl.program_id(0), deferred_total(deferred_count_ptr, NUM_CARS), tl.num_programs(0)
    else:
        slot = tl.program_id(0) % NUM_CARS
        first, stop, step = list_places(
            tl.load(deferred_count_ptr + slot), n, spread_programs, NUM_CARS, BLOCK, DEFERRED
        )
    for q in range(first, stop, step):  # (the first pass: its own place alone)
        if CAR_PER_PROGRAM:
            row, live, env, slot = deferred_car(deferred_ptr, deferred_count_ptr, q, n, NUM_CARS, BLOCK)
        else:
            row, live, env, slot = pass_lanes(
                deferred_ptr, deferred_count_ptr, n, q, spread_programs, NUM_CARS, BLOCK, DEFERRED
            )
        if tl.max(live.to(tl.int32), axis=0) > 0:  # (always; with it the 3v3 first pass took 12.58 ms, not 12.98)
            tick_count = tl.load(tick_count_ptr + env, mask=live, other=0)
            car, info = load_car_and_hit_info(
                car_start_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, car_ints_ptr, row, live, NUM_CARS, BLOCK
            )
            frozen = car[28]
            params = load_car_params(car_table_ptr, slot)
            if DEFERRED:  # (a respawned car's rays start where it respawns: cast here)
                bodies = bodies_of(  # the wheels' other bodies: the cars' tick-start rows and the ball
                    car_start_rows_ptr, pos_ptr, vel_ptr, ang_vel_ptr, env, slot, live, hitbox_table_ptr, car_table_ptr,
                    f32(ball_radius), f32(ball_inv_mass), f32(ball_inv_inertia), NUM_CARS, BLOCK,
                )  # fmt: skip
                car, info = rules.update_demo(
                    car, info, hashed_seed, env, tick_count, respawn_spawns_ptr, tick_time, f32(car_spawn_boost_amount),
                    live, slot, (slot >= BLUE).to(tl.int32), BLOCK,
                )  # fmt: skip
                arena_hits = None
            else:  # the demolished cars, and those whose rays reach a body, wait for the second pass
                bodies = None  # (the rays meet the arena alone)
                near = ((tl.load(rays_near_ptr + env, mask=live, other=0) >> slot) & 1) != 0
                waits = live & near | frozen
                deferral = defer_lanes(deferred_count_ptr, slot, waits)
                live = live & ~waits
                arena_hits = wheel_hits_of(wheel_hits_ptr, row)
            solver_dt = tl.where(tick_count == 0, SOLVER_DEFAULT_TIME_STEP, tick_time)  # before the 1st step
            car, force, torque = car_kernels.pre_tick_update(
                car, load_controls(controls_ptr, row, live, BLOCK), params, tick_time, solver_dt,
                f32(jump_immediate_force), f32(jump_accel), f32(boost_used_per_second), f32(boost_accel_ground),
                f32(boost_accel_air), f32(unlimited_flips), f32(unlimited_double_jumps), f32(flip_z_damp_factor), live,
                arena_of(tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr,
                         plane_offsets_ptr, cell_start_ptr, cell_tris_ptr),
                grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z), bodies, NUM_CARS, NUM_PLANES, BLOCK, DEFERRED,
                DEFERRED, arena_hits, CAR_PER_PROGRAM,
            )  # fmt: skip
            if DEFERRED:  # (the countdown and respawn change every field)
                store_car_and_hit_info(
                    car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, row, live, car, info, NUM_CARS,
                    BLOCK,
                )  # fmt: skip
                store_hit_ticks(car_ints_ptr, row, live, info[4:], BLOCK)
            elif NUM_CARS == 1:  # the row in place (`tick`): the chunks the pre-tick changes alone
                store_car_chunks(car_rows_ptr, row, car_row_values(car, info), live, PRE_TICK_CHUNKS, NUM_CARS, BLOCK)
            else:  # the row whole, into the other buffer (its integer fields and hit ticks are as they were)
                store_car_row(car_rows_ptr, row, car_row_values(car, info), live, NUM_CARS, BLOCK)
            store_car_tick(car_tick_ptr, row, live, force, torque, frozen, BLOCK)
            if not DEFERRED:
                store_deferred(deferred_ptr, env, slot, deferral, n)


@stage_jit
def collisions_kernel(
    pos_ptr, vel_ptr, velocity_impulse_cache_ptr, tick_count_ptr,
    car_rows_ptr, car_contact_id_ptr, car_ints_ptr, car_tick_ptr, pair_contacts_ptr,
    body_rows_ptr, body_mask_ptr, hitbox_table_ptr, deferred_ptr, deferred_count_ptr, n, spread_programs,
    ball_damping, ball_radius, ball_contact_gap, ball_hit_extra_force_scale, bump_cooldown_time,
    respawn_delay,
    NUM_CARS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """Stage 5's car-ball contacts and the contact callbacks, one env per lane, at the tick-start
    transforms: each car's contact with the ball (its solver row into `body_rows`), the car-ball hits
    (Ball::_OnHit: the ball's extra velocity into its cache, the hit infos), then the car-car bumps
    and demolitions from `car_pairs_kernel`'s points and bump parts. The touches and attackers go to
    `car_tick`; which of the env's body rows hold a point, to `body_mask` (bit k for row k).

    It takes only the envs `bodies_near_kernel` lists (`listed_envs`): the others' bodies are apart (no
    contact, no callback: an empty `body_mask`, and `car_tick` as the pre-tick left it, no touch, bumper
    or demolisher)."""
    rows: tl.constexpr = NUM_CARS + NUM_CARS * (NUM_CARS - 1) // 2 * CAR_CAR_POINTS  # `body_rows_of`
    pairs: tl.constexpr = NUM_CARS * (NUM_CARS - 1) // 2
    first, stop, step = list_places(tl.load(deferred_count_ptr), n, spread_programs, 1, BLOCK)
    for q in range(first, stop, step):
        lane, live = listed_envs(deferred_ptr, deferred_count_ptr, q, n, spread_programs, BLOCK)
        if tl.max(live.to(tl.int32), axis=0) > 0:  # (always; without it 96 registers, a 2,480-byte stack)
            pos = load(pos_ptr + lane * 3, live, (0.0, 0.0, 0.0))
            damped_vel = apply_damping(load(vel_ptr + lane * 3, live, (0.0, 0.0, 0.0)), f32(ball_damping))
            velocity_impulse_cache = load(velocity_impulse_cache_ptr + lane * 3, live, (0.0, 0.0, 0.0))
            tick_count = tl.load(tick_count_ptr + lane, mask=live, other=0)
            hit_infos = ()
            touched = ()
            states = ()
            mask = tl.zeros([BLOCK], tl.int64)
            for c in tl.static_range(NUM_CARS):
                row = lane * NUM_CARS + c
                state = load_bump_state(car_rows_ptr, car_contact_id_ptr, row, live, NUM_CARS, BLOCK)
                car_pos, car_vel, rot_mat = state[0], state[1], state[2]
                hit_ticks = load_hit_ticks(car_ints_ptr, row, live, BLOCK)
                info = load_hit_info(car_rows_ptr, hit_ticks, row, live, NUM_CARS, BLOCK)
                frozen_at = car_tick_ptr + row * CAR_TICK_WIDTH + FROZEN_AT
                is_frozen = tl.load(frozen_at, mask=live, other=0.0) != 0
                is_hit, relative_pos_on_ball, normal, on_car, on_ball, depth = car_contacts.car_ball_contacts(
                    pos, car_pos, rot_mat, car_contacts.load_hitbox(hitbox_table_ptr, c),
                    f32(ball_contact_gap), f32(ball_radius), is_frozen,
                )  # fmt: skip
                body_row = car_contacts.body_row(
                    normal, on_car, on_ball, depth, 1 + c, 0, CARBALL_FRICTION, CARBALL_RESTITUTION
                )  # the car A, the ball B
                store_row(body_rows_ptr, lane * rows + c, body_row, live & is_hit, BODY_ROW_WIDTH, BLOCK)
                mask = mask | (is_hit.to(tl.int64) << c)
                added, info = ball_hit.on_hit(
                    is_hit, relative_pos_on_ball, pos, damped_vel, car_pos, car_vel, column(rot_mat, 0), info,
                    tick_count, f32(ball_hit_extra_force_scale),
                )  # fmt: skip
                velocity_impulse_cache = add(velocity_impulse_cache, added)
                hit_infos = hit_infos + (info,)
                touched = touched + (is_hit,)
                states = states + (state,)
            contacts = ()
            for pair in tl.static_range(pairs):  # `car_pairs_kernel`'s points and bump parts
                contact = load_pair_contacts(pair_contacts_ptr, lane * pairs + pair, live, BLOCK)
                contacts = contacts + (contact[1:],)
                mask = mask | (contact[0].to(tl.int64) << (NUM_CARS + pair * PAIR_COUNT_BITS))  # `row_held`
            tl.store(body_mask_ptr + lane, mask, mask=live)
            states, bumped_by, demoed_by = car_bump.on_car_car_collision(
                states, contacts, f32(bump_cooldown_time), f32(respawn_delay), NUM_CARS, CAR_CAR_POINTS
            )
            for c in tl.static_range(NUM_CARS):
                row = lane * NUM_CARS + c
                store_bump_state(car_rows_ptr, car_contact_id_ptr, row, live, states[c], NUM_CARS, BLOCK)
                store_hit_info(car_rows_ptr, row, live, hit_infos[c], NUM_CARS, BLOCK)
                store_hit_ticks(car_ints_ptr, row, live, hit_infos[c][4:], BLOCK)
                callbacks = (
                    touched[c].to(tl.float32), demoed_by[c].to(tl.float32), bumped_by[c].to(tl.float32)
                )  # fmt: skip
                store_columns(car_tick_ptr + TOUCHED_AT, row, callbacks, live, CAR_TICK_WIDTH, 3, 4, BLOCK)
            store(velocity_impulse_cache_ptr + lane * 3, velocity_impulse_cache, mask=live)


@jit
def bodies_near(ball_pos, car_rows_ptr, hitbox_table_ptr, lane, live, ball_radius, NUM_CARS: tl.constexpr,
                BLOCK: tl.constexpr):  # fmt: skip
    """Whether some car of each env can touch the ball or another car this tick. First by the cars'
    origins alone: each car's reach (`car_contacts.bounding_radius`, its contact threshold and 0.01 BT to
    spare) about its origin against the ball's radius about its centre, or against the other car's
    reach. Then, for the cars that leaves near (their rotations read only there), by their boxes: the
    ball's centre within its contact distance of the box (as `car_contacts.car_ball_contacts` measures
    it, the car's contact threshold for the gap), and each box of a pair meeting the other's bounding
    sphere grown by both thresholds (btBoxBoxDetector adds no point between boxes apart), `NEAR_SPARE`
    to spare. Where it is false `car_ball_contacts` and `car_car_contacts` find no point
    (`bodies_near_kernel`). Returns (near, the pairs that may meet: bit `pair_index` of
    each pair whose boxes pass both tests; `car_car_contacts` finds no point between the others)."""
    positions = ()
    reaches = ()
    ball_near = ()
    pair_near = ()
    for c in tl.static_range(NUM_CARS):
        v = load_car_columns(car_rows_ptr, lane * NUM_CARS + c, live, 0, 3, NUM_CARS, BLOCK)
        pos = (v[0], v[1], v[2])
        hitbox = car_contacts.load_hitbox(hitbox_table_ptr, c)
        reach = (car_contacts.bounding_radius(hitbox) + hitbox[3] + 0.01) * BT_TO_UU
        to_ball = sub(ball_pos, pos)
        ball_near = ball_near + (live & (dot(to_ball, to_ball) <= (reach + ball_radius) * (reach + ball_radius)),)
        for other in tl.static_range(c):
            between = sub(positions[other], pos)
            apart = reaches[other] + reach
            pair_near = pair_near + (live & (dot(between, between) <= apart * apart),)
        positions = positions + (pos,)
        reaches = reaches + (reach,)
    near = live != live
    boxes = ()
    for c in tl.static_range(NUM_CARS):
        wanted = ball_near[c]
        for other in tl.static_range(NUM_CARS):
            if other < c:
                wanted = wanted | pair_near[c * (c - 1) // 2 + other]
            elif other > c:
                wanted = wanted | pair_near[other * (other - 1) // 2 + c]
        v = load_car_columns(car_rows_ptr, lane * NUM_CARS + c, wanted, 0, 12, NUM_CARS, BLOCK)
        rot_mat = ((v[3], v[4], v[5]), (v[6], v[7], v[8]), (v[9], v[10], v[11]))
        inner, margin, offset, threshold = car_contacts.load_hitbox(hitbox_table_ptr, c)
        center = add(positions[c], scale(mat_vec(rot_mat, offset), BT_TO_UU))
        contact = ball_radius + (margin + threshold) * BT_TO_UU + NEAR_SPARE
        box = scale(inner, BT_TO_UU)
        near = near | (ball_near[c] & sphere_meets_box(ball_pos, contact, center, rot_mat, neg(box), box))
        half = scale(add(inner, (margin, margin, margin)), BT_TO_UU)
        boxes = boxes + ((center, rot_mat, half, tl.sqrt(dot(half, half)), threshold * BT_TO_UU),)
    pairs = tl.zeros([BLOCK], tl.int32)
    for a in tl.static_range(NUM_CARS):
        for b in tl.static_range(a):
            center_a, rot_a, half_a, radius_a, threshold_a = boxes[a]
            center_b, rot_b, half_b, radius_b, threshold_b = boxes[b]
            spare = threshold_a + threshold_b + NEAR_SPARE
            meets = sphere_meets_box(center_b, radius_b + spare, center_a, rot_a, neg(half_a), half_a)
            meets = meets & sphere_meets_box(center_a, radius_a + spare, center_b, rot_b, neg(half_b), half_b)
            meets = pair_near[a * (a - 1) // 2 + b] & meets
            near = near | meets
            pairs = pairs | (meets.to(tl.int32) << pair_index(b, a, NUM_CARS))
    return near, pairs


@stage_jit
def bodies_near_kernel(
    pos_ptr, car_start_rows_ptr, car_table_ptr, hitbox_table_ptr, rays_near_ptr, pairs_near_ptr, body_mask_ptr,
    deferred_ptr, deferred_count_ptr, n, ball_radius, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """The tick's bounds, one env per lane, at the tick-start transforms (the pre-tick moves no car that
    takes part in a contact: a car it respawns was demolished as the tick started, and Bullet skips it):
    which cars' wheel rays pass near another car or the ball (`vehicle.rays_near_bodies`; bit c of
    ``rays_near`` for car c: the pre-tick's first pass defers them), and whether the env's bodies may
    touch (`bodies_near`). The envs whose bodies are apart get an empty `body_mask` (no contact, no
    callback); the others are listed (`defer_lanes`, slot 0 of ``deferred``, the envs' own list) with
    the pairs that may meet (``pairs_near``) for `car_pairs_kernel`, `collisions_kernel` and
    `body_solve_kernel`, which take only them. The cars' rows are read here, one lane per env, where
    each car's lane of the pre-tick read every other car's."""
    lane, live, env = env_lanes(n, BLOCK)
    ball_pos = load(pos_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    rays = tl.zeros([BLOCK], tl.int32)
    if NUM_CARS > 4:  # a runtime loop, one car's values live at a time (3v3 unrolled: 255 registers, spilled)
        for c in range(NUM_CARS):
            near = car_rays_near(car_start_rows_ptr, pos_ptr, car_table_ptr, hitbox_table_ptr, env, c, live,
                                 ball_radius, NUM_CARS, BLOCK)  # fmt: skip
            rays = rays | (near.to(tl.int32) << c)
    else:  # unrolled (2v2: 1.60 ms per tick at 4M envs, 1.87 as a runtime loop)
        for c in tl.static_range(NUM_CARS):
            near = car_rays_near(car_start_rows_ptr, pos_ptr, car_table_ptr, hitbox_table_ptr, env, c, live,
                                 ball_radius, NUM_CARS, BLOCK)  # fmt: skip
            rays = rays | (near.to(tl.int32) << c)
    tl.store(rays_near_ptr + lane, rays, mask=live)
    near, pairs = bodies_near(ball_pos, car_start_rows_ptr, hitbox_table_ptr, lane, live, f32(ball_radius),
                              NUM_CARS, BLOCK)  # fmt: skip
    deferral = defer_lanes(deferred_count_ptr, 0, near)
    tl.store(body_mask_ptr + lane, tl.zeros([BLOCK], tl.int64), mask=live & ~near)
    tl.store(pairs_near_ptr + lane, pairs, mask=near)
    store_deferred(deferred_ptr, lane, 0, deferral, n)


@jit
def car_rays_near(car_start_rows_ptr, pos_ptr, car_table_ptr, hitbox_table_ptr, env, c, live, ball_radius,
                  NUM_CARS: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """Whether car ``c``'s wheel rays pass near another car or the ball (`vehicle.rays_near_bodies`, at
    the tick-start rows), for `bodies_near_kernel`."""
    # (`rays_near_bodies` reads the ball's position and radius alone: no velocities, no mass)
    bodies = bodies_of(
        car_start_rows_ptr, pos_ptr, pos_ptr, pos_ptr, env, c, live, hitbox_table_ptr, car_table_ptr,
        f32(ball_radius), 0.0, 0.0, NUM_CARS, BLOCK,
    )  # fmt: skip
    v = load_car_columns(car_start_rows_ptr, env * NUM_CARS + c, live, 0, 12, NUM_CARS, BLOCK)
    rot_mat = ((v[3], v[4], v[5]), (v[6], v[7], v[8]), (v[9], v[10], v[11]))
    _inertia, wheel_connection, wheel_radius, suspension_rest_length, _scale, _deadzone = load_car_params(
        car_table_ptr, c
    )
    return rays_near_bodies(
        bodies, (v[0], v[1], v[2]), rot_mat, wheel_connection, wheel_radius, suspension_rest_length, live,
        NUM_CARS, BLOCK,
    )  # fmt: skip


@jit
def pair_index(a, b, NUM_CARS: tl.constexpr):
    """The place of cars a < b's pair in `contacts.car_pairs` order (`pair_cars`' inverse)."""
    return a * NUM_CARS - a * (a + 1) // 2 + (b - a - 1)


PAIR_WIDTH = constexpr(16)
"""Floats per car pair in `pair_contacts`: a bit field (bits 0-3: which of btBoxBoxDetector's
`CAR_CAR_POINTS` (4) points were added, what the callbacks read; bits 4-6: the points held after the
refresh, the pair's first rows in `body_rows`; bits 7-10: `car_bump.pair_bumps`' two directions (a
on b, b on a), each approaching and is_demo), each point's forward coordinate on car a, then on car
b, each direction's impulse, one spare."""


def body_rows_of(num_cars: int) -> int:
    """Contact rows between bodies per env in `body_rows`: each car's with the ball, then each pair's
    points."""
    return num_cars + num_cars * (num_cars - 1) // 2 * _CAR_CAR_POINTS


@jit
def pair_cars(pair, NUM_CARS: tl.constexpr):
    """The cars (a, b), a < b, of pair ``pair`` in `contacts.car_pairs` order."""
    a = pair * 0
    b = pair * 0
    for i in tl.static_range(NUM_CARS):
        for j in tl.static_range(i + 1, NUM_CARS):
            at = pair == pair_index(i, j, NUM_CARS)
            a = tl.where(at, i, a)
            b = tl.where(at, j, b)
    return a, b


@stage_jit
def car_pairs_kernel(
    car_rows_ptr, car_contact_id_ptr, car_tick_ptr, pair_contacts_ptr, pairs_near_ptr,
    body_rows_ptr, hitbox_table_ptr, deferred_ptr, deferred_count_ptr, n, spread_programs, demo_mode,
    enable_team_demos, bump_force_scale, NUM_CARS: tl.constexpr, BLUE: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """Stage 5's collision detection between the cars, one car pair per lane (one pair per program, as
    `car_lanes` runs one slot), over the envs `collisions_kernel`'s first pass lists (`listed_envs`):
    each pair's box-box contacts (`car_car.car_car_contacts`, at the tick-start transforms; a frozen
    car takes no part): the points and both directions' bump parts (`car_bump.pair_bumps`: they read
    nothing the callbacks change) into `pair_contacts`, the held points' solver rows (car b A, car a B)
    into `body_rows`. A pair whose boxes are apart (`bodies_near_kernel`'s ``pairs_near``) finds no point:
    its `pair_contacts` row is zeros (no point added or held), and a place none of whose pairs may
    meet writes only those."""
    pairs: tl.constexpr = NUM_CARS * (NUM_CARS - 1) // 2
    rows: tl.constexpr = NUM_CARS + NUM_CARS * (NUM_CARS - 1) // 2 * CAR_CAR_POINTS  # `body_rows_of`
    pair = tl.program_id(0) % pairs
    first, stop, step = list_places(tl.load(deferred_count_ptr), n, spread_programs, pairs, BLOCK)
    for q in range(first, stop, step):
        env, listed = listed_envs(deferred_ptr, deferred_count_ptr, q, n, spread_programs, BLOCK)
        live = listed & (((tl.load(pairs_near_ptr + env, mask=listed, other=0) >> pair) & 1) != 0)
        zeros = ()
        for k in tl.static_range(PAIR_WIDTH):  # (not `_`: Triton 3.6 takes it for the branch's own `_`)
            zeros = zeros + (tl.zeros([BLOCK], tl.float32),)
        store_row(pair_contacts_ptr, env * pairs + pair, zeros, listed & ~live, PAIR_WIDTH, BLOCK)
        if tl.max(live.to(tl.int32), axis=0) > 0:  # places with no pair that may meet do no more
            a, b = pair_cars(pair, NUM_CARS)
            # (the `car_tick` reads first: after the rows', Triton 3.6's TTGIR passes fail on 1v1, "operand
            # does not dominate this use")
            frozen_a = load_car_tick(car_tick_ptr, env * NUM_CARS + a, live, BLOCK)[2]
            frozen_b = load_car_tick(car_tick_ptr, env * NUM_CARS + b, live, BLOCK)[2]
            car_a = load_bump_state(car_rows_ptr, car_contact_id_ptr, env * NUM_CARS + a, live, NUM_CARS, BLOCK)
            car_b = load_bump_state(car_rows_ptr, car_contact_id_ptr, env * NUM_CARS + b, live, NUM_CARS, BLOCK)
            pos_a = scale(car_a[0], UU_TO_BT)
            pos_b = scale(car_b[0], UU_TO_BT)
            added, local_b, local_a, held, normal, on_b, on_a, depth = car_car.car_car_contacts(
                pos_a, car_a[2], car_contacts.load_box(hitbox_table_ptr, a),
                pos_b, car_b[2], car_contacts.load_box(hitbox_table_ptr, b),
            )  # fmt: skip
            both = (~frozen_a) & (~frozen_b)  # a demolished car's body is out of the world
            held = tl.where(both, held, 0)
            hit_ab, hit_ba = car_bump.pair_bumps(
                car_a, car_b, (a < BLUE) == (b < BLUE), flag(demo_mode), flag(enable_team_demos),
                f32(bump_force_scale),
            )  # fmt: skip
            flags = held << CAR_CAR_POINTS  # `PAIR_WIDTH`'s bit field
            forward_a = ()
            forward_b = ()
            for point in tl.static_range(CAR_CAR_POINTS):
                flags = flags | ((both & added[point]).to(tl.int32) << point)
                # the forward coordinates as the reference's callbacks read them (UU)
                forward_a = forward_a + (local_a[point][0] * BT_TO_UU,)
                forward_b = forward_b + (local_b[point][0] * BT_TO_UU,)
                row = car_contacts.body_row(
                    normal, sub(on_b[point], pos_b), sub(on_a[point], pos_a), depth[point], 1 + b, 1 + a,
                    CARCAR_FRICTION, CARCAR_RESTITUTION,
                )  # fmt: skip
                at = env * rows + NUM_CARS + pair * CAR_CAR_POINTS + point
                store_row(body_rows_ptr, at, row, live & (point < held), BODY_ROW_WIDTH, BLOCK)
            for hit in tl.static_range(2):
                approaching, is_demo, _ = (hit_ab, hit_ba)[hit]
                flags = flags | (approaching.to(tl.int32) << (CAR_CAR_POINTS + 3 + 2 * hit))
                flags = flags | (is_demo.to(tl.int32) << (CAR_CAR_POINTS + 4 + 2 * hit))
            values = (flags.to(tl.float32),) + forward_a + forward_b + hit_ab[2] + hit_ba[2] + (flags * 0.0,)
            store_row(pair_contacts_ptr, env * pairs + pair, values, live, PAIR_WIDTH, BLOCK)


@jit
def load_pair_contacts(pair_contacts_ptr, row, live, BLOCK: tl.constexpr):
    """A pair's contacts from `pair_contacts`, as `car_bump.on_car_car_collision` takes them."""
    v = load_row(pair_contacts_ptr, row, live, PAIR_WIDTH, BLOCK)
    flags = v[0].to(tl.int32)
    points = ()
    for k in tl.static_range(CAR_CAR_POINTS):
        points = points + ((((flags >> k) & 1) != 0, v[1 + k], v[1 + CAR_CAR_POINTS + k]),)
    at: tl.constexpr = 1 + 2 * CAR_CAR_POINTS  # the impulses
    bumps = ()
    for hit in tl.static_range(2):
        approaching = ((flags >> (CAR_CAR_POINTS + 3 + 2 * hit)) & 1) != 0
        is_demo = ((flags >> (CAR_CAR_POINTS + 4 + 2 * hit)) & 1) != 0
        bumps = bumps + ((approaching, is_demo, (v[at + 3 * hit], v[at + 3 * hit + 1], v[at + 3 * hit + 2])),)
    return (flags >> CAR_CAR_POINTS) & 7, points, bumps[0], bumps[1]


@stage_jit
def body_solve_kernel(
    pos_ptr, vel_ptr, ang_vel_ptr, car_rows_ptr, car_tick_ptr, car_table_ptr, hitbox_table_ptr, body_rows_ptr,
    body_mask_ptr, body_solve_ptr, deferred_ptr, deferred_count_ptr, n, spread_programs, tick_time, gravity_z,
    ball_damping, ball_inv_mass_bt, ball_inv_inertia_bt, ball_gravity_bt, NUM_CARS: tl.constexpr,
    ITERATIONS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """The rest of stage 5's contacts between bodies, one env per lane over the envs `collisions_kernel`'s
    first pass lists (`listed_envs`; the others' bodies met nothing: `load_body_solve`): the rows
    `collisions_kernel` and `car_pairs_kernel` filed, solved alone (`car_contacts.solve_bodies`: the ball
    body 0, the cars 1 + c, as Bullet's solver bodies after predictUnconstraintMotion: the ball damped and
    with gravity unless asleep, the cars with their pre-tick's forces). Each body's (dv, dw, push, turn)
    go to `body_solve` (row env * (1 + NUM_CARS) + body, BT), where its arena rows start from them."""
    tick_time = f32(tick_time)  # (before the branch: an fp64 argument may not change type inside it)
    bodies: tl.constexpr = NUM_CARS + 1
    rows: tl.constexpr = NUM_CARS + NUM_CARS * (NUM_CARS - 1) // 2 * CAR_CAR_POINTS  # `body_rows_of`
    first, stop, step = list_places(tl.load(deferred_count_ptr), n, spread_programs, 1, BLOCK)
    for q in range(first, stop, step):
        lane, live = listed_envs(deferred_ptr, deferred_count_ptr, q, n, spread_programs, BLOCK)
        vel = load(vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
        ang_vel = load(ang_vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
        awake = ~update_sleeping(vel, ang_vel)
        vel = where(awake, apply_damping(vel, f32(ball_damping)), vel)
        zero = tl.zeros([BLOCK], tl.float32)
        inertia = zero + f32(ball_inv_inertia_bt)
        velocities = (scale(vel, UU_TO_BT),)
        angular = (ang_vel,)
        ext_vs = ((zero, zero, tl.where(awake, f32(ball_gravity_bt), 0.0)),)
        ext_ws = ((zero, zero, zero),)
        inv_masses = (zero + f32(ball_inv_mass_bt),)
        inv_inertias = ((inertia, zero, zero, zero, inertia, zero, zero, zero, inertia),)
        for c in tl.static_range(NUM_CARS):
            row = lane * NUM_CARS + c
            car = load_body(car_rows_ptr, row, live, NUM_CARS, BLOCK)
            force, torque = load_car_tick(car_tick_ptr, row, live, BLOCK)[:2]
            ext_v, ext_w = car_kernels.external_impulses(
                car, force, torque, load_car_params(car_table_ptr, c)[0], tick_time, f32(gravity_z)
            )
            m = inv_inertia_world(car[1], car_contacts.load_inv_inertia(hitbox_table_ptr, c))
            velocities = velocities + (scale(car[2], UU_TO_BT),)
            angular = angular + (car[3],)
            ext_vs = ext_vs + (scale(ext_v, UU_TO_BT),)
            ext_ws = ext_ws + (ext_w,)
            inv_masses = inv_masses + (zero + INV_MASS,)
            inv_inertias = inv_inertias + (m[0] + m[1] + m[2],)
        mask = tl.load(body_mask_ptr + lane, mask=live, other=0)
        dv, dw, push, turn = car_contacts.solve_bodies(
            body_rows_ptr, lane * rows, live, mask,
            (velocities, angular, ext_vs, ext_ws, inv_masses, inv_inertias), tick_time, rows, bodies,
            CAR_CAR_POINTS, ITERATIONS, BLOCK,
        )  # fmt: skip
        for j in tl.static_range(bodies):
            values = dv[j] + dw[j] + push[j] + turn[j] + (zero, zero, zero, zero)
            store_row(body_solve_ptr, lane * bodies + j, values, live, BODY_SOLVE_WIDTH, BLOCK)


@jit
def load_body(rows_ptr, row, live, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr):
    """A car's (pos, rot_mat, vel, ang_vel) from its packed row (`kernels/car.pack_cars`' first columns)."""
    v = load_car_columns(rows_ptr, row, live, 0, 18, NUM_CARS, BLOCK)
    return (
        (v[0], v[1], v[2]),
        ((v[3], v[4], v[5]), (v[6], v[7], v[8]), (v[9], v[10], v[11])),
        (v[12], v[13], v[14]),
        (v[15], v[16], v[17]),
    )


@jit
def load_body_solve(body_solve_ptr, body_mask_ptr, env, body, live, NUM_CARS: tl.constexpr,
                    BLOCK: tl.constexpr):  # fmt: skip
    """Body ``body``'s `body_solve` row in env ``env`` (the ball 0, car c 1 + c): (dv, dw, push, turn), BT;
    zeros where the env's bodies met nothing (its `body_mask` empty: `body_solve_kernel` solves only the
    envs with rows)."""
    met = tl.load(body_mask_ptr + env, mask=live, other=0) != 0
    v = load_row(body_solve_ptr, env * (NUM_CARS + 1) + body, live & met, BODY_SOLVE_WIDTH, BLOCK)
    return (v[0], v[1], v[2]), (v[3], v[4], v[5]), (v[6], v[7], v[8]), (v[9], v[10], v[11])


@stage_jit
def car_step_kernel(
    car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, car_ints_ptr, car_tick_ptr,
    deferred_ptr, deferred_count_ptr, controls_ptr, car_table_ptr, hitbox_table_ptr, body_solve_ptr, body_mask_ptr,
    world_pair_count_ptr, world_pair_slots_ptr, world_points_ptr, pad_table_ptr, pad_cells_ptr,
    tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr, plane_offsets_ptr,
    cell_start_ptr, cell_tris_ptr, ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z,
    n, spread_programs, tick_time, gravity_z, car_world_friction, car_world_restitution,
    NUM_CARS: tl.constexpr, NUM_PLANES: tl.constexpr, PLANE_BASE: tl.constexpr, MAX_ANGLE: tl.constexpr,
    EDGE_DISTANCE: tl.constexpr, ITERATIONS: tl.constexpr, BLOCK: tl.constexpr, DEFERRED: tl.constexpr,
    CAR_PER_PROGRAM: tl.constexpr,
):  # fmt: skip
    """The rest of stage 5 for the cars (`car_step`), one car per lane, in two passes as the pre-tick's:
    the first finishes the cars whose body cannot touch the arena (`car_contacts.may_touch_arena`: no
    triangle of its grid cell in reach, every plane beyond the contact threshold) and defers the others
    to the second (``DEFERRED``), which meets the arena and solves the contacts. The contacts' manifolds
    and the solver take registers every lane of a kernel pays for.

    With ``CAR_PER_PROGRAM`` (small batches: `CAR_PER_PROGRAM_UP_TO`) the second pass takes one car
    per program, the same car in every lane (`deferred_car`; each program takes the deferred cars in
    turn, `DEFERRED_PROGRAMS`), its lanes sharing the triangles of its grid cell
    (`car_contacts.car_world_contacts_across_lanes`). At one wave a pass lasts as long as its slowest
    warp: with one car per lane the warp whose cars meet the most triangles, with one car per program
    about its cars' work over the GPU's warps; the many deferred cars of a large batch are done sooner
    32 to a warp, their contacts' points found pair by pair before (`car_world_pairs_kernel`)."""
    tick_time = f32(tick_time)  # (before the branch: an fp64 argument may not change type inside it)
    rows = (car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, car_ints_ptr, car_tick_ptr, controls_ptr)
    tables = (car_table_ptr, hitbox_table_ptr, body_solve_ptr, body_mask_ptr, world_pair_count_ptr,
              world_pair_slots_ptr, world_points_ptr, pad_table_ptr, pad_cells_ptr)  # fmt: skip
    arena = arena_of(tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr,
                     plane_offsets_ptr, cell_start_ptr, cell_tris_ptr)  # fmt: skip
    arena_grid = grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
    params = (tick_time, f32(gravity_z), f32(car_world_friction), f32(car_world_restitution))
    if CAR_PER_PROGRAM:
        for k in range(tl.program_id(0), deferred_total(deferred_count_ptr, NUM_CARS), tl.num_programs(0)):
            row, live, env, slot = deferred_car(deferred_ptr, deferred_count_ptr, k, n, NUM_CARS, BLOCK)
            car_step(rows, tables, arena, arena_grid, params, deferred_ptr, deferred_count_ptr, n, row, live, env,
                     slot, NUM_CARS, NUM_PLANES, PLANE_BASE, MAX_ANGLE, EDGE_DISTANCE, ITERATIONS, BLOCK, True, True)  # fmt: skip
    else:
        slot = tl.program_id(0) % NUM_CARS
        first, stop, step = list_places(tl.load(deferred_count_ptr + slot), n, spread_programs, NUM_CARS, BLOCK,
                                        DEFERRED)  # fmt: skip
        for q in range(first, stop, step):  # (the first pass: its own place alone)
            row, live, env, slot = pass_lanes(
                deferred_ptr, deferred_count_ptr, n, q, spread_programs, NUM_CARS, BLOCK, DEFERRED
            )
            car_step(rows, tables, arena, arena_grid, params, deferred_ptr, deferred_count_ptr, n, row, live, env,
                     slot, NUM_CARS, NUM_PLANES, PLANE_BASE, MAX_ANGLE, EDGE_DISTANCE, ITERATIONS, BLOCK, DEFERRED,
                     False)  # fmt: skip


@jit
def car_step(
    rows, tables, arena, arena_grid, params, deferred_ptr, deferred_count_ptr, n, row, live, env, slot,
    NUM_CARS: tl.constexpr, NUM_PLANES: tl.constexpr, PLANE_BASE: tl.constexpr, MAX_ANGLE: tl.constexpr,
    EDGE_DISTANCE: tl.constexpr, ITERATIONS: tl.constexpr, BLOCK: tl.constexpr, DEFERRED: tl.constexpr,
    CAR_PER_PROGRAM: tl.constexpr,
):  # fmt: skip
    """`car_step_kernel`'s cars (``row``, ``live``, ``env``, ``slot``: `car_lanes`'): the body against the
    arena, solved alone from the car's deltas of the solve between bodies (`body_solve`;
    `car_contacts.car_world_contacts`, `solve_car_world`), the solver's write-back and the integration;
    then stage 6, Car::_PostTickUpdate and _FinishPhysicsTick. A car demolished by a callback runs to
    the step's end; one frozen at the tick's start is not simulated. The first pass
    (not ``DEFERRED``) finishes the cars whose body touches nothing, their solve their deltas alone
    (`car_contacts.untouched`), and defers the others."""
    car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, car_ints_ptr, car_tick_ptr, controls_ptr = rows
    car_table_ptr, hitbox_table_ptr, body_solve_ptr, body_mask_ptr, world_pair_count_ptr, world_pair_slots_ptr, \
        world_points_ptr, pad_table_ptr, pad_cells_ptr = tables
    tick_time, gravity_z, car_world_friction, car_world_restitution = params
    start = load_body_solve(body_solve_ptr, body_mask_ptr, env, 1 + slot, live, NUM_CARS, BLOCK)
    moving = load_body(car_rows_ptr, row, live, NUM_CARS, BLOCK)  # the rest of the car is read after the solve
    pos, rot_mat, vel, ang_vel = moving
    force, torque, frozen = load_car_tick(car_tick_ptr, row, live, BLOCK)
    ext_v, ext_w = car_kernels.external_impulses(
        moving, force, torque, load_car_params(car_table_ptr, slot)[0], tick_time, gravity_z
    )
    hitbox = car_contacts.load_hitbox(hitbox_table_ptr, slot)
    alive = live & (frozen.to(tl.int32) == 0)
    if DEFERRED:  # the car body against the arena, solved alone
        if CAR_PER_PROGRAM:
            body = car_contacts.car_world_contacts_across_lanes(
                pos, rot_mat, hitbox, alive, arena, arena_grid, NUM_PLANES, PLANE_BASE, MAX_ANGLE, EDGE_DISTANCE, BLOCK,
            )  # fmt: skip
        else:  # from the listed pairs' points (`car_world_points_kernel`)
            body = car_contacts.listed_car_world_contacts(
                pos, rot_mat, hitbox, alive, row, arena, arena_grid, world_pair_count_ptr, world_pair_slots_ptr,
                world_points_ptr, NUM_PLANES, PLANE_BASE, MAX_ANGLE, EDGE_DISTANCE, BLOCK,
            )  # fmt: skip
        solved = car_contacts.solve_car_world(
            body, rot_mat, vel, ang_vel, ext_v, ext_w, car_contacts.load_inv_inertia(hitbox_table_ptr, slot),
            car_world_friction, car_world_restitution, tick_time, start, ITERATIONS, BLOCK,
        )  # fmt: skip
    else:
        touch = car_contacts.may_touch_arena(pos, rot_mat, hitbox, alive, arena, arena_grid, NUM_PLANES)
        deferral = defer_lanes(deferred_count_ptr, slot, touch)
        live = live & ~touch
        solved = car_contacts.untouched(start)
    # the whole car only now: its other fields are not held in registers through the contacts and solve
    car, info = load_car_and_hit_info(
        car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, car_ints_ptr, row, live, NUM_CARS, BLOCK
    )
    controls = load_controls(controls_ptr, row, live, BLOCK)
    demoed = car[28]  # demolished during the step: simulated to its end, then skipped
    car = car[:28] + (frozen,) + car[29:]
    car = car_kernels.physics_step(car, ext_v, ext_w, solved, tick_time)
    car = car[:28] + (demoed,) + car[29:]
    # 7.'s test of the car against the pad it may touch (`car_events_kernel` walks the pads), its position,
    # rotation, boost and demolished flag now as the tick leaves them: the table's reads wait out the rest.
    # Written only where the car touches its pad (the pre-tick's row says none): a few cars a tick, whose
    # 12 bytes cost their memory sector a read as well (a sector's partial write; 24M cars' a tick, written
    # in the car order, took 1.5 ms of the 3v3 car step at 4M envs on an H200)
    pad_tests = car_pad_tests(car, slot, pad_cells_ptr, pad_table_ptr, hitbox_table_ptr, live)
    touches = live & ((pad_tests[1] != 0) | (pad_tests[2] != 0))
    store(car_tick_ptr + row * CAR_TICK_WIDTH + PAD_TESTS_AT, pad_tests, mask=touches)
    car = car_kernels.post_tick_update(car, controls, tick_time)  # 6. cars' post-tick and finish
    car = car_kernels.finish_physics_tick(car)
    # only the row's chunks the step changes (`CAR_STEP_WRITES`): the others' loads fall away
    store_car_chunks(car_rows_ptr, row, car_row_values(car, info), live, CAR_STEP_CHUNKS, NUM_CARS, BLOCK)
    tl.store(car_tick_count_since_update_ptr + row, car[31], mask=live)
    if not DEFERRED:
        store_deferred(deferred_ptr, env, slot, deferral, n)


@stage_jit
def car_world_pairs_kernel(
    car_rows_ptr, deferred_ptr, deferred_count_ptr, hitbox_table_ptr,
    world_pair_count_ptr, world_pairs_ptr, world_pair_slots_ptr, world_pair_total_ptr,
    tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr, plane_offsets_ptr,
    cell_start_ptr, cell_tris_ptr, ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z,
    n, world_pairs_capacity, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """Before the car step's second pass on large batches, its cars (the first pass's lists), one car
    per program at a time, the same car in every lane (`deferred_car`; each program takes the cars in
    turn, `DEFERRED_PROGRAMS`): the triangles of its grid cell its body may touch, listed as (car,
    triangle) pairs in Bullet's visiting order (`car_contacts.list_near_triangles`), for
    `car_world_points_kernel`."""
    arena = arena_of(tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr,
                     plane_offsets_ptr, cell_start_ptr, cell_tris_ptr)  # fmt: skip
    for k in range(tl.program_id(0), deferred_total(deferred_count_ptr, NUM_CARS), tl.num_programs(0)):
        row, live, env, slot = deferred_car(deferred_ptr, deferred_count_ptr, k, n, NUM_CARS, BLOCK)
        pos, rot_mat, _, _ = load_body(car_rows_ptr, row, live, NUM_CARS, BLOCK)
        car_contacts.list_near_triangles(
            pos, rot_mat, car_contacts.load_hitbox(hitbox_table_ptr, slot), live, row, arena,
            grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z), world_pair_count_ptr, world_pairs_ptr,
            world_pair_slots_ptr, world_pair_total_ptr, world_pairs_capacity, BLOCK,
        )  # fmt: skip


@stage_jit
def car_world_points_kernel(
    car_rows_ptr, hitbox_table_ptr, world_pairs_ptr, world_points_ptr, world_pair_total_ptr,
    tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr, plane_offsets_ptr,
    cell_start_ptr, cell_tris_ptr, n, spread_programs, MAX_ANGLE: tl.constexpr, EDGE_DISTANCE: tl.constexpr,
    NUM_CARS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """One (car, triangle) pair of `car_world_pairs_kernel`'s list per lane (``n``: the list's room):
    the pair's contact point (`car_contacts.world_point`: Bullet's GJK, separating axes where Bullet
    runs EPA, the normal smoothed at internal edges), into its row of ``world_points``."""
    listed = tl.minimum(tl.load(world_pair_total_ptr), n)
    first, stop, step = list_places(listed, n, spread_programs, 1, BLOCK)
    for q in range(first, stop, step):
        at, live = spread_lanes(listed, q, n, spread_programs, BLOCK)
        row = tl.load(world_pairs_ptr + at * 2, mask=live, other=-1)
        live = live & (row >= 0)  # (a place taken but not filled: `list_near_triangles`)
        row = tl.where(live, row, 0)
        pos, rot_mat, _, _ = load_body(car_rows_ptr, row, live, NUM_CARS, BLOCK)
        point = car_contacts.world_point(
            pos, rot_mat, car_contacts.load_hitbox(hitbox_table_ptr, row % NUM_CARS),
            tl.load(world_pairs_ptr + at * 2 + 1, mask=live, other=0), live,
            arena_of(tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr,
                     plane_offsets_ptr, cell_start_ptr, cell_tris_ptr), MAX_ANGLE, EDGE_DISTANCE, BLOCK,
        )  # fmt: skip
        store_row(world_points_ptr, at, point, live, car_contacts.WORLD_POINT_WIDTH, BLOCK)


@stage_jit
def ball_and_rules_kernel(
    pos_ptr, vel_ptr, ang_vel_ptr, velocity_impulse_cache_ptr, tick_count_since_update_ptr, tick_count_ptr,
    game_ints_ptr, car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, car_ints_ptr,
    body_solve_ptr, body_mask_ptr, pad_is_active_ptr, pad_cooldown_ptr, pad_prev_locked_car_id_ptr, kickoff_spawns_ptr,
    tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr, plane_offsets_ptr,
    cell_start_ptr, cell_tris_ptr, ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z,
    n, ticks, hashed_seed, tick_time, gravity_dv, ball_damping, ball_radius, ball_contact_gap, ball_inv_mass,
    ball_inv_inertia, ball_restitution, ball_friction, ball_max_speed, ball_max_ang_speed, goal_y,
    restitution_velocity_threshold, friction_direction_epsilon_sq, erp2_over_dt, car_spawn_boost_amount,
    NUM_CARS: tl.constexpr, BLUE: tl.constexpr, KICKOFF_AFTER_GOAL: tl.constexpr, KICKOFF_ROWS: tl.constexpr,
    NUM_PLANES: tl.constexpr, PLANE_BASE: tl.constexpr, MAX_CONTACTS: tl.constexpr, DEGENERATE_L2: tl.constexpr,
    SIMD_EPSILON: tl.constexpr, MAX_ANGLE: tl.constexpr, EDGE_DISTANCE: tl.constexpr, ITERATIONS: tl.constexpr,
    PUSH_POINTS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """The ball's part of each tick and the game around the physics, one env per lane, ``ticks`` ticks
    (the ball and the game in registers; with cars, one tick per launch, after `car_events_kernel`):
    1. the ball's sleeping, 5. its contacts with the arena, solved from its deltas of the solve between
    bodies (`body_solve`), and integration; 8. the ball's finish; 9. goals; 10. the tick count, scores
    and events; a kickoff after a goal when the game asks for one."""
    lane, live, env = env_lanes(n, BLOCK)
    tick_time = f32(tick_time)
    arena = arena_of(tri_ptr, tri_bounds_ptr, tri_mesh_ptr, edge_angle_ptr, edge_flags_ptr, plane_normals_ptr,
                     plane_offsets_ptr, cell_start_ptr, cell_tris_ptr)  # fmt: skip
    arena_grid = grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z)
    pos = load(pos_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    vel = load(vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    ang_vel = load(ang_vel_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    velocity_impulse_cache = load(velocity_impulse_cache_ptr + lane * 3, live, (0.0, 0.0, 0.0))
    tick_count_since_update = tl.load(tick_count_since_update_ptr + lane, mask=live, other=0)
    tick_count = tl.load(tick_count_ptr + lane, mask=live, other=0)
    g = load_row(game_ints_ptr, lane, live, GAME_WIDTH, BLOCK)  # `game_ints`
    blue_score, orange_score, scored_last_tick, kickoff_count = (
        g[0].to(tl.int32),
        g[1].to(tl.int32),
        g[2] != 0,
        g[3],
    )
    goal_tick, goals = g[4], g[5].to(tl.int32)  # goals: bit 0 blue, bit 1 orange
    pads_busy = g[PADS_BUSY_AT]  # (`car_events_kernel`'s)
    k = 0
    while k < tl.cast(ticks, tl.int32):
        sleeping = update_sleeping(vel, ang_vel)  # 1.
        zero = vel[0] * 0.0
        start = ((zero, zero, zero), (zero, zero, zero), (zero, zero, zero), (zero, zero, zero))
        if NUM_CARS > 0:  # the ball's deltas from the solve between bodies, in UU
            deltas = load_body_solve(body_solve_ptr, body_mask_ptr, lane, 0, live, NUM_CARS, BLOCK)
            dv, dw, push, turn = deltas
            start = (scale(dv, BT_TO_UU), dw, scale(push, BT_TO_UU), turn)
        pos, vel, ang_vel = physics_step(  # 5. the ball against the arena
            pos, vel, ang_vel, live & (~sleeping), tick_time, f32(gravity_dv), f32(ball_damping), f32(ball_radius),
            f32(ball_contact_gap), f32(ball_inv_mass), f32(ball_inv_inertia), f32(ball_restitution),
            f32(ball_friction), f32(restitution_velocity_threshold), f32(friction_direction_epsilon_sq),
            f32(erp2_over_dt), arena, arena_grid, start, NUM_PLANES, PLANE_BASE, MAX_CONTACTS, DEGENERATE_L2, SIMD_EPSILON,
            MAX_ANGLE, EDGE_DISTANCE, ITERATIONS, PUSH_POINTS, BLOCK,
        )  # fmt: skip
        vel, ang_vel, velocity_impulse_cache, tick_count_since_update = finish_physics_tick(  # 8. ball finish
            vel,
            ang_vel,
            velocity_impulse_cache,
            tick_count_since_update,
            f32(ball_max_speed),
            f32(ball_max_ang_speed),
        )
        goal = rules.is_ball_scored(pos, f32(goal_y))  # 9. goal (RocketSim fires every scoring tick)
        tick_count += 1  # 10.
        blue_score, orange_score, scored_last_tick = rules.count_goals(
            blue_score, orange_score, scored_last_tick, goal
        )
        # the events (`rules.fold_events`; the cars' are `car_events_kernel`'s)
        goal_tick = tl.where((goal > 0) & (goal_tick < 0), tick_count, goal_tick)
        goals = goals | goal
        if KICKOFF_AFTER_GOAL:  # nitro's option: a kickoff after each goal
            kickoff = live & (goal > 0)
            if tl.max(kickoff.to(tl.int32), axis=0) > 0:  # the cars and pads of the block's scoring envs
                kickoff_cars(
                    kickoff, lane, env, n, hashed_seed, kickoff_count, car_rows_ptr, car_contact_id_ptr,
                    car_tick_count_since_update_ptr, car_ints_ptr, kickoff_spawns_ptr, pad_is_active_ptr,
                    pad_cooldown_ptr, pad_prev_locked_car_id_ptr, f32(car_spawn_boost_amount), NUM_CARS, BLUE,
                    KICKOFF_ROWS, BLOCK,
                )  # fmt: skip
            zero = vel[0] * 0.0
            pos = where(kickoff, (zero, zero, zero + BALL_REST_Z), pos)
            vel = where(kickoff, (zero, zero, zero), vel)
            ang_vel = where(kickoff, (zero, zero, zero), ang_vel)
            velocity_impulse_cache = where(kickoff, (zero, zero, zero), velocity_impulse_cache)
            tick_count_since_update = tl.where(kickoff, 0, tick_count_since_update)
            kickoff_count += kickoff.to(tl.int64)
            pads_busy = tl.where(kickoff, 0, pads_busy)  # every pad idle
        k += 1
    store(pos_ptr + lane * 3, pos, mask=live)
    store(vel_ptr + lane * 3, vel, mask=live)
    store(ang_vel_ptr + lane * 3, ang_vel, mask=live)
    store(velocity_impulse_cache_ptr + lane * 3, velocity_impulse_cache, mask=live)
    tl.store(tick_count_since_update_ptr + lane, tick_count_since_update, mask=live)
    tl.store(tick_count_ptr + lane, tick_count, mask=live)
    zero = kickoff_count * 0
    game_ints = (
        blue_score.to(tl.int64),
        orange_score.to(tl.int64),
        scored_last_tick.to(tl.int64),
        kickoff_count,
    )
    game_ints = game_ints + (goal_tick, goals.to(tl.int64), pads_busy, zero)
    store_row(game_ints_ptr, lane, game_ints, live, GAME_WIDTH, BLOCK)


@stage_jit
def car_events_kernel(
    car_rows_ptr, car_ints_ptr, car_tick_ptr, game_ints_ptr, pad_is_active_ptr, pad_cooldown_ptr,
    pad_prev_locked_car_id_ptr, pad_table_ptr, n, tick_time, boost_pad_cooldown_big, boost_pad_cooldown_small,
    NUM_CARS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """Stages 3. and 7. and the cars' events, one env per lane, after `car_step_kernel`: each pad's
    cooldown, the car it is locked to and the boost it gives (`update_pads`), from each car's test
    against the pad it touches, which the car step left in its `car_tick` row (`car_pad_tests`);
    the boost into the rows of the cars given some; then each car's events so far in its `car_ints`
    row with this tick's callbacks and pickup folded in (`fold_car_events`). A kernel apart from the
    ball's, whose registers would limit how many envs wait on the pads' memory at once."""
    lane, live, env = env_lanes(n, BLOCK)
    callbacks = ()
    cars_pad = ()
    for c in tl.static_range(NUM_CARS):  # each car's callbacks and pad test: one memory sector
        v = load_columns(car_tick_ptr + PAD_TESTS_AT, lane * NUM_CARS + c, live, CAR_TICK_WIDTH, 6, 8, BLOCK)
        cars_pad = cars_pad + ((v[0].to(tl.int32), v[1] != 0, v[2] != 0),)
        callbacks = callbacks + ((v[3] != 0, v[4].to(tl.int32), v[5].to(tl.int32)),)
    busy_at = game_ints_ptr + lane * GAME_WIDTH + PADS_BUSY_AT
    given, pickup_pad, busy = update_pads(
        cars_pad, tl.load(busy_at, mask=live, other=0), env, n, live, pad_is_active_ptr, pad_cooldown_ptr,
        pad_prev_locked_car_id_ptr, pad_table_ptr, f32(tick_time), f32(boost_pad_cooldown_big),
        f32(boost_pad_cooldown_small), NUM_CARS, BLOCK,
    )  # fmt: skip
    tl.store(busy_at, busy, mask=live)
    for c in tl.static_range(NUM_CARS):
        row = lane * NUM_CARS + c
        picked = live & (given[c] > 0)  # (few cars a tick: the others' boost is not read)
        boost_at = chunked_at(car_rows_ptr, row, CAR_WIDTH, NUM_CARS, BOOST_AT)
        tl.store(boost_at, boost_pads.give_boost(tl.load(boost_at, mask=picked, other=0.0), given[c]), mask=picked)
        touched, demoed_by, bumped_by = callbacks[c]
        # the events row read and written where the tick adds one (few cars a tick: the others' stays)
        happened = live & (touched | (demoed_by >= 0) | (bumped_by >= 0) | (pickup_pad[c] >= 0))
        events = fold_car_events(
            load_car_events(car_ints_ptr, row, happened, BLOCK), touched, demoed_by, bumped_by, pickup_pad[c]
        )  # fmt: skip
        store_car_events(car_ints_ptr, row, happened, events, BLOCK)


@jit
def car_pad_tests(car, slot, pad_cells_ptr, pad_table_ptr, hitbox_table_ptr, live):
    """BoostPadGrid::CheckCollision's test of a car of slot ``slot`` as its tick ends (its tuple,
    `load_car`'s) against the one pad it may touch (`boost_pads.car_pad_tests`), as `car_tick`'s floats
    from `PAD_TESTS_AT`: (that pad or -1, in its cylinder, in its box)."""
    pos, rot_mat, boost, is_demoed = car[0], car[1], car[16], car[28]
    inner, margin, offset, _ = car_contacts.load_hitbox(hitbox_table_ptr, slot)
    extent = add(inner, (margin, margin, margin))
    lo, hi = boost_pads.car_aabb(pos, rot_mat, sub(offset, extent), add(offset, extent))
    pad, in_cylinder, in_box = boost_pads.car_pad_tests(
        boost_pads.pad_near(pad_cells_ptr, pos, live), pad_table_ptr, pos, lo, hi,
        boost_pads.tested(pos, is_demoed, boost),
    )  # fmt: skip
    return pad.to(tl.float32), in_cylinder.to(tl.float32), in_box.to(tl.float32)


@jit
def update_pads(
    cars_pad, busy, env, n, live, pad_is_active_ptr, pad_cooldown_ptr, pad_prev_locked_car_id_ptr, pad_table_ptr,
    tick_time, boost_pad_cooldown_big, boost_pad_cooldown_small, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """3. and 7.: each pad's cooldown, the car it is locked to, the boost it gives (after the cars'
    finish). ``cars_pad``: each car's test against the one pad it may touch (`car_pad_tests`), which
    the walk compares with each pad's index (`boost_pads.check_collision`). ``busy``: the env's pads
    that are not idle (`PADS_BUSY_AT`). An idle pad no car touches stays as it is, so each lane walks
    only its busy pads and those a car touches, in the pads' order (`pads_to_visit`, `next_pad`): a
    block's walk lasts as many turns as its lane with the most. Returns each car's boost given, each
    car's pad (-1 none) and the pads busy after the tick."""
    given = ()
    pickup_pad = ()
    for c in tl.static_range(NUM_CARS):
        given = given + (tl.zeros([BLOCK], dtype=tl.float32),)
        pickup_pad = pickup_pad + (tl.full([BLOCK], -1, tl.int32),)
    visit = tl.where(live, pads_to_visit(busy, cars_pad, NUM_CARS), 0)
    turns = tl.max(popcount(visit), axis=0)
    # each pad's state is read `PADS_AHEAD` turns ahead, so the reads' latency passes while the pads
    # before it are walked (a read cannot move above the stores before it on its own)
    pads = (pad_is_active_ptr, pad_cooldown_ptr, pad_prev_locked_car_id_ptr)
    ahead = ()
    for a in tl.static_range(PADS_AHEAD):
        q, visit = next_pad(visit)
        ahead = ahead + ((q, load_pad_state(pads, env, q, n, q >= 0)),)
    still_busy = busy * 0
    big = big_pads(pad_table_ptr)
    for _ in range(turns):
        p, state = ahead[0]
        was_active, old_cooldown, old_prev = state
        q, visit = next_pad(visit)
        later = ()
        for a in tl.static_range(1, PADS_AHEAD):
            later = later + (ahead[a],)
        ahead = later + ((q, load_pad_state(pads, env, q, n, q >= 0)),)
        here = p >= 0
        at = tl.where(here, p, 0)
        is_big = ((big >> at) & 1) != 0
        is_active, cooldown = boost_pads.pre_tick_update(old_cooldown, tick_time)
        locked = boost_pads.check_collision(old_prev, p, cars_pad, NUM_CARS)
        is_active, cooldown, prev, pickup, amount = boost_pads.post_tick_update(
            is_active, cooldown, locked, is_big, boost_pad_cooldown_big, boost_pad_cooldown_small
        )
        pickup = tl.where(here, pickup, 0)
        new_given = ()
        new_pad = ()
        for c in tl.static_range(NUM_CARS):
            new_given = new_given + (given[c] + tl.where(pickup == c + 1, amount, 0.0),)
            new_pad = new_pad + (tl.where(pickup == c + 1, p, pickup_pad[c]),)
        given = new_given
        pickup_pad = new_pad
        # written where it changed: a busy pad cooling down, or one a car touches
        changed = here & ((is_active != (was_active != 0)) | (cooldown != old_cooldown) | (prev != old_prev))
        tl.store(pad_is_active_ptr + pad_at(env, at, n), is_active.to(tl.int8), mask=changed)
        tl.store(pad_cooldown_ptr + pad_at(env, at, n), cooldown, mask=changed)
        tl.store(pad_prev_locked_car_id_ptr + pad_at(env, at, n), prev, mask=changed)
        still_busy = still_busy | tl.where(here, pad_busy(is_active, cooldown, prev).to(tl.int64) << at, 0)
    return given, pickup_pad, still_busy


@jit
def pads_to_visit(busy, cars_pad, NUM_CARS: tl.constexpr):
    """The pads the walk visits, bit p for pad p: the busy ones (`pad_busy`) and each one a car's test
    meets (`car_pad_tests`; a pad a car only comes near stays idle)."""
    visit = busy
    for c in tl.static_range(NUM_CARS):
        pad, in_cylinder, in_box = cars_pad[c]
        touches = (pad >= 0) & (in_cylinder | in_box)
        visit = visit | tl.where(touches, tl.full(pad.shape, 1, tl.int64) << tl.where(touches, pad, 0), 0)
    return visit


@jit
def next_pad(visit):
    """The lowest pad of ``visit`` (its bit's index; -1 where none is left) and ``visit`` without it.
    The bit as a float32 is a power of two, exact, whose exponent is the index."""
    low = visit & (-visit)
    exponent = (low.to(tl.float32).to(tl.int32, bitcast=True) >> 23) - 127
    return tl.where(visit != 0, exponent, -1), visit ^ low


@jit
def popcount(bits):
    """The set bits of each lane's int64 ``bits`` (SWAR: pairs, nibbles, bytes, then their sum)."""
    bits = bits - ((bits >> 1) & 0x5555555555555555)
    bits = (bits & 0x3333333333333333) + ((bits >> 2) & 0x3333333333333333)
    bits = (bits + (bits >> 4)) & 0x0F0F0F0F0F0F0F0F
    return ((bits * 0x0101010101010101) >> 56).to(tl.int32)


@jit
def big_pads(pad_table_ptr):
    """Which pads are big, bit p for pad p: read at once before the walk, where a read in each of its
    turns would wait behind the pads' writes before it."""
    big = tl.zeros([], tl.int64)
    for p in tl.static_range(BOOST_PAD_COUNT):
        big = big | (boost_pads.load_pad(pad_table_ptr, p)[1].to(tl.int64) << p)
    return big


@jit
def pad_busy(is_active, cooldown, prev_locked_car_id):
    """A pad that is not idle (active, no cooldown, locked to no car): one whose next tick may change it
    though no car touches it."""
    return (is_active == 0) | (cooldown != 0) | (prev_locked_car_id != 0)


@jit
def kickoff_cars(
    kickoff, lane, env, n, hashed_seed, kickoff_count, car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr,
    car_ints_ptr, kickoff_spawns_ptr, pad_is_active_ptr, pad_cooldown_ptr, pad_prev_locked_car_id_ptr,
    car_spawn_boost_amount, NUM_CARS: tl.constexpr, BLUE: tl.constexpr, KICKOFF_ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """Arena::ResetToRandomKickoff's cars and pads in the lanes ``kickoff``: each car at its spot of the
    env's seeded kickoff order, fresh (`rules.spawned_car`), and every pad active (the ball is the
    caller's)."""
    order = rules.kickoff_order(hashed_seed, env, kickoff_count)
    for c in tl.static_range(NUM_CARS):
        row = lane * NUM_CARS + c
        car, _ = load_car_and_hit_info(
            car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, car_ints_ptr, row, kickoff, NUM_CARS, BLOCK
        )
        fresh, fresh_info = rules.spawned_car(
            car, kickoff_spawns_ptr,
            (1 if c >= BLUE else 0) * KICKOFF_ROWS + rules.kickoff_spot(order, c - BLUE if c >= BLUE else c),
            car_spawn_boost_amount, kickoff, BLOCK,
        )  # fmt: skip
        store_car_and_hit_info(
            car_rows_ptr, car_contact_id_ptr, car_tick_count_since_update_ptr, row, kickoff, fresh, fresh_info, NUM_CARS, BLOCK
        )
        store_hit_ticks(car_ints_ptr, row, kickoff, fresh_info[4:], BLOCK)
    for p in range(BOOST_PAD_COUNT):
        tl.store(pad_is_active_ptr + pad_at(env, p, n), tl.full([BLOCK], 1, tl.int8), mask=kickoff)
        tl.store(pad_cooldown_ptr + pad_at(env, p, n), tl.zeros([BLOCK], dtype=tl.float32), mask=kickoff)
        tl.store(pad_prev_locked_car_id_ptr + pad_at(env, p, n), tl.zeros([BLOCK], dtype=tl.int32), mask=kickoff)


@jit
def load_pad_state(pads, env, p, n, live):
    """Pad ``p``'s is_active (int8), cooldown and prev_locked_car_id in env ``env`` (`pad_at`), from
    ``pads``: their three arrays; an idle pad's (active, 0, 0) where not ``live``."""
    at = pad_at(env, p, n)
    is_active = tl.load(pads[0] + at, mask=live, other=1)
    return is_active, tl.load(pads[1] + at, mask=live, other=0.0), tl.load(pads[2] + at, mask=live, other=0)


@jit
def pad_at(env, p, n):
    """Where env ``env``'s pad ``p`` sits in the pads' arrays, laid out pad by pad ([34, n]: a pad's lanes
    side by side, so each of the walk's reads and writes is one coalesced access)."""
    return env + p * tl.cast(n, tl.int64)


@jit
def fold_car_events(events, touched, demoed_by, bumped_by, pickup_pad):
    """One car's events so far with one more tick's (`rules.fold_events`): the touch OR-ed, the first
    attacker and pad kept."""
    touch, demoer, bumper, pad = events
    return touch | touched, rules.first(demoer, demoed_by), rules.first(bumper, bumped_by), rules.first(pad, pickup_pad)


@jit
def load_hit_info(rows_ptr, hit_ticks, row, live, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr):
    """A car's ball hit info: its ``ball_hit_info_*`` floats from the car's packed row (after `load_car`'s
    fields, `HIT_INFO_AT`) and its two tick counts (`load_hit_ticks`)."""
    v = load_car_columns(rows_ptr, row, live, HIT_INFO_AT, HIT_INFO_FLOATS, NUM_CARS, BLOCK)
    return v[0] != 0, (v[1], v[2], v[3]), (v[4], v[5], v[6]), (v[7], v[8], v[9]), hit_ticks[0], hit_ticks[1]


@jit
def store_hit_info(rows_ptr, row, live, info, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr):
    """`load_hit_info`'s floats back into the car's row (its tick counts go with `store_hit_ticks`)."""
    values = (info[0].to(tl.float32),) + info[1] + info[2] + info[3]
    store_car_columns(rows_ptr, row, values, live, HIT_INFO_AT, HIT_INFO_FLOATS, NUM_CARS, BLOCK)


@jit
def load_bump_state(rows_ptr, car_contact_id_ptr, row, live, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr):
    """`kernels/car_bump`'s bump state of car row ``row``: (pos, vel, rot_mat, is_on_ground, is_supersonic,
    car_contact_id, car_contact_cooldown_timer, is_demoed, demo_respawn_timer, velocity_impulse_cache),
    read as the columns it needs."""
    v = load_car_columns(rows_ptr, row, live, 0, 15, NUM_CARS, BLOCK)  # pos, rot_mat, vel
    bump = load_car_columns(rows_ptr, row, live, BUMP_AT, 3, NUM_CARS, BLOCK)  # cooldown, is_demoed, timer
    cache = load_car_columns(rows_ptr, row, live, IMPULSE_CACHE_AT, 3, NUM_CARS, BLOCK)
    return (
        (v[0], v[1], v[2]), (v[12], v[13], v[14]), ((v[3], v[4], v[5]), (v[6], v[7], v[8]), (v[9], v[10], v[11])),
        tl.load(chunked_at(rows_ptr, row, CAR_WIDTH, NUM_CARS, ON_GROUND_AT), mask=live, other=0.0) != 0,
        tl.load(chunked_at(rows_ptr, row, CAR_WIDTH, NUM_CARS, SUPERSONIC_AT), mask=live, other=0.0) != 0,
        tl.load(car_contact_id_ptr + row, mask=live, other=0), bump[0], bump[1] != 0, bump[2], cache,
    )  # fmt: skip


@jit
def store_bump_state(rows_ptr, car_contact_id_ptr, row, live, state, NUM_CARS: tl.constexpr, BLOCK: tl.constexpr):
    """The bump state's fields the callbacks write back into the car's row and contact id."""
    tl.store(car_contact_id_ptr + row, state[5], mask=live)
    store_car_columns(rows_ptr, row, (state[6], state[7].to(tl.float32), state[8]), live, BUMP_AT, 3, NUM_CARS, BLOCK)
    store_car_columns(rows_ptr, row, state[9], live, IMPULSE_CACHE_AT, 3, NUM_CARS, BLOCK)


@jit
def hit_info_of(v, hit_ticks):
    """`load_hit_info` of a car row's floats ``v`` (`kernels/car.load_car_row`) and its tick counts."""
    return (
        v[HIT_INFO_AT] != 0,
        (v[HIT_INFO_AT + 1], v[HIT_INFO_AT + 2], v[HIT_INFO_AT + 3]),
        (v[HIT_INFO_AT + 4], v[HIT_INFO_AT + 5], v[HIT_INFO_AT + 6]),
        (v[HIT_INFO_AT + 7], v[HIT_INFO_AT + 8], v[HIT_INFO_AT + 9]),
        hit_ticks[0],
        hit_ticks[1],
    )


@jit
def store_car_and_hit_info(
    rows_ptr, car_contact_id_ptr, tick_count_since_update_ptr, row, live, car, info, NUM_CARS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """`kernels/car.store_car` with the ball hit info's floats in the same row."""
    store_car_row(rows_ptr, row, car_row_values(car, info), live, NUM_CARS, BLOCK)
    tl.store(car_contact_id_ptr + row, car[26], mask=live)
    tl.store(tick_count_since_update_ptr + row, car[31], mask=live)


@triton_op("nitro::soccar_step_ticks_", mutates_args={"ball", "game", "car_fields", "cars", "pads"})
def step_ticks_op(
    ball: list[torch.Tensor],
    game: list[torch.Tensor],
    car_fields: list[torch.Tensor],
    cars: list[torch.Tensor],
    pads: list[torch.Tensor],
    controls: torch.Tensor,
    tables: list[torch.Tensor],
    ticks: int,
    params: list[float],
    hashed_seed: int,
    arena: list[torch.Tensor],
    grid: list[float],
    ray_cells: list[torch.Tensor],
    ray_grid: list[float],
    blue: int,
    kickoff_after_goal: bool,
    block: int,
    maxnreg: int = 0,
) -> None:
    """The fused step as a registered op: ``ball`` (pos, vel, ang_vel, velocity_impulse_cache,
    tick_count_since_update), ``game`` (tick_count, `game_ints`), ``car_fields`` (the cars' `PACKED`
    fields, bools as `int8_view`s: packed into one row per car before the first tick and unpacked
    after the last, `car_rows_kernel`), ``cars`` (car_contact_id, tick_count_since_update, `car_ints`,
    `car_order`), ``pads`` (is_active, cooldown,
    prev_locked_car_id, each [34, N]: `pad_at`), ``tables`` (`TABLE_NAMES`), ``arena`` (`ARENA_NAMES`),
    ``grid`` (`grid_args`), ``ray_cells`` and ``ray_grid`` (the wheel rays' grid: cell_start, cell_tris;
    `grid_args`). ``maxnreg``: ptxas's
    register cap per thread (trading spills for occupancy; eager launches only, as torch.compile does
    not pass it through to Triton)."""
    envs, num_cars = ball[0].shape[0], controls.shape[1]
    car_rows = torch.empty(chunked_rows(envs, num_cars), CAR_WIDTH.value, device=controls.device)
    args = {
        **{f"{name}_ptr": x for name, x in zip(BALL_NAMES + GAME_NAMES, ball + game)},
        **{f"car_{name}_ptr": x for name, x in zip(CAR_NAMES, cars)},
        **{f"{name}_ptr": x for name, x in zip(PAD_NAMES, pads)},
        **{f"{name}_ptr": x for name, x in zip(TABLE_NAMES + ARENA_NAMES, tables + arena)},
        # the cars' packed rows (`car_rows_kernel`), and `tick`'s second buffer of them
        "car_rows_ptr": car_rows,
        # (one car per env: one buffer, its rows updated in place, as no other car's wheels read them)
        "car_spare_rows_ptr": torch.empty_like(car_rows) if num_cars > 1 else car_rows,
        "car_tick_ptr": torch.empty(envs * num_cars, CAR_TICK_WIDTH.value, device=controls.device),
        "wheel_hits_ptr": torch.empty(envs * num_cars, 4, ARENA_HIT_WIDTH.value, device=controls.device),
        "deferred_ptr": torch.empty(num_cars, envs, dtype=torch.int32, device=controls.device),  # `defer_lanes`
        "pair_contacts_ptr": torch.empty(
            envs * (num_cars * (num_cars - 1) // 2), PAIR_WIDTH.value, device=controls.device
        ),
        "body_rows_ptr": torch.empty(envs * body_rows_of(num_cars), BODY_ROW_WIDTH.value, device=controls.device),
        "body_mask_ptr": torch.empty(envs, dtype=torch.int64, device=controls.device),
        # `bodies_near_kernel`'s bounds and its list of envs
        "rays_near_ptr": torch.empty(envs, dtype=torch.int32, device=controls.device),
        "pairs_near_ptr": torch.empty(envs, dtype=torch.int32, device=controls.device),
        "near_envs_ptr": torch.empty(envs, dtype=torch.int32, device=controls.device),
        "body_solve_ptr": torch.empty(envs * (num_cars + 1), BODY_SOLVE_WIDTH.value, device=controls.device),
        **dict(zip(("ball_inv_mass_bt", "ball_inv_inertia_bt", "ball_gravity_bt"), ball_mass_props(TickParams(*params)))),
        "controls_ptr": controls,
        "hashed_seed": hashed_seed,
        "spread_programs": SPREAD_PROGRAMS,
        **dict(zip(PARAM_NAMES, params)),
        **grid_kwargs(grid),
        # the pre-tick's grid (`tick`)
        "wheel_rays": {"cell_start_ptr": ray_cells[0], "cell_tris_ptr": ray_cells[1], **grid_kwargs(ray_grid)},
        "NUM_CARS": num_cars,
        "BLUE": blue,
        "KICKOFF_AFTER_GOAL": kickoff_after_goal,
        "KICKOFF_ROWS": tables[4].shape[0] // 2,
        "NUM_PLANES": 4,
        "PLANE_BASE": PLANE_OBJECT_BASE,
        "MAX_CONTACTS": MAX_NEW_CONTACTS,
        "DEGENERATE_L2": C.DEGENERATE_TRIANGLE_L2,
        "SIMD_EPSILON": C.SIMD_EPSILON_UU2,
        "MAX_ANGLE": C.INTERNAL_EDGE_MAX_ANGLE,
        "EDGE_DISTANCE": C.INTERNAL_EDGE_DISTANCE_THRESHOLD,
        "ITERATIONS": C.SOLVER_NUM_ITERATIONS,
        "PUSH_POINTS": MAX_PUSH_POINTS,
    }
    check_offsets(args, envs, num_cars)
    if num_cars == 0:  # the ball alone: every tick in one launch, the ball in registers throughout
        launch(ball_and_rules_kernel, envs, 1, {**args, "ticks": ticks}, block, maxnreg)
        return
    fields = {f"{name}_ptr": x for name, x in zip(PACKED, car_fields)}
    rows = {**fields, "rows_ptr": args["car_rows_ptr"], "UNPACK": False, "NUM_CARS": num_cars,
            "programs": triton.cdiv(chunked_rows(envs, num_cars), ROWS_BLOCK)}  # (lanes in the rows' order)
    launch(car_rows_kernel, envs * num_cars, 1, rows, ROWS_BLOCK, 0)
    args["ticks"] = 1
    # the car step's pairs (`car_world_pairs_kernel`); small batches, which find none, pass a one-lane
    # list that is never read, of the same types, so the kernels' cache keys do not depend on the size
    lanes = envs * num_cars if envs * num_cars > CAR_PER_PROGRAM_UP_TO else 1
    args.update(world_pair_buffers(lanes, controls.device))
    deferred_counts = torch.zeros(ticks, 4, num_cars, dtype=torch.int32, device=controls.device)
    for t in range(ticks):
        args["deferred_counts"] = deferred_counts[t]
        tick(args, envs, num_cars, block, maxnreg)
    launch(car_rows_kernel, envs * num_cars, 1, {**rows, "rows_ptr": args["car_rows_ptr"], "UNPACK": True}, ROWS_BLOCK, 0)


OFFSET_LIMIT = 2**31 - 1
"""The most elements of one buffer the stage kernels index: their offsets (row * width + column) are
32-bit integers, as Triton makes them from int32 lanes."""
WIDE_OFFSETS = frozenset({"body_rows_ptr", "pair_contacts_ptr", "wheel_hits_ptr"})
"""The buffers the stage kernels index from int64 env or row numbers (`listed_envs`, `car_lanes`' env,
`wheel_hits_of`), which `OFFSET_LIMIT` does not bound: the largest per env at 3v3, the solve's rows
between bodies (1,056 floats), would otherwise stop 3v3 at about 2M envs."""


def check_offsets(args: dict, envs: int, num_cars: int) -> None:
    """Refuse a batch whose largest buffer of per-env rows the kernels' 32-bit offsets cannot index
    (`OFFSET_LIMIT`; the arena's and the cars' tables are of a fixed size, far below it; `WIDE_OFFSETS`
    are indexed with 64-bit offsets)."""
    fixed = {f"{name}_ptr" for name in TABLE_NAMES + ARENA_NAMES} | WIDE_OFFSETS
    sizes = ((k, x.numel()) for k, x in args.items() if isinstance(x, torch.Tensor) and k not in fixed)
    name, largest = max(sizes, key=lambda kv: kv[1])
    if largest > OFFSET_LIMIT:
        most = envs * OFFSET_LIMIT // largest
        raise ValueError(
            f"a fused step indexes its buffers with 32-bit offsets, and {envs} envs of {num_cars} cars make "
            f"{name[:-4]} {largest} elements (at most {OFFSET_LIMIT}); split the batch into Arenas of at most "
            f"{most} envs"
        )


WORLD_PAIRS_PER_CAR = 0.25
"""Room in the car step's list of (car, triangle) pairs (`car_world_pairs_kernel`) per car: about
twenty times what the benchmark's games list (about 1% of the cars on the second pass, one or two
triangles each). A car whose pairs do not fit walks its cell in its own lane, as before."""


def world_pair_buffers(lanes: int, device) -> dict[str, torch.Tensor]:
    """`car_world_pairs_kernel`'s list for ``lanes`` (env, car) lanes, by the kernels' names: each car
    row's count and places, the pairs, their points, and the list's room."""
    capacity = max(int(lanes * WORLD_PAIRS_PER_CAR), 1)
    return {
        "world_pair_count_ptr": torch.empty(lanes, dtype=torch.int32, device=device),
        "world_pair_slots_ptr": torch.empty(lanes, car_contacts.PAIR_SLOTS.value, dtype=torch.int32, device=device),
        "world_pairs_ptr": torch.empty(capacity, 2, dtype=torch.int32, device=device),
        "world_points_ptr": torch.empty(capacity, car_contacts.WORLD_POINT_WIDTH.value, device=device),
        "world_pairs_capacity": capacity,
    }


def grid_kwargs(grid: list[float]) -> dict:
    """`grid_args` by the kernels' names."""
    return {
        **dict(zip(("ox0", "oy0", "oz0", "cell_size"), grid[:4])),
        **dict(zip(("dim_x", "dim_y", "dim_z"), (int(x) for x in grid[4:7]))),
    }


ROWS_BLOCK = 128
"""Cars per program of `car_rows_kernel` (four warps, one car per thread)."""
NEAR_BLOCK = 128
"""Envs per program of `bodies_near_kernel` (four warps, one env per thread): one-warp programs cap an SM
at 32 warps (its limit of programs), which left the bounds' reads waiting (1v0 at 16,777,216 envs on
an H200: 0.75 ms per tick at 32 envs per program, 0.35 at 128; the wheel rays, at 128, went 1.30 -> 1.41)."""
PADS_BLOCK = 32
"""Envs per program of `car_events_kernel` (one warp, one env per thread: the pads' walk lasts as
many turns as the block's lane with the most pads to visit)."""
PADS_AHEAD = constexpr(2)
"""How many turns ahead of its own `update_pads` reads a pad's state."""


BALL_NAMES = ("pos", "vel", "ang_vel", "velocity_impulse_cache", "tick_count_since_update")
GAME_NAMES = ("tick_count", "game_ints")
CAR_NAMES = ("contact_id", "tick_count_since_update", "ints", "order")
PAD_NAMES = ("pad_is_active", "pad_cooldown", "pad_prev_locked_car_id")
TABLE_NAMES = ("car_table", "pad_table", "hitbox_table", "respawn_spawns", "kickoff_spawns", "pad_cells")


def ball_grid(world: World) -> ArenaMesh:
    """The arena with the fused tick's grid (`BALL_GRID_CELL`), or the world's own when a ball
    mutated bigger than `BALL_GRID_RADIUS` would not fit it."""
    p, mesh = world.params, world.mesh
    reach = p.ball_radius + p.ball_contact_gap
    if reach > BALL_GRID_RADIUS:
        if reach > mesh.query_radius:
            raise ValueError(
                f"ball reach radius + gap = {reach} UU exceeds the grid's "
                f"query radius {mesh.query_radius} UU; load the mesh with a larger query_radius"
            )
        return mesh
    return regridded(mesh, BALL_GRID_RADIUS, BALL_GRID_CELL)


def ray_grid(world: World) -> ArenaMesh:
    """The arena with the wheel rays' grid (`RAY_GRID_CELL`; `_tables` checks that the world's rays
    fit it)."""
    return regridded(world.mesh, RAY_GRID_RADIUS, RAY_GRID_CELL)


def regridded(mesh: ArenaMesh, query_radius: float, cell_size: float) -> ArenaMesh:
    """``mesh``'s arena with a grid of its own, loaded once per folder, device and grid: no file
    system work per step."""
    key = (mesh.folder, str(mesh.device), query_radius, cell_size)
    if key not in _GRIDS:
        _GRIDS[key] = load_arena_mesh(
            mesh.folder, mesh.device, query_radius=query_radius, cell_size=cell_size
        )
    return _GRIDS[key]


_GRIDS: dict[tuple[str, str, float, float], ArenaMesh] = {}


def launch_step_ticks_(
    state: GameState,
    events: ArenaEvents,
    controls: torch.Tensor,
    world: World,
    ticks: int,
    block: int = FUSED_BLOCK,
    maxnreg: int = 0,
) -> None:
    """Advance the arenas by ``ticks`` ticks with ``controls`` [N, C, 8] held (`step_ticks_op`: the
    stage kernels of each tick, or one launch for ball-only arenas), updating ``state`` and ``events`` in
    place: the same mechanics as `arena.step_ticks`.

    ``block``: envs per program (32, 64, ...; one per thread). ``maxnreg``: a cap on registers per
    thread (0: ptxas's choice, about 255 here), for benchmarks of spills against occupancy.

    The events' flags are rewritten from the kernel's per-env goal bits and per-car attackers and
    pads, so they must be the arena's own event buffers. The state's tensors must be contiguous (the
    Arena's are), but for the cars' packed fields and the pads, which are copied in and out when they
    are not laid out as the kernels read them (the Arena's are)."""
    require_triton()
    mesh = ball_grid(world)
    b = state.ball
    cars = state.cars
    fields = [getattr(cars, name) for name in PACKED]
    dense = [x.contiguous() for x in fields]  # (the kernels read them as [N * C, width] arrays)
    envs, num_cars = state.tick_count.shape[0], cars.pos.shape[1]
    rays = ray_grid(world) if num_cars else mesh  # (ball-only arenas cast no rays)
    pads = [int8_view(state.pads.is_active), state.pads.cooldown, state.pads.prev_locked_car_id]
    walked = num_cars > 0 or world.game.kickoff_after_goal  # else the kernel leaves the pads be
    by_pad = [x.t().contiguous() for x in pads] if walked else pads  # [34, N], as `pad_at` lays them out
    # (a view of the state's own pads where they are stored pad by pad, as `BoostPadState.fresh` makes them)
    ints = int_fields(state, events)
    game_ints = torch.empty(envs, GAME_WIDTH.value, dtype=torch.int64, device=controls.device)
    car_ints = torch.empty(envs * num_cars, CAR_INTS_WIDTH.value, dtype=torch.int64, device=controls.device)
    launch_ints_rows(ints, game_ints, car_ints, unpack=False, pads=by_pad if num_cars else None)
    step_ticks_op(
        [b.pos, b.vel, b.ang_vel, b.velocity_impulse_cache, b.tick_count_since_update],
        [state.tick_count, game_ints],
        [int8_view(x) for x in dense],
        [cars.car_contact_id, cars.tick_count_since_update, car_ints, car_order(cars, mesh)],
        by_pad,
        controls.contiguous(),
        _tables(world, mesh),
        int(ticks),
        [float(getattr(world.params, name)) for name in PARAM_NAMES],
        rules.seed_word(world.game.seed),
        arena_tensors(mesh),
        grid_args(mesh),
        [rays.cell_start, rays.cell_tris],
        grid_args(rays),
        world.game.blue,
        world.game.kickoff_after_goal,
        int(block),
        int(maxnreg),
    )
    launch_ints_rows(ints, game_ints, car_ints, unpack=True)
    for x, y in zip(fields, dense):
        if y is not x:  # a field that was not contiguous (the Arena's are): its values back in place
            x.copy_(y)
    if walked:
        for x, y in zip(pads, by_pad):
            if y.data_ptr() != x.data_ptr():  # a copy: the values back in place
                x.copy_(y.t())


SORT_FROM_LANES = {"cuda": float("inf"), "cpu": 8}
"""`car_order` sorts the cars when there are at least this many (env, car) lanes; below it, env order.
Sorting groups the cars at the walls, so fewer warps of `wheel_rays_kernel`, the one kernel that takes
the order, run their long walks; the sort and its gathers are kernels of their own, once per step.
Measured on an H200 since the rows were chunked (docs/PERFORMANCE.md), ms per tick sorted / in env
order: 1v1 games at 1,048,576 envs 2.906 / 2.836; at 4,194,304 8.336 / 8.323 (the rays 0.78 / 1.08, the
sort's kernels the rest); 1v0 at 16,777,216 16.198 / 15.827 (the rays 1.34 / 1.31). No size gained, so
GPUs keep the envs' order (`bench/soccar_stages_gpu.py --car-order sorted` measures the other). On the
CPU (Triton's interpreter, the twin tests) from 8 lanes, so the tests run the sorted order."""


def car_order(cars: CarState, mesh: ArenaMesh) -> torch.Tensor:
    """Each car slot's envs, [C, N] int32: the order the wheel rays take their lanes in (`car_lanes`; the
    pre-tick and the car step take the envs' own).
    With enough cars (`SORT_FROM_LANES`), sorted by how much of the arena each car meets: the triangles
    listed in the grid cell of the car's centre, then whether it is in the air, so the cars of a warp
    run the same loops and branches (a warp runs as long as its longest lane). Cars move a few cells
    at most within a step, so the order is made once per step; it decides the speed alone, never a
    result."""
    envs, slots = cars.pos.shape[:2]
    if envs * slots < SORT_FROM_LANES.get(cars.pos.device.type, 8):
        return torch.arange(envs, dtype=torch.int32, device=cars.pos.device).expand(slots, envs).contiguous()
    cell = mesh.cell_index(cars.pos.transpose(0, 1))  # [C, N]
    triangles = mesh.cell_start[cell + 1] - mesh.cell_start[cell]
    key = triangles.to(torch.int64) * 2 + (~cars.is_on_ground.transpose(0, 1)).to(torch.int64)
    return key.argsort(dim=1).to(torch.int32).contiguous()


GAME_WIDTH = constexpr(8)
"""`game_ints`' columns: blue_score, orange_score, scored_last_tick, kickoff_count, goal_tick, goal bits
(1 blue, 2 orange), the busy pads (`PADS_BUSY_AT`), one spare (rows a power of two wide, as
`vec.load_row` reads them)."""
PADS_BUSY_AT = constexpr(6)
"""Where a `game_ints` row keeps its env's busy pads, bit p for pad p (`pad_busy`): found from the pads'
state as a step starts (`ints_rows_kernel`), then kept by the pads' walk (`update_pads`), which visits
only the busy pads and those a car touches. Derived, so not unpacked: most pads of most envs are
idle on most ticks."""
CAR_INTS_WIDTH = constexpr(8)
"""`car_ints`' columns: ball_hit_info_tick_count_when_hit, _when_extra_impulse_applied, the events'
ball_touch, demoed_by, bumped_by, boost_pickup_pad, two spare."""
EVENTS_AT = constexpr(2)
"""Where the events start in a `car_ints` row."""


def int_fields(state: GameState, events: ArenaEvents) -> dict[str, torch.Tensor]:
    """The state's and the events' fields behind `game_ints` and `car_ints`, by their names in
    `ints_rows_kernel` (bools as `int8_view`s)."""
    game = {name: getattr(state, name) for name in ("blue_score", "orange_score", "scored_last_tick", "kickoff_count")}
    hit_ticks = ("ball_hit_info_tick_count_when_hit", "ball_hit_info_tick_count_when_extra_impulse_applied")
    cars = {name: getattr(state.cars, name) for name in hit_ticks}
    happened = ("goal_tick", "goal_blue", "goal_orange", "ball_touch", "demoed_by", "bumped_by", "boost_pickup_pad",
                "demo", "bump", "boost_pickup")  # fmt: skip
    fields = {**game, **cars, **{name: getattr(events, name) for name in happened}}
    return {f"{name}_ptr": int8_view(x) for name, x in fields.items()}


def launch_ints_rows(
    fields: dict, game_ints: torch.Tensor, car_ints: torch.Tensor, unpack: bool, pads: list[torch.Tensor] | None = None
) -> None:
    """`ints_rows_kernel` over the envs' game rows and the cars' rows; packing, the busy pads from
    ``pads`` (their three arrays as `pad_at` lays them out; none: no pad busy)."""
    lanes = max(game_ints.shape[0], car_ints.shape[0])
    by_pad = dict(zip(PAD_NAMES, pads or [game_ints] * 3))  # (not read without pads)
    args = {**fields, **{f"{name}_ptr": x for name, x in by_pad.items()}, "game_ints_ptr": game_ints,
            "car_ints_ptr": car_ints, "envs": game_ints.shape[0], "car_rows": car_ints.shape[0], "UNPACK": unpack,
            "PADS": pads is not None}  # fmt: skip
    launch(ints_rows_kernel, lanes, 1, args, ROWS_BLOCK, 0)


@stage_jit
def ints_rows_kernel(
    game_ints_ptr, car_ints_ptr, blue_score_ptr, orange_score_ptr, scored_last_tick_ptr, kickoff_count_ptr,
    goal_tick_ptr, goal_blue_ptr, goal_orange_ptr, ball_hit_info_tick_count_when_hit_ptr,
    ball_hit_info_tick_count_when_extra_impulse_applied_ptr, ball_touch_ptr, demoed_by_ptr, bumped_by_ptr,
    boost_pickup_pad_ptr, demo_ptr, bump_ptr, boost_pickup_ptr, pad_is_active_ptr, pad_cooldown_ptr,
    pad_prev_locked_car_id_ptr, envs, car_rows, n, UNPACK: tl.constexpr, PADS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """Each env's game counters and goal events into its `game_ints` row and each car's hit info tick
    counts and events into its `car_ints` row (one memory operation each in the stage kernels), one
    env row and one car row per lane, each field read from its own array, and with ``PADS`` the env's
    busy pads from the pads' state (`PADS_BUSY_AT`); with ``UNPACK``, the rows back into the fields
    (and the events' demo, bump and boost_pickup flags from their attackers and pads)."""
    at = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    env, car = at < envs, at < car_rows
    if UNPACK:
        g = load_row(game_ints_ptr, at, env, GAME_WIDTH, BLOCK)
        tl.store(blue_score_ptr + at, g[0].to(tl.int32), mask=env)
        tl.store(orange_score_ptr + at, g[1].to(tl.int32), mask=env)
        tl.store(scored_last_tick_ptr + at, (g[2] != 0).to(tl.int8), mask=env)
        tl.store(kickoff_count_ptr + at, g[3], mask=env)
        tl.store(goal_tick_ptr + at, g[4], mask=env)
        tl.store(goal_blue_ptr + at, ((g[5] & 1) != 0).to(tl.int8), mask=env)
        tl.store(goal_orange_ptr + at, ((g[5] & 2) != 0).to(tl.int8), mask=env)
        c = load_row(car_ints_ptr, at, car, CAR_INTS_WIDTH, BLOCK)
        tl.store(ball_hit_info_tick_count_when_hit_ptr + at, c[0], mask=car)
        tl.store(ball_hit_info_tick_count_when_extra_impulse_applied_ptr + at, c[1], mask=car)
        tl.store(ball_touch_ptr + at, (c[2] != 0).to(tl.int8), mask=car)
        tl.store(demoed_by_ptr + at, c[3].to(tl.int32), mask=car)
        tl.store(bumped_by_ptr + at, c[4].to(tl.int32), mask=car)
        tl.store(boost_pickup_pad_ptr + at, c[5].to(tl.int32), mask=car)
        tl.store(demo_ptr + at, (c[3] >= 0).to(tl.int8), mask=car)
        tl.store(bump_ptr + at, (c[4] >= 0).to(tl.int8), mask=car)
        tl.store(boost_pickup_ptr + at, (c[5] >= 0).to(tl.int8), mask=car)
    else:
        goals = tl.load(goal_blue_ptr + at, mask=env, other=0).to(tl.int64)
        goals = goals | (tl.load(goal_orange_ptr + at, mask=env, other=0).to(tl.int64) << 1)
        game = ()
        for x in tl.static_range(5):
            field = (blue_score_ptr, orange_score_ptr, scored_last_tick_ptr, kickoff_count_ptr, goal_tick_ptr)[x]
            game = game + (tl.load(field + at, mask=env, other=0).to(tl.int64),)
        zero = goals * 0
        busy = zero
        if PADS:
            pads = (pad_is_active_ptr, pad_cooldown_ptr, pad_prev_locked_car_id_ptr)
            for p in range(BOOST_PAD_COUNT):
                is_active, cooldown, prev = load_pad_state(pads, at, p, envs, env)
                busy = busy | (pad_busy(is_active, cooldown, prev).to(tl.int64) << p)
        store_row(game_ints_ptr, at, game + (goals, busy, zero), env, GAME_WIDTH, BLOCK)
        ints = ()
        for x in tl.static_range(6):
            field = (ball_hit_info_tick_count_when_hit_ptr, ball_hit_info_tick_count_when_extra_impulse_applied_ptr,
                     ball_touch_ptr, demoed_by_ptr, bumped_by_ptr, boost_pickup_pad_ptr)[x]  # fmt: skip
            ints = ints + (tl.load(field + at, mask=car, other=0).to(tl.int64),)
        store_row(car_ints_ptr, at, ints + (zero, zero), car, CAR_INTS_WIDTH, BLOCK)


def _tables(world: World, mesh: ArenaMesh) -> list[torch.Tensor]:
    """`TABLE_NAMES`' tensors of the world, built once per World (checking that the grids' lists
    reach every triangle a car body can touch, `kernels/car_contacts.car_world_contacts` reading the
    list of the cell holding the box's centre, and every triangle a wheel ray can hit, `ray_cast`
    reading the list of the cell holding its midpoint)."""
    key = (id(world), str(mesh.device))
    if key not in _TABLES:
        h = world.cars.hitbox
        reach = (h.inner + h.margin[:, None]).norm(dim=1) + h.threshold  # BT, per car
        reach = float(reach.max()) * C.BT_TO_UU if reach.numel() else 0.0  # sync-ok: once per World
        if reach > mesh.query_radius:
            raise ValueError(
                f"a car body reaches {reach:.1f} UU from its hitbox centre, beyond the fused grid's query "
                f"radius {mesh.query_radius} UU; load the mesh with a larger query_radius"
            )
        ray = world.cars.ray_length
        ray = float(ray.max()) if ray.numel() else 0.0  # sync-ok: once per World
        if ray / 2 > RAY_GRID_RADIUS:
            raise ValueError(
                f"a wheel ray of {ray:.1f} UU reaches {ray / 2:.1f} UU from its midpoint, beyond the wheel "
                f"rays' grid's query radius RAY_GRID_RADIUS = {RAY_GRID_RADIUS} UU; raise RAY_GRID_RADIUS"
            )
        _TABLES[key] = (
            world,  # kept alive with its tables, so its id is not reused
            [
                car_table(world.cars),
                boost_pads.pad_table(world.pads),
                car_contacts.hitbox_table(world.cars),
                rules.spawn_rows(world.game.respawn_spawns),
                rules.spawn_rows(world.game.kickoff_spawns),
                boost_pads.pad_cells(world.pads, world.cars.hitbox),
            ],
        )
    return _TABLES[key][1]


_TABLES: dict[tuple[int, str], tuple[World, list[torch.Tensor]]] = {}
