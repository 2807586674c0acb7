"""Training configuration: typed dataclasses with a docstring per field, YAML presets and dotted
command-line overrides (``ppo.lr=3e-4 env.num_envs=65536``). Unknown keys are errors that list the
valid ones."""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import torch
import yaml

from nitro.core.errors import NitroError
from nitro.core.fields import field_docs
from nitro.train import curriculum


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
    """Stop once the mean return of the last ppo.target_episodes episodes reaches this (judged at each
    log over whole log intervals, newest first, until they hold that many episodes)."""
    target_episodes: int = 100
    """How many of the most recent finished episodes target_return is judged on (Gymnasium's "solved"
    criteria average 100 consecutive episodes)."""
    decisions: bool = False
    """Turn-based multi-agent envs (``Env.acting``): store and update only the steps where a seat decides,
    each seat's decisions packed into a fixed number of slots per rollout (``nitro.train.decisions``;
    the env's ``max_decisions`` bounds them), with its rewards summed onto its last decision and GAE
    over each seat's decision sequence (gamma and lambda per decision). False: every seat's row at every
    step (the critic also learns the states where a seat waits). Feed-forward policies only."""


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
    heads: dict = field(default_factory=dict)
    """Discrete actions: separate actor towers for ranges of actions, {name: [start, stop]}. Each range gets
    its own MLP (policy.hidden) and head; the other actions share the main tower. With masks that allow one
    range at a time, each kind of decision then has a network of its own: Skull King's hierarchical preset
    uses {bid: [75, 86]}, a bid head beside the card-play head. nitro/train/policy.py (towers)."""


@dataclass
class RunConfig:
    seed: int = 1
    """Seed of everything; rank r of a torchrun job uses seed + 1000 * r."""
    device: str = "auto"
    """auto (the rank's CUDA device if any, else cpu) | cpu | cuda | cuda:N."""
    precision: str = "fp32"
    """fp32 | bf16 (autocast for inference and update, fp32 master weights)."""
    compile: str = "auto"
    """Compile the rollout step and loss: auto | true | false. auto compiles on CUDA for runs of at least
    1,000 updates, where compiling (seconds, cached across runs) pays for itself, of envs that are
    `Env.capturable`."""
    graph: str = "auto"
    """Capture rollout and update in one CUDA graph: auto (on CUDA, for `Env.capturable` envs) | true | false."""
    threads: int = 0
    """CPU threads of PyTorch's intra-op pool; 0 picks: on a CPU one per 4,096 envs (at least 1, at most
    PyTorch's default; small batches run fastest on one), on a GPU PyTorch's default. The run records the
    count (resumes use it again): results are bit-identical at a fixed thread count, not across counts."""
    dir: str = "runs"
    """Parent folder of run directories."""
    name: str = ""
    """Run directory name (default: <env>-<time>, made unique); a name that holds a run is refused."""
    log_every: int = 1
    """Updates between logs (the only host syncs of the loop happen at a log)."""
    checkpoint_every: int = 50
    """Updates between checkpoints (and one at the end, and one on Ctrl-C / SIGTERM)."""
    checkpoint_seconds: float = 120.0
    """Also checkpoint once this many seconds have passed since the last checkpoint; 0 turns it off."""
    keep_last: int = 3
    """Checkpoints to keep besides best."""
    tensorboard: bool = True
    """Write TensorBoard scalars to <run dir>/tb."""
    console: bool = True
    """Live console line (rich)."""


