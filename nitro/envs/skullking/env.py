"""SkullKing-v0: the trick-taking card game for 2-8 players, batched and branch-free.

A multi-agent env (docs/API.md): ``num_agents`` = players, agent i of env e is row ``e * n + i``. Bids are
simultaneous (every player acts in the bid step); in play only the current player acts (``acting``);
rows that do not act are ignored. Actions are ids (``cards``): play codes 0-74 (cards by id, code 74 = the
Tigress as an Escape), bids BID0 + b, and the ability and cannon choices. Each seat's reward is its score
change when a round is scored, times ``reward_scale``.
"""

from __future__ import annotations

import functools

import torch

from nitro.core import rng
from nitro.core.env import Env
from nitro.core.spaces import Box, Discrete
from nitro.envs.skullking import abilities, cards, game
from nitro.envs.skullking.bots import BOTS, bot_tables
from nitro.envs.skullking.game import acting_seats
from nitro.envs.skullking.observation import obs_size, observe, relative_seats
from nitro.envs.skullking.params import SkullKingParams
from nitro.envs.skullking.state import ABILITY, BID, CANNON, PHASE_NAMES, PLAY, SkullKingState, game_tables



def warm_tables(p: SkullKingParams, device: torch.device) -> None:
    """Make every constant table of ``p`` on ``device`` (outside compiled code: compiled steps then read
    them as constants instead of rebuilding them from Python data, see `nitro.core.tables`)."""
    cards.tables(device), game_tables(p, device), bot_tables(device), relative_seats(p, device)


