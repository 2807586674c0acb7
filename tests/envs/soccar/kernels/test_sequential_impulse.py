"""`kernels/sequential_impulse.py` against `sequential_impulse.py`: the contact solve of whole ticks,
on the rows `dynamics_world` builds for scenes of a ball and two cars in contact."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from nitro.envs.soccar import dynamics_world, sequential_impulse
from nitro.envs.soccar.arena import Arena
from nitro.envs.soccar.kernels import sequential_impulse as twin
from tests.envs.soccar.kernels.twins import DEVICE, REL_TOL, assert_close, runnable

pytest.importorskip("triton")
pytestmark = runnable


def captured_solves(steps: int = 4):
    """The solver inputs of a few ticks of 1v1 scenes where the bodies touch the arena and each
    other: a car under a falling ball, a second car on its roof beside it, the ball on the floor."""
    n = 8
    arena = Arena(n, blue=1, orange=1)
    rng = np.random.default_rng(5)
    pos = torch.tensor([[0.0, 0.0, 17.0], [0.0, 200.0, 35.0]]).repeat(n, 1, 1)
    pos[:, 1, 0] = torch.from_numpy(rng.uniform(-60, 60, n).astype(np.float32))
    pos[:, 1, 1] = torch.from_numpy(rng.uniform(80, 100, n).astype(np.float32))  # beside car 0
    vel = torch.from_numpy(rng.uniform(-300, 300, (n, 2, 3)).astype(np.float32))
    vel[:, 1, 1] = -200.0  # into car 0
    roof_down = torch.diag(torch.tensor([1.0, -1.0, -1.0]))
    for c in range(2):
        arena.set_car(
            c, pos=pos[:, c], vel=vel[:, c], rot_mat=torch.eye(3) if c == 0 else roof_down,
            ang_vel=torch.from_numpy(rng.normal(size=(n, 3)).astype(np.float32)),
        )
    ball = torch.tensor([0.0, 0.0, 170.0]).repeat(n, 1) + torch.from_numpy(rng.uniform(-40, 40, (n, 3)).astype(np.float32))
    ball_vel = torch.from_numpy(rng.uniform(-200, 200, (n, 3)).astype(np.float32))
    ball[::2] = torch.tensor([-160.0, 0.0, 93.15])  # half roll on the floor into car 0's tail
    ball_vel[::2] = torch.tensor([400.0, 0.0, 0.0])
    arena.set_ball(pos=ball, vel=ball_vel)
    captured = []
    solve = dynamics_world.solve_contacts

    def capture(rows, bodies, params):
        captured.append((rows, bodies, params))
        return solve(rows, bodies, params)

    dynamics_world.solve_contacts = capture
    try:
        for _ in range(steps):
            arena.step(torch.zeros(n, 2, 8))
    finally:
        dynamics_world.solve_contacts = solve
    return captured


def test_solve_contacts():
    kinds = {"car-arena": 0, "ball-arena": 0, "car-ball": 0, "car-car": 0}
    for rows, bodies, params in captured_solves():
        expected = sequential_impulse.solve_contacts(rows, bodies, params, use_kernels=False)
        to = lambda x: dataclasses.replace(x, **{f.name: getattr(x, f.name).to(DEVICE) for f in dataclasses.fields(x)})
        dv, dw, push, turn = twin.launch_solve_contacts(to(rows), to(bodies), params)
        for got, want in ((dv, expected.dv), (dw, expected.dw), (push, expected.push), (turn, expected.turn)):
            assert_close(got, want, atol=1e-5, rtol=REL_TOL)
        a, b, on = rows.body_a, rows.body_b, rows.active
        kinds["car-arena"] += int((on & (a > 0) & (b < 0)).sum())
        kinds["ball-arena"] += int((on & (a == 0) & (b < 0)).sum())
        kinds["car-ball"] += int((on & (a > 0) & (b == 0)).sum())
        kinds["car-car"] += int((on & (a > 0) & (b > 0)).sum())
    assert min(kinds.values()) >= 3, kinds  # rows of every kind were solved
