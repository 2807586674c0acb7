"""Ratings from game outcomes: Elo, OpenSkill (through the ``openskill`` library), and Bradley-Terry
maximum likelihood with bootstrap confidence intervals for tournaments.

A game's outcome is the first player's score: 1 win, 0.5 draw, 0 loss. Elo (Elo 1978; the logistic
form with 400 points per factor of 10 in odds) updates both players after each game by
``K * (score - expected)``. OpenSkill's Plackett-Luce model (Joshi 2024, after Weng & Lin 2011) keeps a
mean and an uncertainty per player; its ``ordinal`` (mu - 3 sigma) is the conservative skill. Host code,
on small Python lists: it runs once per league step, never in the hot loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

try:  # optional: leagues rate with Elo alone where the library is missing
    from openskill.models import PlackettLuce
except ImportError:  # pragma: no cover - exercised on machines without the extra
    PlackettLuce = None

ELO_START = 1000.0
"""Rating of a new player."""


def elo_expected(rating: float, other: float) -> float:
    """Expected score of ``rating`` against ``other``: 1 / (1 + 10^((other - rating) / 400))."""
    return 1.0 / (1.0 + 10.0 ** ((other - rating) / 400.0))


def elo_update(a: float, b: float, score: float, k: float) -> tuple[float, float]:
    """Ratings of ``a`` and ``b`` after one game in which ``a`` scored ``score``."""
    delta = k * (score - elo_expected(a, b))
    return a + delta, b - delta


def interleave(counts: dict[str, tuple[float, float, float]], cap: int) -> list[tuple[str, float]]:
    """The games of a period as a sequence of (opponent, score) from per-opponent (wins, draws, losses):
    at most ``cap`` games (a proportional subsample, largest remainders first, when there are more),
    each opponent's games spread evenly over the sequence and its wins, draws and losses spread evenly
    among them. Deterministic, so replaying a period gives the same ratings."""
    cells = [(m, s, n) for m, wdl in counts.items() for s, n in zip((1.0, 0.5, 0.0), wdl) if n > 0]
    total = sum(n for _, _, n in cells)
    if total <= 0:
        return []
    scale = min(1.0, cap / total)
    whole = [int(math.floor(n * scale)) for _, _, n in cells]
    rest = sorted(range(len(cells)), key=lambda i: (-(cells[i][2] * scale - whole[i]), i))
    for i in rest[: max(0, min(cap, round(total * scale)) - sum(whole))]:
        whole[i] += 1
    games: list[tuple[float, str, float]] = []
    for m in counts:
        mine = [(s, n) for (mm, s, _), n in zip(cells, whole) if mm == m and n > 0]
        n_m = sum(n for _, n in mine)
        # each outcome's games at evenly spaced fractions of the opponent's share, then merged in order
        seq = sorted(((j + 0.5) / n, s) for s, n in mine for j in range(n))
        games += [((j + 0.5) / n_m, m, s) for j, (_, s) in enumerate(seq)]
    order = {m: i for i, m in enumerate(counts)}
    return [(m, s) for _, m, s in sorted(games, key=lambda g: (g[0], order[g[1]]))]


@dataclass
class Ratings:
    """Elo and (where ``openskill`` is installed) OpenSkill ratings of named players."""

    k: float = 8.0
    elo: dict = field(default_factory=dict)
    skill: dict = field(default_factory=dict)
    """name -> [mu, sigma] of OpenSkill's Plackett-Luce model."""
    games: dict = field(default_factory=dict)

    def __post_init__(self):
        self.model = PlackettLuce() if PlackettLuce is not None else None

    def add(self, name: str, like: str | None = None) -> None:
        """A new player, starting from ``like``'s ratings (a snapshot of the learner) or afresh."""
        self.elo[name] = self.elo[like] if like else ELO_START
        self.games[name] = 0
        if self.model is not None:
            fresh = self.model.rating()
            self.skill[name] = list(self.skill[like]) if like else [fresh.mu, fresh.sigma]

    def remove(self, name: str) -> None:
        for table in (self.elo, self.skill, self.games):
            table.pop(name, None)

    def play(self, a: str, b: str, score: float) -> None:
        """One game of ``a`` against ``b``, ``a`` scoring ``score``."""
        self.elo[a], self.elo[b] = elo_update(self.elo[a], self.elo[b], score, self.k)
        self.games[a] += 1
        self.games[b] += 1
        if self.model is not None:
            ra = self.model.rating(mu=self.skill[a][0], sigma=self.skill[a][1])
            rb = self.model.rating(mu=self.skill[b][0], sigma=self.skill[b][1])
            ranks = [0, 1] if score > 0.5 else [1, 0] if score < 0.5 else [0, 0]
            [[ra], [rb]] = self.model.rate([[ra], [rb]], ranks=ranks)
            self.skill[a], self.skill[b] = [ra.mu, ra.sigma], [rb.mu, rb.sigma]

    def ordinal(self, name: str) -> float | None:
        """OpenSkill's conservative skill mu - 3 sigma (None without the library)."""
        return self.skill[name][0] - 3 * self.skill[name][1] if name in self.skill else None

    def state(self) -> dict:
        return {"k": self.k, "elo": self.elo, "skill": self.skill, "games": self.games}

    @classmethod
    def from_state(cls, state: dict) -> Ratings:
        r = cls(state["k"], dict(state["elo"]), {n: list(v) for n, v in state["skill"].items()}, dict(state["games"]))
        if r.model is None:
            r.skill = {}
        return r


