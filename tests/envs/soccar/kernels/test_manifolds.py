"""`kernels/manifolds.py` against `manifolds.py`: `sort_cached_points` (btPersistentManifold), stage by
stage; the whole sphere query is checked by `kernel_checks`."""

from __future__ import annotations

import pytest
import torch

from nitro.envs.soccar import manifolds as reference
from nitro.envs.soccar.kernels import manifolds as twin
from nitro.envs.soccar.kernels.vec import load
from tests.envs.soccar.kernels.twins import (
    BLOCK,
    DEVICE,
    assert_same,
    programs,
    runnable,
)

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable


@triton.jit
def sort_cached_points_kernel(
    slot_ptr, offset_ptr, depth_ptr, new_offset_ptr, new_depth_ptr, out, n, BLOCK: tl.constexpr
):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    ox, oy, oz, depth = (), (), (), ()
    for q in tl.static_range(16):
        o = load(offset_ptr + lane * 48 + q * 3, live, (0.0, 0.0, 0.0))
        ox, oy, oz = ox + (o[0],), oy + (o[1],), oz + (o[2],)
        depth = depth + (tl.load(depth_ptr + lane * 16 + q, mask=live, other=0.0),)
    replaced = twin.sort_cached_points(
        tl.load(slot_ptr + lane, mask=live, other=0),
        (ox, oy, oz),
        depth,
        load(new_offset_ptr + lane * 3, live, (0.0, 0.0, 0.0)),
        tl.load(new_depth_ptr + lane, mask=live, other=0.0),
    )
    tl.store(out + lane, replaced, mask=live)


def test_sort_cached_points():
    """Full manifolds (4 slots of 4 points on a ball's surface) and a new point for a random slot:
    which held point it replaces. Depths repeat (a third of them equal) so the deepest-point ties
    and the area comparison both decide."""
    n = 4 * BLOCK
    g = torch.Generator().manual_seed(21)
    direction = torch.nn.functional.normalize(torch.randn(n, 17, 3, generator=g), dim=2)
    offset = direction * 91.25
    depth = -torch.randint(0, 3, (n, 17), generator=g).float() * torch.rand(n, 1, generator=g) * 4
    slot = torch.randint(0, 4, (n,), generator=g, dtype=torch.int32)
    held_offset, held_depth = offset[:, :16].contiguous(), depth[:, :16].contiguous()
    new_offset, new_depth = offset[:, 16].contiguous(), depth[:, 16].contiguous()
    inputs = [x.to(DEVICE) for x in (slot, held_offset, held_depth, new_offset, new_depth)]
    out = torch.empty(n, dtype=torch.int32, device=DEVICE)
    sort_cached_points_kernel[programs(n)](*inputs, out, n, BLOCK=BLOCK)
    rows = torch.arange(n)
    in_slot = (
        held_offset.reshape(n, 4, 4, 3)[rows, slot.long()],
        held_depth.reshape(n, 4, 4)[rows, slot.long()],
    )
    expected = reference.sort_cached_points(*in_slot, new_offset, new_depth)
    assert len(set(expected.tolist())) == 4  # every point is replaced somewhere in the sample
    assert_same(out.long(), expected)
