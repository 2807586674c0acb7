"""Load a trained policy from a run directory and measure its returns."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from nitro.core import rng
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


def load_policy(run: str | Path, which: str = "best", device: str = "cpu"):
    """(config, env, policy, obs_rms or None) of a run; ``which`` is best | latest | a file path."""
    tensors, meta = checkpoint.load(checkpoint_path(run, which), device)
    cfg = from_dict(meta["config"])
    env = make_env(cfg.env.id, **cfg.env.params)
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
             device: str = "auto", seed: int = 12345, max_steps: int = 100_000, watch=None) -> dict:
    """Play ``episodes`` episodes (one per env, in parallel) and summarize their returns; the result also
    holds each episode's return and length and which checkpoint (update, global step) played.

    ``watch(env, state)``, if given, is called once with the first state and returns an object whose
    ``capture(state, first)`` sees the state before every step (`nitro.monitor.watch.EvalWatch`)."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    cfg, env, policy, rms = load_policy(run, checkpoint, device)
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
