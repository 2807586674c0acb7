"""The Arena shell: construction, validation errors, set_ball / reset_kickoff semantics, stepping."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nitro.envs.soccar import car
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.arena import Arena, tick
from nitro.envs.soccar.state import CarState


def _arena(n=4, **kwargs):
    return Arena(n, blue=0, orange=0, **kwargs)


def test_fresh_arena_matches_a_fresh_rocketsim_arena(mesh):
    a = _arena(3)
    assert a.ball.pos.shape == (3, 3) and a.ball.pos.dtype == torch.float32
    assert torch.equal(a.ball.pos, torch.tensor([[0.0, 0.0, C.BALL_REST_Z]] * 3))
    assert a.ball.vel.abs().max() == 0 and a.ball.ang_vel.abs().max() == 0
    assert a.cars.pos.shape == (3, 0, 3) and a.cars.rot_mat.shape == (3, 0, 3, 3)
    assert a.pads.is_active.shape == (3, C.BOOST_PAD_COUNT) and bool(a.pads.is_active.all())
    assert a.tick_time == pytest.approx(1 / 120)
    a.step(ticks=5)  # the resting ball sleeps
    assert torch.equal(a.ball.pos[:, 2], torch.full((3,), C.BALL_REST_Z))
    assert a.state.tick_count.tolist() == [5, 5, 5]


def test_default_arena_is_a_1v1_of_fresh_rocketsim_cars(mesh):
    a = Arena(2, seed=0)
    assert a.num_cars == 2 and a.car == ("octane", "octane")
    cars = a.cars
    assert cars.pos.shape == (2, 2, 3) and cars.rot_mat.shape == (2, 2, 3, 3)
    assert torch.all(cars.pos[..., 2] == C.CAR_RESPAWN_Z)  # Car::Respawn's height
    assert torch.all(cars.pos[:, 0, 1] == -4608.0) and torch.all(cars.pos[:, 1, 1] == 4608.0)  # blue, orange
    assert torch.all(cars.boost == torch.tensor(C.BOOST_SPAWN_AMOUNT)) and bool(cars.is_on_ground.all())
    # blue faces +y, orange -y (forward is the rotation's first column)
    assert torch.allclose(cars.rot_mat[:, 0, :, 0], torch.tensor([0.0, 1.0, 0.0]), atol=1e-6)
    assert torch.allclose(cars.rot_mat[:, 1, :, 0], torch.tensor([0.0, -1.0, 0.0]), atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_envs": 0}, "num_envs must be a positive int"),
        ({"num_envs": 2.5}, "num_envs must be a positive int"),
        ({"num_envs": 2, "blue": -1}, "blue must be a non-negative int"),
        ({"num_envs": 2, "tick_rate": 240}, r"tick_rate must be in \[15, 120\]"),
        ({"num_envs": 2, "mode": "fast"}, "mode must be one of"),
        ({"num_envs": 2, "mode": "graph", "device": "cpu"}, "needs a CUDA device"),
    ],
)
def test_constructor_errors(mesh, kwargs, message):
    kwargs = {"blue": 0, "orange": 0, **kwargs}
    with pytest.raises(ValueError, match=message):
        Arena(**kwargs)


def test_set_ball_selected_envs_and_broadcast(mesh):
    a = _arena(4)
    a.set_ball(pos=torch.tensor([[1.0, 2.0, 300.0], [4.0, 5.0, 600.0]]), env_ids=[1, 3])
    assert a.ball.pos[1].tolist() == [1.0, 2.0, 300.0] and a.ball.pos[3].tolist() == [4.0, 5.0, 600.0]
    assert a.ball.pos[0].tolist() == [0.0, 0.0, pytest.approx(C.BALL_REST_Z)]
    a.set_ball(vel=[0.0, 0.0, 10.0])  # one row for every env; pos unchanged
    assert a.ball.vel[:, 2].tolist() == [10.0] * 4 and a.ball.pos[1, 2] == 300.0
    mask = torch.tensor([True, False, False, True])
    a.set_ball(ang_vel=[1.0, 0.0, 0.0], env_ids=mask)
    assert a.ball.ang_vel[:, 0].tolist() == [1.0, 0.0, 0.0, 1.0]


def test_set_ball_resets_hidden_state(mesh):
    a = _arena(2)
    a.state.ball.velocity_impulse_cache = torch.ones(2, 3)
    a.set_ball(pos=[0.0, 0.0, 500.0], env_ids=[0])
    assert a.ball.velocity_impulse_cache[0].abs().max() == 0 and a.ball.velocity_impulse_cache[1].min() == 1
    assert a.ball.tick_count_since_update[0] == 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"pos": torch.zeros(3, 3)}, r"shape \(4, 3\)"),
        ({"pos": torch.zeros(4, 3, dtype=torch.float64)}, "must be float32"),
        ({"vel": torch.tensor([float("nan"), 0.0, 0.0])}, "NaN or infinite"),
        ({"pos": torch.zeros(2, 3), "env_ids": [0, 4]}, r"env_ids must be in \[0, 4\)"),
        ({"pos": torch.zeros(2, 3), "env_ids": torch.tensor([True, False])}, "mask must have shape"),
        ({"pos": torch.zeros(1, 3), "env_ids": [0.5]}, "integer"),
    ],
)
def test_set_ball_errors(mesh, kwargs, message):
    with pytest.raises(ValueError, match=message):
        _arena(4).set_ball(**kwargs)


def test_step_errors(mesh):
    a = _arena(2)
    a.step(torch.zeros(2, 0, 8))  # ball-only arenas take an [N, 0, 8] tensor or None
    with pytest.raises(ValueError, match=r"shape \(2, 0, 8\)"):
        a.step(torch.zeros(2, 1, 8))
    with pytest.raises(ValueError, match="float32"):
        a.step(torch.zeros(2, 0, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="ticks must be a positive int"):
        a.step(ticks=0)


def test_reset_kickoff(mesh):
    a = _arena(3)
    a.set_ball(pos=[100.0, 200.0, 300.0], vel=[1.0, 2.0, 3.0])
    a.state.pads.is_active[:] = False
    a.reset_kickoff(env_ids=[2])
    assert (
        a.ball.pos[2].tolist() == [0.0, 0.0, pytest.approx(C.BALL_REST_Z)] and a.ball.vel[2].abs().max() == 0
    )
    assert a.ball.pos[0, 0] == 100.0
    assert a.pads.is_active[2].all() and not a.pads.is_active[0].any()


def test_step_ticks_equals_single_ticks(mesh):
    one, many = _arena(3), _arena(3)
    start = dict(
        pos=torch.tensor([[0.0, 0.0, 400.0], [3000.0, 4500.0, 300.0], [0.0, -4800.0, 200.0]]),
        vel=torch.tensor([[300.0, 0.0, -900.0], [1500.0, 1500.0, 0.0], [0.0, -2000.0, 0.0]]),
    )
    one.set_ball(**start)
    many.set_ball(**start)
    for _ in range(40):
        one.step()
    many.step(ticks=40)
    assert torch.equal(one.ball.pos, many.ball.pos) and torch.equal(one.ball.vel, many.ball.vel)


def test_tick_is_a_pure_function(mesh):
    a = _arena(2)
    a.set_ball(pos=[0.0, 0.0, 300.0], vel=[0.0, 0.0, -500.0])
    before = a.state
    after, events = tick(before, torch.zeros(2, 0, 8), a.world)
    assert after is not before and events.goal_tick.shape == (2,) and events.ball_touch.shape == (2, 0)
    assert before.ball.pos[0, 2] == 300.0  # the input state is not modified


def test_car_state_fresh_is_rocketsims_car_state_defaults():
    cars = CarState.fresh(2, 3, torch.device("cpu"))
    for name, (shape, dtype) in CarState.FIELDS.items():
        value = getattr(cars, name)
        assert value.shape == (2, 3, *shape) and value.dtype == dtype, name
    assert torch.all(cars.pos == torch.tensor([0.0, 0.0, C.CAR_SPAWN_REST_Z]))  # CarState(): z = 17
    assert torch.equal(cars.rot_mat, torch.eye(3).expand(2, 3, 3, 3))
    assert bool(cars.is_on_ground.all()) and torch.all(cars.boost == torch.tensor(C.BOOST_SPAWN_AMOUNT))


def test_f32_rounds_as_numpy_float32():
    """`constants.f32` (plain Python, so compiled ticks fold it) is float(np.float32(x)): normals,
    ties, subnormals, overflow and signed zeros."""
    rng = np.random.default_rng(0)
    values = [0.0, -0.0, 1 / 120, 1 / 80, 3.4028235e38, 3.4028236e38, 1e-45, 7e-46, -2e-46, 2.0**-126]
    values += list(rng.uniform(-1, 1, 2000) * 10.0 ** rng.uniform(-46, 39, 2000))
    ones = np.float32(1) + np.arange(1, 200, dtype=np.float64) * 2.0**-24  # halfway and near-halfway points
    with np.errstate(over="ignore"):  # 3.4028236e38 overflows to inf, as intended
        expected = [np.float32(x) for x in values + list(ones)]
    for x, want in zip(values + list(ones), expected):
        assert C.f32(float(x)) == float(want) and np.copysign(1, C.f32(float(x))) == np.copysign(1, want)


def test_car_ticks_trace_into_one_graph(mesh):
    """The cars' pre-tick and post-tick trace with torch.compile(fullgraph=True), no graph break (no
    numpy, no host syncs), and the traced run equals eager bit for bit (the eager backend runs the
    same ops)."""
    a = Arena(3, blue=1, orange=1, seed=0)
    controls = car.CarControls.from_tensor(torch.tensor([[1.0, 0.3, 0, 0, 0, 1, 1, 0], [0.5, -1, 0, 0, 0, 0, 1, 1]]).expand(3, 2, 8))
    p = a.world.params

    def both(cars):
        cars, forces = car.pre_tick_update(cars, controls, a.world.cars, a.world.mesh, None, a.state.tick_count, p)
        return car.post_tick_update(cars, controls, p), forces

    traced = torch.compile(both, fullgraph=True, backend="eager")(a.state.cars)
    eager = both(a.state.cars)
    for name in ("pos", "vel", "ang_vel", "boost", "is_jumping"):
        assert torch.equal(getattr(traced[0], name), getattr(eager[0], name)), name
    assert torch.equal(traced[1].force, eager[1].force) and torch.equal(traced[1].torque, eager[1].torque)
