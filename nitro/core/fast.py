"""The fast path, in one place: ``torch.compile`` a step and capture K of them in a CUDA graph.

Env authors never touch this. A loop is written as ``body(carry) -> carry`` over a tree of tensors
(env state, random key, rollout buffers, ...). ``Loop`` runs it eagerly, compiled, or compiled and
captured: the graph replays K bodies from static carry buffers that it updates in place, so a replay
is one launch and no host work per step.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from nitro.core import tree

MODES = ("eager", "compile", "graph")


def compile(fn: Callable, **kwargs: Any) -> Callable:
    """``torch.compile`` with the settings our step functions need (static shapes, one graph)."""
    return torch.compile(fn, fullgraph=True, dynamic=False, **kwargs)


class Loop:
    """Run ``body`` ``steps`` times per call over a carry tree, in ``mode``.

    ``mode``: "eager" (plain PyTorch), "compile" (body compiled, Python loop) or "graph" (body
    compiled and the ``steps`` iterations captured in one CUDA graph; CUDA only).
    Call with no arguments; the result is the carry after the steps (static buffers in graph mode:
    read them or clone them before the next call).
    """

    def __init__(self, body: Callable[[Any], Any], carry: Any, steps: int, mode: str = "graph",
                 warmup: int = 2):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode, self.steps = mode, steps
        self.body = body if mode == "eager" else compile(body)
        self.carry = carry
        self.graph = None
        if mode == "graph":
            if not all(x.is_cuda for x in tree.leaves(carry)):
                raise ValueError("mode='graph' needs every carry tensor on a CUDA device; use "
                                 "mode='compile' on CPU")
            self.carry = tree.clone(carry)
            self._capture(warmup)

    def _capture(self, warmup: int) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # compile and autotune outside the capture
            c = tree.clone(self.carry)
            for _ in range(warmup):
                c = self.body(c)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            c = self.carry
            for _ in range(self.steps):
                c = self.body(c)
            tree.copy_(self.carry, c)

    def __call__(self) -> Any:
        if self.graph is not None:
            self.graph.replay()
            return self.carry
        c = self.carry
        for _ in range(self.steps):
            c = self.body(c)
        self.carry = c
        return c
