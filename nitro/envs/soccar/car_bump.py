"""Bumps and demolitions: RocketSim's `Arena::_BtCallback_OnCarCarCollision` and `Car::Demolish`.

Reference: RocketSim (ZealanL/RocketSim, MIT) `Arena.cpp` (the car-car contact callback), `Car.cpp`
(`Demolish`), the BUMP_* constants and curves of `RLConst.h`, and `MutatorConfig` (demo mode, team
demos, bump cooldown and force scale, respawn delay).

Bullet calls the callback once for each car-car contact point it adds, during the tick's collision
detection (the tick's starting transforms; velocities after the cars' pre-tick). Each call tests
both directions, the manifold's body A on body B and then B on A (for a pair a < b, car b is body
A), and stops at once if either car is demolished. One direction, the bumper on the victim:

1. skip while the bumper's contact cooldown (0.25 s) runs against this victim;
2. the bumper moves towards the victim (v . (p_victim - p_bumper) > 0), faster than the victim
   moves away along the bumper's velocity, and the contact point is on the bumper's front
   (local x > 64.5 UU);
3. a demolition if the bumper is supersonic (DemoMode NORMAL; always in ON_CONTACT, never in
   DISABLED), and only between teams unless team demos are on: the victim is demolished (respawn
   in 3 s); otherwise a bump: the victim's cached velocity gains the bumper's velocity direction
   times BUMP_VEL_AMOUNT_GROUND_CURVE (victim on the ground) or _AIR_CURVE of the approach speed,
   plus the victim's up (or +z in the air) times BUMP_UPWARD_VEL_AMOUNT_CURVE x the bump force
   scale. The cache reaches the car at the end of the tick (`car.finish_physics_tick`);
4. either way the bumper remembers the victim and starts its cooldown.

Cars are walked pair by pair (a < b) and point by point in `CarCarTouches`' order (the reference
tick's come from Bullet's box-box contacts, `CarCarContacts.touches`; the fused kernel's from its
stand-in, `car_contacts`); RocketSim's order of simultaneous contacts of three or more cars follows
memory addresses. The kernels' twin is
`kernels/car_bump.py`.
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.ball_hit import normalized
from nitro.envs.soccar.contacts import CarCarTouches, car_pairs
from nitro.envs.soccar.mutators import TickParams
from nitro.envs.soccar.state import CarState, GameConfig
from nitro.envs.soccar.vec import constant, dot, may_be_any
from nitro.envs.soccar.vehicle import piecewise

DEMO_ON_CONTACT = 1  # `mutators.DEMO_MODES` index
DEMO_DISABLED = 2


@dataclasses.dataclass
class Bump:
    """What one direction of one car pair would do, from the tick's car states alone [N]."""

    approaching: torch.Tensor
    """The bumper moves towards the victim faster than the victim moves away [N] bool."""
    is_demo: torch.Tensor
    """The bump demolishes (demo mode, supersonic, teams) [N] bool."""
    impulse: torch.Tensor
    """The bump's velocity for the victim, UU/s [N, 3]."""


def bump(bumper: int, victim: int, cars: CarState, game: GameConfig, params: TickParams) -> Bump:
    """The velocity test, the demolition rule and the bump impulse of ``bumper`` on ``victim``."""
    state, other = _car(cars, bumper), _car(cars, victim)
    delta_pos = other.pos - state.pos
    vel_dir = normalized(state.vel)
    dir_to_other_car = normalized(delta_pos)
    speed_towards_other_car = dot(state.vel, dir_to_other_car)
    other_car_away_speed = dot(other.vel, vel_dir)
    approaching = (dot(state.vel, delta_pos) > 0) & (speed_towards_other_car > other_car_away_speed)

    if params.demo_mode == DEMO_ON_CONTACT:
        is_demo = torch.ones_like(approaching)
    elif params.demo_mode == DEMO_DISABLED:
        is_demo = torch.zeros_like(approaching)
    else:
        is_demo = state.is_supersonic
    if not params.enable_team_demos and (bumper >= game.blue) == (victim >= game.blue):  # teammates
        is_demo = torch.zeros_like(is_demo)

    ground_hit = other.is_on_ground
    base_scale = torch.where(
        ground_hit,
        piecewise(C.BUMP_VEL_AMOUNT_GROUND_CURVE, speed_towards_other_car),
        piecewise(C.BUMP_VEL_AMOUNT_AIR_CURVE, speed_towards_other_car),
    )
    hit_up_dir = torch.where(ground_hit[:, None], other.rot_mat[:, :, 2], constant((0.0, 0.0, 1.0), delta_pos.device))
    upward = piecewise(C.BUMP_UPWARD_VEL_AMOUNT_CURVE, speed_towards_other_car)
    impulse = vel_dir * base_scale[:, None] + (hit_up_dir * upward[:, None]) * params.bump_force_scale
    return Bump(approaching=approaching, is_demo=is_demo, impulse=impulse)


