"""A Skull King step makes no host traffic (tests/host_traffic.py): no host syncs, no data-dependent
shapes and no tensors built from Python data, so it runs without syncs on a GPU and inside CUDA graphs.
Auto-reset, masks, acting rows, observations and every bot, for rulesets that take every code path."""

from __future__ import annotations

import pytest
import torch

from nitro.core import rng
from nitro.core.env import autoreset_step
from nitro.envs.skullking.env import SkullKing
from nitro.envs.skullking.params import SkullKingParams
from tests.host_traffic import HostTraffic

RULESETS = {
    "presets": {"episode": "round", "round_weights": tuple(range(1, 11)), "observe_scores": False},
    "graybeard-2p": {"num_players": 2, "kraken": True, "white_whale": True, "pirate_abilities": True},
    "advanced-5p-cannons": {"num_players": 5, "kraken": True, "white_whale": True, "loot": True,
                            "pirate_abilities": True, "scoring": "rascal_cannon", "escape_then_character": "defer"},
}


@pytest.mark.parametrize("name", RULESETS)
def test_steps_make_no_host_traffic(name):
    env = SkullKing(SkullKingParams(**RULESETS[name], checked=False))
    bots = env.bots()
    key = rng.env_keys(rng.key(3), 16)
    s = env.reset(key, 16, torch.device("cpu"))

    def step(s, key):
        actions = [bot(s, key) for bot in bots.values()]
        env.action_mask(s), env.acting(s)
        return autoreset_step(env, s, actions[0], key).state

    s = step(s, key)  # the first step makes the per-device tables (once, like a CUDA graph's warm-up)
    with HostTraffic() as traffic:
        for i in range(40):  # through bids, tricks, scoring and resets
            s = step(s, rng.fold_in(key, i))
    assert not traffic.found, traffic.report()
