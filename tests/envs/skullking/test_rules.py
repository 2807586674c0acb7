"""Trick resolution and bonuses against published answers: the 30-case table of
docs/reference/skullking_cardgames.md §5.3 and the unit-test vectors of the Kryo4lex/SkullKing C# engine
(``TrickWinnerFacts``, ``BonusPointsTests``; commit f671b49). Cases where Kryo4lex reads an ambiguous rule
differently are run under both readings and named (docs/SKULLKING.md)."""

from __future__ import annotations

import pytest
import torch

from nitro.envs.skullking import cards, rules
from nitro.envs.skullking.cards import parse_trick


def resolve(text: str, **flags):
    codes = parse_trick(text)
    out = rules.resolve_trick(torch.tensor([codes + [-1] * (8 - len(codes))]), **flags)
    return {k: int(getattr(out, k)[0]) for k in ("winner", "would_have_won", "kraken", "whale", "bonus")}


def next_leader_position(out, kraken_rule="would_have_won", whale_rule="would_have_won"):
    """Position that leads next (seats = positions), per the env's readings of A5 / A6."""
    if out["winner"] >= 0:
        return out["winner"]
    if out["kraken"] >= 0:
        return out["would_have_won"] if kraken_rule == "would_have_won" else out["kraken"] + 1
    return out["would_have_won"] if whale_rule == "would_have_won" else out["whale"]


# (trick, winner 1-based or None for a void trick, next leader 1-based, winner's bonus) from §5.3
CASE_TABLE = [
    ("G7, G12, G8", 2, 2, 0),
    ("Y12, Y5, P14", 1, 1, 10),
    ("Y12, Y5, B2", 3, 3, 0),
    ("G14, B1", 2, 2, 10),
    ("Y12, B5, B7", 3, 3, 0),
    ("E, E, TE", 1, 1, 0),
    ("E, P11, P6", 2, 2, 0),
    ("E, P1, P6, G14", 3, 3, 10),
    ("L, Y11, G14, Y9", 2, 2, 10),
    ("L, E, E", 1, 1, 0),
    ("B14, Pi", 2, 2, 20),
    ("Pi, TP, Pi", 1, 1, 0),
    ("M, Pi", 2, 2, 20),
    ("M, Pi, M", 2, 2, 40),
    ("Pi, SK, TP", 2, 2, 60),
    ("TE, SK", 2, 2, 0),
    ("SK, M", 2, 2, 40),
    ("SK, M, M", 2, 2, 40),
    ("Y14, Pi, SK, M", 4, 4, 50),
    ("M, G9, P9", 1, 1, 0),
    ("SK, G9, P9", 1, 1, 0),
    ("M, B14, M", 1, 1, 20),
    ("B14, Y2, P6, SK", 4, 4, 20),
    ("Y12, B3, K, Y14", None, 2, 0),
    ("Y12, B3, W, K", None, 2, 0),
    ("G14, P13, Y12, B11, K, W", 1, 1, 10),
    ("B2, Pi, Y14, SK, W", 3, 3, 10),
    ("G1, B2, Y11, G11, P1, W", 3, 3, 0),
    ("P8, B10, W, P4", 2, 2, 0),
    ("E, Pi, M, SK, W", None, 3, 0),
]


@pytest.mark.parametrize("trick, winner, leader, bonus", CASE_TABLE, ids=[c[0] for c in CASE_TABLE])
def test_reference_case_table(trick, winner, leader, bonus):
    out = resolve(trick)
    assert out["winner"] == (winner - 1 if winner else -1)
    assert next_leader_position(out) == leader - 1
    assert out["bonus"] == bonus


def test_case_table_other_prints():
    """The 2021 print's readings (ambiguities A5, A6): after the Kraken the player left of it leads (case
    24: the 4th); after a White Whale trick without numbers the Whale's player does (case 30: the 5th)."""
    assert next_leader_position(resolve("Y12, B3, K, Y14"), kraken_rule="left_of_kraken") == 3
    assert next_leader_position(resolve("E, Pi, M, SK, W"), whale_rule="whale_player") == 4