@dataclass
class LeagueConfig:
    """Multi-agent envs: who the learner plays. With no pool and no bots the learner drives every seat
    and learns from all of them (pure self-play); otherwise it drives one team per env and learns from
    those rows only, while the other seats are driven by opponents evaluated in the same batch."""

    pool_size: int = 0
    """K: past snapshots of the learner kept as opponents (evaluated together, stacked); 0 for none."""
    add_every: int = 20
    """Updates between snapshots added to the pool (the initial policy joins at update 0)."""
    drop: str = "oldest"
    """Which snapshot leaves a full pool for a new one: oldest (first in, first out) | weakest (lowest
    Elo; ties: the oldest)."""
    bots: list = field(default_factory=list)
    """Scripted players of the env (its bots(), e.g. [random, tactical]) that join as fixed members."""
    mix: dict = field(default_factory=lambda: {"self": 0.5, "pool": 0.5})
    """Shares of new games: self (the learner's current policy), pool (snapshots and bot members, by
    league.matchmaking) and any bot by name (a fixed share for it). Normalized to sum to 1."""
    matchmaking: str = "pfsp"
    """How the pool share is spread: uniform | pfsp (prioritized fictitious self-play: weight (1 - p)^power
    for p the learner's recent score against the member, see score_decay) | even (weight p (1 - p):
    members it beats about half the time)."""
    pfsp_power: float = 2.0
    """The exponent of pfsp's weighting (0: uniform; larger: harder opponents more often)."""
    score_decay: float = 0.9
    """Matchmaking's p against a member: the learner's score in its games against it (wins + draws / 2,
    plus one virtual win and one virtual loss: 0.5 before any game), each league step keeping this share of
    the earlier games' weight (0: the last step's games only). Measured, not read off Elo, which drifts in
    a self-play pool (a beaten bot would seem ever easier and stop being played)."""
    update_every: int = 5
    """Updates between league steps: results read from the device, ratings and matchmaking updated."""
    elo_k: float = 8.0
    """Elo's K factor per game."""
    rated_games: int = 512
    """At most this many of a league step's games update the ratings, one by one in a fixed interleaved
    order (a proportional subsample when there were more); bounds the cost of OpenSkill on the host."""
    opponent_eval: str = "bmm"
    """How the stacked pool is evaluated: bmm (one batched matmul per layer) | vmap (torch.func)."""
    dense_reward: float = 1.0
    """Weight of the env's own reward in what the learner is trained on."""
    outcome_reward: float = 0.0
    """Weight of the game outcome added on an episode's last step: 2 x (the fraction of the other teams
    the agent's team beat, ties half) - 1, i.e. +1 win, 0 draw, -1 loss with two teams. dense_reward=0
    with outcome_reward=1 is the sparse-reward mode."""


@dataclass
class CurriculumConfig:
    stages: list = field(default_factory=list)
    """Training stages in order, each a mapping with name, until (conditions on logged metrics joined
    by "and", e.g. "league/win_rate >= 0.6"; the last stage needs none), min_updates, and what it sets:
    env (env params), reward ({dense: w, outcome: w}) and mix (league.mix). nitro/train/curriculum.py."""


@dataclass
class MonitorConfig:
    """Watching a run: soccar replays written during training and live streaming to a viewer."""

    replay_every: int = 0
    """Soccar envs: updates between replays of one rollout of monitor.replay_envs, written to
    <run dir>/replays/update_<n>.npz (view with nitro replay FILE --html OUT.html); 0: none."""
    replay_envs: list = field(default_factory=lambda: [0])
    """Env indices recorded for replays and live viewing."""
    render: str = "none"
    """Soccar envs: stream each rollout of monitor.replay_envs[0] at game speed to a running viewer:
    none | rlviser (RLViser 0.9, UDP 45243) | rocketsimvis (UDP 9273)."""


