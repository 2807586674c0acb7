"""BallNudge: a tiny soccar env for the monitor tests (training and eval replays need a soccar env,
and the soccar RL env lives elsewhere). The ball of the real arena flies from a random spot; each step
the agent may push it along x (Discrete(3): none, +x, -x) and the arena runs ``ticks`` ticks; reward
-|x| / 4096, truncated after ``max_steps``. BallNudgeDuo: the same with two agents (two teams); the ball
gets the sign of their net push and each is paid the reward (a multi-agent soccar env for the replays)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from nitro.core import rng
from nitro.core.env import Env
from nitro.core.registry import register, registered
from nitro.core.spaces import Box, Discrete
from nitro.envs.soccar import Arena, ArenaEvents, BallState, BoostPadState, CarState, GameState, World, step_ticks

ENV_ID = "BallNudge-test"
DUO_ID = "BallNudgeDuo-test"
PUSH = 300.0  # UU/s per step


@dataclass(frozen=True)
class BallNudgeParams:
    ticks: int = 2
    max_steps: int = 6


@dataclass
class BallNudgeState:
    game: GameState
    elapsed: torch.Tensor


class BallNudge(Env[BallNudgeState, BallNudgeParams]):
    Params = BallNudgeParams
    action_space = Discrete(3)
    observation_space = Box(-1e4, 1e4, (6,))
    _worlds: dict = {}

    def world(self, device: torch.device) -> World:
        if str(device) not in self._worlds:
            self._worlds[str(device)] = Arena(1, blue=0, orange=0, device=device, seed=0).world  # ball-only
        return self._worlds[str(device)]

    def reset(self, key, num_envs, device):
        ball = BallState.rest(num_envs, device)
        ball.pos = torch.stack([rng.uniform(rng.fold_in(key, 1), (num_envs,), -2000, 2000),
                                rng.uniform(rng.fold_in(key, 2), (num_envs,), -3000, 3000),
                                torch.full((num_envs,), 600.0, device=device)], -1)
        ball.vel = torch.stack([rng.uniform(rng.fold_in(key, 3), (num_envs,), -800, 800),
                                torch.zeros(num_envs, device=device), torch.zeros(num_envs, device=device)], -1)
        game = GameState(ball=ball, cars=CarState.empty(num_envs, 0, device), pads=BoostPadState.fresh(num_envs, device),
                         tick_count=torch.zeros(num_envs, dtype=torch.int64, device=device),
                         **GameState.scoreboard(num_envs, device))
        return BallNudgeState(game, torch.zeros(num_envs, dtype=torch.int32, device=device))

    def step(self, state, action, key):
        push = torch.stack([(action == 1).float() - (action == 2).float(), torch.zeros_like(action, dtype=torch.float32),
                            torch.zeros_like(action, dtype=torch.float32)], -1) * PUSH
        n = action.shape[0]
        game = dataclasses.replace(state.game, ball=dataclasses.replace(state.game.ball, vel=state.game.ball.vel + push))
        no_cars = torch.zeros(n, 0, 8, device=action.device)
        game, _ = step_ticks(game, ArenaEvents.none(n, 0, action.device), no_cars, self.world(action.device),
                             self.params.ticks)
        elapsed = state.elapsed + 1
        new = BallNudgeState(game, elapsed)
        reward = -game.ball.pos[:, 0].abs() / 4096
        return new, self.observe(new), reward, torch.zeros_like(elapsed, dtype=torch.bool), elapsed >= self.params.max_steps

    def observe(self, state):
        return torch.cat([state.game.ball.pos, state.game.ball.vel], -1) / 1000.0


class BallNudgeDuo(BallNudge):
    num_agents = 2
    agent_team = (0, 1)

    def step(self, state, action, key):
        pushes = (action.view(-1, 2) == 1).sum(1) - (action.view(-1, 2) == 2).sum(1)  # as +1, 0 or -1 pushes
        new, _, reward, terminated, truncated = super().step(state, pushes.clamp(-1, 1) % 3, key)
        return new, self.observe(new), reward.repeat_interleave(2), terminated, truncated

    def observe(self, state):
        return super().observe(state).repeat_interleave(2, 0)


def ensure_registered(env_id: str = ENV_ID) -> str:
    if env_id not in {s.id for s in registered()}:
        register(env_id, {ENV_ID: BallNudge, DUO_ID: BallNudgeDuo}[env_id])
    return env_id
