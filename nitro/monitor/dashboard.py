"""``nitro monitor RUN``: a terminal dashboard of a run, in its own process (textual).

It only reads the run directory (`nitro.monitor.runs`): start it, quit it (q) and start it again at any
time; the trainer never knows. It polls every ``interval`` seconds and says when the trainer finished,
failed or disappeared (killed, crashed machine) while its status still said running.
"""

from __future__ import annotations

import math
import subprocess
import time
from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import DataTable, Footer, Sparkline, Static

from nitro.monitor.runs import MetricsTail, TrainerState, read_config, read_status, series, trainer_state

PANELS = (("return", "episode/return"), ("SPS", "perf/sps"), ("policy loss", "loss/policy"),
          ("value loss", "loss/value"), ("KL", "loss/approx_kl"), ("entropy", "loss/entropy"))
"""The sparklines: title and metric."""
COLUMNS = (("update", "update"), ("step", "global_step"), ("return", "episode/return"),
           ("length", "episode/length"), ("SPS", "perf/sps"), ("policy", "loss/policy"), ("value", "loss/value"),
           ("entropy", "loss/entropy"), ("KL", "loss/approx_kl"), ("clip", "loss/clipfrac"),
           ("expl. var", "loss/explained_variance"))
"""The table of recent updates: header and metric."""
HISTORY = 300
"""Points per sparkline."""
TABLE_ROWS = 12
STATE_STYLE = {"running": "green", "starting": "yellow", "finished": "cyan", "failed": "red", "stopped": "red",
               "interrupted": "yellow", "unknown": "dim"}


def si(x) -> str:
    """A number in 4 significant digits with k/M/G."""
    if not isinstance(x, (int, float)) or not math.isfinite(x):
        return "-"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.4g}{unit}"
    return f"{x:.4g}"


