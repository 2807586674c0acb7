"""Observation builders with the exact layouts of RLGym v2 and GigaLearnCPP, batched on the device.

Each builder is a frozen dataclass of the reference's constructor arguments; ``builder(state)`` gives
[N * C, size] float32, one row per car (env-major), and ``builder.size(blue, orange)`` its width.

- `DefaultObs`: RLGym v2's ``rlgym.rocket_league.obs_builders.DefaultObs`` (52 + 20 per car slot).
- `GigaLearnDefaultObs`: GigaLearnCPP's ``RLGC::DefaultObs`` (rlgym-sim's layout, 51 + 19 per car).
- `GigaLearnAdvancedObs`: GigaLearnCPP's ``RLGC::AdvancedObs`` (51 + 29 per car), with its pad-timer quirk.

All three are team-symmetric: an orange player sees the world rotated half a turn about z (x and y of
every position, velocity, angular velocity and rotation axis negated) and the pad list reversed.
Cars come as self, teammates, opponents, each group in car order; cars that sit out the episode
(`SoccarState.active`) and, with RLGym's ``zero_padding``, missing seats are zero blocks at the end
of their group, as RLGym's padding puts them.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import torch

from nitro.envs.soccar.rl import common_values as V
from nitro.envs.soccar.rl.state import SoccarState, has_flip_or_jump

SELF, ALLY, ENEMY = 0, 1, 2


# --- the two views ----------------------------------------------------------------------------------


def views(v: torch.Tensor) -> torch.Tensor:
    """Vectors [N, ..., 3] seen by blue and by orange: [N, 2, ..., 3]. Orange's view is a half turn
    about z, x and y negated (RLGym's `PhysicsObject.INV_VEC`, GigaLearn's `InvertPhys`)."""
    mirror = V.device_tensor(((1.0, 1.0, 1.0), (-1.0, -1.0, 1.0)), v.device)
    return v.unsqueeze(1) * mirror.view(2, *[1] * (v.dim() - 2), 3)


def axis_views(rot_mat: torch.Tensor, axis: int) -> torch.Tensor:
    """Column ``axis`` (0 forward, 1 right, 2 up) of rotation matrices [N, C, 3, 3] in both views."""
    return views(rot_mat[..., axis])


def pad_views(values: torch.Tensor) -> torch.Tensor:
    """Per-pad values [N, 34] in the arena's order as blue sees them (RLBot order) and as orange
    does (reversed): [N, 2, 34]."""
    rlbot = values[:, V.pads_rlbot_order(values.device)]
    return torch.stack((rlbot, rlbot.flip(-1)), 1)


def ball_block(ball, pos_coef, vel_coef, ang_vel_coef) -> torch.Tensor:
    """The ball's position, velocity and angular velocity, scaled, in both views: [N, 2, 9]."""
    return torch.cat((views(ball.pos) * pos_coef, views(ball.vel) * vel_coef, views(ball.ang_vel) * ang_vel_coef), -1)


def car_block(cars, pos_coef, vel_coef, ang_vel_coef) -> torch.Tensor:
    """Each car's position, forward, up, velocity, angular velocity (scaled) in both views: [N, 2, C, 15]."""
    return torch.cat(
        (views(cars.pos) * pos_coef, axis_views(cars.rot_mat, 0), axis_views(cars.rot_mat, 2),
         views(cars.vel) * vel_coef, views(cars.ang_vel) * ang_vel_coef), -1,
    )  # fmt: skip


def both_views(values: list[torch.Tensor]) -> torch.Tensor:
    """Per-car values [N, C] each, the same in both views: [N, 2, C, len(values)] float32."""
    return torch.stack(values, -1).float().unsqueeze(1).expand(-1, 2, -1, -1)


def for_agents(per_view: torch.Tensor, state: SoccarState) -> torch.Tensor:
    """Per-view values [N, 2, ...] picked for each car's team: [N, C, ...]."""
    return per_view[:, state.is_orange().long()]


# --- car slots: self, teammates, opponents ----------------------------------------------------------


@functools.lru_cache(maxsize=64)
def slot_table(blue: int, orange: int, padding: int | None, device: torch.device):
    """For each car i, the cars of its observation's slots and each slot's group (self, ally, enemy):
    ([C, S] int64, [C, S] int64). Index C is an empty seat. With ``padding`` (RLGym's zero_padding),
    teammates take padding - 1 slots and opponents ``padding``; without it every car has one slot."""
    num_cars = blue + orange
    cars, groups = [], []
    for i in range(num_cars):
        orange_i = i >= blue
        allies = [j for j in range(num_cars) if j != i and (j >= blue) == orange_i]
        enemies = [j for j in range(num_cars) if (j >= blue) != orange_i]
        if padding is not None:
            allies += [num_cars] * (padding - 1 - len(allies))
            enemies += [num_cars] * (padding - len(enemies))
        cars.append([i, *allies, *enemies])
        groups.append([SELF] + [ALLY] * (len(cars[-1]) - 1 - len(enemies)) + [ENEMY] * len(enemies))
    as_tensor = functools.partial(torch.tensor, dtype=torch.int64, device=device)
    return as_tensor(cars), as_tensor(groups)


