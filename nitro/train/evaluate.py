"""Load a trained policy from a run directory and measure it: its returns (single-agent envs), or its
results in one seat against each of the env's bots (multi-agent envs)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import torch

from nitro.core import agents, rng, tree
from nitro.core.env import autoreset_step
from nitro.core.registry import make_env, spec
from nitro.train import checkpoint
from nitro.train.checkpoint import load_meta as checkpoint_meta
from nitro.train.config import from_dict
from nitro.train.optim import RunningMeanStd
from nitro.train.policy import ActorCritic


def checkpoint_path(run: str | Path, which: str = "best") -> Path:
    """The checkpoint file ``which`` (best | latest | a file path) of a run."""
    return {"best": checkpoint.best, "latest": checkpoint.latest}.get(which, lambda r: Path(which))(Path(run))


def game_params(env_id: str) -> dict:
    """The env params of the whole games an env's evaluations play (its class's ``GAME_PARAMS``, e.g.
    soccar's 5-minute games with kickoffs after goals), or none."""
    return dict(getattr(spec(env_id).load(), "GAME_PARAMS", {}))


def load_policy(run: str | Path, which: str = "best", device: str = "cpu", env_params: dict | None = None,
                games: bool = False):
    """(config, env, policy, obs_rms or None) of a run; ``which`` is best | latest | a file path;
    ``env_params`` change the env's params (e.g. whole games instead of the single rounds trained on),
    on top of the env's `game_params` when ``games``."""
    tensors, meta = checkpoint.load(checkpoint_path(run, which), device)
    cfg = from_dict(meta["config"])
    env = make_env(cfg.env.id, **{**cfg.env.params, **(game_params(cfg.env.id) if games else {}),
                                  **(env_params or {})})
    # the fused trunk only speeds up training: its parameters load into the plain trunk, which runs anywhere
    plain = dataclasses.replace(cfg.policy, fused="false")
    policy = ActorCritic(env.observation_space.shape[0], env.action_space, plain).to(device)
    policy.load_state_dict({k[len("policy."):]: v for k, v in tensors.items() if k.startswith("policy.")})
    policy.eval()
    rms = None
    if cfg.ppo.obs_norm:
        rms = RunningMeanStd(env.observation_space.shape, device)
        rms.mean.copy_(tensors["obs_rms.mean"])
        rms.var.copy_(tensors["obs_rms.var"])
    return cfg, env, policy, rms


