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
from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.car import CarControls
from nitro.envs.soccar.kernels.arena import ball_grid
from nitro.envs.soccar.kernels.arena_mesh import flat_tris, grid_args
from nitro.envs.soccar.kernels.car import pack_cars, unpack_cars_
from nitro.envs.soccar.state import CarState
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
    cars = CarState.fresh(len(rows), 1, torch.device("cpu"))
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


def arena_args(sample: Sample) -> dict:
    """The arena pointers and grid of the fused tick (`kernels/arena.ball_grid`), as keywords."""
    mesh = ball_grid(sample.arena.world).to(DEVICE)
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
    "suspension_relative_velocity", "clipped_inv_contact_dot_suspension", "impulse",
)  # fmt: skip
"""The `vehicle.Wheels` fields of the kernels' wheels tuple, in its order (the fused path's rays see
the arena alone: it has no ``on_world`` or ``ground``)."""


@triton.jit
def load_wheels(ptrs, row, live):
    """`vehicle.Wheels` packed in its field order as the kernels' wheels tuple: (hard_point, axle,
    is_in_contact, contact_point, contact_normal, suspension_length, suspension_relative_velocity,
    clipped_inv_contact_dot_suspension, impulse), per-wheel 4-tuples."""
    wheels = ()
    for f in tl.static_range(9):
        per_wheel = ()
        for i in tl.static_range(4):
            if f == 2:
                per_wheel = per_wheel + (tl.load(ptrs[f] + row * 4 + i, mask=live, other=0.0) != 0,)
            elif f == 5 or f == 6 or f == 7:
                per_wheel = per_wheel + (tl.load(ptrs[f] + row * 4 + i, mask=live, other=0.0),)
            else:
                base = ptrs[f] + row * 12 + i * 3
                per_wheel = per_wheel + (
                    (
                        tl.load(base, mask=live, other=0.0),
                        tl.load(base + 1, mask=live, other=0.0),
                        tl.load(base + 2, mask=live, other=0.0),
                    ),
                )
        wheels = wheels + (per_wheel,)
    return wheels


@triton.jit
def store_outputs(ptr, row, values, WIDTH: tl.constexpr, live):
    """Store a flat tuple of ``WIDTH`` per-lane values as lane ``row``'s output row (bools as 0 / 1)."""
    for k in tl.static_range(WIDTH):
        tl.store(ptr + row * WIDTH + k, values[k].to(tl.float32), mask=live)
