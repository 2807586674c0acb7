"""What the dashboard shows, as text: the headline, the performance line, number formats, and the
whole dashboard as plain text (``nitro monitor --once``). No terminal UI here (textual is optional)."""

from __future__ import annotations

import math
import time
from pathlib import Path

from rich.text import Text

from nitro.monitor.runs import MetricsTail, TrainerState, read_config, read_status, trainer_state

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
    """SPS split, memory, utilisation, episodes, league entries and curriculum stage of the newest row."""
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
    if "curriculum/stage" in row:
        parts.append(f"curriculum stage {row['curriculum/stage']}")
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
