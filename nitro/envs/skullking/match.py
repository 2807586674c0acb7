"""Matches: whole episodes with a player (a bot or a policy) in every seat, and what they show.

A *player* is ``fn(state, key [N]) -> actions [N * n]`` (the env's ``bots()`` are players; a policy
becomes one through its observations and masks). ``play`` runs ``num_envs`` episodes to their end, one
per env, and returns each seat's final score and rounds bid exactly, and the rounds played: win rates,
mean scores and bid accuracies with 95% confidence intervals come from ``MatchResult``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from nitro.core import rng
from nitro.envs.skullking.env import SkullKing
from nitro.envs.skullking.state import OVER, SkullKingState

Player = Callable[[SkullKingState, torch.Tensor], torch.Tensor]
Z95 = 1.959964
"""Two-sided 95% normal quantile for the confidence intervals."""


@dataclass
class MatchResult:
    """Per-env, per-seat outcomes of a match ([N, n] each)."""

    score: torch.Tensor
    """Final score (the episode's total)."""
    exact: torch.Tensor
    """Rounds in which the seat's bid was exactly right."""
    rounds: torch.Tensor
    """[N] rounds played."""

    def win_share(self) -> torch.Tensor:
        """[N, n]: 1 for the top score, split evenly between tied seats."""
        top = self.score == self.score.max(1, keepdim=True).values
        return top.float() / top.sum(1, keepdim=True)

    def summary(self, seats: Sequence[int]) -> dict:
        """Win rate, mean score and bid accuracy of the given seats pooled (e.g. every seat one player
        held), each with the half-width of its 95% confidence interval over games."""
        idx = torch.tensor(list(seats), device=self.score.device)
        games = self.score.shape[0]
        win = self.win_share()[:, idx].sum(1)  # per game: the share of wins these seats took
        score = self.score[:, idx].float().mean(1)
        accuracy = self.exact[:, idx].float().sum(1) / (self.rounds.float() * len(seats))
        out = {"games": games, "seats": list(seats)}
        for name, x in (("win_rate", win), ("mean_score", score), ("bid_accuracy", accuracy)):
            mean, std = x.mean(), x.std() if games > 1 else torch.zeros(())
            out[name] = float(mean)  # sync-ok: a match summary, after the match
            out[name + "_ci95"] = float(Z95 * std / math.sqrt(games))  # sync-ok
        return out


def max_steps(env: SkullKing) -> int:
    """Steps an episode can take at most: per round a bid step (and a cannon step), one step per card
    played by a player, and per trick up to two ability decisions (Bendt's two discards)."""
    p = env.params
    rounds = p.hand_sizes if p.episode == "game" else (max(p.hand_sizes),)
    per_round = 2 + max(rounds) * (p.num_players + 2)
    return len(rounds) * per_round


def play(env: SkullKing, players: Sequence[Player], num_envs: int, key: torch.Tensor,
         device: torch.device | str = "cpu", check_every: int = 32) -> MatchResult:
    """Play ``num_envs`` episodes with ``players[i]`` in seat i; the same object in several seats is
    asked once per step. Stops when every episode is over (looked at every ``check_every`` steps)."""
    p = env.params
    n = p.num_players
    if len(players) != n:
        raise ValueError(f"play needs one player per seat: {n} for num_players={n}, got {len(players)}")
    device = torch.device(device)
    k_reset, key = rng.split(rng.env_keys(key.to(device), num_envs))
    s = env.reset(k_reset, num_envs, device)
    seat = torch.arange(n, device=device).repeat(num_envs)
    distinct = list(dict.fromkeys(players))
    limit = max_steps(env)
    for t in range(limit + 1):
        if (t % check_every == 0 or t == limit) and bool((s.phase == OVER).all()):  # sync-ok: every check_every steps
            return MatchResult(s.score, s.exact_bids, s.rounds_played)
        keys = rng.split(key, len(distinct) + 2)
        key = keys[-1]
        chosen = {id(pl): pl(s, k) for pl, k in zip(distinct, keys)}
        action = torch.zeros(num_envs * n, dtype=torch.int64, device=device)
        for i, pl in enumerate(players):
            action = torch.where(seat == i, chosen[id(pl)], action)
        s = env.step(s, action, keys[-2])[0]
    raise RuntimeError(f"episodes did not end within {limit} steps; the env's step bound is wrong")
