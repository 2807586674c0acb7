"""The batched game state, the deal, and the seat arithmetic every stage shares.

Seats are 0..n-1 clockwise; with two players Graybeard's ghost hand is seat 2. Every field has the env
axis first; small integers are int8 to keep a state near 200 bytes per four-player game.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nitro.core import rng
from nitro.core.tables import device_tables
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


@dataclass(frozen=True)
class GameTables:
    """A ruleset's constants as tensors on one device, made once per (params, device) by ``game_tables``:
    a step only indexes them (a tensor built from Python data in a step is a host-to-device copy on a GPU:
    a sync, and an error inside CUDA graph capture)."""

    hand_sizes: torch.Tensor
    """[rounds] int32: cards dealt per hand in each round of the schedule."""
    in_deck: torch.Tensor
    """[74] bool: the cards in this game's deck."""
    round_edges: torch.Tensor
    """[rounds - 1] float32: cumulative shares of ``round_weights`` (uniform if None), the edges that a
    uniform draw is compared with to pick an episode's round."""


@device_tables
def game_tables(params: SkullKingParams, device: torch.device) -> GameTables:
    """The tables of ``params`` on ``device`` (made on first use, e.g. by ``reset``; cached after)."""
    weights = torch.tensor(params.round_weights or [1.0] * len(params.hand_sizes), dtype=torch.float64)
    return GameTables(
        hand_sizes=torch.tensor(params.hand_sizes, dtype=torch.int32, device=device),
        in_deck=torch.tensor([c in params.deck for c in range(cards.NUM_CARDS)], dtype=torch.bool, device=device),
        round_edges=(weights.cumsum(0) / weights.sum())[:-1].float().to(device),
    )


def hand_size(params: SkullKingParams, round_index: torch.Tensor) -> torch.Tensor:
    """Cards dealt per hand in round ``round_index`` ([N] -> [N] int32)."""
    return game_tables(params, round_index.device).hand_sizes[round_index.long()]


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


def deal(params: SkullKingParams, key: torch.Tensor, round_index: torch.Tensor) -> torch.Tensor:
    """Shuffle the whole deck and deal ``hand_size`` cards to each hand: ``location`` [N, 74] int8.

    The deck is ordered by a random 30-bit word per card (cards outside the game sort last; equal words by
    card id, so eager, compiled and CUDA sorts deal alike), the first H * d cards go to the hands, d each,
    and the rest stay in the DECK."""
    num_envs, device = key.shape[0], key.device
    in_game = game_tables(params, device).in_deck
    words = rng.bits(key, (num_envs, cards.NUM_CARDS))
    words = torch.where(in_game, (words >> 1) & 0x3FFFFFFF, 0x7FFFFFFF)  # non-negative, out-of-game last
    shuffled = torch.argsort(words, dim=-1, stable=True)  # equal words (1 in ~400k deals) in card order on every path
    places = torch.arange(cards.NUM_CARDS, dtype=torch.int32, device=device).expand(num_envs, -1)
    rank = torch.scatter(torch.empty_like(places), -1, shuffled, places)
    d = hand_size(params, round_index).unsqueeze(-1)
    seat = torch.div(rank, d, rounding_mode="floor")
    location = torch.where(rank < params.num_hands * d, seat, DECK)
    return torch.where(in_game, location, OUT).to(torch.int8)