def on_car_car_collision(
    cars: CarState, contacts: CarCarTouches, game: GameConfig, params: TickParams
) -> tuple[CarState, torch.Tensor, torch.Tensor]:
    """Arena::_BtCallback_OnCarCarCollision for every contact point of the tick, in order.

    Returns the cars (victims' cached velocities, demolitions, bumpers' cooldowns) and, per car, the
    index of the car that bumped it without a demolition and of the car that demolished it this
    tick (the first such call's), -1 for none [N, C] int32 each.
    """
    n, num_cars = cars.pos.shape[:2]
    nobody = torch.full((n, num_cars), -1, dtype=torch.int32, device=cars.pos.device)
    if not may_be_any(contacts.is_contact):
        return cars, nobody, nobody.clone()
    # per car, as lists of [N] columns updated in turn
    is_demoed, timer = list(cars.is_demoed.unbind(1)), list(cars.demo_respawn_timer.unbind(1))
    contact_id, cooldown = list(cars.car_contact_id.unbind(1)), list(cars.car_contact_cooldown_timer.unbind(1))
    impulse_cache = list(cars.velocity_impulse_cache.unbind(1))
    bumped_by, demoed_by = list(nobody.unbind(1)), list(nobody.clone().unbind(1))
    for p, (a, b) in enumerate(car_pairs(num_cars)):
        if not may_be_any(contacts.is_contact[:, p]):
            continue
        directions = [(b, a, contacts.local_point_b[:, p]), (a, b, contacts.local_point_a[:, p])]  # body A (b) first
        bumps = [bump(bumper, victim, cars, game, params) for bumper, victim, _ in directions]
        for k in range(contacts.is_contact.shape[2]):
            live = contacts.is_contact[:, p, k]
            for (bumper, victim, local_point), hit in zip(directions, bumps):
                live = live & ~is_demoed[a] & ~is_demoed[b]  # a demolition ends the call
                in_cooldown = (contact_id[bumper] == victim + 1) & (cooldown[bumper] > 0)
                with_bumper = local_point[:, k, 0] > C.BUMP_MIN_FORWARD_DIST
                fires = live & ~in_cooldown & hit.approaching & with_bumper
                demo = fires & hit.is_demo
                pushed = fires & ~hit.is_demo
                is_demoed[victim] = is_demoed[victim] | demo
                timer[victim] = torch.where(demo, params.respawn_delay, timer[victim])
                impulse_cache[victim] = impulse_cache[victim] + torch.where(pushed[:, None], hit.impulse, 0.0)
                contact_id[bumper] = torch.where(fires, victim + 1, contact_id[bumper])
                cooldown[bumper] = torch.where(fires, params.bump_cooldown_time, cooldown[bumper])
                demoed_by[victim] = torch.where(demo & (demoed_by[victim] < 0), bumper, demoed_by[victim])
                bumped_by[victim] = torch.where(pushed & (bumped_by[victim] < 0), bumper, bumped_by[victim])
    cars = dataclasses.replace(
        cars,
        is_demoed=torch.stack(is_demoed, 1),
        demo_respawn_timer=torch.stack(timer, 1),
        car_contact_id=torch.stack(contact_id, 1),
        car_contact_cooldown_timer=torch.stack(cooldown, 1),
        velocity_impulse_cache=torch.stack(impulse_cache, 1),
    )
    return cars, torch.stack(bumped_by, 1), torch.stack(demoed_by, 1)


def _car(cars: CarState, index: int) -> CarState:
    """Car ``index`` of every env, as [N, ...] fields."""
    return CarState(**{f.name: getattr(cars, f.name)[:, index] for f in dataclasses.fields(cars)})
