"""The terminal dashboard: driven headless (textual's pilot), and for real in tmux beside a trainer."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable, Sparkline, Static

from nitro.monitor.dashboard import Dashboard, Panel
from nitro.monitor.runs import read_status
from nitro.monitor.stream import RunStatus
from nitro.monitor.view import COLUMNS, PANELS, snapshot


def fake_run(path: Path, updates: int, pid: int) -> list[dict]:
    """A run directory as a trainer leaves it after ``updates`` logs."""
    path.mkdir(parents=True)
    rows = [{"update": u, "global_step": 1000 * u, "perf/sps": 5000.0 + u, "episode/return": 10.0 * u,
             "episode/length": 20.0 + u, "loss/policy": -0.01 * u, "loss/value": 1.0 / u, "loss/entropy": 0.7 - 0.01 * u,
             "loss/approx_kl": 0.001 * u, "loss/clipfrac": 0.1, "loss/explained_variance": 0.5,
             "perf/collect_sps": 9000.0, "perf/collect_seconds": 0.1, "perf/learn_seconds": 0.05,
             "league/elo": 1200.0 + u, "curriculum/stage": 1} for u in range(1, updates + 1)]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "config.yaml").write_text("env:\n  id: CartPole-v1\nppo:\n  total_steps: 100000\n")
    status = RunStatus(path, {"env": "CartPole-v1", "total_steps": 100_000, "device": "cpu"})
    status.data.update(pid=pid, update=updates, global_step=1000 * updates)
    status.beat(rows[-1])
    return rows


def gone_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_dashboard_shows_the_run(tmp_path):
    rows = fake_run(tmp_path / "run", 30, os.getpid())

    async def drive():
        app = Dashboard(tmp_path / "run", interval=0.1)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            head = str(app.query_one("#headline", Static).render())
            assert "● running" in head and "CartPole-v1" in head and "step 30k / 100k (30.0%)" in head
            for panel, (_, key) in zip(app.query(Panel), PANELS):
                assert list(panel.query_one(Sparkline).data) == [r[key] for r in rows]
            table = app.query_one(DataTable)
            assert table.row_count == 12
            assert [str(c) for c in table.get_row_at(0)][:3] == ["30", "30k", "300"]  # newest first
            perf = str(app.query_one("#perf", Static).render())
            assert "elo 1.23k" in perf and "curriculum stage 1" in perf
            # the trainer logs again: the next poll shows it
            with (tmp_path / "run" / "metrics.jsonl").open("a") as f:
                f.write(json.dumps({**rows[-1], "update": 31, "global_step": 31000, "episode/return": 999.0}) + "\n")
            await pilot.pause(0.3)
            assert [str(c) for c in table.get_row_at(0)][:3] == ["31", "31k", "999"]
            # the trainer vanishes without a word: the dashboard says so
            status = read_status(tmp_path / "run")
            status["pid"] = gone_pid()
            (tmp_path / "run" / "status.json").write_text(json.dumps(status))
            await pilot.pause(0.3)
            assert "● stopped" in str(app.query_one("#headline", Static).render())
            await pilot.press("q")

    asyncio.run(drive())


def test_snapshot_is_plain_text(tmp_path):
    fake_run(tmp_path / "run", 3, gone_pid())
    text = snapshot(tmp_path / "run")
    lines = text.splitlines()
    assert lines[0].startswith("run  ·  CartPole-v1  ·  cpu  ·  ● stopped: the trainer (pid ")
    assert lines[1].startswith("return 30  SPS 5.003k")
    assert lines[3].split() == [w for h, _ in COLUMNS for w in h.split()]
    assert lines[4].split()[:3] == ["3", "3k", "30"] and len(lines) == 7


def tmux_ready():
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (Debian package tmux; .ci/run installs it)")


class Tmux:
    """A private tmux server (its own socket) with 160x48 windows."""

    def __init__(self, tmp: Path):
        self.socket = str(tmp / "tmux.sock")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path.cwd()), os.environ.get("PYTHONPATH")]))}
        env.pop("TMUX", None)
        self.env = env
        self("new-session", "-d", "-s", "t", "-x", "160", "-y", "48")

    def __call__(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], check=True, capture_output=True, text=True,
                              env=self.env).stdout

    def screen(self, pane: str) -> str:
        return self("capture-pane", "-p", "-t", pane)

    def wait_for(self, pane: str, text: str, timeout: float = 120) -> str:
        deadline = time.time() + timeout
        screen = ""
        while time.time() < deadline:
            try:
                screen = self.screen(pane)
            except subprocess.CalledProcessError:  # the pane is not there yet
                screen = ""
            if text in screen:
                return screen
            time.sleep(0.25)
        panes = {p: self.screen(p) for p in self("list-panes", "-a", "-F", "#{session_name}:#{window_index}.#{pane_index}").split()}
        raise AssertionError(f"{text!r} did not appear in pane {pane} within {timeout} s; the panes show {panes}")

    def kill(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)


def test_monitor_beside_a_trainer_in_tmux(tmp_path):
    """nitro train --monitor inside tmux opens the dashboard in a second pane; the dashboard detaches (q)
    and attaches again (nitro monitor --latest) while training goes on; when the trainer is killed the
    dashboard says it is gone. Outside tmux, --monitor trains in the background and q leaves it running."""
    tmux_ready()
    tmux = Tmux(tmp_path)
    runs = tmp_path / "runs"
    try:
        train = [sys.executable, "-m", "nitro.cli", "train", "cartpole", "run.device=cpu", f"run.dir={runs}",
                 "run.name=watched", "env.num_envs=8", "ppo.num_steps=16", "ppo.epochs=1", "ppo.minibatches=1",
                 "ppo.total_steps=100000000", "ppo.target_return=none", "run.tensorboard=false",
                 "run.checkpoint_every=1000000", "--monitor"]
        # inside the session the trainer's pane has TMUX set, as a user's shell would
        tmux("send-keys", "-t", "t", f"export OMP_NUM_THREADS=1; {' '.join(train)}", "Enter")
        tmux.wait_for("t.1", "● running", timeout=180)  # the dashboard's pane, once the trainer logs
        assert len(tmux("list-panes", "-t", "t").splitlines()) == 2
        screen = tmux.wait_for("t.1", "update")
        assert "watched" in screen and "return" in screen and "SPS" in screen
        tmux("send-keys", "-t", "t.1", "q")  # detach: the pane closes, training goes on
        deadline = time.time() + 30
        while len(tmux("list-panes", "-t", "t").splitlines()) != 1 and time.time() < deadline:
            time.sleep(0.25)
        assert len(tmux("list-panes", "-t", "t").splitlines()) == 1
        status = read_status(runs / "watched")
        assert status["state"] == "running"
        update = status["update"]
        tmux("new-window", "-t", "t", "-n", "again")
        tmux("send-keys", "-t", "t:again", f"{sys.executable} -m nitro.cli monitor --latest --dir {runs}", "Enter")
        tmux.wait_for("t:again", "● running", timeout=120)
        deadline = time.time() + 60
        while read_status(runs / "watched")["update"] <= update and time.time() < deadline:
            time.sleep(0.25)
        assert read_status(runs / "watched")["update"] > update, "training stalled while watched"
        os.kill(status["pid"], signal.SIGKILL)
        screen = tmux.wait_for("t:again", "● stopped", timeout=30)
        assert f"the trainer (pid {status['pid']}) is gone without finishing" in screen.replace("\n", "")
        tmux("send-keys", "-t", "t:again", "q")

        # outside tmux the trainer goes to the background and the dashboard takes the terminal
        tmux("new-window", "-t", "t", "-n", "plain")
        alone = [a if a != "run.name=watched" else "run.name=alone" for a in train]
        tmux("send-keys", "-t", "t:plain", f"env -u TMUX OMP_NUM_THREADS=1 {' '.join(alone)}", "Enter")
        tmux.wait_for("t:plain", "● running", timeout=180)
        tmux("send-keys", "-t", "t:plain", "q")
        screen = tmux.wait_for("t:plain", "training goes on in pid").replace("\n", "")
        pid = read_status(runs / "alone")["pid"]
        assert f"training goes on in pid {pid} (output: {runs / 'alone.log'})" in screen
        os.kill(pid, 0)  # still training
        os.kill(pid, signal.SIGKILL)
    finally:
        tmux.kill()
