"""`kernels/box_contacts.py` against `box_contacts.py`: `box_triangle_separation` (the separating axes);
the whole query is checked by `kernel_checks`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nitro.envs.soccar import box_contacts as reference
from nitro.envs.soccar.kernels import box_contacts as twin
from nitro.envs.soccar.kernels.vec import load, store
from tests.envs.soccar.kernels.kernel_checks import OCTANE_HALF_EXTENTS, random_rotations
from tests.envs.soccar.kernels.twins import (
    BLOCK,
    DEVICE,
    NORMAL_TOL,
    VALUE_TOL,
    assert_close,
    programs,
    runnable,
)

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable


@triton.jit
def box_triangle_kernel(
    center_ptr, axes_ptr, half_ptr, v0_ptr, v1_ptr, v2_ptr, sep_out, normal_out, n, BLOCK: tl.constexpr
):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    axes = (
        twin.axis_column(axes_ptr + lane * 9, 0, live),
        twin.axis_column(axes_ptr + lane * 9, 1, live),
        twin.axis_column(axes_ptr + lane * 9, 2, live),
    )
    box = (
        load(center_ptr + lane * 3, live, (0.0, 0.0, 0.0)),
        axes,
        load(half_ptr + lane * 0, live, (1.0, 1.0, 1.0)),
    )
    sep, normal = twin.box_triangle_separation(
        box,
        load(v0_ptr + lane * 3, live, (0.0, 0.0, 0.0)),
        load(v1_ptr + lane * 3, live, (1.0, 0.0, 0.0)),
        load(v2_ptr + lane * 3, live, (0.0, 1.0, 0.0)),
        BLOCK,
    )
    tl.store(sep_out + lane, sep, mask=live)
    store(normal_out + lane * 3, normal, live)


def test_box_triangle_separation(mesh):
    """Car-sized boxes in random orientations, centres 0-120 UU off random triangles, against that triangle."""
    n = 4 * BLOCK
    rng = np.random.default_rng(23)
    tri = torch.from_numpy(rng.integers(0, mesh.num_triangles, n))
    v = mesh.tri_verts[tri]
    bary = torch.from_numpy(rng.dirichlet((1.0, 1.0, 1.0), n).astype(np.float32))
    distance = torch.from_numpy(rng.uniform(0.0, 120.0, (n, 1)).astype(np.float32))
    center = (bary[:, :, None] * v).sum(1) + mesh.tri_normals[tri] * distance
    axes = random_rotations(n, 24)
    half = torch.tensor(OCTANE_HALF_EXTENTS)
    inputs = [x.contiguous().to(DEVICE) for x in (center, axes, half, v[:, 0], v[:, 1], v[:, 2])]
    sep, normal = torch.empty(n, device=DEVICE), torch.empty(n, 3, device=DEVICE)
    box_triangle_kernel[programs(n)](*inputs, sep, normal, n, BLOCK=BLOCK)
    ref_sep, ref_normal = reference.box_triangle_separation(center, axes, half, v[:, 0], v[:, 1], v[:, 2])
    assert int((ref_sep < 0).sum()) >= n // 4 and int((ref_sep > 0).sum()) >= n // 8
    assert_close(sep, ref_sep, atol=VALUE_TOL)
    # the axis: the same on all but lanes where two candidates separate equally (a tie, `kernel_checks`)
    assert_close(normal, ref_normal, atol=NORMAL_TOL)
