"""Observation builders against the references: RLGym v2's own DefaultObs run on states exported from
nitro, and GigaLearnCPP's DefaultObs / AdvancedObs re-derived from their C++ source (RLGymCPP
ObsBuilders/*.cpp, Gamestates/GameState.cpp, StateUtil.cpp at ZealanL's commit 86e11c3) per player,
plus a hand-worked example."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nitro.envs.soccar.rl import common_values as V
from nitro.envs.soccar.rl.obs_builders import DefaultObs, GigaLearnAdvancedObs, GigaLearnDefaultObs
from tests.envs.soccar.rl.states import random_state, yaw_rotation

rlgym_obs = pytest.importorskip("rlgym.rocket_league.obs_builders")
rlgym_adapter = pytest.importorskip("nitro.adapters.rlgym")

# Both sides multiply the same float32 inputs by the same coefficients; RLGym's numpy promotes to
# float64 where it concatenates Python bools and floats, nitro stays in float32. The results differ by
# float32 rounding of a product (a relative 6e-8) on values up to ~3 (positions x 1/2300 reach 2.4),
# so 1e-6 absolute plus 1e-6 relative is tight and still safe.
TOL = dict(rtol=1e-6, atol=1e-6)

TEAMS = [(1, 1), (2, 2), (3, 3), (1, 2), (2, 0)]


def test_pad_order_is_rlbots():
    """PADS_RLBOT_ORDER lists the arena's pads at RLGym's BOOST_LOCATIONS (and GigaLearn's, matched
    within sqrt(10) UU in x-y as its _BuildBoostPadIndexMap does; RLGym's table has one typo, 3310)."""
    from rlgym.rocket_league.common_values import BOOST_LOCATIONS

    ours = np.array([V.PAD_POSITIONS[i] for i in V.PADS_RLBOT_ORDER])
    assert ((ours[:, :2] - np.array(BOOST_LOCATIONS)[:, :2]) ** 2).sum(-1).max() < 10


@pytest.mark.parametrize("blue,orange", TEAMS)
@pytest.mark.parametrize("padding", [3, None])
def test_rlgym_default_obs(blue, orange, padding):
    """Every agent's row equals RLGym's DefaultObs on the exported GameState, for random states with
    orange (mirrored) players, demoed cars, inactive pads with timers and every jump/flip flag."""
    state = random_state(24, blue, orange, seed=blue * 10 + orange)
    ours = DefaultObs(zero_padding=padding)
    obs = ours(state)
    assert obs.shape == (24 * (blue + orange), ours.size(blue, orange))
    reference = rlgym_obs.DefaultObs(zero_padding=padding)
    agents = rlgym_adapter.agent_ids(blue, orange)
    for env in range(24):
        gs = rlgym_adapter.game_state(state, env)
        expected = reference.build_obs(agents, gs, {})
        for i, agent in enumerate(agents):
            np.testing.assert_allclose(obs[env * (blue + orange) + i].numpy(), expected[agent], **TOL)


def test_rlgym_default_obs_custom_coefficients():
    """The coefficients of rlgym-ppo's and rlgym-learn's examples carry over."""
    kwargs = dict(zero_padding=None, pos_coef=np.asarray([1 / 4096, 1 / 6000, 1 / 2044]), lin_vel_coef=1 / 2300,
                  ang_vel_coef=1 / 5.5, pad_timer_coef=1 / 4)
    state = random_state(8, 1, 1, seed=3)
    reference = rlgym_obs.DefaultObs(**kwargs)
    kwargs["pos_coef"] = 1 / 4096  # nitro's DefaultObs takes RLGym's scalar coefficient
    obs = DefaultObs(**kwargs)(state)
    for env in range(8):
        gs = rlgym_adapter.game_state(state, env)
        expected = reference.build_obs(["blue-0", "orange-0"], gs, {})
        # pos_coef differs per axis in the reference: compare everything but the positions
        positions = [0, 1, 2, 52, 53, 54, 72, 73, 74]
        keep = [k for k in range(obs.shape[1]) if k not in positions]
        np.testing.assert_allclose(obs[env * 2][keep].numpy(), expected["blue-0"][keep], **TOL)


@pytest.mark.parametrize("blue,orange", [(2, 2), (3, 3), (3, 2)])
def test_rlgym_default_obs_benched_cars(blue, orange):
    """With cars sitting the episode out (a variable team size), each playing agent's row equals RLGym's
    DefaultObs on the state without those cars: teammates and opponents are zero-padded at the end."""
    state = random_state(24, blue, orange, seed=7, bench=0.3)
    obs = DefaultObs()(state)
    reference = rlgym_obs.DefaultObs()
    agents = rlgym_adapter.agent_ids(blue, orange)
    for env in range(24):
        gs = rlgym_adapter.game_state(state, env)
        expected = reference.build_obs(list(gs.cars), gs, {})
        for i, agent in enumerate(agents):
            if agent in gs.cars:
                np.testing.assert_allclose(obs[env * (blue + orange) + i].numpy(), expected[agent], **TOL)


def test_zero_padding_too_small():
    with pytest.raises(ValueError, match="zero_padding=1 is smaller than a team"):
        DefaultObs(zero_padding=1).size(2, 2)


# --- GigaLearnCPP, re-derived from its source, one player at a time -----------------------------------


def giga_invert(v: np.ndarray, inv: bool) -> np.ndarray:
    """StateUtil.cpp InvertPhys: each vector times (-1, -1, 1) for orange."""
    return v * np.array([-1.0, -1.0, 1.0], np.float32) if inv else v


def giga_player(state, env: int, i: int, advanced: bool) -> np.ndarray:
    """DefaultObs::BuildObs / AdvancedObs::BuildObs for car i of env ``env``, as the C++ reads."""
    g, c = state.game, state.game.cars
    host = lambda x: x[env].numpy().astype(np.float32)  # noqa: E731
    blue = state.blue
    inv = i >= blue
    pads_rlbot = host(g.pads.is_active)[list(V.PADS_RLBOT_ORDER)]
    timers_rlbot = host(g.pads.cooldown)[list(V.PADS_RLBOT_ORDER)]
    # GameState::UpdateFromArena: boostPadsInv[i] = pad 33 - i; GetBoostPads(inv) picks boostPadsInv for
    # orange, GetBoostPadTimers(inv) (the quirk) picks the *non*-inverted timers for orange.
    pads = pads_rlbot[::-1] if inv else pads_rlbot
    timers = timers_rlbot if inv else timers_rlbot[::-1]
    ball_pos, ball_vel = giga_invert(host(g.ball.pos), inv), giga_invert(host(g.ball.vel), inv)
    ball_ang_vel = giga_invert(host(g.ball.ang_vel), inv)
    if advanced:
        out = [ball_pos / 5000, ball_vel / 2300, ball_ang_vel / 3]
    else:
        pos_coef = np.array([1 / 4096, 1 / 5120, 1 / 2044], np.float32)
        out = [ball_pos * pos_coef, ball_vel / 2300, ball_ang_vel / 5.5]
    out.append(host(state.prev_action)[i])
    if advanced:
        out.append(np.where(pads, 1.0, 1.0 / (1.0 + timers)))
    else:
        out.append(pads.astype(np.float32))

    def player(j):
        pos, vel, ang_vel = (giga_invert(host(getattr(c, k))[j], inv) for k in ("pos", "vel", "ang_vel"))
        rot = np.stack([giga_invert(host(c.rot_mat)[j][:, a], inv) for a in range(3)])  # forward, right, up
        on_ground = bool(host(c.is_on_ground)[j])
        has_flip_or_jump = on_ground or (not host(c.has_flipped)[j] and not host(c.has_double_jumped)[j]
                                         and host(c.air_time_since_jump)[j] < 1.25)
        flags = [host(c.boost)[j] / 100, on_ground, has_flip_or_jump, bool(host(c.is_demoed)[j])]
        if not advanced:
            return [pos * pos_coef, rot[0], rot[2], vel / 2300, ang_vel / 5.5, np.array(flags, np.float32)]
        return [pos / 5000, rot[0], rot[2], vel / 2300, ang_vel / 3, rot @ ang_vel / 3, rot @ (ball_pos - pos) / 5000,
                rot @ (ball_vel - vel) / 2300, np.array([*flags, bool(host(c.has_jumped)[j])], np.float32)]

    out += player(i)
    for team_mates in (True, False):
        for j in range(state.num_cars):
            if j != i and ((j >= blue) == inv) == team_mates:
                out += player(j)
    return np.concatenate([np.asarray(x, np.float32).ravel() for x in out])


@pytest.mark.parametrize("blue,orange", TEAMS)
@pytest.mark.parametrize("builder", [GigaLearnDefaultObs(), GigaLearnAdvancedObs()], ids=["default", "advanced"])
def test_gigalearn_obs(builder, blue, orange):
    state = random_state(16, blue, orange, seed=blue + 5 * orange)
    obs = builder(state)
    advanced = isinstance(builder, GigaLearnAdvancedObs)
    assert obs.shape == (16 * (blue + orange), builder.size(blue, orange))
    for env in range(16):
        for i in range(blue + orange):
            np.testing.assert_allclose(obs[env * (blue + orange) + i].numpy(), giga_player(state, env, i, advanced),
                                       **TOL)


def test_gigalearn_sizes():
    """The documented sizes: DefaultObs 89 / 127 / 165 and AdvancedObs 109 / 167 / 225 for 1v1-3v3."""
    assert [GigaLearnDefaultObs().size(n, n) for n in (1, 2, 3)] == [89, 127, 165]
    assert [GigaLearnAdvancedObs().size(n, n) for n in (1, 2, 3)] == [109, 167, 225]
    assert [DefaultObs(zero_padding=None).size(n, n) for n in (1, 2, 3)] == [92, 132, 172]
    assert DefaultObs().size(1, 1) == 172


def test_gigalearn_advanced_obs_worked_example():
    """A 1v1 worked by hand from AdvancedObs.cpp.

    Blue car at (1000, -2000, 17) facing +y (forward (0,1,0), right (-1,0,0), up (0,0,1)), moving
    (0, 1150, 0), spinning (0, 0, 1.5), boost 50, on the ground, jumped flag clear. Orange car at
    (0, 3000, 17) facing -y, at rest, boost 0, in the air with its flip used. Ball at (500, 1000, 93.15)
    moving (0, -2300, 0). RLBot pad 0 (0, -4240) was taken 2 s ago; every other pad is active.
    """
    state = random_state(1, 1, 1, seed=0)
    g, c = state.game, state.game.cars
    g.ball.pos[:] = torch.tensor([500.0, 1000.0, 93.15])
    g.ball.vel[:] = torch.tensor([0.0, -2300.0, 0.0])
    g.ball.ang_vel[:] = 0.0
    c.pos[0] = torch.tensor([[1000.0, -2000.0, 17.0], [0.0, 3000.0, 17.0]])
    c.rot_mat[0] = torch.stack((yaw_rotation(math.pi / 2), yaw_rotation(-math.pi / 2)))
    c.vel[0] = torch.tensor([[0.0, 1150.0, 0.0], [0.0, 0.0, 0.0]])
    c.ang_vel[0] = torch.tensor([[0.0, 0.0, 1.5], [0.0, 0.0, 0.0]])
    c.boost[0] = torch.tensor([50.0, 0.0])
    c.is_on_ground[0] = torch.tensor([True, False])
    c.has_flipped[0] = torch.tensor([False, True])
    c.has_double_jumped[0] = False
    c.air_time_since_jump[0] = 0.0
    c.is_demoed[0] = False
    c.has_jumped[0] = torch.tensor([False, True])
    state.prev_action[0] = torch.tensor([[1.0, 0, 0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1, 0, 0]])
    g.pads.is_active[:] = True
    g.pads.cooldown[:] = 0.0
    first = V.PADS_RLBOT_ORDER[0]
    g.pads.is_active[0, first], g.pads.cooldown[0, first] = False, 2.0
    obs = GigaLearnAdvancedObs()(state)
    fixed = GigaLearnAdvancedObs(pad_timer_quirk=False)(state)

    blue = [
        0.1, 0.2, 0.01863,  # ball pos / 5000
        0.0, -1.0, 0.0,  # ball vel / 2300
        0.0, 0.0, 0.0,  # ball ang vel / 3
        1, 0, 0, 0, 0, 0, 1, 0,  # previous action
        # pad 0 is taken: 1 / (1 + timer) with the quirk reading pad 33's timer (0 s) -> 1.0
        *[1.0] * 34,
        # self: pos / 5000, forward, up, vel / 2300, ang vel / 3
        0.2, -0.4, 0.0034, 0, 1, 0, 0, 0, 1, 0, 0.5, 0, 0, 0, 0.5,
        0, 0, 0.5,  # local ang vel (forward, right, up) . (0, 0, 1.5) / 3
        # ball - car = (-500, 3000, 76.15): local (forward 3000, right 500, up 76.15) / 5000
        0.6, 0.1, 0.01523,
        # ball vel - car vel = (0, -3450, 0): local (forward -3450, right 0, up 0) / 2300
        -1.5, 0, 0,
        0.5, 1, 1, 0, 0,  # boost / 100, on ground, HasFlipOrJump (on ground), demoed, has jumped
        # opponent (no mirroring for blue): pos / 5000, forward (0,-1,0), up, vel, ang vel
        0, 0.6, 0.0034, 0, -1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0,
        0, 0, 0,  # local ang vel
        # ball - car = (500, -2000, 76.15); forward (0,-1,0) . = 2000, right (1,0,0) . = 500
        0.4, 0.1, 0.01523,
        # ball vel = (0, -2300, 0): forward . = 2300 -> 1, right . = 0
        1, 0, 0,
        0, 0, 0, 0, 1,  # boost 0, in the air, flip used -> no flip or jump, not demoed, has jumped
    ]
    np.testing.assert_allclose(obs[0].numpy(), blue, rtol=1e-6, atol=1e-6)
    fixed_blue = list(blue)
    fixed_blue[17] = 1 / 3  # the pad's own timer, 2 s: 1 / (1 + 2)
    np.testing.assert_allclose(fixed[0].numpy(), fixed_blue, rtol=1e-6, atol=1e-6)
    # Orange sees the world turned half a turn: the ball at (-500, -1000), itself at (0, -3000) facing +y,
    # and the pad list reversed, so the taken pad is its last (index 33). With the quirk orange reads
    # the non-inverted timer list, whose entry 33 is RLBot pad 33's (0 s): 1.0; its own timer gives 1 / 3.
    assert obs[1, :3].tolist() == pytest.approx([-0.1, -0.2, 0.01863], abs=1e-6)
    assert obs[1, 17 + 33].item() == 1.0
    assert fixed[1, 17 + 33].item() == pytest.approx(1 / 3)
    assert obs[1, 51:57].tolist() == pytest.approx([0, -0.6, 0.0034, 0, 1, 0], abs=1e-6)
