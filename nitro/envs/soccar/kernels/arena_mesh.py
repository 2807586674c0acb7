"""The arena mesh as the kernels read it: the grid's lookup (`cell_candidates`, the twin of
`arena_mesh.cell_candidates`) and the host-side arguments every query kernel takes."""

from __future__ import annotations

import torch

from nitro.envs.soccar.arena_mesh import ArenaMesh
from nitro.envs.soccar.kernels import jit, tl


@jit
def grid(ox0, oy0, oz0, cell_size, dim_x, dim_y, dim_z):
    """The grid's origin, cell size and dimensions, cast: float scalars arrive as fp32 from eager
    launches but as fp64 from torch.compile (Inductor types Python floats as fp64)."""
    origin = (tl.cast(ox0, tl.float32), tl.cast(oy0, tl.float32), tl.cast(oz0, tl.float32))
    dims = (tl.cast(dim_x, tl.int32), tl.cast(dim_y, tl.int32), tl.cast(dim_z, tl.int32))
    return origin, tl.cast(cell_size, tl.float32), dims


@jit
def cell_candidates(c, live, cell_start_ptr, origin, cell_size, dims):
    """The triangles listed in the grid cell holding point c (in Bullet's visiting order): where its
    list starts in ``cell_tris``, and its length."""
    ix = tl.minimum(tl.maximum(tl.floor((c[0] - origin[0]) / cell_size).to(tl.int32), 0), dims[0] - 1)
    iy = tl.minimum(tl.maximum(tl.floor((c[1] - origin[1]) / cell_size).to(tl.int32), 0), dims[1] - 1)
    iz = tl.minimum(tl.maximum(tl.floor((c[2] - origin[2]) / cell_size).to(tl.int32), 0), dims[2] - 1)
    cell = (ix * dims[1] + iy) * dims[2] + iz
    first = tl.load(cell_start_ptr + cell, mask=live, other=0)
    return first, tl.load(cell_start_ptr + cell + 1, mask=live, other=0) - first


def grid_args(mesh: ArenaMesh) -> list[float]:
    """The grid as the ops take it: origin x, y, z, cell size, dims x, y, z (all as floats)."""
    return [float(x) for x in (*mesh.grid_origin, mesh.cell_size, *mesh.grid_dims)]


def flat_tris(mesh: ArenaMesh) -> torch.Tensor:
    """The triangles' vertices as [T, 9] (a view: tri_verts is contiguous)."""
    return mesh.tri_verts.reshape(-1, 9)


ARENA_NAMES = ("tri", "tri_bounds", "tri_mesh", "edge_angle", "edge_flags", "plane_normals", "plane_offsets",
               "cell_start", "cell_tris")  # fmt: skip
"""The arena's tensors as the contact kernels take them (`arena_tensors`), their pointers named
``{name}_ptr``."""


def arena_tensors(mesh: ArenaMesh) -> list[torch.Tensor]:
    """The mesh's tensors in `ARENA_NAMES` order."""
    return [flat_tris(mesh)] + [getattr(mesh, name) for name in ARENA_NAMES[1:]]
