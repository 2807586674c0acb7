"""Helpers over state trees: dataclasses (nested allowed) whose leaves are batched tensors.

Every leaf has the env axis first ([N, ...]); these helpers are how auto-reset, env selection and
device moves treat a whole state at once.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import torch

from nitro.core import host


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply ``fn`` leaf-wise over one or more trees of the same structure."""
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        changes = {
            f.name: tree_map(fn, getattr(tree, f.name), *(getattr(r, f.name) for r in rest))
            for f in dataclasses.fields(tree)
        }
        return dataclasses.replace(tree, **changes)
    if isinstance(tree, (tuple, list)):
        return type(tree)(tree_map(fn, *xs) for xs in zip(tree, *rest))
    if isinstance(tree, dict):
        return {k: tree_map(fn, tree[k], *(r[k] for r in rest)) for k in tree}
    if isinstance(tree, torch.Tensor):
        return fn(tree, *rest)
    return tree  # static leaves (ints, None) pass through


def leaves(tree: Any) -> list[torch.Tensor]:
    """The tensor leaves of ``tree`` in a fixed order."""
    out: list[torch.Tensor] = []
    tree_map(lambda x: out.append(x) or x, tree)
    return out


def where(mask: torch.Tensor, a: Any, b: Any) -> Any:
    """Select per env: ``a`` where ``mask`` [N] is true, else ``b`` (leaf-wise)."""

    m = mask.numpy() if host.eager_cpu(mask) else None  # sync-ok: small CPU batches' numpy views (nitro.core.host)

    def pick(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        extra = (1,) * (x.dim() - mask.dim())
        if (m is not None and x.dtype == y.dtype and x.shape == y.shape and x.is_cpu and y.is_cpu
                and not (x.requires_grad or y.requires_grad)):
            return torch.from_numpy(np.where(m.reshape(m.shape + extra), x.numpy(), y.numpy()))  # sync-ok: CPU
        return torch.where(mask.view(mask.shape + extra), x, y)

    return tree_map(pick, a, b)


def index(tree: Any, env_ids: torch.Tensor) -> Any:
    """The sub-batch ``env_ids`` of every leaf."""
    return tree_map(lambda x: x[env_ids], tree)


def put(tree: Any, env_ids: torch.Tensor, values: Any) -> Any:
    """A copy of ``tree`` with rows ``env_ids`` replaced by ``values`` (a tree of sub-batches)."""
    return tree_map(lambda x, v: x.index_copy(0, env_ids, v.to(x.dtype)), tree, values)


def copy_(dst: Any, src: Any) -> None:
    """Copy every leaf of ``src`` into the same leaf of ``dst`` in place (static buffers, graphs)."""
    tree_map(lambda d, s: d.copy_(s), dst, src)


def to(tree: Any, device: torch.device | str) -> Any:
    """Move every leaf to ``device``."""
    return tree_map(lambda x: x.to(device), tree)


def clone(tree: Any) -> Any:
    return tree_map(torch.clone, tree)
