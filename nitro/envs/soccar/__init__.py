"""Rocket League soccar: a batched port of RocketSim's physics, checked against the real RocketSim.

This stage simulates the ball in the real arena (the 16 collision meshes plus RocketSim's planes);
``Arena(num_envs, blue=0, orange=0)`` makes ball-only arenas. See docs/SOCCAR.md and docs/FIDELITY.md.
"""

from nitro.envs.soccar.arena import Arena, ArenaEvents, World, fold_tick, step_ticks, tick
from nitro.envs.soccar.collide import ContactManifolds, sphere_manifolds
from nitro.envs.soccar.mesh import (
    ArenaMesh,
    BoxContacts,
    MeshesNotFoundError,
    RayHits,
    SphereContacts,
    box_contacts,
    find_soccar_meshes,
    load_arena_mesh,
    ray_cast,
    sphere_contacts,
)
from nitro.envs.soccar.mutators import MutatorConfig
from nitro.envs.soccar.state import BallState, BoostPadState, CarState, GameState

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
    "World",
    "box_contacts",
    "find_soccar_meshes",
    "fold_tick",
    "load_arena_mesh",
    "ray_cast",
    "sphere_contacts",
    "sphere_manifolds",
    "step_ticks",
    "tick",
]
