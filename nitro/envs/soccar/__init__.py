"""Rocket League soccar: a batched port of RocketSim's physics, checked against the real RocketSim.

This stage simulates the ball in the real arena (the 16 collision meshes plus RocketSim's planes);
``Arena(num_envs, blue=0, orange=0)`` makes ball-only arenas. See docs/SOCCAR.md (the package's
layout: one module per RocketSim mechanic, its Triton twin in ``kernels/``) and docs/FIDELITY.md.
The arena queries live in the modules of their names (``soccar.ray_cast.ray_cast``,
``soccar.box_contacts.box_contacts``, ``soccar.sphere_contacts.sphere_contacts``): re-exported here,
a function would hide its module.
"""

from nitro.envs.soccar.arena import Arena, fold_tick, step_ticks, tick
from nitro.envs.soccar.arena_mesh import ArenaMesh, MeshesNotFoundError, find_soccar_meshes, load_arena_mesh
from nitro.envs.soccar.contacts import BoxContacts, ContactManifolds, RayHits, SphereContacts
from nitro.envs.soccar.manifolds import sphere_manifolds
from nitro.envs.soccar.mutators import MutatorConfig, TickParams
from nitro.envs.soccar.state import ArenaEvents, BallState, BoostPadState, CarState, GameState, World

__all__ = [
    "Arena",
    "ArenaEvents",
    "ArenaMesh",
    "BallState",
    "BoostPadState",
    "BoxContacts",
    "CarState",
    "ContactManifolds",
    "GameState",
    "MeshesNotFoundError",
    "MutatorConfig",
    "RayHits",
    "SphereContacts",
    "TickParams",
    "World",
    "find_soccar_meshes",
    "fold_tick",
    "load_arena_mesh",
    "sphere_manifolds",
    "step_ticks",
    "tick",
]
