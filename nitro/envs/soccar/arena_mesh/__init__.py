"""The soccar arena's geometry, loaded once: `.cmf` files, Bullet's internal-edge info and BVH
visiting order, and the grid. The per-tick queries over it are `sphere_contacts`, `manifolds`,
`ray_cast` and `box_contacts` (and their kernels)."""

from nitro.envs.soccar.arena_mesh.cmf import MeshesNotFoundError, find_soccar_meshes
from nitro.envs.soccar.arena_mesh.mesh import ArenaMesh, cell_candidates, load_arena_mesh

__all__ = ["ArenaMesh", "MeshesNotFoundError", "cell_candidates", "find_soccar_meshes", "load_arena_mesh"]
