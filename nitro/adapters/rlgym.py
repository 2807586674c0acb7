"""RLGym v2 (rlgym-rocket-league 2.0.1) on nitro's soccar simulator.

- ``game_state(state, env)`` builds the `rlgym.rocket_league.api.GameState` that RLGym's own
  `RocketSimEngine` would report for env ``env``: the same fields copied the same way from the car and
  ball states (its ``_get_state``), agents named ``blue-i`` / ``orange-i`` in car order (as
  `FixedTeamSizeMutator` names them) unless told otherwise, pad timers in RLBot order.
- `NitroEngine` is an RLGym `TransitionEngine` over one nitro `Arena`, a drop-in for
  `RocketSimEngine`: existing RLGym v2 code (its obs builders, action parsers, rewards, done
  conditions and state mutators over GameState) runs on nitro's simulator unchanged.

Both work on the host, one env at a time (RLGym's own loop is per env and per tick); nitro's batched
`Soccar-v0` env is the fast path.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

try:
    from rlgym.api import TransitionEngine
    from rlgym.rocket_league.api import Car, GameConfig, GameState, PhysicsObject
    from rlgym.rocket_league.common_values import BOOST_CONSUMPTION_RATE, GOAL_THRESHOLD, GRAVITY
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("nitro.adapters.rlgym needs RLGym v2 (rlgym-rocket-league); install it with: "
                      'pip install "nitro-rl[soccar]"') from e

from nitro.envs.soccar import Arena, ArenaEvents, BoostPadState, MutatorConfig
from nitro.envs.soccar.rl import common_values as V
from nitro.envs.soccar.rl.state import SoccarState

HITBOX_TYPES = {"octane": 0, "dominus": 1, "plank": 2, "breakout": 3, "hybrid": 4, "merc": 5}
"""RLGym's hitbox_type of each car preset (rlgym common_values OCTANE ... MERC)."""


def agent_ids(blue: int, orange: int) -> list[str]:
    """RLGym's agent ids of the cars in car order: blue-0 ... then orange-0 ..."""
    return [f"blue-{i}" for i in range(blue)] + [f"orange-{i}" for i in range(orange)]


def physics(pos, vel, ang_vel, rot_mat=None) -> PhysicsObject:
    p = PhysicsObject()
    p.position, p.linear_velocity, p.angular_velocity = pos, vel, ang_vel
    if rot_mat is not None:
        p.rotation_mtx = np.ascontiguousarray(rot_mat)
    return p


def game_state(state: SoccarState, env: int = 0, cars: tuple[str, ...] | None = None,
               agents: list | None = None) -> GameState:
    """Env ``env`` of ``state`` as RLGym's GameState (cars that sit the episode out are left out).

    ``cars`` names each car's preset (default: all octane) for ``hitbox_type``; ``agents`` the agent id
    of each car (default: `agent_ids`)."""
    g = state.game
    host = lambda x: x[env].detach().cpu().numpy()  # noqa: E731
    ball, c, pads = g.ball, g.cars, g.pads
    gs = GameState()
    gs.tick_count = int(g.tick_count[env])
    gs.config = GameConfig()
    gs.config.gravity, gs.config.boost_consumption, gs.config.dodge_deadzone = 1.0, 1.0, 0.5
    gs.ball = physics(host(ball.pos), host(ball.vel), host(ball.ang_vel), host(ball.rot_mat))
    gs.goal_scored = bool(abs(gs.ball.position[1]) > GOAL_THRESHOLD)
    ids = agents or agent_ids(state.blue, state.orange)
    active, touched = host(state.active), host(state.events.ball_touch)
    contact_id, contact_cooldown = host(c.car_contact_id), host(c.car_contact_cooldown_timer)
    f = {name: host(getattr(c, name)) for name in (
        "pos", "vel", "ang_vel", "rot_mat", "demo_respawn_timer", "wheels_with_contact", "supersonic_time",
        "boost", "boosting_time", "handbrake_val", "has_jumped", "last_controls", "is_jumping", "jump_time",
        "has_flipped", "has_double_jumped", "air_time_since_jump", "flip_time", "flip_rel_torque",
        "is_auto_flipping", "auto_flip_timer", "auto_flip_torque_scale")}  # fmt: skip
    presets = cars or ("octane",) * state.num_cars
    gs.cars = {}
    for i, agent in enumerate(ids):
        if not active[i]:
            continue
        car = Car()
        car.team_num = V.ORANGE_TEAM if i >= state.blue else V.BLUE_TEAM
        car.hitbox_type = HITBOX_TYPES[presets[i]]
        car.physics = physics(f["pos"][i], f["vel"][i], f["ang_vel"][i], f["rot_mat"][i])
        car.demo_respawn_timer = float(f["demo_respawn_timer"][i])
        car.wheels_with_contact = tuple(bool(w) for w in f["wheels_with_contact"][i])
        car.supersonic_time = float(f["supersonic_time"][i])
        car.boost_amount = float(f["boost"][i])
        car.boost_active_time = float(f["boosting_time"][i])
        car.handbrake = float(f["handbrake_val"][i])
        car.has_jumped = bool(f["has_jumped"][i])
        car.is_holding_jump = bool(f["last_controls"][i, V.JUMP] > 0.5)
        car.is_jumping = bool(f["is_jumping"][i])
        car.jump_time = float(f["jump_time"][i])
        car.has_flipped = bool(f["has_flipped"][i])
        car.has_double_jumped = bool(f["has_double_jumped"][i])
        car.air_time_since_jump = float(f["air_time_since_jump"][i])
        car.flip_time = float(f["flip_time"][i])
        car.flip_torque = f["flip_rel_torque"][i]
        car.is_autoflipping = bool(f["is_auto_flipping"][i])
        car.autoflip_timer = float(f["auto_flip_timer"][i])
        car.autoflip_direction = float(f["auto_flip_torque_scale"][i])
        victim = int(contact_id[i]) - 1
        car.bump_victim_id = ids[victim] if contact_cooldown[i] > 0 and victim >= 0 else None
        car.ball_touches = int(touched[i])
        gs.cars[agent] = car
    gs.boost_pad_timers = host(pads.cooldown)[list(V.PADS_RLBOT_ORDER)].astype(np.float32)
    return gs


