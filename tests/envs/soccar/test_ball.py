"""Ball mechanics against known answers (RocketSim's documented behaviour, closed forms)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nitro.envs.soccar import ball
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.manifolds import sphere_manifolds
from nitro.envs.soccar.mutators import MutatorConfig, TickParams

DT = 1.0 / 120
# float32 state after 120 ticks: ~120 roundings of values of order 500, each <= 3e-5 UU.
FLOAT_TOL = 2e-3


def _arena(n=1, **kwargs):
    return Arena(n, blue=0, orange=0, **kwargs)


def test_free_fall_damping_before_gravity(mesh):
    """120 ticks from z=500: RocketSim ends at 175.567 (measured), which only damping-before-gravity
    semi-implicit Euler reproduces; without drag it would be 172.292."""
    a = _arena()
    a.set_ball(pos=[0.0, 0.0, 500.0], vel=[0.0, 0.0, -1e-6])  # not exactly zero: that would sleep
    a.step(ticks=120)
    f = float(np.float32(1 - np.float32(C.BALL_DRAG)) ** np.float32(DT))
    v, z = -1e-6, 500.0
    for _ in range(120):
        v = v * f + C.GRAVITY_Z * DT  # damping, then gravity
        z += v * DT
    assert abs(float(a.ball.pos[0, 2]) - z) < FLOAT_TOL
    assert abs(float(a.ball.pos[0, 2]) - 175.567) < 1e-3  # RocketSim's value, 3 decimals


def test_zero_velocity_ball_sleeps(mesh):
    a = _arena(2)
    a.set_ball(
        pos=torch.tensor([[0.0, 0.0, 800.0], [0.0, 0.0, 800.0]]),
        vel=torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 1e-3]]),
    )
    a.step(ticks=30)
    assert float(a.ball.pos[0, 2]) == 800.0  # frozen mid-air (the kickoff freeze)
    assert float(a.ball.pos[1, 2]) < 800.0
    assert ball.update_sleeping(a.ball).tolist() == [True, False]


def test_floor_bounce_restitution_and_rest_height(mesh):
    a = _arena()
    a.set_ball(pos=[0.0, 0.0, 400.0], vel=[0.0, 0.0, -1500.0])
    vz = []
    for _ in range(60):
        a.step()
        vz.append(float(a.ball.vel[0, 2]))
    k = next(i for i, v in enumerate(vz) if v > 0)
    # The bounce reverses the damped approach speed with e = 0.6 (gravity is applied after).
    f = float(np.float32(1 - np.float32(C.BALL_DRAG)) ** np.float32(DT))
    assert vz[k] == pytest.approx(-C.BALL_RESTITUTION * vz[k - 1] * f, rel=1e-4)
    # Dropped gently, the ball stops where it first comes within Bullet's contact gap (1.905 UU)
    # of the floor, and its velocity becomes exactly zero (so it sleeps). RocketSim 2.2.1 ends this
    # throw at z = 93.11412 with vel = 0 (the 2-decimal match allows float32 rounding of the path).
    a.set_ball(pos=[0.0, 0.0, 100.0], vel=[0.0, 0.0, -1.0])
    a.step(ticks=600)
    z = float(a.ball.pos[0, 2])
    assert (
        C.BALL_COLLISION_RADIUS_SOCCAR
        < z
        <= C.BALL_COLLISION_RADIUS_SOCCAR + C.BALL_CONTACT_BREAKING_THRESHOLD
    )
    assert z == pytest.approx(93.11412, abs=0.01)
    assert a.ball.vel.abs().max() == 0 and ball.update_sleeping(a.ball).item()


def test_rolling_spins_up_without_slipping(mesh):
    """Sliding on the floor, friction turns linear speed into spin until v = w x r (no slip); above
    6 rad/s * 91.25 UU = 547.5 UU/s the spin clamp keeps it slipping."""
    a = _arena(2)
    a.set_ball(pos=[0.0, 0.0, C.BALL_REST_Z], vel=torch.tensor([[400.0, 0.0, 0.0], [1500.0, 0.0, 0.0]]))
    a.step(ticks=120)
    v, w = a.ball.vel, a.ball.ang_vel
    arm = torch.tensor([0.0, 0.0, -C.BALL_COLLISION_RADIUS_SOCCAR])
    slip = (v + torch.linalg.cross(w, arm.expand(2, 3))).norm(dim=1)
    assert float(w[0, 1]) > 0 and float(slip[0]) < 1.0
    # Solid sphere: rolling speed = 5/7 of the sliding start (less 3%/s of drag over 1 s).
    assert float(v[0, 0]) == pytest.approx(400 * 5 / 7, rel=0.03)
    assert float(w[1].norm()) == pytest.approx(C.BALL_MAX_ANG_SPEED, rel=1e-6) and float(slip[1]) > 100


def test_speed_clamps(mesh):
    params = TickParams.from_mutators(MutatorConfig(), DT)
    state = _arena().ball
    state.vel = torch.tensor([[7000.0, 0.0, 0.0]])
    state.ang_vel = torch.tensor([[0.0, 10.0, 0.0]])
    out = ball.finish_physics_tick(state, params)
    assert float(out.vel.norm()) == pytest.approx(C.BALL_MAX_SPEED, rel=1e-6)
    assert float(out.ang_vel.norm()) == pytest.approx(C.BALL_MAX_ANG_SPEED, rel=1e-6)


def test_goal_line(mesh):
    params = TickParams.from_mutators(MutatorConfig(), DT)
    line = C.SOCCAR_GOAL_SCORE_BASE_THRESHOLD_Y + C.BALL_COLLISION_RADIUS_SOCCAR  # 5215.5
    y = torch.tensor([line - 0.01, line + 0.01, -line - 0.01, 0.0])
    pos = torch.stack([torch.zeros(4), y, torch.full((4,), 300.0)], 1)
    assert ball.is_ball_scored(pos, params).tolist() == [False, True, True, False]


def test_goal_events(mesh):
    a = _arena(3)
    a.set_ball(
        pos=torch.tensor([[0.0, 5000.0, 300.0], [0.0, -5000.0, 300.0], [0.0, 0.0, 300.0]]),
        vel=torch.tensor([[0.0, 2000.0, 0.0], [0.0, -2000.0, 0.0], [0.0, 0.0, 100.0]]),
    )
    events = a.step(ticks=30)
    assert events.goal_blue.tolist() == [True, False, False]  # the +y goal is orange's: blue scored
    assert events.goal_orange.tolist() == [False, True, False]
    # RocketSim's goal callback fired on tick 13 of this throw (arena.tick_count 12 before the step).
    assert events.goal_tick.tolist() == [13, 13, -1]
    again = a.step(ticks=2)
    assert again.goal_blue.tolist() == [True, False, False]  # still in the net: scored on every tick
    assert again.goal_tick.tolist() == [31, 31, -1]


def test_corner_contact_averages_normals(mesh):
    """Touching the floor and a side wall at once, the averaged normal is not unit length."""
    m = MutatorConfig()
    r = C.BALL_COLLISION_RADIUS_SOCCAR
    pos = torch.tensor([[C.ARENA_EXTENT_X - r - 1.0, 0.0, r + 1.0]])
    manifolds = sphere_manifolds(mesh, pos, r, m.ball_contact_gap)
    held = manifolds.held()
    assert int(held.sum()) >= 2
    mean = (manifolds.normal * held[..., None]).sum((1, 2)) / held.sum()
    assert float(mean.norm()) < 0.99