@dataclass
class TrainConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    run: RunConfig = field(default_factory=RunConfig)
    league: LeagueConfig = field(default_factory=LeagueConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    monitor: MonitorConfig = field(default_factory=MonitorConfig)


class ConfigError(NitroError, ValueError):
    """A config value, key or file that cannot be used; the message names the field, the value and a fix."""


def _fields(cls) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def _yaml_value(text: str, where: str) -> Any:
    """One value written on the command line, read as YAML (``3e-4``, ``[64, 64]``, ``none``)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{where}={text!r} is not a valid value ({_yaml_problem(e)})") from None


def _yaml_problem(e: yaml.YAMLError) -> str:
    return " ".join(str(getattr(e, "problem", None) or e).split())


def read_yaml(path: str | Path) -> dict:
    """A YAML config file as a dict; syntax errors name the file, line and column in one line."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        raise ConfigError(f"{at}: invalid YAML: {_yaml_problem(e)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold sections (env:, ppo:, policy:, run:, monitor:), got a {type(data).__name__}")
    return data


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Convert ``value`` (from YAML or the command line) to the field type ``tp``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            return None
        return _coerce(value, args[0], where)
    if isinstance(value, str) and tp is not str:
        value = _yaml_value(value, where)
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
            close = difflib.get_close_matches(str(k), list(known), n=1)
            hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
            raise ConfigError(f"unknown config key {where!r}{hint}; valid keys under "
                              f"{prefix.rstrip('.') or 'the top level'}: {', '.join(sorted(known))}")
        current = getattr(cfg, k)
        if dataclasses.is_dataclass(current):
            if not isinstance(v, dict):
                raise ConfigError(f"{where} is a section; give keys like {where}.{next(iter(_fields(type(current))))}")
            apply(current, v, f"{where}.")
        elif k == "params" and isinstance(current, dict):
            if not isinstance(v, dict):
                raise ConfigError(f"{where}={v!r} must be a mapping of env parameters, e.g. "
                                  f"{where}.max_episode_steps=1000")
            current.update(v)
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
    params = len(parts) > 2 and parts[-2] == "params"
    node[parts[-1]] = _yaml_value(value, path) if params else value
    return out


def merge(a: dict, b: dict) -> dict:
    for k, v in b.items():
        a[k] = merge(a.get(k, {}), v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
    return a


def presets() -> dict[str, Path]:
    """Preset name -> YAML file shipped in ``nitro/presets``."""
    root = resources.files("nitro") / "presets"
    return {Path(p.name).stem: Path(str(p)) for p in root.iterdir() if p.name.endswith(".yaml")}


ON_CUDA = "on_cuda"
"""A preset's block of overrides used when the run's device is CUDA (presets are sized per device)."""


def load(target: str | None = None, overrides: list[str] = (), config_file: str | None = None) -> TrainConfig:
    """Defaults <- preset (if ``target`` names one, else env.id=target; with its ``on_cuda`` block on a
    CUDA device) <- config file <- overrides."""
    layers: list[dict] = []
    if target:
        known = presets()
        if target.lower() in known:
            layers.append(read_yaml(known[target.lower()]))
        else:
            from nitro.core.registry import spec

            layers.append({"env": {"id": spec(target).id}})  # raises with the list of known ids
    if config_file:
        layers.append(read_yaml(config_file))
    updates: dict = {}
    for o in overrides:
        merge(updates, parse_override(o))
    layers.append(updates)
    sized = [{k: v for k, v in layer.items() if k != ON_CUDA} for layer in layers]
    cfg = _build(sized)
    device_layers = [layer[ON_CUDA] for layer in layers[:1] if ON_CUDA in layer]
    if device_layers and resolve_device(cfg.run.device).type == "cuda":
        cfg = _build(sized[:1] + device_layers + sized[1:])
    validate(cfg)
    return cfg


def _build(layers: list[dict]) -> TrainConfig:
    cfg = TrainConfig()
    for layer in layers:
        apply(cfg, layer)
    return cfg


def resolve_device(device: str) -> torch.device:
    """``run.device`` as a torch device (auto: CUDA if present, else CPU); a device this machine lacks
    raises a ``ConfigError`` saying what is there."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"run.device={device!r} is not a device; use auto, cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"run.device={device!r} but PyTorch sees no CUDA GPU here (a CPU-only build of "
                              "PyTorch, or no driver); use run.device=cpu or run.device=auto")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"run.device={device!r} but this machine has {torch.cuda.device_count()} CUDA "
                              f"device(s), cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    elif dev.type != "cpu":
        backend = getattr(torch, dev.type, None)
        if backend is None or not backend.is_available():
            raise ConfigError(f"run.device={device!r} is not available here; use run.device=cpu or auto")
    return dev


def _minibatch_fix(n: int, minibatches: int, what: str) -> str:
    divisors = [d for d in range(1, min(n, 64) + 1) if n % d == 0]
    near = sorted(divisors, key=lambda d: abs(d - minibatches))[:2]
    return f"use ppo.minibatches={' or '.join(map(str, sorted(near)))} or change {what}"


def validate(cfg: TrainConfig) -> None:
    """Check every field up front; the first bad one raises a ``ConfigError`` naming it, its value and
    a fix. (Devices are checked where the run starts, by ``resolve_device``: a saved config stays
    loadable on a machine without the run's GPU.)"""
    _check_types(cfg)
    e, p, pol, r, lg = cfg.env, cfg.ppo, cfg.policy, cfg.run, cfg.league
    finite = math.isfinite
    rules = [
        ("env.id", e.id, bool(e.id), "a registered env id (nitro envs lists them)"),
        ("env.num_envs", e.num_envs, e.num_envs >= 1, "an int >= 1"),
        ("ppo.total_steps", p.total_steps, p.total_steps >= 1, "an int >= 1 (env steps to train for)"),
        ("ppo.num_steps", p.num_steps, p.num_steps >= 1, "an int >= 1 (rollout length, e.g. 32)"),
        ("ppo.epochs", p.epochs, p.epochs >= 1, "an int >= 1 (e.g. 4)"),
        ("ppo.minibatches", p.minibatches, p.minibatches >= 1, "an int >= 1 (e.g. 4)"),
        ("ppo.lr", p.lr, finite(p.lr) and p.lr > 0, "a number > 0 (e.g. 3e-4)"),
        ("ppo.adam_eps", p.adam_eps, finite(p.adam_eps) and p.adam_eps > 0, "a number > 0 (e.g. 1e-5)"),
        ("ppo.gamma", p.gamma, 0 <= p.gamma <= 1, "in [0, 1] (e.g. 0.99)"),
        ("ppo.gae_lambda", p.gae_lambda, 0 <= p.gae_lambda <= 1, "in [0, 1] (e.g. 0.95)"),
        ("ppo.clip_coef", p.clip_coef, finite(p.clip_coef) and p.clip_coef > 0, "a number > 0 (e.g. 0.2)"),
        ("ppo.vf_coef", p.vf_coef, finite(p.vf_coef) and p.vf_coef >= 0, "a number >= 0 (e.g. 0.5)"),
        ("ppo.ent_coef", p.ent_coef, finite(p.ent_coef) and p.ent_coef >= 0, "a number >= 0 (e.g. 0.01)"),
        ("ppo.max_grad_norm", p.max_grad_norm, finite(p.max_grad_norm) and p.max_grad_norm > 0,
         "a number > 0 (e.g. 0.5)"),
        ("ppo.target_return", p.target_return, p.target_return is None or finite(p.target_return),
         "a finite number or none"),
        ("ppo.target_episodes", p.target_episodes, p.target_episodes >= 1, "an int >= 1 (e.g. 100)"),
        ("policy.hidden", pol.hidden, all(isinstance(w, int) and not isinstance(w, bool) and w >= 1
                                          for w in pol.hidden), "a list of layer widths >= 1, e.g. [64, 64]"),
        ("policy.lstm", pol.lstm, pol.lstm >= 0, "an int >= 0 (0: no LSTM)"),
        ("policy.bptt", pol.bptt, pol.bptt >= 1, "an int >= 1 (e.g. 16)"),
        ("policy.init_log_std", pol.init_log_std, finite(pol.init_log_std), "a finite number (e.g. 0.0)"),
        ("run.dir", r.dir, bool(r.dir), "a folder, e.g. runs"),
        ("run.name", r.name, "/" not in r.name and "\\" not in r.name and r.name not in (".", ".."),
         "a plain folder name (no path separators), or empty for <env>-<time>"),
        ("run.log_every", r.log_every, r.log_every >= 1, "an int >= 1 (updates between logs)"),
        ("run.checkpoint_every", r.checkpoint_every, r.checkpoint_every >= 1,
         "an int >= 1 (updates between checkpoints; a large number checkpoints rarely)"),
        ("run.checkpoint_seconds", r.checkpoint_seconds, finite(r.checkpoint_seconds) and r.checkpoint_seconds >= 0,
         "a number of seconds >= 0 (0: no time-based checkpoints)"),
        ("run.keep_last", r.keep_last, r.keep_last >= 1, "an int >= 1 (checkpoints kept besides best)"),
        ("run.threads", r.threads, r.threads >= 0, "an int >= 0 (0: PyTorch's default)"),
        ("league.pool_size", lg.pool_size, lg.pool_size >= 0, "an int >= 0 (0: no snapshots)"),
        ("league.add_every", lg.add_every, lg.add_every >= 1, "an int >= 1 (updates between snapshots)"),
        ("league.update_every", lg.update_every, lg.update_every >= 1, "an int >= 1 (updates between league steps)"),
        ("league.pfsp_power", lg.pfsp_power, finite(lg.pfsp_power) and lg.pfsp_power >= 0, "a number >= 0 (e.g. 2)"),
        ("league.score_decay", lg.score_decay, finite(lg.score_decay) and 0 <= lg.score_decay < 1,
         "a number in [0, 1) (e.g. 0.9)"),
        ("league.elo_k", lg.elo_k, finite(lg.elo_k) and lg.elo_k > 0, "a number > 0 (e.g. 8)"),
        ("league.rated_games", lg.rated_games, lg.rated_games >= 1, "an int >= 1 (e.g. 512)"),
        ("league.dense_reward", lg.dense_reward, finite(lg.dense_reward), "a finite number (e.g. 1.0)"),
        ("league.outcome_reward", lg.outcome_reward, finite(lg.outcome_reward), "a finite number (e.g. 0.0)"),
        ("league.bots", lg.bots, all(isinstance(b, str) for b in lg.bots), "a list of bot names, e.g. [random]"),
        ("monitor.replay_every", cfg.monitor.replay_every, cfg.monitor.replay_every >= 0,
         "an int >= 0 (updates between replays; 0: none)"),
        ("monitor.replay_envs", cfg.monitor.replay_envs,
         bool(cfg.monitor.replay_envs) and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < e.num_envs
                                               for i in cfg.monitor.replay_envs),
         f"a non-empty list of env indices in [0, env.num_envs={e.num_envs}), e.g. [0, 1]"),
    ]
    for key, value, ok, want in rules:
        if not ok:
            raise ConfigError(f"{key}={value!r}: must be {want}")
    choices = {"ppo.lr_schedule": (p.lr_schedule, ("linear", "constant")),
               "policy.activation": (pol.activation, ("tanh", "relu", "elu", "gelu", "silu")),
               "policy.log_std": (pol.log_std, ("state_independent", "state_dependent")),
               "policy.fused": (pol.fused, ("auto", "true", "false")),
               "run.precision": (r.precision, ("fp32", "bf16")),
               "run.compile": (r.compile, ("auto", "true", "false")),
               "run.graph": (r.graph, ("auto", "true", "false")),
               "league.drop": (cfg.league.drop, ("oldest", "weakest")),
               "league.matchmaking": (cfg.league.matchmaking, ("uniform", "pfsp", "even")),
               "league.opponent_eval": (cfg.league.opponent_eval, ("bmm", "vmap")),
               "monitor.render": (cfg.monitor.render, ("none", "rlviser", "rocketsimvis"))}
    for name, (value, allowed) in choices.items():
        if value not in allowed:
            raise ConfigError(f"{name}={value!r}; choose one of {', '.join(allowed)}")
    if lg.add_every % lg.update_every:
        raise ConfigError(f"league.add_every={lg.add_every} must be a multiple of league.update_every="
                          f"{lg.update_every} (snapshots join at league steps)")
    _check_heads(pol)
    if p.decisions and pol.lstm:
        raise ConfigError(f"ppo.decisions=true packs each seat's decisions without the steps between them, "
                          f"which an LSTM (policy.lstm={pol.lstm}) runs over; set policy.lstm=0 or "
                          "ppo.decisions=false")
    if pol.lstm and p.num_steps % pol.bptt:
        raise ConfigError(f"policy.bptt={pol.bptt} must divide ppo.num_steps={p.num_steps}")
    # minibatches are sets of whole sequences: env columns of length T, or BPTT chunks with an LSTM
    sequences = e.num_envs * (p.num_steps // pol.bptt) if pol.lstm else e.num_envs
    if sequences % p.minibatches:
        what = "env.num_envs * (ppo.num_steps / policy.bptt)" if pol.lstm else "env.num_envs"
        raise ConfigError(f"{what} = {sequences} is not divisible by ppo.minibatches={p.minibatches} (a "
                          f"minibatch is a set of whole {'BPTT chunks' if pol.lstm else 'env rollouts'}); "
                          f"{_minibatch_fix(sequences, p.minibatches, what)}")
    per_update = e.num_envs * p.num_steps
    if p.total_steps < per_update:
        raise ConfigError(f"ppo.total_steps={p.total_steps} is less than one update (env.num_envs * "
                          f"ppo.num_steps = {per_update}); use ppo.total_steps={per_update} or more")
    from nitro.core.registry import make_env

    env = make_env(e.id, **e.params)  # unknown ids and params raise here, listing the valid ones
    n = getattr(env.action_space, "n", None)
    if pol.heads and n is None:
        raise ConfigError(f"policy.heads needs Discrete actions; {e.id} acts in {env.action_space}: remove "
                          "policy.heads")
    for name, (start, stop) in pol.heads.items():
        if stop > n:
            raise ConfigError(f"policy.heads.{name}=[{start}, {stop}] reaches past {e.id}'s {n} actions; use "
                              f"ranges within [0, {n}]")
    _check_league(cfg, env, make_env)


def _check_heads(pol: PolicyConfig) -> None:
    """policy.heads: named, disjoint [start, stop) ranges, on a plain feed-forward actor."""
    spans = []
    for name, span in pol.heads.items():
        if not (isinstance(span, list) and len(span) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                  for x in span) and 0 <= span[0] < span[1]):
            raise ConfigError(f"policy.heads.{name}={span!r} must be [start, stop] with 0 <= start < stop "
                              "(a range of action ids), e.g. [75, 86]")
        spans.append((span[0], span[1], name))
    spans.sort()
    for (_, stop, a), (start, _, b) in zip(spans, spans[1:]):
        if start < stop:
            raise ConfigError(f"policy.heads.{a} and policy.heads.{b} overlap; give each action to one head")
    clashes = {"policy.layer_norm": (pol.layer_norm, "false"), "policy.lstm": (pol.lstm, "0"),
               "policy.fused": (pol.fused == "true", "auto")}
    for key, (bad, fix) in clashes.items():
        if pol.heads and bad:
            raise ConfigError(f"{key} does not go with policy.heads (the towers run as one block-diagonal "
                              f"feed-forward MLP); set {key}={fix} or drop policy.heads")


def _check_league(cfg: TrainConfig, env, make_env) -> None:
    """The league and the curriculum against the env: a multi-agent env, its bots, valid mixes, and every
    stage's env params."""
    lg, stages = cfg.league, cfg.curriculum.stages
    check_mix(lg.mix, "league.mix")
    used = [(k, v) for k, v in (("league.pool_size", lg.pool_size), ("league.bots", lg.bots),
                                ("curriculum.stages", stages)) if v]
    if used and env.num_agents == 1:
        raise ConfigError(f"{used[0][0]}={used[0][1]!r} needs a multi-agent env, and {cfg.env.id} has one agent "
                          f"per env; remove {', '.join(k for k, _ in used)}")
    bots = sorted(env.bots())
    for b in lg.bots:
        if b not in bots:
            raise ConfigError(f"league.bots has {b!r}, which {cfg.env.id} does not offer; its bots: "
                              f"{', '.join(bots) or 'none'}")
    try:
        parsed = curriculum.parse(stages)
    except curriculum.StageError as err:
        raise ConfigError(str(err)) from None
    opponents = lg.pool_size > 0 or bool(lg.bots)
    for where, mix in [("league.mix", lg.mix)] + [(f"curriculum.stages[{i}].mix", s.mix) for i, s in enumerate(parsed)
                                                  if s.mix is not None]:
        check_mix(mix, where, bots)
        if where != "league.mix" and not opponents:
            raise ConfigError(f"{where}={mix} sets the opponent mix of a league that has no opponents: set "
                              "league.pool_size > 0 or league.bots")
    for i in range(len(parsed)):
        params = {**cfg.env.params, **curriculum.settings(parsed, i)[0]}
        try:
            make_env(cfg.env.id, **params)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"curriculum.stages[{i}].env: {err}") from None


def check_mix(mix: dict, where: str, bots: list[str] | None = None) -> None:
    """An opponent mix: shares >= 0 of self, pool and (when ``bots`` is given) the env's bots."""
    allowed = ["self", "pool", *(bots or [])]
    for k, v in mix.items():
        if bots is not None and k not in allowed:
            raise ConfigError(f"{where} has {k!r}; its keys are {', '.join(allowed)}")
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            raise ConfigError(f"{where}.{k}={v!r} must be a number >= 0 (a share of new games)")
    if sum(mix.values()) <= 0:
        raise ConfigError(f"{where}={mix} must give some games a positive share, e.g. {{self: 0.5, pool: 0.5}}")


def _check_types(cfg: TrainConfig) -> None:
    """Every field holds its declared type (configs built in Python skip ``apply``'s conversion)."""
    for section in dataclasses.fields(cfg):
        sub = getattr(cfg, section.name)
        for name, tp in typing.get_type_hints(type(sub)).items():
            value = getattr(sub, name)
            if not _is_instance(value, tp):
                raise ConfigError(f"{section.name}.{name}: expected {getattr(tp, '__name__', tp)}, got {value!r}")


def _is_instance(value: Any, tp: Any) -> bool:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return any(_is_instance(value, a) for a in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp in (int, float):  # an int is a valid float; a bool is neither
        return isinstance(value, (int, float) if tp is float else int) and not isinstance(value, bool)
    return isinstance(value, typing.get_origin(tp) or tp)


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
