"""The game rules against the real RocketSim, event by event (`game_harness`): pad pickups, first
touches and their ball hit info, bumps and demolitions, respawns, goals and scores, kickoffs, and the
mutators RocketSim offers for them.

nitro's rules fire from its Bullet contacts between bodies (`dynamics_world`), as RocketSim's
callbacks do, and its wheels' suspension rays meet the ball and the other cars as RocketSim's do
(`vehicle.ray_cast`); each test compares the first events.
`python -m tests.parity.game_sweep` runs the same comparisons over many more scenarios.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nitro.envs.soccar import constants as C
from nitro.envs.soccar.mutators import MutatorConfig

from . import game_harness as G

HIT_POS_TOL = 0.05
"""UU: the contact point on the ball and the ball's position at the touch. Free flight agrees to
~1e-3 UU after 1 s (test_car_parity, test_ball_parity); the touch's point is computed from those
poses in Bullet's units, a few float32 ulps of 1000 UU (6e-5 each) apart."""
HIT_VEL_REL_TOL = 1e-3
"""The extra hit velocity, relative: a smooth function (a normalised direction times a speed and a
piecewise-linear factor) of states that agree to ~1e-3 UU and ~1e-2 UU/s of 300-3000."""
BALL_VEL_REL_TOL = 1e-3
"""The ball's velocity at the end of the first touch's tick (the car-ball contact solved, the extra
impulse applied), relative. Measured over 91 air hits (`game_sweep.touches`' seeds 5 and 101): median
4e-6, max 7e-5: the same contact point, normal and solve in float32, a few ulps apart. The issue's
bars are 2% (median) and 10% (p95)."""
WHEELS_FIRST_POS_TOL = 1.0
"""UU: the touch's contact point and ball position where the car's wheels rolled on the ball before
its body touched. A wheel on a body is chaotic within RocketSim itself (btSubsimplexConvexCast stops
0.5 UU short at most, at an iteration an ulp can change): over the 31 such scenes of seeds 5 and 101,
RocketSim against itself one ulp apart moved them by up to 0.50 UU (median 0.008), nitro by up to
0.40 UU."""
WHEELS_FIRST_REL_TOL = 0.05
"""The extra velocity and the ball's velocity after the touch, relative, in those scenes: RocketSim
one ulp apart, median 0.001 / 0.002, max 0.030 / 0.028; nitro median 0.002 / 0.003, max 0.041 /
0.035."""
BUMP_AGREEMENT = 0.95
"""Share of scenarios whose first bump or demolition has the same bumper, victim and kind within a
tick. The bump rule reads Bullet's box-box points in btBoxBoxDetector's order, as RocketSim's
callback does, and the wheels' rays meet the other cars as RocketSim's do: 139 of 139 agreed over
`game_sweep.bumps` (seeds 102-104, default mutators, demos on contact, team demos), the 5 with a
RocketSim wheel on the other car first included (before wheel rays met cars: 137 of 140, every miss
such a scene). The bar leaves room for RocketSim's own one-ulp chaos in other seeds."""


def _agree_first(ours, theirs, key) -> bool:
    if not ours and not theirs:
        return True
    if not ours or not theirs:
        return False
    return key(ours[0]) == key(theirs[0]) and abs(ours[0][0] - theirs[0][0]) <= 1


def test_pickups_match_rocketsim(oracle):
    """Every pickup, tick by tick: same car, pad and tick (the pads' logic is exact, and cars on
    their wheels agree to ~1e-3 UU over these 2 s)."""
    scenarios = G.pad_runs(np.random.default_rng(3), 6, 240)
    pairs = G.run_both(scenarios)
    for s, (theirs, ours) in zip(scenarios, pairs):
        assert ours.pickups == theirs.pickups, (s.family, theirs.pickups, ours.pickups)
    assert sum(len(theirs.pickups) for theirs, _ in pairs) >= 5  # the scenarios pick pads up


def test_first_touches_match_rocketsim(oracle):
    """A car flying at a ball in the air: the first touch's tick, contact point, ball position and
    extra velocity, the ball's velocity after that tick, and no extra velocity on the next tick's touch
    (RocketSim's every-other-tick rule). Where a wheel met the ball first, the bars are RocketSim's own
    spread there (`WHEELS_FIRST_POS_TOL`, `WHEELS_FIRST_REL_TOL`)."""
    scenarios = G.air_hits(np.random.default_rng(5), 16, 60)
    compared = wheels_first = 0
    for s, (theirs, ours) in zip(scenarios, G.run_both(scenarios)):
        first = theirs.touches[0][0] if theirs.touches else len(s.controls)
        assert [t[:2] for t in ours.touches[:2]] == [t[:2] for t in theirs.touches[:2]], s
        if not theirs.touches:
            continue
        compared += 1
        on_ball = any(w[0] for w in theirs.wheels[: first + 1])
        wheels_first += on_ball
        pos_tol = WHEELS_FIRST_POS_TOL if on_ball else HIT_POS_TOL
        hit_tol, ball_tol = (WHEELS_FIRST_REL_TOL,) * 2 if on_ball else (HIT_VEL_REL_TOL, BALL_VEL_REL_TOL)
        (_, _, rel, ball_pos, extra), (_, _, rel_ours, ball_pos_ours, extra_ours) = theirs.touches[0], ours.touches[0]
        assert np.abs(rel - rel_ours).max() <= pos_tol and np.abs(ball_pos - ball_pos_ours).max() <= pos_tol
        assert np.linalg.norm(extra - extra_ours) <= hit_tol * np.linalg.norm(extra)
        after, after_ours = theirs.ball_vel[first], ours.ball_vel[first]  # the contact solved, as Bullet does
        assert np.linalg.norm(after - after_ours) <= ball_tol * np.linalg.norm(after)
        if len(theirs.touches) > 1:
            assert not theirs.touches[1][4].any() and not ours.touches[1][4].any()
    assert compared >= 6 and wheels_first >= 1, (compared, wheels_first)


