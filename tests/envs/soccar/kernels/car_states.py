"""What the car twin tests share: car states met in play, and the flat buffers their kernels read.

`sample_cars` steps the parity harness' scenario families (driving, turning, powerslides, walls,
ceiling, jumps, flips, air control, landings, auto-flip) through the reference `Arena` and keeps the
cars at several ticks, then draws fresh controls for them (button presses included, so jumps,
double jumps and flips start), so the kernel stages meet every branch they take in play.

The cars go in and out of the test kernels as the fused kernel holds them (`car_memory`,
`cars_from_memory`: `kernels/car.load_car` / `store_car`). Other batches of values (the wheels) go in
as one float32 buffer, field after field, each field a [n, width] block (`pack`; `field_ptrs` gives
the per-field pointers). A kernel writes its outputs as one [n, width] row per lane
(`store_outputs`), in the order the test lists them (`split`).
"""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from nitro.envs.soccar import rigid_body as rb
from nitro.envs.soccar import vehicle
from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.car import CarControls
from nitro.envs.soccar.kernels.arena import ball_grid
from nitro.envs.soccar.kernels.arena_mesh import flat_tris, grid_args
from nitro.envs.soccar.kernels.car import pack_cars, unpack_cars_
from nitro.envs.soccar.kernels.car_contacts import hitbox_table
from nitro.envs.soccar.rigid_body import angle_to_rot_mat
from nitro.envs.soccar.state import BallState, CarState, World
from tests.envs.soccar.kernels.twins import DEVICE, REL_TOL, assert_close, assert_same
from tests.parity.car_harness import STATE_FIELDS, make_rollouts

triton = pytest.importorskip("triton")
tl = triton.language

SNAPSHOT_TICKS = (0, 2, 7, 15, 26, 38, 47)
"""Ticks at which `sample_cars` keeps the cars (0: as set, before any step)."""
CAR_BLOCK = 256
"""Lanes per program of these tests: the whole sample in one or two programs (the interpreter's cost
is per operation, not per lane)."""
ATOL = {
    "pos": 2e-3,  # UU: positions up to ~5,000 UU (an ulp is 4.9e-4), integration adds three terms
    "vel": 2e-3,  # UU/s: impulses summed in another order by an ulp of a ~2,000 UU/s velocity
    "rot_mat": 2e-6,  # a rotation's entries: the quaternion round trip, a few ulps of 1
    # mass x UU/s, up to ~1e5 (an ulp 0.008); on a GPU also the depth it is proportional to (a difference
    # of ~20-UU lengths, an ulp 1.9e-6 UU) moves by FMA ulps, times mass / (4 dt) = 5,400: 16 ulps, 0.16
    "extra_pushback": 0.05 if DEVICE == "cpu" else 0.16,
}
"""Absolute tolerances beside `REL_TOL` (relative, ~170 ulps) for the car's float outputs; 1e-5
otherwise (timers, unit vectors, frictions: values of order 1)."""


def assert_cars_close(kernel: CarState, expected: CarState) -> None:
    """Every CarState field: flags and counters identical (`assert_same`), floats within `ATOL`."""
    for name, (_, dtype) in CarState.FIELDS.items():
        k, r = getattr(kernel, name), getattr(expected, name)
        if dtype == torch.float32:
            try:
                assert_close(k, r, atol=ATOL.get(name, 1e-5), rtol=REL_TOL)
            except AssertionError as error:
                raise AssertionError(f"{name}: {error}") from None
        else:
            assert_same(k.reshape(len(k), -1), r.reshape(len(r), -1))


def rows_of(cars: CarState, rows: torch.Tensor) -> CarState:
    """The cars of the selected rows (a mask or indices over the first axis)."""
    return CarState(**{name: getattr(cars, name)[rows.to(getattr(cars, name).device)] for name in CarState.FIELDS})


@dataclasses.dataclass
class Sample:
    """Cars [n, 1, ...] of one preset with one tick's controls, and the arena they were stepped in."""

    cars: CarState
    controls: torch.Tensor
    """[n, 1, 8]."""
    tick_count: torch.Tensor
    """[n] ticks the arena had run (0 for the starting states: the solver's default time step)."""
    arena: Arena


