"""Pictures of a run: the league's ratings over time."""

from __future__ import annotations

from pathlib import Path


def rating_curve(history: list[dict], path: str | Path, title: str = "league ratings") -> Path:
    """Elo of the learner and of every league member over updates (one row of ``history`` per league
    step, as ``league.jsonl`` holds them), as a PNG at ``path``. Needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("the rating picture needs matplotlib: pip install matplotlib") from None
    names = list(dict.fromkeys(n for row in history for n in row["elo"]))
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for name in names:
        points = [(row["update"], row["elo"][name]) for row in history if name in row["elo"]]
        xs, ys = zip(*points)
        if name == "learner":
            ax.plot(xs, ys, color="black", linewidth=2.2, label="learner", zorder=3)
        elif name.startswith("bot:"):
            ax.plot(xs, ys, linestyle="--", linewidth=1.4, label=name)
        else:
            ax.plot(xs, ys, linewidth=0.8, alpha=0.6, color="tab:blue")
    ax.set_xlabel("update")
    ax.set_ylabel("Elo")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.plot([], [], linewidth=0.8, alpha=0.6, color="tab:blue", label="snapshots")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
