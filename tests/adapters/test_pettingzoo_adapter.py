"""The PettingZoo parallel adapter: PettingZoo's own API test, a Connect Four game worked by hand, bad
actions explained; and the single-agent adapters refuse multi-agent envs (and vice versa)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
from pettingzoo.test import parallel_api_test  # noqa: E402

from nitro.adapters import GymnasiumVectorEnv, PettingZooParallelEnv, SB3VecEnv  # noqa: E402


def test_pettingzoo_parallel_api_test_passes():
    parallel_api_test(PettingZooParallelEnv("ConnectFour-v3", device="cpu"), num_cycles=200)


def test_a_game_worked_by_hand():
    """player_0 drops into columns 4, 5, 6, 7 (1-based) and player_1 on top of the first three: player_0
    completes the bottom row on the 7th ply and wins (+1, -1); the game is then over."""
    env = PettingZooParallelEnv("ConnectFour-v3", device="cpu")
    obs, infos = env.reset(seed=0)
    assert env.agents == ["player_0", "player_1"] and obs["player_0"].shape == (84,)
    assert infos["player_0"]["acting"] and not infos["player_1"]["acting"]
    for ply, column in enumerate([3, 3, 4, 4, 5, 5, 6]):
        mover = f"player_{ply % 2}"
        assert infos[mover]["acting"] and infos[mover]["action_mask"].tolist() == [1] * 7
        obs, rewards, terminations, truncations, infos = env.step({mover: column})  # the other may sit out
        if ply < 6:
            assert rewards == {"player_0": 0.0, "player_1": 0.0} and not any(terminations.values())
    assert rewards == {"player_0": 1.0, "player_1": -1.0}
    assert terminations == {"player_0": True, "player_1": True} and not any(truncations.values())
    assert env.agents == []
    # the last observations are the final board: player_0 sees its four stones on the bottom row
    board = obs["player_0"].reshape(6, 7, 2)
    assert board[5, 3:7, 0].tolist() == [1, 1, 1, 1] and board[4, 3:6, 1].tolist() == [1, 1, 1]
    with pytest.raises(RuntimeError, match="call reset"):
        env.step({"player_0": 0})


def test_missing_and_unknown_actions_are_explained():
    env = PettingZooParallelEnv("ConnectFour-v3", device="cpu")
    env.reset(seed=1)
    with pytest.raises(ValueError, match=r"no action for \['player_0'\], whose turn it is"):
        env.step({"player_1": 0})
    with pytest.raises(ValueError, match="not live agents"):
        env.step({"player_0": 0, "player_7": 1})
    obs, *_ = env.step({"player_0": np.int64(2), "player_1": 5})  # numpy ints work; player_1's is ignored
    assert obs["player_1"].reshape(6, 7, 2)[5, 2, 1] == 1


def test_adapters_refuse_the_other_kind_of_env():
    with pytest.raises(ValueError, match="2 agents per env.*PettingZooParallelEnv"):
        GymnasiumVectorEnv("ConnectFour-v3", num_envs=2, device="cpu")
    with pytest.raises(ValueError, match="2 agents per env.*PettingZooParallelEnv"):
        SB3VecEnv("ConnectFour-v3", num_envs=2, device="cpu")
    with pytest.raises(ValueError, match="one agent per env"):
        PettingZooParallelEnv("CartPole-v1", device="cpu")
