"""nitro's soccar state read from real RocketSim arenas (the ``rocketsim`` 2.2.1 binding).

``soccar_state(arenas)`` batches the ball, cars and pads of RocketSim arenas into a `SoccarState`
(env ``e`` = ``arenas[e]``; cars blue first, each team in the arena's car order), so nitro's
observation builders, rewards and conditions run on games RocketSim itself simulates: the path by
which a policy trained on nitro plays in the reference. Host-side, once per decision.

``play_games(env, learner, opponent, games)`` plays whole games in RocketSim arenas the way nitro's
``Soccar`` env plays them (its tick skip, action delay, observation builder and action parser; a kickoff
after every goal; `GameCondition`'s end), the learner on one team and the opponent on the other: the
transfer check of a trained policy (bench/soccar_transfer.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import torch

try:
    import RocketSim as rs
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("nitro.adapters.rocketsim needs RocketSim's binding; install it with: "
                      'pip install "nitro-rl[soccar]"') from e

from nitro.envs.soccar import ArenaEvents, BallState, BoostPadState, CarState, GameState
from nitro.envs.soccar.rl import common_values as V
from nitro.envs.soccar.rl.done_conditions import timeout_ticks
from nitro.envs.soccar.rl.env import Soccar
from nitro.envs.soccar.rl.state import SoccarState

_VECTORS = ("pos", "vel", "ang_vel", "flip_rel_torque", "world_contact_normal")
_SCALARS = ("is_on_ground", "has_jumped", "has_double_jumped", "has_flipped", "jump_time", "flip_time", "is_flipping",
            "is_jumping", "air_time", "air_time_since_jump", "boost", "boosting_time", "is_supersonic", "supersonic_time",
            "handbrake_val", "is_auto_flipping", "auto_flip_timer", "auto_flip_torque_scale", "has_world_contact",
            "car_contact_cooldown_timer", "is_demoed", "demo_respawn_timer", "tick_count_since_update")  # fmt: skip
_CONTROLS = ("throttle", "steer", "pitch", "yaw", "roll", "jump", "boost", "handbrake")


def cars_in_order(arena) -> list:
    """The arena's cars, blue first, each team in the arena's order: nitro's car order."""
    cars = arena.get_cars()
    return [c for c in cars if c.team == int(rs.Team.BLUE)] + [c for c in cars if c.team != int(rs.Team.BLUE)]


def soccar_state(arenas: list, prev_action: torch.Tensor | None = None, device="cpu") -> SoccarState:
    """The arenas as one batch [len(arenas), ...]. Every arena must have the same number of blue and
    orange cars. ``prev_action`` [N, C, 8]: each car's last controls as GigaLearn's observations read
    them (default: the controls the cars hold now)."""
    ordered = [cars_in_order(a) for a in arenas]
    blue = sum(c.team == int(rs.Team.BLUE) for c in ordered[0])
    line_up = [(sum(c.team == int(rs.Team.BLUE) for c in cars), len(cars)) for cars in ordered]
    if len(set(line_up)) != 1:
        raise ValueError(f"every arena must have the same team sizes; got (blue, cars) per arena {line_up}")
    n, c = len(arenas), len(ordered[0])
    host = {name: np.zeros((n, c, 3), np.float32) for name in _VECTORS}
    host.update({name: np.zeros((n, c), np.float32) for name in _SCALARS})
    host["rot_mat"] = np.zeros((n, c, 3, 3), np.float32)
    host["wheels_with_contact"] = np.zeros((n, c, 4), bool)
    host["last_controls"] = np.zeros((n, c, 8), np.float32)
    host["car_contact_id"] = np.zeros((n, c), np.int32)
    for e, cars in enumerate(ordered):
        index_of = {car.id: i for i, car in enumerate(cars)}
        for i, car in enumerate(cars):
            s = car.get_state()
            for name in _VECTORS:
                host[name][e, i] = getattr(s, name).as_numpy()
            for name in _SCALARS:
                host[name][e, i] = getattr(s, name)
            host["rot_mat"][e, i] = s.rot_mat.as_numpy().reshape(3, 3).T  # rows forward, right, up -> columns
            host["wheels_with_contact"][e, i] = s.wheels_with_contact
            host["last_controls"][e, i] = [float(getattr(s.last_controls, k)) for k in _CONTROLS]
            host["car_contact_id"][e, i] = index_of[s.car_contact_id] + 1 if s.car_contact_id in index_of else 0
    cars = CarState.fresh(n, c, torch.device(device))
    for name, value in host.items():
        setattr(cars, name, torch.from_numpy(value).to(device=device, dtype=CarState.FIELDS[name][1]))
    balls = [a.ball.get_state() for a in arenas]
    ball = BallState.rest(n, torch.device(device))
    for name in ("pos", "vel", "ang_vel"):
        setattr(ball, name, torch.tensor(np.stack([getattr(b, name).as_numpy() for b in balls]), device=device))
    pads_rlbot = [[p.get_state() for p in a.get_boost_pads()] for a in arenas]
    is_active, cooldown = np.zeros((n, len(V.PAD_POSITIONS)), bool), np.zeros((n, len(V.PAD_POSITIONS)), np.float32)
    for e, pads in enumerate(pads_rlbot):
        for i, pad in zip(V.PADS_RLBOT_ORDER, pads):
            is_active[e, i], cooldown[e, i] = pad.is_active, pad.cooldown
    game = GameState(
        ball=ball, cars=cars,
        pads=dataclasses.replace(BoostPadState.fresh(n, torch.device(device)), is_active=torch.from_numpy(is_active).to(device),
                                 cooldown=torch.from_numpy(cooldown).to(device)),
        tick_count=torch.tensor([a.tick_count for a in arenas], dtype=torch.int64, device=device),
        **GameState.scoreboard(n, torch.device(device)),
    )  # fmt: skip
    return SoccarState(
        game=game, events=ArenaEvents.none(n, c, torch.device(device)),
        prev_action=cars.last_controls.clone() if prev_action is None else prev_action.to(device),
        ticks_since_touch=torch.zeros(n, dtype=torch.int64, device=device),
        touches=torch.zeros(n, c, dtype=torch.int32, device=device),
        active=torch.ones(n, c, dtype=torch.bool, device=device), blue=blue, orange=c - blue,
    )  # fmt: skip


