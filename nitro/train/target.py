"""When a run has reached its goal: the mean return of its most recent episodes (``ppo.target_return``
over at least ``ppo.target_episodes`` episodes), and the line that says how a run ended.

Episode returns are summed on the device and read at each log, so the window is made of whole log
intervals: the newest intervals that together hold at least ``target_episodes`` episodes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RecentEpisodes:
    """[episodes, return sum] per log interval, newest last, trimmed to the window."""

    size: int
    """Episodes the window must hold (ppo.target_episodes)."""
    intervals: list[list[float]] = field(default_factory=list)

    def add(self, episodes: float, return_sum: float) -> None:
        """Add a log interval (if episodes ended in it) and drop intervals the window no longer needs."""
        if episodes > 0:
            self.intervals.append([episodes, return_sum])
        kept, count = [], 0.0
        for interval in reversed(self.intervals):
            if count >= self.size:
                break
            kept.append(interval)
            count += interval[0]
        self.intervals = kept[::-1]

    @property
    def episodes(self) -> int:
        return int(sum(c for c, _ in self.intervals))

    @property
    def mean_return(self) -> float | None:
        count = sum(c for c, _ in self.intervals)
        return sum(r for _, r in self.intervals) / count if count else None

    def reached(self, target: float | None) -> bool:
        """A full window whose mean return is at least ``target``."""
        return target is not None and self.episodes >= self.size and self.mean_return >= target


def outcome(recent: RecentEpisodes, global_step: int, target: float | None, total_steps: int) -> str:
    """One line saying how a finished run ended: whether it reached its target, and on what evidence."""
    mean = recent.mean_return
    evidence = (f"mean return {mean:.4g} over the last {recent.episodes} episodes" if mean is not None
                else "no episode finished")
    steps = f"{global_step:,} env steps"
    if target is None:
        return f"trained {steps}; {evidence}"
    if recent.reached(target):
        return f"reached target_return={target:g} after {steps}: {evidence}"
    if recent.episodes < recent.size and mean is not None and mean >= target:
        evidence += f" (fewer than ppo.target_episodes={recent.size})"
    return (f"did not reach target_return={target:g} in ppo.total_steps={total_steps:,}: {evidence}; "
            f"train longer, e.g. ppo.total_steps={2 * total_steps}")
