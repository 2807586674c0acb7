"""State-tree helpers over nested dataclasses of batched tensors."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nitro.core import tree
from nitro.core.host import GRAIN


@dataclass
class Inner:
    vel: torch.Tensor  # [N, 3]
    flag: torch.Tensor  # [N]


@dataclass
class State:
    pos: torch.Tensor  # [N, 2]
    inner: Inner
    extra: tuple
    static: int = 7


def make(n: int = 4, offset: float = 0.0) -> State:
    return State(
        pos=torch.arange(n * 2, dtype=torch.float32).view(n, 2) + offset,
        inner=Inner(vel=torch.ones(n, 3) * (1 + offset), flag=torch.arange(n) % 2 == 0),
        extra=(torch.arange(n) + int(offset), {"t": torch.zeros(n, dtype=torch.int32) + int(offset)}),
    )


def test_tree_map_and_leaves():
    s = make()
    doubled = tree.tree_map(lambda x: x * 2 if x.dtype != torch.bool else x, s)
    assert isinstance(doubled, State) and isinstance(doubled.inner, Inner)
    assert torch.equal(doubled.pos, s.pos * 2) and torch.equal(doubled.extra[1]["t"], s.extra[1]["t"] * 2)
    assert doubled.static == 7  # static leaves pass through
    leaves = tree.leaves(s)
    assert [x.shape for x in leaves] == [(4, 2), (4, 3), (4,), (4,), (4,)]  # field order, depth first
    summed = tree.tree_map(lambda a, b: a + b if a.dtype != torch.bool else a, s, make(offset=1.0))
    assert torch.equal(summed.pos, s.pos * 2 + 1)


def test_where_selects_per_env_for_every_leaf():
    a, b = make(offset=0.0), make(offset=10.0)
    mask = torch.tensor([True, False, False, True])
    w = tree.where(mask, a, b)
    for leaf, la, lb in zip(tree.leaves(w), tree.leaves(a), tree.leaves(b)):
        assert torch.equal(leaf[mask], la[mask]) and torch.equal(leaf[~mask], lb[~mask])


def test_where_numpy_route_matches_torch_where():
    """Small CPU batches select through numpy views (`host.eager_cpu`); a batch of GRAIN envs and a
    leaf that needs grad take PyTorch's route. Every leaf must come out as torch.where gives it: same
    values, dtype and shape."""
    for n in (4, GRAIN):
        a, b = make(n, offset=0.0), make(n, offset=10.0)
        a.inner.vel.requires_grad_(True)
        mask = torch.arange(n) % 3 == 0
        w = tree.where(mask, a, b)
        for leaf, la, lb in zip(tree.leaves(w), tree.leaves(a), tree.leaves(b)):
            m = mask.view(mask.shape + (1,) * (la.dim() - 1))
            expected = torch.where(m, la, lb)
            assert leaf.dtype == expected.dtype and torch.equal(leaf.detach(), expected.detach())
        assert w.inner.vel.requires_grad


def test_index_and_put():
    s = make(6)
    ids = torch.tensor([4, 1])
    sub = tree.index(s, ids)
    assert torch.equal(sub.pos, s.pos[ids]) and sub.inner.vel.shape == (2, 3)
    replaced = tree.put(s, ids, make(2, offset=100.0))
    assert torch.equal(replaced.pos[ids], make(2, offset=100.0).pos)
    keep = torch.tensor([0, 2, 3, 5])
    assert torch.equal(replaced.pos[keep], s.pos[keep])
    assert torch.equal(s.pos, make(6).pos)  # put copies; the input is unchanged


def test_clone_copy_and_to():
    s = make()
    c = tree.clone(s)
    c.pos.add_(1)
    assert not torch.equal(c.pos, s.pos)  # clone does not alias
    tree.copy_(c, s)
    assert all(torch.equal(x, y) for x, y in zip(tree.leaves(c), tree.leaves(s)))
    moved = tree.to(s, "cpu")
    assert all(x.device.type == "cpu" for x in tree.leaves(moved))
