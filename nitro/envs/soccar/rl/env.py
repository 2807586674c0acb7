"""Soccar-v0: Rocket League soccar as a batched multi-agent env over the arena.

Every car is an agent: car ``i`` of env ``e`` (blue cars first) is row ``e * C + i`` of the
observations, actions and rewards; episodes end per env. A step parses each car's action into
controls, holds them for ``tick_skip`` ticks (RLGym's ``RepeatAction``) after ``action_delay`` ticks
with the previous step's controls (RLGym v2's RocketSimEngine delays 1 tick, rlgym-sim 0, GigaLearn
``tick_skip - 1``), then reads the done conditions, the rewards and the observations off the new
state. Resets build a fresh arena state and hand it to the state mutator, which sets it through the
Arena's ``set_ball`` / ``set_car``.

Goals come from the arena's events. Touches, demolitions and pad pickups are read from the events
too; the arena reports them once car-ball and car-car collisions and the pads are simulated.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from nitro.core.env import Env
from nitro.core.errors import as_count
from nitro.core.spaces import Box
from nitro.core.vector import concrete_device
from nitro.envs.soccar import Arena, ArenaEvents, BallState, BoostPadState, CarState, GameState, step_ticks
from nitro.envs.soccar.rl.action_parsers import ActionParser, LookupTableAction
from nitro.envs.soccar.rl.done_conditions import (AnyCondition, DoneCondition, GoalCondition, NoTouchTimeoutCondition,
                                                  TimeoutCondition)
from nitro.envs.soccar.rl.obs_builders import DefaultObs, ObsBuilder
from nitro.envs.soccar.rl.rewards import CombinedReward, GoalReward, Reward, TouchReward
from nitro.envs.soccar.rl.state import SoccarState
from nitro.envs.soccar.rl.state_mutators import KickoffMutator, Mutator


@dataclasses.dataclass(frozen=True)
class SoccarParams:
    """A soccar env. The defaults are RLGym v2's quick start (1v1 here): DefaultObs, the 90-action
    lookup table at tick skip 8 with the 1-tick delay, goal x 10 + touch x 0.1, ending on a goal and
    cut after 30 s without a touch or 300 s in all, kickoffs."""

    blue: int = 1
    """Cars on the blue team (the arena's first cars; a team-size mutator may bench some per episode)."""
    orange: int = 1
    """Cars on the orange team."""
    car: str | tuple[str, ...] = "octane"
    """The car preset, or one per car, blue first (octane, dominus, plank, breakout, hybrid, merc)."""
    tick_skip: int = 8
    """Ticks per step (120 ticks/s: 8 gives 15 decisions per second)."""
    action_delay: int = 1
    """Ticks at the start of each step during which the cars still hold the previous step's controls:
    1 is RLGym v2's RocketSimEngine (rlbot_delay), 0 rlgym-sim, tick_skip - 1 GigaLearn's default."""
    obs: ObsBuilder = DefaultObs()
    """The observation builder (`obs_builders`)."""
    action: ActionParser = LookupTableAction()
    """The action parser (`action_parsers`)."""
    reward: Reward = CombinedReward((GoalReward(), 10.0), (TouchReward(), 0.1))
    """``reward(before, after) -> [N, C]`` (`rewards`)."""
    termination: DoneCondition = GoalCondition()
    """``condition(before, after) -> [N]``: the episode ends (`done_conditions`)."""
    truncation: DoneCondition | None = AnyCondition(NoTouchTimeoutCondition(30), TimeoutCondition(300))
    """The episode is cut (a termination on the same step wins); None: never."""
    mutator: Mutator = KickoffMutator()
    """How episodes start (`state_mutators`)."""
    meshes: str | None = None
    """Folder of the soccar collision meshes (None: look where `nitro.envs.soccar.find_soccar_meshes` does)."""


class Soccar(Env[SoccarState, SoccarParams]):
    Params = SoccarParams

    def __init__(self, params: SoccarParams | None = None):
        super().__init__(params)
        p = self.params
        blue, orange = as_count("blue", p.blue, minimum=0), as_count("orange", p.orange, minimum=0)
        if blue + orange == 0:
            raise ValueError("a soccar env needs at least one car: set blue or orange to 1 or more")
        tick_skip = as_count("tick_skip", p.tick_skip)
        delay = as_count("action_delay", p.action_delay, minimum=0)
        if delay > tick_skip:
            raise ValueError(f"action_delay must be in [0, tick_skip={tick_skip}], got {delay}")
        self.num_agents = blue + orange
        teams = (0,) * blue + (1,) * orange
        self.agent_team = tuple(t - teams[0] for t in teams)  # numbered from 0 in order of appearance
        self.observation_space = Box.of(-math.inf, math.inf, (p.obs.size(blue, orange),))
        self.action_space = p.action.action_space
        self._arenas: dict[tuple[int, torch.device], Arena] = {}

    def arena(self, num_envs: int, device) -> Arena:
        """The arena shell (geometry, car presets, set_ball / set_car) for batches of ``num_envs``."""
        device = concrete_device(torch.device(device))
        key = (num_envs, device)
        if key not in self._arenas:
            p = self.params
            self._arenas[key] = Arena(num_envs, p.blue, p.orange, car=p.car, device=device, meshes=p.meshes)
        return self._arenas[key]

    # --- episode start --------------------------------------------------------------------------------

    def reset(self, key: torch.Tensor, num_envs: int, device) -> SoccarState:
        p = self.params
        arena = self.arena(num_envs, device)
        device = arena.device
        c = arena.num_cars
        arena.state = GameState(
            ball=BallState.rest(num_envs, device),
            cars=CarState.fresh(num_envs, c, device),
            pads=BoostPadState.fresh(num_envs, device),
            tick_count=torch.zeros(num_envs, dtype=torch.int64, device=device),
        )
        active = p.mutator(arena, key, torch.ones(num_envs, c, dtype=torch.bool, device=device))
        return SoccarState(
            game=arena.state,
            events=ArenaEvents.none(num_envs, c, device),
            prev_action=torch.zeros(num_envs, c, 8, device=device),
            ticks_since_touch=torch.zeros(num_envs, dtype=torch.int64, device=device),
            active=active,
            blue=p.blue,
            orange=p.orange,
        )

    # --- the step: a table of contents ---------------------------------------------------------------------

    def step(self, state: SoccarState, action: torch.Tensor, key: torch.Tensor):
        p = self.params
        controls = p.action(action, state) * state.active.unsqueeze(-1)  # benched cars hold nothing
        game, events = self.physics(state, controls)
        after = dataclasses.replace(
            state, game=game, events=events, prev_action=controls,
            ticks_since_touch=torch.where(events.ball_touch.any(-1), 0, state.ticks_since_touch + p.tick_skip),
        )  # fmt: skip
        terminated = p.termination(state, after)
        truncated = torch.zeros_like(terminated) if p.truncation is None else p.truncation(state, after) & ~terminated
        reward = p.reward(state, after) * after.active
        return after, self.observe(after), reward.reshape(-1), terminated, truncated

    def physics(self, state: SoccarState, controls: torch.Tensor) -> tuple[GameState, ArenaEvents]:
        """``tick_skip`` ticks: the first ``action_delay`` with the controls held from the last step, the
        rest with ``controls``; the events of all of them."""
        p = self.params
        world = self.arena(state.num_envs, controls.device).world
        game, events = state.game, ArenaEvents.none(state.num_envs, state.num_cars, controls.device)
        if p.action_delay:
            game, events = step_ticks(game, events, state.prev_action, world, p.action_delay)
        if p.tick_skip > p.action_delay:
            game, events = step_ticks(game, events, controls, world, p.tick_skip - p.action_delay)
        return game, events

    # --- what the agents see and may do ------------------------------------------------------------------

    def observe(self, state: SoccarState) -> torch.Tensor:
        return self.params.obs(state)

    def action_mask(self, state: SoccarState) -> torch.Tensor | None:
        mask = self.params.action.action_mask(state)
        return None if mask is None else mask | ~state.active.reshape(-1, 1)

    def acting(self, state: SoccarState) -> torch.Tensor:
        """[N * C] bool: the cars that play this episode."""
        return state.active.reshape(-1)

    def result(self, state: SoccarState) -> torch.Tensor:
        """[N * C] float: 1 for the cars of the team that scored on the last step, else 0."""
        return (state.goal_team().unsqueeze(1) == state.is_orange().long()).float().reshape(-1)