def test_bumps_and_demos_match_rocketsim(oracle):
    """The first bump or demolition: bumper, victim and kind, tick within one (in `BUMP_AGREEMENT` of
    the scenarios); on the same tick the bumper's contact id and cooldown and the victim's demolition
    and timer after it."""
    scenarios = G.bumps(np.random.default_rng(7), 24, 80)
    agree = events = demos = 0
    for s, (theirs, ours) in zip(scenarios, G.run_both(scenarios)):
        if not theirs.bumps and not ours.bumps:
            continue
        events += 1
        demos += any(b[3] for b in theirs.bumps)
        same = _agree_first(ours.bumps, theirs.bumps, key=lambda b: b[1:])
        agree += same
        if same and ours.bumps[0][0] == theirs.bumps[0][0]:
            t, bumper, victim, _ = theirs.bumps[0]
            for car in (bumper, victim):
                assert ours.contact[t][car][0] == theirs.contact[t][car][0]  # car_contact_id
                assert ours.contact[t][car][2] == theirs.contact[t][car][2]  # is_demoed
                assert ours.contact[t][car][1] == pytest.approx(theirs.contact[t][car][1], abs=1e-6)
                assert ours.contact[t][car][3] == pytest.approx(theirs.contact[t][car][3], abs=1e-6)
    assert events >= 12 and demos >= 3, (events, demos)
    assert agree >= BUMP_AGREEMENT * events, (agree, events)


WHEEL_ON_CAR_POS_TOL = 0.05
"""UU: the cars' positions while and after one car's wheels rest on the other, up to the first bump.
Cars driving on the floor or falling agree to ~1e-3 UU over these 0.1-0.4 s (test_car_parity); the
wheel on the car adds a GJK ray cast (btSubsimplexConvexCast stops within 0.01 BT = 0.5 UU of the
box, but both run the same iterations on poses a few ulps apart) and a friction impulse against a
moving body. Measured: at most 8.4e-3 UU (the on-contact scene, its victim rolling on the other
car for 30 ticks), 3e-4 UU in the other two."""


@pytest.mark.parametrize(
    "seed, count, index, mutators",
    [
        (102, 120, 16, None),
        (103, 40, 37, MutatorConfig(demo_mode="on_contact")),
        (104, 40, 29, MutatorConfig(enable_team_demos=True)),
    ],
    ids=["default", "demo on contact", "team demos"],
)
def test_wheels_on_cars_match_rocketsim(oracle, seed, count, index, mutators):
    """The bump scenarios of `game_sweep` (scale 1, seed 100) in which the falling victim lands a
    wheel on the other car before the first bump: nitro's suspension rays meet the other car's box as
    RocketSim's do, so tick by tick both have the same wheels touching, the cars stay together, and
    the first bump (bumper, victim, kind, tick), or none in these 48 ticks, is the same."""
    s = G.bumps(np.random.default_rng(seed), count, 90)[index]
    s = dataclasses.replace(s, controls=s.controls[:48])  # the first bumps come by tick 43
    ((theirs, ours),) = G.run_both([s], mutators)
    on_car = G.wheels_on_cars(s, theirs)
    end = theirs.bumps[0][0] + 1 if theirs.bumps else len(s.controls)
    assert on_car[:end].any()
    assert ours.bumps[:1] == theirs.bumps[:1]
    for t in range(end):
        assert (ours.wheel_contact[t] == theirs.wheel_contact[t]).all(), t
        assert np.abs(ours.poses[t][0] - theirs.poses[t][0]).max() <= WHEEL_ON_CAR_POS_TOL, t


