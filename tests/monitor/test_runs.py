"""What a run streams (status.json, the phase split, device stats) and how watchers read it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from monitor_helpers import tiny_trainer

from nitro.monitor.runs import MetricsTail, find_run, latest_run, read_status, trainer_state
from nitro.monitor.stream import PhaseTimer, RunStatus


def test_a_run_streams_status_and_phase_times(tmp_path):
    trainer = tiny_trainer(tmp_path / "run", "ppo.total_steps=512")  # 4 updates of 8 envs x 16 steps
    logged: list[dict] = []
    start = time.time()
    trainer.train(on_log=logged.append)
    status = read_status(tmp_path / "run")
    assert status["state"] == "finished" and status["pid"] == os.getpid()
    assert status["update"] == 4 and status["global_step"] == 512 and status["env"] == "CartPole-v1"
    assert start <= status["started"] <= status["updated"] <= time.time()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2, 3, 4]
    for row, seen in zip(rows, logged):
        assert row["perf/collect_seconds"] > 0 and row["perf/learn_seconds"] > 0
        # the split covers one iteration; the log interval (one update here) also holds the log's sync
        assert row["perf/collect_seconds"] + row["perf/learn_seconds"] <= 8 * 16 / row["perf/sps"] * 1.0001
        assert row["perf/collect_sps"] == pytest.approx(8 * 16 / row["perf/collect_seconds"])
        assert 0 < row["cpu/max_rss_gb"] < 64
        assert seen["update"] == row["update"]


def test_a_failing_run_says_why(tmp_path):
    trainer = tiny_trainer(tmp_path / "run", "ppo.total_steps=512")

    def fail(metrics):
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        trainer.train(on_log=fail)
    status = read_status(tmp_path / "run")
    assert status["state"] == "failed" and status["error"] == "RuntimeError: disk full"
    assert trainer_state(status).message.startswith("failed at update 1")


def test_phase_timer_on_cpu():
    timer = PhaseTimer(torch.device("cpu"))
    assert timer.read() == {}
    timer.mark(0)
    time.sleep(0.02)
    timer.mark(1)
    time.sleep(0.01)
    timer.mark(2)
    phases = timer.read()
    # host clock around sleeps: each at least as long as asked, at most 0.5 s more on a loaded machine
    assert 0.02 <= phases["collect"] < 0.52 and 0.01 <= phases["learn"] < 0.51
    assert timer.metrics(1000)["perf/collect_sps"] == pytest.approx(1000 / phases["collect"])


def test_metrics_tail_reads_growing_files(tmp_path):
    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(tmp_path)
    assert tail.poll() == 0  # no file yet
    path.write_text('{"update": 1, "global_step": 10}\n{"update": 2, "glo')  # the trainer is mid-line
    assert tail.poll() == 1 and [r["update"] for r in tail.rows] == [1]
    with path.open("a") as f:
        f.write('bal_step": 20}\n{"update": 3, "global_step": 30}\n')
    assert tail.poll() == 2 and [r["global_step"] for r in tail.rows] == [10, 20, 30]
    with path.open("a") as f:  # a resumed run logs update 2 again: its rows replace the later ones
        f.write('{"update": 2, "global_step": 21}\n')
    tail.poll()
    assert [(r["update"], r["global_step"]) for r in tail.rows] == [(1, 10), (2, 21)]
    path.write_text('{"update": 1, "global_step": 5}\n')  # replaced by a shorter file: start over
    tail.poll()
    assert [r["global_step"] for r in tail.rows] == [5]


def test_trainer_state_tells_a_dead_trainer(tmp_path):
    RunStatus(tmp_path, {"env": "CartPole-v1"})
    alive = read_status(tmp_path)
    assert trainer_state(alive).state == "starting"  # this process, before its first log
    alive["update"] = 3
    assert trainer_state(alive).state == "running"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = {**alive, "pid": gone.pid, "updated": time.time() - 30}
    state = trainer_state(dead)
    assert state.state == "stopped"
    assert state.message == f"the trainer (pid {gone.pid}) is gone without finishing; last log at update 3, 30 s ago"
    elsewhere = {**dead, "host": "another-machine"}  # another machine's pid cannot be checked: trust the file
    assert trainer_state(elsewhere).state == "running"
    assert trainer_state(None).state == "unknown"


def test_zombie_trainers_count_as_gone(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 30
    while time.time() < deadline:  # exited but not reaped: a zombie
        if open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    RunStatus(tmp_path, {})
    status = {**read_status(tmp_path), "pid": child.pid, "update": 1}
    assert trainer_state(status).state == "stopped"
    child.wait()


def test_finding_runs(tmp_path):
    with pytest.raises(FileNotFoundError, match="no runs under"):
        latest_run(tmp_path)
    for name in ("old", "new"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text("")
        time.sleep(0.01)
    (tmp_path / "not-a-run").mkdir()
    os.utime(tmp_path / "old" / "metrics.jsonl", (time.time() - 100, time.time() - 100))
    assert latest_run(tmp_path).name == "new"
    assert find_run(tmp_path / "new") == tmp_path / "new"
    with pytest.raises(FileNotFoundError, match="is not a run directory"):
        find_run(tmp_path / "not-a-run")
    with pytest.raises(FileNotFoundError, match="no run directory at"):
        find_run(tmp_path / "missing")


LAZY = textwrap.dedent('''
    import sys
    sys.modules["textual"] = sys.modules["matplotlib"] = sys.modules["flatbuffers"] = None  # as if not installed
    import nitro.cli, nitro.train.ppo
    from nitro.monitor.view import snapshot
    nitro.cli.build_parser()
    for command in (["plot", "x"], ["monitor", "x", "--wait"]):
        try:
            nitro.cli.main(command)
        except SystemExit:
            pass
    print("ok")
''')


def test_training_and_the_cli_need_no_monitor_extra():
    """Without textual, matplotlib and flatbuffers, training and the CLI load; the commands that need
    them say which extra to install, in one line."""
    result = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
    assert result.stderr.splitlines() == [
        "error: nitro plot needs matplotlib, which is not installed: pip install 'nitro-rl[monitor]'",
        "error: nitro monitor draws in a terminal; this output is not one: use --once for a plain snapshot"]