@functools.cache
def sample_cars(preset: str = "octane", seed: int = 7) -> Sample:
    """Cars of every scenario family at `SNAPSHOT_TICKS`, with controls drawn for the next tick: half
    the family's own, half random (sticks at 0, +-1 or between, buttons pressed at random, the
    previous jump button flipped in some, so presses start jumps and flips); a few demolished."""
    rollouts = make_rollouts(2, max(SNAPSHOT_TICKS) + 1, seed=seed)
    n = len(rollouts)
    arena = Arena(n, blue=1, orange=0, car=preset)
    arena.set_car(0, **{name: torch.from_numpy(getattr(rollouts, name)) for name in STATE_FIELDS if name != "controls"})
    family_controls = torch.from_numpy(rollouts.controls)
    snapshots, controls, ticks = [], [], []
    for k in range(max(SNAPSHOT_TICKS) + 1):
        if k in SNAPSHOT_TICKS:
            snapshots.append(arena.cars)
            controls.append(family_controls[:, k])
            ticks.append(arena.state.tick_count.clone())
        arena.step(family_controls[:, k, None].contiguous())
    cars = CarState(**{name: torch.cat([getattr(s, name) for s in snapshots]) for name in CarState.FIELDS})
    count = len(snapshots) * n
    g = torch.Generator().manual_seed(seed)
    sticks = torch.rand(count, 5, generator=g) * 2 - 1
    pick = torch.randint(0, 4, (count, 5), generator=g)
    sticks = torch.where(pick == 0, 0.0, torch.where(pick == 1, sticks.sign(), sticks))
    buttons = (torch.rand(count, 3, generator=g) < 0.4).float()
    drawn = torch.cat((sticks, buttons), 1)
    own = torch.rand(count, 1, generator=g) < 0.5
    chosen = torch.where(own, torch.cat(controls), drawn)
    last = cars.last_controls.clone()
    flip_jump = torch.rand(count, generator=g) < 0.3
    last[:, 0, 5] = torch.where(flip_jump, 1 - last[:, 0, 5], last[:, 0, 5])
    demoed = torch.rand(count, 1, generator=g) < 0.05
    cars = dataclasses.replace(
        cars, last_controls=last, is_demoed=demoed, demo_respawn_timer=torch.where(demoed, 1.5, 0.0)
    )
    return Sample(cars=cars, controls=chosen[:, None], tick_count=torch.cat(ticks), arena=arena)


def controls_of(sample: Sample) -> CarControls:
    return CarControls.from_tensor(sample.controls)


def inv_inertia(sample: Sample) -> torch.Tensor:
    return rb.inv_inertia_world(sample.cars.rot_mat, sample.arena.world.cars.inv_inertia_local)


# --- Flat buffers --------------------------------------------------------------------------------


