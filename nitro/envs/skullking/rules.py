"""The rules as batched, branch-free tensor functions: lead suit, legal cards, trick resolution, scoring.

Everything here works on any leading batch shape and follows docs/reference/skullking_cardgames.md:
legality §4, resolution §5 (the "key + argmax" form of §5.4), scoring §6. A trick is a tensor of play
codes by position in play order (-1 = not played yet).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nitro.envs.skullking import cards
from nitro.envs.skullking.cards import (BLACK, ESCAPE_LIKE, KRAKEN_CLASS, MERMAID, NUMBER, PIRATE,
                                        SKULL_KING_CLASS, WHALE_CLASS)

UNDETERMINED = -2
"""Lead state while only escape-like cards have been played: the next card may set the suit."""
NO_SUIT = -1
"""Lead state of a trick led by a character or beast: nothing to follow."""


def lead_after(lead: torch.Tensor, code: torch.Tensor, first: torch.Tensor, defer: bool) -> torch.Tensor:
    """The lead state after play code ``code`` is added to a trick whose state is ``lead``.

    ``first`` marks the trick's first card. While the state is undetermined, a number card sets its suit,
    an escape-like card keeps it undetermined, and a character or beast ends it at NO_SUIT; with ``defer``
    (reading B of ambiguity A1) a character or beast after an escape-like lead keeps deferring instead."""
    t = cards.tables(code.device)
    c = code.long()
    cls, suit = t.cls[c], t.suit[c]
    other = torch.full_like(lead, NO_SUIT)
    if defer:
        other = torch.where(first, NO_SUIT, UNDETERMINED).to(lead.dtype)
    decided = torch.where(cls == NUMBER, suit.to(lead.dtype), torch.where(cls == ESCAPE_LIKE, UNDETERMINED, other))
    return torch.where(lead == UNDETERMINED, decided.to(lead.dtype), lead)


def legal_codes(hand: torch.Tensor, lead: torch.Tensor, tigress: str) -> torch.Tensor:
    """Play codes [..., 75] legal for a hand [..., 74] (bool) given the trick's lead state [...].

    A player holding a number card of the lead suit must play one of them or any special card (black is
    no free play, §4.3); otherwise every card is legal. The Tigress gives codes 66 (as a Pirate) and 74 (as
    an Escape), as ``tigress`` allows."""
    t = cards.tables(hand.device)
    suit = t.suit[: cards.NUM_CARDS]
    follows = (suit == lead.unsqueeze(-1).to(suit.dtype)) & (suit >= 0)
    must_follow = (hand & follows).any(-1, keepdim=True)
    legal = hand & (~must_follow | follows | t.special)
    tigress_card = legal[..., cards.TIGRESS : cards.TIGRESS + 1]
    as_pirate = tigress_card if tigress != "escape" else torch.zeros_like(tigress_card)
    as_escape = tigress_card if tigress != "pirate" else torch.zeros_like(tigress_card)
    return torch.cat([legal[..., : cards.TIGRESS], as_pirate, legal[..., cards.TIGRESS + 1 :], as_escape], -1)


@dataclass
class TrickOutcome:
    """What a trick resolves to; positions are in play order, -1 = none."""

    winner: torch.Tensor
    """Position of the winning card, -1 if the trick is destroyed (Kraken) or discarded (White Whale)."""
    would_have_won: torch.Tensor
    """Position that wins with every beast played as an Escape (the normal rules, §5.1)."""
    kraken: torch.Tensor
    """Position of the active Kraken, -1 if none is active."""
    whale: torch.Tensor
    """Position of the active White Whale, -1 if none is active."""
    bonus: torch.Tensor
    """The winner's bonus points from this trick (§6.2; banked only if their bid is made); 0 when void."""


def first_true(flags: torch.Tensor) -> torch.Tensor:
    """Position of the first true entry along the last dim, -1 if none."""
    size = flags.shape[-1]
    weight = torch.arange(size, 0, -1, device=flags.device)
    return torch.where(flags.any(-1), (flags * weight).argmax(-1), -1)