PRESETS_BY_HITBOX = {v: k for k, v in HITBOX_TYPES.items()}


class NitroEngine(TransitionEngine):
    """RLGym v2's `RocketSimEngine` semantics on a nitro `Arena` of one env.

    ``rlbot_delay`` as RocketSimEngine's: each tick of an action runs after the previous controls
    stepped one tick (a 1-tick input delay). `set_state` builds an arena for the desired cars (blue
    first, each team in the order its agents appear; arenas are kept per car line-up and config) and
    sets the ball and every car field RocketSimEngine sets, through `Arena.set_ball` / `set_car`.
    Touches are counted once per step (RocketSim's callback counts each touching tick).
    """

    def __init__(self, rlbot_delay: bool = True, device: str = "cpu", meshes: str | None = None):
        self._rlbot_delay = rlbot_delay
        self._device, self._meshes = device, meshes
        self._arenas: dict = {}
        self._arena = None
        self._agents: list = []
        self._blue = 0
        self._presets: tuple[str, ...] = ()
        self._controls = None
        self._touched = None
        self._state = None
        self._tick_count = 0
        self._game_config = None

    @property
    def agents(self) -> list:
        return list(self._agents)

    @property
    def max_num_agents(self) -> int:
        return 1337  # as RocketSimEngine

    @property
    def state(self) -> GameState:
        return self._state

    @property
    def config(self) -> dict:
        return {"rlbot_delay": self._rlbot_delay}

    @config.setter
    def config(self, value: dict) -> None:
        self._rlbot_delay = value.get("rlbot_delay", self._rlbot_delay)

    def create_base_state(self) -> GameState:
        gs = GameState()
        gs.tick_count, gs.goal_scored = 0, False
        gs.config = GameConfig()
        gs.config.gravity, gs.config.boost_consumption, gs.config.dodge_deadzone = 1.0, 1.0, 0.5
        gs.ball = PhysicsObject()
        gs.cars = {}
        gs.boost_pad_timers = np.zeros(len(V.PAD_POSITIONS), dtype=np.float32)
        return gs

    def set_state(self, desired_state: GameState, shared_info: dict) -> GameState:
        blue = [a for a, car in desired_state.cars.items() if car.team_num == V.BLUE_TEAM]
        orange = [a for a, car in desired_state.cars.items() if car.team_num != V.BLUE_TEAM]
        self._agents, self._blue = blue + orange, len(blue)
        self._presets = tuple(PRESETS_BY_HITBOX[desired_state.cars[a].hitbox_type] for a in self._agents)
        config = desired_state.config
        mutators = MutatorConfig(gravity_z=-GRAVITY * config.gravity,
                                 boost_used_per_second=BOOST_CONSUMPTION_RATE * config.boost_consumption)
        key = (len(blue), len(orange), self._presets, mutators)
        if key not in self._arenas:
            self._arenas[key] = Arena(1, len(blue), len(orange), car=self._presets or "octane", device=self._device,
                                      meshes=self._meshes, mutators=mutators)
        arena = self._arena = self._arenas[key]
        self._tick_count, self._game_config = desired_state.tick_count, config
        tensor = lambda x, dtype=torch.float32: torch.as_tensor(np.asarray(x), dtype=dtype, device=arena.device)  # noqa: E731
        ball = desired_state.ball
        arena.set_ball(pos=tensor(ball.position), vel=tensor(ball.linear_velocity), ang_vel=tensor(ball.angular_velocity))
        ids = {a: i for i, a in enumerate(self._agents)}
        for i, agent in enumerate(self._agents):
            car = desired_state.cars[agent]
            p = car.physics
            controls = torch.zeros(8, device=arena.device)
            controls[V.JUMP] = float(car.is_holding_jump)
            fields = dict(
                pos=tensor(p.position), vel=tensor(p.linear_velocity), ang_vel=tensor(p.angular_velocity),
                rot_mat=tensor(p.rotation_mtx), demo_respawn_timer=tensor(car.demo_respawn_timer),
                is_demoed=tensor(car.is_demoed, torch.bool), is_on_ground=tensor(car.on_ground, torch.bool),
                wheels_with_contact=tensor(car.wheels_with_contact, torch.bool),
                supersonic_time=tensor(car.supersonic_time), boost=tensor(car.boost_amount),
                boosting_time=tensor(car.boost_active_time), handbrake_val=tensor(car.handbrake),
                has_jumped=tensor(car.has_jumped, torch.bool), last_controls=controls,
                is_jumping=tensor(car.is_jumping, torch.bool), jump_time=tensor(car.jump_time),
                has_flipped=tensor(car.has_flipped, torch.bool), is_flipping=tensor(car.is_flipping, torch.bool),
                has_double_jumped=tensor(car.has_double_jumped, torch.bool),
                air_time_since_jump=tensor(car.air_time_since_jump), flip_time=tensor(car.flip_time),
                flip_rel_torque=tensor(car.flip_torque), is_auto_flipping=tensor(car.is_autoflipping, torch.bool),
                auto_flip_timer=tensor(car.autoflip_timer), auto_flip_torque_scale=tensor(car.autoflip_direction),
            )  # fmt: skip
            if car.bump_victim_id is not None:
                fields["car_contact_id"] = tensor(ids[car.bump_victim_id] + 1, torch.int32)
            arena.set_car(i, **{k: v.unsqueeze(0) for k, v in fields.items()})
        # pad timers: the arena keeps no setter for pads; RocketSimEngine sets each pad's cooldown
        cooldown = torch.zeros(1, len(V.PAD_POSITIONS), device=arena.device)
        cooldown[0, list(V.PADS_RLBOT_ORDER)] = tensor(desired_state.boost_pad_timers)
        pads = dataclasses.replace(BoostPadState.fresh(1, arena.device), is_active=cooldown <= 0, cooldown=cooldown)
        arena.state = dataclasses.replace(arena.state, pads=pads)
        self._controls = torch.zeros(1, arena.num_cars, 8, device=arena.device)
        self._touched = torch.zeros(1, arena.num_cars, dtype=torch.bool, device=arena.device)
        return self._get_state()

    def step(self, actions: dict, shared_info: dict) -> GameState:
        arena = self._arena
        if len(actions) != len(self._agents):
            raise KeyError(f"Expected actions for {len(self._agents)} agents but received {len(actions)}.")
        if not self._agents:
            ticks = 1
        else:
            ticks = np.asarray(next(iter(actions.values()))).shape[0]
        per_tick = torch.as_tensor(np.stack([np.asarray(actions[a], np.float32) for a in self._agents], 1)
                                   if self._agents else np.zeros((ticks, 0, 8), np.float32), device=arena.device)
        buttons = per_tick[..., V.JUMP:] != 0  # RocketSimEngine: bool(value)
        per_tick = torch.cat((per_tick[..., :V.JUMP], buttons.float()), -1)
        for t in range(ticks):
            if self._rlbot_delay:
                self._tick()
            self._controls = per_tick[t].unsqueeze(0)
            if not self._rlbot_delay:
                self._tick()
            self._tick_count += 1
        return self._get_state()

    def _tick(self) -> None:
        events = self._arena.step(self._controls if self._arena.num_cars else None, ticks=1)
        self._touched = self._touched | events.ball_touch

    def _get_state(self) -> GameState:
        arena = self._arena
        soccar = SoccarState(
            game=arena.state, events=dataclasses.replace(ArenaEvents.none(1, arena.num_cars, arena.device),
                                                         ball_touch=self._touched),
            prev_action=self._controls, ticks_since_touch=torch.zeros(1, dtype=torch.int64, device=arena.device),
            touches=self._touched.int(),
            active=torch.ones(1, arena.num_cars, dtype=torch.bool, device=arena.device), blue=self._blue,
            orange=arena.num_cars - self._blue,
        )
        gs = game_state(soccar, 0, self._presets, self._agents)
        gs.tick_count, gs.config = self._tick_count, self._game_config
        self._touched = torch.zeros_like(self._touched)
        self._state = gs
        return gs

    def close(self) -> None:
        pass
