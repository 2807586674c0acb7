"""State mutators: kickoffs against RLGym's KickoffMutator (its shuffle replaced by nitro's draw),
GigaLearn's RandomState ranges, team sizes, weighted mixes and start states from a replay file."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from nitro.core import rng
from nitro.envs.soccar import Arena, CarState
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.rl import state_mutators as M
from nitro.envs.soccar.rl.env import Soccar, SoccarParams
from nitro.envs.soccar.rl.obs_builders import DefaultObs
from nitro.monitor import replay

rlgym_mutators = pytest.importorskip("rlgym.rocket_league.state_mutators")
rlgym_adapter = pytest.importorskip("nitro.adapters.rlgym")

N = 32


@pytest.fixture(scope="module")
def env3v3():
    return Soccar(SoccarParams(blue=3, orange=3))


def reset(env, mutator, num_envs=N, seed=0):
    env.params = SoccarParams(blue=env.params.blue, orange=env.params.orange, mutator=mutator)
    return env.reset(rng.env_keys(rng.key(seed), num_envs), num_envs, "cpu")


@pytest.mark.parametrize("team_size", [1, 2, 3])
def test_kickoff_matches_rlgym(env3v3, team_size, monkeypatch):
    """Each env's kickoff equals RLGym's FixedTeamSizeMutator + KickoffMutator(boost 33.3) when RLGym's
    random.shuffle draws nitro's order of the spots."""
    state = reset(env3v3, M.MutatorSequence(M.FixedTeamSizeMutator(team_size, team_size), M.KickoffMutator(33.3)))
    spots = np.array(C.CAR_SPAWN_LOCATIONS_SOCCAR)[:, :2]
    engine_state = None
    for env in range(N):
        gs = rlgym_adapter.game_state(state, env)
        blue_xy = [gs.cars[f"blue-{k}"].physics.position[:2] for k in range(team_size)]
        order = [int(np.abs(spots - xy).sum(1).argmin()) for xy in blue_xy]
        order += [k for k in range(5) if k not in order]
        monkeypatch.setattr(random, "shuffle", lambda x, order=order: x.__setitem__(slice(None), order))
        engine_state = _rlgym_kickoff(team_size)
        assert list(gs.cars) == list(engine_state.cars)
        np.testing.assert_array_equal(gs.ball.position, engine_state.ball.position)
        for agent, car in engine_state.cars.items():
            ours = gs.cars[agent]
            np.testing.assert_array_equal(ours.physics.position, car.physics.position)
            # the rotations come from cos/sin of the same yaw in float32 (nitro) and float64 (RLGym)
            np.testing.assert_allclose(ours.physics.rotation_mtx, car.physics.rotation_mtx, atol=1e-6)
            assert ours.boost_amount == pytest.approx(car.boost_amount)
            assert not ours.physics.linear_velocity.any() and not ours.physics.angular_velocity.any()
            assert ours.on_ground and not ours.is_demoed
    # the draws differ between envs: more than one order of the spots shows up
    assert len({tuple(state.game.cars.pos[e, 0, :2].tolist()) for e in range(N)}) > 1


def _rlgym_kickoff(team_size):
    from rlgym.rocket_league.sim import RocketSimEngine  # noqa: F401  (the engine's base state layout)
    from rlgym.rocket_league.api import GameState, PhysicsObject

    gs = GameState()
    gs.ball = PhysicsObject()
    gs.cars = {}
    rlgym_mutators.FixedTeamSizeMutator(team_size, team_size).apply(gs, {})
    rlgym_mutators.KickoffMutator().apply(gs, {})
    return gs


