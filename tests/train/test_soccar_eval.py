"""Soccar runs end to end on a tiny CPU run: ``nitro train soccar_league`` with the scripted bots as
league members, ``nitro eval RUN`` against the bots (win rate, wins / draws / losses, goals for and
against, touches; the table and the curve), and the transfer check bench/soccar_transfer.py playing
the same checkpoint in the real RocketSim."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from nitro.cli import main
from nitro.envs.soccar.arena_mesh import MeshesNotFoundError, find_soccar_meshes
from nitro.envs.soccar.rl import env as soccar_env
from nitro.envs.soccar.rl.done_conditions import GameCondition
from nitro.train import config as C
from nitro.train.evaluate import evaluate_vs_bots
from nitro.train.ppo import Trainer

QUIET = ["run.console=false", "run.tensorboard=false", "run.device=cpu"]
SHORT_GAME = GameCondition(16 / 120, max_overtime_seconds=8 / 120)
"""Games of two decisions (plus one of overtime on a level score): the CPU budget of these tests."""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The soccar_league preset trained for one update of 2 arenas x 2 steps: the learner against
    itself, its initial snapshot and both scripted bots, drawn per arena."""
    try:
        find_soccar_meshes()
    except MeshesNotFoundError as error:
        pytest.skip(str(error))
    run_dir = tmp_path_factory.mktemp("soccar_league_run")
    cfg = C.load("soccar_league", [*QUIET, "env.num_envs=2", "ppo.num_steps=2", "ppo.total_steps=4",
                                   "ppo.minibatches=2", "league.update_every=1"])
    torch.set_num_threads(1)
    trainer = Trainer(cfg, run_dir)
    assert [b.func.__name__ for b in trainer.opponents.bots] == ["play", "play"]  # the env's bots as players
    trainer.train()
    return run_dir


@pytest.fixture
def short_games(monkeypatch):
    monkeypatch.setitem(soccar_env.COMPONENTS["termination"], "game", SHORT_GAME)


def test_presets_for_teams_and_the_league():
    """2v2 and 3v3 keep the 172-float observation of 1v1 (DefaultObs padded to 3 a team); the league
    preset names both bots."""
    for name, cars in (("soccar", 2), ("soccar_2v2", 4), ("soccar_3v3", 6)):
        cfg = C.load(name, QUIET)
        env = soccar_env.Soccar(soccar_env.SoccarParams(**cfg.env.params))
        assert env.num_agents == cars and env.observation_space.shape == (172,)
        assert env.params.reward is soccar_env.GIGALEARN_REWARD
        assert cfg.policy.hidden == [256, 256, 256] and cfg.ppo.gamma == 0.99 and cfg.ppo.clip_coef == 0.2
    assert C.load("soccar_league", QUIET).league.bots == ["ball_chaser", "shadow_defender"]


def test_eval_against_the_bots_writes_its_table_and_curve(run, short_games, capsys):
    """nitro eval RUN: whole games (the env's GAME_PARAMS) against both bots, the policy on blue in even
    games and orange in odd ones; every statistic a rate or count in range, with its interval; one CSV
    row per bot, the JSON and vs_bots.png."""
    assert main(["eval", str(run), "--episodes", "2", "--device", "cpu"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result["opponents"]) == {"ball_chaser", "shadow_defender"}
    assert result["env_params"]["kickoff_after_goal"] is True and result["update"] == 1
    for summary in result["opponents"].values():
        assert summary["wins"] + summary["draws"] + summary["losses"] == pytest.approx(1.0)
        assert 0 <= summary["win_rate"] <= 1 and summary["goals_for"] >= 0 and summary["touches"] >= 0
        assert "goals_against_ci95" in summary
    table = (run / "eval" / "vs_bots.csv").read_text().splitlines()
    assert len(table) == 3 and table[0].startswith("time,checkpoint,update,global_step,games,deterministic,bot,")
    assert (run / "eval" / "vs_bots.png").stat().st_size > 0


def test_transfer_check_plays_the_run_in_rocketsim(run, short_games, tmp_path, monkeypatch, capsys):
    """bench/soccar_transfer.py on the tiny run: two short games in RocketSim through nitro's observation
    path, set beside nitro's evaluation JSON of the same checkpoint; the JSON holds both sides."""
    pytest.importorskip("RocketSim")
    from tests.parity.rocketsim_harness import rocketsim

    rocketsim()  # RocketSim.init on the meshes, once per process
    nitro = evaluate_vs_bots(run, ["ball_chaser"], 2, checkpoint="latest", device="cpu")
    (run / "eval").mkdir(exist_ok=True)
    (run / "eval" / "nitro.json").write_text(json.dumps(nitro))
    script = Path(__file__).resolve().parents[2] / "bench" / "soccar_transfer.py"
    spec = importlib.util.spec_from_file_location("soccar_transfer", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", ["soccar_transfer.py", str(run), "--out", str(tmp_path), "--games", "2",
                                      "--seconds", str(16 / 120), "--max-overtime", str(8 / 120),
                                      "--nitro-json", str(run / "eval" / "nitro.json")])
    assert module.main() == 0
    out = json.loads((tmp_path / "soccar_transfer.json").read_text())
    assert out["rocketsim"]["games"] == 2 and out["nitro"]["win_rate"] == nitro["opponents"]["ball_chaser"]["win_rate"]
    assert out["rocketsim"]["mean_game_ticks"] >= 16
    assert out["rocketsim"]["wins"] + out["rocketsim"]["draws"] + out["rocketsim"]["losses"] == pytest.approx(1.0)
    assert "RocketSim" in capsys.readouterr().out or out["rocketsim_over_nitro_win_rate"] is None
