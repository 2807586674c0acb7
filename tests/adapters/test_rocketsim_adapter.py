"""soccar_state from real RocketSim arenas: nitro's observation builders on games RocketSim simulates
give what RLGym's own DefaultObs gives on the same games (through RLGym's RocketSimEngine)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rlgym.rocket_league.sim")
from rlgym.rocket_league.obs_builders import DefaultObs as RLGymDefaultObs  # noqa: E402
from rlgym.rocket_league.sim import RocketSimEngine  # noqa: E402

from nitro.adapters.rlgym import game_state  # noqa: E402
from nitro.adapters.rocketsim import soccar_state  # noqa: E402
from nitro.envs.soccar.rl.action_parsers import lookup_table  # noqa: E402
from nitro.envs.soccar.rl.obs_builders import DefaultObs  # noqa: E402
from tests.envs.soccar.rl.states import random_state  # noqa: E402


def test_observations_of_rocketsim_games():
    """Three 2v1 RocketSim games from random states, 10 ticks of random lookup-table actions: nitro's
    DefaultObs on the imported batch equals RLGym's DefaultObs on each engine's state (to float32
    rounding, as in the builders' own parity tests)."""
    rng = np.random.default_rng(0)
    table = np.array(lookup_table(), np.float32)
    engines = []
    for env in range(3):
        start = random_state(1, 2, 1, seed=env)
        desired = game_state(start, 0)
        for car in desired.cars.values():
            car.bump_victim_id = None
        engine = RocketSimEngine()
        engine.set_state(desired, {})
        engine.step({a: np.repeat(table[rng.integers(90)][None], 10, 0) for a in engine.agents}, {})
        engines.append(engine)
    batch = soccar_state([e._arena for e in engines])
    obs = DefaultObs(zero_padding=None)(batch).numpy().reshape(3, 3, -1)
    reference = RLGymDefaultObs(zero_padding=None)
    for env, engine in enumerate(engines):
        expected = reference.build_obs(engine.agents, engine.state, {})
        for i, agent in enumerate(engine.agents):
            np.testing.assert_allclose(obs[env, i], expected[agent], rtol=1e-6, atol=1e-6)
    assert batch.blue == 2 and batch.orange == 1


def test_team_sizes_must_agree():
    engines = []
    for blue, orange in ((1, 1), (2, 1)):
        engine = RocketSimEngine()
        engine.set_state(game_state(random_state(1, blue, orange), 0), {})
        engines.append(engine)
    with pytest.raises(ValueError, match="same team sizes"):
        soccar_state([e._arena for e in engines])
