"""`kernels/arena.car_order`, the order the fused step's car kernels take their lanes in: plain PyTorch,
checked without Triton. (That the order never changes a result: the twin tests, which run the sorted
order on the interpreter, and bench/soccar_game_gpu.py's checks on a GPU.)"""

from __future__ import annotations

import torch

from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.kernels import arena as arena_kernels
from nitro.envs.soccar.kernels.arena import ball_grid, car_order

ENVS = 64


def arena_with_cars_at_the_walls() -> Arena:
    """A 1v1 arena whose blue cars stand at the side wall in every third env and in the open field
    elsewhere, every fourth in the air; the orange cars at kickoff."""
    arena = Arena(ENVS, blue=1, orange=1, device="cpu")
    arena.reset_kickoff()
    env = torch.arange(ENVS)
    at_wall = env % 3 == 0
    x = torch.where(at_wall, 4000.0, -500.0 + 10.0 * env)
    z = torch.where(env % 4 == 1, 600.0, 17.0)
    arena.set_car(0, pos=torch.stack((x, 100.0 * (env % 7), z), 1), is_on_ground=z < 100)
    return arena


def test_car_order_sorts_each_slot_by_the_arena_its_cars_meet():
    arena = arena_with_cars_at_the_walls()
    mesh = ball_grid(arena.world)
    order = car_order(arena.state.cars, mesh)
    assert order.shape == (2, ENVS) and order.dtype == torch.int32
    for slot in range(2):
        assert torch.equal(order[slot].sort().values, torch.arange(ENVS, dtype=torch.int32))  # a permutation
    cars = arena.state.cars
    cell = mesh.cell_index(cars.pos[:, 0])
    triangles = mesh.cell_start[cell + 1] - mesh.cell_start[cell]
    assert int((triangles > 0).sum()) >= ENVS // 4  # cars by the wall's triangles, in the air and not
    key = (triangles * 2 + (~cars.is_on_ground[:, 0]).long())[order[0].long()]
    assert bool((key[1:] >= key[:-1]).all())  # the open field first, the walls last, air after ground


def test_car_order_is_env_order_below_the_sorting_threshold(monkeypatch):
    monkeypatch.setitem(arena_kernels.SORT_FROM_LANES, "cpu", 2 * ENVS + 1)
    arena = arena_with_cars_at_the_walls()
    order = car_order(arena.state.cars, ball_grid(arena.world))
    assert torch.equal(order, torch.arange(ENVS, dtype=torch.int32).expand(2, ENVS))
