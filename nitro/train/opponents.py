"""Opponents inside the learner's batch: who drives which agent rows, K frozen policies stacked, and
scripted bots.

``Seating`` orders each env's agent rows as the learner's team first, the others after, from a
per-env tensor ``learner_team``; it scores finished games team against team. ``PolicyStack`` holds K
frozen copies of the learner's actor (trunk, head, log-std and observation normalizer) as stacked
tensors ``[K, ...]`` and evaluates every copy on every row at once: one batched matmul per layer
(``method="bmm"``) or ``torch.func.vmap`` over ``functional_call`` (``method="vmap"``); the caller
then picks each row's copy. Loading a copy writes into the stacks in place, so CUDA graphs that read
them stay valid, and nothing here is a parameter of the learner: opponents never get gradients.

Opponent ids per env index one list of members: 0 is the learner itself (self-play), 1..K the
stacked slots, then the scripted bots.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch
from torch import nn
from torch.func import functional_call, vmap

from nitro.core import agents, rng, tree
from nitro.train.policy import ActionDist, ActorCritic

SELF = 0
"""Opponent id of the learner playing itself."""
METHODS = ("bmm", "vmap")


class Seating:
    """Which agent rows the learner drives: all of them (pure self-play, ``opponents=False``), or one
    team per env given by ``learner_team`` [N] (the other seats are opponents'). Teams must then be of
    equal size, so every env has the same number of learner rows."""

    def __init__(self, env, num_envs: int, opponents: bool, device):
        agents.check(env)
        self.num_agents, self.num_envs = env.num_agents, num_envs
        self.agent_team = env.agent_team
        self.num_teams = agents.num_teams(env)
        a = self.num_agents
        if not opponents:
            self.per_env, order = a, [list(range(a))]
        else:
            sizes = [env.agent_team.count(t) for t in range(self.num_teams)]
            if self.num_teams < 2 or len(set(sizes)) != 1:
                raise ValueError(f"{type(env).__name__} has teams of sizes {sizes} (agent_team="
                                 f"{env.agent_team}); opponents need two or more teams of equal size. Train "
                                 "it in pure self-play (league.pool_size=0, league.bots=[])")
            self.per_env = sizes[0]
            order = [[s for s in range(a) if env.agent_team[s] == t] + [s for s in range(a) if env.agent_team[s] != t]
                     for t in range(self.num_teams)]
        self.order = torch.tensor(order, dtype=torch.int64, device=device)
        """[teams (or 1), A]: the seats of each learner team first, then the other seats."""
        self.base = torch.arange(num_envs, device=device)[:, None] * a
        self.team_of_row = torch.tensor(env.agent_team, device=device).repeat(num_envs)
        self.team_matrix = agents.team_matrix(env.agent_team, device)
        """[A, teams] one-hot team of each seat (made here, once: a host copy in a step would stall graphs)."""
        self.all_rows = not opponents
        """True when the learner drives every row (its rows are 0..N*A-1 in order)."""

    @property
    def learner_rows(self) -> int:
        return self.num_envs * self.per_env

    def learner_teams(self, learner_team: torch.Tensor) -> torch.Tensor:
        """[N * S] the team of each learner row."""
        return self.team_of_row if self.all_rows else learner_team.repeat_interleave(self.per_env)

    def rows(self, learner_team: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the learner's rows [N * S], the opponents' rows [N * (A - S)]), each env-major."""
        perm = self.base + self.order[learner_team]
        return perm[:, : self.per_env].reshape(-1), perm[:, self.per_env :].reshape(-1)

    def assemble(self, mine: torch.Tensor, theirs: torch.Tensor, mine_rows: torch.Tensor,
                 their_rows: torch.Tensor) -> torch.Tensor:
        """Per-row values [N * A, ...] from the learner's and the opponents' parts."""
        values = torch.cat([mine, theirs.to(mine.dtype)])
        return torch.empty_like(values).index_copy(0, torch.cat([mine_rows, their_rows]), values)

    def scores(self, standing: torch.Tensor) -> torch.Tensor:
        """[N, teams] each team's score against the others in a finished game: the fraction of other teams
        it beat (a tie counts half), from each agent's standing [N * A] (``env.result`` or its return)
        summed over the team. Two teams: 1 win, 0.5 draw, 0 loss."""
        total = standing.float().view(-1, self.num_agents) @ self.team_matrix  # [N, T]: summed per team
        if self.num_teams < 2:
            return torch.full_like(total, 0.5)
        mine, other = total.unsqueeze(2), total.unsqueeze(1)
        beats = (mine > other).float() + 0.5 * (mine == other).float()
        return (beats.sum(2) - 0.5) / (self.num_teams - 1)  # minus the tie of each team with itself


class PolicyStack:
    """K frozen copies of an actor, as stacked tensors. ``outputs(obs)`` [B, D] -> the head output of
    every copy [K, B, ...] (logits, or (mean, log_std) for Gaussian actions)."""

    def __init__(self, policy: ActorCritic, k: int, obs_dim: int, obs_norm: bool, method: str = "bmm"):
        if method not in METHODS:
            raise ValueError(f"opponent method must be one of {METHODS}, got {method!r}")
        if policy.recurrent:
            raise ValueError("opponent policies are feed-forward: set policy.lstm=0 to train with a league "
                             "(league.pool_size > 0 or league.bots)")
        self.k, self.method, self.obs_norm = k, method, obs_norm
        self.dist = policy.dist
        device = next(policy.parameters()).device
        names = [n for n in policy.state_dict() if n.startswith(("actor_trunk.", "actor_head.", "log_std"))]
        state = policy.state_dict()
        self.params = {n: torch.zeros(k, *state[n].shape, device=device) for n in names}
        self.obs_mean = torch.zeros(k, obs_dim, device=device)
        self.obs_var = torch.ones(k, obs_dim, device=device)
        self.layers = [(type(m).__name__, name, m) for name, m in policy.actor_trunk.named_children()]
        with torch.device("meta"):  # the same actor, unfused, as a template for functional_call
            plain = dataclasses.replace(policy.cfg, fused="false", lstm=0)
            self.template = _Actor(ActorCritic(obs_dim, policy.dist.space, plain))

    def load_(self, slot: int, policy_state: dict[str, torch.Tensor], obs_mean=None, obs_var=None) -> None:
        """Copy a policy's actor (a state dict of the learner's names) and normalizer into ``slot``."""
        for n, stack in self.params.items():
            stack[slot].copy_(policy_state[n])
        if obs_mean is not None:
            self.obs_mean[slot].copy_(obs_mean)
            self.obs_var[slot].copy_(obs_var)

    def tensors(self) -> dict[str, torch.Tensor]:
        return {**{f"param.{n}": v for n, v in self.params.items()}, "obs_mean": self.obs_mean,
                "obs_var": self.obs_var}

    def _inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """[K, B, D]: the rows as each copy sees them (its own normalizer, as the learner's)."""
        if not self.obs_norm:
            return obs.unsqueeze(0).expand(self.k, *obs.shape)
        x = (obs.unsqueeze(0) - self.obs_mean[:, None]) / torch.sqrt(self.obs_var[:, None] + 1e-8)
        return x.clamp(-10.0, 10.0)

    def outputs(self, obs: torch.Tensor):
        x = self._inputs(obs)
        if self.method == "vmap":
            return vmap(lambda p, xk: functional_call(self.template, p, (xk,)))(self.params, x)
        p = self.params
        for kind, name, module in self.layers:
            if kind == "Linear":
                w, b = p[f"actor_trunk.{name}.weight"], p[f"actor_trunk.{name}.bias"]
                x = torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))
            elif kind == "LayerNorm":
                w, b = p[f"actor_trunk.{name}.weight"], p[f"actor_trunk.{name}.bias"]
                x = nn.functional.layer_norm(x, module.normalized_shape, eps=module.eps) * w[:, None] + b[:, None]
            else:
                x = module(x)  # the activation
        head = torch.baddbmm(p["actor_head.bias"].unsqueeze(1), x, p["actor_head.weight"].transpose(1, 2))
        if self.dist.kind != "gaussian":
            return head
        if "log_std" in p:
            return head, p["log_std"].unsqueeze(1).expand_as(head)
        return head, torch.baddbmm(p["log_std_head.bias"].unsqueeze(1), x, p["log_std_head.weight"].transpose(1, 2))

    def select(self, out, member: torch.Tensor):
        """Each row's own copy of ``outputs``: ``member`` [B] in 0..K-1 (others give copy 0's output,
        to be overwritten by the caller)."""
        idx = member.clamp(0, self.k - 1).view(1, -1, 1)
        pick = lambda o: o.gather(0, idx.expand(1, *o.shape[1:])).squeeze(0)  # noqa: E731
        return pick(out) if self.dist.kind != "gaussian" else (pick(out[0]), pick(out[1]))


