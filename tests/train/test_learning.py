"""It learns, on CPU, with the issue's thresholds: CartPole (preset) reaches mean return >= 475 within
2 minutes; an LSTM policy learns CartPole well above chance in a short budget; Pendulum (continuous
actions, preset) reaches >= -400."""

from __future__ import annotations

import importlib.util
import time

import pytest
from train_helpers import CARTPOLE_EVAL, QUIET

from nitro.train import config as C
from nitro.train.evaluate import evaluate, evaluate_vs_bots
from nitro.train.ppo import Trainer

CARTPOLE_SOLVED = 475.0
"""The issue's (and Gymnasium's) solved threshold for CartPole-v1 (episodes are capped at 500)."""
CARTPOLE_WALL_SECONDS = 60.0
"""The issue's budget for ``nitro train cartpole`` on 2 CPU cores. The preset reaches the target after
385k-410k steps (seeds 1-5), 17-21 s of training on this machine with one thread."""


def test_cartpole_preset_solves_within_a_minute(cartpole_run):
    run_dir, metrics, seconds = cartpole_run
    assert seconds < CARTPOLE_WALL_SECONDS, f"train() took {seconds:.1f} s"
    # the preset stops at ppo.target_return=475 on the mean return of the last 100 (or more) episodes
    assert metrics["target_reached"] is True, metrics
    assert metrics["episode/recent_episodes"] >= 100 and metrics["episode/return_recent"] >= CARTPOLE_SOLVED
    assert metrics["global_step"] < C.load("cartpole").ppo.total_steps  # it stopped early: solved
    # the best checkpoint, played deterministically on fresh episodes, balances too
    result = evaluate(run_dir, episodes=20, device="cpu")
    assert result["mean_return"] >= CARTPOLE_EVAL, result


LSTM_STEPS = 250_000
LSTM_THRESHOLD = 150.0
"""A uniformly random CartPole policy averages ~22. The LSTM policy (32 units, BPTT 8) averages 174,
173, 249 and 305 over its last 5 logs at 250k steps with seeds 1-4 (6-10 s here): 150 is ~7x chance
and below every seed tried."""


def test_lstm_cartpole_learns(tmp_path):
    cfg = C.load("cartpole", [*QUIET, "policy.lstm=32", "policy.bptt=8", f"ppo.total_steps={LSTM_STEPS}",
                              "ppo.target_return=none"])
    returns = []
    metrics = Trainer(cfg, tmp_path).train(on_log=lambda m: returns.append(m.get("episode/return")))
    assert metrics["global_step"] >= LSTM_STEPS - cfg.env.num_envs * cfg.ppo.num_steps
    recent = [r for r in returns if r is not None][-5:]
    assert sum(recent) / len(recent) >= LSTM_THRESHOLD, returns


PENDULUM_THRESHOLD = -400.0
"""The issue's threshold. A random policy scores ~-1200; the preset passes -400 after 1.05-1.25M steps
(seeds 1-4; 30-70 s on this 2-core machine, so not marked slow) and reaches ~-185 by 1.6M steps."""
PENDULUM_BUDGET = 3_000_000
"""Env steps before the test gives up (~3x what it needs)."""


@pytest.mark.skipif(importlib.util.find_spec("nitro.envs.classic.pendulum") is None,
                    reason="Pendulum-v1 (nitro/envs/classic/pendulum.py) is not written yet")
def test_pendulum_preset_reaches_minus_400(tmp_path):
    # the preset itself, stopping as soon as the mean return of the last 100 episodes reaches the threshold
    cfg = C.load("pendulum", [*QUIET, f"ppo.target_return={PENDULUM_THRESHOLD}",
                              f"ppo.total_steps={PENDULUM_BUDGET}"])
    start = time.perf_counter()
    metrics = Trainer(cfg, tmp_path).train()
    seconds = time.perf_counter() - start
    assert metrics["target_reached"] is True, (metrics, seconds)
    assert metrics["episode/recent_episodes"] >= 100 and metrics["episode/return_recent"] >= PENDULUM_THRESHOLD
    # the deterministic policy (the Gaussian's mean) does at least as well on fresh episodes
    result = evaluate(tmp_path, episodes=64, device="cpu")
    assert result["mean_return"] >= PENDULUM_THRESHOLD, result


SKULLKING_STEPS = 30_000
SKULLKING_GAMES = 1000
SKULLKING_WIN_RATE = 0.28
SKULLKING_MARGIN = 3.0
"""Skull King, four players, one round of two cards (the skullking preset on a short schedule, 64 envs, a
64x64 MLP): self-play for 30k env steps (~15 s of one core), then deterministic play in one seat against
three random bots over 1,000 games. A random player wins 25% of them (ties shared) and scores as much as
its opponents on average (margin 0); the heuristic bot wins 45% (4,000 games of match.play). Seeds
1-4 reach win rates of 0.317-0.327 (95% interval +-0.023) and margins of +7.1 to +7.5 points (+-1.3): the
thresholds sit 1.6 and 3 intervals below them and well above chance."""


def test_skullking_preset_beats_random_bots(tmp_path):
    cfg = C.load("skullking", [*QUIET, "env.num_envs=64", "env.params.schedule=[2]", "env.params.episode=game",
                               "env.params.round_weights=null", f"ppo.total_steps={SKULLKING_STEPS}",
                               "ppo.num_steps=16", "ppo.epochs=2", "ppo.minibatches=2", "policy.hidden=[64, 64]",
                               "ppo.lr=1e-3", "ppo.lr_schedule=constant", "run.log_every=10"])
    Trainer(cfg, tmp_path).train()
    result = evaluate_vs_bots(tmp_path, ["random"], SKULLKING_GAMES, device="cpu")["opponents"]["random"]
    assert result["win_rate"] >= SKULLKING_WIN_RATE, result
    assert result["result_margin"] >= SKULLKING_MARGIN, result
    assert 0 <= result["bid_accuracy"] <= 1
