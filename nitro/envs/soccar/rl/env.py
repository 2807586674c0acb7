"""Soccar-v0: Rocket League soccar as a batched multi-agent env over the arena.

Every car is an agent: car ``i`` of env ``e`` (blue cars first) is row ``e * C + i`` of the
observations, actions and rewards; episodes end per env. A step parses each car's action into
controls, holds them for ``tick_skip`` ticks (RLGym's ``RepeatAction``) after ``action_delay`` ticks
with the previous step's controls (RLGym v2's RocketSimEngine delays 1 tick, rlgym-sim 0, GigaLearn
``tick_skip - 1``), then reads the done conditions, the rewards and the observations off the new
state. Resets build a fresh arena state and hand it to the state mutator, which sets it through the
Arena's ``set_ball`` / ``set_car``.

Goals, touches, demolitions and pad pickups come from the arena's events. With ``kickoff_after_goal``
an episode plays on after a goal (the arena resets to a kickoff on the scoring tick), so a
`GameCondition` can end whole games; the score is the arena's.

The components (obs, action, reward, termination, truncation, mutator) are objects, or the names of
`COMPONENTS` (so YAML presets and ``--params`` can choose them). `Soccar.bots()` are the scripted
players of `bots`, in the env's action space.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os

import torch

from nitro.core import tree
from nitro.core.env import Env
from nitro.core.errors import as_count
from nitro.core.spaces import Box
from nitro.core.vector import concrete_device
from nitro.envs.soccar import Arena, ArenaEvents, BallState, BoostPadState, CarState, GameState, World, step_ticks
from nitro.envs.soccar.kernels.arena import launch_step_ticks_
from nitro.envs.soccar.rl import rewards as R
from nitro.envs.soccar.rl.action_parsers import ActionParser, ContinuousAction, LookupTableAction
from nitro.envs.soccar.rl.bots import BOTS
from nitro.envs.soccar.rl.done_conditions import (AnyCondition, DoneCondition, GameCondition, GoalCondition,
                                                  NoTouchTimeoutCondition, TimeoutCondition)
from nitro.envs.soccar.rl.obs_builders import DefaultObs, GigaLearnAdvancedObs, GigaLearnDefaultObs, ObsBuilder
from nitro.envs.soccar.rl.rewards import CombinedReward, GoalReward, Reward, TouchReward
from nitro.envs.soccar.rl.state import SoccarState
from nitro.envs.soccar.rl.state_mutators import KickoffMutator, Mutator, RandomStateMutator, WeightedSampleMutator

GIGALEARN_REWARD = CombinedReward(
    (R.AirReward(), 0.25), (R.FaceBallReward(), 0.25), (R.VelocityPlayerToBallReward(per_second=False), 4.0),
    (R.StrongTouchReward(20.0, 100.0), 60.0), (R.ZeroSumReward(R.VelocityBallToGoalReward(), 1.0), 2.0),
    (R.PickupBoostReward(), 10.0), (R.SaveBoostReward(), 0.2), (R.GoalReward(), 150.0),
)
"""GigaLearnCPP's ExampleMain rewards (its bump and demolition terms left out: `DemoReward` here is
rlgym-tools')."""

COMPONENTS: dict[str, dict[str, object]] = {
    "obs": {"default": DefaultObs(), "default_unpadded": DefaultObs(zero_padding=None),
            "gigalearn_default": GigaLearnDefaultObs(), "gigalearn_advanced": GigaLearnAdvancedObs()},
    "action": {"lookup": LookupTableAction(), "lookup_masked": LookupTableAction(masks=True),
               "continuous": ContinuousAction()},
    "reward": {"rlgym": CombinedReward((GoalReward(), 10.0), (TouchReward(), 0.1)), "gigalearn": GIGALEARN_REWARD},
    "termination": {"goal": GoalCondition(), "game": GameCondition(300.0, max_overtime_seconds=300.0)},
    "truncation": {"rlgym": AnyCondition(NoTouchTimeoutCondition(30), TimeoutCondition(300)),
                   "gigalearn": AnyCondition(NoTouchTimeoutCondition(10), TimeoutCondition(120)), "none": None},
    "mutator": {"kickoff": KickoffMutator(), "random": RandomStateMutator(),
                "kickoff_or_random": WeightedSampleMutator((KickoffMutator(), 0.5), (RandomStateMutator(), 0.5))},
}  # fmt: skip
"""Components by name, per SoccarParams field: a YAML preset or ``--params termination=game`` picks them.
"gigalearn" truncation: GigaLearn's 10 s without a touch and its learner's 120 s cap; "game": 5-minute
games with up to 5 minutes of overtime."""


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
    kickoff_after_goal: bool = False
    """Play on after a goal: the arena resets to a kickoff on the scoring tick (whole games; the
    `GameCondition` termination needs it). False: the ball stays in the goal (episodes end there)."""
    physics: str = "eager"
    """How the ticks run: "eager" (the PyTorch tick, `arena.step_ticks`) or "fused" (each held action's
    ticks in Triton stage kernels, `kernels.arena.launch_step_ticks_`; CUDA, or the CPU under
    TRITON_INTERPRET=1). The fused tick solves the contacts between bodies (car-ball, car-car) alone,
    then each body's arena contacts starting from their result, where the eager tick solves them
    all together; its car-car points and car-arena points are cheaper stand-ins for Bullet's
    (docs/SOCCAR.md, docs/FIDELITY.md "The fused path's contacts between bodies")."""
    meshes: str | None = None
    """Folder of the soccar collision meshes (None: look where `nitro.envs.soccar.find_soccar_meshes` does)."""