def test_kickoff_matches_the_arenas_reset_kickoff(env3v3):
    """Car by car, the kickoff equals the Arena's port of RocketSim's ResetToRandomKickoff for a car of
    the same team on the same spot, every field alike but the wheel contacts RLGym sets."""
    state = reset(env3v3, M.KickoffMutator(), num_envs=N)
    arena = Arena(N, 3, 3, seed=0)
    arena.reset_kickoff()
    spot_xy = torch.tensor(C.CAR_SPAWN_LOCATIONS_SOCCAR)[:, :2]
    ours = state.game.cars
    blue_view = ours.pos[..., :2] * torch.tensor([1.0] * 3 + [-1.0] * 3).view(1, 6, 1)  # orange mirrored back
    mine = (blue_view[..., None, :] - spot_xy).abs().sum(-1).argmin(-1)  # [N, C]: each car's spot
    compared = 0
    for team in (slice(0, 3), slice(3, 6)):
        for env in range(N):
            by_spot = {int(s): k for k, s in enumerate(arena.kickoff_spawns[env, team])}
            for k, s in enumerate(mine[env, team].tolist()):
                if s not in by_spot:  # the two draws chose different spots for this env
                    continue
                compared += 1
                for name in CarState.SETTABLE:
                    if name != "wheels_with_contact":
                        ours_v, theirs_v = getattr(ours, name)[env, team][k], getattr(arena.cars, name)[env, team][by_spot[s]]
                        assert torch.equal(ours_v, theirs_v), name
    assert compared > N  # (3 of 5 spots each: about 1.8 cars per team and env in common)
    assert torch.equal(state.game.ball.pos, arena.ball.pos) and torch.all(ours.wheels_with_contact)


def test_variable_team_size(env3v3):
    """Team sizes drawn by weight; benched cars are parked (demolished for good) and read as absent."""
    state = reset(env3v3, M.MutatorSequence(M.VariableTeamSizeMutator({(1, 1): 1, (2, 2): 1, (3, 2): 2}),
                                            M.KickoffMutator()), num_envs=400)
    sizes = torch.stack((state.active[:, :3].sum(1), state.active[:, 3:].sum(1)), 1)
    counts = {mode: int(((sizes == torch.tensor(mode)).all(1)).sum()) for mode in [(1, 1), (2, 2), (3, 2)]}
    assert sum(counts.values()) == 400
    # binomial spread of 400 draws: 3 sigma of the (3, 2) share 0.5 is 0.075
    assert abs(counts[(3, 2)] / 400 - 0.5) < 0.075 and min(counts.values()) > 50
    cars = state.game.cars
    assert torch.all(cars.is_demoed == ~state.active)
    assert torch.all(cars.demo_respawn_timer[~state.active] == M.PARKED_RESPAWN_TIMER)
    # the first cars of each team play
    assert torch.all(state.active[:, 0] & state.active[:, 3])
    obs = DefaultObs()(state).view(400, 6, -1)
    env = int((sizes == torch.tensor([1, 1])).all(1).nonzero()[0])
    # 1v1 in a 3v3 arena: the two teammate slots are padding, then the one opponent, then two empty seats
    slots = obs[env, 0, 52:].view(6, 20)
    assert slots[0].any() and not slots[1:3].any() and slots[3].any() and not slots[4:].any()
    assert torch.equal(env3v3.acting(state), state.active.reshape(-1))


def test_team_size_too_large(env3v3):
    with pytest.raises(ValueError, match="team size 4v1 does not fit"):
        reset(env3v3, M.FixedTeamSizeMutator(4, 1), num_envs=2)


def test_random_state(env3v3):
    state = reset(env3v3, M.RandomStateMutator(), num_envs=200)
    ball, cars = state.game.ball, state.game.cars
    lo, hi = torch.tensor([-3500, -4000, 92.75]), torch.tensor([3500, 4000, 1820])
    assert torch.all((ball.pos >= lo) & (ball.pos <= hi))
    assert ball.vel.norm(dim=-1).max() <= 4000 and ball.ang_vel.abs().max() <= 4
    on_floor = cars.pos[..., 2] == C.CAR_SPAWN_REST_Z
    assert abs(on_floor.float().mean() - 0.5) < 0.05  # 1200 coin flips: 3 sigma is 0.043
    assert torch.all(cars.vel[..., 2][on_floor] == 0) and torch.all(cars.ang_vel[on_floor] == 0)
    assert torch.allclose(cars.rot_mat[on_floor][:, 2], torch.tensor([0.0, 0.0, 1.0]), atol=1e-6)  # level
    flying = ~on_floor
    assert torch.all((cars.pos[flying][:, 2] >= 150) & (cars.pos[flying][:, 2] <= 1820))
    assert torch.allclose(cars.ang_vel[flying].norm(dim=-1), torch.tensor(5.5))
    assert cars.vel.norm(dim=-1).max() <= 2300 and (cars.boost >= 0).all() and (cars.boost <= 100).all()
    eye = cars.rot_mat.transpose(-1, -2) @ cars.rot_mat
    assert torch.allclose(eye, torch.eye(3).expand_as(eye), atol=1e-5)
    grounded = reset(env3v3, M.RandomStateMutator(cars_on_ground=True), num_envs=8)
    assert torch.all(grounded.game.cars.pos[..., 2] == C.CAR_SPAWN_REST_Z)