def check_padding(padding: int | None, blue: int, orange: int) -> None:
    if padding is not None and max(blue, orange) > padding:
        raise ValueError(
            f"zero_padding={padding} is smaller than a team ({blue} blue, {orange} orange cars); "
            f"use zero_padding >= {max(blue, orange)} or None"
        )


def car_slots(car_feats: torch.Tensor, state: SoccarState, padding: int | None) -> torch.Tensor:
    """Every car's view of the cars, flattened: [N, C, S * F] from per-view features [N, 2, C, F].

    Within each group present cars come first in car order, then empty seats (zeros)."""
    n, c, f = car_feats.shape[0], state.num_cars, car_feats.shape[-1]
    cars, groups = slot_table(state.blue, state.orange, padding, car_feats.device)
    s = cars.shape[1]
    present = torch.cat((state.active, state.active.new_zeros(n, 1)), 1)
    absent = ~present[:, cars]  # [N, C, S]
    order = torch.argsort(groups * 2 + absent.long(), dim=-1, stable=True)
    picked = torch.where(absent.gather(2, order), c, cars.expand(n, c, s).gather(2, order))
    seen = for_agents(torch.cat((car_feats, car_feats.new_zeros(n, 2, 1, f)), 2), state)  # [N, C, C+1, F]
    return seen.gather(2, picked.unsqueeze(-1).expand(n, c, s, f)).reshape(n, c, s * f)


def finish(blocks: list[torch.Tensor]) -> torch.Tensor:
    """Per-car blocks [N, C, k_i] joined into agent rows [N * C, sum k_i] (float32)."""
    out = torch.cat([b.float() for b in blocks], -1)
    return out.reshape(-1, out.shape[-1])


# --- RLGym v2 -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DefaultObs:
    """RLGym v2's `DefaultObs` (rlgym-rocket-league 2.0.1), its arguments and defaults.

    Layout: ball position, velocity, angular velocity (9); the 34 pad timers (seconds until active, RLBot
    order) x pad_timer_coef; the player's jump and flip state (9: is_holding_jump, handbrake, has_jumped,
    is_jumping, has_flipped, is_flipping, has_double_jumped, can_flip, air_time_since_jump); then 20 per
    car slot: position, forward, up, velocity, angular velocity, boost x boost_coef, demo respawn timer
    (s), on ground (3+ wheels touching), boosting, supersonic. Size 52 + 20 x 2 x zero_padding, or
    52 + 20 x cars without padding.
    """

    zero_padding: int | None = 3
    """Most cars per team; teammates are padded to zero_padding - 1 slots and opponents to zero_padding.
    None: no padding (the size then depends on the team sizes)."""
    pos_coef: float = 1 / 2300
    ang_coef: float = 1 / math.pi
    """Unused, as in RLGym (kept so RLGym's arguments carry over)."""
    lin_vel_coef: float = 1 / 2300
    ang_vel_coef: float = 1 / math.pi
    pad_timer_coef: float = 1 / 10
    boost_coef: float = 1 / 100

    def size(self, blue: int, orange: int) -> int:
        check_padding(self.zero_padding, blue, orange)
        slots = blue + orange if self.zero_padding is None else 2 * self.zero_padding
        return 52 + 20 * slots

    def __call__(self, state: SoccarState) -> torch.Tensor:
        check_padding(self.zero_padding, state.blue, state.orange)
        cars = state.game.cars
        ball = ball_block(state.game.ball, self.pos_coef, self.lin_vel_coef, self.ang_vel_coef)
        pads = pad_views(state.game.pads.cooldown) * self.pad_timer_coef
        on_ground = cars.wheels_with_contact.sum(-1) >= 3
        holding_jump = cars.last_controls[..., V.JUMP] > 0.5
        has_flip = ~cars.has_double_jumped & ~cars.has_flipped & (cars.air_time_since_jump < V.DOUBLEJUMP_MAX_DELAY)
        partial = torch.stack(
            (holding_jump, cars.handbrake_val, cars.has_jumped, cars.is_jumping, cars.has_flipped,
             cars.has_flipped & (cars.flip_time < V.FLIP_TORQUE_TIME), cars.has_double_jumped,
             ~on_ground & ~holding_jump & has_flip, cars.air_time_since_jump),
            -1,
        ).float()  # fmt: skip
        flags = both_views([cars.boost * self.boost_coef, cars.demo_respawn_timer, on_ground, cars.boosting_time > 0,
                            cars.supersonic_time > 0])
        car_feats = torch.cat((car_block(cars, self.pos_coef, self.lin_vel_coef, self.ang_vel_coef), flags), -1)
        return finish([
            for_agents(ball, state),
            for_agents(pads, state),
            partial,
            car_slots(car_feats, state, self.zero_padding),
        ])  # fmt: skip


# --- GigaLearnCPP -----------------------------------------------------------------------------------


