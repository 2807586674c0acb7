"""The exported bot's runtime (nitro/deploy/runtime.py, shipped as nitro_runtime.py): RLBot v5
GamePackets built from nitro states with `rlbot`'s own types give the observations the training env
computes on those states, the policy's actions, and the training env's tick skip and action delay.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from deploy_helpers import OBS_ATOL, field_pads, load_runtime, mixed, play
from rlbot import flat

from nitro.core import rng
from nitro.deploy import game_packet as packets
from nitro.deploy import runtime
from nitro.deploy.export import bot_config
from nitro.envs.soccar import ArenaEvents, fold_tick
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.rl import Soccar, SoccarParams
from nitro.envs.soccar.rl.state_mutators import (
    FixedTeamSizeMutator,
    KickoffMutator,
    MutatorSequence,
    RandomStateMutator,
)

ORDER = ("run", "advanced", "lstm", "continuous")


def start_states(n: int, seed: int):
    """[n] one-env matches, 1v1 Octanes: even envs kickoffs (random spots), odd envs GigaLearn's random
    states (cars in the air, spinning, or level on the floor, wheels down) with a third of the pads
    taken at random times; in env 3 the blue car and in env 5 the orange car are demolished."""
    kickoff_env, random_env = Soccar(SoccarParams()), Soccar(SoccarParams(mutator=RandomStateMutator()))
    keys = rng.env_keys(rng.key(seed, "cpu"), n)
    kickoff = kickoff_env.reset(keys, n, "cpu")
    spread = random_env.reset(rng.fold_in(keys, 1), n, "cpu")
    cars = spread.game.cars
    floor = cars.pos[..., 2] < C.CAR_SPAWN_REST_Z + 1  # the mutator's cars put level on the floor
    cars.is_on_ground, cars.wheels_with_contact = floor, floor.unsqueeze(-1).expand(-1, -1, 4).clone()
    g = torch.Generator().manual_seed(seed)
    pads = spread.game.pads
    pads.is_active = torch.rand(n, 34, generator=g) > 1 / 3
    respawn = torch.tensor([10.0] * len(C.BOOST_PADS_BIG) + [4.0] * len(C.BOOST_PADS_SMALL))
    pads.cooldown = torch.where(pads.is_active, 0.0, torch.rand(n, 34, generator=g) * respawn)
    for env, car in ((3, 0), (5, 1)):
        cars.is_demoed[env, car], cars.demo_respawn_timer[env, car] = True, 2.0
    return mixed(kickoff, spread), kickoff_env.arena(n, "cpu").world


def test_bots_play_as_trained(bots):
    """Eight matches at once, two per bot (a kickoff and a random state), 48 ticks of every car played
    by its bot: each decision's observation, action and controls and each tick's applied controls
    match the training env (deploy_helpers.play), over every observation builder and action parser the env
    offers, normalized observations, action masks, an LSTM, and tick skips 4, 6 and 8 with
    delays 0, 1, 2 and 7. The coverage check makes sure the matches went through the situations the
    packet adapter must reconstruct (jumps, flips, flip windows, demolitions, taken pads, ...)."""
    start, world = start_states(8, seed=5)
    seen = play([bots[ORDER[e // 2]] for e in range(8)], start, world, ticks=48)
    assert seen["decisions"] == 2 * 2 * (6 + 6 + 12 + 8)
    for situation in ("airborne", "jumping", "jumping on the ground", "flip window open", "flipping", "demolished",
                      "supersonic", "boosting", "powersliding", "pads taken"):
        assert seen[situation] > 0, f"no decision saw a car {situation}: {dict(seen)}"


def kickoff_packet(env: Soccar, seed: int, frame: int, phase=flat.MatchPhase.Kickoff, order=None):
    state = env.reset(rng.env_keys(rng.key(seed, "cpu"), 1), 1, "cpu")
    return state, packets.on_the_wire(packets.game_packet(state, frame=frame, phase=phase, order=order))


@pytest.mark.parametrize("blue, orange, order", [(2, 2, [3, 0, 4, 1]), (1, 2, None), (3, 3, [3, 4, 0, 5, 1, 2])])
def test_team_sizes_up_to_the_padding(bots, blue, orange, order):
    """The run's bot (RLGym's DefaultObs padded to 3 per team) plays any team size up to 3v3 and for
    either team: at a kickoff, every player's observation equals the one the env with those teams
    builds (teammates and opponents in their slots, orange's view turned half a turn), whatever the
    order of the players in the packet (a team's players fill its slots in packet order; ``order``
    lists the env's cars, 0-2 blue and 3-5 orange, each team in car order)."""
    t = bots["run"]
    mutator = MutatorSequence(FixedTeamSizeMutator(blue, orange), KickoffMutator())
    env = Soccar(dataclasses.replace(t.env.params, blue=3, orange=3, mutator=mutator))
    state, packet = kickoff_packet(env, seed=blue + orange, frame=0, order=order)
    obs = env.observe(state)
    bot_runtime = load_runtime(t.folder)
    players = [p.player_id - 1 for p in packet.players]  # the env's car index of each packet player
    for index, car in enumerate(players):
        agent = bot_runtime.Agent(t.folder, field_pads(), index)
        agent.step(packet)
        torch.testing.assert_close(torch.from_numpy(agent.obs), obs[car], atol=OBS_ATOL, rtol=0)


def test_too_many_cars_for_the_slots(bots):
    t = bots["lstm"]  # GigaLearn's DefaultObs: exactly the run's 1v1
    env = Soccar(dataclasses.replace(t.env.params, blue=2, orange=1))
    _, packet = kickoff_packet(env, seed=0, frame=0)
    agent = load_runtime(t.folder).Agent(t.folder, field_pads(), 0)
    with pytest.raises(ValueError, match="2 blue and 1 orange cars; this bot was exported for at most 1 blue"):
        agent.step(packet)


def test_kickoffs_start_fresh_episodes(bots):
    """Countdowns and goal celebrations get neutral controls and no decisions; each kickoff starts an
    episode afresh (the replayed car state, the held controls and the LSTM state reset): the second
    kickoff, after a stretch of play, is decided exactly as the first."""
    t = bots["lstm"]
    agent = load_runtime(t.folder).Agent(t.folder, field_pads(), 1)
    state, countdown = kickoff_packet(t.env, seed=1, frame=0, phase=flat.MatchPhase.Countdown)
    assert agent.step(countdown).tolist() == [0.0] * 8 and agent.obs is None
    _, kickoff = kickoff_packet(t.env, seed=1, frame=1)
    first = agent.step(kickoff).copy()
    first_obs, first_hidden = agent.obs.copy(), agent.hidden["hidden.h"].copy()
    torch.testing.assert_close(torch.from_numpy(first_obs), t.env.observe(state)[1], atol=OBS_ATOL, rtol=0)
    spread = Soccar(dataclasses.replace(t.env.params, mutator=RandomStateMutator()))
    for frame in range(2, 40):
        _, packet = kickoff_packet(spread, seed=frame, frame=frame, phase=flat.MatchPhase.Active)
        agent.step(packet)
    assert not (agent.hidden["hidden.h"] == first_hidden).all()
    _, goal = kickoff_packet(t.env, seed=2, frame=40, phase=flat.MatchPhase.GoalScored)
    assert agent.step(goal).tolist() == [0.0] * 8
    _, kickoff = kickoff_packet(t.env, seed=1, frame=400)
    assert agent.step(kickoff).tolist() == first.tolist()
    assert (agent.obs == first_obs).all() and (agent.hidden["hidden.h"] == first_hidden).all()


def test_euler_angles_as_rocketsim_converts_them():
    """The packet's Euler angles -> rotation matrix is RocketSim's Angle::ToRotMat, and nitro's
    matrix -> the packet's angles its RotMat::ToAngle (the real `rocketsim` binding)."""
    RocketSim = pytest.importorskip("RocketSim")
    g = torch.Generator().manual_seed(0)
    worst_mat = worst_angle = 0.0
    for yaw, pitch, roll in (torch.rand(300, 3, generator=g, dtype=torch.float64) * 2 - 1).tolist():
        yaw, pitch, roll = yaw * 3.14159, pitch * 1.5, roll * 3.14159  # |pitch| < 1.5: away from gimbal lock
        m = RocketSim.Angle(yaw, pitch, roll).as_rot_mat()
        expected = torch.tensor([m.forward.as_tuple(), m.right.as_tuple(), m.up.as_tuple()]).T
        mine = torch.from_numpy(runtime.euler_to_rot_mat(pitch, yaw, roll))
        worst_mat = max(worst_mat, (mine - expected).abs().max().item())
        angle = m.as_angle()
        p, y, r = packets.rot_mat_to_euler(expected.numpy())
        worst_angle = max(worst_angle, abs(p - angle.pitch), abs(y - angle.yaw), abs(r - angle.roll))
    # RocketSim computes in float32: its matrix entries are within a few ulps of 1 (6e-8 each) of the
    # float64 formula rounded once, and its angles within asin/atan2's float32 error (1e-6 rad) at |pitch| < 1.5
    assert worst_mat <= 3e-7 and worst_angle <= 2e-6, (worst_mat, worst_angle)


REPLAYED = ("is_on_ground", "has_jumped", "is_jumping", "has_double_jumped", "has_flipped", "flip_time",
            "is_flipping", "air_time_since_jump", "handbrake_val", "is_boosting", "boosting_time", "is_supersonic",
            "supersonic_time", "boost", "is_demoed", "demo_respawn_timer", "last_controls", "pos", "vel", "ang_vel")
"""The CarState fields the packet adapter reads or reconstructs exactly (rot_mat within float32 ulps;
jump_time once the car jumps in the episode: the packet says nothing of an earlier jump's time)."""


def scripted_controls(tick: int) -> torch.Tensor:
    """[6, 1, 8] controls of six scripted one-car envs on ``tick`` (throttle, steer, pitch, yaw, roll,
    jump, boost, handbrake), each aimed at a rule the adapter replays from the packet's inputs."""
    c = torch.zeros(6, 1, 8)
    c[0, 0, 5] = float(tick < 12 or 20 <= tick < 22)  # a held jump off the floor, then a flip...
    c[0, 0, 2] = -1.0 * (20 <= tick < 22)  # ...forward
    c[1, 0, 5] = float(tick < 1 or 10 <= tick < 13)  # a tapped jump (it ends on the ground), a double jump
    c[2, 0, 5] = float(tick < 20 or tick >= 25)  # jump held through the landing, released, pressed again
    c[3, 0, 0], c[3, 0, 6] = 1.0, float(tick < 2 or tick >= 20)  # a boost tap (0.1 s at least), then until empty
    c[4, 0, 0], c[4, 0, 6], c[4, 0, 7] = 1.0, 1.0, float(tick // 10 % 2 == 0)  # supersonic, powerslides on and off
    c[5, 0, 5] = float(tick >= 30)  # the flip window closes in the air; then a jump press does nothing
    return c


def test_packet_adapter_reconstructs_the_car_state():
    """Six one-car envs driven by scripted inputs through the rules the packet lacks (jump timers,
    the jump edge, the flip window closing, double jumps, the boost's minimum time and running out,
    supersonic and powerslide timers): after every tick the adapter's state, built from that tick's
    packet alone plus what it replayed from earlier packets, equals the simulator's car field by
    field (exactly; the rotation within float32 rounding of the Euler angles)."""
    env = Soccar(SoccarParams(blue=1, orange=0))
    state = env.reset(rng.env_keys(rng.key(0, "cpu"), 6), 6, "cpu")
    cars = state.game.cars
    cars.boost[3], cars.boost[4] = 10.0, 100.0
    cars.vel[4] = cars.rot_mat[4, :, :, 0] * 2150.0  # just under supersonic, on the floor, boosting
    for env_id, z, vz, time_since_jump in ((2, 40.0, -500.0, 1.0), (5, 1000.0, 0.0, 1.15)):  # airborne, jumped
        cars.pos[env_id, 0, 2], cars.vel[env_id, 0, 2] = z, vz
        cars.is_on_ground[env_id], cars.has_jumped[env_id] = False, True
        cars.jump_time[env_id], cars.air_time_since_jump[env_id] = 1.0, time_since_jump
    cars.has_double_jumped[2] = True  # falling with its jumps spent: it lands holding jump
    world = env.arena(6, "cpu").world
    adapters = [runtime.PacketAdapter(bot_config(env, 1, 0), field_pads()) for _ in range(6)]
    jumped_here = ~cars.has_jumped[:, 0]  # jump_time is the packet's only for jumps begun in the episode
    for e, adapter in enumerate(adapters):  # the episode's first packet: the state as set
        adapter.update(packets.on_the_wire(packets.game_packet(state, env=e, frame=0)), 1)
    for tick in range(60):
        game, _ = fold_tick(state.game, ArenaEvents.none(6, 1, "cpu"), scripted_controls(tick), world)
        state = dataclasses.replace(state, game=game)
        cars = state.game.cars
        jumped_here |= ~cars.has_jumped[:, 0]
        for e, adapter in enumerate(adapters):
            adapter.update(packets.on_the_wire(packets.game_packet(state, env=e, frame=tick + 1)), 1)
            rebuilt = adapter.state()
            for name in REPLAYED + (("jump_time",) if jumped_here[e] else ()):
                expected = getattr(cars, name)[e].numpy()
                got = rebuilt[f"cars.{name}"][0]
                assert (got == expected).all(), (tick, e, name, got, expected)
            torch.testing.assert_close(torch.from_numpy(rebuilt["cars.rot_mat"][0]), state.game.cars.rot_mat[e],
                                       atol=3e-7, rtol=0)  # a few float32 ulps of 1 (deploy_helpers.OBS_ATOL)


def test_refuses_fields_without_the_soccar_pads(bots):
    t = bots["run"]
    pads = field_pads()
    with pytest.raises(ValueError, match="has 33 boost pads, the bot was trained on a soccar field with 34"):
        load_runtime(t.folder).Agent(t.folder, pads[:-1], 0)
    pads[5] = (pads[5][0] + 300.0, pads[5][1])
    with pytest.raises(ValueError, match="boost pad 5 of the match at .* is not a soccar pad"):
        load_runtime(t.folder).Agent(t.folder, pads, 0)
