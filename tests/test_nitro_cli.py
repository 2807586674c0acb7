"""The ``nitro`` command: help on every flag, the presets in ``nitro train --help``, ``nitro envs`` showing
bracketed text as written (and soccar), ``nitro bench`` writing new files to a stated place, and ``nitro
export`` without the export extra naming it in one line."""

from __future__ import annotations

import argparse
import json
import sys

import pytest

from nitro.cli import build_parser, main
from nitro.core.fields import describe
from nitro.envs.classic.cartpole import CartPole
from nitro.train.config import presets


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                yield from ((f"{name} {n}", s) for n, s in _subcommands(sub))


def test_every_command_and_flag_has_help():
    parser = build_parser()
    commands = dict(_subcommands(parser))
    assert {"envs", "bench", "train", "eval", "export"} <= set(commands)
    missing = [f"{name} {action.dest}" for name, sub in commands.items() for action in sub._actions
               if not isinstance(action, argparse._HelpAction) and not action.help]
    assert not missing, f"arguments without help text: {missing}"
    for action in parser._subparsers._group_actions[0]._choices_actions:
        assert action.help, f"command {action.dest} has no help"


def test_train_help_lists_the_presets(capsys):
    with pytest.raises(SystemExit) as done:
        main(["train", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "presets:" in out
    for name in presets():
        assert f"\n  {name} " in out, name
    assert all(len(line) <= 80 for line in out.splitlines()), out


def test_envs_shows_bracketed_text_as_written(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # whole docs on one line each
    assert main(["envs", "--params"]) == 0
    out = capsys.readouterr().out
    docs = [doc for _, _, doc in describe(CartPole.Params) if "[" in doc]
    assert docs, "CartPole's params docs hold bracketed text (the markup case)"
    for doc in docs:
        assert doc in out, doc
    assert "Box[4] [-inf, inf]" in out
    assert "soccar: " in out and "from nitro.envs.soccar import Arena" in out


def test_envs_fits_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    assert all(len(line.rstrip()) <= 80 for line in out.splitlines()), out
    assert "MountainCarContinuous-v0" in out  # ids in full


BENCH = ["bench", "CartPole-v1", "--num-envs", "16", "--steps", "2", "--repeats", "1", "--device", "cpu"]


def test_bench_writes_new_files_and_never_overwrites(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(BENCH) == 0
    assert main(BENCH) == 0  # the same second: a second file, not an overwrite
    written = sorted((tmp_path / "runs" / "bench").glob("cartpole-v1_*.json"))
    assert len(written) == 2, written
    out = capsys.readouterr().out
    for path in written:
        assert f"wrote {path.relative_to(tmp_path)}" in out
        record = json.loads(path.read_text())
        assert record["results"][0]["num_envs"] == 16 and record["results"][0]["steps_per_s"] > 0

    mine = tmp_path / "mine.json"
    assert main([*BENCH, "--out", str(mine)]) == 0
    first = mine.read_text()
    assert main([*BENCH, "--out", str(mine)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --out {mine} already exists; give a new file name (results are never overwritten) "
                   "or remove it"]
    assert mine.read_text() == first


def test_bench_graph_mode_on_cpu_is_one_line(capsys):
    assert main([*BENCH, "--mode", "graph", "--no-save"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --mode graph needs a CUDA device, this bench runs on cpu; use --mode eager compile"]


def test_export_without_the_extra_names_it_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnx", None)  # as if the export extra were not installed
    assert main(["export", str(tmp_path), "--onnx"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        'error: ONNX export needs the onnx package, which the export extra installs: pip install '
        '"nitro-rl[export]"']


def test_overrides_may_follow_flags(capsys):
    from nitro.cli import parse

    args = parse(["train", "cartpole", "--monitor", "env.num_envs=64", "ppo.num_steps=16"])
    assert args.monitor and args.overrides == ["env.num_envs=64", "ppo.num_steps=16"]
    with pytest.raises(SystemExit):  # anything else still unrecognized, in argparse's one line
        parse(["train", "cartpole", "--monitor", "--frobnicate"])
    assert "unrecognized arguments: --frobnicate" in capsys.readouterr().err
