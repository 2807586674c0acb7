"""Training configuration: typed dataclasses with a docstring per field, YAML presets and dotted
command-line overrides (``ppo.lr=3e-4 env.num_envs=65536``). Unknown keys are errors that list the
valid ones."""

from __future__ import annotations

import dataclasses
import difflib
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from nitro.core.fields import field_docs


@dataclass
class EnvConfig:
    id: str = "CartPole-v1"
    """Registered env id or alias (``nitro envs`` lists them)."""
    num_envs: int = 4096
    """Envs per process (per GPU under torchrun)."""
    params: dict = field(default_factory=dict)
    """Overrides of the env's params dataclass, e.g. {max_episode_steps: 1000}."""


@dataclass
class PPOConfig:
    total_steps: int = 5_000_000
    """Env steps to train for, summed over all processes."""
    num_steps: int = 32
    """Rollout length T: steps per env between updates."""
    epochs: int = 4
    """Passes over each rollout."""
    minibatches: int = 4
    """Minibatches per epoch (the rollout is split into this many)."""
    lr: float = 2.5e-4
    """Adam learning rate."""
    lr_schedule: str = "linear"
    """"linear" (anneal to 0 over total_steps) or "constant"."""
    adam_eps: float = 1e-5
    """Adam epsilon (added to the root of the second moment)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_coef: float = 0.2
    """PPO ratio clip."""
    clip_vloss: bool = True
    """Clip the value update to clip_coef around the old value, as in the PPO paper's code."""
    vf_coef: float = 0.5
    """Weight of the value loss in the total loss."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus (subtracted from the loss)."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    norm_adv: bool = True
    """Normalize advantages per minibatch."""
    obs_norm: bool = False
    """Normalize observations with running mean/var (updated after each rollout)."""
    reward_scale: bool = False
    """Divide rewards by the running std of the discounted return."""
    target_return: float | None = None
    """Stop once the mean return of recent episodes reaches this (checked at each log)."""


@dataclass
class PolicyConfig:
    hidden: list = field(default_factory=lambda: [64, 64])
    """Widths of the MLP trunk(s)."""
    activation: str = "tanh"
    """tanh | relu | elu | gelu | silu."""
    layer_norm: bool = False
    """LayerNorm after each hidden linear layer."""
    shared: bool = False
    """One trunk for actor and critic (else two separate trunks)."""
    lstm: int = 0
    """LSTM hidden size after the trunk; 0 for a feed-forward policy."""
    bptt: int = 16
    """Truncated-BPTT chunk length in the update (must divide ppo.num_steps)."""
    log_std: str = "state_independent"
    """Continuous actions: "state_independent" (a learned vector) or "state_dependent" (a head)."""
    init_log_std: float = 0.0
    """Continuous actions: initial log standard deviation of the Gaussian."""
    fused: str = "auto"
    """auto | true | false: run the feed-forward trunks as fused Triton kernels (nitro/train/fused_mlp.py;
    same parameters and checkpoints; 1.2-1.4x PPO steps/s on CartPole, docs/PERFORMANCE.md). They need
    CUDA (or TRITON_INTERPRET=1), tanh/relu, no layer_norm, no LSTM, widths up to 128: auto uses them
    on CUDA where the policy allows, true raises where it does not."""


@dataclass
class RunConfig:
    seed: int = 1
    """Seed of everything; rank r of a torchrun job uses seed + 1000 * r."""
    device: str = "auto"
    """auto (the rank's CUDA device if any, else cpu) | cpu | cuda | cuda:N."""
    precision: str = "fp32"
    """fp32 | bf16 (autocast for inference and update, fp32 master weights)."""
    compile: str = "auto"
    """Compile the rollout step: auto (on CUDA) | true | false."""
    graph: str = "auto"
    """Capture rollout and update in CUDA graphs: auto (on CUDA) | true | false."""
    dir: str = "runs"
    """Parent folder of run directories."""
    name: str = ""
    """Run directory name (default: <env>-<time>)."""
    log_every: int = 1
    """Updates between logs (the only host syncs of the loop happen at a log)."""
    checkpoint_every: int = 50
    """Updates between checkpoints (and one at the end)."""
    keep_last: int = 3
    """Checkpoints to keep besides best."""
    tensorboard: bool = True
    """Write TensorBoard scalars to <run dir>/tb."""
    console: bool = True
    """Live console line (rich)."""


@dataclass
class TrainConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    run: RunConfig = field(default_factory=RunConfig)


class ConfigError(ValueError):
    pass


def _fields(cls) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Convert ``value`` (from YAML or the command line) to the field type ``tp``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            return None
        return _coerce(value, args[0], where)
    if isinstance(value, str) and tp is not str:
        value = yaml.safe_load(value)
    try:
        if tp is bool:
            if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
                return value.lower() in ("true", "yes", "1")
            if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
                return bool(value)
            if not isinstance(value, bool):
                raise TypeError
            return value
        if tp is int:
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, str):
                value = int(float(value.replace("_", "")))
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError
            return value
        if tp is float:
            if isinstance(value, bool):
                raise TypeError
            return float(value)
        if tp is str:
            return str(value)
        if tp in (list, dict) or origin in (list, dict):
            if not isinstance(value, origin or tp):
                raise TypeError
            return value
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected {getattr(tp, '__name__', tp)}, got {value!r}") from None
    return value


