"""Scripted Skull King players, batched on the device: ``bot(params, state, key) -> actions [N * n]``.

- ``random``: a uniformly random legal action for every acting seat.
- ``basic``: the public heuristic of jAc0bll/SkullKI (``agents/src/heuristic_agent.cpp``), re-implemented
  batched: bid the rounded sum of fixed per-card win chances; play the cheapest card that wins the trick
  as it stands while tricks are still needed, else the weakest card (the leader counts trumps and
  characters as winners). The baseline the issue compares ``heuristic`` with.
- ``heuristic``: the same want-to-win / want-to-lose plan with better estimates: per-card win chances that
  fall with the number of players, a chance that a card winning now *holds* against the cards still to
  come, and, when no more tricks are wanted, shedding the strongest card that loses (keeping the weak ones
  for later) instead of the weakest.

A bot fills every row: each seat's own bid (and cannon), and in play or an ability the current decider's
choice copied to all of the env's rows (the env reads only the acting row). Pirate abilities (advanced)
get simple rules: Rosie leads herself while she needs tricks, Rascal wagers nothing, Harry moves the bid
toward the tricks won plus the hand's expected wins, Bendt discards his weakest card while he needs
tricks and his strongest otherwise.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from nitro.core import rng
from nitro.envs.skullking import cards, rules
from nitro.envs.skullking.cards import BLACK, ESCAPE_LIKE, MERMAID, NUMBER, PIRATE, SKULL_KING_CLASS
from nitro.envs.skullking.game import action_mask, current_seat, gather_at, one_hot
from nitro.envs.skullking.params import SkullKingParams
from nitro.envs.skullking.state import (ABILITY, ABILITY_BENDT, ABILITY_HARRY, ABILITY_ROSIE, BID, CANNON,
                                        SkullKingState, hand_size)


def random(p: SkullKingParams, s: SkullKingState, key: torch.Tensor) -> torch.Tensor:
    """A uniformly random legal action in every acting row (0 in the others)."""
    mask = action_mask(p, s)
    noise = rng.uniform(key, (key.shape[0], p.num_players * cards.NUM_ACTIONS)).view(mask.shape)
    return torch.where(mask, noise, -1.0).argmax(-1)


# --- per-code tables -------------------------------------------------------------------------------------
def _strength(c: int) -> float:
    """A fixed order of how hard a card is to beat (which card is "cheapest" or "strongest")."""
    cls, v = cards.CLASS[c], cards.VALUE[c]
    if cls == NUMBER:
        return v + (14.0 if cards.SUIT[c] == BLACK else 0.0)
    return {SKULL_KING_CLASS: 100.0, PIRATE: 90.0, MERMAID: 80.0, ESCAPE_LIKE: 0.0}.get(cls, 0.5)


def _bid_chance(c: int) -> float:
    """Chance (four players) that the card takes a trick: specials by rank, black by value, and the top
    of the other suits; escape-like cards and beasts take none."""
    cls, v = cards.CLASS[c], cards.VALUE[c]
    if cls == NUMBER:
        if cards.SUIT[c] == BLACK:
            return 0.12 + 0.058 * v
        return {14: 0.5, 13: 0.38, 12: 0.26, 11: 0.15, 10: 0.08, 9: 0.05}.get(v, 0.02)
    return {SKULL_KING_CLASS: 0.96, PIRATE: 0.85, MERMAID: 0.62}.get(cls, 0.0)


def _hold_chance(c: int, lead: bool) -> float:
    """Chance that one opponent still to play does not beat the card (``lead``: a number card of the
    suit to follow, or one that sets it)."""
    cls, v = cards.CLASS[c], cards.VALUE[c]
    if cls == NUMBER:
        if cards.SUIT[c] == BLACK:
            return 0.6 + 0.028 * v
        return 0.35 + 0.045 * v if lead else 0.0
    return {SKULL_KING_CLASS: 0.96, PIRATE: 0.92, MERMAID: 0.85, ESCAPE_LIKE: 0.1}.get(cls, 0.0)


def _basic_chance(c: int) -> float:
    """jAc0bll's ``bidEquity``: Skull King .95, Pirate .8, Tigress .7, Mermaid .55, black .1 + .06 v,
    others .4 (13-14), .22 (11-12), .1 (8-10), .03."""
    cls, v = cards.CLASS[c], cards.VALUE[c]
    if c in (cards.TIGRESS, cards.TIGRESS_ESCAPE):
        return 0.7
    if cls == NUMBER:
        if cards.SUIT[c] == BLACK:
            return 0.1 + 0.06 * v
        return 0.4 if v >= 13 else 0.22 if v >= 11 else 0.1 if v >= 8 else 0.03
    return {SKULL_KING_CLASS: 0.95, PIRATE: 0.8, MERMAID: 0.55}.get(cls, 0.0)


def _basic_strength(c: int, lead: bool) -> float:
    """jAc0bll's ``cardStrength``: Skull King 1000, Pirate 900, Tigress 850, Mermaid 800, black
    600 + 15 v, lead suit 300 + 10 v, other numbers v, escapes 0."""
    cls, v = cards.CLASS[c], cards.VALUE[c]
    if c == cards.TIGRESS:
        return 850.0
    if cls == NUMBER:
        return 600.0 + 15 * v if cards.SUIT[c] == BLACK else 300.0 + 10 * v if lead else float(v)
    return {SKULL_KING_CLASS: 1000.0, PIRATE: 900.0, MERMAID: 800.0}.get(cls, 0.0)


@lru_cache(maxsize=None)
def _tables(device: torch.device) -> dict[str, torch.Tensor]:
    t = lambda values: torch.tensor(values, dtype=torch.float32, device=device)  # noqa: E731
    codes = range(cards.NUM_CODES)
    return {
        "strength": t([_strength(c) for c in codes]),
        "bid_chance": t([_bid_chance(c) for c in range(cards.NUM_CARDS)]),
        "hold_lead": t([_hold_chance(c, True) for c in codes]),
        "hold_other": t([_hold_chance(c, False) for c in codes]),
        "basic_chance": t([_basic_chance(c) for c in range(cards.NUM_CARDS)]),
        "basic_lead": t([_basic_strength(c, True) for c in codes]),
        "basic_other": t([_basic_strength(c, False) for c in codes]),
    }


# --- what every plan needs ------------------------------------------------------------------------------
def _hands(p: SkullKingParams, s: SkullKingState) -> torch.Tensor:
    """[N, n, 74] bool: each player's cards."""
    return s.location.unsqueeze(1) == torch.arange(p.num_players, device=s.location.device).view(1, -1, 1)