def giga_global(state: SoccarState, ball: torch.Tensor, pads: torch.Tensor) -> list[torch.Tensor]:
    """GigaLearn's first blocks: the ball (per view), the previous action (8), the pads (per view)."""
    return [for_agents(ball, state), state.prev_action, for_agents(pads, state)]


@dataclasses.dataclass(frozen=True)
class GigaLearnDefaultObs:
    """GigaLearnCPP's `DefaultObs` (RLGymCPP/ObsBuilders/DefaultObs.cpp; rlgym-sim's DefaultObs).

    Layout: ball position x pos_coef, velocity x vel_coef, angular velocity x ang_vel_coef (9); the
    previous action (8); the 34 pads' availability (0/1, RLBot order); then 19 per car (self,
    teammates, opponents): position, forward, up, velocity, angular velocity, boost / 100, is_on_ground,
    HasFlipOrJump, is_demoed. Size 51 + 19 x cars.
    """

    pos_coef: tuple[float, float, float] = (1 / V.SIDE_WALL_X, 1 / V.BACK_WALL_Y, 1 / V.CEILING_Z)
    vel_coef: float = 1 / V.CAR_MAX_SPEED
    ang_vel_coef: float = 1 / V.CAR_MAX_ANG_VEL

    def size(self, blue: int, orange: int) -> int:
        return 51 + 19 * (blue + orange)

    def __call__(self, state: SoccarState) -> torch.Tensor:
        cars = state.game.cars
        pos_coef = V.device_tensor(tuple(self.pos_coef), cars.pos.device)
        ball = ball_block(state.game.ball, pos_coef, self.vel_coef, self.ang_vel_coef)
        flags = both_views([cars.boost / 100, cars.is_on_ground, has_flip_or_jump(cars), cars.is_demoed])
        car_feats = torch.cat((car_block(cars, pos_coef, self.vel_coef, self.ang_vel_coef), flags), -1)
        pads = pad_views(state.game.pads.is_active.float())
        return finish([*giga_global(state, ball, pads), car_slots(car_feats, state, None)])


@dataclasses.dataclass(frozen=True)
class GigaLearnAdvancedObs:
    """GigaLearnCPP's `AdvancedObs` (RLGymCPP/ObsBuilders/AdvancedObs.cpp; not RLGym v1's AdvancedObs).

    Layout: ball position / 5000, velocity / 2300, angular velocity / 3 (9); the previous action (8); the
    34 pads (1 if active, else 1 / (1 + seconds until active); RLBot order); then 29 per car (self,
    teammates, opponents): position, forward, up, velocity, angular velocity, angular velocity in the
    car's frame, the ball's position and velocity relative to the car in the car's frame (frame
    components: forward, right, up), boost / 100, is_on_ground, HasFlipOrJump, is_demoed, has_jumped.
    Size 51 + 29 x cars.
    """

    pad_timer_quirk: bool = True
    """GigaLearn's `GameState::GetBoostPadTimers(inv)` returns the other team's (reversed) timer list,
    so an inactive pad reads the timer of its mirror image (usually active: 0 s, giving 1.0). True
    reproduces this (checkpoints trained with GigaLearn expect it); False reads each pad's own timer."""

    POS_COEF = 1 / 5000
    VEL_COEF = 1 / 2300
    ANG_VEL_COEF = 1 / 3

    def size(self, blue: int, orange: int) -> int:
        return 51 + 29 * (blue + orange)

    def __call__(self, state: SoccarState) -> torch.Tensor:
        cars = state.game.cars
        ball = ball_block(state.game.ball, self.POS_COEF, self.VEL_COEF, self.ANG_VEL_COEF)
        ball_pos, ball_vel = views(state.game.ball.pos).unsqueeze(2), views(state.game.ball.vel).unsqueeze(2)
        pos, vel, ang_vel = views(cars.pos), views(cars.vel), views(cars.ang_vel)  # [N, 2, C, 3]
        axes = torch.stack([axis_views(cars.rot_mat, a) for a in range(3)], -2)  # [N, 2, C, 3 axes, 3]

        def local(v: torch.Tensor) -> torch.Tensor:  # RotMat::Dot: (forward . v, right . v, up . v)
            return (axes * v.unsqueeze(-2)).sum(-1)

        car_feats = torch.cat(
            (car_block(cars, self.POS_COEF, self.VEL_COEF, self.ANG_VEL_COEF), local(ang_vel) * self.ANG_VEL_COEF,
             local(ball_pos - pos) * self.POS_COEF, local(ball_vel - vel) * self.VEL_COEF,
             both_views([cars.boost / 100, cars.is_on_ground, has_flip_or_jump(cars), cars.is_demoed, cars.has_jumped])),
            -1,
        )
        active = pad_views(state.game.pads.is_active)
        timers = pad_views(state.game.pads.cooldown)
        if self.pad_timer_quirk:
            timers = timers.flip(1)  # blue reads orange's (reversed) list and orange blue's
        pads = torch.where(active, 1.0, 1.0 / (1.0 + timers))
        return finish([*giga_global(state, ball, pads), car_slots(car_feats, state, None)])


ObsBuilder = DefaultObs | GigaLearnDefaultObs | GigaLearnAdvancedObs