class SkullKing(Env[SkullKingState, SkullKingParams]):
    Params = SkullKingParams
    action_space = Discrete(cards.NUM_ACTIONS)
    truncates = False  # episodes end when their last round is scored

    def __init__(self, params: SkullKingParams | None = None):
        super().__init__(params)
        p = self.params
        self.num_agents = p.num_players
        self.agent_team = tuple(range(p.num_players))  # every player for themselves
        self.observation_space = Box.of(-float("inf"), float("inf"), (obs_size(p),))

    # --- episode start -------------------------------------------------------------------------------
    def _first_round(self, key: torch.Tensor, num_envs: int) -> torch.Tensor:
        p = self.params
        if p.start_round is not None:
            return torch.full((num_envs,), p.start_round - 1, dtype=torch.int64, device=key.device)
        if p.episode == "game":
            return torch.zeros(num_envs, dtype=torch.int64, device=key.device)
        edges = game_tables(p, key.device).round_edges
        return (rng.uniform(key, (num_envs,)).unsqueeze(1) >= edges).sum(1)

    def reset(self, key, num_envs, device):
        p = self.params
        warm_tables(p, key.device)
        k_round, k_leader, k_deal = rng.split(key, 3)
        round_index = self._first_round(k_round, num_envs)
        round_leader = rng.randint(k_leader, (num_envs,), p.num_players)  # left of a random first dealer
        per_player = dict(device=key.device, dtype=torch.int8)
        return SkullKingState(
            **game.round_fields(p, k_deal, round_index, round_leader),
            score=torch.zeros((num_envs, p.num_players), dtype=torch.int32, device=key.device),
            exact_bids=torch.zeros((num_envs, p.num_players), **per_player),
            rounds_played=torch.zeros(num_envs, **per_player),
        )

    # --- the step: a table of contents -------------------------------------------------------------------
    def step(self, state, action, key):
        p = self.params
        if p.checked:
            self.check_action(state, action)
        act = action.view(-1, p.num_players).long()
        k_ability, k_ghost, k_ghost_leads, k_deal = rng.split(key, 4)
        phase = state.phase
        s = game.reveal_bids(p, state, act, phase == BID)
        s = game.fire_cannons(p, s, act, phase == CANNON)
        s = game.play_card(p, s, act, phase == PLAY)
        s = abilities.use(p, s, act, phase == ABILITY)
        s = game.graybeard_plays(p, s, k_ghost)
        s, _, winner_code, winner_seat = game.finish_trick(p, s)
        s = abilities.trigger(p, s, winner_code, winner_seat, k_ability)
        s = game.graybeard_plays(p, s, k_ghost_leads)
        s, scored = game.score_round(p, s)
        s, terminated = game.next_round(p, s, scored, k_deal)
        reward = self._reward(state, s, terminated)
        return s, self.observe(s), reward, terminated, torch.zeros_like(terminated)

    def _reward(self, before: SkullKingState, after: SkullKingState, terminated: torch.Tensor) -> torch.Tensor:
        p = self.params
        reward = (after.score - before.score).float() * p.reward_scale
        if p.win_reward:
            best = after.score == after.score.max(1, keepdim=True).values
            reward = reward + p.win_reward * (best & terminated.unsqueeze(1))
        return reward.reshape(-1)

    # --- what the agents see and may do --------------------------------------------------------------------
    def observe(self, state):
        return observe(self.params, state)

    def acting(self, state) -> torch.Tensor:
        """[N * n] bool: the agents that decide this step."""
        return acting_seats(self.params, state).reshape(-1)

    def max_decisions(self, steps: int) -> int:
        """The most steps in which one player acts within any ``steps`` consecutive steps (a bound from the
        rules: ``game.max_decisions``)."""
        return game.max_decisions(self.params, steps)

    def action_mask(self, state) -> torch.Tensor:
        """[N * n, NUM_ACTIONS] bool: the legal actions of each acting agent; all false for the others."""
        return game.action_mask(self.params, state)

    def result(self, state) -> torch.Tensor:
        """[N * n] float: each player's total score (ratings rank players by it)."""
        return state.score.float().reshape(-1)

    def episode_stats(self, state) -> dict[str, torch.Tensor]:
        """bid_accuracy [N * n]: the share of the episode's rounds in which each player's bid was exact."""
        rounds = state.rounds_played.float().clamp(min=1).unsqueeze(1)
        return {"bid_accuracy": (state.exact_bids.float() / rounds).reshape(-1)}

    def bots(self) -> dict:
        """Scripted players (``bots``): random, basic (jAc0bll/SkullKI's heuristic) and heuristic."""
        return {name: functools.partial(bot, self.params) for name, bot in BOTS.items()}

    # --- checked mode -------------------------------------------------------------------------------------
    def check_action(self, state: SkullKingState, action: torch.Tensor) -> None:
        """Raise (CPU) or assert on the device (CUDA, no sync) unless ``action`` is [N * n] integer ids on
        the env's device with a legal action in every acting row."""
        p = self.params
        num_envs = state.phase.shape[0]
        rows = num_envs * p.num_players
        if not isinstance(action, torch.Tensor):
            raise TypeError(f"SkullKing actions must be a torch.Tensor of action ids, got {type(action).__name__}")
        if tuple(action.shape) != (rows,):
            raise ValueError(f"SkullKing actions must have shape [{rows}] (num_envs * num_players = {num_envs} * "
                             f"{p.num_players}, agent rows env-major), got {list(action.shape)}")
        if action.dtype.is_floating_point or action.dtype == torch.bool:
            raise TypeError(f"SkullKing actions must be integer action ids, got dtype {action.dtype}")
        if action.device != state.phase.device:
            raise ValueError(f"SkullKing actions are on {action.device} but the state is on {state.phase.device}; "
                             f"move them with .to({str(state.phase.device)!r})")
        mask = self.action_mask(state)
        a = action.long()
        in_range = (a >= 0) & (a < cards.NUM_ACTIONS)
        legal = in_range & mask.gather(1, a.clamp(0, cards.NUM_ACTIONS - 1).unsqueeze(1)).squeeze(1)
        ok = legal | ~self.acting(state)
        if action.device.type != "cpu" or torch.compiler.is_compiling():  # no host read in a compiled step
            torch._assert_async(ok.all(), "SkullKing: an acting agent's action is illegal (not allowed by "
                                "env.action_mask(state)); run on CPU for the row and the legal actions")
            return
        if bool(ok.all()):  # sync-ok: checked mode on CPU
            return
        row = int((~ok).nonzero()[0, 0])  # sync-ok: building the error message
        env, seat = divmod(row, p.num_players)
        allowed = [cards.action_name(i) for i in mask[row].nonzero().flatten().tolist()]  # sync-ok: error message
        phase = PHASE_NAMES[int(state.phase[env])]  # sync-ok: error message
        raise ValueError(f"SkullKing: illegal action {int(a[row])} ({cards.action_name(int(a[row]))}) for env {env} "
                         f"seat {seat} in the {phase} phase; legal: {', '.join(allowed)} (use env.action_mask(state))")
