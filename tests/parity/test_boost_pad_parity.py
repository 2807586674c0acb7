"""Boost pads against the real RocketSim, tick by tick.

Cars start near random pads with random boost and drive over them with random throttle and steer in a
RocketSim arena. nitro's pad stages (`boost_pads.pre_tick_update`, `check_collision`,
`post_tick_update`) run beside it on RocketSim's own car poses after every tick, so the test isolates
the pad logic from the car physics. Pads, cooldowns, locks and each car's boost must agree exactly:
every quantity is either an integer/flag or float32 arithmetic done in the same order as RocketSim.
"""

from __future__ import annotations

import numpy as np
import torch

from nitro.envs.soccar import boost_pads
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car_config import CarParams
from nitro.envs.soccar.mutators import MutatorConfig, TickParams
from nitro.envs.soccar.state import BoostPadConfig, BoostPadState, CarState

PRESETS = ("octane", "dominus", "merc")
TICKS = 360
BALL_PARK = (4000.0, 5000.0, 1000.0)  # behind a corner wall: no car reaches it


def _drive_over_pads(rs, seed: int):
    """One RocketSim game of 3 cars over the pads; per tick: car poses, boosts and pad states."""
    rng = np.random.default_rng(seed)
    arena = rs.Arena(rs.GameMode.SOCCAR, tick_rate=120)
    arena.ball.set_state(rs.BallState(pos=rs.Vec(*BALL_PARK)))
    pad_pos = np.array(C.BOOST_PADS_BIG + C.BOOST_PADS_SMALL, np.float32)
    starts = rng.choice(len(pad_pos), size=len(PRESETS), replace=False)
    cars = []
    for preset, pad in zip(PRESETS, starts):
        car = arena.add_car(rs.Team.BLUE, getattr(rs.CarConfig, preset.upper()))
        yaw = rng.uniform(-np.pi, np.pi)
        xy = pad_pos[pad, :2] + rng.uniform(-200, 200, 2)
        state = rs.CarState()
        state.pos = rs.Vec(float(xy[0]), float(xy[1]), 17.0)
        state.rot_mat = rs.Angle(yaw, 0, 0).as_rot_mat()
        state.vel = rs.Vec(float(400 * np.cos(yaw)), float(400 * np.sin(yaw)), 0.0)
        state.boost = float(rng.choice([rng.uniform(0, 95), 100.0], p=[0.85, 0.15]))
        car.set_state(state)
        cars.append(car)
    rs_pads = arena.get_boost_pads()
    # the binding lists pads in its own order: map them to RocketSim's internal order by position
    order = [int(np.argmin(np.abs(pad_pos - np.asarray(p.get_pos().as_numpy())).sum(1))) for p in rs_pads]
    assert sorted(order) == list(range(len(pad_pos)))

    record = {k: [] for k in ("pos", "rot_mat", "boost", "is_active", "cooldown", "locked")}
    boost0 = [c.get_state().boost for c in cars]
    for _ in range(TICKS):
        for car in cars:
            car.set_controls(rs.CarControls(throttle=float(rng.choice([1.0, 0.5, -0.3])),
                                            steer=float(rng.uniform(-1, 1))))
        arena.step(1)
        states = [c.get_state() for c in cars]
        record["pos"].append([s.pos.as_numpy() for s in states])
        record["rot_mat"].append([np.asarray(s.rot_mat.as_numpy()).T for s in states])
        record["boost"].append([s.boost for s in states])
        pad_states = [None] * len(rs_pads)
        for i, p in zip(order, rs_pads):
            pad_states[i] = p.get_state()
        record["is_active"].append([s.is_active for s in pad_states])
        record["cooldown"].append([s.cooldown for s in pad_states])
        record["locked"].append([s.prev_locked_car_id for s in pad_states])
    ids = [c.id for c in cars]
    assert ids == [1, 2, 3], ids  # nitro's car index + 1
    return np.asarray(boost0, np.float32), {k: np.asarray(v) for k, v in record.items()}


def test_pads_match_rocketsim_tick_by_tick(oracle):
    device = torch.device("cpu")
    car_params = CarParams.build(PRESETS, device)
    config = BoostPadConfig.soccar(device)
    params = TickParams.from_mutators(MutatorConfig(), float(np.float32(1.0 / 120)))
    pickups_seen = box_tests = 0
    for seed in range(10):
        boost0, rec = _drive_over_pads(oracle, seed)
        pads = BoostPadState.fresh(1, device)
        boost = torch.tensor(boost0)[None]
        for t in range(TICKS):
            cars = CarState.fresh(1, len(PRESETS), device)
            cars.pos = torch.tensor(rec["pos"][t], dtype=torch.float32)[None]
            cars.rot_mat = torch.tensor(rec["rot_mat"][t], dtype=torch.float32)[None]
            cars.boost = boost
            pads = boost_pads.pre_tick_update(pads, params)
            box_tests += int((pads.prev_locked_car_id > 0).sum())
            locked = boost_pads.check_collision(pads, cars, car_params, config)
            pads, cars, pickup_pad = boost_pads.post_tick_update(pads, cars, locked, config, params)
            pickups_seen += int((pickup_pad >= 0).sum())
            where = f"seed {seed}, tick {t}"
            np.testing.assert_array_equal(pads.prev_locked_car_id[0].numpy(), rec["locked"][t], where)
            np.testing.assert_array_equal(pads.is_active[0].numpy(), rec["is_active"][t], where)
            np.testing.assert_array_equal(pads.cooldown[0].numpy(), rec["cooldown"][t].astype(np.float32), where)
            np.testing.assert_array_equal(cars.boost[0].numpy(), rec["boost"][t].astype(np.float32), where)
            boost = cars.boost
    # the scenarios must exercise pickups and the lock box (the test for a car locked last tick)
    assert pickups_seen >= 10, pickups_seen
    assert box_tests >= 100, box_tests
