"""Skull King's cards: ids, per-card tables and the action layout (the bottom of the package).

Card ids follow docs/reference/skullking_cardgames.md §2: four suits of 1-14 (green 0-13, yellow
14-27, purple 28-41, black 42-55; black is trump), Escapes 56-60, the five named Pirates 61-65, the
Tigress 66, the Skull King 67, Mermaids 68-69, and the advanced Loot 70-71, Kraken 72, White Whale 73.

A *play code* is what lands in a trick: a card id, except that the Tigress played as an Escape is
code 74 (id 66 is the Tigress played as a Pirate). Actions 0-74 are play codes, so a policy acts on
cards by id, never on hand slots.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

NUM_CARDS = 74
"""Physical cards of the full (advanced) deck."""
NUM_CODES = 75
"""Play codes: the 74 card ids plus the Tigress as an Escape."""

GREEN, YELLOW, PURPLE, BLACK = 0, 1, 2, 3
SUITS = ("green", "yellow", "purple", "black")
SUIT_LETTERS = "GYPB"
SUIT_VALUES = 14

ESCAPES = tuple(range(56, 61))
ROSIE, BENDT, RASCAL, JUANITA, HARRY = 61, 62, 63, 64, 65
PIRATES = (ROSIE, BENDT, RASCAL, JUANITA, HARRY)
PIRATE_NAMES = ("Rosie D'Laney", "Bendt the Bandit", "Rascal of Roatan", "Juanita Jade", "Harry the Giant")
TIGRESS = 66
SKULL_KING = 67
MERMAIDS = (68, 69)
LOOTS = (70, 71)
KRAKEN = 72
WHITE_WHALE = 73
TIGRESS_ESCAPE = 74
"""Play code of the Tigress declared an Escape."""
BASE_DECK = tuple(range(70))


def card_id(suit: int, value: int) -> int:
    """Id of the number card ``value`` (1-14) of ``suit`` (0-3)."""
    return suit * SUIT_VALUES + value - 1


# --- classes of a played card (docs/reference §4.1), the order used by the trick resolver -------------
NUMBER, ESCAPE_LIKE, PIRATE, SKULL_KING_CLASS, MERMAID, KRAKEN_CLASS, WHALE_CLASS = range(7)
CLASS_NAMES = ("number", "escape-like", "pirate", "skull king", "mermaid", "kraken", "white whale")


def _class_of(code: int) -> int:
    if code < 56:
        return NUMBER
    if code in ESCAPES or code in LOOTS or code == TIGRESS_ESCAPE:
        return ESCAPE_LIKE
    if code in PIRATES or code == TIGRESS:
        return PIRATE
    if code == SKULL_KING:
        return SKULL_KING_CLASS
    if code in MERMAIDS:
        return MERMAID
    return KRAKEN_CLASS if code == KRAKEN else WHALE_CLASS


CLASS = tuple(_class_of(c) for c in range(NUM_CODES))
SUIT = tuple(c // SUIT_VALUES if c < 56 else -1 for c in range(NUM_CODES))
"""Suit of each play code, -1 for specials."""
VALUE = tuple(c % SUIT_VALUES + 1 if c < 56 else 0 for c in range(NUM_CODES))
"""Face value 1-14 of number cards, 0 for specials."""
FOURTEEN_BONUS = tuple(20 if c == card_id(BLACK, 14) else 10 if c < 56 and VALUE[c] == 14 else 0
                       for c in range(NUM_CODES))
"""Bonus for capturing each 14 (docs/reference §6.2): +10 green/yellow/purple, +20 black."""
CARD_OF_CODE = tuple(TIGRESS if c == TIGRESS_ESCAPE else c for c in range(NUM_CODES))


# --- action layout -------------------------------------------------------------------------------------
MAX_BID = 10
BID0 = NUM_CODES
"""Actions BID0 + b bid b tricks (0-10)."""
ROSIE0 = BID0 + MAX_BID + 1
"""Rosie's ability: ROSIE0 + r makes the player r seats to the chooser's left lead (0 = herself)."""
MAX_PLAYERS = 8
RASCAL0 = ROSIE0 + MAX_PLAYERS
"""Rascal's ability: RASCAL0 + w wagers 10 * w points (w = 0, 1, 2)."""
HARRY0 = RASCAL0 + 3
"""Harry's ability: HARRY0 + k changes the player's bid by k - 1 (-1, 0, +1)."""
CANNON0 = HARRY0 + 3
"""Rascal's scoring with cannons: CANNON0 = Grapeshot, CANNON0 + 1 = Cannonball."""
NUM_ACTIONS = CANNON0 + 2


