"""Env registry: ``register(id, entry_point)`` and ``make(id, num_envs=..., device=..., seed=..., **params)``."""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from nitro.core.env import Env
from nitro.core.vector import VecEnv


@dataclass(frozen=True)
class EnvSpec:
    id: str
    entry_point: str | Callable[..., Env]
    """An Env subclass, a factory, or "module:attr" imported on first use."""
    aliases: tuple[str, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)
    """Params overrides applied before the caller's."""

    def load(self) -> Callable[..., Env]:
        if callable(self.entry_point):
            return self.entry_point
        module, _, attr = self.entry_point.partition(":")
        return getattr(importlib.import_module(module), attr)


_REGISTRY: dict[str, EnvSpec] = {}
_ALIASES: dict[str, str] = {}


def register(id: str, entry_point: str | Callable[..., Env], aliases: tuple[str, ...] = (),
             **defaults: Any) -> None:
    """Make ``id`` (and its ``aliases``) available to ``make``."""
    if id in _REGISTRY:
        raise ValueError(f"env id {id!r} is already registered")
    _REGISTRY[id] = EnvSpec(id, entry_point, tuple(aliases), dict(defaults))
    for name in (id, *aliases):
        _ALIASES[name.lower()] = id


def registered() -> list[EnvSpec]:
    """Specs of every registered env, in registration order."""
    return list(_REGISTRY.values())


def spec(id: str) -> EnvSpec:
    """The spec of ``id`` (case-insensitive, aliases allowed); unknown ids list the known ones."""
    key = _ALIASES.get(id.lower()) if isinstance(id, str) else None
    if key is None:
        names = sorted(_REGISTRY)
        close = difflib.get_close_matches(str(id), names + sorted(_ALIASES), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise KeyError(f"unknown env id {id!r}.{hint} Registered envs: {', '.join(names)}")
    return _REGISTRY[key]


def make_env(id: str, **params: Any) -> Env:
    """The functional env ``id`` with its params dataclass built from defaults and ``params``."""
    s = spec(id)
    factory = s.load()
    values = {**s.defaults, **params}
    params_cls = getattr(factory, "Params", None)
    if params_cls is None:
        return factory(**values)
    known = {f.name for f in dataclasses.fields(params_cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise TypeError(f"{s.id} has no parameter(s) {', '.join(unknown)}; "
                        f"valid parameters: {', '.join(sorted(known))}")
    return factory(params_cls(**values))


def make(id: str, num_envs: int = 1, device: torch.device | str | None = None, seed: int = 0,
         check_actions: bool = True, mode: str = "eager", **params: Any) -> VecEnv:
    """``num_envs`` copies of env ``id`` on ``device`` (default: CUDA if present), seeded by ``seed``.

    ``mode`` is how ``step`` and ``sample_actions`` run: eager, compile, graph (CUDA), auto (graph on
    CUDA, eager elsewhere) or aot (the CPU step compiled ahead of time, cached on disk); see ``VecEnv``.
    Keyword ``params`` override the env's params dataclass (``nitro envs`` lists them)."""
    return VecEnv(make_env(id, **params), num_envs, device, seed, check_actions, mode)
