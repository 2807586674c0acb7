"""State mutators: how an episode starts. ``mutator(arena, key, active) -> active``.

A mutator sets the start state of every env of ``arena`` (whose state is the episode's fresh state:
RocketSim's defaults, pads active) through the Arena's own ``set_ball`` / ``set_car``, drawing its
randomness from ``key`` (one stream per env, [N]), and returns which cars play ([N, C] bool; only the
team-size mutators change it). Names follow RLGym v2, rlgym-tools and GigaLearnCPP's state setters.

Cars that sit an episode out (a smaller team size than the arena's) are parked: demolished with a
respawn timer that never runs out (RocketSim takes demolished cars out of the world), at their
team's respawn spots; observations read them as absent and the env ignores their actions.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from nitro.core import rng, tree
from nitro.envs.soccar import Arena
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.rigid_body import angle_to_rot_mat
from nitro.envs.soccar.rl import common_values as V
from nitro.monitor import replay

Mutator = Callable[[Arena, torch.Tensor, torch.Tensor], torch.Tensor]

PARKED_RESPAWN_TIMER = 1e9
"""Seconds: a parked car's demolition never ends (float32 cannot count it down by a tick)."""


def team_rank(active: torch.Tensor, blue: int) -> torch.Tensor:
    """[N, C] int64: each active car's index among its team's active cars (car order), -1 if inactive."""
    rank = torch.cat((active[:, :blue].long().cumsum(1), active[:, blue:].long().cumsum(1)), 1) - 1
    return torch.where(active, rank, -1)


def set_cars(arena: Arena, where: torch.Tensor, **fields: torch.Tensor) -> None:
    """Set ``fields`` ([N, C, ...] each) of the cars marked in ``where`` [N, C]; the others keep theirs."""
    for i in range(arena.num_cars):
        values = {}
        for name, value in fields.items():
            old = getattr(arena.cars, name)[:, i]
            mask = where[:, i].view(-1, *([1] * (old.dim() - 1)))
            values[name] = torch.where(mask, value[:, i].to(old.dtype), old)
        arena.set_car(i, **values)


def yaw_rot_mat(yaw: torch.Tensor, orange: torch.Tensor | None = None) -> torch.Tensor:
    """RocketSim's Angle(yaw, 0, 0).ToRotMat() [..., 3, 3]; where ``orange``, the yaw turned half a
    turn first as RocketSim does it (``angle.yaw += M_PI``: a double sum rounded to float)."""
    if orange is not None:
        yaw = torch.where(orange, (yaw.double() + math.pi).float(), yaw)
    return angle_to_rot_mat(yaw, torch.zeros_like(yaw), torch.zeros_like(yaw))


# --- team sizes ----------------------------------------------------------------------------------------


def park(arena: Arena, active: torch.Tensor) -> None:
    """Bench the inactive cars: demolished for good, at rest on their team's first respawn spot."""
    n, c, device = arena.num_envs, arena.num_cars, arena.device
    x, y, yaw = C.CAR_RESPAWN_LOCATIONS_SOCCAR[0]
    orange = torch.arange(c, device=device) >= arena.blue
    sign = 1 - 2 * orange.float()  # [C]: +1 blue, -1 orange
    pos = torch.stack((sign * x, sign * y, torch.full_like(sign, C.CAR_RESPAWN_Z)), -1).expand(n, c, 3)
    zeros = torch.zeros(n, c, 3, device=device)
    set_cars(
        arena, ~active, pos=pos, rot_mat=yaw_rot_mat(torch.full((c,), yaw, device=device), orange).expand(n, c, 3, 3),
        vel=zeros, ang_vel=zeros, boost=torch.zeros(n, c, device=device),
        is_demoed=torch.ones(n, c, dtype=torch.bool, device=device),
        demo_respawn_timer=torch.full((n, c), PARKED_RESPAWN_TIMER, device=device),
    )  # fmt: skip