def resolve_trick(trick: torch.Tensor, defer: bool = False, whale_first_escape: bool = False) -> TrickOutcome:
    """Resolve tricks [..., P] of play codes in play order (-1 = empty position).

    Each card gets a key and the highest wins (§5.4): Skull King 4000, Pirate 3000, Mermaid 2000 (5000
    when the Skull King is in the trick: the first Mermaid then beats everything), black v 1000 + v, lead
    suit v 500 + v, other numbers 0, escape-like cards and beasts -100; ties go to the earlier card. If
    both beasts are in the trick, the one played second is active. An active Kraken destroys the trick;
    an active White Whale makes the highest number win whatever its suit (first played on a tie), and
    discards a trick without numbers (``whale_first_escape``: the first escape-like card wins a trick of
    escape-like cards only, ambiguity A7). ``defer`` is reading B of ambiguity A1."""
    t = cards.tables(trick.device)
    size = trick.shape[-1]
    filled = trick >= 0
    code = trick.clamp(min=0).long()
    cls = torch.where(filled, t.cls[code], -1)
    suit, value = t.suit[code], t.value[code]
    is_num = cls == NUMBER
    is_char = (cls == PIRATE) | (cls == SKULL_KING_CLASS) | (cls == MERMAID)
    tie = torch.arange(size - 1, -1, -1, device=trick.device)

    # the lead suit with beasts played as escapes (§5.2): the first card that is not escape-like sets it
    if defer:
        first_num = first_true(is_num)
        lead = torch.where(is_char[..., 0] | (first_num < 0), -1, suit.gather(-1, first_num.clamp(min=0).unsqueeze(-1)).squeeze(-1))
    else:
        setter = first_true(is_num | is_char)
        setter_suit = suit.gather(-1, setter.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        lead = torch.where(setter >= 0, setter_suit, -1)

    has_sk = (cls == SKULL_KING_CLASS).any(-1, keepdim=True)
    base = torch.where(cls == SKULL_KING_CLASS, 4000,
           torch.where(cls == PIRATE, 3000,
           torch.where(cls == MERMAID, torch.where(has_sk, 5000, 2000),
           torch.where(is_num & (suit == BLACK), 1000 + value,
           torch.where(is_num & (suit == lead.unsqueeze(-1)), 500 + value,
           torch.where(is_num, 0, torch.where(filled, -100, -1000)))))))
    normal = (base * 8 + tie).argmax(-1)

    kraken_at, whale_at = first_true(cls == KRAKEN_CLASS), first_true(cls == WHALE_CLASS)
    kraken_active = (kraken_at >= 0) & (kraken_at > whale_at)
    whale_active = (whale_at >= 0) & (whale_at > kraken_at)
    has_num = is_num.any(-1)
    whale_winner = torch.where(has_num, torch.where(is_num, value * 8 + tie, -1).argmax(-1), -1)
    if whale_first_escape:
        escapes_only = ~has_num & ~is_char.any(-1)
        whale_winner = torch.where(escapes_only, first_true(cls == ESCAPE_LIKE), whale_winner)
    winner = torch.where(kraken_active, -1, torch.where(whale_active, whale_winner, normal))

    fourteens = torch.where(filled, t.fourteen_bonus[code], 0).sum(-1)
    winner_cls = cls.gather(-1, normal.unsqueeze(-1)).squeeze(-1)
    captures = torch.where(winner_cls == PIRATE, 20 * (cls == MERMAID).sum(-1),
               torch.where(winner_cls == SKULL_KING_CLASS, 30 * (cls == PIRATE).sum(-1),
               torch.where(winner_cls == MERMAID, 40 * has_sk.squeeze(-1), 0)))
    bonus = torch.where(winner >= 0, fourteens + torch.where(whale_active, 0, captures), 0)
    return TrickOutcome(winner, normal, torch.where(kraken_active, kraken_at, -1),
                        torch.where(whale_active, whale_at, -1), bonus)


def round_points(bid: torch.Tensor, won: torch.Tensor, dealt: torch.Tensor, bonus: torch.Tensor,
                 scoring: str, cannonball: torch.Tensor | None = None) -> torch.Tensor:
    """Points of one round (§6.1, §6.4) for bids, tricks won and bonuses (all [..., n] int), ``dealt``
    cards per player. Bonuses count only on an exact bid (half of them off by one under Rascal's)."""
    diff = (won - bid).abs()
    exact = diff == 0
    if scoring == "skull_king":
        made = torch.where(bid == 0, 10 * dealt, 20 * bid) + bonus
        missed = torch.where(bid == 0, -10 * dealt, -10 * diff)
        return torch.where(exact, made, missed)
    potential = 10 * dealt + bonus
    points = torch.where(exact, potential, torch.where(diff == 1, potential // 2, 0))
    if scoring == "rascal_cannon" and cannonball is not None:
        points = torch.where(cannonball, torch.where(exact, 15 * dealt + bonus, 0), points)
    return points
