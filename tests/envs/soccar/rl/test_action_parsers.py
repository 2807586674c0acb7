"""Action parsers against RLGym's LookupTableAction and GigaLearnCPP's DefaultAction
(RLGymCPP/ActionParsers/DefaultAction.cpp, re-derived per player)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nitro.envs.soccar.rl.action_parsers import ContinuousAction, LookupTableAction, lookup_table
from nitro.envs.soccar.rl.state import has_flip_or_jump
from tests.envs.soccar.rl.states import random_state

rlgym_actions = pytest.importorskip("rlgym.rocket_league.action_parsers")


def test_lookup_table_is_rlgyms():
    table = np.array(lookup_table())
    assert table.shape == (90, 8)
    assert np.array_equal(table, rlgym_actions.LookupTableAction.make_lookup_table())
    # the counts the reference note gives: 18 actions jump, 39 boost, 28 hold the handbrake
    assert (table[:, 5] == 1).sum() == 18 and (table[:, 6] == 1).sum() == 39 and (table[:, 7] == 1).sum() == 28


def test_lookup_table_parse_matches_rlgym():
    state = random_state(5, 2, 1)
    ids = torch.randint(0, 90, (15,), generator=torch.Generator().manual_seed(0))
    controls = LookupTableAction()(ids, state)
    expected = rlgym_actions.LookupTableAction().parse_actions({"a": ids.numpy()}, None, {})["a"]
    assert controls.shape == (5, 3, 8) and controls.dtype == torch.float32
    assert np.array_equal(controls.reshape(15, 8).numpy(), expected)


def gigalearn_mask(table: np.ndarray, cars, env: int, i: int, quirk: bool = True) -> np.ndarray:
    """DefaultAction's constructor masks and GetActionMask for one player, as the C++ reads."""
    num_ground = 24
    ground = np.arange(90) < num_ground
    air = np.zeros(90, bool)
    for k, a in enumerate(table):
        if (k > num_ground if quirk else k >= num_ground) and not a[5]:
            air[k] = True
        if k < num_ground and a[0] == a[6] and (a[3] != 0) == bool(a[7]):
            air[k] = True
    result = (ground if cars.is_on_ground[env, i] else air).copy()
    if cars.boost[env, i] == 0:
        result &= ~(table[:, 6] == 1)
    turtled = cars.has_world_contact[env, i] and cars.world_contact_normal[env, i, 2] > 0.9
    if has_flip_or_jump(cars)[env, i] or turtled:
        result |= table[:, 5] == 1
    return result


@pytest.mark.parametrize("quirk", [True, False])
def test_gigalearn_masks(quirk):
    state = random_state(40, 1, 2, seed=4)
    cars = state.game.cars
    cars.world_contact_normal[..., 2] = torch.rand(40, 3, generator=torch.Generator().manual_seed(1)) * 2 - 1
    parser = LookupTableAction(masks=True, air_mask_quirk=quirk)
    mask = parser.action_mask(state)
    table = np.array(lookup_table())
    assert mask.shape == (120, 90)
    for env in range(40):
        for i in range(3):
            assert np.array_equal(mask[env * 3 + i].numpy(), gigalearn_mask(table, cars, env, i, quirk))
    assert LookupTableAction().action_mask(state) is None


def test_gigalearn_air_mask_size():
    """In the air (no boost, no flip) GigaLearn allows 53 actions: the 48 aerial ones without jump, less
    the first (its off-by-one), plus 6 yaw-only ground actions; 54 without the quirk."""
    state = random_state(1, 1, 0)
    c = state.game.cars
    c.is_on_ground[:] = False
    c.boost[:] = 50.0
    c.has_flipped[:] = True
    c.has_world_contact[:] = False
    assert LookupTableAction(masks=True).action_mask(state).sum() == 53
    assert not LookupTableAction(masks=True).action_mask(state)[0, 24]
    assert LookupTableAction(masks=True, air_mask_quirk=False).action_mask(state).sum() == 54


def test_continuous_action():
    state = random_state(1, 1, 1)
    action = torch.tensor([[2.0, -0.5, -3.0, 0.25, 1.0, 0.1, -0.1, 0.0], [0, 0, 0, 0, 0, 1, 1, 1]])
    controls = ContinuousAction()(action, state)
    expected = [[1.0, -0.5, -1.0, 0.25, 1.0, 1, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1]]
    assert controls.shape == (1, 2, 8) and controls[0].tolist() == expected
