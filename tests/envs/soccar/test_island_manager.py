"""The island manager's order (`island_manager`) against Bullet's quicksort, replayed here."""

from __future__ import annotations

import numpy as np
import torch

from nitro.envs.soccar import island_manager


def quicksort_order(keys: list[int]) -> list[int]:
    """btAlignedObjectArray::quickSort of ``keys`` (btPersistentManifoldSortPredicate, key <), as
    quickSortInternal runs it: which original element ends up at each position."""
    items = list(range(len(keys)))

    def sort(lo: int, hi: int) -> None:
        i, j = lo, hi
        pivot = keys[items[(lo + hi) // 2]]
        while True:
            while keys[items[i]] < pivot:
                i += 1
            while pivot < keys[items[j]]:
                j -= 1
            if i <= j:
                items[i], items[j] = items[j], items[i]
                i, j = i + 1, j - 1
            if i > j:
                break
        if lo < j:
            sort(lo, j)
        if i < hi:
            sort(i, hi)

    if len(keys) > 1:
        sort(0, len(keys) - 1)
    return items


def test_quicksort_order_is_bullets_quicksort():
    # btAlignedObjectArray::quickSort on keys [0, 0, 0, 0]: one partition around the middle swaps
    # every pair from the outside in (0 <-> 3, 1 <-> 2), and the halves [3, 2] and [1, 0] then swap
    # again: positions end up holding 2, 3, 0, 1 (worked by hand from quickSortInternal).
    assert quicksort_order([0, 0, 0, 0]) == [2, 3, 0, 1]
    assert quicksort_order([0]) == [0]
    assert quicksort_order([0, 0]) == [1, 0]
    keys = [3, 1, 2, 1, 0, 3]
    order = quicksort_order(keys)
    assert [keys[i] for i in order] == sorted(keys)  # a sort, whatever it does to equal keys


def test_quicksort_positions_follow_the_quicksort():
    # Every element's place after btAlignedObjectArray::quickSort, against the sort itself: arbitrary
    # small keys, the island manager's block-structured keys (bodies' manifolds in runs, runs of one
    # island anywhere), distinct keys, and lengths from 0 to 60.
    rng = np.random.default_rng(0)
    n, m = 600, 60
    keys = np.zeros((n, m), np.int64)
    count = rng.integers(0, m + 1, n)
    for row in range(n):
        if row % 3 == 0:
            keys[row] = rng.integers(0, 7, m)
        elif row % 3 == 1:
            bounds, values = np.sort(rng.integers(0, m, 6)), rng.integers(0, 7, 7)
            keys[row] = values[np.searchsorted(bounds, np.arange(m), side="right")]
        else:
            keys[row] = rng.integers(0, 1000, m)
    got = island_manager.quicksort_positions(torch.tensor(keys), torch.tensor(count))
    for row in range(n):
        k = keys[row, : count[row]].tolist()
        expected = [0] * len(k)
        for place, original in enumerate(quicksort_order(k)):
            expected[original] = place
        assert got[row, : count[row]].tolist() == expected


def test_island_tags_follow_union_find():
    # btUnionFind::unite(p, q) hangs p's root under q's: worked by hand for a ball (0) and two cars.
    pairs = torch.tensor([[[0, 1], [0, 2], [1, 2]]]).expand(4, -1, -1)
    live = torch.tensor(
        [
            [True, False, False],  # ball and car 1: one island, car 1's root
            [False, True, False],  # ball and car 2: car 2's root
            [True, True, False],  # 0 under 1, then 1 under 2: all under 2
            [False, False, False],  # three islands
        ]
    )
    tags = island_manager.island_tags(pairs, live, 3)
    assert tags.tolist() == [[1, 1, 2], [2, 1, 2], [2, 2, 2], [0, 1, 2]]
