"""Run the batched env and the rule-by-rule reference (``reference.Game``) side by side on random legal
actions and compare, after every step, who acts, every legal-action set, every hand, the trick, bids,
tricks won, bonuses, scores, bid counters, rewards and episode ends; every state also passes
``nitro.envs.skullking.invariants``."""

from __future__ import annotations

import torch

from nitro.core import rng
from nitro.envs.skullking import cards as C
from nitro.envs.skullking import invariants
from nitro.envs.skullking.env import SkullKing
from nitro.envs.skullking.params import SkullKingParams

from tests.envs.skullking.reference import GHOST, Game


class EnvChance:
    """Feeds the reference the env's chance outcomes, read from the env's state after the step."""

    def __init__(self, env_index: int):
        self.e = env_index
        self.state = None

    def deal(self, game):
        loc = self.state.location[self.e]
        return [set((loc == s).nonzero().flatten().tolist()) for s in range(game.p.num_hands)]

    def ghost_card(self, game):
        trick, order = self.state.trick[self.e].tolist(), self.state.order[self.e].tolist()
        code = next(c for c, seat in zip(trick, order) if seat == GHOST and c >= 0)
        return C.TIGRESS if code == C.TIGRESS_ESCAPE else code

    def bendt_draw(self, game, seat):
        held = set((self.state.location[self.e] == seat).nonzero().flatten().tolist())
        return held - game.hands[seat]


def compare(env: SkullKing, s, games: list[Game], where: str) -> None:
    p = env.params
    n = p.num_players
    mask = env.action_mask(s).view(len(games), n, -1).tolist()
    acting = env.acting(s).view(len(games), n).tolist()
    loc, trick, pos, order = s.location.tolist(), s.trick.tolist(), s.pos.tolist(), s.order.tolist()
    bids, won, bonus, score = s.bids.tolist(), s.won.tolist(), s.bonus.tolist(), s.score.tolist()
    rounds, done = s.round.tolist(), s.tricks_done.tolist()
    exact, played = s.exact_bids.tolist(), s.rounds_played.tolist()
    for e, g in enumerate(games):
        ctx = f"{where} env {e} round {g.round} phase {g.phase}"
        for seat in range(n):
            legal = {a for a, ok in enumerate(mask[e][seat]) if ok}
            assert acting[e][seat] == (seat in g.acting()), ctx
            assert legal == g.legal(seat), f"{ctx} seat {seat}: env {legal} reference {g.legal(seat)}"
        assert (exact[e], played[e]) == (g.exact_bids, g.rounds_played), ctx
        if g.over:
            continue
        for seat in range(p.num_hands):
            assert {c for c, at in enumerate(loc[e]) if at == seat} == g.hands[seat], f"{ctx} hand {seat}"
        assert trick[e][: pos[e]] == g.trick and order[e] == g.order, ctx
        assert bids[e] == [-1 if b is None else b for b in g.bids], ctx
        assert (won[e], bonus[e], score[e]) == (g.won, g.bonus, g.score), ctx
        assert (rounds[e], done[e]) == (g.round, g.tricks_done), ctx


def run(params: SkullKingParams, num_envs: int, seed: int, max_steps: int = 1000) -> dict:
    """Play ``num_envs`` games to their end in both engines; returns counts of what happened."""
    env = SkullKing(params)
    key = rng.env_keys(rng.key(seed), num_envs)
    k_reset, key = rng.split(key)
    s = env.reset(k_reset, num_envs, torch.device("cpu"))
    chances = [EnvChance(e) for e in range(num_envs)]
    for c in chances:
        c.state = s
    games = [Game(params, chances[e], int(s.round[e]), int(s.round_leader[e])) for e in range(num_envs)]
    stats = {"steps": 0, "void_tricks": 0, "abilities": 0, "alliances": 0}
    n = params.num_players
    for t in range(max_steps):
        compare(env, s, games, f"step {t}")
        mask = env.action_mask(s)
        broken = dict(zip(invariants.PROPERTIES, invariants.violations(params, s, mask).tolist()))
        assert not any(broken.values()), f"step {t}: invariants broken {broken}"
        if all(g.over for g in games):
            return stats
        k_act, k_step, key = rng.split(key, 3)
        noise = rng.uniform(k_act, (num_envs, n, C.NUM_ACTIONS)).view(mask.shape)
        action = torch.where(mask, noise, -1.0).argmax(-1)
        stats["abilities"] += int((s.phase == 3).sum())
        s_next, obs, reward, terminated, truncated = env.step(s, action, k_step)
        for e, g in enumerate(games):
            if g.over:
                continue
            chances[e].state = s_next
            acts = {seat: int(action[e * n + seat]) for seat in g.acting()}
            delta = g.step(acts)
            assert torch.allclose(reward.view(-1, n)[e], torch.tensor(delta, dtype=torch.float32) * params.reward_scale)
            assert bool(terminated[e]) == g.over
            stats["alliances"] = max(stats["alliances"], len(g.alliances)) if not g.over else stats["alliances"]
        stats["void_tricks"] += int(s_next.void_tricks.sum() > s.void_tricks.sum())
        stats["steps"] += 1
        s = s_next
    raise AssertionError(f"games did not end within {max_steps} steps")
