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


def test_island_positions_follow_the_quicksort():
    # Every manifold's place after btAlignedObjectArray::quickSort, for random bodies (the ball and up
    # to 6 cars) each with up to 20 manifolds, against the sort itself.
    rng = np.random.default_rng(1)
    counts = torch.tensor(rng.integers(0, island_manager.MAX_BODY_MANIFOLDS + 1, (300, 7)))
    counts[:100, 2:] = 0  # a ball and one car
    got = island_manager.island_positions(counts)
    for env, row in enumerate(counts.tolist()):
        keys = [body for body, count in enumerate(row) for _ in range(count)]
        expected = [0] * len(keys)
        for place, original in enumerate(quicksort_order(keys)):
            expected[original] = place
        mine = [got[env, body, e].item() for body, count in enumerate(row) for e in range(count)]
        assert mine == expected
