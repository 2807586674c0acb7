"""Round-robin tournaments on the device: every pair of players meets in ``games`` games at once, in one
batch, and the results become a Bradley-Terry Elo table with bootstrap confidence intervals.

Players are trained policies (a run's checkpoint, and optionally the league snapshots stored in it) and
the env's scripted bots. Policies of one architecture are stacked (``nitro.train.opponents.PolicyStack``)
and evaluated together on every row; each row then takes its own player's output. In a game of pair
(i, j) player i drives one team (the first team in half the games, the others in turn) and j every
other seat; its score is the learner score of ``Seating.scores`` (1 win, 0.5 draw, 0 loss).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from nitro.core import agents, rng, tree
from nitro.core.env import autoreset_step
from nitro.core.registry import make_env
from nitro.train import checkpoint
from nitro.train.config import PolicyConfig, from_dict
from nitro.train.opponents import PolicyStack, Seating
from nitro.train.policy import ActorCritic
from nitro.train.ratings import bootstrap_intervals, wilson


@dataclass
class Player:
    name: str
    state: dict | None = None
    """A policy's actor tensors by the learner's parameter names (None for a bot)."""
    policy_cfg: PolicyConfig | None = None
    obs_mean: torch.Tensor | None = None
    obs_var: torch.Tensor | None = None
    bot: Callable | None = None


def checkpoint_players(target: str | Path, pool: bool = False, device="cpu") -> tuple[dict, list[Player]]:
    """(the run's config as a dict, players) of a run directory (its latest checkpoint) or a checkpoint
    file: the policy, named after the run and update, and with ``pool`` the league snapshots stored in
    the checkpoint."""
    path = Path(target)
    if path.is_dir():
        path = checkpoint.latest(path)
    tensors, meta = checkpoint.load(path, device)
    cfg = from_dict(meta["config"])
    run = path.parent.parent.name
    norm = cfg.ppo.obs_norm
    policy = {k[len("policy."):]: v for k, v in tensors.items() if k.startswith("policy.")}
    players = [Player(f"{run}@{meta['update']}", policy, cfg.policy, tensors["obs_rms.mean"] if norm else None,
                      tensors["obs_rms.var"] if norm else None)]
    if pool:
        if "league" not in meta:
            raise ValueError(f"{path} holds no league pool (it was trained without league.pool_size); drop --pool")
        for slot, name in enumerate(meta["league"]["slots"]):
            if name is None:
                continue
            state = {k[len("pool.param."):]: v[slot] for k, v in tensors.items() if k.startswith("pool.param.")}
            players.append(Player(f"{run}:{name}", state, cfg.policy, tensors["pool.obs_mean"][slot] if norm else None,
                                  tensors["pool.obs_var"][slot] if norm else None))
    return meta["config"], players


def play(env, players: list[Player], games: int, device="cpu", seed: int = 0, max_steps: int = 100_000
         ) -> np.ndarray:
    """Results ``[P, P, 3]``: player i's wins, draws and losses against j, from ``games`` games per
    ordered pair (i driving one team, j the rest), all played at once on ``device``."""
    device = torch.device(device)
    p = len(players)
    pairs = [(i, j) for i in range(p) for j in range(p) if i != j]
    if not pairs or games < 1:
        raise ValueError(f"a tournament needs two or more players and games >= 1, got {p} players, games={games}")
    n = len(pairs) * games
    seating = Seating(env, n, True, device)
    a = env.num_agents
    first = torch.tensor([i for i, _ in pairs], device=device).repeat_interleave(games)
    second = torch.tensor([j for _, j in pairs], device=device).repeat_interleave(games)
    team = torch.arange(n, device=device) % seating.num_teams  # the team ``first`` drives, in turn
    row_player = torch.where(seating.team_of_row == team.repeat_interleave(a), first.repeat_interleave(a),
                             second.repeat_interleave(a))
    groups = _stacks(env, players, device)
    keys = rng.env_keys(rng.key(seed, device), n)
    state = env.reset(rng.fold_in(keys, 0), n, device)
    obs = env.observe(state).float()
    running = torch.ones(n, dtype=torch.bool, device=device)
    score = torch.zeros(n, device=device)
    ep_return = torch.zeros(n * a, device=device)
    with torch.no_grad():
        for t in range(max_steps):
            k = rng.fold_in(keys, t + 1)
            action = _actions(env, players, groups, state, obs, row_player, agents.row_keys(rng.fold_in(k, 1), a),
                              rng.fold_in(k, 2))
            tr = autoreset_step(env, state, action, rng.fold_in(k, 3))
            done = tr.terminated | tr.truncated
            ep_return = ep_return + tr.reward.float()
            standing = env.result(tr.final_state)
            game = seating.scores(ep_return if standing is None else standing).gather(1, team[:, None]).squeeze(1)
            score = torch.where(running & done, game, score)
            running = running & ~done
            ep_return = ep_return * ~agents.per_agent(done, a)
            state, obs = tr.state, tr.obs.float()
            if t % 64 == 63 and not bool(running.any()):  # sync-ok: a tournament, not a training loop
                break
    if bool(running.any()):  # sync-ok
        raise RuntimeError(f"{int(running.sum())} games did not end within {max_steps} steps")  # sync-ok
    results = np.zeros((p, p, 3))
    wdl = torch.stack([score > 0.5, score == 0.5, score < 0.5], 1).double()
    flat = torch.zeros(p * p, 3, dtype=torch.float64, device=device).index_add_(0, first * p + second, wdl)
    results[:] = flat.view(p, p, 3).cpu().numpy()  # sync-ok: once, at the end
    return results


def _stacks(env, players: list[Player], device) -> list[tuple[PolicyStack, list[int]]]:
    """One stack per policy architecture: (stack, the player index of each of its slots)."""
    groups: dict = {}
    for i, pl in enumerate(players):
        if pl.bot is None:
            key = (repr(dataclasses.replace(pl.policy_cfg, fused="false", bptt=16)), pl.obs_mean is not None)
            groups.setdefault(key, []).append(i)
    out = []
    obs_dim = env.observation_space.shape[0]
    for members in groups.values():
        first = players[members[0]]
        plain = dataclasses.replace(first.policy_cfg, fused="false")
        stack = PolicyStack(ActorCritic(obs_dim, env.action_space, plain).to(device), len(members), obs_dim,
                            first.obs_mean is not None)
        for slot, i in enumerate(members):
            stack.load_(slot, players[i].state, players[i].obs_mean, players[i].obs_var)
        out.append((stack, members))
    return out


def _actions(env, players, groups, state, obs, row_player, row_keys, bot_key) -> torch.Tensor:
    """Each row's action from its own player (policies sample from their distribution)."""
    mask = env.action_mask(state)
    action = None
    for stack, members in groups:
        slot = torch.full((len(players),), -1, dtype=torch.int64, device=obs.device)
        slot[members] = torch.arange(len(members), device=obs.device)
        mine = slot[row_player]
        out = tree.tree_map(lambda x: x.float(), stack.select(stack.outputs(obs), mine))
        sampled = stack.dist.to_env(stack.dist.sample(stack.dist.mask_logits(out, mask),
                                                      stack.dist.noise(row_keys, obs.shape[0])))
        action = sampled if action is None else torch.where(_rows(mine >= 0, sampled), sampled, action)
    for i, pl in enumerate(players):
        if pl.bot is not None:
            scripted = pl.bot(state, bot_key)
            action = scripted if action is None else torch.where(_rows(row_player == i, scripted),
                                                                 scripted.to(action.dtype), action)
    return action


def _rows(flag: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return flag.view(-1, *[1] * (like.dim() - 1))


def table(names: list[str], results: np.ndarray, resamples: int = 200, seed: int = 0) -> list[dict]:
    """Rating table rows, best first: name, elo (Bradley-Terry, mean 0) with a 95% bootstrap interval, score
    (draws half) with its Wilson interval, games."""
    elo, low, high = bootstrap_intervals(results, resamples, seed=seed)
    rows = []
    for i, name in enumerate(names):
        w, d, l = results[i].sum(0) + results[:, i].sum(0)[::-1]
        n = w + d + l
        s_low, s_high = wilson(w + 0.5 * d, n)
        rows.append({"name": name, "elo": float(elo[i]), "elo_low": float(low[i]), "elo_high": float(high[i]),
                     "score": float((w + 0.5 * d) / n) if n else float("nan"), "score_low": s_low,
                     "score_high": s_high, "wins": float(w), "draws": float(d), "losses": float(l)})
    return sorted(rows, key=lambda r: -r["elo"])


def run(targets: list[str], games: int, bots: list[str] = (), pool: bool = False, env_params: dict | None = None,
        device: str = "cpu", seed: int = 0) -> dict:
    """``nitro tournament``: load the players, play the round robin, rate. Returns the table and timings."""
    if not targets:
        raise ValueError("give at least one run directory or checkpoint (the tournament is played on its env); "
                         "add --bots for the env's scripted players")
    players: list[Player] = []
    env_cfg = None
    for target in targets:
        cfg, found = checkpoint_players(target, pool, device)
        if env_cfg is not None and cfg["env"]["id"] != env_cfg["id"]:
            raise ValueError(f"{target} was trained on {cfg['env']['id']}, the others on {env_cfg['id']}: a "
                             "tournament is played on one env")
        env_cfg = env_cfg or cfg["env"]
        players += found
    env = make_env(env_cfg["id"], **{**env_cfg["params"], **(env_params or {})})
    known = env.bots()
    for b in bots:
        if b not in known:
            raise ValueError(f"{env_cfg['id']} has no bot {b!r}; its bots: {', '.join(sorted(known)) or 'none'}")
        players.append(Player(f"bot:{b}", bot=known[b]))
    names = [pl.name for pl in players]
    if len(set(names)) != len(names):
        raise ValueError(f"players must differ, got {names}")
    start = time.perf_counter()
    results = play(env, players, games, device, seed)
    seconds = time.perf_counter() - start
    total = games * len(players) * (len(players) - 1)
    return {"env": env_cfg["id"], "players": names, "games_per_pair": games, "games": total,
            "seconds": seconds, "games_per_second": total / seconds,
            "results": results.tolist(),  # sync-ok: a numpy array (play's results, copied once at its end)
            "table": table(names, results, seed=seed)}