class _Actor(nn.Module):
    """An ``ActorCritic``'s actor path (trunk and head) as a module of its own, for ``functional_call``."""

    def __init__(self, policy: ActorCritic):
        super().__init__()
        self.actor_trunk, self.actor_head = policy.actor_trunk, policy.actor_head
        self.log_std_head = getattr(policy, "log_std_head", None)
        self.log_std = policy.log_std
        self.gaussian = policy.dist.kind == "gaussian"

    def forward(self, obs: torch.Tensor):
        feat = self.actor_trunk(obs)
        out = self.actor_head(feat)
        if not self.gaussian:
            return out
        return out, (self.log_std_head(feat) if self.log_std is None else self.log_std.expand_as(out))


Bot = Callable[[object, torch.Tensor], torch.Tensor]


class Opponents:
    """Everyone but the learner in one batch: the learner's own policy (id 0), the stacked pool (ids
    1..K) and scripted bots (ids K+1..). ``probs`` [ids] is where new games go (set by the league
    between updates, in place); ``draw`` samples ids, ``act`` plays the opponents' rows."""

    def __init__(self, stack: PolicyStack | None, bots: list[Bot], dist: ActionDist, device):
        self.stack, self.bots, self.dist = stack, bots, dist
        self.k = stack.k if stack is not None else 0
        self.probs = torch.zeros(1 + self.k + len(bots), device=device)
        self.probs[SELF] = 1.0
        self.use_self = True
        """Whether id 0 can be drawn (else the learner's policy is not run on the opponents' rows)."""

    def draw(self, key: torch.Tensor) -> torch.Tensor:
        """[N] opponent ids from per-env keys [N], distributed as ``probs``."""
        cdf = self.probs.cumsum(0)
        u = rng.uniform(key, tuple(key.shape)) * cdf[-1]
        return torch.searchsorted(cdf, u.unsqueeze(-1), right=True).squeeze(-1).clamp(max=len(self.probs) - 1)

    def act(self, state, rows: torch.Tensor, obs: torch.Tensor, mask: torch.Tensor | None, member: torch.Tensor,
            keys: torch.Tensor, bot_key: torch.Tensor, learner: Callable) -> torch.Tensor:
        """Env actions of the opponents' rows ``rows`` [B] (raw observations ``obs``, action masks, opponent
        id ``member`` and random key of each row); ``learner(obs)`` is the learner's actor output."""
        out = learner(obs) if self.use_self else None
        if self.stack is not None:
            pooled = self.stack.select(self.stack.outputs(obs), member - 1)
            in_pool = (member >= 1) & (member <= self.k)
            out = pooled if out is None else tree.tree_map(
                lambda a, b: torch.where(in_pool.view(-1, *[1] * (a.dim() - 1)), a, b), pooled, out)
        action = None
        if out is not None:
            out = self.dist.mask_logits(tree.tree_map(lambda x: x.float(), out), mask)
            action = self.dist.to_env(self.dist.sample(out, self.dist.noise(keys, rows.shape[0])))
        if self.bots:
            scripted = torch.stack([bot(state, bot_key) for bot in self.bots]).index_select(1, rows)  # [bots, B, ...]
            which = (member - 1 - self.k).clamp(0, len(self.bots) - 1)
            shape = (1, -1, *[1] * (scripted.dim() - 2))
            chosen = scripted.gather(0, which.view(shape).expand(1, *scripted.shape[1:])).squeeze(0)
            if action is None:
                return chosen
            action = torch.where((member > self.k).view(shape[1:]), chosen.to(action.dtype), action)
        return action
