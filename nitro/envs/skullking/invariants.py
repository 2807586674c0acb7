"""Properties every reachable state must have, counted on the device so they can be checked over
millions of games without a host sync (tests on CPU, ``bench/skullking_gpu.py`` on a GPU).

Each check is re-derived from the rules, not from the env's own helpers: who may act, the cards each
player holds, the suit to follow. ``violations(p, s, mask)`` returns one count per property (envs of the
batch that break it); all must stay 0.
"""

from __future__ import annotations

import torch

from nitro.envs.skullking import cards
from nitro.envs.skullking.params import SkullKingParams
from nitro.envs.skullking.state import ABILITY, BID, OVER, PLAY, PLAYED, SkullKingState, hand_size

PROPERTIES = (
    "someone_acts",  # every running game has at least one player to decide
    "legal_move_exists",  # every player who must decide has a legal action
    "mask_only_acting",  # players who do not decide have no legal action
    "tricks_add_up",  # tricks won + tricks nobody won = tricks finished (<= with Graybeard, whose are not kept)
    "void_needs_beast",  # a trick nobody won needs a Kraken or White Whale played this round
    "cards_played",  # cards played this round = cards per trick x tricks finished + cards in the current trick
    "mask_in_hand",  # a card may be played only from the player's hand
    "mask_follows_suit",  # a player holding the suit to follow may play no other number card
    "bids_in_range",  # bids allowed are 0..cards dealt, and only in the bid phase
)


def violations(p: SkullKingParams, s: SkullKingState, mask: torch.Tensor) -> torch.Tensor:
    """[len(PROPERTIES)] int64: how many envs break each property in state ``s`` with action mask ``mask``
    [N * n, NUM_ACTIONS]."""
    num_envs, n, h = s.phase.shape[0], p.num_players, p.num_hands
    m = mask.view(num_envs, n, cards.NUM_ACTIONS)
    running = s.phase != OVER
    any_legal = m.any(-1)  # [N, n]
    play_codes = m[..., : cards.NUM_CODES]
    as_cards = play_codes[..., : cards.NUM_CARDS] | torch.nn.functional.pad(
        play_codes[..., cards.TIGRESS_ESCAPE :], (cards.TIGRESS, cards.NUM_CARDS - cards.TIGRESS - 1))
    seats = torch.arange(n, device=s.phase.device).view(1, n, 1)
    hand = s.location.unsqueeze(1) == seats  # [N, n, 74]

    # the seat to play, from the trick's order and position (outside the env's helpers)
    to_play = s.order.long().gather(1, s.pos.long().clamp(max=h - 1).unsqueeze(1))  # [N, 1]
    acting_now = torch.where((s.phase == BID).unsqueeze(1), True,
                             torch.where((s.phase == PLAY).unsqueeze(1), seats.squeeze(-1) == to_play,
                                         torch.where((s.phase == ABILITY).unsqueeze(1),
                                                     seats.squeeze(-1) == s.ability_seat.long().unsqueeze(1),
                                                     running.unsqueeze(1))))
    suit = torch.tensor([c // cards.SUIT_VALUES if c < 56 else -1 for c in range(cards.NUM_CARDS)],
                        device=s.phase.device)
    lead = s.lead.long().view(-1, 1, 1)
    follows = (suit == lead) & (lead >= 0)
    holds_suit = (hand & follows).any(-1, keepdim=True)
    off_suit_numbers = (suit >= 0) & ~follows
    played = (s.location == PLAYED).sum(1)
    beasts = (s.location[:, cards.KRAKEN] == PLAYED).long() + (s.location[:, cards.WHITE_WHALE] == PLAYED).long()
    dealt = hand_size(p, s.round).view(-1, 1, 1)
    bids = m[..., cards.BID0 : cards.BID0 + cards.MAX_BID + 1]
    bid_values = torch.arange(cards.MAX_BID + 1, device=s.phase.device)
    bad = [
        running & ~acting_now.any(1),
        (acting_now & ~any_legal).any(1) & running,
        (~acting_now & any_legal).any(1),
        (s.won.long().sum(1) + s.void_tricks.long() > s.tricks_done.long()) if h > n
        else (s.won.long().sum(1) + s.void_tricks.long() != s.tricks_done.long()),
        s.void_tricks.long() > beasts,
        played != s.tricks_done.long() * h + s.pos.long(),
        (as_cards & ~hand).any(-1).any(1),
        ((s.phase == PLAY).view(-1, 1, 1) & holds_suit & as_cards & off_suit_numbers).any(-1).any(1),
        (bids & ((bid_values > dealt) | (s.phase != BID).view(-1, 1, 1))).any(-1).any(1),
    ]
    return torch.stack([b.long().sum() for b in bad])
