"""Round-robin tournaments (``nitro.train.tournament``) of players whose every game is known."""

from __future__ import annotations

import pytest
import torch

from nitro.envs.connect_four import ConnectFour
from nitro.train.tournament import Player, play, table


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
