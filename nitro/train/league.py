"""The league: a pool of past snapshots of the learner and scripted bots, rated from the games the
learner plays against them, and matchmaking that says whom the learner meets next.

Host-side bookkeeping, once per league step (``league.update_every`` updates). The device side lives in
``nitro.train.opponents`` and the trainer: the stacked snapshots, the per-env opponent ids and the
per-member outcome counts the trainer hands over here.

Members are numbered as the opponent ids of the batch: 0 is the learner itself (``self``), 1..K the
pool's slots (empty until filled), then the bots. Rules:

- **adding**: a snapshot of the learner joins every ``add_every`` updates (the initial policy at update
  0) and starts from the learner's ratings;
- **dropping**: a full pool frees one slot for it, the oldest snapshot (``drop=oldest``) or the one of
  lowest Elo, the oldest among equals (``drop=weakest``); bots are never dropped;
- **matchmaking**: a new game goes to ``self``, to the pool or to a named bot with the shares of ``mix``;
  the pool's share is spread over its snapshots and bot members uniformly, by PFSP (weight
  ``(1 - p)^power``: hard opponents more often; Vinyals et al. 2019) or evenly matched (weight
  ``p (1 - p)``), ``p`` the learner's recent score against the member: its games' score with one virtual
  win and one virtual loss, earlier league steps' games weighing ``score_decay`` less per step. As in
  AlphaStar, measured rather than read off ratings: Elo drifts in a self-play pool (each snapshot joins at
  the learner's rating, which then climbs by beating it), so a bot the learner once beat would look ever
  easier, stop being played and be forgotten.
"""

from __future__ import annotations

import json
from pathlib import Path

from nitro.train import checkpoint
from nitro.train.config import ConfigError, LeagueConfig
from nitro.train.ratings import Ratings, interleave

LEARNER = "learner"
SELF = "self"


def recent_score(score: float, games: float) -> float:
    """The learner's score against a member from its decayed (score, games), with one virtual win and one
    virtual loss."""
    return (score + 1.0) / (games + 2.0)


def member_names(pool_size: int, bots: list[str]) -> list[str]:
    """Opponent ids in order: self, the pool's slots (named when filled), the bots."""
    return [SELF, *(f"slot{i}" for i in range(pool_size)), *(f"bot:{b}" for b in bots)]


