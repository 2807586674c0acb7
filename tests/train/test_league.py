"""The league's host side and tournaments, on hand-worked cases: Elo updates, the interleaved game order,
OpenSkill through its own library, pool add/drop rules, matchmaking weights, Bradley-Terry ratings,
Wilson intervals, and a round robin of two scripted players whose every game is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nitro.envs.connect_four import ConnectFour
from nitro.train.config import LeagueConfig
from nitro.train.league import LEARNER, League
from nitro.train.ratings import Ratings, bradley_terry, elo_expected, elo_update, interleave, wilson
from nitro.train.tournament import Player, play, table


def test_elo_by_hand():
    assert elo_update(1000.0, 1000.0, 1.0, 8.0) == (1004.0, 996.0)  # expected 0.5, 8 * (1 - 0.5) = 4
    # 1200 vs 1000: expected 1 / (1 + 10^(-200/400)) = 0.7597469; a draw moves 8 * (0.5 - 0.7597469)
    assert elo_expected(1200.0, 1000.0) == pytest.approx(0.7597469, abs=1e-7)
    a, b = elo_update(1200.0, 1000.0, 0.5, 8.0)
    assert a == pytest.approx(1200.0 - 2.0779752, abs=1e-6) and b == pytest.approx(1000.0 + 2.0779752, abs=1e-6)


def test_games_are_interleaved_deterministically():
    # a: 2 wins, 1 draw, 1 loss at fractions 1/8, 3/8, 5/8, 7/8 in the order win, loss, draw, win (each
    # outcome spread over a's share, ties by score); b: 2 losses at 1/4 and 3/4; merged by fraction
    games = interleave({"a": (2, 1, 1), "b": (0, 0, 2)}, cap=100)
    assert games == [("a", 1.0), ("b", 0.0), ("a", 0.0), ("a", 0.5), ("b", 0.0), ("a", 1.0)]
    # 700 games capped at 10: 10/700 of each count, 4.29 4.29... -> floors 4, 1, 2, 1 (8) and the two
    # largest remainders (a's losses 0.86, then a's draws 0.43, first among equals) get one more
    capped = interleave({"a": (300, 100, 200), "b": (100, 0, 0)}, cap=10)
    assert len(capped) == 10
    assert sorted(s for m, s in capped if m == "a") == [0.0] * 3 + [0.5] * 2 + [1.0] * 4
    assert [s for m, s in capped if m == "b"] == [1.0]


def test_openskill_ratings_are_the_librarys():
    openskill = pytest.importorskip("openskill.models")
    model = openskill.PlackettLuce()
    r = Ratings(k=8.0)
    r.add("a")
    r.add("b")
    r.play("a", "b", 1.0)
    [[a], [b]] = model.rate([[model.rating()], [model.rating()]], ranks=[0, 1])
    assert r.skill["a"] == [a.mu, a.sigma] and r.skill["b"] == [b.mu, b.sigma]
    assert r.ordinal("a") == pytest.approx(a.mu - 3 * a.sigma) and r.skill["a"][0] > 25 > r.skill["b"][0]
    r.add("c", like="a")  # a snapshot starts from its source's ratings
    assert r.skill["c"] == r.skill["a"] and r.elo["c"] == r.elo["a"] == 1004.0


def test_pool_adds_and_drops_by_the_stated_rule():
    oldest = League(LeagueConfig(pool_size=2, drop="oldest"))
    assert [oldest.add_snapshot(u) for u in (0, 10, 20)] == [0, 1, 0]  # snap0 (oldest) leaves for snap20
    assert oldest.slots == ["snap20", "snap10"] and "snap0" not in oldest.ratings.elo
    weakest = League(LeagueConfig(pool_size=2, drop="weakest"))
    weakest.add_snapshot(0)
    weakest.add_snapshot(10)
    weakest.ratings.elo.update({"snap0": 1100.0, "snap10": 900.0})
    assert weakest.add_snapshot(20) == 1 and weakest.slots == ["snap0", "snap20"]  # snap10 was weakest
    weakest.ratings.elo.update({"snap0": 1000.0, "snap20": 1000.0})
    assert weakest.add_snapshot(30) == 0  # equal ratings: the oldest leaves


def test_matchmaking_weights_by_hand():
    lg = League(LeagueConfig(pool_size=1, bots=["random"], mix={"self": 0.5, "pool": 0.5}, matchmaking="pfsp"))
    lg.add_snapshot(0)
    lg.ratings.elo.update({LEARNER: 1000.0, "snap0": 1000.0, "bot:random": 800.0})
    # pfsp (power 2): p = 0.5 against snap0 -> 0.25; p = 0.7597469 against random -> 0.2402531^2 = 0.0577215
    w = [0.25, 0.2402531**2]
    assert lg.probs() == pytest.approx([0.5, 0.5 * w[0] / sum(w), 0.5 * w[1] / sum(w)], abs=1e-6)
    lg.cfg.matchmaking = "even"  # p (1 - p): 0.25 and 0.7597469 * 0.2402531 = 0.1825316
    w = [0.25, 0.7597469 * 0.2402531]
    assert lg.probs() == pytest.approx([0.5, 0.5 * w[0] / sum(w), 0.5 * w[1] / sum(w)], abs=1e-6)
    lg.cfg.matchmaking = "uniform"
    assert lg.probs() == pytest.approx([0.5, 0.25, 0.25])
    lg.mix = {"self": 1.0, "random": 3.0}  # a named bot takes a fixed share
    assert lg.probs() == pytest.approx([0.25, 0.0, 0.75])


def test_record_rates_the_learner_against_each_member():
    lg = League(LeagueConfig(pool_size=2, bots=["random"]))
    lg.add_snapshot(0)
    # ids: self (unrated), slot0 = snap0, slot1 empty, bot:random
    metrics = lg.record([[5, 0, 0], [1, 0, 0], [0, 0, 0], [0, 0, 1]], update=5)
    # interleaved: snap0 at 1/2, random at 1/2, snap0 first (member order): learner 1000 beats snap0 (both
    # at 1000): +4 -> 1004; then loses to random (1000): expected 0.5057553, 8 * -0.5057553 = -4.046
    assert lg.ratings.elo["snap0"] == 996.0
    e = elo_expected(1004.0, 1000.0)
    assert lg.ratings.elo[LEARNER] == pytest.approx(1004.0 - 8 * e, abs=1e-9)
    assert metrics["league/games"] == 2 and metrics["league/win_rate"] == 0.5 and metrics["league/win_rate/random"] == 0
    assert lg.history[-1]["update"] == 5 and lg.history[-1]["games"] == {"snap0": 1, "bot:random": 1}


def test_bradley_terry_by_hand():
    # A beat B 3 times of 4: p = 3/4, odds 3, Elo gap 400 log10(3) = 190.85, split around the mean
    elo = bradley_terry(np.array([[0.0, 3.0], [1.0, 0.0]]), prior=0.0)
    assert elo == pytest.approx([95.42425, -95.42425], abs=1e-3)
    # one virtual draw per pair: 3.5 of 5, odds 7/3 -> 400 log10(7/3) = 147.19
    elo = bradley_terry(np.array([[0.0, 3.0], [1.0, 0.0]]), prior=1.0)
    assert elo[0] - elo[1] == pytest.approx(400 * math.log10(7 / 3), abs=1e-3)


def test_wilson_interval_of_eight_in_ten():
    low, high = wilson(8, 10)  # the textbook value (e.g. statsmodels' proportion_confint, method="wilson")
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)


def test_round_robin_of_players_whose_games_are_known():
    """A player that always drops into column 1 and one that always drops into column 2: whoever moves
    first completes four in its column on its 4th stone (ply 7) before the other's 4th (ply 8). Each
    player moves first in half of its games, so every pair splits its games exactly."""
    env = ConnectFour()
    col = lambda c: lambda state, key: torch.full((state.height.shape[0] * 2,), c)  # noqa: E731
    players = [Player("col1", bot=col(0)), Player("col2", bot=col(1)), Player("tactical", bot=env.tactical_bot)]
    results = play(env, players, games=16, seed=3)
    assert results[0, 1].tolist() == [8, 0, 8] and results[1, 0].tolist() == [8, 0, 8]
    # the tactical bot blocks a column's third stone and wins every game against them
    assert results[2, 0].tolist() == [16, 0, 0] and results[2, 1].tolist() == [16, 0, 0]
    rows = {r["name"]: r for r in table(["col1", "col2", "tactical"], results)}
    assert rows["col1"]["elo"] == pytest.approx(rows["col2"]["elo"], abs=1e-6)
    assert rows["tactical"]["elo_low"] > rows["col1"]["elo_high"]
    assert rows["tactical"]["wins"] == 64 and rows["col1"]["score"] == pytest.approx(16 / 64)
