"""Done conditions as batched functions of a step: ``condition(before, after) -> [N] bool``.

Named after RLGym v2's (``rlgym.rocket_league.done_conditions``); the env takes one for termination
and one for truncation, as RLGym does. Times count RLGym's 120 ticks per second; a timeout of t
seconds fires at the first tick count k with k / 120 >= t, exactly as RLGym's float comparison does.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch

from nitro.envs.soccar.rl import common_values as V
from nitro.envs.soccar.rl.state import SoccarState

DoneCondition = Callable[[SoccarState, SoccarState], torch.Tensor]


def timeout_ticks(timeout_seconds: float) -> int:
    """The fewest ticks k with k / 120 >= timeout_seconds in floating point (RLGym's test)."""
    if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, (int, float)) or not timeout_seconds > 0:
        raise ValueError(f"timeout_seconds must be a positive number of seconds, got {timeout_seconds!r}")
    k = max(math.ceil(timeout_seconds * V.TICKS_PER_SECOND) - 1, 0)
    while k / V.TICKS_PER_SECOND < timeout_seconds:
        k += 1
    return k


@dataclasses.dataclass(frozen=True)
class GoalCondition:
    """A goal was scored during the step."""

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        return after.events.goal_blue | after.events.goal_orange


@dataclasses.dataclass(frozen=True)
class NoTouchTimeoutCondition:
    """No car has touched the ball for timeout_seconds (counted from the reset or the last touch)."""

    timeout_seconds: float

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        return after.ticks_since_touch >= timeout_ticks(self.timeout_seconds)


@dataclasses.dataclass(frozen=True)
class TimeoutCondition:
    """The episode has lasted timeout_seconds."""

    timeout_seconds: float

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        return after.game.tick_count >= timeout_ticks(self.timeout_seconds)


@dataclasses.dataclass(frozen=True)
class GameCondition:
    """A whole game is over (the env plays on after goals: ``kickoff_after_goal``): ``seconds`` of play
    have passed and the score is not level. A level score at the end goes to overtime, which the next
    goal ends, or a draw after ``max_overtime_seconds`` more (None: no limit). rlgym-tools'
    GameCondition with its ScoreboardProvider, except that the clock runs through kickoffs (the arena
    resets to a kickoff on the scoring tick, with no replay) and time is up at 0 s, not when the ball
    next touches the ground."""

    seconds: float = 300.0
    max_overtime_seconds: float | None = None

    def __post_init__(self):
        timeout_ticks(self.seconds)  # checks the values
        if self.max_overtime_seconds is not None:
            timeout_ticks(self.max_overtime_seconds)

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        game = after.game
        done = (game.tick_count >= timeout_ticks(self.seconds)) & (game.blue_score != game.orange_score)
        if self.max_overtime_seconds is not None:
            done = done | (game.tick_count >= timeout_ticks(self.seconds + self.max_overtime_seconds))
        return done


@dataclasses.dataclass(frozen=True)
class AnyCondition:
    """Any of the conditions holds."""

    conditions: tuple[DoneCondition, ...]

    def __init__(self, *conditions: DoneCondition):
        object.__setattr__(self, "conditions", tuple(conditions))

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        done = torch.zeros(after.num_envs, dtype=torch.bool, device=after.prev_action.device)
        for condition in self.conditions:
            done = done | condition(before, after)
        return done


@dataclasses.dataclass(frozen=True)
class AllCondition:
    """All of the conditions hold. (RLGym 2.0.1's AllCondition starts from False and so never fires;
    this one does what its docstring says.)"""

    conditions: tuple[DoneCondition, ...]

    def __init__(self, *conditions: DoneCondition):
        object.__setattr__(self, "conditions", tuple(conditions))

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        done = torch.ones(after.num_envs, dtype=torch.bool, device=after.prev_action.device)
        for condition in self.conditions:
            done = done & condition(before, after)
        return done