def car_controls(values) -> rs.CarControls:
    """nitro's 8 controls (throttle, steer, pitch, yaw, roll, jump, boost, handbrake) as RocketSim's
    CarControls, by name: the binding's positional order has boost before jump."""
    names = dict(zip(_CONTROLS, values))
    return rs.CarControls(**{k: (v > 0.5 if k in ("jump", "boost", "handbrake") else v) for k, v in names.items()})


Player = Callable[[SoccarState], torch.Tensor]
"""``player(state) -> actions [N * C]`` of the env's action parser, for every car (only its team's rows
are used)."""


def new_arena(env: Soccar):
    """A RocketSim soccar arena with the env's cars (blue first, its presets)."""
    p = env.params
    presets = [p.car] * env.num_agents if isinstance(p.car, str) else list(p.car)
    arena = rs.Arena(rs.GameMode.SOCCAR)
    for i, preset in enumerate(presets):
        arena.add_car(rs.Team.BLUE if i < p.blue else rs.Team.ORANGE, getattr(rs.CarConfig, preset.upper()))
    return arena


def play_games(env: Soccar, learner: Player, opponent: Player, games: int, seconds: float = 300.0,
               max_overtime_seconds: float | None = 300.0, seed: int = 0) -> dict[str, np.ndarray]:
    """``games`` games in RocketSim arenas, the learner on team g % 2 of game g and the opponent on the
    other. Each decision: the arenas read as one `SoccarState` (`soccar_state`, with each car's last
    controls as the previous action), both players' actions parsed by the env's parser, then
    ``action_delay`` ticks with the previous controls and the rest of ``tick_skip`` with the new ones
    (all arenas at once, `Arena.multi_step`). A goal puts the game back to a kickoff (RocketSim's
    reset_kickoff, seeded per game and kickoff); a game ends as `GameCondition(seconds,
    max_overtime_seconds)` says. Returns per game (arrays [games]): the learner's team, goals for and
    against, touches (decisions on which a learner car touched the ball) and the outcome
    (1 win, 0.5 draw, 0 loss)."""
    p = env.params
    delay, skip = p.action_delay, p.tick_skip
    end, last = timeout_ticks(seconds), None if max_overtime_seconds is None else timeout_ticks(seconds + max_overtime_seconds)
    arenas = [new_arena(env) for _ in range(games)]
    c = env.num_agents
    learner_team = np.arange(games) % 2
    orange = np.arange(c) >= p.blue
    mine = orange[None, :] == learner_team[:, None].astype(bool)  # [G, C]: the learner's cars
    kickoffs = np.zeros(games, np.int64)
    touched: list[set] = [set() for _ in range(games)]
    for g, arena in enumerate(arenas):
        arena.reset_kickoff(seed * 100_003 + g * 1_009)
        arena.set_ball_touch_callback(lambda arena, car, data: data.add(car.id), touched[g])
    ticks = np.zeros(games, np.int64)
    score = np.zeros((games, 2), np.int64)  # blue, orange
    touches = np.zeros(games, np.int64)
    running = np.ones(games, bool)
    prev = torch.zeros(games, c, V.NUM_ACTIONS)
    while running.any():
        live = [arenas[g] for g in np.flatnonzero(running)]
        rows = np.flatnonzero(running)
        state = soccar_state(live, prev[rows])
        controls = p.action(torch.where(torch.from_numpy(mine[rows]).reshape(-1), learner(state), opponent(state)), state)
        for g in rows:
            touched[g].clear()
        for hold, count in ((prev[rows], delay), (controls, skip - delay)):
            if count:
                for arena, cars in zip(live, hold):
                    for car, control in zip(cars_in_order(arena), cars.tolist()):
                        car.set_controls(car_controls(control))
                rs.Arena.multi_step(live, count)
        prev[rows] = controls
        ticks[rows] += skip
        for k, g in enumerate(rows):
            arena = arenas[g]
            ids = [car.id for car, is_mine in zip(cars_in_order(arena), mine[g]) if is_mine]
            touches[g] += any(i in touched[g] for i in ids)
            now = (arena.blue_score, arena.orange_score)
            if now != tuple(score[g]):
                score[g] = now
                kickoffs[g] += 1
                arena.reset_kickoff(seed * 100_003 + g * 1_009 + kickoffs[g])
            over = (ticks[g] >= end and score[g, 0] != score[g, 1]) or (last is not None and ticks[g] >= last)
            running[g] = not over
    goals_for = np.where(learner_team == 0, score[:, 0], score[:, 1])
    goals_against = np.where(learner_team == 0, score[:, 1], score[:, 0])
    outcome = np.where(goals_for > goals_against, 1.0, np.where(goals_for == goals_against, 0.5, 0.0))
    return {"learner_team": learner_team, "goals_for": goals_for, "goals_against": goals_against,
            "touches": touches, "outcome": outcome, "ticks": ticks}