def test_demolished_cars_respawn_as_rocketsim(oracle):
    """A supersonic car demolishes a parked opponent; 3 s later the victim respawns on the same tick
    in both (RocketSim draws its spot from its own engine: each side's is one of its four spots)."""
    scenarios = G.demos(np.random.default_rng(11), 3, 400)
    spots = {(x, y) for x, y, _ in C.CAR_RESPAWN_LOCATIONS_SOCCAR}
    for s, (theirs, ours) in zip(scenarios, G.run_both(scenarios)):
        assert [b[:4] for b in ours.bumps[:1]] == [b[:4] for b in theirs.bumps[:1]] and theirs.bumps[0][3]
        assert ours.respawns == theirs.respawns and len(theirs.respawns) == 1, (theirs.respawns, ours.respawns)
        for events in (theirs, ours):
            t, car = events.respawns[0]
            x, y, z = events.respawn_pos[0]
            assert (x, -y if car >= s.blue else y) in spots and z == C.CAR_RESPAWN_Z


def test_goals_and_scores_match_rocketsim(oracle):
    """Scripted shots: the first scoring tick and team, and the binding's score (one goal however
    many ticks the ball stays in)."""
    scenarios = G.shots(np.random.default_rng(13), 10, 120)
    goals = 0
    for s, (theirs, ours) in zip(scenarios, G.run_both(scenarios)):
        assert ours.goals[:1] == theirs.goals[:1] and ours.scores == theirs.scores, (theirs.goals[:1], ours.goals[:1])
        goals += bool(theirs.goals)
    assert goals >= 5, goals


KICKOFF_VEL_REL_TOL = 0.05
"""The first touch's extra velocity, relative, when the touch ticks may differ by one: the issue's
kickoff tolerance (RocketSim against itself moves a kickoff's first touch by a tick,
docs/reference/rocketsim_quirks.md); a tick of a boosting car's approach changes the relative
speed by ~1%."""


@pytest.mark.parametrize("blue, orange", [(1, 1), (2, 1)])
def test_kickoff_first_touches_match_rocketsim(oracle, blue, orange):
    """Every car driving at the ball from nitro's kickoff spawns: the first touch's tick (within one,
    as RocketSim against itself), the first car to touch, and its extra velocity; where a teammate
    bumps into another first (the back spots line up behind each other), that first bump. 3v3 and
    every spawn of every team size: `game_sweep`."""
    scenarios = G.kickoffs(blue, orange, 4, 330, seed=blue * 10 + orange)
    touched = 0
    for s, (theirs, ours) in zip(scenarios, G.run_both(scenarios)):
        assert bool(ours.touches) == bool(theirs.touches), s.family
        if theirs.bumps and (not theirs.touches or theirs.bumps[0][0] < theirs.touches[0][0]):
            # a teammate bumped first: the bump must match, its contact's response is the solver's
            assert _agree_first(ours.bumps, theirs.bumps, key=lambda b: b[1:]), s.family
            continue
        if not theirs.touches:
            continue
        touched += 1
        (t, car, _, _, extra), (t_ours, car_ours, _, _, extra_ours) = theirs.touches[0], ours.touches[0]
        assert abs(t - t_ours) <= 1 and car == car_ours, (s.family, theirs.touches[:2], ours.touches[:2])
        tol = HIT_VEL_REL_TOL if t == t_ours else KICKOFF_VEL_REL_TOL
        assert np.linalg.norm(extra - extra_ours) <= tol * np.linalg.norm(extra), s.family
    assert touched >= 1


@pytest.mark.parametrize(
    "mutators",
    [
        MutatorConfig(demo_mode="on_contact"),
        MutatorConfig(demo_mode="disabled", bump_force_scale=2.0, bump_cooldown_time=0.5),
        MutatorConfig(enable_team_demos=True, respawn_delay=1.0),
    ],
    ids=["on contact", "disabled", "team demos"],
)
def test_bump_mutators_match_rocketsim(oracle, mutators):
    """RocketSim's MutatorConfig for bumps: demo mode, team demos, cooldown, respawn delay."""
    scenarios = G.bumps(np.random.default_rng(17), 10, 60)
    agree = events = 0
    for s, (theirs, ours) in zip(scenarios, G.run_both(scenarios, mutators)):
        if theirs.bumps or ours.bumps:
            events += 1
            same = _agree_first(ours.bumps, theirs.bumps, key=lambda b: b[1:])
            agree += same
    assert events >= 6 and agree >= BUMP_AGREEMENT * events, (agree, events)


def test_hit_and_pad_mutators_match_rocketsim(oracle):
    """The extra hit velocity's scale and the pads' cooldowns."""
    mutators = MutatorConfig(ball_hit_extra_force_scale=2.5, boost_pad_cooldown_big=1.0, boost_pad_cooldown_small=0.5)
    scenarios = G.air_hits(np.random.default_rng(19), 6, 50) + G.pad_runs(np.random.default_rng(23), 4, 240)
    for s, (theirs, ours) in zip(scenarios, G.run_both(scenarios, mutators)):
        assert ours.pickups == theirs.pickups
        first = theirs.touches[0][0] if theirs.touches else len(s.controls)
        if theirs.touches and not any(w[0] for w in theirs.wheels[: first + 1]):
            assert ours.touches[0][:2] == theirs.touches[0][:2]
            assert np.linalg.norm(ours.touches[0][4] - theirs.touches[0][4]) <= HIT_VEL_REL_TOL * np.linalg.norm(
                theirs.touches[0][4]
            )