def seconds(s: float) -> str:
    """A short time: 850 us, 12.3 ms, 4.56 s."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if abs(s) >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e6:.3g} us"


def duration(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "-"
    h, rest = divmod(int(seconds), 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def headline(run: Path, config: dict, status: dict | None, rows: list[dict], state: TrainerState,
             now: float | None = None) -> str:
    """The status line: run, env, device, trainer state, progress, elapsed time and ETA (rich markup)."""
    now = time.time() if now is None else now
    env = (status or {}).get("env") or config.get("env", {}).get("id", "?")
    device = (status or {}).get("device", config.get("run", {}).get("device", "?"))
    total = (status or {}).get("total_steps") or config.get("ppo", {}).get("total_steps")
    step = rows[-1].get("global_step", 0) if rows else (status or {}).get("global_step", 0)
    parts = [f"[b]{run.name}[/b]", env, device,
             f"[{STATE_STYLE.get(state.state, 'dim')}]● {state.state}[/]: {state.message}"]
    if total:
        parts.append(f"step {si(step)} / {si(total)} ({100 * step / total:.1f}%)")
    started = (status or {}).get("started")
    if started:
        end = now if state.state in ("running", "starting") else status.get("updated", now)
        parts.append(f"{duration(end - started)} elapsed")
        sps = rows[-1].get("perf/sps") if rows else None
        if state.state == "running" and total and sps:
            parts.append(f"ETA {duration((total - step) / sps)}")
    return "  ·  ".join(parts)


def perf_line(row: dict) -> str:
    """SPS split, memory, utilisation, episodes and league entries of the newest row."""
    parts = []
    if "perf/collect_sps" in row:
        parts.append(f"rollout {si(row['perf/collect_sps'])} steps/s")
    for name in ("collect", "learn"):
        if f"perf/{name}_seconds" in row:
            parts.append(f"{name} {seconds(row[f'perf/{name}_seconds'])}")
    if "gpu/mem_allocated_gb" in row:
        parts.append(f"GPU mem {row['gpu/mem_allocated_gb']:.2f} GB (peak {row.get('gpu/mem_peak_gb', 0):.2f} / "
                     f"{row.get('gpu/mem_total_gb', 0):.0f})")
    if "gpu/utilization" in row:
        parts.append(f"GPU util {row['gpu/utilization']:.0f}%")
    if "cpu/max_rss_gb" in row:
        parts.append(f"RSS {row['cpu/max_rss_gb']:.2f} GB")
    if "episode/count" in row:
        parts.append(f"{si(row['episode/count'])} episodes in the last log")
    parts += [f"{k[len('league/'):]} {si(v)}" for k, v in row.items() if k.startswith("league/")]
    return "  ·  ".join(parts) or "-"


def snapshot(run: Path, now: float | None = None) -> str:
    """The dashboard as plain text (``nitro monitor --once``): headline, latest values, recent updates."""
    tail = MetricsTail(run)
    tail.poll()
    rows, status = tail.rows, read_status(run)
    state = trainer_state(status, now)
    lines = [_plain(headline(run, read_config(run), status, rows, state, now))]
    if rows:
        latest = "  ".join(f"{title} {si(rows[-1].get(key))}" for title, key in PANELS)
        lines += [latest, _plain(perf_line(rows[-1])), "  ".join(f"{h:>9}" for h, _ in COLUMNS)]
        lines += ["  ".join(f"{si(r.get(k)):>9}" for _, k in COLUMNS) for r in rows[-TABLE_ROWS:][::-1]]
    else:
        lines.append("no metrics yet")
    return "\n".join(lines)


def _plain(markup: str) -> str:
    return Text.from_markup(markup).plain


class Panel(Vertical):
    """A titled sparkline with the latest value and the range."""

    def __init__(self, title: str, key: str):
        super().__init__(classes="panel")
        self.title_text, self.key = title, key

    def compose(self) -> ComposeResult:
        yield Static(self.title_text, classes="panel-title")
        yield Sparkline([], summary_function=max)

    def show(self, rows: list[dict]) -> None:
        _, values = series(rows, self.key)
        values = values[-HISTORY:]
        title = f"[b]{self.title_text}[/b] {si(values[-1])}" if values else f"[b]{self.title_text}[/b] -"
        if values:
            title += f"  [dim]min {si(min(values))} max {si(max(values))}[/dim]"
        self.query_one(Static).update(title)
        self.query_one(Sparkline).data = values


class Dashboard(App):
    """The live view of one run directory."""

    TITLE = "nitro monitor"
    CSS = """
    #headline { height: auto; padding: 0 1; background: $boost; }
    #perf { height: auto; padding: 0 1; color: $text-muted; }
    #panels { grid-size: 3 2; grid-gutter: 0 1; height: 14; padding: 0 1; }
    .panel { height: 7; border: round $primary-darken-2; }
    .panel Sparkline { height: 1fr; }
    #updates { height: 1fr; }
    """
    BINDINGS = [("q", "quit", "detach (training goes on)"), ("r", "reload", "re-read the run")]

    def __init__(self, run: Path, interval: float = 0.5, process: subprocess.Popen | None = None):
        super().__init__()
        self.run_dir, self.interval = Path(run), interval
        self.process = process
        """The trainer when this dashboard started it (nitro train --monitor): polled, so it is reaped."""
        self.tail = MetricsTail(self.run_dir)
        self.state = TrainerState("unknown", "")

    def compose(self) -> ComposeResult:
        yield Static(id="headline")
        with Grid(id="panels"):
            for title, key in PANELS:
                yield Panel(title, key)
        yield Static(id="perf")
        yield DataTable(id="updates", zebra_stripes=True, cursor_type="none")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*(h for h, _ in COLUMNS))
        self.refresh_view()
        self.poller = self.set_interval(self.interval, self.refresh_view)

    def action_quit(self) -> None:
        self.poller.stop()
        self.exit()

    def action_reload(self) -> None:
        self.tail = MetricsTail(self.run_dir)
        self.refresh_view()

    def refresh_view(self) -> None:
        self.tail.poll()
        rows, status = self.tail.rows, read_status(self.run_dir)
        exit_code = self.process.poll() if self.process is not None else None
        self.state = trainer_state(status)
        line = headline(self.run_dir, read_config(self.run_dir), status, rows, self.state)
        if exit_code is not None:
            line += f"  ·  [b]the trainer exited with code {exit_code}[/b] (output: {self.run_dir.name}.log)"
        self.query_one("#headline", Static).update(line)
        for panel in self.query(Panel):
            panel.show(rows)
        self.query_one("#perf", Static).update(perf_line(rows[-1]) if rows else "waiting for the first log")
        table = self.query_one(DataTable)
        table.clear()
        for r in rows[-TABLE_ROWS:][::-1]:
            table.add_row(*(si(r.get(k)) for _, k in COLUMNS))
