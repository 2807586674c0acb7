"""`kernels/car_car.py`'s dBoxBox2 against `car_car.box_box`, on scenes that reach each of its paths:
boxes resting face on face (the incident face clipped to 8 points, then culled to 4), tilted
(a clipped polygon of 5 to 7 points), edges crossed, and random overlaps. The whole manifold in
random games is `test_car_bump`'s."""

from __future__ import annotations

import math

import pytest
import torch

from nitro.envs.soccar import car_car as reference
from nitro.envs.soccar.rigid_body import angle_to_rot_mat
from nitro.envs.soccar.kernels import car_car as twin
from nitro.envs.soccar.kernels.vec import load, store
from tests.envs.soccar.kernels.twins import BLOCK, DEVICE, NORMAL_TOL, assert_close, assert_same, programs, runnable

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable
POINT_TOL = 2e-5
"""BT: points and depths of boxes within ~4 BT of the origin (an ulp: 4.8e-7), after the clipping's
chains of products."""


@triton.jit
def box_box_kernel(p1_ptr, r1_ptr, a_ptr, p2_ptr, r2_ptr, b_ptr, count_ptr, normal_ptr, points_ptr, depths_ptr, n,
                   BLOCK: tl.constexpr):  # fmt: skip
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    zero = (0.0, 0.0, 0.0)
    r1 = (load(r1_ptr + lane * 9, live, zero), load(r1_ptr + lane * 9 + 3, live, zero), load(r1_ptr + lane * 9 + 6, live, zero))
    r2 = (load(r2_ptr + lane * 9, live, zero), load(r2_ptr + lane * 9 + 3, live, zero), load(r2_ptr + lane * 9 + 6, live, zero))
    count, normal, points, depths = twin.box_box(
        load(p1_ptr + lane * 3, live, zero), r1, load(a_ptr + lane * 3, live, zero),
        load(p2_ptr + lane * 3, live, zero), r2, load(b_ptr + lane * 3, live, zero),
    )  # fmt: skip
    tl.store(count_ptr + lane, count, mask=live)
    store(normal_ptr + lane * 3, normal, live)
    for k in tl.static_range(4):
        store(points_ptr + (lane * 4 + k) * 3, points[k], live)
        tl.store(depths_ptr + lane * 4 + k, depths[k], mask=live)


def scenes(n: int, seed: int):
    """Pairs of boxes the size of cars' hitboxes (BT) in four families of ``n // 4``: (p1, r1, a, p2,
    r2, b)."""
    g = torch.Generator().manual_seed(seed)
    m = n // 4
    half = torch.tensor([1.18, 0.84, 0.36]).expand(n, 3).clone()
    a = half * (1 + 0.2 * torch.rand(n, 3, generator=g))
    b = half * (1 + 0.2 * torch.rand(n, 3, generator=g))
    yaw1 = (torch.rand(n, generator=g) * 2 - 1) * math.pi
    yaw2 = yaw1.clone()
    pitch2 = torch.zeros(n)
    roll2 = torch.zeros(n)
    p1 = torch.randn(n, 3, generator=g)
    offset = torch.zeros(n, 3)
    # face on face: box 2 on top of box 1, turned a little about z
    yaw2[:m] += (torch.rand(m, generator=g) - 0.5) * 0.6
    offset[:m, :2] = (torch.rand(m, 2, generator=g) - 0.5) * 0.8
    offset[:m, 2] = a[:m, 2] + b[:m, 2] - 0.05 * torch.rand(m, generator=g)
    # tilted onto it: fewer clipped points
    s = slice(m, 2 * m)
    yaw2[s] += (torch.rand(m, generator=g) - 0.5) * 2
    pitch2[s] = (torch.rand(m, generator=g) - 0.5) * 0.5
    roll2[s] = (torch.rand(m, generator=g) - 0.5) * 0.5
    offset[s, :2] = (torch.rand(m, 2, generator=g) - 0.5) * 1.0
    offset[s, 2] = a[s, 2] + b[s, 2] - 0.1 * torch.rand(m, generator=g)
    # edges crossed: box 1 rolled 45 degrees (a top edge along x), box 2 pitched 45 degrees (a bottom
    # edge along y) just above it
    s = slice(2 * m, 3 * m)
    roll1 = torch.zeros(n)
    roll1[s] = math.pi / 4 + (torch.rand(m, generator=g) - 0.5) * 0.2
    pitch2[s] = math.pi / 4 + (torch.rand(m, generator=g) - 0.5) * 0.2
    yaw2[s] += (torch.rand(m, generator=g) - 0.5) * 0.4
    reach = (a[s, 1] + a[s, 2] + b[s, 0] + b[s, 2]) / math.sqrt(2)
    offset[s, :2] = (torch.rand(m, 2, generator=g) - 0.5) * 0.4
    offset[s, 2] = reach - 0.05 - 0.05 * torch.rand(m, generator=g)
    # anywhere near each other, any orientation
    s = slice(3 * m, n)
    k = n - 3 * m
    yaw2[s] = (torch.rand(k, generator=g) * 2 - 1) * math.pi
    pitch2[s] = (torch.rand(k, generator=g) - 0.5) * math.pi
    roll2[s] = (torch.rand(k, generator=g) * 2 - 1) * math.pi
    offset[s] = (torch.rand(k, 3, generator=g) - 0.5) * 3.0
    r1 = angle_to_rot_mat(yaw1, torch.zeros(n), roll1)
    r2 = angle_to_rot_mat(yaw2, pitch2, roll2)
    p2 = p1 + (angle_to_rot_mat(yaw1, torch.zeros(n), torch.zeros(n)) @ offset[..., None])[..., 0]
    return p1, r1, a, p2, r2, b


def test_box_box_matches_the_reference():
    n = 512
    p1, r1, a, p2, r2, b = scenes(n, seed=5)
    count, normal, points, depths = reference.box_box(p1, r1, a, p2, r2, b)
    got = [torch.zeros(n, dtype=torch.int32), torch.zeros(n, 3), torch.zeros(n, 4, 3), torch.zeros(n, 4)]
    inputs = [x.contiguous().to(DEVICE) for x in (p1, r1, a, p2, r2, b)]
    got = [x.to(DEVICE) for x in got]
    box_box_kernel[programs(n)](*inputs, *got, n, BLOCK=BLOCK)
    got_count, got_normal, got_points, got_depths = got
    same = assert_same(got_count.long(), count)
    touching = (count > 0).cpu() & same
    # every path is reached (seed 5: 151 faces clipped to 5-8 points and culled to 4, 122 crossed edges
    # among 225 single points, 13 pairs apart)
    assert int((count == 4).sum()) > 150 and int((count == 1).sum()) > 150 and int((count == 0).sum()) > 5
    assert_close(got_normal[touching], normal[touching], atol=NORMAL_TOL)
    held = (torch.arange(4) < count.cpu()[:, None]) & same[:, None]
    assert_close(got_points[held], points[held], atol=POINT_TOL)
    assert_close(got_depths[held], depths[held], atol=POINT_TOL)
