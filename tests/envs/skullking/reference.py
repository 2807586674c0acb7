"""A plain-Python Skull King written rule by rule from docs/reference/skullking_cardgames.md (§3-§6), one game
at a time, to check the batched env against in lockstep. It shares only the card ids and the params with the
env: no tensor code, and trick resolution follows §5.1's ordered rules rather than §5.4's keys.

Chance (the deal, Graybeard's flipped card, Bendt's draw) comes from a ``chance`` object, so a test can feed
it the env's outcomes and compare everything else.
"""

from __future__ import annotations

from nitro.envs.skullking import cards as C
from nitro.envs.skullking.params import SkullKingParams

GHOST = 2


def klass(code: int) -> str:
    if code < 56:
        return "number"
    if code in C.ESCAPES or code in C.LOOTS or code == C.TIGRESS_ESCAPE:
        return "escape"
    if code in C.PIRATES or code == C.TIGRESS:
        return "pirate"
    return {C.SKULL_KING: "king", C.KRAKEN: "kraken", C.WHITE_WHALE: "whale"}.get(code, "mermaid")


def suit(code: int) -> int:
    return code // 14


def value(code: int) -> int:
    return code % 14 + 1


def lead_suit(codes: list[int], defer: bool, beasts_as_escapes: bool = False):
    """The suit to follow (0-3), None for no suit, "open" while only escape-like cards were played."""
    for i, code in enumerate(codes):
        k = klass(code)
        if k == "escape" or (beasts_as_escapes and k in ("kraken", "whale")):
            continue
        if k == "number":
            return suit(code)
        if defer and i > 0:
            continue
        return None
    return "open"


def normal_winner(codes: list[int], defer: bool) -> int:
    """§5.1, first matching rule; beasts count as escapes."""
    kinds = [klass(c) for c in codes]
    first = lambda k: kinds.index(k)  # noqa: E731
    if "king" in kinds and "mermaid" in kinds:
        return first("mermaid")
    if "king" in kinds:
        return first("king")
    if "pirate" in kinds:
        return first("pirate")
    if "mermaid" in kinds:
        return first("mermaid")
    numbers = [i for i, k in enumerate(kinds) if k == "number"]
    if numbers:
        blacks = [i for i in numbers if suit(codes[i]) == C.BLACK]
        led = lead_suit(codes, defer, beasts_as_escapes=True)
        pool = blacks or [i for i in numbers if suit(codes[i]) == led]
        return max(pool, key=lambda i: value(codes[i]))
    return 0


def resolve(codes: list[int], p: SkullKingParams):
    """(winner position or None, would-have-won position, active beast kind or None, its position, bonus)."""
    defer = p.escape_then_character == "defer"
    kinds = [klass(c) for c in codes]
    would = normal_winner(codes, defer)
    beasts = [i for i, k in enumerate(kinds) if k in ("kraken", "whale")]
    beast = kinds[beasts[-1]] if beasts else None
    at = beasts[-1] if beasts else None
    if beast == "kraken":
        return None, would, beast, at, 0
    fourteens = sum((20 if suit(c) == C.BLACK else 10) for c in codes if c < 56 and value(c) == 14)
    if beast == "whale":
        numbers = [i for i, k in enumerate(kinds) if k == "number"]
        if numbers:
            best = max(value(codes[i]) for i in numbers)
            return next(i for i in numbers if value(codes[i]) == best), would, beast, at, fourteens
        if p.whale_escapes_only == "first_escape" and all(k in ("escape", "kraken", "whale") for k in kinds):
            return kinds.index("escape"), would, beast, at, 0
        return None, would, beast, at, 0
    w = would
    bonus = fourteens
    if kinds[w] == "pirate":
        bonus += 20 * kinds.count("mermaid")
    elif kinds[w] == "king":
        bonus += 30 * kinds.count("pirate")
    elif kinds[w] == "mermaid" and "king" in kinds:
        bonus += 40
    return w, would, None, None, bonus