def pack(fields: dict[str, torch.Tensor], n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Fields [n, ...] as one float32 buffer on the test device and the offsets (int32, in units of n)
    of each field's [n, width] block."""
    blocks = [value.reshape(n, -1).float() for value in fields.values()]
    offsets = [0]
    for block in blocks[:-1]:
        offsets.append(offsets[-1] + block.shape[1])
    flat = torch.cat([b.flatten() for b in blocks]).to(DEVICE)
    return flat, torch.tensor(offsets, dtype=torch.int32, device=DEVICE)


def car_memory(cars: CarState) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cars [n, 1, ...] as the fused kernel holds them in memory, on the test device: their packed rows
    (`kernels/car.pack_cars`), ``car_contact_id`` and ``tick_count_since_update`` [n]."""
    return tuple(x.contiguous().to(DEVICE) for x in (pack_cars(cars), cars.car_contact_id, cars.tick_count_since_update))


def cars_from_memory(rows: torch.Tensor, car_contact_id: torch.Tensor, tick_count_since_update: torch.Tensor) -> CarState:
    """`car_memory`'s inverse: CarState [n, 1, ...] on the CPU."""
    cars = CarState.fresh(len(car_contact_id), 1, torch.device("cpu"))
    unpack_cars_(rows.cpu(), cars)
    cars.car_contact_id.copy_(car_contact_id.cpu().reshape(-1, 1))
    cars.tick_count_since_update.copy_(tick_count_since_update.cpu().reshape(-1, 1))
    return cars


def split(out: torch.Tensor, widths: dict[str, int]) -> dict[str, torch.Tensor]:
    """A kernel's [n, sum(widths)] output rows, cut into the named columns (CPU)."""
    out, at, parts = out.cpu(), 0, {}
    for name, width in widths.items():
        parts[name] = out[:, at : at + width]
        at += width
    assert at == out.shape[1], (at, out.shape)
    return parts


def columns(value: torch.Tensor, n: int) -> torch.Tensor:
    """A reference output as the kernel writes it: [n, width] float32 (bools as 0 / 1)."""
    return value.reshape(n, -1).float()


def arena_args(sample: Sample, grid=ball_grid) -> dict:
    """The arena pointers and grid of the fused tick (``grid``: `kernels/arena.ball_grid`, or
    `kernels/arena.ray_grid`, which the wheel rays read), as keywords."""
    return arena_args_of(sample.arena.world, grid)


def arena_args_of(world: World, grid=ball_grid) -> dict:
    """`arena_args` of a world."""
    mesh = grid(world).to(DEVICE)
    ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z = grid_args(mesh)
    return {
        "tri_ptr": flat_tris(mesh),
        "tri_bounds_ptr": mesh.tri_bounds,
        "tri_mesh_ptr": mesh.tri_mesh,
        "edge_angle_ptr": mesh.edge_angle,
        "edge_flags_ptr": mesh.edge_flags,
        "plane_normals_ptr": mesh.plane_normals,
        "plane_offsets_ptr": mesh.plane_offsets,
        "cell_start_ptr": mesh.cell_start,
        "cell_tris_ptr": mesh.cell_tris,
        "ox0": ox0,
        "oy0": oy0,
        "oz0": oz0,
        "cell_size": cell_size,
        "dim_x": int(dim_x),
        "dim_y": int(dim_y),
        "dim_z": int(dim_z),
    }


def bodies_args(cars: CarState, ball: BallState, world: World) -> dict:
    """What `kernels/vehicle.bodies_of` reads of cars [N, C, ...] and their envs' ball, as keywords of
    the test kernels: the cars' packed rows, the ball's vectors, the hitbox table and the ball's
    parameters (the kernels take the car table on their own)."""
    p, config = world.params, world.cars
    return {
        "bodies_rows_ptr": pack_cars(cars).to(DEVICE),
        "ball_pos_ptr": ball.pos.contiguous().to(DEVICE),
        "ball_vel_ptr": ball.vel.contiguous().to(DEVICE),
        "ball_ang_vel_ptr": ball.ang_vel.contiguous().to(DEVICE),
        "hitbox_table_ptr": hitbox_table(config).to(DEVICE),
        "ball_radius": p.ball_radius,
        "ball_inv_mass": p.ball_inv_mass,
        "ball_inv_inertia": p.ball_inv_inertia,
    }


def sample_bodies(sample: Sample, cars: CarState | None = None) -> tuple[BallState, vehicle.Bodies]:
    """A ball at rest at the centre for each of the sample's envs (`BallState.rest`: the cars driving
    near it put their wheels on it) and `vehicle.Bodies` of it and ``cars`` (default: the sample's)."""
    ball = BallState.rest(len(sample.cars.pos), torch.device("cpu"))
    world = sample.arena.world
    return ball, vehicle.Bodies.of(sample.cars if cars is None else cars, ball, world.cars, world.params)


def wheels_on_bodies(envs: int, seed: int) -> Arena:
    """A 1v1 arena whose cars' wheels meet the other car and the ball (the starts of
    tests/parity/test_wheel_ground_bodies_parity.py, spread out): by env, one car resting on the other's
    roof, shifted and turned (the lower one driving), dropping onto a rolling ball, on a car demolished
    this tick (its box stops the rays without contact), or tilted on the roof so that some wheels meet
    the box's sides and edges and others the floor; the slots' roles swap from env to env. The hidden
    wheel state (frictions, brake, engine force) is set as after a tick on the ground."""
    g = torch.Generator().manual_seed(seed)
    u = lambda *shape: torch.rand(*shape, generator=g)
    kind = torch.arange(envs) % 4
    yaw = u(envs) * 6.283
    lower = torch.stack((u(envs) * 6000 - 3000, u(envs) * 8000 - 4000, torch.full((envs,), 17.0)), -1)
    forward = torch.stack((torch.cos(yaw), torch.sin(yaw), torch.zeros(envs)), -1)
    right = torch.stack((-torch.sin(yaw), torch.cos(yaw), torch.zeros(envs)), -1)
    shift = forward * (u(envs, 1) * 80 - 40) + right * (u(envs, 1) * 50 - 25)
    upper = lower + shift + torch.stack((torch.zeros(envs), torch.zeros(envs), 59 + u(envs) * 8), -1)
    ball_pos = torch.stack((lower[:, 0] + 600, lower[:, 1], torch.full((envs,), 93.15)), -1)  # clear of both
    on_ball = kind == 1  # the upper car above the ball instead
    upper = torch.where(on_ball[:, None], ball_pos + shift * 0.5 + torch.tensor([0.0, 0.0, 100.0]) + u(envs, 1) * 15, upper)
    tilt = torch.where(kind == 3, 0.5, 0.08)
    upper_rot = angle_to_rot_mat(yaw + (u(envs) - 0.5) * 0.6, (u(envs) - 0.5) * 2 * tilt, (u(envs) - 0.5) * 2 * tilt)
    lower_rot = angle_to_rot_mat(yaw, torch.zeros(envs), torch.zeros(envs))
    lower_vel = forward * (u(envs, 1) * 500)
    upper_vel = lower_vel + torch.randn(envs, 3, generator=g) * 40 - torch.tensor([0.0, 0.0, 50.0]) * on_ball[:, None]
    swap = u(envs) < 0.5  # which slot is on top
    arena = Arena(envs, blue=1, orange=1, seed=seed)
    for index, top in ((0, swap), (1, ~swap)):
        pick = lambda a, b, top=top: torch.where(top.reshape(-1, *[1] * (a.dim() - 1)), a, b)
        arena.set_car(
            index, pos=pick(upper, lower), rot_mat=pick(upper_rot, lower_rot), vel=pick(upper_vel, lower_vel),
            ang_vel=pick(torch.randn(envs, 3, generator=g) * 0.5, torch.zeros(envs, 3)),
            is_on_ground=torch.ones(envs, dtype=torch.bool),
            is_demoed=(kind == 2) & ~top, demo_respawn_timer=torch.full((envs,), 2.0),
        )  # fmt: skip
    arena.set_ball(pos=ball_pos, vel=torch.randn(envs, 3, generator=g) * 100 * torch.tensor([1.0, 1.0, 0.0]))
    cars = arena.state.cars
    cars.lat_friction.copy_(0.5 + u(envs, 2, 4) * 0.5)
    cars.long_friction.copy_(0.5 + u(envs, 2, 4) * 0.5)
    cars.brake.copy_(torch.where(u(envs, 2) < 0.5, 0.0, 100.0 * u(envs, 2)))
    cars.engine_force.copy_(torch.where(u(envs, 2) < 0.5, 0.0, 2e4 * (u(envs, 2) - 0.5)))
    return arena


def random_forces(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Forces and torques [n, 1, 3] already accumulated before a stage (mass x UU/s^2, x UU)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 1, 3, generator=g) * 5e4, torch.randn(n, 1, 3, generator=g) * 5e6


# --- Kernel side ---------------------------------------------------------------------------------


@triton.jit
def field_ptrs(base, offsets_ptr, n, COUNT: tl.constexpr):
    """The per-field pointers of a packed buffer (`pack`): field k starts at base + offsets[k] * n."""
    ptrs = ()
    for k in tl.static_range(COUNT):
        ptrs = ptrs + (base + tl.load(offsets_ptr + k) * n,)
    return ptrs


WHEEL_FIELDS = (
    "hard_point", "axle", "is_in_contact", "contact_point", "contact_normal", "suspension_length",
    "suspension_relative_velocity", "clipped_inv_contact_dot_suspension", "impulse", "on_world",
)  # fmt: skip
"""The `vehicle.Wheels` fields of the kernels' wheels tuple, in its order, but the last (``ground``)."""
GROUND_FIELDS = ("pos", "rot_mat", "vel", "ang_vel", "inv_mass", "inv_inertia_local")
"""`vehicle.GroundBody`'s fields, in the order of the kernels' ground tuples."""
WHEEL_BUFFERS = tl.constexpr(len(WHEEL_FIELDS) + len(GROUND_FIELDS))
"""The fields `pack_wheels` packs (and `load_wheels` reads)."""


def pack_wheels(wheels, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`vehicle.Wheels` [n, 1, 4, ...] as `pack` packs them: `WHEEL_FIELDS`, then the ground's fields."""
    fields = {name: getattr(wheels, name) for name in WHEEL_FIELDS}
    fields |= {f"ground.{name}": getattr(wheels.ground, name) for name in GROUND_FIELDS}
    return pack(fields, n)


@triton.jit
def load_vector(ptr, base, live):
    return (
        tl.load(ptr + base, mask=live, other=0.0),
        tl.load(ptr + base + 1, mask=live, other=0.0),
        tl.load(ptr + base + 2, mask=live, other=0.0),
    )


@triton.jit
def load_wheels(ptrs, row, live):
    """`pack_wheels`' buffer as the kernels' wheels tuple: (hard_point, axle, is_in_contact,
    contact_point, contact_normal, suspension_length, suspension_relative_velocity,
    clipped_inv_contact_dot_suspension, impulse, on_world), per-wheel 4-tuples, and ground, a 4-tuple
    of (pos, rot_mat, vel, ang_vel, inv_mass, inv_inertia_local)."""
    wheels = ()
    for f in tl.static_range(10):
        per_wheel = ()
        for i in tl.static_range(4):
            if f == 2 or f == 9:
                per_wheel = per_wheel + (tl.load(ptrs[f] + row * 4 + i, mask=live, other=0.0) != 0,)
            elif f == 5 or f == 6 or f == 7:
                per_wheel = per_wheel + (tl.load(ptrs[f] + row * 4 + i, mask=live, other=0.0),)
            else:
                per_wheel = per_wheel + (load_vector(ptrs[f], row * 12 + i * 3, live),)
        wheels = wheels + (per_wheel,)
    ground = ()
    for i in tl.static_range(4):
        rot_mat = (
            load_vector(ptrs[11], row * 36 + i * 9, live),
            load_vector(ptrs[11], row * 36 + i * 9 + 3, live),
            load_vector(ptrs[11], row * 36 + i * 9 + 6, live),
        )
        ground = ground + (
            (
                load_vector(ptrs[10], row * 12 + i * 3, live),
                rot_mat,
                load_vector(ptrs[12], row * 12 + i * 3, live),
                load_vector(ptrs[13], row * 12 + i * 3, live),
                tl.load(ptrs[14] + row * 4 + i, mask=live, other=0.0),
                load_vector(ptrs[15], row * 12 + i * 3, live),
            ),
        )
    return wheels + (ground,)


@triton.jit
def store_outputs(ptr, row, values, WIDTH: tl.constexpr, live):
    """Store a flat tuple of ``WIDTH`` per-lane values as lane ``row``'s output row (bools as 0 / 1)."""
    for k in tl.static_range(WIDTH):
        tl.store(ptr + row * WIDTH + k, values[k].to(tl.float32), mask=live)
