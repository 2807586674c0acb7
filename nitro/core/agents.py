"""Multi-agent helpers over the env-major row layout: agent ``i`` of env ``e`` is row ``e * A + i``.

An env declares ``num_agents`` (A) and ``agent_team`` (the team of each seat); its per-agent tensors
(observations, actions, rewards, masks, ``acting``) have ``N * A`` rows while the state and the done
flags stay per env. These functions check the declaration and move between the two layouts.
"""

from __future__ import annotations

import torch

from nitro.core import rng


def check(env) -> None:
    """Raise a ``ValueError`` unless ``env.num_agents`` and ``env.agent_team`` describe A seats in teams
    numbered 0, 1, ... in order of first appearance."""
    name, a, team = type(env).__name__, env.num_agents, env.agent_team
    if not isinstance(a, int) or isinstance(a, bool) or a < 1:
        raise ValueError(f"{name}.num_agents must be an int >= 1, got {a!r}")
    if not isinstance(team, tuple) or len(team) != a or not all(isinstance(t, int) for t in team):
        raise ValueError(f"{name}.agent_team must be a tuple of {a} ints (one team per seat), got {team!r}; "
                         "set it in __init__ beside num_agents")
    first_seen = list(dict.fromkeys(team))
    if first_seen != list(range(len(first_seen))):
        raise ValueError(f"{name}.agent_team={team} must number teams 0, 1, ... in order of first "
                         f"appearance, e.g. {tuple(first_seen.index(t) for t in team)}")


def num_teams(env) -> int:
    return max(env.agent_team) + 1


def per_agent(x: torch.Tensor, num_agents: int) -> torch.Tensor:
    """Per-env values [N, ...] repeated for each agent row [N * A, ...] (e.g. done flags)."""
    return x if num_agents == 1 else x.repeat_interleave(num_agents, dim=0)


def seats(num_envs: int, num_agents: int, device=None) -> torch.Tensor:
    """The seat (agent index) of each row, [N * A] int64."""
    return torch.arange(num_agents, device=device).repeat(num_envs)


def row_keys(key: torch.Tensor, num_agents: int) -> torch.Tensor:
    """One random stream per agent row [N * A] from per-env keys [N] (the keys themselves when A = 1)."""
    if num_agents == 1:
        return key
    return rng.fold_in(per_agent(key, num_agents), seats(key.shape[0], num_agents, key.device))


def team_matrix(agent_team: tuple[int, ...], device=None) -> torch.Tensor:
    """[A, T] float one-hot of each seat's team: ``x.view(N, A) @ team_matrix`` sums rows per team. It is
    copied from the host: make it once, outside loops that CUDA graphs capture."""
    team = torch.tensor(agent_team, device=device)
    return torch.nn.functional.one_hot(team, max(agent_team) + 1).float()


def team_sums(x: torch.Tensor, agent_team: tuple[int, ...]) -> torch.Tensor:
    """Per-agent values [N * A] summed over each team's agents: [N, T] (builds ``team_matrix`` each call)."""
    a = len(agent_team)
    return x.float().view(-1, a) @ team_matrix(agent_team, x.device)
