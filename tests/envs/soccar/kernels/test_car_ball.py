"""`kernels/car_ball.py` against `car_ball.py`: car-ball contacts, the kernel's closed form against
the reference's GJK."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nitro.envs.soccar import car_ball as reference
from nitro.envs.soccar import constants as C
from nitro.envs.soccar.car_config import PRESETS, CarParams
from nitro.envs.soccar.kernels import car_ball as twin
from nitro.envs.soccar.mutators import MutatorConfig, TickParams
from tests.envs.soccar.kernels.twins import DEVICE, NORMAL_TOL, VALUE_TOL, assert_close, assert_same, runnable

pytest.importorskip("triton")
pytestmark = runnable


def random_rotations(rng, n):
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    w, x, y, z = q.T
    rot = np.stack(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    ).transpose(2, 0, 1)
    return torch.tensor(rot, dtype=torch.float32)


def test_car_ball_contacts():
    # 64 envs of every preset (6 cars each), the ball around each car's box: its centre from inside
    # the margin to 8 UU beyond the contact threshold, over faces, edges and corners.
    rng = np.random.default_rng(3)
    presets = list(PRESETS)
    n, c = 64, len(presets)
    params = TickParams.from_mutators(MutatorConfig(), float(np.float32(1) / np.float32(120)))
    cars = CarParams.build(presets, torch.device("cpu"))
    box = cars.hitbox
    pos = torch.tensor(rng.uniform(-40, 40, (n, c, 3)), dtype=torch.float32)
    rot = random_rotations(rng, n * c).reshape(n, c, 3, 3)
    # the ball: one car per env is its target, the others far off
    target = torch.from_numpy(rng.integers(0, c, n))
    direction = torch.tensor(rng.normal(size=(n, 3)), dtype=torch.float32)
    direction /= direction.norm(dim=1, keepdim=True)
    half = (box.inner + box.margin[:, None])[target]
    local = direction * half * torch.tensor(rng.uniform(0.6, 1.6, (n, 1)), dtype=torch.float32)
    rows = torch.arange(n)
    centre_bt = (torch.einsum("nij,nj->ni", rot[rows, target], local + box.offset[target])) + pos[rows, target]
    gap = torch.tensor(rng.uniform(-0.01, 0.2, (n, 1)), dtype=torch.float32)  # BT, along the direction
    ball_bt = centre_bt + torch.einsum("nij,nj->ni", rot[rows, target], direction) * (params.ball_radius * C.UU_TO_BT_F32 + gap)
    far = torch.arange(c)[None] != target[:, None]
    pos = torch.where(far[..., None], pos + 400.0, pos)
    ball_pos = ball_bt * C.BT_TO_UU
    ball_rot = random_rotations(rng, n)
    expected = reference.car_ball_contacts(ball_pos, ball_rot, pos, rot, box, params, use_kernels=False)
    got = twin.launch_car_ball_contacts(
        ball_pos.to(DEVICE), ball_rot.to(DEVICE), pos.to(DEVICE), rot.to(DEVICE),
        CarParams.build(presets, torch.device(DEVICE)).hitbox, params,
    )  # fmt: skip
    assert int(expected.touched.sum()) >= n // 3  # the sample has contacts, and misses
    same = assert_same(torch.stack((got.has_manifold, got.touched, got.held), -1).reshape(n * c, 3),
                       torch.stack((expected.has_manifold, expected.touched, expected.held), -1).reshape(n * c, 3))
    same = same & expected.touched.reshape(-1)
    bt_tol = VALUE_TOL * C.UU_TO_BT  # 16 ulps of arena coordinates, in Bullet units
    flat = lambda x: x.reshape(n * c, *x.shape[2:])
    assert_close(flat(got.normal), flat(expected.normal), atol=NORMAL_TOL, rows=same)
    for name in ("point_on_car", "point_on_ball", "local_point_car", "local_point_ball", "depth"):
        assert_close(flat(getattr(got, name)), flat(getattr(expected, name)), atol=bt_tol, rows=same)
