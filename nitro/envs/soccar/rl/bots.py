"""Scripted soccar players as batched policies: ``bot(state) -> controls [N, C, 8]`` for every car.

Each reads the batched `SoccarState` and decides with tensor arithmetic only (no host syncs, no
per-env loops), so thousands of games run them beside a learner in one batch. `Soccar.bots()` wraps
them into players of the env's action space (the action parser's ``encode``: the nearest of the 90
lookup actions, or the controls themselves), which is how training's league and ``nitro eval --vs``
use them, and how the transfer check plays them in the real RocketSim.

- `ball_chaser`: drives at the ball at full throttle, boosting while it faces the ball (RLBot's
  "always towards ball agent" with boost), powersliding through sharp turns.
- `shadow_defender`: "shadow and shoot". It shadows: it keeps to a point between the ball and its own
  goal (35% of the way from the goal) and waits there facing the ball. It shoots when it is goal-side
  of the ball and the ball is in its half or within 1500 UU: it drives at a point behind the ball on
  the line from the opponents' goal, so the touch sends the ball toward that goal.

Steering: RocketSim's rotation columns are forward, right, up, and steer +1 turns toward ``right``.
"""

from __future__ import annotations

import torch

from nitro.envs.soccar.rl import common_values as V
from nitro.envs.soccar.rl.state import SoccarState

STEER_GAIN = 3.0
"""Steer per radian of heading error (full lock beyond 1/3 rad, about 19 degrees)."""
BOOST_ANGLE = 0.3
"""Boost only while the target is within this many radians of the nose."""
POWERSLIDE_ANGLE = 1.6
"""Handbrake while the target is more than this many radians off the nose (about 92 degrees)."""
SHOOT_MARGIN = 200.0
"""UU the car must be behind the ball (toward its own goal) to count as goal-side and shoot."""
SHOOT_RANGE = 1500.0
"""UU from the ball within which a goal-side defender shoots even with the ball in the opponents' half."""
SHOOT_OFFSET = 400.0
"""UU behind the ball (on the line from the opponents' goal) the shooter aims at from SHOOT_SLIDE
away or more; closer, the aim slides onto the ball itself."""
SHOOT_SLIDE = 1500.0
"""UU from the ball at which the shooter's aim starts sliding from behind the ball onto it."""
SHADOW_FRACTION = 0.35
"""Where the shadowing car waits: this fraction of the way from its own goal to the ball."""
SHADOW_ARRIVED = 300.0
"""UU from its shadow point within which the defender stops and turns to face the ball."""
SHADOW_BOOST_DISTANCE = 2000.0
"""The retreating defender boosts only while farther than this from its shadow point."""
FACE_ANGLE = 0.5
"""Radians: at its shadow point the defender turns (at FACE_THROTTLE) until the ball is this close
to its nose, then coasts."""
FACE_THROTTLE = 0.3


def attack_sign(state: SoccarState) -> torch.Tensor:
    """[C] +1 for blue cars (attacking +y), -1 for orange."""
    return 1.0 - 2.0 * state.is_orange().float()


def heading_error(state: SoccarState, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the signed angle from each car's nose to ``target`` [N, C, 3] in its ground plane, positive to
    its right, [N, C]; the distance to the target [N, C])."""
    cars = state.game.cars
    offset = target - cars.pos
    forward, right = cars.rot_mat[..., 0], cars.rot_mat[..., 1]
    angle = torch.atan2((offset * right).sum(-1), (offset * forward).sum(-1))
    return angle, offset.norm(dim=-1)


def drive(state: SoccarState, target: torch.Tensor, throttle: torch.Tensor | float = 1.0,
          boost: torch.Tensor | bool = True) -> torch.Tensor:
    """Controls [N, C, 8] that steer each car at ``target`` [N, C, 3]: ``throttle``, boost (where
    ``boost``) while roughly facing it and on the ground, handbrake through sharp turns. Ground
    controls only; yaw follows steer as the lookup table's ground actions do."""
    cars = state.game.cars
    angle, _ = heading_error(state, target)
    steer = (STEER_GAIN * angle).clamp(-1.0, 1.0)
    throttle = throttle if isinstance(throttle, torch.Tensor) else torch.full_like(angle, throttle)
    boosting = (angle.abs() < BOOST_ANGLE) & cars.is_on_ground & (cars.boost > 0) & (throttle > 0) & boost
    handbrake = (angle.abs() > POWERSLIDE_ANGLE) & (throttle != 0)
    zero = torch.zeros_like(angle)
    controls = (throttle, steer, zero, steer, zero, zero, boosting.float(), handbrake.float())
    return torch.stack(controls, -1)


def ball_chaser(state: SoccarState) -> torch.Tensor:
    """Every car drives at the ball, boosting when facing it: controls [N, C, 8]."""
    ball = state.game.ball.pos.unsqueeze(1).expand_as(state.game.cars.pos)
    return drive(state, ball)


def shadow_defender(state: SoccarState) -> torch.Tensor:
    """Shadow and shoot: controls [N, C, 8] (see the module's docstring)."""
    cars = state.game.cars
    ball = state.game.ball.pos.unsqueeze(1).expand_as(cars.pos)  # [N, C, 3]
    sign = attack_sign(state)  # [C]: the y direction each car attacks
    zero = torch.zeros_like(ball[..., 0])

    # shoot: aim behind the ball on the line from the opponents' goal (at the ball's height)
    their_goal = torch.stack((zero, zero + sign * V.BACK_NET_Y, ball[..., 2]), -1)
    along = their_goal - ball
    along = along / along.norm(dim=-1, keepdim=True).clamp(min=1.0)
    closeness = ((ball - cars.pos).norm(dim=-1, keepdim=True) / SHOOT_SLIDE).clamp(max=1.0)
    shoot = drive(state, ball - along * SHOOT_OFFSET * closeness)

    # shadow: back to a point between the ball and the own goal, then face the ball there
    own_goal = torch.stack((zero, zero - sign * V.BACK_WALL_Y, cars.pos[..., 2]), -1)
    shadow_point = own_goal + (ball - own_goal) * SHADOW_FRACTION * V.device_tensor((1.0, 1.0, 0.0), ball.device)
    distance = (shadow_point - cars.pos)[..., :2].norm(dim=-1)
    retreat = drive(state, shadow_point, boost=distance > SHADOW_BOOST_DISTANCE)
    facing, _ = heading_error(state, ball)
    face = drive(state, ball, throttle=(facing.abs() > FACE_ANGLE).float() * FACE_THROTTLE, boost=False)
    shadow = torch.where((distance < SHADOW_ARRIVED).unsqueeze(-1), face, retreat)

    goal_side = (ball[..., 1] - cars.pos[..., 1]) * sign > SHOOT_MARGIN  # between the ball and its own goal
    in_reach = (ball[..., 1] * sign < 0) | ((ball - cars.pos).norm(dim=-1) < SHOOT_RANGE)
    return torch.where((goal_side & in_reach).unsqueeze(-1), shoot, shadow)


BOTS = {"ball_chaser": ball_chaser, "shadow_defender": shadow_defender}
"""The scripted players by name (``Soccar.bots()`` turns them into players of the env's action space)."""
