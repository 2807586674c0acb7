"""README.md runs as written: its Python examples (in order, sharing one namespace, on whatever device
this machine has) and its ``nitro`` commands. Commands are run in-process (``nitro.cli.main``), made
small: a new training run is one update of at most 64 envs x 16 steps and a resumed one goes one update
further (the presets' full runs are tests/train/test_learning.py's), a tournament plays 16 games per
pair and an evaluation 32 episodes (games per bot). ``RUN`` stands for the directory the last ``nitro
train`` made, as the README says. pip, pytest and torchrun lines are checked, not run (the extras they
name exist; torchrun is tests/train/test_distributed.py's)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import tomllib
import torch
import yaml

from nitro.cli import main
from nitro.envs.soccar.arena_mesh import MeshesNotFoundError, find_soccar_meshes
from nitro.envs.soccar.rl import env as soccar_env
from nitro.envs.soccar.rl.done_conditions import GameCondition
from nitro.train import config as C

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.DOTALL)


def _has_meshes() -> bool:
    try:
        find_soccar_meshes()
    except MeshesNotFoundError:
        return False
    return True


@pytest.fixture
def one_thread():
    """Tiny batches: one thread is as fast, and spends no CPU time spinning on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_the_python_examples_run(tmp_path, monkeypatch, one_thread):
    monkeypatch.chdir(tmp_path)
    code = blocks("python")
    assert len(code) >= 3
    namespace: dict = {}
    for block in code:
        if "nitro.envs.soccar" in block:
            continue  # test_the_soccar_example_runs
        exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["obs"].shape == (4096, 4) and namespace["t"].obs.shape == (4096, 4)


def test_the_soccar_example_runs(tmp_path, monkeypatch, capsys, one_thread):
    if not _has_meshes():
        pytest.skip("the soccar meshes are not installed: pip install --no-deps rlgym-rocket-league==2.0.1")
    monkeypatch.chdir(tmp_path)
    [block] = [b for b in blocks("python") if "nitro.envs.soccar" in b]
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert bool(namespace["events"].goal_blue.all())  # the comment's promise: a goal for blue
    assert "tensor(" in capsys.readouterr().out


def _commands() -> list[list[str]]:
    out = []
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():  # a trailing backslash continues the line
            line = line.split("  #")[0].strip()
            out += [shlex.split(part) for part in line.split("&&") if part.strip()]
    return out


SMALL = {"env.num_envs": 64, "ppo.num_steps": 16}
"""The most a new run of this test uses (its own value where smaller)."""


def _capped(argv: list[str], run: str | None) -> list[str]:
    """A ``nitro train`` command line limited to one small update."""
    if "--resume" in argv:
        cfg = C.from_dict(yaml.safe_load((Path(run) / "config.yaml").read_text()))
        done = json.loads((Path(run) / "metrics.jsonl").read_text().splitlines()[-1])["global_step"]
        return [*argv, f"ppo.total_steps={done + cfg.env.num_envs * cfg.ppo.num_steps}"]
    cfg = C.load(argv[1], [a for a in argv[2:] if "=" in a])
    n, t = min(cfg.env.num_envs, SMALL["env.num_envs"]), min(cfg.ppo.num_steps, SMALL["ppo.num_steps"])
    return [*argv, f"env.num_envs={n}", f"ppo.num_steps={t}", f"ppo.total_steps={n * t}"]


def test_the_commands_run(tmp_path, monkeypatch, capsys, one_thread):
    monkeypatch.chdir(tmp_path)
    # `nitro eval` plays soccar's 5-minute games (36,000 ticks each): two decisions of play here, the
    # CPU budget of a test (tests/train/test_soccar_eval.py checks the games themselves)
    monkeypatch.setitem(soccar_env.COMPONENTS["termination"], "game", GameCondition(16 / 120, max_overtime_seconds=8 / 120))
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    run = None
    ran = []
    for argv in _commands():
        if argv[:2] == ["pip", "install"]:
            named = [re.fullmatch(r"\.\[(\w+)\]", a) for a in argv]
            assert all(m.group(1) in extras for m in named if m), argv
            continue
        if argv[0] == "torchrun" or argv[:3] == ["python", "-m", "pytest"]:
            continue
        assert argv[0] == "nitro", f"README command not covered by this test: {argv}"
        # --monitor opens a dashboard beside the run (tests/monitor drives it in tmux); here the run alone
        argv = [run if a == "RUN" else a for a in argv[1:] if a != "--monitor"]
        if argv[0] == "train":
            argv = _capped(argv, run)
        if argv[0] == "tournament":
            argv = [*argv, "--games", "16"]
        if argv[0] == "eval":
            argv = [*argv, "--episodes", "32"]
        assert main(argv) == 0, (argv, capsys.readouterr().err)
        out = capsys.readouterr().out
        if argv[0] == "train":
            run = json.loads(out.strip().splitlines()[-1])["run"]
            assert f"run: {run}" in out  # the README says the run prints its directory
        ran.append(argv[0])
    assert ran.count("train") >= 3 and {"eval", "export", "league", "tournament"} <= set(ran), ran