def test_weighted_sample(env3v3):
    state = reset(env3v3, M.WeightedSampleMutator((M.KickoffMutator(), 3.0), (M.RandomStateMutator(), 1.0)), num_envs=400)
    kickoff = (state.game.ball.pos == torch.tensor([0.0, 0.0, C.BALL_REST_Z])).all(1)
    assert abs(kickoff.float().mean() - 0.75) < 0.065  # 3 sigma of 400 draws at p = 0.75
    # the kickoff envs have the kickoff cars; the others random ones
    on_spot = (state.game.cars.pos[..., 2] == C.CAR_SPAWN_REST_Z).all(1)
    assert torch.all(on_spot[kickoff])


def test_reset_streams_are_per_env(env3v3):
    """Env i's start depends on its own key only: resetting 8 envs gives the first 8 of a 32-env reset."""
    mutator = M.WeightedSampleMutator((M.KickoffMutator(), 1.0), (M.RandomStateMutator(), 1.0))
    small, large = reset(env3v3, mutator, num_envs=8), reset(env3v3, mutator, num_envs=32)
    assert torch.equal(small.game.cars.pos, large.game.cars.pos[:8])
    assert torch.equal(small.game.ball.vel, large.game.ball.vel[:8])


def test_replay_mutator(tmp_path, env3v3):
    """Start states drawn from a recorded replay's frames."""
    g = torch.Generator().manual_seed(0)
    e, f, c = 2, 5, 6
    rot = M.yaw_rot_mat(torch.rand(e, f, c, generator=g) * 6).numpy()
    flags = {name: (torch.rand(e, f, c, generator=g) < 0.5).numpy() for name in ("is_on_ground", "has_jumped")}
    data = dict(tick=np.arange(e * f).reshape(e, f), ball_pos=torch.rand(e, f, 3, generator=g).numpy() * 1000,
                ball_vel=torch.rand(e, f, 3, generator=g).numpy(), ball_ang_vel=torch.rand(e, f, 3, generator=g).numpy(),
                car_pos=torch.rand(e, f, c, 3, generator=g).numpy() * 1000, car_rot_mat=rot,
                car_vel=torch.rand(e, f, c, 3, generator=g).numpy(), car_ang_vel=torch.rand(e, f, c, 3, generator=g).numpy(),
                car_boost=torch.rand(e, f, c, generator=g).numpy() * 100, car_flags=flags,
                pad_active=np.ones((e, f, 34), bool), teams=[0, 0, 0, 1, 1, 1])
    path = replay.build(**data).save(tmp_path / "states.npz")
    state = reset(env3v3, M.ReplayMutator(str(path)), num_envs=16)
    frames = data["ball_pos"].reshape(-1, 3)
    for env in range(16):
        frame = int(np.abs(frames - state.game.ball.pos[env].numpy()).sum(1).argmin())
        np.testing.assert_array_equal(state.game.ball.pos[env].numpy(), frames[frame])
        np.testing.assert_array_equal(state.game.cars.pos[env].numpy(), data["car_pos"].reshape(-1, c, 3)[frame])
        np.testing.assert_allclose(state.game.cars.rot_mat[env].numpy(), rot.reshape(-1, c, 3, 3)[frame], atol=1e-6)
        np.testing.assert_array_equal(state.game.cars.is_on_ground[env].numpy(),
                                      flags["is_on_ground"].reshape(-1, c)[frame])
    wrong = replay.build(**{**data, "teams": [0, 0, 1, 1, 1, 1]}).save(tmp_path / "other.npz")
    with pytest.raises(ValueError, match="records 6 cars \\(2 blue\\); the arena has 6 \\(3 blue\\)"):
        reset(env3v3, M.ReplayMutator(str(wrong)), num_envs=2)