class League:
    """Pool membership, ratings and matchmaking of one training run."""

    def __init__(self, cfg: LeagueConfig):
        self.cfg = cfg
        self.slots: list[str | None] = [None] * cfg.pool_size
        """The member in each pool slot, named snap<update>, or None while empty."""
        self.added: dict[str, int] = {}
        """Update at which each snapshot joined."""
        self.ratings = Ratings(cfg.elo_k)
        self.ratings.add(LEARNER)
        self.scores: dict[str, list[float]] = {}
        """Member -> [score, games] of the learner against it, decayed per league step (matchmaking's p)."""
        for b in cfg.bots:
            self.ratings.add(f"bot:{b}")
            self.scores[f"bot:{b}"] = [0.0, 0.0]
        self.mix = dict(cfg.mix)
        self.history: list[dict] = []
        """One row per league step: update, ratings of the learner and every member."""

    # ------------------------------------------------------------------ membership
    @property
    def members(self) -> list[str | None]:
        """Opponent id -> member name (None for an empty slot)."""
        return [SELF, *self.slots, *(f"bot:{b}" for b in self.cfg.bots)]

    def add_snapshot(self, update: int) -> int:
        """Admit a snapshot of the learner taken at ``update``; returns the slot (0-based) it takes."""
        name = f"snap{update}"
        free = [i for i, m in enumerate(self.slots) if m is None]
        if free:
            slot = free[0]
        else:
            key = (lambda i: self.added[self.slots[i]]) if self.cfg.drop == "oldest" else \
                (lambda i: (self.ratings.elo[self.slots[i]], self.added[self.slots[i]]))
            slot = min(range(len(self.slots)), key=key)
            self.ratings.remove(self.slots[slot])
            del self.added[self.slots[slot]], self.scores[self.slots[slot]]
        self.slots[slot] = name
        self.added[name] = update
        self.ratings.add(name, like=LEARNER)
        self.scores[name] = [0.0, 0.0]
        return slot

    # ------------------------------------------------------------------ ratings and matchmaking
    def record(self, outcomes: list[list[float]], update: int) -> dict:
        """Rate the learner's games of one league step: ``outcomes[id]`` = its (wins, draws, losses)
        against opponent id ``id``. Games against ``self`` rate nobody. Returns metrics to log."""
        names = self.members
        counts = {names[i]: tuple(o) for i, o in enumerate(outcomes) if i > 0 and names[i] and sum(o) > 0}
        for member, score in interleave(counts, self.cfg.rated_games):
            self.ratings.play(LEARNER, member, score)
        decay = self.cfg.score_decay
        for member, (score, games) in self.scores.items():
            w, d, l = counts.get(member, (0, 0, 0))
            self.scores[member] = [decay * score + w + 0.5 * d, decay * games + w + d + l]
        total = [sum(o[j] for o in outcomes[1:]) for j in range(3)]
        metrics = {"league/elo": self.ratings.elo[LEARNER], "league/games": sum(total)}
        if sum(total) > 0:
            metrics["league/win_rate"] = (total[0] + 0.5 * total[1]) / sum(total)
        for name, (w, d, l) in counts.items():
            if name.startswith("bot:"):
                metrics[f"league/win_rate/{name[4:]}"] = (w + 0.5 * d) / (w + d + l)
        if self.ratings.ordinal(LEARNER) is not None:
            metrics["league/openskill"] = self.ratings.ordinal(LEARNER)
        self.history.append({"update": update, "elo": dict(self.ratings.elo),
                             "openskill": {n: self.ratings.ordinal(n) for n in self.ratings.skill},
                             "games": {n: sum(o) for n, o in counts.items()}})
        return metrics

    def probs(self) -> list[float]:
        """The chance that a new game goes to each opponent id."""
        names = self.members
        share = {k: v / sum(self.mix.values()) for k, v in self.mix.items()}
        out = [0.0] * len(names)
        out[0] = share.get(SELF, 0.0)
        for i, n in enumerate(names):
            if n and n.startswith("bot:"):
                out[i] += share.get(n[4:], 0.0)
        pool = [i for i, n in enumerate(names) if i > 0 and n]
        weights = [self._weight(names[i]) for i in pool]
        if share.get("pool", 0.0) > 0 and pool:
            total = sum(weights)
            weights = weights if total > 0 else [1.0] * len(pool)
            for i, w in zip(pool, weights):
                out[i] += share["pool"] * w / sum(weights)
        elif share.get("pool", 0.0) > 0:
            out[0] += share["pool"]  # nobody in the pool yet: those games are self-play
        return out

    def expected(self, member: str) -> float:
        """Matchmaking's p: the learner's recent score against ``member`` (0.5 before any game)."""
        return recent_score(*self.scores[member])

    def _weight(self, member: str) -> float:
        if self.cfg.matchmaking == "uniform":
            return 1.0
        p = self.expected(member)
        return (1.0 - p) ** self.cfg.pfsp_power if self.cfg.matchmaking == "pfsp" else p * (1.0 - p)

    # ------------------------------------------------------------------ persistence
    def state(self) -> dict:
        return {"slots": self.slots, "added": self.added, "ratings": self.ratings.state(), "scores": self.scores,
                "mix": self.mix, "history_len": len(self.history)}

    def load_state(self, state: dict, history: list[dict]) -> None:
        if len(state["slots"]) != len(self.slots):
            raise ConfigError(f"the checkpoint's league has {len(state['slots'])} pool slots, this run's "
                              f"league.pool_size={len(self.slots)}; resume with the same league.pool_size")
        self.slots, self.added = list(state["slots"]), dict(state["added"])
        self.ratings = Ratings.from_state(state["ratings"])
        fresh = {m: [0.0, 0.0] for m in self.members[1:] if m}  # checkpoints from before scores were kept
        self.scores = {m: list(v) for m, v in state.get("scores", fresh).items()}
        self.mix = dict(state["mix"])
        self.history = history[: state["history_len"]]


def read_history(run_dir: str | Path) -> list[dict]:
    path = Path(run_dir) / "league.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def append_history(run_dir: str | Path, row: dict) -> None:
    with (Path(run_dir) / "league.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")


def write_history(run_dir: str | Path, history: list[dict]) -> None:
    path = Path(run_dir) / "league.jsonl"
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(h) + "\n" for h in history))
    tmp.replace(path)


def summary(run_dir: str | Path) -> dict:
    """A run's league as its latest checkpoint left it: the table (best Elo first: name, elo, openskill,
    games, joined, in the pool now, and the learner's recent score against it that matchmaking reads)
    and the history."""
    meta = checkpoint.load_meta(checkpoint.latest(run_dir))
    if "league" not in meta:
        raise ValueError(f"{run_dir} was trained without a league (league.pool_size=0 and no league.bots)")
    state = meta["league"]
    ratings = Ratings.from_state(state["ratings"])
    history = read_history(run_dir)[: state["history_len"]]
    scores = state.get("scores", {})
    rows = [{"name": n, "elo": e, "openskill": ratings.ordinal(n), "games": ratings.games[n],
             "joined": state["added"].get(n), "member": n != LEARNER,
             "recent_score": recent_score(*scores[n]) if n in scores else None}
            for n, e in ratings.elo.items()]
    return {"update": meta["update"], "table": sorted(rows, key=lambda r: -r["elo"]), "history": history}