def team_sizes(arena: Arena, modes: tuple[tuple[int, int], ...], weights: tuple[float, ...], key: torch.Tensor):
    """Draw one (blue, orange) mode per env by weight: the first cars of each team play."""
    for blue, orange in modes:
        if not (0 <= blue <= arena.blue and 0 <= orange <= arena.orange) or blue + orange == 0:
            raise ValueError(
                f"team size {blue}v{orange} does not fit the arena's {arena.blue} blue and {arena.orange} orange "
                f"cars; make the env with blue >= {blue} and orange >= {orange}"
            )
    w = V.device_tensor(tuple(weights), arena.device, torch.float64)
    edges = (w.cumsum(0) / w.sum())[:-1].float()
    mode = (rng.uniform(key, (arena.num_envs,)).unsqueeze(1) >= edges).sum(1)  # [N]
    sizes = V.device_tensor(modes, arena.device, torch.int64)[mode]  # [N, 2]
    c = torch.arange(arena.num_cars, device=arena.device)
    orange = c >= arena.blue
    seat = torch.where(orange, c - arena.blue, c)
    active = seat < torch.where(orange, sizes[:, 1:], sizes[:, :1])
    park(arena, active)
    return active


def check_weights(name: str, weights) -> None:
    if not weights or any(isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0 for w in weights) \
            or not sum(weights) > 0:
        raise ValueError(f"{name} weights must be non-negative numbers with a positive sum, got {tuple(weights)}")