# Kryo4lex TrickWinnerFacts: (case, trick, winner 0-based or None)
KRYO4LEX_WINNERS = [
    ("0A", "G14, Y2, P6, B4", 3), ("0B", "Y12, Y5, P14", 0), ("0C", "Y12, Y5, B2", 2),
    ("1", "G7, G12, G8", 1), ("2", "Y8, Y5, P10", 0), ("3", "Y12, B5, B7", 2), ("4", "E, E, E", 0),
    ("5", "E, P14, G14, Y14, B14, M, Pi", 6), ("6", "Pi, Pi, Pi, Pi, Pi", 0),
    ("7", "E, P14, G14, Y14, B14, Pi, SK", 6), ("8", "E, P14, G14, Y14, B14, SK, M", 6),
    ("9", "E, P14, G14, Y14, B14, M", 5), ("10", "E, P14, G14, Y14, B14, M, Pi", 6),
    ("11", "E, P14, G14, Y14, B14, SK, M, M", 6), ("12", "E, P14, G14, Y14, B14, Pi, SK, M", 7),
    ("13", "E, P11, P6", 1), ("14", "Pi, G9, P9", 0), ("15", "M, G9, P9", 0), ("16", "SK, G9, P9", 0),
    ("17", "W, G9, P9", 1), ("18", "P8, B10, W, P4", 1), ("19", "B2, Y14, SK, W", 1),
    ("20A", "E, M, Pi, SK, W", None),
    ("21", "W, K", None), ("22", "G14, P13, Y12, B11, K, W", 0), ("23", "G1, B2, Y11, G11, P1, W", 2),
    ("24", "G2, B14, W", 1), ("25", "G14, B1", 1), ("26", "Pi, M", 0), ("27", "SK, M", 1),
    ("28", "B7, Y8, B4, Y2", 0), ("29", "Y2, B7, Y8, B4", 1), ("30", "E, P1, P6, G14", 2),
    ("32", "E, Pi, M, SK, W", None), ("34", "G1, Y2, P6, G14", 3), ("35", "G1, Y2, P6, G14, G14", 3),
    ("L1", "L, E, L", 0), ("L2", "E, L, L", 0), ("L3", "Y10, L, Y12", 2), ("L4", "L, Y11, G14, Y9", 1),
    ("L5", "P14, L, Pi", 2), ("L6", "L, Pi, SK", 2), ("L7", "L, SK, Pi, M", 3), ("L9", "W, G7, Y9, L, B5", 2),
    ("L10", "L, K, Y14", None), ("L11", "G8, L, L, G13", 3), ("L12", "Y14, L, B1", 2),
    ("L13", "Y11, W, P11, L", 0), ("L14", "W, L, Pi", None), ("L15", "L, E, E, L", 0), ("L16", "Pi, L, W, E", None),
]


@pytest.mark.parametrize("case, trick, winner", KRYO4LEX_WINNERS, ids=[c[0] for c in KRYO4LEX_WINNERS])
def test_kryo4lex_trick_winners(case, trick, winner):
    assert resolve(trick)["winner"] == (-1 if winner is None else winner)


def test_kryo4lex_kraken_with_every_special():
    """Case_20B: four 14s, an Escape, a Mermaid, a Pirate, the Skull King and the Kraken (9 cards: more
    than 8 players, so resolved as a 9-position trick): destroyed."""
    codes = parse_trick("G14, P14, Y14, B14, E, M, Pi, SK, K")
    assert int(rules.resolve_trick(torch.tensor([codes])).winner[0]) == -1


def test_kryo4lex_many_skull_kings():
    """Case_33 (a synthetic trick of four Skull Kings): the Mermaid beats every one of them."""
    codes = [cards.SKULL_KING, cards.SKULL_KING, cards.MERMAIDS[0], cards.SKULL_KING, cards.SKULL_KING]
    assert int(rules.resolve_trick(torch.tensor([codes])).winner[0]) == 2


@pytest.mark.parametrize("case, trick, winner", [("31", "E, E, E, W", 0), ("L8", "W, L, E", 1)])
def test_kryo4lex_whale_over_escapes(case, trick, winner):
    """Ambiguity A7: Kryo4lex lets the first escape-like card win a White Whale trick of escape-like cards
    only (whale_escapes_only="first_escape"); the rule's letter, our default, discards it."""
    assert resolve(trick)["winner"] == -1
    assert resolve(trick, whale_first_escape=True)["winner"] == winner


