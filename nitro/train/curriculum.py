"""The curriculum scheduler: training stages that advance on conditions over logged metrics.

A stage (one mapping of ``curriculum.stages``) sets any of

- ``env``: env params (e.g. a team size or a mutator mix), applied on top of ``env.params``;
- ``reward``: ``{dense: w, outcome: w}``, the weights of ``league.dense_reward`` / ``league.outcome_reward``
  (``{dense: 0, outcome: 1}`` is the sparse-reward mode);
- ``mix``: the league's opponent mix (``league.mix``),

and says when to move on: ``until``, conditions on the latest logged value of metrics joined by
"and" (``"league/win_rate >= 0.6 and update >= 50"``), checked at each log once ``min_updates``
updates have passed in the stage. Settings carry over: a stage changes only what it names. The last
stage needs no condition; training stays in it. The stage index and when it began are saved in
checkpoints, so a resumed run continues in its stage.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

from nitro.core.errors import NitroError


class StageError(NitroError, ValueError):
    """A curriculum stage that cannot be used (the config turns it into a ConfigError)."""


OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq}
KEYS = ("name", "until", "min_updates", "env", "reward", "mix")


@dataclass(frozen=True)
class Condition:
    metric: str
    op: str
    value: float

    def holds(self, metrics: dict) -> bool:
        return self.metric in metrics and OPS[self.op](metrics[self.metric], self.value)

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value:g}"


@dataclass(frozen=True)
class Stage:
    name: str
    until: tuple[Condition, ...] = ()
    min_updates: int = 0
    env: dict = field(default_factory=dict)
    reward: dict = field(default_factory=dict)
    mix: dict | None = None


def parse_condition(text: str, where: str) -> tuple[Condition, ...]:
    """``"metric OP number [and metric OP number ...]"`` with OP one of >=, <=, >, <, ==."""
    out = []
    for part in str(text).split(" and "):
        words = part.split()
        if len(words) != 3 or words[1] not in OPS:
            raise StageError(f"{where}={text!r}: each condition is 'metric OP number' with OP one of "
                              f"{', '.join(OPS)}, joined by 'and', e.g. 'league/win_rate >= 0.6'")
        try:
            value = float(words[2])
        except ValueError:
            raise StageError(f"{where}={text!r}: {words[2]!r} is not a number") from None
        out.append(Condition(words[0], words[1], value))
    return tuple(out)


def parse(stages: list) -> list[Stage]:
    """Stages from ``curriculum.stages`` (a list of mappings), with one-line errors naming the field."""
    out = []
    for i, spec in enumerate(stages):
        where = f"curriculum.stages[{i}]"
        if not isinstance(spec, dict):
            raise StageError(f"{where} must be a mapping with keys {', '.join(KEYS)}, got {spec!r}")
        unknown = sorted(set(spec) - set(KEYS))
        if unknown:
            raise StageError(f"{where} has unknown keys {unknown}; its keys are {', '.join(KEYS)}")
        last = i == len(stages) - 1
        if "until" not in spec and not last:
            raise StageError(f"{where} needs an 'until' condition (only the last stage may go without), e.g. "
                              "until: 'league/win_rate >= 0.6'")
        reward = spec.get("reward", {})
        if not isinstance(reward, dict) or set(reward) - {"dense", "outcome"}:
            raise StageError(f"{where}.reward={reward!r} must be a mapping with keys dense and/or outcome")
        for key in ("env", "mix"):
            if key in spec and not isinstance(spec[key], dict):
                raise StageError(f"{where}.{key}={spec[key]!r} must be a mapping")
        min_updates = spec.get("min_updates", 0)
        if not isinstance(min_updates, int) or isinstance(min_updates, bool) or min_updates < 0:
            raise StageError(f"{where}.min_updates={min_updates!r} must be an int >= 0")
        until = parse_condition(spec["until"], f"{where}.until") if "until" in spec else ()
        out.append(Stage(str(spec.get("name", f"stage{i}")), until, min_updates, dict(spec.get("env", {})),
                         {k: float(v) for k, v in reward.items()}, spec.get("mix")))
    return out


def settings(stages: list[Stage], index: int) -> tuple[dict, dict, dict | None]:
    """(env params, reward weights, mix) in force in stage ``index``: the stages up to it, later ones
    overriding earlier ones."""
    env, reward, mix = {}, {}, None
    for s in stages[: index + 1]:
        env.update(s.env)
        reward.update(s.reward)
        mix = s.mix if s.mix is not None else mix
    return env, reward, mix


class Curriculum:
    """Which stage training is in, and when it moves on."""

    def __init__(self, stages: list[Stage]):
        self.stages = stages
        self.index = 0
        self.began = 0
        """Update at which the current stage began."""
        self.watched = {c.metric for s in stages for c in s.until}
        self.latest: dict = {}
        """The latest logged value of every metric a condition reads."""
        self.events: list[dict] = []
        """Stage changes: update, from, to, the conditions that held."""

    @property
    def stage(self) -> Stage:
        return self.stages[self.index]

    def settings(self) -> tuple[dict, dict, dict | None]:
        return settings(self.stages, self.index)

    def observe(self, metrics: dict, update: int) -> bool:
        """Take a log's metrics; True when this log moves training to the next stage."""
        self.latest.update({k: v for k, v in metrics.items() if k in self.watched})
        s = self.stage
        if self.index == len(self.stages) - 1 or update - self.began < s.min_updates:
            return False
        if not all(c.holds(self.latest) for c in s.until):
            return False
        self.events.append({"update": update, "from": s.name, "to": self.stages[self.index + 1].name,
                            "because": " and ".join(f"{c} ({self.latest[c.metric]:.4g})" for c in s.until)})
        self.index += 1
        self.began = update
        return True

    def state(self) -> dict:
        return {"index": self.index, "began": self.began, "latest": self.latest, "events": self.events}

    def load_state(self, state: dict) -> None:
        if state["index"] >= len(self.stages):
            raise StageError(f"the checkpoint is in curriculum stage {state['index']} but this run has "
                              f"{len(self.stages)} stages; resume with the run's own curriculum")
        self.index, self.began = state["index"], state["began"]
        self.latest, self.events = dict(state["latest"]), list(state["events"])