@torch.no_grad()
def evaluate(run: str | Path, episodes: int = 100, deterministic: bool = True, checkpoint: str = "best",
             device: str = "auto", seed: int = 12345, max_steps: int = 100_000, env_params: dict | None = None,
             watch=None) -> dict:
    """Play ``episodes`` episodes (one per env, in parallel) and summarize their returns; the result also
    holds each episode's return and length and which checkpoint (update, global step) played.

    ``watch(env, state)``, if given, is called once with the first state and returns an object whose
    ``capture(state, first)`` sees the state before every step (`nitro.monitor.watch.EvalWatch`)."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    cfg, env, policy, rms = load_policy(run, checkpoint, device, env_params)
    if env.num_agents > 1:
        raise ValueError(f"{cfg.env.id} is a {env.num_agents}-agent env: measure its policy against the env's bots "
                         f"with evaluate_vs_bots, or against other policies with nitro tournament {run} --bots "
                         f"{' '.join(env.bots()) or '...'}")
    keys = rng.env_keys(rng.key(seed, device), episodes)
    state = env.reset(rng.fold_in(keys, 0), episodes, torch.device(device))
    obs = env.observe(state).float()
    hidden = policy.initial_hidden(episodes, device)
    first = torch.ones(episodes, dtype=torch.bool, device=device)
    returns = torch.zeros(episodes, device=device)
    lengths = torch.zeros(episodes, dtype=torch.int64, device=device)
    running = torch.ones(episodes, dtype=torch.bool, device=device)
    watcher = watch(env, state) if watch is not None else None
    for t in range(max_steps):
        if watcher is not None:
            watcher.capture(state, first)
        k = rng.fold_in(keys, t + 1)
        out, _, hidden = policy(rms.normalize(obs) if rms else obs, hidden, first)
        mask = env.action_mask(state)
        if mask is not None:
            out = policy.dist.mask_logits(out, mask)
        action = policy.dist.mode(out) if deterministic else policy.dist.sample(
            out, policy.dist.noise(rng.fold_in(k, 1), episodes))
        tr = autoreset_step(env, state, policy.dist.to_env(action), rng.fold_in(k, 2))
        returns += tr.reward.float() * running
        lengths += running.long()
        running &= ~(tr.terminated | tr.truncated)
        state, obs, first = tr.state, tr.obs.float(), tr.terminated | tr.truncated
        if t % 64 == 63 and not bool(running.any()):  # evaluation, not the hot loop: sync sparingly
            break
    if bool(running.any()):
        raise RuntimeError(f"{int(running.sum())} episodes did not end within {max_steps} steps")
    r, lengths = returns.cpu(), lengths.cpu()  # sync-ok: the results, once, after the episodes
    path = checkpoint_path(run, checkpoint)
    meta = checkpoint_meta(path)
    # sync-ok below: r and lengths are host copies already
    return {"episodes": episodes, "deterministic": deterministic, "mean_return": r.mean().item(),  # sync-ok
            "std_return": r.std().item() if episodes > 1 else 0.0, "min_return": r.min().item(),  # sync-ok
            "max_return": r.max().item(), "mean_length": lengths.float().mean().item(), "env": cfg.env.id,  # sync-ok
            "update": meta.get("update"), "global_step": meta.get("global_step"), "checkpoint": str(path),
            "returns": r.tolist(), "lengths": lengths.tolist()}  # sync-ok


Z95 = 1.959964
"""Two-sided 95% normal quantile (the intervals below are mean +- Z95 * standard error over games)."""


def _mean_ci(x: torch.Tensor) -> tuple[float, float]:
    n = x.numel()
    half = Z95 * float(x.std()) / math.sqrt(n) if n > 1 else float("nan")  # sync-ok: a summary
    return float(x.mean()), half  # sync-ok


@dataclasses.dataclass
class Games:
    """What a batch of games carries from one step to the next (`play_vs_bot`)."""

    state: object
    t: torch.Tensor
    """Steps played [] int64 (each step's random key folds it in)."""
    running: torch.Tensor
    """[G] the game has not ended yet."""
    ep_return: torch.Tensor
    """[G * A] reward summed over each game so far."""
    final: dict
    """Per statistic (result and episode_stats), each agent's value at the end of its game [G * A]."""
    learner: torch.Tensor
    """[G * A] the rows the learner drives (static)."""


def play_vs_bot(env, actor, bot, games: int, keys: torch.Tensor, device, max_steps: int,
                graph: bool = False, steps_per_replay: int = 32) -> Games:
    """``games`` games, one per env: ``actor(state, key) -> actions [G * A]`` on the learner's rows (team
    g % T of game g) and ``bot(state, key)`` on the others, until every game has ended once.
    With ``graph`` (CUDA), ``steps_per_replay`` steps are captured in one CUDA graph and replayed (no
    launch overhead; the carry is updated in place); else eager. Looks for the end once per replay (a
    host sync), or every step on the CPU."""
    a, teams = env.num_agents, agents.num_teams(env)
    learner = torch.tensor(env.agent_team, device=device).repeat(games) == \
        (torch.arange(games, device=device) % teams).repeat_interleave(a)
    state = env.reset(rng.fold_in(keys, 0), games, torch.device(device))
    probe = {"result": env.result(state), **env.episode_stats(state)}
    zeros = torch.zeros(games * a, device=device)
    carry = Games(state, torch.zeros((), dtype=torch.int64, device=device), torch.ones(games, dtype=torch.bool,
                  device=device), zeros.clone(), {k: zeros.clone() for k, v in probe.items() if v is not None}, learner)

    def step(c: Games) -> Games:
        k = rng.fold_in(keys, c.t + 1)
        action = torch.where(learner, actor(c.state, rng.fold_in(k, 1)), bot(c.state, rng.fold_in(k, 2)))
        tr = autoreset_step(env, c.state, action, rng.fold_in(k, 3))
        ending = c.running & (tr.terminated | tr.truncated)
        rows = agents.per_agent(ending, a)
        stats = {"result": env.result(tr.final_state), **env.episode_stats(tr.final_state)}
        final = {key: torch.where(rows, stats[key].float(), value) for key, value in c.final.items()}
        return Games(tr.state, c.t + 1, c.running & ~ending,
                     c.ep_return + tr.reward.float() * agents.per_agent(c.running, a), final, learner)

    run = step
    if graph:
        run = _captured(step, carry, steps_per_replay)
        carry = run.carry
    per_call = steps_per_replay if graph else (1 if torch.device(device).type == "cpu" else 64)
    for _ in range(0, max_steps, per_call):
        if graph:
            run()
        else:
            for _ in range(per_call):
                carry = step(carry)
        if not bool(carry.running.any()):  # sync-ok: an evaluation, not a training loop
            break
    if bool(carry.running.any()):  # sync-ok
        raise RuntimeError(f"{int(carry.running.sum())} games did not end within {max_steps} steps")  # sync-ok
    return carry


class _captured:
    """``steps`` calls of ``step`` over a carry captured in one CUDA graph (eager ops, no compile): a
    call replays them, updating ``self.carry`` in place."""

    def __init__(self, step, carry, steps: int):
        self.carry = tree.clone(carry)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # allocator warm-up outside the capture
            c = tree.clone(carry)
            for _ in range(2):
                c = step(c)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            c = self.carry
            for _ in range(steps):
                c = step(c)
            tree.copy_(self.carry, c)

    def __call__(self):
        self.graph.replay()
        return self.carry


@torch.no_grad()
def evaluate_vs_bots(run: str | Path, bots: list[str] | None = None, games: int = 1024, deterministic: bool = True,
                     checkpoint: str = "latest", device: str = "auto", seed: int = 12345,
                     env_params: dict | None = None, max_steps: int = 100_000, graph: str = "auto") -> dict:
    """A multi-agent run's policy on one team (team g % T of game g: one seat in a free-for-all) and a bot
    in every other seat, ``games`` games per bot (default: every bot of the env), all at once, in the
    env's whole games (`game_params`, then ``env_params``). Per bot: the policy's win rate (the top
    ``env.result``, ties shared) and its wins, draws (the top shared with other teams) and losses,
    mean result, result margin (its team's mean result minus the other seats' mean in the same game),
    mean return and the env's ``episode_stats``, each with the half-width of its 95% confidence
    interval over games; and the env params played and the checkpoint's update and step. ``graph``:
    replay the steps from CUDA graphs (auto: on CUDA where the env is `capturable`, eagerly where capturing
    fails, noted in the result; `play_vs_bot`)."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    cfg, env, policy, rms = load_policy(run, checkpoint, device, env_params, games=True)
    if policy.recurrent:
        raise ValueError(f"{run} has an LSTM policy; evaluating against bots needs a feed-forward one (policy.lstm=0)")
    if graph not in ("auto", "true", "false"):
        raise ValueError(f"graph must be auto, true or false, got {graph!r}")
    graphed = graph == "true" or (graph == "auto" and torch.device(device).type == "cuda" and env.capturable)
    a = env.num_agents
    known = env.bots()
    bots = list(known) if bots is None else bots
    for b in bots:
        if b not in known:
            raise ValueError(f"{cfg.env.id} has no bot {b!r}; its bots: {', '.join(sorted(known)) or 'none'}")
    meta = checkpoint_meta(checkpoint_path(run, checkpoint))
    played = {k: v if isinstance(v, (str, int, float, bool, type(None))) else repr(v)
              for k, v in {**cfg.env.params, **game_params(cfg.env.id), **(env_params or {})}.items()}
    out = {"env": cfg.env.id, "games": games, "deterministic": deterministic, "env_params": played,
           "update": meta.get("update"), "global_step": meta.get("global_step"),
           "checkpoint": str(checkpoint_path(run, checkpoint)), "graph": graphed, "opponents": {}}

    def actor(state, key):
        obs = env.observe(state).float()
        logits = policy.dist.mask_logits(policy.actor(rms.normalize(obs) if rms else obs), env.action_mask(state))
        if deterministic:
            return policy.dist.to_env(policy.dist.mode(logits))
        return policy.dist.to_env(policy.dist.sample(logits, policy.dist.noise(agents.row_keys(key, a), games * a)))

    for i, name in enumerate(bots):
        keys = rng.env_keys(rng.key(seed + i, device), games)
        try:
            played_games = play_vs_bot(env, actor, known[name], games, keys, device, max_steps, graphed)
        except RuntimeError as error:  # an env whose step cannot be captured: auto plays it eagerly
            if graph != "auto" or not graphed:
                raise
            out["graph"], graphed = False, False
            out["graph_error"] = " ".join(str(error).split())[:500]
            played_games = play_vs_bot(env, actor, known[name], games, keys, device, max_steps, False)
        out["opponents"][name] = summarize_games(played_games, games, a)
    return out


def summarize_games(g: Games, games: int, num_agents: int) -> dict:
    """The learner's win rate, wins, draws, losses, result margin, return and final statistics, each a
    mean over games with its 95% interval (team statistics: the mean over the learner's cars)."""
    standing = g.final.get("result", g.ep_return).view(games, num_agents)
    learner = g.learner.view(games, num_agents)
    top = standing == standing.max(1, keepdim=True).values
    mine = (top & learner).sum(1)
    won, shared = (mine > 0) & (mine == top.sum(1)), (mine > 0) & (mine < top.sum(1))
    margin = standing[learner].view(games, -1).mean(1) - standing[~learner].view(games, -1).mean(1)
    row = {"win_rate": mine / top.sum(1), "wins": won, "draws": shared, "losses": mine == 0, "result_margin": margin,
           "return": g.ep_return[g.learner].view(games, -1).mean(1)}
    row.update({k: v[g.learner].view(games, -1).mean(1) for k, v in g.final.items()})  # per game: the team's mean
    summary = {}
    for key, values in row.items():
        summary[key], summary[key + "_ci95"] = _mean_ci(values.float())
    return summary
