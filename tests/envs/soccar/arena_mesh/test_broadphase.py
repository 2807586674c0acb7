"""btRSBroadphase's cells as `arena_mesh.broadphase` builds them, against RocketSim's grid."""

from __future__ import annotations

import pytest
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena_mesh.broadphase import arena_bullet, broadphase_cell


def test_broadphase_registers_meshes_near_their_triangles(mesh):
    arena = arena_bullet(mesh, "heavy")
    light = arena_bullet(mesh, "light")
    # RocketSim's grid: (11200, 12000, 2200) UU over 370-UU cells (740 in LIGHT), rounded up
    assert arena.cell_dims == (31, 33, 6) and light.cell_dims == (16, 17, 3)
    # At the centre of the field, on the floor, no mesh file has a triangle within a cell: no pairs.
    centre = torch.tensor([[0.0, 0.0, 0.2]])
    assert arena.cell_meshes[broadphase_cell(arena, centre)].item() == 0
    # Against the back wall beside the goal, the wall's mesh file is registered.
    wall = torch.tensor([[2000.0, 5050.0, 500.0]]) * C.UU_TO_BT_F32
    assert arena.cell_meshes[broadphase_cell(arena, wall)].item() != 0
    with pytest.raises(ValueError, match="mem_weight_mode must be one of"):
        arena_bullet(mesh, "medium")
