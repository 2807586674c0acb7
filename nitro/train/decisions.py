"""The decision layout of turn-based rollouts (``ppo.decisions``): each learner slot's decisions packed into
a fixed number of slots, so the update runs over the steps where a seat decided, not over every seat at
every step.

A rollout of T steps fills ``[K + 1, L]`` buffers: learner slot l's i-th decision goes to slot i of
column l (its decision counter), the rewards the seat receives until its next decision are summed onto
that decision, and the episode's end is marked on it. Row K takes the writes of rows that do not decide
(a discard row: static shapes, no data-dependent indexing). K = 1 + the env's ``max_decisions(T)``: slot 0
holds the decision carried over from the previous rollout (below).

Advantages are GAE over each seat's decision sequence: gamma and lambda apply per decision (as turn-based
self-play trainers do), and decision i bootstraps from the value of the seat's decision i + 1, whichever
step that came at. The last decision of a seat whose episode goes on past the rollout has no next
decision yet: it is left out of this update and carried (``Pending``) into slot 0 of the next rollout,
where its advantage is computed once the seat decides again. Its stored log-prob is the one of the policy
that chose it, so PPO's ratio stays exact (one update older than the rest of the batch). Rewards a seat
receives before its first decision of an episode are no decision's outcome and are not stored.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Pending:
    """Each learner slot's last decision of the previous rollout, [L, ...] per field."""

    open: torch.Tensor
    """[L] bool: the slot holds a decision whose episode goes on (its advantage awaits the next one)."""
    obs: torch.Tensor
    action: torch.Tensor
    logprob: torch.Tensor
    value: torch.Tensor
    reward: torch.Tensor
    """[L] rewards received since the decision."""
    mask: torch.Tensor | None


def slots(max_decisions: int) -> int:
    """K: slots per learner slot and rollout, for an env whose seats decide at most ``max_decisions`` times
    in a rollout (one more for the decision carried over)."""
    return 1 + max_decisions


def store(buffer: torch.Tensor, slot: torch.Tensor, value: torch.Tensor) -> None:
    """``buffer[slot[l], l] = value[l]`` for every column l (``buffer`` [K + 1, L, ...], ``slot`` [L])."""
    cols = torch.arange(slot.shape[0], device=slot.device)
    buffer.index_put_((slot, cols), value.to(buffer.dtype))


def read(buffer: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
    """``buffer[slot[l], l]`` for every column l."""
    return buffer[slot, torch.arange(slot.shape[0], device=slot.device)]


def trained(count: torch.Tensor, dones: torch.Tensor) -> torch.Tensor:
    """[K, L] bool: the slots whose advantage is known, given each column's decision count [L] and the
    episode ends [K, L]: a decision whose episode ended, or that the seat's next decision follows."""
    K = dones.shape[0]
    index = torch.arange(K, device=count.device).unsqueeze(1)
    return (index < count) & (dones | (index + 1 < count))


def gae(rewards, values, dones, trained, gamma: float, lam: float) -> torch.Tensor:
    """GAE over each column's decision sequence, [K, L] tensors: ``rewards[i]`` summed from decision i to
    the next, ``dones[i]`` the episode ended after decision i, ``trained`` (see ``trained``) the slots to
    compute. A trained slot that did not end its episode bootstraps from the next slot's value; the
    lambda-chain runs on through trained slots only (an untrained next slot is where the sequence is cut,
    as the last step of a rollout is). Untrained slots get 0."""
    K = rewards.shape[0]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[0])
    for i in reversed(range(K)):
        go_on = trained[i] & ~dones[i]
        next_v = values[i + 1] if i + 1 < K else torch.zeros_like(last)
        delta = rewards[i] + gamma * torch.where(go_on, next_v, 0.0) - values[i]
        last = torch.where(trained[i], delta + gamma * lam * torch.where(go_on, last, 0.0), 0.0)
        adv[i] = last
    return adv
