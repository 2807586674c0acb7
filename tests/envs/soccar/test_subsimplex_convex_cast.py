"""btSubsimplexConvexCast (`subsimplex_convex_cast.ray_cast_convex`) against hand-worked ray hits: a
car-sized box, rotated, and a ball-sized sphere.

The cast stops once its point is within sqrt(1e-4) = 0.01 BT of the shape (MAX_CONVEX_CAST_EPSILON),
and it approaches from outside, so the hit point lies before the true surface by at most that along
the surface normal; its normal is the last GJK direction, within a few degrees of the true one.
"""

from __future__ import annotations

import math

import torch

from nitro.envs.soccar.gjk_pair_detector import ConvexShape
from nitro.envs.soccar.rigid_body import basis_from_quat, quat_from_axis_angle
from nitro.envs.soccar.subsimplex_convex_cast import ray_cast_convex

STOP = 0.01  # BT: the loop's stopping distance (sqrt of MAX_CONVEX_CAST_EPSILON)
NORMAL_DEG = 5.0  # the last GJK direction against the true normal (measured: median 1.4, max 3.8)


def _angle_deg(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.rad2deg(torch.acos((a * b).sum(-1).clamp(-1.0, 1.0)))


def test_rays_against_a_rotated_box():
    """A box of half extents 1.2 x 0.84 x 0.38 BT (inner + margin 0.038) turned 30 degrees about z:
    rays straight down onto its top face hit at its height, with the face's normal; rays that start
    inside, miss it, or end before it do not hit."""
    p = 5
    half = torch.tensor([1.2, 0.84, 0.38]).expand(p, 3)
    margin = torch.full((p,), 0.038)
    axis = torch.tensor([0.0, 0.0, 1.0]).expand(p, 3)
    basis = basis_from_quat(quat_from_axis_angle(axis, torch.full((p,), math.pi / 6)))
    origin = torch.tensor([1.0, -2.0, 0.5]).expand(p, 3)
    box = ConvexShape("box", origin, margin, basis=basis, half=half - margin[:, None])
    start = origin + torch.tensor(
        [[0.3, 0.2, 1.0], [-0.5, 0.1, 0.6], [0.0, 0.0, 0.0], [3.0, 0.0, 1.0], [0.3, 0.2, 1.0]]
    )
    length = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.5])
    end = start - torch.tensor([0.0, 0.0, 1.0]) * length[:, None]
    hit, fraction, normal = ray_cast_convex(box, start, end)
    assert hit.tolist() == [True, True, False, False, False]
    top = origin[0, 2] + 0.38
    expected = (start[:2, 2] - top) / length[:2]
    assert (fraction[:2] <= expected + 1e-6).all() and (fraction[:2] >= expected - STOP / length[:2]).all()
    assert (_angle_deg(normal[:2], torch.tensor([0.0, 0.0, 1.0])) <= NORMAL_DEG).all()
    assert (fraction[2:] == 1.0).all() and (normal[2:] == 0).all()


def test_rays_against_a_sphere():
    """A ball of radius 1.825 BT: rays from random points around it, aimed near its centre, hit where
    the line meets the sphere (up to the stopping distance, before it), with the radial normal."""
    gen = torch.Generator().manual_seed(0)
    p, radius = 512, 1.825
    center = torch.tensor([0.5, 1.0, 2.0]).expand(p, 3)
    sphere = ConvexShape("sphere", center, torch.full((p,), radius))
    direction = torch.nn.functional.normalize(torch.randn(p, 3, generator=gen), dim=-1)
    start = center + direction * 2.8
    aim = torch.nn.functional.normalize(center - start + 0.5 * torch.randn(p, 3, generator=gen), dim=-1)
    end = start + aim * 1.5
    hit, fraction, normal = ray_cast_convex(sphere, start, end)
    rel = start - center
    b = (rel * aim).sum(-1)
    disc = b * b - ((rel * rel).sum(-1) - radius * radius)
    t = -b - torch.sqrt(disc.clamp(min=0))
    exact = (disc > 0) & (t > 0) & (t < 1.5)
    sure = exact & (t < 1.5 - STOP) & (disc > 1e-3)  # away from the ray's end and from grazing rays
    assert hit[sure].all() and not hit[~exact & (disc < -1e-3)].any()
    both = hit & exact
    assert both.sum() > 100
    along = (t - fraction * 1.5)[both]  # how far before the true hit the cast stopped, BT
    cos = -(aim * (start + aim * t[:, None] - center) / radius).sum(-1)[both]
    assert (along >= -1e-4).all() and (along * cos <= STOP + 1e-4).all()
    true_normal = torch.nn.functional.normalize(start + aim * (fraction * 1.5)[:, None] - center, dim=-1)
    assert (_angle_deg(normal[both], true_normal[both]) <= NORMAL_DEG).all()
