"""The ruleset and episode design of a Skull King env: one frozen dataclass, a docstring per field.

Defaults are the current edition's base game (70 cards, Skull King's scoring with bonuses) for four
players over ten rounds. The readings of the rules' ambiguous cases are fields here, each defaulting to
the reading chosen in docs/SKULLKING.md (the reference's §8 rows are named in brackets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nitro.envs.skullking import cards

SCHEDULES = {
    "standard": (1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
    "even_keeled": (2, 4, 6, 8, 10),
    "skip_to_the_brawl": (6, 7, 8, 9, 10),
    "swift_n_salty": (5, 5, 5, 5, 5),
    "broadside_barrage": (10,) * 10,
    "whirlpool": (9, 7, 5, 3, 1),
    "past_your_bedtime": (1,),
}
"""Cards dealt per round of each named schedule (the rulebook's variable card counts, reference §3)."""


def _one_of(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"SkullKing param {name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")


@dataclass(frozen=True)
class SkullKingParams:
    num_players: int = 4
    """Players (agents) per game, 2-8; two players add Graybeard's ghost hand (reference §3)."""
    kraken: bool = False
    """Add the Kraken (advanced): the trick it wins is destroyed."""
    white_whale: bool = False
    """Add the White Whale (advanced): specials lose, the highest number wins regardless of suit."""
    loot: bool = False
    """Add the two Loot cards (advanced): played as Escapes; their player allies with the trick's winner
    (+20 each if both make their bids). Not used with two players."""
    pirate_abilities: bool = False
    """The named Pirates' abilities (advanced): winning a trick with Rosie (choose the next leader), Bendt
    (draw 2, discard 2), Rascal (wager 0/10/20), Juanita (see the undealt cards) or Harry (bid -1/0/+1)."""
    tigress: Literal["choose", "pirate", "escape"] = "choose"
    """How the Tigress may be played: as the player declares ("choose", the rules), or always as a Pirate
    or always as an Escape."""
    scoring: Literal["skull_king", "rascal", "rascal_cannon"] = "skull_king"
    """Skull King's scoring (20/bid trick, 10 x cards per zero bid), Rascal's scoring (10 x cards, half
    when off by one), or Rascal's with the simultaneous Grapeshot/Cannonball choice after bidding."""
    schedule: str | tuple[int, ...] = "standard"
    """Cards dealt in each round: a name in SCHEDULES or a tuple of hand sizes (1-10 each). Eight players
    are capped at 8 cards a round (reference §3)."""
    episode: Literal["game", "round"] = "game"
    """"game": an episode plays every round from ``start_round`` on. "round": an episode is one round
    (every round reshuffles the whole deck, so rounds are independent games), drawn by ``round_weights``."""
    round_weights: tuple[float, ...] | None = None
    """With episode="round": relative frequency of each round of the schedule (None: uniform)."""
    start_round: int | None = None
    """First round (1-based) of every episode; with episode="round", fixes the round played."""
    escape_then_character: Literal["no_suit", "defer"] = "no_suit"
    """[A1] An escape-like lead followed by a Pirate, Skull King, Mermaid or beast: no suit for the trick
    ("no_suit", the closest reading of the text), or keep deferring to the first number card ("defer")."""
    kraken_next_leader: Literal["would_have_won", "left_of_kraken"] = "would_have_won"
    """[A5] Who leads after a Kraken: whoever would have won with the beasts played as Escapes (FAQ, 2024
    print) or the player left of the Kraken's (2021 print)."""
    whale_void_next_leader: Literal["would_have_won", "whale_player"] = "would_have_won"
    """[A6] Who leads after a White Whale trick without number cards: as for the Kraken, or the Whale's
    player (2021 print)."""
    whale_escapes_only: Literal["void", "first_escape"] = "void"
    """[A7] A White Whale trick of escape-like cards only: discarded ("void", the rule's letter) or won
    by the first escape-like card (Kryo4lex)."""
    graybeard_after_win: Literal["graybeard", "round_leader"] = "graybeard"
    """[A13] Two players: after Graybeard wins a trick he leads the next (2021 book) or the player who led
    the round does, with Graybeard second (2024 transcription)."""
    observe_scores: bool = True
    """Put each seat's total score in the observations. Training on single rounds (episode="round") can
    turn it off: the scores before the round are then always 0, so a policy never learns what they mean."""
    reward_scale: float = 0.01
    """Each seat's reward is its score change (paid when a round is scored) times this."""
    win_reward: float = 0.0
    """Added at the episode's end to every seat with the highest score (ties share it)."""
    checked: bool = True
    """Check every action in ``step``: shape, dtype, device, and that each acting seat's action is legal.
    Errors raise on CPU and assert on the device on CUDA (no host sync); turn off for raw speed."""

    def __post_init__(self):
        for name in ("schedule", "round_weights"):  # lists (from YAML) become tuples: params are hashable
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        n = self.num_players
        if not isinstance(n, int) or not 2 <= n <= cards.MAX_PLAYERS:
            raise ValueError(f"SkullKing num_players must be an int in 2..{cards.MAX_PLAYERS}; got {n!r}")
        _one_of("tigress", self.tigress, ("choose", "pirate", "escape"))
        _one_of("scoring", self.scoring, ("skull_king", "rascal", "rascal_cannon"))
        _one_of("episode", self.episode, ("game", "round"))
        _one_of("escape_then_character", self.escape_then_character, ("no_suit", "defer"))
        _one_of("kraken_next_leader", self.kraken_next_leader, ("would_have_won", "left_of_kraken"))
        _one_of("whale_void_next_leader", self.whale_void_next_leader, ("would_have_won", "whale_player"))
        _one_of("whale_escapes_only", self.whale_escapes_only, ("void", "first_escape"))
        _one_of("graybeard_after_win", self.graybeard_after_win, ("graybeard", "round_leader"))
        if self.loot and n == 2:
            raise ValueError("SkullKing loot=True needs 3 or more players (Loot is not used with two); "
                             "set loot=False or num_players>=3")
        if isinstance(self.schedule, str):
            _one_of("schedule", self.schedule, tuple(SCHEDULES))
        elif not (isinstance(self.schedule, (tuple, list)) and self.schedule
                  and all(isinstance(d, int) and 1 <= d <= cards.MAX_BID for d in self.schedule)):
            raise ValueError(f"SkullKing schedule must be a name ({', '.join(SCHEDULES)}) or a non-empty tuple "
                             f"of hand sizes in 1..{cards.MAX_BID}; got {self.schedule!r}")
        rounds = len(self.hand_sizes)  # every deal fits: 7 x 10 = 70 cards, 8 players get at most 8
        if self.start_round is not None and not (isinstance(self.start_round, int) and 1 <= self.start_round <= rounds):
            raise ValueError(f"SkullKing start_round must be None or an int in 1..{rounds} (rounds of the "
                             f"schedule); got {self.start_round!r}")
        if self.round_weights is not None:
            w = tuple(self.round_weights)
            if self.episode != "round":
                raise ValueError("SkullKing round_weights apply to episode='round' only; set episode='round' "
                                 "or drop round_weights")
            if len(w) != rounds or any(not x >= 0 for x in w) or sum(w) <= 0:
                raise ValueError(f"SkullKing round_weights must be {rounds} non-negative numbers (one per round "
                                 f"of the schedule) with a positive sum; got {self.round_weights!r}")

    @property
    def num_hands(self) -> int:
        """Hands dealt: one per player, plus Graybeard's with two players."""
        return 3 if self.num_players == 2 else self.num_players

    @property
    def hand_sizes(self) -> tuple[int, ...]:
        """Cards dealt in each round (the schedule, capped at 8 for eight players)."""
        sizes = SCHEDULES[self.schedule] if isinstance(self.schedule, str) else tuple(self.schedule)
        cap = 8 if self.num_players == 8 else cards.MAX_BID
        return tuple(min(d, cap) for d in sizes)

    @property
    def deck(self) -> tuple[int, ...]:
        """Card ids in the deck: the base 70 plus the chosen advanced cards."""
        extra = (cards.LOOTS if self.loot else ()) + ((cards.KRAKEN,) if self.kraken else ()) \
            + ((cards.WHITE_WHALE,) if self.white_whale else ())
        return cards.BASE_DECK + extra
