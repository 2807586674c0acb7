"""Actor-critic policies (MLP, optional LSTM core) and the action distributions they output.

Distributions are plain functions over the head's output so the trainer can compile and capture
them: sampling takes its noise as an argument (drawn from ``nitro.core.rng``), never a global RNG.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from nitro.core.spaces import Box, Discrete, MultiDiscrete
from nitro.train.config import PolicyConfig
from nitro.train.layers import linear, mlp

MASKED_LOGIT = -1e9
"""Logit of an illegal action: exp underflows to exactly 0, yet p * log p stays finite (0, not NaN)."""


def tower_of_actions(num_actions: int, heads: dict) -> list[int]:
    """The actor tower of each action: 1 + the index of the ``heads`` range holding it, 0 (main) if none."""
    tower = [0] * num_actions
    for i, (start, stop) in enumerate(heads.values()):
        for a in range(start, stop):
            tower[a] = i + 1
    return tower


def split_towers(trunk: nn.Sequential, head: nn.Linear, action_tower: list[int], towers: int) -> list[torch.Tensor]:
    """Make an MLP whose widths are ``towers`` times the tower widths into ``towers`` side-by-side MLPs:
    every layer after the first and the head become block-diagonal (unit j of a layer belongs to tower
    j // tower width; action a to tower ``action_tower[a]``), each block freshly orthogonal at the layer's
    gain, the rest zero. Returns the [out, in] 0/1 masks of those layers, to be applied to their gradients
    so the zeros stay zero under any optimizer whose update is 0 for a zero gradient (Adam). The towers
    read the same observation (the first layer is dense) and share nothing else; to every other reader
    (snapshots, export, checkpoints) the actor is a plain MLP."""
    cpu = torch.device("cpu")  # also when the module is built on the meta device (a template)
    masks = []
    for layer in [m for m in trunk if isinstance(m, nn.Linear)][1:] + [head]:
        unit_in = torch.arange(layer.in_features, device=cpu) // (layer.in_features // towers)
        if layer is head:
            unit_out, gain = torch.tensor(action_tower, device=cpu), 0.01
        else:
            unit_out, gain = torch.arange(layer.out_features, device=cpu) // (layer.out_features // towers), math.sqrt(2)
        masks.append((unit_out[:, None] == unit_in[None, :]).float())
        if layer.weight.is_meta:
            continue
        weight = torch.zeros(layer.weight.shape)
        for t in range(towers):
            rows, cols = (unit_out == t).nonzero().flatten(), (unit_in == t).nonzero().flatten()
            if len(rows):
                weight[rows[:, None], cols[None, :]] = nn.init.orthogonal_(torch.empty(len(rows), len(cols)), gain)
        with torch.no_grad():
            layer.weight.copy_(weight)
    return masks


class ActionDist:
    """The action distribution of a space: head size, sampling, log-prob, entropy, mode."""

    def __init__(self, space):
        self.space = space
        if isinstance(space, Discrete):
            self.kind, self.splits = "categorical", [space.n]
        elif isinstance(space, MultiDiscrete):
            self.kind, self.splits = "categorical", list(space.nvec)
        elif isinstance(space, Box):
            if len(space.shape) != 1:
                raise ValueError(f"Box actions must be 1-D for the Gaussian head, got shape {space.shape}")
            self.kind, self.splits = "gaussian", [space.shape[0]]
        else:
            raise TypeError(f"no action distribution for {space!r}")
        self.dim = sum(self.splits)

    def noise(self, key: torch.Tensor, batch: int) -> torch.Tensor:
        from nitro.core import rng

        if self.kind == "categorical":
            return rng.uniform(key, (batch, self.dim))
        return rng.normal(key, (batch, self.dim))

    def mask_logits(self, logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return logits if mask is None else torch.where(mask, logits, MASKED_LOGIT)

    def sample(self, out, noise: torch.Tensor) -> torch.Tensor:
        """Actions from the head output and noise of ``noise(key, batch)``'s shape."""
        if self.kind == "gaussian":
            mean, log_std = out
            return mean + log_std.exp() * noise
        # Gumbel-max: argmax(logits + Gumbel) is a sample of softmax(logits)
        gumbel = -torch.log(-torch.log(noise.clamp(1e-10, 1 - 1e-7)))
        cols = [(lg + g).argmax(-1) for lg, g in zip(out.split(self.splits, -1), gumbel.split(self.splits, -1))]
        return cols[0] if isinstance(self.space, Discrete) else torch.stack(cols, -1)

    def mode(self, out) -> torch.Tensor:
        if self.kind == "gaussian":
            return out[0]
        cols = [lg.argmax(-1) for lg in out.split(self.splits, -1)]
        return cols[0] if isinstance(self.space, Discrete) else torch.stack(cols, -1)

    def log_prob(self, out, action: torch.Tensor) -> torch.Tensor:
        if self.kind == "gaussian":
            mean, log_std = out
            z = (action - mean) / log_std.exp()
            return (-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        acts = action.unsqueeze(-1) if isinstance(self.space, Discrete) else action
        total = 0
        for i, lg in enumerate(out.split(self.splits, -1)):
            total = total + lg.log_softmax(-1).gather(-1, acts[..., i : i + 1].long()).squeeze(-1)
        return total

    def entropy(self, out) -> torch.Tensor:
        if self.kind == "gaussian":
            log_std = out[1].expand_as(out[0])
            return (log_std + 0.5 * (1 + math.log(2 * math.pi))).sum(-1)
        total = 0
        for lg in out.split(self.splits, -1):
            logp = lg.log_softmax(-1)
            total = total - (logp.exp() * logp).sum(-1)
        return total

    def to_env(self, action: torch.Tensor) -> torch.Tensor:
        """What the env receives: Gaussian samples clipped to the Box (as SB3 does); the stored
        action stays unclipped so its log-prob is exact. Discrete actions are stored as indices
        0..n-1 and shifted by the space's ``start``."""
        if self.kind == "gaussian":
            low, high = self.space.bounds(action.device)
            return torch.clamp(action, low, high).to(self.space.dtype)
        if isinstance(self.space, Discrete):
            return action + self.space.start
        return action


class ActorCritic(nn.Module):
    """MLP actor and critic (shared or separate trunks), with an optional LSTM core.

    ``forward(obs, hidden, first)`` -> (head output, value, hidden). ``first`` [B] marks observations
    that begin an episode; the LSTM state is zeroed there before the step. ``device`` (where the
    policy will run) decides whether ``cfg.fused`` runs the trunks as fused kernels.
    """

    def __init__(self, obs_dim: int, action_space, cfg: PolicyConfig, device=None):
        super().__init__()
        self.cfg = cfg
        self.dist = ActionDist(action_space)
        towers = 1 + len(cfg.heads)
        if towers > 1 and (self.dist.kind != "categorical" or len(self.dist.splits) != 1 or not cfg.hidden):
            raise ValueError(f"policy.heads needs Discrete actions and a hidden layer (policy.hidden); got "
                             f"{action_space} with hidden={cfg.hidden}")
        hidden = [w * towers for w in cfg.hidden]  # the towers side by side (split_towers)
        feat = hidden[-1] if hidden else obs_dim
        trunk = mlp
        on_cuda = device is not None and torch.device(device).type == "cuda"
        if towers == 1 and (cfg.fused == "true" or (cfg.fused == "auto" and on_cuda)):
            # imported only where it may run: registering its kernels loads the compiler (seconds)
            from nitro.train import fused_mlp

            supported = (cfg.hidden, obs_dim, cfg.activation, cfg.layer_norm, cfg.lstm, device)
            if cfg.fused == "true":
                fused_mlp.check_supported(*supported)
            if cfg.fused == "true" or fused_mlp.supported(*supported):
                trunk = lambda i, h, a, _ln: fused_mlp.FusedMLP(i, h, a)  # noqa: E731
        self.actor_trunk = trunk(obs_dim, hidden, cfg.activation, cfg.layer_norm)
        self.critic_trunk = None if cfg.shared or cfg.lstm else trunk(obs_dim, list(cfg.hidden), cfg.activation,
                                                                      cfg.layer_norm)
        self.lstm = None
        if cfg.lstm:
            self.lstm = nn.LSTMCell(feat, cfg.lstm)
            for name, p in self.lstm.named_parameters():
                nn.init.orthogonal_(p) if "weight" in name else nn.init.zeros_(p)
            feat = cfg.lstm
        self.actor_head = linear(feat, self.dist.dim, 0.01)
        if towers > 1:
            masks = split_towers(self.actor_trunk, self.actor_head, tower_of_actions(self.dist.dim, cfg.heads), towers)
            linears = [m for m in self.actor_trunk if isinstance(m, nn.Linear)][1:] + [self.actor_head]
            for i, (layer, mask) in enumerate(zip(linears, masks)):
                self.register_buffer(f"tower_mask{i}", mask, persistent=False)
                layer.weight.register_hook(lambda g, name=f"tower_mask{i}": g * getattr(self, name))
        critic_feat = feat if self.critic_trunk is None else (cfg.hidden[-1] if cfg.hidden else obs_dim)
        self.critic_head = linear(critic_feat, 1, 1.0)
        self.log_std = None
        if self.dist.kind == "gaussian":
            if cfg.log_std == "state_dependent":
                self.log_std_head = linear(feat, self.dist.dim, 0.01)
                nn.init.constant_(self.log_std_head.bias, cfg.init_log_std)
            else:
                self.log_std = nn.Parameter(torch.full((self.dist.dim,), cfg.init_log_std))

    @property
    def recurrent(self) -> bool:
        return self.lstm is not None

    def initial_hidden(self, batch: int, device) -> tuple[torch.Tensor, ...]:
        if self.lstm is None:
            return ()
        z = torch.zeros(batch, self.lstm.hidden_size, device=device)
        return (z, z.clone())

    def _head(self, feat: torch.Tensor):
        out = self.actor_head(feat)
        if self.dist.kind != "gaussian":
            return out
        log_std = self.log_std_head(feat) if self.log_std is None else self.log_std.expand_as(out)
        return (out, log_std)

    def forward(self, obs: torch.Tensor, hidden: tuple = (), first: torch.Tensor | None = None):
        feat = self.actor_trunk(obs)
        if self.lstm is not None:
            if first is not None:
                keep = (~first).unsqueeze(-1).to(hidden[0].dtype)
                hidden = (hidden[0] * keep, hidden[1] * keep)
            h, c = self.lstm(feat, hidden)
            hidden, feat = (h, c), h
        critic_feat = feat if self.critic_trunk is None else self.critic_trunk(obs)
        return self._head(feat), self.critic_head(critic_feat).squeeze(-1), hidden

    def actor(self, obs: torch.Tensor):
        """The head output alone (feed-forward policies): how the learner plays as its own opponent."""
        return self._head(self.actor_trunk(obs))

    def value(self, obs: torch.Tensor, hidden: tuple = (), first: torch.Tensor | None = None):
        """Critic only (the actor trunk is skipped where the trunks are separate)."""
        if self.critic_trunk is not None:
            return self.critic_head(self.critic_trunk(obs)).squeeze(-1)
        return self.forward(obs, hidden, first)[1]

    def forward_sequence(self, obs: torch.Tensor, hidden: tuple, first: torch.Tensor):
        """Unroll over [L, B, ...] inputs from ``hidden`` (the state before step 0)."""
        if self.lstm is None:
            out, value, _ = self.forward(obs)
            return out, value
        outs, values = [], []
        for t in range(obs.shape[0]):
            out, v, hidden = self.forward(obs[t], hidden, first[t])
            outs.append(out)
            values.append(v)
        stack = (lambda xs: torch.stack(xs)) if self.dist.kind != "gaussian" else (
            lambda xs: (torch.stack([x[0] for x in xs]), torch.stack([x[1] for x in xs])))
        return stack(outs), torch.stack(values)
