"""Seat-relative observations: what each player sees, as one float vector per agent row.

Relative seat r is the player r seats to the viewer's left (0 = the viewer); with two players the last
slot is Graybeard. ``layout(params)`` names the blocks (the policies and bots read them by name):

| block       | size   | content                                                                   |
|-------------|--------|---------------------------------------------------------------------------|
| hand        | 74     | the viewer's cards                                                        |
| played      | 74     | cards played this round (finished tricks and the current one)            |
| deck_seen   | 74     | undealt cards the viewer has seen (Juanita; only with pirate abilities)   |
| trick       | H x 75 | the play code each relative seat put in the current trick                 |
| seats       | H x 11 | per relative seat: SEAT_FEATURES                                          |
| hand_size   | 10     | cards dealt this round, one-hot (1-10)                                    |
| progress    | 3      | round index / (rounds - 1), tricks left / 10, cards in the trick / H      |
| lead        | 6      | lead state one-hot: undetermined, no suit, green, yellow, purple, black   |
| phase       | 4      | bid, cannon, play, ability                                                |
| ability     | 6      | pending ability one-hot (Rosie ... Harry) and discards left / 2 (abilities only) |
"""

from __future__ import annotations

from functools import lru_cache

import torch

from nitro.envs.skullking import cards, rules
from nitro.envs.skullking.game import acting_seats
from nitro.envs.skullking.params import SkullKingParams
from nitro.envs.skullking.state import DECK, PLAYED, SkullKingState, hand_size

SEAT_FEATURES = ("bid", "bid_revealed", "won", "to_go", "score", "leads_trick", "to_act", "led_round", "wager",
                 "cannonball", "allied")
"""Per relative seat: bid / 10, bid revealed, tricks won / 10, (bid - won) / 10 once revealed (the bid goal),
score / 100 (0 without ``observe_scores``), leads the current trick, decides this step, led the round, wager / 20, chose the Cannonball,
allied with the viewer (Loot)."""


@lru_cache(maxsize=None)
def layout(p: SkullKingParams) -> dict[str, slice]:
    """Block name -> slice of the observation vector."""
    h = p.num_hands
    sizes = [("hand", cards.NUM_CARDS), ("played", cards.NUM_CARDS)]
    if p.pirate_abilities:
        sizes.append(("deck_seen", cards.NUM_CARDS))
    sizes += [("trick", h * cards.NUM_CODES), ("seats", h * len(SEAT_FEATURES)), ("hand_size", cards.MAX_BID),
              ("progress", 3), ("lead", 6), ("phase", 4)]
    if p.pirate_abilities:
        sizes.append(("ability", 6))
    out, start = {}, 0
    for name, size in sizes:
        out[name] = slice(start, start + size)
        start += size
    return out


def obs_size(p: SkullKingParams) -> int:
    return max(s.stop for s in layout(p).values())


@lru_cache(maxsize=None)
def relative_seats(p: SkullKingParams, device: torch.device) -> torch.Tensor:
    """[n, H] int64: the seat at relative position r of viewer i."""
    n, h = p.num_players, p.num_hands
    return torch.tensor([[(i + r) % n if r < n else r for r in range(h)] for i in range(n)], device=device)


def _pad_seats(x: torch.Tensor, p: SkullKingParams, value) -> torch.Tensor:
    """[N, n] per-player values -> [N, H] (Graybeard's column filled with ``value``)."""
    if p.num_hands == p.num_players:
        return x
    return torch.cat([x, torch.full_like(x[:, :1], value)], 1)


def observe(p: SkullKingParams, s: SkullKingState) -> torch.Tensor:
    """Observations [N * n, obs_size(p)] float32, agent rows env-major."""
    num_envs, n, h = s.phase.shape[0], p.num_players, p.num_hands
    device = s.phase.device
    viewers = torch.arange(n, device=device)
    rel = relative_seats(p, device)  # [n, H]
    f32 = torch.float32

    hand = s.location.unsqueeze(1) == viewers.view(1, n, 1)
    played = (s.location == PLAYED).unsqueeze(1).expand(num_envs, n, cards.NUM_CARDS)
    blocks = [hand, played]
    if p.pirate_abilities:
        blocks.append(s.seen_deck.unsqueeze(-1) & (s.location == DECK).unsqueeze(1))

    code_by_seat = torch.scatter(torch.full_like(s.trick, -1), 1, s.order.long(), s.trick)  # [N, H]
    rel_codes = code_by_seat[:, rel]  # [N, n, H]
    trick = rel_codes.unsqueeze(-1) == torch.arange(cards.NUM_CODES, device=device)
    blocks.append(trick.reshape(num_envs, n, h * cards.NUM_CODES))

    revealed = s.bids >= 0
    bids = s.bids.clamp(min=0).to(f32)
    won = s.won.to(f32)
    seat_ids = torch.arange(h, device=device)
    a, w = s.ally[:, :, 0].long(), s.ally[:, :, 1].long()  # [N, 2]
    v, j = viewers.view(1, n, 1, 1), seat_ids.view(1, 1, h, 1)
    allied = (((a.view(-1, 1, 1, 2) == v) & (w.view(-1, 1, 1, 2) == j))
              | ((a.view(-1, 1, 1, 2) == j) & (w.view(-1, 1, 1, 2) == v))).any(-1)  # [N, viewer, seat]
    per_seat = torch.stack([
        _pad_seats(bids / 10, p, 0.0), _pad_seats(revealed.to(f32), p, 0.0), _pad_seats(won / 10, p, 0.0),
        _pad_seats(torch.where(revealed, (bids - won) / 10, 0.0), p, 0.0),
        _pad_seats(s.score.to(f32) / 100 if p.observe_scores else torch.zeros_like(won), p, 0.0),
        (s.order[:, :1].long() == seat_ids).to(f32),
        _pad_seats(acting_seats(p, s).to(f32), p, 0.0),
        (s.round_leader.long().unsqueeze(1) == seat_ids).to(f32),
        _pad_seats(s.wager.to(f32) / 20, p, 0.0), _pad_seats(s.cannonball.to(f32), p, 0.0),
    ], -1)  # [N, H, F - 1]: the same for every viewer
    allied_rel = allied.gather(2, rel.unsqueeze(0).expand(num_envs, n, h))
    seats = torch.cat([per_seat[:, rel], allied_rel.unsqueeze(-1).to(f32)], -1)  # [N, n, H, F]
    blocks.append(seats.reshape(num_envs, n, h * len(SEAT_FEATURES)))

    dealt = hand_size(p, s.round)
    rounds = max(len(p.hand_sizes) - 1, 1)
    glob = [
        dealt.unsqueeze(1) == torch.arange(1, cards.MAX_BID + 1, device=device),
        torch.stack([s.round.to(f32) / rounds, (dealt - s.tricks_done).to(f32) / 10, s.pos.to(f32) / h], -1),
        (s.lead.long() - rules.UNDETERMINED).unsqueeze(1) == torch.arange(6, device=device),
        s.phase.long().unsqueeze(1) == torch.arange(4, device=device),
    ]
    if p.pirate_abilities:
        glob += [s.ability.long().unsqueeze(1) == torch.arange(5, device=device), s.discards.to(f32).unsqueeze(1) / 2]
    glob = torch.cat([g.to(f32) for g in glob], -1).unsqueeze(1).expand(num_envs, n, -1)
    out = torch.cat([b.to(f32) for b in blocks] + [glob], -1)
    return out.reshape(num_envs * n, -1)
