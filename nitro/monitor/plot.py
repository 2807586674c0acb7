"""Learning-curve pictures: ``nitro plot RUN [RUN...]`` and the curve ``nitro eval`` leaves in a run.

Figures are drawn with matplotlib's object API on the Agg canvas (no display, no global state) from
the runs' ``metrics.jsonl``; one line per run, so several runs compare on one picture. The HTML page
holds the PNGs inline and a table of the runs, and opens from disk.
"""

from __future__ import annotations

import base64
import html
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from nitro.monitor.runs import read_config, read_metrics, read_status, series, trainer_state

LOSSES = (("loss/policy", "policy loss"), ("loss/value", "value loss"), ("loss/entropy", "entropy"),
          ("loss/approx_kl", "approx. KL"))


@dataclass
class Run:
    """A run's metrics as plotted: its label and its rows."""

    path: Path
    label: str
    rows: list[dict]
    status: dict | None

    def wall_seconds(self) -> list[float]:
        """Seconds since the trainer started (status.json), else since the first log, of each row."""
        start = (self.status or {}).get("started") or (self.rows[0]["time"] if self.rows else 0.0)
        return [r["time"] - start for r in self.rows]


def load_runs(paths: list[Path]) -> list[Run]:
    runs = []
    for p in paths:
        rows = read_metrics(p)
        if not rows:
            raise ValueError(f"{p} has no metrics yet (metrics.jsonl is empty or missing); let it log first")
        runs.append(Run(Path(p), Path(p).name, rows, read_status(p)))
    names = [r.label for r in runs]
    for r in runs:  # the same folder name in two places: say which
        if names.count(r.label) > 1:
            r.label = f"{r.path.parent.name}/{r.path.name}"
    return runs


