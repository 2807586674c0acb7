"""The metrics of a run: after a resume every update appears once in metrics.jsonl and in TensorBoard;
the console (live bar on a terminal, plain lines elsewhere) fits 80 columns."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import torch
from rich.console import Console as RichConsole

from nitro.monitor.logger import Console, MetricsWriter, stats_line
from nitro.train import config as C
from nitro.train.ppo import Trainer

METRICS = {"update": 1234, "global_step": 123_456_789, "perf/sps": 98_765_432.1, "episode/return": 487.25,
           "episode/return_recent": 480.5, "episode/recent_episodes": 104, "episode/length": 487.25,
           "loss/approx_kl": 0.0123, "loss/entropy": 0.5432}


class Interrupt(Exception):
    pass


def _config(tmp_path, *extra):
    return C.load("cartpole", ["run.console=false", "run.device=cpu", "env.num_envs=8", "ppo.num_steps=16",
                               "ppo.minibatches=2", "ppo.epochs=1", "ppo.total_steps=1024",
                               "ppo.target_return=none", "run.checkpoint_every=3", *extra])


def _scalars(run_dir: Path, tag: str) -> list[int]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors: a second thread only adds synchronization
    yield
    torch.set_num_threads(before)


def test_a_resumed_run_logs_every_update_once(tmp_path, one_thread):

    def die_at_update_5(m):  # the checkpoint is update 3's: updates 4 and 5 are logged twice
        if m["update"] == 5:
            raise Interrupt

    with pytest.raises(Interrupt):
        Trainer(_config(tmp_path), tmp_path).train(on_log=die_at_update_5)
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"update": 6, "global_st')  # a line cut short by the kill
    resumed = Trainer(_config(tmp_path), tmp_path, resume=tmp_path)
    assert resumed.update == 3
    resumed.train()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["update"] for line in lines] == list(range(1, 9))
    steps = [json.loads(line)["global_step"] for line in lines]
    assert _scalars(tmp_path, "perf/sps") == steps  # TensorBoard dropped the orphaned 4 and 5 too


def test_metrics_writer_keeps_whole_lines_up_to_the_checkpoint(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"update": u, "global_step": 10 * u}) + "\n" for u in range(1, 6))
                    + "not json\n")
    MetricsWriter(tmp_path, tensorboard=False, resume_update=2, resume_step=20).close()
    assert [json.loads(line)["update"] for line in path.read_text().splitlines()] == [1, 2]


def test_the_plain_console_line_fits_80_columns(capsys, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    console = Console(200_000_000, "CartPole-v1")
    console.update(METRICS)
    console.close()
    line = capsys.readouterr().out.rstrip("\n")
    assert len(line) <= 80, line
    assert line.startswith("[update 1234] step 123M | 98.8M steps/s | return 480.5")


@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_live_bar_fits_the_terminal(width):
    terminal = RichConsole(file=io.StringIO(), width=width, force_terminal=True)
    console = Console(200_000_000, "MountainCarContinuous-v0", console=terminal)
    console.update(METRICS)
    shown = RichConsole(file=io.StringIO(), width=width, record=True)  # what the live display draws now
    shown.print(console.live.get_renderable())
    console.close()
    lines = [line.rstrip() for line in shown.export_text().splitlines() if line.strip()]
    assert all(len(line) <= width for line in lines), lines
    assert any("%" in line for line in lines)  # the bar with its percentage
    stats = lines[-1]
    assert stats.startswith("step 123M | 98.8M steps/s | return 480.5"), stats


def test_stats_line_drops_the_least_important_numbers_first():
    assert stats_line(METRICS) == ("step 123M | 98.8M steps/s | return 480.5 | len 487.2 | kl 0.012 | "
                                   "ent 0.543")
    assert stats_line(METRICS, 50) == "step 123M | 98.8M steps/s | return 480.5"
    assert stats_line({"global_step": 0, "perf/sps": 0.0}) == "step 0 | 0 steps/s | return -"
