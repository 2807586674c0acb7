"""The batched env against the rule-by-rule reference, whole games on random legal actions, over the
player counts, the advanced cards, both scorings and every reading of the ambiguous rules."""

from __future__ import annotations

import pytest

from nitro.envs.skullking.params import SkullKingParams

from tests.envs.skullking import lockstep

CONFIGS = {
    "base-4p": dict(num_players=4),
    "base-3p": dict(num_players=3),
    "graybeard-2p": dict(num_players=2),
    "graybeard-2p-round-leader": dict(num_players=2, graybeard_after_win="round_leader", kraken=True,
                                      white_whale=True, pirate_abilities=True),
    "advanced-5p": dict(num_players=5, kraken=True, white_whale=True, loot=True, pirate_abilities=True),
    "advanced-5p-other-readings": dict(num_players=5, kraken=True, white_whale=True, loot=True,
                                       escape_then_character="defer", kraken_next_leader="left_of_kraken",
                                       whale_void_next_leader="whale_player", whale_escapes_only="first_escape"),
    "rascal-cannon-6p": dict(num_players=6, scoring="rascal_cannon", loot=True, tigress="escape"),
    "rascal-3p-abilities": dict(num_players=3, scoring="rascal", pirate_abilities=True, tigress="pirate"),
    "full-deck-7p": dict(num_players=7, schedule="broadside_barrage", pirate_abilities=True),
    "capped-8p": dict(num_players=8, kraken=True, white_whale=True, loot=True),
    "rounds-4p": dict(num_players=4, episode="round", round_weights=(0, 0, 0, 0, 0, 1, 1, 2, 2, 3),
                      pirate_abilities=True, loot=True),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_env_matches_reference(name):
    """Every step of 6 whole games agrees with the reference (acting seats, legal sets, hands, trick,
    bids, tricks won, bonuses, scores, rewards, episode ends)."""
    params = SkullKingParams(**CONFIGS[name])
    stats = lockstep.run(params, num_envs=6, seed=len(name))
    assert stats["steps"] > 0