def apply(cfg: Any, updates: dict, prefix: str = "") -> None:
    """Apply a nested dict of updates to a config dataclass in place, checking every key."""
    hints = typing.get_type_hints(type(cfg))
    known = _fields(type(cfg))
    for k, v in updates.items():
        where = f"{prefix}{k}"
        if k not in known:
            close = difflib.get_close_matches(k, list(known), n=1)
            hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
            raise ConfigError(f"unknown config key {where!r}{hint}; valid keys under "
                              f"{prefix.rstrip('.') or 'the top level'}: {', '.join(sorted(known))}")
        current = getattr(cfg, k)
        if dataclasses.is_dataclass(current):
            if not isinstance(v, dict):
                raise ConfigError(f"{where} is a section; give keys like {where}.{next(iter(_fields(type(current))))}")
            apply(current, v, f"{where}.")
        elif k == "params" and isinstance(current, dict):
            current.update(v if isinstance(v, dict) else {})
        else:
            setattr(cfg, k, _coerce(v, hints[k], where))


def parse_override(text: str) -> dict:
    """``a.b.c=value`` -> {"a": {"b": {"c": "value"}}} (the value is converted by field type later)."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like section.key=value, e.g. ppo.lr=3e-4")
    path, value = text.split("=", 1)
    out: dict = {}
    node = out
    parts = path.strip().split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    # env params keep YAML typing since their schema belongs to the env
    node[parts[-1]] = yaml.safe_load(value) if len(parts) > 2 and parts[-2] == "params" else value
    return out


def merge(a: dict, b: dict) -> dict:
    for k, v in b.items():
        a[k] = merge(a.get(k, {}), v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
    return a


def presets() -> dict[str, Path]:
    """Preset name -> YAML file shipped in ``nitro/presets``."""
    root = resources.files("nitro") / "presets"
    return {Path(p.name).stem: Path(str(p)) for p in root.iterdir() if p.name.endswith(".yaml")}


def load(target: str | None = None, overrides: list[str] = (), config_file: str | None = None) -> TrainConfig:
    """Defaults <- preset (if ``target`` names one, else env.id=target) <- config file <- overrides."""
    cfg = TrainConfig()
    if target:
        known = presets()
        if target.lower() in known:
            apply(cfg, yaml.safe_load(known[target.lower()].read_text()) or {})
        else:
            from nitro.core.registry import spec

            cfg.env.id = spec(target).id  # raises with the list of known ids
    if config_file:
        path = Path(config_file)
        if not path.exists():
            raise FileNotFoundError(f"config file {config_file} does not exist")
        apply(cfg, yaml.safe_load(path.read_text()) or {})
    updates: dict = {}
    for o in overrides:
        merge(updates, parse_override(o))
    apply(cfg, updates)
    validate(cfg)
    return cfg


def validate(cfg: TrainConfig) -> None:
    """Fail fast on inconsistent settings, saying how to fix them."""
    p, pol, r = cfg.ppo, cfg.policy, cfg.run
    batch = p.num_steps * cfg.env.num_envs
    if batch % p.minibatches:
        raise ConfigError(f"ppo.num_steps * env.num_envs = {batch} is not divisible by ppo.minibatches="
                          f"{p.minibatches}")
    if pol.lstm and p.num_steps % pol.bptt:
        raise ConfigError(f"policy.bptt={pol.bptt} must divide ppo.num_steps={p.num_steps}")
    if pol.lstm and (cfg.env.num_envs * (p.num_steps // pol.bptt)) % p.minibatches:
        raise ConfigError("with an LSTM, minibatches split sequences: env.num_envs * (num_steps / bptt) must "
                          f"be divisible by ppo.minibatches={p.minibatches}")
    choices = {"ppo.lr_schedule": (p.lr_schedule, ("linear", "constant")),
               "policy.activation": (pol.activation, ("tanh", "relu", "elu", "gelu", "silu")),
               "policy.log_std": (pol.log_std, ("state_independent", "state_dependent")),
               "policy.fused": (pol.fused, ("auto", "true", "false")),
               "run.precision": (r.precision, ("fp32", "bf16")),
               "run.compile": (r.compile, ("auto", "true", "false")),
               "run.graph": (r.graph, ("auto", "true", "false"))}
    for name, (value, allowed) in choices.items():
        if value not in allowed:
            raise ConfigError(f"{name}={value!r}; choose one of {', '.join(allowed)}")
    for name in ("num_envs",):
        if getattr(cfg.env, name) < 1:
            raise ConfigError(f"env.{name} must be >= 1")
    if not 0 <= p.gamma <= 1 or not 0 <= p.gae_lambda <= 1:
        raise ConfigError("ppo.gamma and ppo.gae_lambda must lie in [0, 1]")


def to_dict(cfg: Any) -> dict:
    return dataclasses.asdict(cfg)


def from_dict(d: dict) -> TrainConfig:
    cfg = TrainConfig()
    apply(cfg, d)
    validate(cfg)
    return cfg


def describe() -> list[tuple[str, str, str]]:
    """(dotted key, default, docstring) of every config field, for ``nitro train --help-config``."""
    rows = []
    for section in dataclasses.fields(TrainConfig):
        cls = type(getattr(TrainConfig(), section.name))
        docs = field_docs(cls)
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            rows.append((f"{section.name}.{f.name}", repr(default), docs.get(f.name, "")))
    return rows
