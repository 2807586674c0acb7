"""The soccar env's state: the arena's `GameState` plus what the RL layer keeps between steps.

Cars are the arena's, blue first: car ``i`` of env ``e`` is agent row ``e * C + i``. The team layout
(``blue``, ``orange``) rides along as static ints, so observations, rewards and conditions are pure
functions of this state.
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.envs.soccar import ArenaEvents, CarState, GameState
from nitro.envs.soccar.rl import common_values as V


@dataclasses.dataclass
class SoccarState:
    """A batch of soccar episodes [N, ...]."""

    game: GameState
    """Ball, cars, pads and tick count (tick_count counts the episode's ticks, as RLGym's GameState)."""
    events: ArenaEvents
    """What happened during the step that led here (nothing right after a reset)."""
    prev_action: torch.Tensor
    """The controls each car was given at the last step (zeros after a reset) [N, C, 8]; the cars hold
    them through the next step's action delay (GigaLearn's `Player.prevAction`)."""
    ticks_since_touch: torch.Tensor
    """Ticks since any car touched the ball, or since the reset [N] int64."""
    touches: torch.Tensor
    """Steps of the episode on which each car touched the ball [N, C] int32."""
    active: torch.Tensor
    """Cars that play this episode [N, C] bool (all, unless a team-size mutator benched some); the
    others are parked and read as absent (zero-padded) in observations."""
    blue: int
    """Cars on the blue team (the first ``blue`` cars), static."""
    orange: int
    """Cars on the orange team (the rest), static."""

    @property
    def num_envs(self) -> int:
        return self.prev_action.shape[0]

    @property
    def num_cars(self) -> int:
        return self.blue + self.orange

    def is_orange(self) -> torch.Tensor:
        """[C] bool: the car plays for orange (its observations are mirrored)."""
        return torch.arange(self.num_cars, device=self.prev_action.device) >= self.blue

    def ball_touched(self) -> torch.Tensor:
        """[N, C] bool: the car touched the ball during the last step."""
        return self.events.ball_touch

    def goals(self) -> tuple[torch.Tensor, torch.Tensor]:
        """([N, C] goals each car's team scored this episode, [N, C] goals it conceded), int32."""
        g, orange = self.game, self.is_orange()
        scored = torch.where(orange, g.orange_score.unsqueeze(1), g.blue_score.unsqueeze(1))
        conceded = torch.where(orange, g.blue_score.unsqueeze(1), g.orange_score.unsqueeze(1))
        return scored, conceded

    def goal_team(self) -> torch.Tensor:
        """[N] int64: the team that scored during the last step (0 blue, 1 orange), -1 if none."""
        e = self.events
        return torch.where(e.goal_blue, V.BLUE_TEAM, torch.where(e.goal_orange, V.ORANGE_TEAM, -1))


def has_flip_or_jump(cars: CarState) -> torch.Tensor:
    """RocketSim's (GigaLearn's vendored) `CarState::HasFlipOrJump` [N, C] bool: on the ground, or in
    the air with neither a flip nor a double jump used within DOUBLEJUMP_MAX_DELAY of the jump."""
    return cars.is_on_ground | (
        ~cars.has_flipped & ~cars.has_double_jumped & (cars.air_time_since_jump < V.DOUBLEJUMP_MAX_DELAY)
    )
