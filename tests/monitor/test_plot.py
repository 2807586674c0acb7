"""Learning-curve pictures: the figures hold the runs' metrics; the page shows them in a browser."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from nitro.cli import main
from nitro.monitor import plot
from nitro.monitor.stream import RunStatus


def make_run(path, slope: float, updates: int = 20, start: float = 1_000_000.0):
    """A finished run whose return grows by ``slope`` per update, logged every 2 s."""
    path.mkdir(parents=True)
    rows = [{"step": 512 * u, "time": start + 5 + 2 * u, "update": u, "global_step": 512 * u,
             "perf/sps": 256.0 + u, "episode/return": slope * u, "loss/policy": -0.01 * u, "loss/value": 10.0 / u,
             "loss/entropy": 0.69 - 0.01 * u, "loss/approx_kl": 1e-3 * u} for u in range(1, updates + 1)]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    status = RunStatus(path, {"env": "CartPole-v1"})
    status.data["started"] = start
    status.end()
    return rows


def test_figures_hold_every_runs_metrics(tmp_path):
    a, b = make_run(tmp_path / "a", 2.0), make_run(tmp_path / "b", 3.0, updates=10)
    figs = plot.figures(plot.load_runs([tmp_path / "a", tmp_path / "b"]))
    assert set(figs) == {"return_vs_steps", "return_vs_time", "sps", "losses"}
    lines = figs["return_vs_steps"].axes[0].lines
    assert [line.get_label() for line in lines] == ["a", "b"]
    np.testing.assert_array_equal(lines[0].get_xdata(), [r["global_step"] for r in a])
    np.testing.assert_array_equal(lines[1].get_ydata(), [r["episode/return"] for r in b])
    # wall time counts from the trainer's start (status.json): the first log came 7 s after it
    np.testing.assert_array_equal(figs["return_vs_time"].axes[0].lines[0].get_xdata(), [5 + 2 * u for u in range(1, 21)])
    np.testing.assert_array_equal(figs["sps"].axes[0].lines[1].get_ydata(), [r["perf/sps"] for r in b])
    losses = figs["losses"].axes
    assert [ax.get_title() for ax in losses] == ["policy loss", "value loss", "entropy", "approx. KL"]
    np.testing.assert_array_equal(losses[3].lines[0].get_ydata(), [r["loss/approx_kl"] for r in a])


def test_runs_with_the_same_name_are_told_apart(tmp_path):
    make_run(tmp_path / "x" / "run", 1.0)
    make_run(tmp_path / "y" / "run", 1.0)
    assert [r.label for r in plot.load_runs([tmp_path / "x" / "run", tmp_path / "y" / "run"])] == ["x/run", "y/run"]
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "metrics.jsonl").write_text("")
    with pytest.raises(ValueError, match="has no metrics yet"):
        plot.load_runs([tmp_path / "empty"])


def test_nitro_plot_writes_pngs_and_a_page(tmp_path, page, capsys):
    make_run(tmp_path / "a", 2.0)
    make_run(tmp_path / "b", 3.0)
    assert main(["plot", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "out")]) == 0
    assert "index.html" in capsys.readouterr().out
    for name in ("return_vs_steps", "return_vs_time", "sps", "losses"):
        image = Image.open(tmp_path / "out" / f"{name}.png")
        assert image.size in ((800, 450), (1000, 600))  # the figure sizes at 100 dpi
        assert np.asarray(image.convert("L")).std() > 5  # not blank
    page.goto((tmp_path / "out" / "index.html").as_uri())
    loaded = page.evaluate("Array.from(document.images).map(i => [i.id, i.complete && i.naturalWidth])")
    assert loaded == [["return_vs_steps", 800], ["return_vs_time", 800], ["sps", 800], ["losses", 1000]]
    table = page.evaluate("Array.from(document.querySelectorAll('#runs tr')).map(r => r.innerText.split('\\t'))")
    assert table[0][:4] == ["run", "env", "state", "updates"]
    assert table[1][:6] == ["a", "CartPole-v1", "finished", "20", "10240", "40"]  # final return 2 x 20
    assert table[2][6] == "60"  # best return 3 x 20
    # nitro plot RUN alone writes into RUN/plots
    assert main(["plot", str(tmp_path / "a")]) == 0
    assert (tmp_path / "a" / "plots" / "index.html").exists()