def bradley_terry(wins: np.ndarray, prior: float = 1.0, iters: int = 5000, tol: float = 1e-9) -> np.ndarray:
    """Elo-scale ratings (mean 0) maximizing the Bradley-Terry likelihood of ``wins[..., i, j]`` (games i
    won against j, draws counted half to each), by Hunter's (2004) MM iteration, over any leading batch
    dims. ``prior`` adds that many virtual draws to every pair that met, so that an unbeaten player gets
    a finite rating."""
    wins = np.asarray(wins, dtype=np.float64)
    met = (wins + np.swapaxes(wins, -1, -2)) > 0
    w = wins + prior / 2 * met
    g = w + np.swapaxes(w, -1, -2)
    won = w.sum(-1)
    log_s = np.zeros(wins.shape[:-1])
    for _ in range(iters):
        s = np.exp(log_s)
        denom = (g / (s[..., :, None] + s[..., None, :])).sum(-1)
        new = np.where(denom > 0, np.log(np.maximum(won, 1e-300)) - np.log(np.maximum(denom, 1e-300)), log_s)
        new -= new.mean(-1, keepdims=True)
        done = np.max(np.abs(new - log_s)) < tol
        log_s = new
        if done:
            break
    return 400.0 * log_s / np.log(10.0)


def bootstrap_intervals(results: np.ndarray, resamples: int = 200, level: float = 0.95, seed: int = 0,
                        prior: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ratings, low, high): Bradley-Terry Elo of a results tensor ``[P, P, 3]`` (per ordered pair: i's wins,
    draws and losses against j) with a percentile bootstrap interval: each pair's games are redrawn from a
    multinomial with the observed outcome frequencies, ``resamples`` times. The frequencies count the
    ``prior``'s virtual draws as the ratings do, so a pair that always ended the same way is still redrawn
    with some spread (else an unbeaten player's interval would shrink to its point). Such a pair's resamples
    can only fall short of its record, so where they all lie on one side of a rating the interval is
    widened to reach it: it always contains the rating."""
    results = np.asarray(results, dtype=np.float64)
    pairs = results + results.transpose(1, 0, 2)[:, :, ::-1]  # both orders of each pair, from i's side
    n = pairs.sum(2)
    smoothed = pairs + prior * np.array([0.0, 1.0, 0.0])
    p = np.divide(smoothed, smoothed.sum(2, keepdims=True), out=np.zeros_like(pairs), where=n[:, :, None] > 0)
    rng = np.random.default_rng(seed)
    sample = np.zeros((resamples, *pairs.shape))
    for i, j in zip(*np.nonzero(np.triu(n > 0, 1))):
        sample[:, i, j] = rng.multinomial(int(round(n[i, j])), p[i, j], size=resamples)
        sample[:, j, i] = sample[:, i, j, ::-1]
    score = lambda r: r[..., 0] + 0.5 * r[..., 1]  # noqa: E731
    elo, draws = bradley_terry(score(pairs), prior), bradley_terry(score(sample), prior)
    alpha = (1 - level) / 2
    low, high = np.quantile(draws, alpha, axis=0), np.quantile(draws, 1 - alpha, axis=0)
    return elo, np.minimum(low, elo), np.maximum(high, elo)


def wilson(successes: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval of a proportion (draws counted half): (low, high)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half
