"""The commands: ``nitro train --help-config``, clear errors with exit code 2 for bad overrides, and
``nitro eval RUN --episodes 20`` printing JSON."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from train_helpers import CARTPOLE_EVAL

from nitro.cli import main
from nitro.train import config as C
from nitro.train.league import summary


def test_help_config_lists_every_key_with_default_and_doc(capsys):
    assert main(["train", "--help-config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    keys = [line.split()[0] for line in lines]
    want = [f"{s.name}.{f.name}" for s in dataclasses.fields(C.TrainConfig)
            for f in dataclasses.fields(type(getattr(C.TrainConfig(), s.name)))]
    assert keys == want
    lr = next(line for line in lines if line.startswith("ppo.lr "))
    assert "0.00025" in lr and "Adam learning rate." in lr


@pytest.mark.parametrize("args,message", [
    (["train", "cartpole", "ppo.lrr=3e-4"],
     "error: unknown config key 'ppo.lrr' (did you mean ppo.lr?); valid keys under ppo:"),
    (["train", "cartpole", "ppo.lr=fast"], "error: ppo.lr: expected float, got 'fast'"),
    (["train", "cartpole", "env.num_envs"],
     "error: override 'env.num_envs' must look like section.key=value"),
    (["train", "cartpole", "ppo.minibatches=3"], "is not divisible by ppo.minibatches=3"),
    (["train", "cartpol"], "error: unknown env id 'cartpol'."),
    (["train"], "error: give an env or preset"),
    (["train", "--resume", "/nonexistent/run"], "is not a run directory (no config.yaml)"),
])
def test_bad_arguments_exit_2_with_a_clear_message(capsys, args, message):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bad_env_param_exits_2_listing_valid_params(capsys, tmp_path):
    assert main(["train", "cartpole", "env.params.bogus=1", f"run.dir={tmp_path}", "run.console=false"]) == 2
    err = capsys.readouterr().err
    assert "CartPole-v1 has no parameter(s) bogus; valid parameters:" in err and "max_episode_steps" in err


def _nitro_command() -> list[str]:
    exe = shutil.which("nitro", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", "nitro.cli"]


def test_the_installed_command_exits_2_on_a_bad_override():
    proc = subprocess.run([*_nitro_command(), "train", "cartpole", "ppo.lrr=3e-4"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown config key 'ppo.lrr' (did you mean ppo.lr?)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_eval_prints_json(cartpole_run, capsys):
    run_dir = cartpole_run[0]
    assert main(["eval", str(run_dir), "--episodes", "20", "--device", "cpu"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["episodes"] == 20 and result["deterministic"] is True and result["env"] == "CartPole-v1"
    assert result["min_return"] <= result["mean_return"] <= result["max_return"] <= 500
    assert result["mean_length"] == result["mean_return"]  # CartPole pays 1 per step
    assert result["mean_return"] >= CARTPOLE_EVAL  # the solved run (see test_learning)

    assert main(["eval", str(run_dir), "--episodes", "20", "--sample", "--checkpoint", "latest",
                 "--device", "cpu"]) == 0
    sampled = json.loads(capsys.readouterr().out)
    assert sampled["deterministic"] is False and sampled["episodes"] == 20
    # the same seed gives the same episodes
    assert main(["eval", str(run_dir), "--episodes", "20", "--sample", "--checkpoint", "latest",
                 "--device", "cpu"]) == 0
    assert json.loads(capsys.readouterr().out) == sampled


def test_train_prints_a_json_summary_and_writes_the_run(tmp_path, capsys):
    started = time.time()
    assert main(["train", "cartpole", f"run.dir={tmp_path}", "run.name=cli", "run.console=false",
                 "run.tensorboard=false", "run.device=cpu", "env.num_envs=8", "ppo.num_steps=16",
                 "ppo.minibatches=2", "ppo.total_steps=256", "ppo.target_return=none"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["run"] == str(tmp_path / "cli") and summary["global_step"] == 256
    # where the time went: the phases are disjoint spans of one clock, inside the command's run; 1e-6 s
    # allows the rounding of differences of perf_counter readings, 1e-2 s a wall clock slewed by NTP
    phases = summary["phase_seconds"]
    assert list(phases) == ["setup", "capture", "train", "finish"] and all(v >= -1e-6 for v in phases.values())
    assert phases["train"] > 0 and started <= summary["started"] <= summary["printed"] <= time.time()
    assert sum(phases.values()) <= summary["printed"] - summary["started"] + 1e-2
    assert {p.name for p in (tmp_path / "cli").iterdir()} >= {"config.yaml", "metrics.jsonl", "checkpoints"}
    metrics = [json.loads(line) for line in (tmp_path / "cli" / "metrics.jsonl").read_text().splitlines()]
    assert [m["update"] for m in metrics] == [1, 2]
    for key in ("perf/sps", "loss/policy", "loss/value", "loss/entropy", "loss/approx_kl", "loss/clipfrac",
                "loss/explained_variance", "loss/grad_norm", "lr"):
        assert key in metrics[-1], key


def test_multi_agent_eval_plays_the_bots_and_writes_its_result(tmp_path, capsys):
    """nitro eval of a ConnectFour run: its policy against the env's random bot, printed and kept in
    RUN/eval/vs_bots_<checkpoint>.json; replays are for single-agent evaluations and say so."""
    run = tmp_path / "c4"
    assert main(["train", "ConnectFour-v3", f"run.dir={tmp_path}", "run.name=c4", "run.console=false",
                 "run.tensorboard=false", "run.device=cpu", "env.num_envs=8", "ppo.num_steps=8", "ppo.epochs=1",
                 "ppo.minibatches=1", "ppo.total_steps=64", "policy.hidden=[16]"]) == 0
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "16", "--vs", "random", "--device", "cpu"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert list(result["opponents"]) == ["random"] and result["games"] == 16
    assert 0.0 <= result["opponents"]["random"]["win_rate"] <= 1.0
    written = next((run / "eval").glob("vs_bots_*.json"))
    assert json.loads(written.read_text()) == result and f"wrote {written}" in err
    assert main(["eval", str(run), "--episodes", "4", "--replay", "--device", "cpu"]) == 2
    assert "--replay and --render play single-agent evaluations; ConnectFour-v3 is multi-agent" in capsys.readouterr().err


def _connect_four_run(tmp_path, name: str, *overrides: str):
    """A ConnectFour-v3 run of 4 tiny updates through ``nitro train``."""
    assert main(["train", "ConnectFour-v3", f"run.dir={tmp_path}", f"run.name={name}", "run.console=false",
                 "run.tensorboard=false", "run.device=cpu", "env.num_envs=8", "ppo.num_steps=16", "ppo.epochs=1",
                 "ppo.minibatches=2", "policy.hidden=[16]", "ppo.total_steps=512", *overrides]) == 0
    return tmp_path / name


def test_league_and_tournament_commands(tmp_path, capsys):
    """``nitro league`` prints the table and draws the ratings; ``nitro tournament`` plays every ordered pair
    of the run, its pool and two bots ``--games`` times and writes the results."""
    run = _connect_four_run(tmp_path, "lg", "league.pool_size=2", "league.bots=[random]", "league.update_every=1",
                            "league.add_every=2")
    capsys.readouterr()
    png = tmp_path / "ratings.png"
    assert main(["league", str(run), "--png", str(png)]) == 0
    out = capsys.readouterr().out
    # snapshots join at updates 0, 2 and 4; with two slots snap0 (the oldest) has left by update 4
    assert "at update 4" in out and all(name in out for name in ("learner", "snap2", "snap4", "bot:random"))
    assert "snap0" not in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = {r["name"]: r for r in summary(run)["table"]}
    assert rows["learner"]["recent_score"] is None and rows["snap4"]["recent_score"] == 0.5  # no games yet
    assert 0 < rows["bot:random"]["recent_score"] < 1

    results = tmp_path / "tournament.json"
    assert main(["tournament", str(run), "--pool", "--bots", "random", "tactical", "--games", "4", "--device", "cpu",
                 "--out", str(results)]) == 0
    got = json.loads(results.read_text())
    assert got["players"] == ["lg@4", "lg:snap4", "lg:snap2", "bot:random", "bot:tactical"]
    assert got["games"] == 4 * 5 * 4 and "games/s" in capsys.readouterr().out
    for i, row in enumerate(got["results"]):
        assert [sum(r) for j, r in enumerate(row) if j != i] == [4] * 4 and sum(row[i]) == 0
    assert all(r["wins"] + r["draws"] + r["losses"] == 2 * 4 * 4 for r in got["table"])  # both orders of 4 pairs


def test_league_commands_explain_a_run_without_a_league(tmp_path, capsys):
    run = _connect_four_run(tmp_path, "selfplay")
    assert main(["league", str(run)]) == 2
    assert "was trained without a league" in capsys.readouterr().err
    assert main(["tournament", str(run), "--pool", "--device", "cpu"]) == 2
    assert "holds no league pool" in capsys.readouterr().err
    assert main(["tournament", str(run), "--bots", "minimax", "--device", "cpu"]) == 2
    assert "ConnectFour-v3 has no bot 'minimax'; its bots: random, tactical" in capsys.readouterr().err
