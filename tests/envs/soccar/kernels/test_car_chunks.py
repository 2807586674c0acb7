"""`kernels/car.CAR_STEP_WRITES` and `PRE_TICK_WRITES`: the fields the car step's kernel and the pre-tick's
first pass (where a car's row is updated in place) write back, the chunks of a car row that hold them
(`chunks_of`), against what the reference's stages change (`car.physics_step`, `post_tick_update` and
`finish_physics_tick`; `car.pre_tick_update`). A field the reference changes outside its list would be
computed by the kernel and never stored. Pure PyTorch: no Triton needed."""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import car as reference
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car import CarControls
from nitro.envs.soccar.contacts import BodySolve
from nitro.envs.soccar.kernels.car import CAR_STEP_WRITES, CAR_WIDTH, PACKED, PRE_TICK_WRITES, chunks_of
from nitro.envs.soccar.kernels.vec import CHUNK
from nitro.envs.soccar.mutators import MutatorConfig, TickParams
from nitro.envs.soccar.state import CarState

N = 4096


def random_cars(g: torch.Generator) -> CarState:
    """Cars whose every field holds random values of its type (speeds from standing to above the clamps,
    timers around their thresholds, a quarter demolished, bools either way)."""
    fields = {}
    for name, (shape, dtype) in CarState.FIELDS.items():
        size = (N, 1, *shape)
        if dtype == torch.bool:
            fields[name] = torch.rand(size, generator=g) < (0.25 if name == "is_demoed" else 0.5)
        elif dtype == torch.float32:
            fields[name] = torch.randn(size, generator=g) * (1500.0 if name in ("vel", "pos") else 1.0)
        else:
            fields[name] = torch.randint(-1, 100, size, generator=g, dtype=dtype)
    rot, _ = torch.linalg.qr(torch.randn(N, 1, 3, 3, generator=g))
    fields["rot_mat"] = rot
    fields["car_contact_cooldown_timer"] = torch.rand(N, 1, generator=g) * 0.2 - 0.05
    return CarState(**fields)


def test_the_car_step_changes_only_the_fields_it_writes():
    g = torch.Generator().manual_seed(3)
    cars = random_cars(g)
    params = TickParams.from_mutators(MutatorConfig(), 1 / 120)
    v = lambda scale: torch.randn(N, 1, 3, generator=g) * scale
    solved = BodySolve(v(50), v(1), v(5), v(0.1), torch.rand(N, 1, generator=g) < 0.5, v(1))
    controls = CarControls.from_tensor(torch.rand(N, 1, 8, generator=g) * 2 - 1)
    stepped = reference.physics_step(cars, v(30), v(0.5), solved, params)
    stepped = reference.finish_physics_tick(reference.post_tick_update(stepped, controls, params))
    changed = {
        f.name
        for f in dataclasses.fields(CarState)
        if not torch.equal(getattr(cars, f.name), getattr(stepped, f.name))
    }
    assert changed - {"tick_count_since_update"} == set(CAR_STEP_WRITES)  # (the counter has its own array)


def test_chunks_of_marks_the_chunks_a_field_lies_in():
    """Hand-worked from the row's layout: pos in columns 0-2 (chunk 0), rot_mat in 3-11 (chunks 0-2),
    ang_vel in 15-17 (chunks 3 and 4); every packed field together fills all 22 chunks."""
    assert chunks_of(("pos",)) == 0b1
    assert chunks_of(("rot_mat",)) == 0b111
    assert chunks_of(("ang_vel",)) == 0b11000
    assert chunks_of(PACKED) == (1 << (CAR_WIDTH.value // CHUNK.value)) - 1 == (1 << 22) - 1


def test_the_pre_tick_changes_only_the_fields_it_writes():
    """`PRE_TICK_WRITES` against the reference's Car::_PreTickUpdate of cars met in play: on the floor and
    in the air after a few ticks of random controls (jumps, flips, boost, handbrake), then fresh random
    controls; the fields it changes must all be listed (`pre_tick_kernel`'s first pass writes only their
    chunks where a car's row is updated in place)."""
    from nitro.envs.soccar.arena import Arena

    g = torch.Generator().manual_seed(5)
    n = 256
    arena = Arena(n, blue=1, orange=0)
    pos = torch.rand(n, 3, generator=g) * torch.tensor([6000.0, 8000.0, 600.0]) - torch.tensor(
        [3000.0, 4000.0, 0.0]
    )
    pos[: n // 2, 2] = C.CAR_SPAWN_REST_Z  # half on the floor, half in the air
    arena.set_car(0, pos=pos, boost=torch.rand(n, generator=g) * 100)
    for _ in range(30):
        arena.step((torch.rand(n, 1, 8, generator=g) * 2 - 1).clamp(-1, 1))
    cars, world = arena.cars, arena.world
    controls = CarControls.from_tensor(torch.rand(n, 1, 8, generator=g) * 2 - 1)
    after, _ = reference.pre_tick_update(
        cars, controls, world.cars, world.mesh, None, arena.state.tick_count, world.params
    )
    changed = {
        f.name
        for f in dataclasses.fields(CarState)
        if not torch.equal(getattr(cars, f.name), getattr(after, f.name))
    }
    assert changed <= set(PRE_TICK_WRITES), changed - set(PRE_TICK_WRITES)
    reached = {"vel", "ang_vel", "boost", "air_time", "lat_friction", "engine_force"}
    assert reached <= changed, reached - changed  # (the play reached them)