def _bid_actions(p: SkullKingParams, s: SkullKingState, chance: torch.Tensor, exponent: float) -> torch.Tensor:
    """[N, n] bid actions: the rounded sum of the hand's chances (each raised to ``exponent``), 0..dealt."""
    expected = (_hands(p, s).float() * chance.pow(exponent)).sum(-1)
    dealt = hand_size(p, s.round).unsqueeze(1)
    return cards.BID0 + torch.minimum(torch.floor(expected + 0.5).long(), dealt.long())


def _wins_now(p: SkullKingParams, s: SkullKingState) -> torch.Tensor:
    """[N, 75] bool: play code c would win the current trick as it stands (beasts included)."""
    h, device = p.num_hands, s.trick.device
    codes = torch.arange(cards.NUM_CODES, device=device, dtype=s.trick.dtype).view(1, -1, 1)
    here = one_hot(s.pos.clamp(max=h - 1), h).unsqueeze(1)  # [N, 1, H]
    trick = torch.where(here, codes, s.trick.unsqueeze(1))
    out = rules.resolve_trick(trick, p.escape_then_character == "defer", p.whale_escapes_only == "first_escape")
    return out.winner == s.pos.long().unsqueeze(1)


class _Turn:
    """The decider's view of a play or ability decision: seat, hand, legal codes, tricks still wanted."""

    def __init__(self, p: SkullKingParams, s: SkullKingState):
        n = p.num_players
        self.seat = torch.where(s.phase == ABILITY, s.ability_seat, current_seat(p, s)).long().clamp(max=n - 1)
        self.hand = s.location == self.seat.unsqueeze(1).to(s.location.dtype)  # [N, 74]
        self.legal = rules.legal_codes(self.hand, s.lead, p.tigress)  # [N, 75]
        bid, won = gather_at(s.bids, self.seat).long(), gather_at(s.won, self.seat).long()
        self.need = bid - won
        self.left = (hand_size(p, s.round) - s.tricks_done).long()  # tricks left, the current one included
        self.wins = _wins_now(p, s) & self.legal
        self.lead_suit = cards.tables(s.lead.device).suit == s.lead.unsqueeze(1)  # [N, 75]: numbers to follow


