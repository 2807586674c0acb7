"""The stages of a Skull King step, each a pure function of (params, state, ...) -> state.

Every stage computes its update for all envs and keeps it only where it applies (``update`` below), so a
step has no branch on tensor values. ``env.SkullKing.step`` calls them in order.
"""

from __future__ import annotations

import dataclasses

import torch

from nitro.core import rng
from nitro.envs.skullking import cards, rules
from nitro.envs.skullking.params import SkullKingParams
from nitro.envs.skullking.state import (ABILITY, ABILITY_BENDT, ABILITY_HARRY, ABILITY_RASCAL, ABILITY_ROSIE, BID,
                                        CANNON, NO_ABILITY, OVER, PLAY, PLAYED, SkullKingState, deal, hand_size,
                                        play_order)


def update(s: SkullKingState, where: torch.Tensor, **fields: torch.Tensor) -> SkullKingState:
    """``s`` with the given fields replaced in the envs where ``where`` [N] is true (dtypes kept)."""
    changes = {}
    for name, new in fields.items():
        old = getattr(s, name)
        mask = where.view(where.shape + (1,) * (old.dim() - 1))
        changes[name] = torch.where(mask, new.to(old.dtype), old)
    return dataclasses.replace(s, **changes)


def gather_at(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x[e, index[e]]`` for every env e ([N, k], [N] -> [N])."""
    return x.gather(1, index.long().unsqueeze(1)).squeeze(1)


def one_hot(index: torch.Tensor, size: int) -> torch.Tensor:
    """[N, size] bool, true at ``index`` [N] (no column for indices outside 0..size-1)."""
    return torch.arange(size, device=index.device) == index.unsqueeze(-1)


def current_seat(p: SkullKingParams, s: SkullKingState) -> torch.Tensor:
    """[N] seat whose card comes next in the current trick."""
    return gather_at(s.order, s.pos.clamp(max=p.num_hands - 1))


def acting_seats(p: SkullKingParams, s: SkullKingState) -> torch.Tensor:
    """[N, n] bool: who decides this step (every player while bidding or choosing cannons, the current
    player in play, the pirate's player while an ability is pending)."""
    seats = torch.arange(p.num_players, device=s.phase.device)
    everyone = ((s.phase == BID) | (s.phase == CANNON)).unsqueeze(1)
    plays = (s.phase == PLAY).unsqueeze(1) & (seats == current_seat(p, s).unsqueeze(1))
    decides = (s.phase == ABILITY).unsqueeze(1) & (seats == s.ability_seat.unsqueeze(1))
    return everyone | plays | decides


def action_mask(p: SkullKingParams, s: SkullKingState) -> torch.Tensor:
    """[N * n, NUM_ACTIONS] bool: the legal actions of each acting seat (cards by play code while playing
    or discarding for Bendt, bids 0..cards dealt, ability and cannon choices); all false for the others."""
    n, device = p.num_players, s.phase.device
    seats = torch.arange(n, device=device)
    acting = acting_seats(p, s).unsqueeze(-1)  # [N, n, 1]
    phase = s.phase.view(-1, 1, 1)
    kind = s.ability.view(-1, 1, 1)
    hand = s.location.unsqueeze(1) == seats.view(1, n, 1)  # [N, n, 74]
    legal = rules.legal_codes(hand, s.lead.view(-1, 1), p.tigress)
    discard = torch.cat([hand, torch.zeros_like(hand[..., :1])], -1)
    dealt = hand_size(p, s.round).view(-1, 1, 1)
    harry_bid = s.bids.long().unsqueeze(-1) + torch.arange(3, device=device) - 1
    every = lambda size: torch.ones(size, dtype=torch.bool, device=device)  # noqa: E731
    ability = acting & (phase == ABILITY)
    blocks = [
        acting & torch.where((phase == ABILITY) & (kind == ABILITY_BENDT), discard, (phase == PLAY) & legal),
        acting & (phase == BID) & (torch.arange(cards.MAX_BID + 1, device=device) <= dealt),
        ability & (kind == ABILITY_ROSIE) & (torch.arange(cards.MAX_PLAYERS, device=device) < n),
        ability & (kind == ABILITY_RASCAL) & every(3),
        ability & (kind == ABILITY_HARRY) & (harry_bid >= 0) & (harry_bid <= dealt),
        acting & (phase == CANNON) & every(2),
    ]
    return torch.cat(blocks, -1).reshape(-1, cards.NUM_ACTIONS)


def round_fields(p: SkullKingParams, key: torch.Tensor, round_index: torch.Tensor,
                 round_leader: torch.Tensor) -> dict[str, torch.Tensor]:
    """The fields a new round starts with: a fresh deal, bids open, nothing won."""
    num_envs, n, device = key.shape[0], p.num_players, key.device
    i8 = dict(dtype=torch.int8, device=device)
    return dict(
        location=deal(p, key, round_index),
        trick=torch.full((num_envs, p.num_hands), -1, **i8),
        order=play_order(p, round_leader, round_leader),
        pos=torch.zeros(num_envs, **i8),
        lead=torch.full((num_envs,), rules.UNDETERMINED, **i8),
        round_leader=round_leader.to(torch.int8),
        round=round_index.to(torch.int8),
        tricks_done=torch.zeros(num_envs, **i8),
        void_tricks=torch.zeros(num_envs, **i8),
        phase=torch.full((num_envs,), BID, **i8),
        bids=torch.full((num_envs, n), -1, **i8),
        won=torch.zeros((num_envs, n), **i8),
        bonus=torch.zeros((num_envs, n), dtype=torch.int32, device=device),
        ally=torch.full((num_envs, 2, 2), -1, **i8),
        cannonball=torch.zeros((num_envs, n), dtype=torch.bool, device=device),
        wager=torch.zeros((num_envs, n), **i8),
        seen_deck=torch.zeros((num_envs, n), dtype=torch.bool, device=device),
        ability=torch.full((num_envs,), NO_ABILITY, **i8),
        ability_seat=torch.zeros(num_envs, **i8),
        discards=torch.zeros(num_envs, **i8),
    )


def reveal_bids(p: SkullKingParams, s: SkullKingState, act: torch.Tensor, active: torch.Tensor) -> SkullKingState:
    """Every player's bid (actions BID0 + b) is revealed at once; then cannons or play."""
    bids = (act - cards.BID0).clamp(0, cards.MAX_BID)
    after = CANNON if p.scoring == "rascal_cannon" else PLAY
    return update(s, active, bids=bids, phase=torch.full_like(s.phase, after))


def fire_cannons(p: SkullKingParams, s: SkullKingState, act: torch.Tensor, active: torch.Tensor) -> SkullKingState:
    """Rascal's scoring with cannons: every player picks Grapeshot or Cannonball at once."""
    return update(s, active, cannonball=act == cards.CANNON0 + 1, phase=torch.full_like(s.phase, PLAY))


def _place(p: SkullKingParams, s: SkullKingState, code: torch.Tensor, active: torch.Tensor) -> SkullKingState:
    """Add play code ``code`` [N] to the current trick where ``active``."""
    t = cards.tables(code.device)
    card = t.card[code.long()]
    location = torch.where(one_hot(card, cards.NUM_CARDS), PLAYED, s.location)
    trick = torch.where(one_hot(s.pos, p.num_hands), code.unsqueeze(1).to(s.trick.dtype), s.trick)
    lead = rules.lead_after(s.lead, code, s.pos == 0, p.escape_then_character == "defer")
    return update(s, active, location=location, trick=trick, lead=lead, pos=s.pos + 1)


def play_card(p: SkullKingParams, s: SkullKingState, act: torch.Tensor, active: torch.Tensor) -> SkullKingState:
    """The current player plays the card (play code) of their action."""
    seat = current_seat(p, s).long().clamp(max=p.num_players - 1)
    code = gather_at(act, seat).clamp(0, cards.NUM_CODES - 1)
    return _place(p, s, code, active)


def graybeard_plays(p: SkullKingParams, s: SkullKingState, key: torch.Tensor) -> SkullKingState:
    """Two players: Graybeard's ghost (seat 2) flips a random card of his hand when his turn comes. He
    need not follow suit, and his Tigress is always an Escape (reference §3)."""
    if p.num_players != 2:
        return s
    d = hand_size(p, s.round)
    turn = (s.phase == PLAY) & (current_seat(p, s) == 2) & (s.pos < p.num_hands) & (s.tricks_done < d)
    hand = s.location == 2
    pick = torch.where(hand, rng.uniform(key, hand.shape), -1.0).argmax(-1)
    code = torch.where(pick == cards.TIGRESS, cards.TIGRESS_ESCAPE, pick)
    return _place(p, s, code, turn)


def next_leader(p: SkullKingParams, s: SkullKingState, out: rules.TrickOutcome) -> torch.Tensor:
    """Seat [N] that leads after trick outcome ``out``: the winner, or after a void trick the reading of
    ``kraken_next_leader`` / ``whale_void_next_leader`` (ambiguities A5, A6)."""
    def seat(position):
        return gather_at(s.order, position.clamp(min=0)).long()

    n = p.num_players
    kraken_seat = seat(out.kraken)
    left_of_kraken = torch.where(kraken_seat >= n, s.round_leader.long(), (kraken_seat + 1) % n)
    after_kraken = left_of_kraken if p.kraken_next_leader == "left_of_kraken" else seat(out.would_have_won)
    after_whale = seat(out.whale) if p.whale_void_next_leader == "whale_player" else seat(out.would_have_won)
    leader = torch.where(out.winner >= 0, seat(out.winner), torch.where(out.kraken >= 0, after_kraken, after_whale))
    if n == 2 and p.graybeard_after_win == "round_leader":
        leader = torch.where(leader == 2, s.round_leader.long(), leader)
    return leader


def finish_trick(p: SkullKingParams, s: SkullKingState):
    """Resolve a complete trick: the winner takes it with its bonus, Loot cards ally with the winner, the
    next trick is set up. Returns (state, finished [N], winning play code [N], winner's seat [N]), the
    last two -1 where no trick finished or nobody won it."""
    n = p.num_players
    finished = (s.phase == PLAY) & (s.pos == p.num_hands)
    out = rules.resolve_trick(s.trick, p.escape_then_character == "defer", p.whale_escapes_only == "first_escape")
    winner_seat = torch.where(out.winner >= 0, gather_at(s.order, out.winner.clamp(min=0)).long(), -1)
    winner_code = torch.where(out.winner >= 0, gather_at(s.trick, out.winner.clamp(min=0)).long(), -1)
    takes = one_hot(winner_seat, n)
    ally = s.ally
    if p.loot:
        pairs = []
        for j, loot in enumerate(cards.LOOTS):
            at = rules.first_true(s.trick == loot)
            loot_seat = gather_at(s.order, at.clamp(min=0)).long()
            forms = (at >= 0) & (winner_seat >= 0) & (loot_seat != winner_seat)
            pairs.append(torch.where(forms.unsqueeze(-1), torch.stack([loot_seat, winner_seat], -1), s.ally[:, j].long()))
        ally = torch.stack(pairs, 1)
    leader = next_leader(p, s, out)
    s = update(
        s, finished,
        won=s.won + takes, bonus=s.bonus + takes * out.bonus.unsqueeze(1), ally=ally,
        void_tricks=s.void_tricks + (out.winner < 0), tricks_done=s.tricks_done + 1,
        trick=torch.full_like(s.trick, -1), pos=torch.zeros_like(s.pos),
        lead=torch.full_like(s.lead, rules.UNDETERMINED), order=play_order(p, leader, s.round_leader),
    )
    return s, finished, torch.where(finished, winner_code, -1), torch.where(finished, winner_seat, -1)


def score_round(p: SkullKingParams, s: SkullKingState) -> tuple[SkullKingState, torch.Tensor]:
    """After the round's last trick (and any ability it grants): score every player. Returns (state,
    scored [N])."""
    n = p.num_players
    dealt = hand_size(p, s.round)
    scored = (s.phase == PLAY) & (s.tricks_done == dealt)
    bids, won = s.bids.int(), s.won.int()
    exact = bids == won
    bonus = s.bonus
    for j in range(2 if p.loot else 0):
        loot_seat, winner_seat = s.ally[:, j, 0].long(), s.ally[:, j, 1].long()
        both = (loot_seat >= 0) & gather_at(exact, loot_seat.clamp(min=0)) & gather_at(exact, winner_seat.clamp(min=0))
        bonus = bonus + 20 * both.unsqueeze(1) * (one_hot(loot_seat, n) | one_hot(winner_seat, n))
    points = rules.round_points(bids, won, dealt.unsqueeze(1), bonus, p.scoring, s.cannonball)
    points = points + torch.where(exact, s.wager.int(), -s.wager.int())
    s = update(s, scored, score=s.score + points, exact_bids=s.exact_bids + exact, rounds_played=s.rounds_played + 1)
    return s, scored


def next_round(p: SkullKingParams, s: SkullKingState, scored: torch.Tensor, key: torch.Tensor
               ) -> tuple[SkullKingState, torch.Tensor]:
    """Deal the next round where one was scored, or end the episode. Returns (state, terminated [N])."""
    last = torch.full_like(scored, True) if p.episode == "round" else s.round.long() + 1 >= len(p.hand_sizes)
    advance, terminated = scored & ~last, scored & last
    fresh = round_fields(p, key, (s.round.long() + 1).clamp(max=len(p.hand_sizes) - 1),
                         (s.round_leader.long() + 1) % p.num_players)
    s = update(s, advance, **fresh)
    return update(s, terminated, phase=torch.full_like(s.phase, OVER)), terminated
