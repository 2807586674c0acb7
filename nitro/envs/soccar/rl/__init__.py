"""The RL layer over the soccar arena: observation builders, action parsers, rewards, done
conditions, state mutators and the batched multi-agent env `Soccar` (registered as Soccar-v0), with
RLGym v2's and GigaLearnCPP's layouts and semantics. See docs/SOCCAR_RL.md."""

from nitro.envs.soccar.rl.env import Soccar, SoccarParams
from nitro.envs.soccar.rl.state import SoccarState

__all__ = ["Soccar", "SoccarParams", "SoccarState"]