def _figure(title: str, xlabel: str, ylabel: str) -> tuple[Figure, object]:
    fig = Figure(figsize=(8, 4.5), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    return fig, ax


def figures(runs: list[Run]) -> dict[str, Figure]:
    """The learning-curve figures by file stem: return vs steps and vs wall time, SPS, losses."""
    out = {}
    fig, ax = _figure("episode return", "env steps", "mean return per log")
    for r in runs:
        ax.plot(*series(r.rows, "episode/return"), label=r.label)
    out["return_vs_steps"] = fig
    fig, ax = _figure("episode return", "wall time since start (s)", "mean return per log")
    for r in runs:
        t = r.wall_seconds()
        pairs = [(t[i], row["episode/return"]) for i, row in enumerate(r.rows) if "episode/return" in row]
        ax.plot([p[0] for p in pairs], [p[1] for p in pairs], label=r.label)
    out["return_vs_time"] = fig
    fig, ax = _figure("throughput", "env steps", "env steps per second")
    for r in runs:
        ax.plot(*series(r.rows, "perf/sps"), label=r.label)
    out["sps"] = fig
    fig = Figure(figsize=(10, 6), dpi=100, layout="constrained")
    for i, (key, title) in enumerate(LOSSES):
        ax = fig.add_subplot(2, 2, i + 1)
        ax.set(title=title, xlabel="env steps")
        ax.grid(alpha=0.3)
        for r in runs:
            ax.plot(*series(r.rows, key), label=r.label)
    out["losses"] = fig
    for f in out.values():
        for ax in f.axes:
            if ax.lines:
                ax.legend(fontsize="small")
    return out


def save_png(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png")
    return path


def summary(run: Run) -> dict:
    """One row of the page's table."""
    returns = series(run.rows, "episode/return")[1]
    sps = series(run.rows, "perf/sps")[1]
    last = run.rows[-1]
    return {"run": run.label, "env": (run.status or {}).get("env") or read_config(run.path).get("env", {}).get("id", "?"),
            "state": trainer_state(run.status).state, "updates": last.get("update"),
            "steps": last.get("global_step"), "final return": returns[-1] if returns else None,
            "best return": max(returns) if returns else None, "median SPS": statistics.median(sps) if sps else None,
            "wall s": run.wall_seconds()[-1]}


def write(paths: list[Path], out: Path) -> dict[str, Path]:
    """PNGs and index.html of ``paths`` into ``out``; returns the files by name."""
    runs = load_runs(paths)
    out.mkdir(parents=True, exist_ok=True)
    files = {name: save_png(fig, out / f"{name}.png") for name, fig in figures(runs).items()}
    rows = [summary(r) for r in runs]
    head = "".join(f"<th>{html.escape(k)}</th>" for k in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row.values()) + "</tr>"
                   for row in rows)
    images = "".join(f'<figure><img id="{name}" alt="{name}" src="data:image/png;base64,'
                     f'{base64.b64encode(path.read_bytes()).decode()}"><figcaption>{name}</figcaption></figure>'
                     for name, path in files.items())
    page = (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>nitro runs: "
            f"{html.escape(', '.join(r.label for r in runs))}</title><style>body{{font:14px system-ui,sans-serif;"
            f"margin:24px;background:#fafafa}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;"
            f"padding:4px 8px;text-align:right}}figure{{display:inline-block;margin:8px}}img{{max-width:100%}}</style>"
            f"</head><body><h1>nitro runs</h1><p>made {time.strftime('%Y-%m-%d %H:%M:%S')} from "
            f"{html.escape(', '.join(str(r.path) for r in runs))}</p><table id=runs><tr>{head}</tr>{body}</table>"
            f"{images}</body></html>")
    files["index"] = out / "index.html"
    files["index"].write_text(page, encoding="utf-8")
    return files


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "-" if v is None else str(v)


def eval_curve(run: Path, evals: list[dict]) -> Path:
    """RUN/eval/eval.png: training return per log and each eval's mean (+- std) at its checkpoint's step."""
    fig, ax = _figure(f"{Path(run).name}: evaluation", "env steps", "episode return")
    ax.plot(*series(read_metrics(run), "episode/return"), color="0.6", label="training (mean per log)")
    for mode, colour in (("True", "C0"), ("False", "C1")):
        pts = [e for e in evals if e["deterministic"] == mode]
        if pts:
            ax.errorbar([int(e["global_step"]) for e in pts], [float(e["mean_return"]) for e in pts],
                        yerr=[float(e["std_return"]) for e in pts], fmt="o", color=colour, capsize=3,
                        label=f"eval ({'deterministic' if mode == 'True' else 'sampled'}), mean +- std")
    ax.legend(fontsize="small")
    return save_png(fig, Path(run) / "eval" / "eval.png")


def vs_bots_curve(run: Path, evals: list[dict]) -> Path:
    """RUN/eval/vs_bots.png: training return per log above, and each bot's win rate (+- its 95%
    interval) at the evaluated checkpoints' steps below."""
    fig = Figure(figsize=(8, 7), dpi=100, layout="constrained")
    top, bottom = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2, sharex=None)
    top.set(title=f"{Path(run).name}: training", xlabel="env steps", ylabel="episode return")
    top.plot(*series(read_metrics(run), "episode/return"), color="0.4", label="training (mean per log)")
    bottom.set(title="against the scripted bots", xlabel="env steps", ylabel="win rate", ylim=(-0.02, 1.02))
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    for i, bot in enumerate(dict.fromkeys(e["bot"] for e in evals)):
        pts = sorted((int(e["global_step"]), float(e["win_rate"]), float(e["win_rate_ci95"]))
                     for e in evals if e["bot"] == bot)
        bottom.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], fmt="o-", color=f"C{i}",
                        capsize=3, label=f"vs {bot} (95% interval)")
    for ax in (top, bottom):
        if ax.lines:
            ax.legend(fontsize="small")
    return save_png(fig, Path(run) / "eval" / "vs_bots.png")
