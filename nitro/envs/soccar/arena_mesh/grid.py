"""The uniform grid over the arena's triangles (CSR cell lists). Load time.

Each cell lists every triangle within ``query_radius`` of it, so a query reads one cell's list
(`mesh.cell_candidates`; the kernels' `kernels/arena_mesh.cell_candidates`).
"""

from __future__ import annotations

import math

import numpy as np

GRID_CELL_SIZE = 128.0  # UU. With a 112-UU query radius the fullest cell lists 234 triangles.
# Largest query a grid cell must answer, in UU: the ball's 91.25 + 1.905 contact reach, a car body's
# bounding radius (94.8 for the longest preset, from the car origin) or a 50-UU wheel ray, with room.
DEFAULT_QUERY_RADIUS = 112.0


def build_grid(
    tri_verts: np.ndarray, query_radius: float, cell_size: float, tri_order: np.ndarray | None = None
):
    """CSR grid: each cell lists the triangles within ``query_radius`` of some point of the cell.

    A triangle goes into a cell when its distance to the cell centre is at most query_radius plus
    the cell's half diagonal (conservative: it never misses a triangle a query in the cell can
    reach). Within a cell, triangles are listed by ``tri_order`` (default: by id). Returns
    (cell_start [G+1] int32, cell_tris [L] int32, origin [3], dims [3], max count).
    """
    tv = tri_verts.astype(np.float64)
    lo = tv.reshape(-1, 3).min(0) - query_radius
    hi = tv.reshape(-1, 3).max(0) + query_radius
    dims = np.maximum(np.ceil((hi - lo) / cell_size).astype(np.int64), 1)
    reach = query_radius + math.sqrt(3.0) * cell_size / 2
    first = np.floor((tv.min(1) - query_radius - lo) / cell_size).astype(np.int64)
    last = np.floor((tv.max(1) + query_radius - lo) / cell_size).astype(np.int64)
    first, last = np.clip(first, 0, dims - 1), np.clip(last, 0, dims - 1)
    span = last - first + 1
    counts = span.prod(1)
    tri_of = np.repeat(np.arange(len(tv)), counts)
    local = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    sy, sz = span[tri_of, 1], span[tri_of, 2]
    ijk = first[tri_of] + np.stack([local // (sy * sz), (local // sz) % sy, local % sz], 1)
    centres = lo + (ijk + 0.5) * cell_size
    nearest = closest_point_on_triangle_np(centres, tv[tri_of, 0], tv[tri_of, 1], tv[tri_of, 2])
    keep = np.linalg.norm(nearest - centres, axis=1) <= reach
    flat = (ijk[keep, 0] * dims[1] + ijk[keep, 1]) * dims[2] + ijk[keep, 2]
    tri_kept = tri_of[keep]
    key = tri_kept if tri_order is None else tri_order[tri_kept]
    order = np.lexsort((key, flat))  # by cell, then visiting order
    flat, tri_kept = flat[order], tri_kept[order]
    per_cell = np.bincount(flat, minlength=int(dims.prod()))
    start = np.concatenate([[0], np.cumsum(per_cell)]).astype(np.int32)
    return start, tri_kept.astype(np.int32), lo, dims, int(per_cell.max(initial=0))


def closest_point_on_triangle_np(p, a, b, c):
    """Closest point of triangle abc to p (Ericson's regions), row-wise over [M, 3] arrays."""
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = (ab * ap).sum(-1), (ac * ap).sum(-1)
    bp = p - b
    d3, d4 = (ab * bp).sum(-1), (ac * bp).sum(-1)
    cp = p - c
    d5, d6 = (ab * cp).sum(-1), (ac * cp).sum(-1)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = 1.0 / (va + vb + vc)
        out = a + (vb * denom)[:, None] * ab + (vc * denom)[:, None] * ac
        m = (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0)
        out = np.where(m[:, None], b + ((d4 - d3) / ((d4 - d3) + (d5 - d6)))[:, None] * (c - b), out)
        m = (vb <= 0) & (d2 >= 0) & (d6 <= 0)
        out = np.where(m[:, None], a + (d2 / (d2 - d6))[:, None] * ac, out)
        m = (vc <= 0) & (d1 >= 0) & (d3 <= 0)
        out = np.where(m[:, None], a + (d1 / (d1 - d3))[:, None] * ab, out)
    out = np.where(((d6 >= 0) & (d5 <= d6))[:, None], c, out)
    out = np.where(((d3 >= 0) & (d4 <= d3))[:, None], b, out)
    out = np.where(((d1 <= 0) & (d2 <= 0))[:, None], a, out)
    return out