class Soccar(Env[SoccarState, SoccarParams]):
    Params = SoccarParams
    GAME_PARAMS = {"termination": "game", "truncation": "none", "kickoff_after_goal": True, "mutator": "kickoff"}
    """The params of the games evaluations play (``nitro eval``): 5-minute games from kickoffs."""

    def __init__(self, params: SoccarParams | None = None):
        super().__init__(params)
        p = self.params = dataclasses.replace(self.params, **{
            name: resolve(name, getattr(self.params, name)) for name in COMPONENTS})  # fmt: skip
        if isinstance(p.termination, GameCondition) and not p.kickoff_after_goal:
            raise ValueError("a GameCondition termination plays whole games: set kickoff_after_goal=True, so that "
                             "the game goes on with a kickoff after each goal")
        blue, orange = as_count("blue", p.blue, minimum=0), as_count("orange", p.orange, minimum=0)
        if blue + orange == 0:
            raise ValueError("a soccar env needs at least one car: set blue or orange to 1 or more")
        if p.physics not in PHYSICS:
            raise ValueError(f"physics must be one of {PHYSICS}, got {p.physics!r}")
        tick_skip = as_count("tick_skip", p.tick_skip)
        delay = as_count("action_delay", p.action_delay, minimum=0)
        if delay > tick_skip:
            raise ValueError(f"action_delay must be in [0, tick_skip={tick_skip}], got {delay}")
        self.num_agents = blue + orange
        # the eager tick's GJK/EPA loops, compiled or captured, run their fixed iteration counts: about a
        # quarter million launches per tick (`gjk_epa.loop_count`); the fused tick's kernels capture as they are
        self.capturable = p.physics == "fused"
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
            self._arenas[key] = Arena(num_envs, p.blue, p.orange, car=p.car, device=device, meshes=p.meshes,
                                      kickoff_after_goal=p.kickoff_after_goal)
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
            **GameState.scoreboard(num_envs, device),
        )
        active = p.mutator(arena, key, torch.ones(num_envs, c, dtype=torch.bool, device=device))
        return SoccarState(
            game=arena.state,
            events=ArenaEvents.none(num_envs, c, device),
            prev_action=torch.zeros(num_envs, c, 8, device=device),
            ticks_since_touch=torch.zeros(num_envs, dtype=torch.int64, device=device),
            touches=torch.zeros(num_envs, c, dtype=torch.int32, device=device),
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
            touches=state.touches + events.ball_touch.int(),
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
        ticks = step_ticks if p.physics == "eager" else fused_ticks
        if p.action_delay:
            game, events = ticks(game, events, state.prev_action, world, p.action_delay)
        if p.tick_skip > p.action_delay:
            game, events = ticks(game, events, controls, world, p.tick_skip - p.action_delay)
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
        """[N * C] float: 1 for the cars of the team with more goals this episode, else 0 (a level
        score is a draw)."""
        scored, conceded = state.goals()
        return (scored > conceded).float().reshape(-1)

    def episode_stats(self, state: SoccarState) -> dict[str, torch.Tensor]:
        """[N * C] per car: its team's goals (goals_for) and the other team's (goals_against) this
        episode, and the steps on which it touched the ball (touches)."""
        scored, conceded = state.goals()
        return {"goals_for": scored.reshape(-1), "goals_against": conceded.reshape(-1),
                "touches": state.touches.reshape(-1)}

    def bots(self) -> dict:
        """Scripted players (`bots`): ``bot(state, key) -> actions [N * C]`` of this env's action parser."""
        return {name: functools.partial(play, self.params.action, controls) for name, controls in BOTS.items()}


PHYSICS = ("eager", "fused")


def fused_ticks(game: GameState, events: ArenaEvents, controls: torch.Tensor, world: World,
                ticks: int) -> tuple[GameState, ArenaEvents]:
    """`step_ticks` in one fused kernel launch, on contiguous copies (the kernel writes in place)."""
    if controls.device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError(f"physics='fused' runs a Triton kernel: it needs a CUDA device (or TRITON_INTERPRET=1), "
                         f"got {controls.device}; use physics='eager' there (nitro eval: --params physics=eager)")
    game, events = tree.tree_map(lambda x: x.clone(memory_format=torch.contiguous_format), (game, events))
    launch_step_ticks_(game, events, controls.contiguous(), world, ticks)
    return game, events


def play(parser: ActionParser, controls, state: SoccarState, key: torch.Tensor) -> torch.Tensor:
    """A scripted player's ``controls(state)`` [N, C, 8] as actions of ``parser`` (its ``encode``)."""
    return parser.encode(controls(state), state)


def resolve(field: str, value):
    """A component given by name (`COMPONENTS`) as its object; objects pass through."""
    if not isinstance(value, str):
        return value
    named = COMPONENTS[field]
    if value not in named:
        raise ValueError(f"{field}={value!r} is not a named {field}; the names are {', '.join(named)} (or pass an "
                         f"object, e.g. from nitro.envs.soccar.rl)")
    return named[value]