# Kryo4lex BonusPointsTests: (case, trick, winner 0-based or None, bonus). The C# tests pass the winner in;
# in case 8 they pass the black 14 (index 3), but under the White Whale two 14s tie and the first played wins
# (their own TrickWinnerFacts Case_23), so the winner here is the green 14; the bonus is 30 either way.
KRYO4LEX_BONUSES = [
    ("1", "G14, Y2, P6, B4", 3, 10), ("2", "Y14, Y2, P6, B4", 3, 10), ("3", "P14, Y2, P6, B4", 3, 10),
    ("4", "B14, Y2, P6, SK", 3, 20), ("5", "G1, Y2, P6, G14", 3, 10), ("6", "G1, Y2, P6, B14", 3, 20),
    ("7", "Y14, Pi, SK, M", 3, 50), ("8", "G14, Y2, P6, B14, W", 0, 30), ("9", "Y14, Pi, SK, M, K", None, 0),
]


@pytest.mark.parametrize("case, trick, winner, bonus", KRYO4LEX_BONUSES, ids=[c[0] for c in KRYO4LEX_BONUSES])
def test_kryo4lex_bonus_points(case, trick, winner, bonus):
    out = resolve(trick)
    assert out["winner"] == (-1 if winner is None else winner)
    assert out["bonus"] == bonus


def test_lead_state_and_legality():
    """§4.2-4.3: an escape-like lead defers the suit; a character lead (or one after an escape-like lead,
    reading A) leaves no suit; holding the led colour forbids trumping but not specials."""
    lead = torch.tensor([rules.UNDETERMINED])
    first, later = torch.tensor([True]), torch.tensor([False])
    after_escape = rules.lead_after(lead, torch.tensor([cards.ESCAPES[0]]), first, defer=False)
    assert int(after_escape) == rules.UNDETERMINED
    assert int(rules.lead_after(after_escape, torch.tensor([cards.card_id(cards.PURPLE, 11)]), later, False)) == cards.PURPLE
    assert int(rules.lead_after(after_escape, torch.tensor([cards.ROSIE]), later, defer=False)) == rules.NO_SUIT
    assert int(rules.lead_after(after_escape, torch.tensor([cards.ROSIE]), later, defer=True)) == rules.UNDETERMINED
    assert int(rules.lead_after(lead, torch.tensor([cards.KRAKEN]), first, defer=True)) == rules.NO_SUIT

    hand = torch.zeros(1, cards.NUM_CARDS, dtype=torch.bool)
    held = parse_trick("Y3, Y9, B5, G2, E, TP")
    hand[0, [cards.CARD_OF_CODE[c] for c in held]] = True
    legal = rules.legal_codes(hand, torch.tensor([cards.YELLOW]), "choose")[0]
    allowed = {cards.code_name(c) for c in range(cards.NUM_CODES) if legal[c]}
    assert allowed == {"Y3", "Y9", "E", "TP", "TE"}
    void_in_green = rules.legal_codes(hand, torch.tensor([cards.PURPLE]), "pirate")[0]
    assert {cards.code_name(c) for c in range(cards.NUM_CODES) if void_in_green[c]} == {"Y3", "Y9", "B5", "G2", "E", "TP"}


@pytest.mark.parametrize("scoring, bid, won, dealt, bonus, points", [
    ("skull_king", 3, 3, 5, 0, 60), ("skull_king", 2, 4, 5, 30, -20), ("skull_king", 0, 0, 7, 0, 70),
    ("skull_king", 0, 2, 9, 0, -90), ("skull_king", 2, 2, 4, 50, 90),
    ("rascal", 3, 3, 5, 20, 70), ("rascal", 3, 2, 5, 20, 35), ("rascal", 3, 1, 5, 20, 0), ("rascal", 0, 1, 7, 0, 35),
])
def test_round_points(scoring, bid, won, dealt, bonus, points):
    """§6.1 (the rulebook's examples: 3 of 3 -> +60, bid 2 took 4 -> -20, zero bids in rounds 7 and 9) and
    §6.4 (direct hit, glancing blow at half with half the bonuses, complete miss)."""
    t = lambda v: torch.tensor([v])  # noqa: E731
    assert int(rules.round_points(t(bid), t(won), t(dealt), t(bonus), scoring)) == points


def test_cannonball():
    t = lambda v: torch.tensor([v])  # noqa: E731
    ball = torch.tensor([True])
    assert int(rules.round_points(t(2), t(2), t(6), t(10), "rascal_cannon", ball)) == 100
    assert int(rules.round_points(t(2), t(3), t(6), t(10), "rascal_cannon", ball)) == 0