@dataclasses.dataclass(frozen=True)
class FixedTeamSizeMutator:
    """``blue`` and ``orange`` cars play (RLGym's FixedTeamSizeMutator); the arena's other cars are parked."""

    blue: int = 1
    orange: int = 1

    def __call__(self, arena: Arena, key: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        return team_sizes(arena, ((self.blue, self.orange),), (1.0,), key)


@dataclasses.dataclass(frozen=True)
class VariableTeamSizeMutator:
    """A team size per episode, drawn by weight: ``VariableTeamSizeMutator({(1, 1): 1, (2, 2): 1,
    (3, 3): 1})`` (rlgym-tools' VariableTeamSizeMutator). The arena must hold the largest teams."""

    mode_weights: tuple[tuple[tuple[int, int], float], ...]

    def __init__(self, mode_weights):
        pairs = tuple(mode_weights.items()) if isinstance(mode_weights, dict) else tuple(mode_weights)
        check_weights("VariableTeamSizeMutator", [w for _, w in pairs])
        object.__setattr__(self, "mode_weights", tuple((tuple(m), float(w)) for m, w in pairs))

    def __call__(self, arena: Arena, key: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        modes, weights = zip(*self.mode_weights)
        return team_sizes(arena, modes, weights, key)


# --- placements ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class KickoffMutator:
    """A kickoff (RocketSim's ResetToRandomKickoff, RLGym's KickoffMutator): the ball at rest at the
    centre; each team's playing cars on the five kickoff spots in an order shuffled per env (orange on
    the mirror images of blue's), at rest, on the ground (``is_on_ground`` and, as RLGym sets them, all
    four wheels in contact), with ``boost``."""

    boost: float = C.BOOST_SPAWN_AMOUNT
    """RocketSim's spawn boost, 100 / 3; RLGym's KickoffMutator gives 33.3."""

    def __call__(self, arena: Arena, key: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        spots = len(C.CAR_SPAWN_LOCATIONS_SOCCAR)
        if max(arena.blue, arena.orange) > spots:
            raise ValueError(f"KickoffMutator places at most {spots} cars per team (the kickoff spots); "
                             f"the arena has {arena.blue} blue and {arena.orange} orange")
        n, c, device = arena.num_envs, arena.num_cars, arena.device
        order = torch.argsort(rng.uniform(key, (n, spots)), -1)  # a shuffle of the spots per env
        slot = order.gather(1, team_rank(active, arena.blue).clamp(min=0))  # [N, C]
        x, y, yaw = V.device_tensor(C.CAR_SPAWN_LOCATIONS_SOCCAR, device)[slot].unbind(-1)
        orange = torch.arange(c, device=device) >= arena.blue
        sign = torch.where(orange, -1.0, 1.0)
        zeros = torch.zeros(n, c, 3, device=device)
        arena.set_ball(pos=V.device_tensor((0.0, 0.0, C.BALL_REST_Z), device).expand(n, 3),
                       vel=zeros[:, 0], ang_vel=zeros[:, 0])  # fmt: skip
        set_cars(
            arena, active, pos=torch.stack((x * sign, y * sign, torch.full_like(x, C.CAR_SPAWN_REST_Z)), -1),
            rot_mat=yaw_rot_mat(yaw, orange), vel=zeros, ang_vel=zeros,
            boost=torch.full((n, c), self.boost, device=device), is_on_ground=torch.ones_like(active),
            wheels_with_contact=torch.ones(n, c, 4, dtype=torch.bool, device=device),
        )  # fmt: skip
        return active


@dataclasses.dataclass(frozen=True)
class RandomStateMutator:
    """Random ball and cars (GigaLearn's RandomState): the ball anywhere in x +-3500, y +-4000,
    z 92.75-1820, with a random velocity up to 4000 UU/s and spin up to 4 rad/s per axis; each playing
    car anywhere in that box from z 150, facing a random yaw, pitch and roll, moving up to 2300 UU/s and
    spinning at 5.5 rad/s, with random boost; half the cars (all with ``cars_on_ground``) are put level
    on the floor instead, at rest."""

    rand_ball_speed: bool = True
    rand_car_speed: bool = True
    cars_on_ground: bool = False

    def __call__(self, arena: Arena, key: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        n, c = arena.num_envs, arena.num_cars
        k = iter(rng.split(key, 16))

        def box(shape, low, high):
            low, high = V.device_tensor(low, arena.device), V.device_tensor(high, arena.device)
            return low + (high - low) * rng.uniform(next(k), (*shape, 3))

        def direction(shape):  # GigaLearn's RandNormVec: a uniform vector in the cube, normalised
            v = rng.uniform(next(k), (*shape, 3), -1.0, 1.0)
            return v / v.norm(dim=-1, keepdim=True)

        on = float(self.rand_ball_speed)
        arena.set_ball(
            pos=box((n,), (-3500.0, -4000.0, V.GIGALEARN_BALL_RADIUS), (3500.0, 4000.0, 1820.0)),
            vel=direction((n,)) * rng.uniform(next(k), (n, 1), 0.0, 4000.0) * on,
            ang_vel=rng.uniform(next(k), (n, 3), -4.0, 4.0) * on,
        )
        on = float(self.rand_car_speed)
        pos = box((n, c), (-3500.0, -4000.0, 150.0), (3500.0, 4000.0, 1820.0))
        vel = direction((n, c)) * rng.uniform(next(k), (n, c, 1), 0.0, V.CAR_MAX_SPEED) * on
        ang_vel = direction((n, c)) * V.CAR_MAX_ANG_VEL * on
        yaw, pitch, roll = (rng.uniform(next(k), (n, c), -1.0, 1.0) * math.pi * s for s in (1.0, 0.5, 1.0))
        ground = torch.ones_like(active) if self.cars_on_ground else rng.uniform(next(k), (n, c)) > 0.5
        flat = ground.unsqueeze(-1)
        pos = torch.where(flat, torch.cat((pos[..., :2], torch.full_like(pos[..., 2:], C.CAR_SPAWN_REST_Z)), -1), pos)
        vel = torch.where(flat, torch.cat((vel[..., :2], torch.zeros_like(vel[..., 2:])), -1), vel)
        ang_vel = torch.where(flat, 0.0, ang_vel)
        pitch, roll = torch.where(ground, 0.0, pitch), torch.where(ground, 0.0, roll)
        set_cars(arena, active, pos=pos, rot_mat=angle_to_rot_mat(yaw, pitch, roll), vel=vel, ang_vel=ang_vel,
                 boost=rng.uniform(next(k), (n, c), 0.0, 100.0))  # fmt: skip
        return active


# --- combinations ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MutatorSequence:
    """The mutators applied in order (RLGym's MutatorSequence)."""

    mutators: tuple[Mutator, ...]

    def __init__(self, *mutators: Mutator):
        object.__setattr__(self, "mutators", tuple(mutators))

    def __call__(self, arena: Arena, key: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        for mutator, k in zip(self.mutators, rng.split(key, len(self.mutators))):
            active = mutator(arena, k, active)
        return active


@dataclasses.dataclass(frozen=True)
class WeightedSampleMutator:
    """One of the mutators per env, drawn by weight: ``WeightedSampleMutator((KickoffMutator(), 0.7),
    (RandomStateMutator(), 0.3))`` (rlgym-tools' WeightedSampleMutator, GigaLearn's CombinedState)."""

    mutators: tuple[tuple[Mutator, float], ...]

    def __init__(self, *mutators_and_weights: tuple[Mutator, float]):
        check_weights("WeightedSampleMutator", [w for _, w in mutators_and_weights])
        object.__setattr__(self, "mutators", tuple((m, float(w)) for m, w in mutators_and_weights))

    def __call__(self, arena: Arena, key: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        k_choice, *keys = rng.split(key, len(self.mutators) + 1)
        w = V.device_tensor(tuple(w for _, w in self.mutators), arena.device, torch.float64)
        edges = (w.cumsum(0) / w.sum())[:-1].float()
        choice = (rng.uniform(k_choice, (arena.num_envs,)).unsqueeze(1) >= edges).sum(1)
        start, picked_state, picked_active = arena.state, None, None
        for j, ((mutator, _), k) in enumerate(zip(self.mutators, keys)):
            arena.state = start
            now = mutator(arena, k, active)
            mine = choice == j
            picked_state = arena.state if picked_state is None else tree.where(mine, arena.state, picked_state)
            picked_active = now if picked_active is None else torch.where(mine.unsqueeze(1), now, picked_active)
        arena.state = picked_state
        return picked_active


# --- recorded states -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ReplayMutator:
    """Start states drawn uniformly from the frames of a recorded nitro replay (``.npz``, the format of
    `nitro.monitor.replay`; rlgym-tools' ReplayMutator plays the same role for game replays): the ball's
    and playing cars' positions, velocities, orientations, boost and jump/flip flags. The replay must
    have the arena's cars, blue first."""

    path: str

    def __call__(self, arena: Arena, key: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        f, blue = _load_frames(str(Path(self.path).expanduser().resolve()), arena.device)
        if f["car_pos"].shape[1] != arena.num_cars or blue != arena.blue:
            raise ValueError(
                f"{self.path} records {f['car_pos'].shape[1]} cars ({blue} blue); the arena has "
                f"{arena.num_cars} ({arena.blue} blue). Record the replay with the env's team sizes"
            )
        pick = rng.randint(key, (arena.num_envs,), f["ball_pos"].shape[0])
        arena.set_ball(pos=f["ball_pos"][pick], vel=f["ball_vel"][pick], ang_vel=f["ball_ang_vel"][pick])
        set_cars(arena, active, **{name: f[f"car_{name}"][pick] for name in _CAR_FIELDS})
        return active


_CAR_FIELDS = ("pos", "vel", "ang_vel", "rot_mat", "boost", "is_on_ground", "has_jumped", "has_double_jumped",
               "has_flipped")


@functools.lru_cache(maxsize=8)
def _load_frames(path: str, device: torch.device) -> tuple[dict[str, torch.Tensor], int]:
    """Every frame of the replay at ``path`` as [M, ...] tensors on ``device`` (read once per device),
    and its number of blue cars."""
    r = replay.load(path)
    m = r.num_envs * r.num_frames
    flat = lambda a: torch.from_numpy(np.ascontiguousarray(a).reshape(m, *a.shape[2:])).to(device)  # noqa: E731
    frames = {"ball_pos": flat(r.ball_pos), "ball_vel": flat(r.ball_vel), "ball_ang_vel": flat(r.ball_ang_vel),
              "car_pos": flat(r.car_pos), "car_vel": flat(r.car_vel), "car_ang_vel": flat(r.car_ang_vel),
              "car_rot_mat": flat(r.rot_mat().astype(np.float32)), "car_boost": flat(r.car_boost)}
    for name in _CAR_FIELDS[5:]:
        frames[f"car_{name}"] = flat(r.flag(name))
    return frames, sum(t == replay.TEAM_BLUE for t in r.meta["teams"])