# --- names, for tests, docs and error messages ----------------------------------------------------------
_SPECIAL_NAMES = {**{c: "E" for c in ESCAPES}, **{c: "Pi" for c in PIRATES}, TIGRESS: "TP", SKULL_KING: "SK",
                  **{c: "M" for c in MERMAIDS}, **{c: "L" for c in LOOTS}, KRAKEN: "K", WHITE_WHALE: "W",
                  TIGRESS_ESCAPE: "TE"}


def code_name(code: int) -> str:
    """Short name of a play code as in the reference's case table: G7, B14, E, L, Pi, TP, TE, SK, M, K, W."""
    if 0 <= code < 56:
        return f"{SUIT_LETTERS[SUIT[code]]}{VALUE[code]}"
    return _SPECIAL_NAMES[code]


def action_name(action: int) -> str:
    """Readable name of an action id (error messages)."""
    if 0 <= action < NUM_CODES:
        return code_name(action)
    if BID0 <= action < ROSIE0:
        return f"bid {action - BID0}"
    if ROSIE0 <= action < RASCAL0:
        return f"Rosie: seat +{action - ROSIE0} leads"
    if RASCAL0 <= action < HARRY0:
        return f"Rascal: wager {10 * (action - RASCAL0)}"
    if HARRY0 <= action < CANNON0:
        return f"Harry: bid {action - HARRY0 - 1:+d}"
    if CANNON0 <= action < NUM_ACTIONS:
        return ("Grapeshot", "Cannonball")[action - CANNON0]
    return f"<action {action} out of range [0, {NUM_ACTIONS})>"


def parse_trick(text: str) -> list[int]:
    """Play codes of a trick written as in the reference's case table, e.g. "E, P1, P6, G14".

    Repeated specials take successive copies (three "E" are Escapes 56, 57, 58; "Pi" the named Pirates
    in id order)."""
    pools = {"E": list(ESCAPES), "Pi": list(PIRATES), "M": list(MERMAIDS), "L": list(LOOTS)}
    single = {"TP": TIGRESS, "TE": TIGRESS_ESCAPE, "SK": SKULL_KING, "K": KRAKEN, "W": WHITE_WHALE}
    codes = []
    for tok in (t.strip() for t in text.split(",")):
        if tok in pools:
            codes.append(pools[tok].pop(0))
        elif tok in single:
            codes.append(single[tok])
        elif tok[:1] in SUIT_LETTERS and tok[1:].isdigit() and 1 <= int(tok[1:]) <= 14:
            codes.append(card_id(SUIT_LETTERS.index(tok[0]), int(tok[1:])))
        else:
            raise ValueError(f"unknown card {tok!r} in trick {text!r}; use G/Y/P/B + 1-14, E, L, Pi, TP, TE, "
                             f"SK, M, K or W")
    return codes


# --- device tables -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CardTables:
    """The per-code tables as tensors on one device (index them with play codes 0-74)."""

    cls: torch.Tensor
    """[75] int32 class of each play code (NUMBER, ESCAPE_LIKE, ...)."""
    suit: torch.Tensor
    """[75] int32 suit, -1 for specials."""
    value: torch.Tensor
    """[75] int32 face value, 0 for specials."""
    fourteen_bonus: torch.Tensor
    """[75] int32 capture bonus of each 14."""
    card: torch.Tensor
    """[75] int64 card id of each play code (the Tigress for both of hers)."""
    special: torch.Tensor
    """[74] bool: cards that may always be played (every non-number card)."""


@lru_cache(maxsize=None)
def tables(device: torch.device) -> CardTables:
    def t(values, dtype=torch.int32):
        return torch.tensor(values, dtype=dtype, device=device)

    return CardTables(cls=t(CLASS), suit=t(SUIT), value=t(VALUE), fourteen_bonus=t(FOURTEEN_BONUS),
                      card=t(CARD_OF_CODE, torch.int64), special=t([c >= 56 for c in range(NUM_CARDS)], torch.bool))
