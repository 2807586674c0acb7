"""Bullet's internal-edge info (btInternalEdgeUtility.cpp, btGenerateInternalEdgeInfo), per mesh file.

Load time: the angles and flags `internal_edge.adjust_internal_edge_contacts` reads each tick.
"""

from __future__ import annotations

import numpy as np

from nitro.envs.soccar import constants as C

# btTriangleInfo flags
TRI_INFO_V0V1_CONVEX = 1
TRI_INFO_V1V2_CONVEX = 2
TRI_INFO_V2V0_CONVEX = 4
TRI_INFO_V0V1_SWAP_NORMALB = 8
TRI_INFO_V1V2_SWAP_NORMALB = 16
TRI_INFO_V2V0_SWAP_NORMALB = 32


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _rotate_np(v: np.ndarray, axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Rotate ``v`` about ``axis`` (any length) by ``angle`` (right-handed), as btQuaternion does."""
    k = _unit(axis)
    c, s = np.cos(angle)[..., None], np.sin(angle)[..., None]
    return v * c + np.cross(k, v) * s + k * (k * v).sum(-1, keepdims=True) * (1 - c)


def internal_edge_info(vertices: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per triangle of one mesh file: edge angles [T, 3] (2*pi where no neighbour) and flags [T].

    Port of Bullet's btConnectivityProcessor as RocketSim runs it (btGenerateInternalEdgeInfo per
    file, so seams between files get no smoothing), vectorised over all (triangle, neighbour) pairs.
    The soccar meshes are clean (unique vertex positions, at most two triangles per edge), so shared
    vertices are shared indices.
    """
    verts = vertices.astype(np.float64)
    num_tris = len(indices)
    # Every directed edge slot (triangle a, edge e = v_e -> v_(e+1)); pair it with the other owner.
    a_all = np.repeat(np.arange(num_tris), 3)
    e_all = np.tile(np.arange(3), num_tris)
    i0, i1 = indices[a_all, e_all], indices[a_all, (e_all + 1) % 3]
    key = np.minimum(i0, i1).astype(np.int64) * (len(vertices) + 1) + np.maximum(i0, i1)
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    same_next = sorted_key[1:] == sorted_key[:-1]
    first, second = order[:-1][same_next], order[1:][same_next]
    slot_a = np.concatenate([first, second])  # each shared edge seen from both sides
    slot_b = np.concatenate([second, first])
    a, e, b = a_all[slot_a], e_all[slot_a], a_all[slot_b]
    va, vb = verts[indices[a]], verts[indices[b]]  # [K, 3, 3]
    # Bullet lists the shared vertices of A in ascending order, except (0, 2) -> (2, 0): i.e. the
    # shared pair is edge e's (v_e, v_(e+1)). The matching vertices of B, and B's third vertex:
    ia0, ia1 = indices[a, e], indices[a, (e + 1) % 3]
    ib = indices[b]
    jb0 = np.argmax(ib == ia0[:, None], axis=1)
    jb1 = np.argmax(ib == ia1[:, None], axis=1)
    other_b = 3 - jb0 - jb1
    other_a = (e + 2) % 3
    rows = np.arange(len(a))
    edge = _unit(va[rows, (e + 1) % 3] - va[rows, e])
    normal_a = _unit(np.cross(va[:, 1] - va[:, 0], va[:, 2] - va[:, 0]))
    tb0, tb1, tb2 = vb[rows, jb1], vb[rows, jb0], vb[rows, other_b]  # btTriangleShape tB's order
    normal_b = _unit(np.cross(tb1 - tb0, tb2 - tb0))
    edge_cross_a = _unit(np.cross(edge, normal_a))
    flip = ((va[rows, other_a] - va[rows, e]) * edge_cross_a).sum(-1) < 0
    edge_cross_a[flip] *= -1
    edge_cross_b = _unit(np.cross(edge, normal_b))
    flip = ((vb[rows, other_b] - vb[rows, jb0]) * edge_cross_b).sum(-1) < 0
    edge_cross_b[flip] *= -1
    calculated_edge = np.cross(edge_cross_a, edge_cross_b)
    planar = (calculated_edge * calculated_edge).sum(-1) < C.INTERNAL_EDGE_PLANAR_EPSILON
    with np.errstate(invalid="ignore", divide="ignore"):
        calculated_normal_a = _unit(np.cross(_unit(calculated_edge), edge_cross_a))
        angle2 = np.arctan2(
            (edge_cross_b * calculated_normal_a).sum(-1), (edge_cross_b * edge_cross_a).sum(-1)
        )
    is_convex = ~planar & ((normal_a * edge_cross_b).sum(-1) < 0)
    corrected = np.where(planar, 0.0, np.where(is_convex, np.pi - angle2, angle2 - np.pi))
    rot_edge = va[rows, e] - va[rows, (e + 1) % 3]  # v0 - v1, v1 - v2, v2 - v0
    computed_normal_b = _rotate_np(normal_a, rot_edge, -corrected)
    swap = (computed_normal_b * normal_b).sum(-1) < 0
    angles = np.full((num_tris, 3), C.INTERNAL_EDGE_MAX_ANGLE, np.float64)
    angles[a, e] = -corrected
    flags = np.zeros(num_tris, np.int64)
    np.bitwise_or.at(flags, a, np.where(is_convex, 1 << e, 0) | np.where(swap, 8 << e, 0))
    return angles.astype(np.float32), flags.astype(np.int32)
