"""nitro bench's env loop: random legal actions for every agent row, the env's params applied."""

from __future__ import annotations

import pytest

from nitro import bench


@pytest.mark.parametrize("env_id,params", [("CartPole-v1", {}), ("ConnectFour-v3", {}),
                                           ("SkullKing-v0", {"num_players": 3})])
def test_bench_env_steps_single_and_multi_agent_envs(env_id, params):
    r = bench.bench_env(env_id, 8, 4, "cpu", "eager", repeats=2, **params)
    assert (r["env"], r["num_envs"], r["steps"], r["mode"]) == (env_id, 8, 4, "eager")
    assert r["steps_per_s"] == pytest.approx(8 * 4 / r["median_s"]) and r["min_s"] <= r["median_s"] <= r["max_s"]


def test_bench_env_passes_the_params():
    with pytest.raises(ValueError, match="num_players"):
        bench.bench_env("SkullKing-v0", 8, 4, "cpu", "eager", repeats=1, num_players=99)