def _pick(score: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    return torch.where(legal, score, -torch.inf).argmax(-1)


def _ability_actions(p: SkullKingParams, s: SkullKingState, turn: _Turn, strength: torch.Tensor,
                     expected: torch.Tensor) -> torch.Tensor:
    """[N] the decider's ability choice (see the module docstring)."""
    want = turn.need > 0
    rosie = cards.ROSIE0 + (~want).long()
    dealt = hand_size(p, s.round).long()
    bid = gather_at(s.bids, turn.seat).long()
    won = gather_at(s.won, turn.seat).long()
    target = won + torch.floor(expected + 0.5).long()
    step = (target - bid).clamp(-1, 1)
    step = torch.where((bid + step < 0) | (bid + step > dealt), 0, step)
    harry = cards.HARRY0 + 1 + step
    card_strength = strength[: cards.NUM_CARDS].expand_as(turn.hand)
    discard = _pick(torch.where(want.unsqueeze(1), -card_strength, card_strength), turn.hand)
    kind = s.ability.long()
    return torch.where(kind == ABILITY_ROSIE, rosie, torch.where(kind == ABILITY_HARRY, harry,
                       torch.where(kind == ABILITY_BENDT, discard, cards.RASCAL0)))


def _assemble(p: SkullKingParams, s: SkullKingState, bids: torch.Tensor, decision: torch.Tensor) -> torch.Tensor:
    """Rows [N * n]: each seat's bid or cannon, or the decider's play / ability choice in every row."""
    phase = s.phase.long().unsqueeze(1)
    rows = torch.where(phase == BID, bids, torch.where(phase == CANNON, cards.CANNON0, decision.unsqueeze(1)))
    return rows.reshape(-1)


# --- the two heuristics ---------------------------------------------------------------------------------
def heuristic(p: SkullKingParams, s: SkullKingState, key: torch.Tensor) -> torch.Tensor:
    """Hand-strength bids and want-to-win / want-to-lose play (see the module docstring)."""
    t = _tables(s.location.device)
    exponent = (p.num_players - 1) / 3  # a card beats each of 3 opponents with chance x: x^(1/3) per opponent
    bids = _bid_actions(p, s, t["bid_chance"], exponent)
    turn = _Turn(p, s)
    after = (p.num_hands - 1 - s.pos.long()).clamp(min=0).unsqueeze(1)  # cards still to come in this trick
    per_opponent = torch.where(turn.lead_suit | turn.wins, t["hold_lead"], t["hold_other"])
    hold = turn.wins * per_opponent.pow(after)  # [N, 75]
    strength = t["strength"].expand_as(hold)
    want = (turn.need > 0).unsqueeze(1)
    all_of_them = (turn.need >= turn.left).unsqueeze(1)
    safe = hold >= 0.5
    has_safe = (safe & turn.legal).any(-1, keepdim=True)
    win_score = torch.where(all_of_them, 1000 * hold + strength,
                torch.where(has_safe, torch.where(safe, 1000 - strength, -1000 + hold),
                            torch.where(hold > 0, 1000 * hold, -strength)))
    lose_score = -1000 * hold + strength
    play = _pick(torch.where(want, win_score, lose_score), turn.legal)
    expected = (turn.hand.float() * t["bid_chance"].pow(exponent)).sum(-1)
    decision = torch.where(s.phase == ABILITY, _ability_actions(p, s, turn, t["strength"], expected), play)
    return _assemble(p, s, bids, decision)


def basic(p: SkullKingParams, s: SkullKingState, key: torch.Tensor) -> torch.Tensor:
    """jAc0bll/SkullKI's heuristic agent, batched (see the module docstring)."""
    t = _tables(s.location.device)
    bids = _bid_actions(p, s, t["basic_chance"], 1.0)
    turn = _Turn(p, s)
    strength = torch.where(turn.lead_suit, t["basic_lead"], t["basic_other"])
    leading = (s.pos == 0).unsqueeze(1)
    wins = torch.where(leading, strength >= 500, turn.wins)
    want = (turn.need > 0).unsqueeze(1)
    all_of_them = (turn.need >= turn.left).unsqueeze(1)
    score = torch.where(all_of_them, strength,
            torch.where(want, torch.where(wins, 1e4 - strength, -strength),
                        torch.where(wins, -strength - 1e4, -strength)))
    # the Tigress is a Pirate while tricks are wanted, else an Escape (where both are allowed)
    both = turn.legal[:, cards.TIGRESS] & turn.legal[:, cards.TIGRESS_ESCAPE]
    other_mode = torch.where(want.squeeze(1), cards.TIGRESS_ESCAPE, cards.TIGRESS)
    legal = turn.legal & ~(one_hot(other_mode, cards.NUM_CODES) & both.unsqueeze(1))
    play = _pick(score, legal)
    expected = (turn.hand.float() * t["basic_chance"]).sum(-1)
    decision = torch.where(s.phase == ABILITY, _ability_actions(p, s, turn, t["strength"], expected), play)
    return _assemble(p, s, bids, decision)


BOTS = {"random": random, "basic": basic, "heuristic": heuristic}
"""The scripted players by name (``SkullKing.bots()`` binds them to the env's params)."""
