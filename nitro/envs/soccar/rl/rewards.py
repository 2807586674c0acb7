"""Rewards as batched functions of a step: ``reward(before, after) -> [N, C]`` float32, one value per car.

``before`` is the state the step started from and ``after`` the one it reached (whose ``events`` say
what happened during the step), so a reward needs no memory of its own. Each class is a frozen
dataclass named after the reference it ports (RLGym v2, rlgym-tools 2.6.5, GigaLearnCPP's
``Rewards/CommonRewards.h``) and computes what that class computes; `CombinedReward` weights and sums
them, `ZeroSumReward` shares them within and across teams. Cars that sit the episode out get 0.

A new reward is any callable ``(before: SoccarState, after: SoccarState) -> Tensor [N, C]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from nitro.envs.soccar.rl import common_values as V
from nitro.envs.soccar.rl.state import SoccarState

Reward = Callable[[SoccarState, SoccarState], torch.Tensor]


def unit(v: torch.Tensor) -> torch.Tensor:
    """v / |v| (NaN for a zero vector, as the references' normalisations give)."""
    return v / v.norm(dim=-1, keepdim=True)


def seconds(before: SoccarState, after: SoccarState) -> torch.Tensor:
    """[N, 1] seconds the step lasted, at RLGym's 120 ticks/s."""
    return ((after.game.tick_count - before.game.tick_count).float() / V.TICKS_PER_SECOND).unsqueeze(-1)


def car_to_ball(state: SoccarState) -> torch.Tensor:
    """[N, C, 3] unit vectors from each car to the ball."""
    return unit(state.game.ball.pos.unsqueeze(1) - state.game.cars.pos)


def team_sign(state: SoccarState) -> torch.Tensor:
    """[C] int64: 0 for blue cars, 1 for orange."""
    return state.is_orange().long()


# --- RLGym v2 -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GoalReward:
    """+1 to the scoring team's cars, ``concede`` to the others, on the step of a goal (RLGym's
    GoalReward; GigaLearn's with concedeScale)."""

    concede: float = -1.0

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        scorer = after.goal_team().unsqueeze(-1)
        return torch.where(scorer < 0, 0.0, torch.where(team_sign(after) == scorer, 1.0, self.concede))


@dataclasses.dataclass(frozen=True)
class TouchReward:
    """1 to each car that touched the ball during the step (RLGym's TouchReward; GigaLearn's
    TouchBallReward)."""

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        return after.ball_touched().float()


@dataclasses.dataclass(frozen=True)
class CombinedReward:
    """The weighted sum of rewards: ``CombinedReward((GoalReward(), 10.0), (TouchReward(), 0.1))``
    (RLGym's CombinedReward; a bare reward has weight 1)."""

    rewards: tuple[tuple[Reward, float], ...]

    def __init__(self, *rewards_and_weights):
        pairs = tuple(r if isinstance(r, tuple) else (r, 1.0) for r in rewards_and_weights)
        for reward, weight in pairs:
            if not callable(reward) or isinstance(weight, bool) or not isinstance(weight, (int, float)):
                raise TypeError(f"CombinedReward takes rewards or (reward, weight) pairs, got {(reward, weight)!r}")
        object.__setattr__(self, "rewards", pairs)

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        total = torch.zeros(after.num_envs, after.num_cars, device=after.prev_action.device)
        for reward, weight in self.rewards:
            total = total + weight * reward(before, after)
        return total


# --- rlgym-tools ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class VelocityPlayerToBallReward:
    """Each car's velocity toward the ball / CAR_MAX_SPEED: rlgym-tools' VelocityPlayerToBallReward
    (times the step's seconds, so full speed at the ball earns 1 per second) or, with
    ``per_second=False``, GigaLearn's (per step, unscaled)."""

    include_negative_values: bool = True
    per_second: bool = True

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        r = (car_to_ball(after) * after.game.cars.vel).sum(-1) / V.CAR_MAX_SPEED
        if self.per_second:
            r = r * seconds(before, after)
        return r if self.include_negative_values else r.clamp(min=0.0)


@dataclasses.dataclass(frozen=True)
class BoostKeepReward:
    """sqrt(boost / 100) x reward_per_second x the step's seconds (rlgym-tools' BoostKeepReward with
    its default activation)."""

    reward_per_second: float = 1.0

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        return torch.sqrt(0.01 * after.game.cars.boost) * self.reward_per_second * seconds(before, after)


@dataclasses.dataclass(frozen=True)
class BoostChangeReward:
    """The change of sqrt(boost / 100) over the step, gains x gain_weight and losses x lose_weight
    (rlgym-tools' BoostChangeReward with its default activation)."""

    gain_weight: float = 1.0
    lose_weight: float = 1.0

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        delta = torch.sqrt(0.01 * after.game.cars.boost) - torch.sqrt(0.01 * before.game.cars.boost)
        return torch.where(delta > 0, delta * self.gain_weight, delta * self.lose_weight)


@dataclasses.dataclass(frozen=True)
class DemoReward:
    """attacker_reward to a car whose bump victim (its car contact, while the contact cooldown runs)
    was demolished during the step, minus victim_punishment to that victim (rlgym-tools' DemoReward
    with bump_acceleration_reward 0)."""

    attacker_reward: float = 1.0
    victim_punishment: float = 1.0

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        cars, c = after.game.cars, after.num_cars
        victim = (cars.car_contact_id.long() - 1).clamp(0, max(c - 1, 0))
        has_victim = (cars.car_contact_cooldown_timer > 0) & (cars.car_contact_id > 0)
        newly_demoed = (cars.demo_respawn_timer > 0) & ~(before.game.cars.demo_respawn_timer > 0)
        attack = has_victim & newly_demoed.gather(1, victim)  # [N, C] attacker
        punished = torch.zeros_like(cars.boost).scatter_add(1, victim, attack.float())
        return attack * self.attacker_reward - punished * self.victim_punishment


@dataclasses.dataclass(frozen=True)
class AdvancedTouchReward:
    """touch_reward per touch plus acceleration_reward x |ball velocity change| / BALL_MAX_SPEED for
    each car that touched the ball (rlgym-tools' AdvancedTouchReward; a step counts one touch)."""

    touch_reward: float = 1.0
    acceleration_reward: float = 0.0

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        accel = (after.game.ball.vel - before.game.ball.vel).norm(dim=-1, keepdim=True) / V.BALL_MAX_SPEED
        return after.ball_touched() * (self.touch_reward + self.acceleration_reward * accel)


@dataclasses.dataclass(frozen=True)
class AerialHeightReward:
    """On a touch, the touch height above the ramps: max(0, (car z + ball z) / 2 - 256) / 5120 x
    touch_height_weight (rlgym-tools' AerialDistanceReward for a first aerial touch, without its chain
    of distances between consecutive touches)."""

    touch_height_weight: float = 1.0

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        height = (after.game.cars.pos[..., 2] + after.game.ball.pos[:, 2:]) / 2
        r = (height - V.RAMP_HEIGHT).clamp(min=0.0) / V.BACK_WALL_Y
        return after.ball_touched() * r * self.touch_height_weight


# --- GigaLearnCPP -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class VelocityBallToGoalReward:
    """The ball's velocity toward the back of the opponents' goal (own_goal: one's own) /
    BALL_MAX_SPEED (GigaLearn's VelocityBallToGoalReward)."""

    own_goal: bool = False

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        ball = after.game.ball
        goals = V.device_tensor((V.ORANGE_GOAL_BACK, V.BLUE_GOAL_BACK), ball.pos.device)
        target = goals[team_sign(after) ^ int(self.own_goal)]  # [C, 3]: blue aims at orange's goal
        direction = unit(target - ball.pos.unsqueeze(1))
        return (direction * (ball.vel / V.BALL_MAX_SPEED).unsqueeze(1)).sum(-1)


@dataclasses.dataclass(frozen=True)
class FaceBallReward:
    """forward . (unit vector to the ball) (GigaLearn's FaceBallReward)."""

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        return (after.game.cars.rot_mat[..., 0] * car_to_ball(after)).sum(-1)


@dataclasses.dataclass(frozen=True)
class AirReward:
    """1 while the car is off the ground (GigaLearn's AirReward)."""

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        return (~after.game.cars.is_on_ground).float()


@dataclasses.dataclass(frozen=True)
class SaveBoostReward:
    """(boost / 100) ^ exponent (GigaLearn's SaveBoostReward)."""

    exponent: float = 0.5

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        return torch.pow(after.game.cars.boost / 100, self.exponent).clamp(0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class PickupBoostReward:
    """sqrt(boost / 100) - sqrt(previous / 100) when the boost rose (GigaLearn's PickupBoostReward)."""

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        now, prev = after.game.cars.boost, before.game.cars.boost
        return torch.where(now > prev, torch.sqrt(now / 100) - torch.sqrt(prev / 100), 0.0)


@dataclasses.dataclass(frozen=True)
class StrongTouchReward:
    """On a touch: 0 below min_kph of ball velocity change, else min(1, change / max_kph)
    (GigaLearn's StrongTouchReward)."""

    min_kph: float = 20.0
    max_kph: float = 130.0

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        hit = (after.game.ball.vel - before.game.ball.vel).norm(dim=-1, keepdim=True)
        r = torch.where(hit < self.min_kph * V.KPH_TO_VEL, 0.0, (hit / (self.max_kph * V.KPH_TO_VEL)).clamp(max=1.0))
        return after.ball_touched() * r


@dataclasses.dataclass(frozen=True)
class TouchAccelReward:
    """On a touch: the rise of min(1, ball speed / 110 km/h), if it rose (GigaLearn's TouchAccelReward)."""

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        top = 110 * V.KPH_TO_VEL
        now = (after.game.ball.vel.norm(dim=-1) / top).clamp(max=1.0)
        prev = (before.game.ball.vel.norm(dim=-1) / top).clamp(max=1.0)
        return after.ball_touched() * (now - prev).clamp(min=0.0).unsqueeze(-1)


@dataclasses.dataclass(frozen=True)
class ZeroSumReward:
    """r (1 - team_spirit) + team_spirit x (team's mean r) - opponent_scale x (opponents' mean r)
    (GigaLearn's ZeroSumReward; means over the cars playing)."""

    reward: Reward
    team_spirit: float = 0.0
    opponent_scale: float = 1.0

    def __call__(self, before: SoccarState, after: SoccarState) -> torch.Tensor:
        r = self.reward(before, after) * after.active
        team = torch.nn.functional.one_hot(team_sign(after), 2).float()  # [C, 2]
        mean = (r @ team) / (after.active.float() @ team).clamp(min=1.0)  # [N, 2]
        own, other = mean @ team.T, mean.flip(-1) @ team.T  # [N, C]
        return r * (1 - self.team_spirit) + own * self.team_spirit - other * self.opponent_scale
