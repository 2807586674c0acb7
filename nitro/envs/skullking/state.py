"""The batched game state, the deal, and the seat arithmetic every stage shares.

Seats are 0..n-1 clockwise; with two players Graybeard's ghost hand is seat 2. Every field has the env
axis first; small integers are int8 to keep a state near 200 bytes per four-player game.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from nitro.core import rng
from nitro.envs.skullking import cards
from nitro.envs.skullking.params import SkullKingParams

# where a card is (``location`` values >= 0 are the seat holding it)
DECK = -1
"""Undealt this round."""
PLAYED = -2
"""Played in this round (in a finished trick or the current one)."""
OUT = -3
"""Not in this game's deck, or discarded (Bendt's ability)."""

# phases
BID, CANNON, PLAY, ABILITY, OVER = 0, 1, 2, 3, 4
PHASE_NAMES = ("bid", "cannon", "play", "ability", "over")
"""OVER: the episode has ended; nobody acts and a step changes nothing (auto-reset replaces the state)."""

# pending pirate abilities (index = pirate id - ROSIE)
NO_ABILITY = -1
ABILITY_ROSIE, ABILITY_BENDT, ABILITY_RASCAL, ABILITY_JUANITA, ABILITY_HARRY = range(5)


@dataclass
class SkullKingState:
    location: torch.Tensor
    """[N, 74] int8: seat holding each card, or DECK / PLAYED / OUT."""
    trick: torch.Tensor
    """[N, H] int8: play code at each position of the current trick in play order, -1 = not yet played
    (H = hands: players, plus Graybeard with two)."""
    order: torch.Tensor
    """[N, H] int8: seat playing at each position of the current trick."""
    pos: torch.Tensor
    """[N] int8: cards played in the current trick."""
    lead: torch.Tensor
    """[N] int8: lead state of the current trick (rules.UNDETERMINED, rules.NO_SUIT or a suit 0-3)."""
    round_leader: torch.Tensor
    """[N] int8: seat that led this round's first trick (left of the dealer)."""
    round: torch.Tensor
    """[N] int8: index of this round in the schedule."""
    tricks_done: torch.Tensor
    """[N] int8: finished tricks this round (won or destroyed)."""
    void_tricks: torch.Tensor
    """[N] int8: tricks this round that nobody won (Kraken, or a White Whale without numbers)."""
    phase: torch.Tensor
    """[N] int8: BID, CANNON, PLAY, ABILITY or OVER."""
    bids: torch.Tensor
    """[N, n] int8: each player's bid this round, -1 before the bids are revealed."""
    won: torch.Tensor
    """[N, n] int8: tricks won this round."""
    bonus: torch.Tensor
    """[N, n] int32: bonus points captured this round (banked only on an exact bid)."""
    score: torch.Tensor
    """[N, n] int32: total score."""
    ally: torch.Tensor
    """[N, 2, 2] int8: per Loot card, (its player, the winner it allied with), -1 = no alliance."""
    cannonball: torch.Tensor
    """[N, n] bool: chose the Cannonball (Rascal's scoring with cannons)."""
    wager: torch.Tensor
    """[N, n] int8: Rascal of Roatan's wager (0, 10 or 20) this round."""
    seen_deck: torch.Tensor
    """[N, n] bool: has looked at the undealt cards this round (Juanita Jade)."""
    ability: torch.Tensor
    """[N] int8: the pirate ability waiting for its decision (NO_ABILITY or ABILITY_*)."""
    ability_seat: torch.Tensor
    """[N] int8: who decides the pending ability."""
    discards: torch.Tensor
    """[N] int8: cards Bendt's player still has to discard."""
    exact_bids: torch.Tensor
    """[N, n] int8: rounds of this episode in which each player's bid was exactly right."""
    rounds_played: torch.Tensor
    """[N] int8: rounds of this episode scored so far."""


def hand_size(params: SkullKingParams, round_index: torch.Tensor) -> torch.Tensor:
    """Cards dealt per hand in round ``round_index`` ([N] -> [N] int32)."""
    sizes = torch.tensor(params.hand_sizes, dtype=torch.int32, device=round_index.device)
    return sizes[round_index.long()]


def play_order(params: SkullKingParams, leader: torch.Tensor, round_leader: torch.Tensor) -> torch.Tensor:
    """Seats [N, H] in play order for a trick led by ``leader``: clockwise, or with two players the
    leader, Graybeard (seat 2), then the other player; a trick Graybeard leads continues with the round's
    leader, then the other player."""
    n = params.num_players
    k = torch.arange(params.num_hands, device=leader.device, dtype=torch.int32)
    if n > 2:
        return ((leader.int().unsqueeze(-1) + k) % n).to(torch.int8)
    human = torch.where(leader == 2, round_leader, leader).int().unsqueeze(-1)
    ghost_first = (leader == 2).unsqueeze(-1)
    led_by_human = torch.where(k == 0, human, torch.where(k == 1, 2, 1 - human))
    led_by_ghost = torch.where(k == 0, 2, torch.where(k == 1, human, 1 - human))
    return torch.where(ghost_first, led_by_ghost, led_by_human).to(torch.int8)


@lru_cache(maxsize=None)
def deck_mask(params: SkullKingParams, device: torch.device) -> torch.Tensor:
    """[74] bool: the cards in this game's deck."""
    return torch.tensor([c in params.deck for c in range(cards.NUM_CARDS)], dtype=torch.bool, device=device)


def deal(params: SkullKingParams, key: torch.Tensor, round_index: torch.Tensor) -> torch.Tensor:
    """Shuffle the whole deck and deal ``hand_size`` cards to each hand: ``location`` [N, 74] int8.

    The deck is ordered by a random 32-bit word per card (cards outside the game sort last), the first
    H * d cards go to the hands, d each, and the rest stay in the DECK."""
    num_envs, device = key.shape[0], key.device
    in_game = deck_mask(params, device)
    words = rng.bits(key, (num_envs, cards.NUM_CARDS))
    words = torch.where(in_game, (words >> 1) & 0x3FFFFFFF, 0x7FFFFFFF)  # non-negative, out-of-game last
    shuffled = torch.argsort(words, dim=-1)
    places = torch.arange(cards.NUM_CARDS, dtype=torch.int32, device=device).expand(num_envs, -1)
    rank = torch.scatter(torch.empty_like(places), -1, shuffled, places)
    d = hand_size(params, round_index).unsqueeze(-1)
    seat = torch.div(rank, d, rounding_mode="floor")
    location = torch.where(rank < params.num_hands * d, seat, DECK)
    return torch.where(in_game, location, OUT).to(torch.int8)