class Game:
    """One game of ``p``; seats 0..n-1, Graybeard = seat 2 with two players."""

    def __init__(self, p: SkullKingParams, chance, round_index: int, round_leader: int):
        self.p, self.chance = p, chance
        self.n = p.num_players
        self.score = [0] * self.n
        self.exact_bids = [0] * self.n
        self.rounds_played = 0
        self.over = False
        self.start_round(round_index, round_leader)

    # --- flow ---------------------------------------------------------------------------------------
    def start_round(self, round_index: int, round_leader: int):
        self.round, self.round_leader = round_index, round_leader
        self.dealt = self.p.hand_sizes[round_index]
        self.hands = self.chance.deal(self)
        self.bids = [None] * self.n
        self.won = [0] * self.n
        self.bonus = [0] * self.n
        self.alliances = []  # (loot seat, winner seat)
        self.wager = [0] * self.n
        self.cannonball = [False] * self.n
        self.seen_deck = [False] * self.n
        self.tricks_done = 0
        self.phase = "bid"
        self.ability = None  # (kind, seat, discards left)
        self.start_trick(round_leader)

    def start_trick(self, leader: int):
        if self.n == 2:
            human = self.round_leader if leader == GHOST else leader
            self.order = [leader, GHOST, 1 - human] if leader != GHOST else [GHOST, human, 1 - human]
        else:
            self.order = [(leader + k) % self.n for k in range(self.n)]
        self.trick = []  # play codes in order

    def acting(self) -> set[int]:
        if self.over:
            return set()
        if self.phase in ("bid", "cannon"):
            return set(range(self.n))
        if self.phase == "ability":
            return {self.ability[1]}
        return {self.order[len(self.trick)]}

    def legal(self, seat: int) -> set[int]:
        """Action ids ``seat`` may take now (empty if it does not act)."""
        if seat not in self.acting():
            return set()
        if self.phase == "bid":
            return {C.BID0 + b for b in range(self.dealt + 1)}
        if self.phase == "cannon":
            return {C.CANNON0, C.CANNON0 + 1}
        if self.phase == "ability":
            kind = self.ability[0]
            if kind == "rosie":
                return {C.ROSIE0 + r for r in range(self.n)}
            if kind == "bendt":
                return set(self.hands[seat])
            if kind == "rascal":
                return {C.RASCAL0, C.RASCAL0 + 1, C.RASCAL0 + 2}
            return {C.HARRY0 + k for k in range(3) if 0 <= self.bids[seat] + k - 1 <= self.dealt}
        hand = self.hands[seat]
        led = lead_suit(self.trick, self.p.escape_then_character == "defer")
        following = [c for c in hand if c < 56 and suit(c) == led]
        allowed = set(following) | {c for c in hand if c >= 56} if following else set(hand)
        if C.TIGRESS in allowed:
            if self.p.tigress == "escape":
                allowed.discard(C.TIGRESS)
            if self.p.tigress != "pirate":
                allowed.add(C.TIGRESS_ESCAPE)
        return allowed

    def step(self, actions: dict[int, int]) -> list[int]:
        """Apply the acting seats' actions; returns each seat's score change."""
        before = list(self.score)
        if self.phase == "bid":
            self.bids = [actions[s] - C.BID0 for s in range(self.n)]
            self.phase = "cannon" if self.p.scoring == "rascal_cannon" else "play"
        elif self.phase == "cannon":
            self.cannonball = [actions[s] == C.CANNON0 + 1 for s in range(self.n)]
            self.phase = "play"
        elif self.phase == "ability":
            self.use_ability(actions[self.ability[1]])
        else:
            seat = self.order[len(self.trick)]
            self.play(seat, actions[seat])
        self.advance()
        return [a - b for a, b in zip(self.score, before)]

    def play(self, seat: int, code: int):
        self.hands[seat].remove(C.TIGRESS if code == C.TIGRESS_ESCAPE else code)
        self.trick.append(code)

    def ghost_turn(self) -> bool:
        return (self.n == 2 and self.phase == "play" and self.tricks_done < self.dealt
                and len(self.trick) < 3 and self.order[len(self.trick)] == GHOST)

    def advance(self):
        """Everything that follows a decision until the next one: Graybeard's cards, the end of a trick, the
        round's scoring and the next deal."""
        if self.ghost_turn():
            self.ghost_plays()
        if self.phase == "play" and len(self.trick) == len(self.order):
            self.finish_trick()
            if self.ghost_turn():
                self.ghost_plays()
        if self.phase == "play" and self.tricks_done == self.dealt:
            self.score_round()

    def ghost_plays(self):
        card = self.chance.ghost_card(self)
        self.hands[GHOST].remove(card)
        self.trick.append(C.TIGRESS_ESCAPE if card == C.TIGRESS else card)

    def finish_trick(self):
        p = self.p
        winner, would, beast, at, bonus = resolve(self.trick, p)
        self.tricks_done += 1
        if winner is not None:
            seat = self.order[winner]
            if seat < self.n:
                self.won[seat] += 1
                self.bonus[seat] += bonus
            for i, code in enumerate(self.trick):
                if code in C.LOOTS and self.order[i] != seat:
                    self.alliances.append((self.order[i], seat))
            leader = seat
        elif beast == "kraken" and p.kraken_next_leader == "left_of_kraken":
            kraken_seat = self.order[at]
            leader = self.round_leader if kraken_seat == GHOST and self.n == 2 else (kraken_seat + 1) % self.n
        elif beast == "whale" and p.whale_void_next_leader == "whale_player":
            leader = self.order[at]
        else:
            leader = self.order[would]
        if self.n == 2 and leader == GHOST and p.graybeard_after_win == "round_leader":
            leader = self.round_leader
        pirate = self.trick[winner] if winner is not None else None
        taker = self.order[winner] if winner is not None else None
        self.start_trick(leader)
        if p.pirate_abilities and pirate in C.PIRATES and taker < self.n:
            kind = ("rosie", "bendt", "rascal", "juanita", "harry")[C.PIRATES.index(pirate)]
            if self.tricks_done == self.dealt and kind != "harry":
                return
            if kind == "juanita":
                self.seen_deck[taker] = True
            elif kind == "bendt":
                drawn = self.chance.bendt_draw(self, taker)
                self.hands[taker] |= drawn
                if drawn:
                    self.ability = ("bendt", taker, len(drawn))
                    self.phase = "ability"
            else:
                self.ability = (kind, taker, 0)
                self.phase = "ability"

    def use_ability(self, action: int):
        kind, seat, left = self.ability
        if kind == "rosie":
            self.start_trick((seat + action - C.ROSIE0) % self.n)
        elif kind == "bendt":
            self.hands[seat].discard(action)
            left -= 1
        elif kind == "rascal":
            self.wager[seat] = 10 * (action - C.RASCAL0)
        else:
            self.bids[seat] += action - C.HARRY0 - 1
        self.ability = (kind, seat, left)
        if kind != "bendt" or left == 0:
            self.ability, self.phase = None, "play"

    def score_round(self):
        d = self.dealt
        exact = [self.bids[s] == self.won[s] for s in range(self.n)]
        bonus = list(self.bonus)
        for loot_seat, winner in self.alliances:
            if exact[loot_seat] and exact[winner]:
                bonus[loot_seat] += 20
                bonus[winner] += 20
        for s in range(self.n):
            b, t = self.bids[s], self.won[s]
            if self.p.scoring == "skull_king":
                if b == 0:
                    pts = 10 * d + bonus[s] if t == 0 else -10 * d
                else:
                    pts = 20 * b + bonus[s] if t == b else -10 * abs(t - b)
            elif self.cannonball[s]:
                pts = 15 * d + bonus[s] if t == b else 0
            else:
                full = 10 * d + bonus[s]
                pts = full if t == b else full // 2 if abs(t - b) == 1 else 0
            pts += self.wager[s] if t == b else -self.wager[s]
            self.score[s] += pts
        self.exact_bids = [e + (self.bids[s] == self.won[s]) for s, e in enumerate(self.exact_bids)]
        self.rounds_played += 1
        last = self.p.episode == "round" or self.round + 1 == len(self.p.hand_sizes)
        if last:
            self.over = True
        else:
            self.start_round(self.round + 1, (self.round_leader + 1) % self.n)
