"""Advanced pirate abilities (reference §6.5): winning a trick with a named Pirate triggers its ability,
used at once; only Harry's works after the round's last trick. Tigress has none.

| pirate  | decision (actions)                        | effect                                   |
|---------|-------------------------------------------|------------------------------------------|
| Rosie   | ROSIE0 + r: the player r seats to the left| that player leads the next trick         |
| Bendt   | a card id, once per card drawn            | draws up to 2 undealt cards, discards as many |
| Rascal  | RASCAL0 + w                               | wagers 10 w points on making the bid     |
| Juanita | none                                      | sees the undealt cards for the round     |
| Harry   | HARRY0 + k                                | bid changes by k - 1 (within 0..cards)   |
"""

from __future__ import annotations

import torch

from nitro.core import rng
from nitro.envs.skullking import cards
from nitro.envs.skullking.game import gather_at, one_hot, update
from nitro.envs.skullking.params import SkullKingParams
from nitro.envs.skullking.state import (ABILITY, ABILITY_BENDT, ABILITY_HARRY, ABILITY_JUANITA, ABILITY_RASCAL,
                                        ABILITY_ROSIE, DECK, NO_ABILITY, OUT, PLAY, SkullKingState, hand_size,
                                        play_order)


def trigger(p: SkullKingParams, s: SkullKingState, winner_code: torch.Tensor, winner_seat: torch.Tensor,
            key: torch.Tensor) -> SkullKingState:
    """Open the ability of a trick just won with a named Pirate (``winner_code`` [N], -1 if none)."""
    if not p.pirate_abilities:
        return s
    n = p.num_players
    kind = winner_code - cards.ROSIE
    last_trick = s.tricks_done.int() >= hand_size(p, s.round)
    fires = (kind >= 0) & (kind <= ABILITY_HARRY) & (winner_seat >= 0) & (winner_seat < n) \
        & (~last_trick | (kind == ABILITY_HARRY))
    seat = winner_seat.clamp(0, n - 1)
    mine = one_hot(seat, n)

    s = update(s, fires & (kind == ABILITY_JUANITA), seen_deck=s.seen_deck | mine)

    # Bendt draws up to two undealt cards (fewer if the deck has fewer)
    deck = s.location == DECK
    draw_score = torch.where(deck, rng.uniform(key, deck.shape), -1.0)
    top, picks = draw_score.topk(2, dim=-1)
    drawn = (top >= 0) & (fires & (kind == ABILITY_BENDT)).unsqueeze(-1)
    hit = (one_hot(picks[:, 0], cards.NUM_CARDS) & drawn[:, :1]) | (one_hot(picks[:, 1], cards.NUM_CARDS) & drawn[:, 1:])
    s = update(s, fires, location=torch.where(hit, seat.unsqueeze(-1).to(s.location.dtype), s.location),
               discards=drawn.sum(-1))

    decides = fires & ((kind == ABILITY_ROSIE) | (kind == ABILITY_RASCAL) | (kind == ABILITY_HARRY)
                       | ((kind == ABILITY_BENDT) & (s.discards > 0)))
    return update(s, decides, phase=torch.full_like(s.phase, ABILITY), ability=kind, ability_seat=seat)


def use(p: SkullKingParams, s: SkullKingState, act: torch.Tensor, active: torch.Tensor) -> SkullKingState:
    """Apply the decision of the player whose ability is pending (where ``active``)."""
    if not p.pirate_abilities:
        return s
    n = p.num_players
    seat = s.ability_seat.long()
    a = gather_at(act, seat)
    kind = s.ability
    mine = one_hot(seat, n)

    rosie = active & (kind == ABILITY_ROSIE)
    leader = (seat + (a - cards.ROSIE0)) % n
    s = update(s, rosie, order=play_order(p, leader, s.round_leader))

    bendt = active & (kind == ABILITY_BENDT)
    card = cards.tables(a.device).card[a.clamp(0, cards.NUM_CODES - 1)]
    s = update(s, bendt, location=torch.where(one_hot(card, cards.NUM_CARDS), OUT, s.location),
               discards=s.discards - 1)

    rascal = active & (kind == ABILITY_RASCAL)
    s = update(s, rascal, wager=torch.where(mine, 10 * (a - cards.RASCAL0).unsqueeze(1), s.wager.long()))

    harry = active & (kind == ABILITY_HARRY)
    s = update(s, harry, bids=s.bids + mine * (a - cards.HARRY0 - 1).unsqueeze(1))

    done = active & ((kind != ABILITY_BENDT) | (s.discards <= 0))
    return update(s, done, phase=torch.full_like(s.phase, PLAY), ability=torch.full_like(s.ability, NO_ABILITY))
