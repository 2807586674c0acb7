"""`kernels/internal_edge.py` against `internal_edge.py`: btAdjustInternalEdgeContacts."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nitro.envs.soccar import constants as C
from nitro.envs.soccar import internal_edge as reference
from nitro.envs.soccar.kernels import internal_edge as twin
from nitro.envs.soccar.kernels.vec import load, store
from nitro.envs.soccar.vec import rotate
from tests.envs.soccar.kernels.twins import (
    BLOCK,
    DEVICE,
    NORMAL_TOL,
    assert_close,
    assert_same,
    programs,
    runnable,
)

triton = pytest.importorskip("triton")
tl = triton.language
pytestmark = runnable


def contacts_near_edges(mesh, n: int, seed: int):
    """n contacts on random triangles within 0-6 UU of an edge (the smoothing acts within 5 UU), with
    normals turned from the face normal by up to 60 degrees about that edge, either way. Half are at
    convex edges with a neighbour at an angle (the clamp's case; random edges are mostly flat)."""
    rng = np.random.default_rng(seed)
    angle = mesh.edge_angle.cpu()
    bits = (mesh.edge_flags.cpu()[:, None] >> torch.arange(3)) & 1
    convex = ((bits == 1) & (angle != 0) & (angle.abs() < C.INTERNAL_EDGE_MAX_ANGLE)).nonzero()
    pick = torch.from_numpy(rng.integers(0, len(convex), n // 2))
    tri = torch.cat((convex[pick, 0], torch.from_numpy(rng.integers(0, mesh.num_triangles, n - n // 2))))
    edge = torch.cat((convex[pick, 1], torch.from_numpy(rng.integers(0, 3, n - n // 2))))
    v = mesh.tri_verts[tri]
    a = v[torch.arange(n), edge]
    b = v[torch.arange(n), (edge + 1) % 3]
    c = v[torch.arange(n), (edge + 2) % 3]
    t = torch.from_numpy(rng.uniform(0.05, 0.95, (n, 1)).astype(np.float32))
    on_edge = a + (b - a) * t
    inward = c - on_edge
    distance = torch.from_numpy(rng.uniform(0.0, 6.0, (n, 1)).astype(np.float32))
    point = on_edge + inward / inward.norm(dim=1, keepdim=True) * distance
    turn = torch.from_numpy(rng.uniform(-math.pi / 3, math.pi / 3, n).astype(np.float32))
    normal = rotate(mesh.tri_normals[tri], b - a, turn)
    return tri, point, normal


@triton.jit
def adjust_kernel(
    normal_ptr,
    point_ptr,
    tri_ptr,
    tri_verts_ptr,
    tri_normals_ptr,
    edge_angle_ptr,
    edge_flags_ptr,
    normal_out,
    changed_out,
    n,
    MAX_ANGLE: tl.constexpr,
    EDGE_DISTANCE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    tri = tl.load(tri_ptr + lane, mask=live, other=0)
    normal, changed = twin.adjust_internal_edge_contacts(
        load(normal_ptr + lane * 3, live, (0.0, 0.0, 1.0)),
        load(point_ptr + lane * 3, live, (0.0, 0.0, 0.0)),
        load(tri_verts_ptr + tri * 9, live, (0.0, 0.0, 0.0)),
        load(tri_verts_ptr + tri * 9 + 3, live, (1.0, 0.0, 0.0)),
        load(tri_verts_ptr + tri * 9 + 6, live, (0.0, 1.0, 0.0)),
        load(tri_normals_ptr + tri * 3, live, (0.0, 0.0, 1.0)),
        load(edge_angle_ptr + tri * 3, live, (7.0, 7.0, 7.0)),
        tl.load(edge_flags_ptr + tri, mask=live, other=0),
        MAX_ANGLE,
        EDGE_DISTANCE,
    )
    store(normal_out + lane * 3, normal, live)
    tl.store(changed_out + lane, changed.to(tl.int8), mask=live)


def test_adjust_internal_edge_contacts(mesh):
    n = 4 * BLOCK
    tri, point, normal = contacts_near_edges(mesh, n, seed=1)
    m = mesh.to(DEVICE)
    tri, point, normal = tri.to(DEVICE), point.to(DEVICE), normal.to(DEVICE)
    out, changed = torch.empty(n, 3, device=DEVICE), torch.empty(n, dtype=torch.int8, device=DEVICE)
    adjust_kernel[programs(n)](
        normal,
        point,
        tri.to(torch.int32),
        m.tri_verts,
        m.tri_normals,
        m.edge_angle,
        m.edge_flags,
        out,
        changed,
        n,
        MAX_ANGLE=C.INTERNAL_EDGE_MAX_ANGLE,
        EDGE_DISTANCE=C.INTERNAL_EDGE_DISTANCE_THRESHOLD,
        BLOCK=BLOCK,
    )
    v = m.tri_verts[tri]
    ref_normal, ref_changed = reference.adjust_internal_edge_contacts(
        normal, point, v[:, 0], v[:, 1], v[:, 2], m.tri_normals[tri], m.edge_angle[tri], m.edge_flags[tri]
    )
    same = assert_same(changed.bool(), ref_changed)
    # the sample exercises both rewrites: the face normal (flat or concave edges) and the clamp
    face = ref_changed & (ref_normal == m.tri_normals[tri]).all(1)
    assert int(face.sum()) >= 5 and int((ref_changed & ~face).sum()) >= 5 and int((~ref_changed).sum()) >= 5
    assert_close(out, ref_normal, atol=NORMAL_TOL, rows=same)
