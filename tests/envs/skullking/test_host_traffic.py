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


def test_compiled_steps_read_the_tables_made_by_reset():
    """Traced by torch.compile after a reset, an auto-reset step with masks, observations and bots builds
    no tensor from Python data: the per-device tables reset made are the graph's constants (Dynamo
    re-traced lru_cache'd builders, which on a GPU made a host copy per call and broke graph capture)."""
    env = SkullKing(SkullKingParams(**RULESETS["presets"], checked=False))  # one ruleset: tracing takes ~45 s
    bots = env.bots()
    key = rng.env_keys(rng.key(4), 8)
    s = env.reset(key, 8, torch.device("cpu"))
    built = []

    def backend(gm, example_inputs):
        python_data = (torch.tensor, torch.as_tensor)
        built.extend(n.target for n in gm.graph.nodes if n.op == "call_function" and n.target in python_data)
        return gm

    def step(s, key):
        actions = [bot(s, key) for bot in bots.values()]
        out = autoreset_step(env, s, actions[0], key)
        return out.state, env.action_mask(s), env.observe(out.state)

    torch.compile(step, backend=backend)(s, key)
    assert not built, f"{len(built)} tensors built from Python data inside the compiled step"
