"""Bullet's triangle visiting order (btQuantizedBvh / btOptimizedBvh, quantized), per mesh file.

Load time: the grid lists each cell's triangles in this order, the order Bullet files contacts in.
"""

from __future__ import annotations

import dataclasses

import numpy as np

_BVH_SUBTREE_MAX_NODES = 2048 // 16  # MAX_SUBTREE_SIZE_IN_BYTES / sizeof(btQuantizedBvhNode)


def bvh_visit_order(vertices: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Triangle indices of one mesh file in the order Bullet's BVH visits them.

    A sphere's contacts with one mesh go into one 4-point contact manifold in the order the
    triangles are visited, and once it is full each new point replaces one chosen by area, so the
    order decides which contacts survive. RocketSim builds each file into a btBvhTriangleMeshShape
    with quantized AABBs; we replay btQuantizedBvh's build (quantisation, variance split axis,
    mean partition, subtree headers) in float32 to get the same leaf order. A query visits, subtree
    header by header, the leaves whose boxes overlap it, in this order.
    """
    f32 = np.float32
    one = f32(1.0)
    bvh = bvh_quantization(vertices, indices)
    centers = f32(0.5) * (
        _unquantize(bvh.leaf_max, bvh.aabb_min, bvh.quantization)
        + _unquantize(bvh.leaf_min, bvh.aabb_min, bvh.quantization)
    )
    leaves = np.arange(len(indices))  # leaf slot -> triangle; partitioned in place like Bullet's array
    nodes: list[int] = []  # node array: triangle index for a leaf, -1 for an internal node
    headers: list[tuple[int, int]] = []  # (root node index, node count)

    def subtree_size(node: int) -> int:
        return 1 if nodes[node] >= 0 else sizes[node]

    sizes: dict[int, int] = {}

    def mean(start: int, end: int) -> np.ndarray:
        total = np.add.accumulate(centers[leaves[start:end]], axis=0, dtype=f32)[-1]  # sequential, float32
        return total * (one / f32(end - start))

    def build(start: int, end: int) -> None:
        count = end - start
        cur = len(nodes)
        if count == 1:
            nodes.append(int(leaves[start]))
            return
        means = mean(start, end)  # calcSplittingAxis
        diff = centers[leaves[start:end]] - means
        variance = np.add.accumulate(diff * diff, axis=0, dtype=f32)[-1] * (one / (f32(count) - one))
        axis = (
            (2 if variance[1] < variance[2] else 1)
            if variance[0] < variance[1]
            else (2 if variance[0] < variance[2] else 0)
        )
        split_value = mean(start, end)[axis]  # sortAndCalcSplittingIndex
        split = start
        for i in range(start, end):
            if centers[leaves[i], axis] > split_value:
                leaves[i], leaves[split] = leaves[split], leaves[i]
                split += 1
        balanced = count // 3
        if split <= start + balanced or split >= end - 1 - balanced:
            split = start + (count >> 1)
        nodes.append(-1)
        left = len(nodes)
        build(start, split)
        right = len(nodes)
        build(split, end)
        sizes[cur] = len(nodes) - cur
        if sizes[cur] > _BVH_SUBTREE_MAX_NODES:  # updateSubtreeHeaders
            for child in (left, right):
                if subtree_size(child) <= _BVH_SUBTREE_MAX_NODES:
                    headers.append((child, subtree_size(child)))

    build(0, len(indices))
    if not headers:
        headers.append((0, subtree_size(0)))
    order = [nodes[k] for root, size in headers for k in range(root, root + size) if nodes[k] >= 0]
    return np.asarray(order, np.int64)


@dataclasses.dataclass(frozen=True)
class BvhQuantization:
    """A mesh file's btQuantizedBvh quantisation and its leaves' quantized boxes (Bullet units)."""

    aabb_min: np.ndarray
    """m_bvhAabbMin [3]."""
    aabb_max: np.ndarray
    """m_bvhAabbMax [3]."""
    quantization: np.ndarray
    """m_bvhQuantization [3]."""
    leaf_min: np.ndarray
    """Quantized lower corner of each triangle's box, in file order [T, 3] int64."""
    leaf_max: np.ndarray
    """Quantized upper corner [T, 3] int64."""

    def quantize_with_clamp(self, point: np.ndarray, is_max: bool) -> np.ndarray:
        """btQuantizedBvh::quantizeWithClamp: a query corner [..., 3] clamped into the BVH's box."""
        clamped = np.minimum(np.maximum(point, self.aabb_min), self.aabb_max)
        return _quantize(clamped.astype(np.float32), self.aabb_min, self.quantization, is_max)


def bvh_quantization(vertices: np.ndarray, indices: np.ndarray) -> BvhQuantization:
    """The quantisation btQuantizedBvh::setQuantizationValues (margin 1) picks for a mesh file, and
    the leaf boxes QuantizedNodeTriangleCallback stores (widened where thinner than 0.002), float32."""
    f32 = np.float32
    tris = vertices[indices].astype(f32)  # [T, 3, 3], Bullet units
    lo, hi = vertices.min(0).astype(f32), vertices.max(0).astype(f32)
    one = f32(1.0)
    bmin, bmax = lo - one, hi + one
    quant = f32(65533.0) / (bmax - bmin)
    bmin = np.minimum(bmin, _unquantize(_quantize(bmin, bmin, quant, False), bmin, quant) - one)
    quant = f32(65533.0) / (bmax - bmin)
    bmax = np.maximum(bmax, _unquantize(_quantize(bmax, bmin, quant, True), bmin, quant) + one)
    quant = f32(65533.0) / (bmax - bmin)
    tmin, tmax = tris.min(1), tris.max(1)
    thin = (tmax - tmin) < f32(0.002)
    tmax = np.where(thin, tmax + f32(0.001), tmax)
    tmin = np.where(thin, tmin - f32(0.001), tmin)
    return BvhQuantization(
        aabb_min=bmin,
        aabb_max=bmax,
        quantization=quant,
        leaf_min=_quantize(tmin, bmin, quant, False),
        leaf_max=_quantize(tmax, bmin, quant, True),
    )


def _quantize(point: np.ndarray, bmin: np.ndarray, quant: np.ndarray, is_max: bool) -> np.ndarray:
    v = (point - bmin) * quant
    if is_max:
        return (np.trunc(v + np.float32(1.0)).astype(np.int64) & 0xFFFF) | 1
    return np.trunc(v).astype(np.int64) & 0xFFFE


def _unquantize(q: np.ndarray, bmin: np.ndarray, quant: np.ndarray) -> np.ndarray:
    return q.astype(np.float32) / quant + bmin
