"""Load a trained policy from a run directory and measure it: its returns (single-agent envs), or its
results in one seat against each of the env's bots (multi-agent envs)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import torch

from nitro.core import agents, rng
from nitro.core.env import autoreset_step
from nitro.core.registry import make_env
from nitro.train import checkpoint
from nitro.train.checkpoint import load_meta as checkpoint_meta
from nitro.train.config import from_dict
from nitro.train.optim import RunningMeanStd
from nitro.train.policy import ActorCritic


def checkpoint_path(run: str | Path, which: str = "best") -> Path:
    """The checkpoint file ``which`` (best | latest | a file path) of a run."""
    return {"best": checkpoint.best, "latest": checkpoint.latest}.get(which, lambda r: Path(which))(Path(run))


def load_policy(run: str | Path, which: str = "best", device: str = "cpu", env_params: dict | None = None):
    """(config, env, policy, obs_rms or None) of a run; ``which`` is best | latest | a file path;
    ``env_params`` change the env's params (e.g. whole games instead of the single rounds trained on)."""
    tensors, meta = checkpoint.load(checkpoint_path(run, which), device)
    cfg = from_dict(meta["config"])
    env = make_env(cfg.env.id, **{**cfg.env.params, **(env_params or {})})
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
    r = returns.cpu()
    path = checkpoint_path(run, checkpoint)
    meta = checkpoint_meta(path)
    return {"episodes": episodes, "deterministic": deterministic, "mean_return": r.mean().item(),
            "std_return": r.std().item() if episodes > 1 else 0.0, "min_return": r.min().item(),
            "max_return": r.max().item(), "mean_length": lengths.float().mean().item(), "env": cfg.env.id,
            "update": meta.get("update"), "global_step": meta.get("global_step"), "checkpoint": str(path),
            "returns": r.tolist(), "lengths": lengths.cpu().tolist()}


Z95 = 1.959964
"""Two-sided 95% normal quantile (the intervals below are mean +- Z95 * standard error over games)."""


def _mean_ci(x: torch.Tensor) -> tuple[float, float]:
    n = x.numel()
    half = Z95 * float(x.std()) / math.sqrt(n) if n > 1 else float("nan")  # sync-ok: a summary
    return float(x.mean()), half  # sync-ok


@torch.no_grad()
def evaluate_vs_bots(run: str | Path, bots: list[str] | None = None, games: int = 1024, deterministic: bool = True,
                     checkpoint: str = "latest", device: str = "auto", seed: int = 12345,
                     env_params: dict | None = None, max_steps: int = 100_000) -> dict:
    """A multi-agent run's policy in one seat (seat g % A of game g) and a bot in every other seat, ``games``
    games per bot (default: every bot of the env), all at once. Per bot: the policy's win rate (the top
    ``env.result``, ties shared), mean result, result margin (its result minus the mean of the other seats'
    in the same game), mean return and the env's ``episode_stats``, each with the half-width of its 95%
    confidence interval over games."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    cfg, env, policy, rms = load_policy(run, checkpoint, device, env_params)
    if policy.recurrent:
        raise ValueError(f"{run} has an LSTM policy; evaluating against bots needs a feed-forward one (policy.lstm=0)")
    a = env.num_agents
    known = env.bots()
    bots = list(known) if bots is None else bots
    for b in bots:
        if b not in known:
            raise ValueError(f"{cfg.env.id} has no bot {b!r}; its bots: {', '.join(sorted(known)) or 'none'}")
    out = {"env": cfg.env.id, "games": games, "deterministic": deterministic, "opponents": {}}
    for i, name in enumerate(bots):
        n = games
        keys = rng.env_keys(rng.key(seed + i, device), n)
        state = env.reset(rng.fold_in(keys, 0), n, torch.device(device))
        learner = agents.seats(n, a, device) == (torch.arange(n, device=device) % a).repeat_interleave(a)
        running = torch.ones(n, dtype=torch.bool, device=device)
        ep_return = torch.zeros(n * a, device=device)
        final = {}
        for t in range(max_steps):
            k = rng.fold_in(keys, t + 1)
            obs = env.observe(state).float()
            logits = policy.dist.mask_logits(policy.actor(rms.normalize(obs) if rms else obs), env.action_mask(state))
            mine = policy.dist.mode(logits) if deterministic else policy.dist.sample(
                logits, policy.dist.noise(agents.row_keys(rng.fold_in(k, 1), a), n * a))
            action = torch.where(learner, policy.dist.to_env(mine), known[name](state, rng.fold_in(k, 2)))
            tr = autoreset_step(env, state, action, rng.fold_in(k, 3))
            ending = running & (tr.terminated | tr.truncated)
            ep_return = ep_return + tr.reward.float() * agents.per_agent(running, a)
            rows = agents.per_agent(ending, a)
            stats = {"result": env.result(tr.final_state), **env.episode_stats(tr.final_state)}
            for key, value in stats.items():
                if value is not None:
                    final[key] = torch.where(rows, value.float(), final.get(key, torch.zeros(n * a, device=device)))
            running = running & ~ending
            state = tr.state
            if t % 64 == 63 and not bool(running.any()):  # sync-ok: an evaluation, not a training loop
                break
        if bool(running.any()):  # sync-ok
            raise RuntimeError(f"{int(running.sum())} games did not end within {max_steps} steps")  # sync-ok
        standing = final.get("result", ep_return).view(n, a)
        top = standing == standing.max(1, keepdim=True).values
        mine = standing[learner.view(n, a)]
        row = {"win_rate": (top & learner.view(n, a)).sum(1) / top.sum(1), "return": ep_return[learner],
               "result_margin": mine - (standing.sum(1) - mine) / (a - 1)}
        row.update({k: v[learner] for k, v in final.items()})
        summary = {}
        for key, values in row.items():
            summary[key], summary[key + "_ci95"] = _mean_ci(values.float())
        out["opponents"][name] = summary
    return out
