"""``nitro monitor RUN``: a terminal dashboard of a run, in its own process (textual).

It only reads the run directory (`nitro.monitor.runs`): start it, quit it (q) and start it again at any
time; the trainer never knows. It polls every ``interval`` seconds and says when the trainer finished,
failed or disappeared (killed, crashed machine) while its status still said running.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from textual.app import App, ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import DataTable, Footer, Sparkline, Static

from nitro.monitor.runs import MetricsTail, TrainerState, read_config, read_status, series, trainer_state
from nitro.monitor.view import COLUMNS, HISTORY, PANELS, TABLE_ROWS, headline, perf_line, si


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
