"""The fast path, in one place: ``torch.compile`` a step and capture K of them in a CUDA graph.

Env authors never touch this. A loop is written as ``body(carry) -> carry`` over a tree of tensors
(env state, random key, rollout buffers, ...). ``Loop`` runs it eagerly, compiled, or compiled and
captured: the graph replays K bodies from static carry buffers that it updates in place, so a replay
is one launch and no host work per step.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from nitro.core import agents, rng, tree
from nitro.core.env import autoreset_step

MODES = ("eager", "compile", "graph")


CPU_OPTIONS = {"cpp.simdlen": 1}
"""Inductor's C++ code without SIMD loops: vectorized, the compiled Skull King step corrupts the heap
(glibc aborts with "malloc(): unaligned tcache chunk detected" on its first call; PyTorch 2.13 on x86,
where the same step through ``backend="aot_eager"`` or scalar C++ equals eager stepping). Only CPU code
reads it; compiled CPU steps are for checking the fast path, not for speed."""


def compile(fn: Callable, **kwargs: Any) -> Callable:
    """``torch.compile`` with the settings our step functions need (static shapes, one graph)."""
    return torch.compile(fn, fullgraph=True, dynamic=False, options=CPU_OPTIONS, **kwargs)


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


HANDLE_MODES = ("eager", "compile", "graph", "auto")


def handle_mode(mode: str, device: torch.device) -> str:
    """``nitro.make(mode=...)`` resolved for ``device``: auto is graph on CUDA and eager elsewhere."""
    if mode not in HANDLE_MODES:
        raise ValueError(f"mode must be one of {', '.join(HANDLE_MODES)}, got {mode!r}")
    if mode == "auto":
        return "graph" if device.type == "cuda" else "eager"
    if mode == "graph" and device.type != "cuda":
        raise ValueError(f"mode='graph' needs a CUDA device, the env is on {device}; use mode='auto' (eager "
                         "on the CPU) or mode='compile'")
    return mode


def _handle_step(env, state, actions, keys):
    """One handle step: split the keys, step with same-step auto-reset (what ``VecEnv.step`` does)."""
    use, keys = rng.split(keys)
    t = autoreset_step(env, state, actions, use)
    return t.state, keys, (t.obs, t.reward, t.terminated, t.truncated, t.final_obs)


def _handle_sample(env, num_rows: int, num_agents: int, state, keys):
    """Uniform legal actions for every agent row (what ``VecEnv.sample_actions`` does)."""
    use, keys = rng.split(keys)
    actions = env.action_space.sample(agents.row_keys(use, num_agents), num_rows, env.action_mask(state))
    return keys, actions


class HandleSteps:
    """``VecEnv.step`` and ``sample_actions`` compiled ("compile"), and on CUDA each also captured in a
    CUDA graph ("graph"): a call is then one replay plus one copy of the results out per dtype (and one
    copy of the actions in, unless they are the ones ``sample_actions`` just gave, which need neither a
    copy nor a check). The graphs run over static buffers (state, keys, actions) that they update in
    place; results are copied out of packed buffers (``_Packed``), so tensors a caller holds are never
    overwritten by a later step."""

    def __init__(self, env, num_rows: int, num_agents: int, mode: str, check_actions: bool,
                 device: torch.device):
        self.env, self.num_rows, self.check_actions, self.device = env, num_rows, check_actions, device
        self.graphed = mode == "graph"
        self.step_fn = compile(functools.partial(_handle_step, env))
        self.sample_fn = compile(functools.partial(_handle_sample, env, num_rows, num_agents))
        self.state = self.keys = self.actions = None
        """Static buffers (graph mode)."""
        self.step_graph: torch.cuda.CUDAGraph | None = None
        self.sample_graph: torch.cuda.CUDAGraph | None = None
        self.step_out: _Packed | None = None
        self.sampled: tuple[torch.Tensor, int] | None = None
        """The last sample_actions result and its version counter, while the actions buffer holds it."""

    def step(self, state, keys, actions):
        """(state, keys, (obs, reward, terminated, truncated, final_obs)) after one step."""
        fresh = self.sampled is not None and actions is self.sampled[0] and actions._version == self.sampled[1]
        if self.check_actions and not fresh:
            self.env.action_space.check(actions, self.num_rows, self.device)
        if not self.graphed:
            return self.step_fn(state, actions, keys)
        self._load(state, keys, actions)
        if not fresh:
            self.actions.copy_(actions)
            self.sampled = None
        if self.step_graph is None:
            self.step_out = _Packed(self._warm(self._step_body), self.device)
            self.step_graph = self._capture(lambda: self.step_out.write(self._step_body()))
        self.step_graph.replay()
        return self.state, self.keys, tuple(self.step_out.read())

    def sample(self, state, keys):
        """(keys, actions): uniform legal actions for every agent row."""
        if not self.graphed:
            return self.sample_fn(state, keys)
        self._load(state, keys, None)
        if self.sample_graph is None:
            self._warm(self._sample_body)
            self.sample_graph = self._capture(self._sample_body)
        self.sample_graph.replay()
        actions = self.actions.clone()
        self.sampled = (actions, actions._version)
        return self.keys, actions

    # ---- graph mode -------------------------------------------------------------------------------------

    def _load(self, state, keys, actions) -> None:
        """Make ``state`` and ``keys`` (new tensors after a reset) the static buffers' contents."""
        if self.actions is None:  # shape and dtype from the first actions seen, given or sampled
            self.actions = (actions.detach().clone() if actions is not None
                            else self.sample_fn(state, keys)[1])
        if state is self.state and keys is self.keys:
            return
        if self.state is None:
            self.state, self.keys = tree.clone(state), keys.clone()
        else:
            tree.copy_(self.state, state)
            self.keys.copy_(keys)

    def _step_body(self) -> tuple:
        state, keys, out = self.step_fn(self.state, self.actions, self.keys)
        tree.copy_(self.state, state)
        self.keys.copy_(keys)
        return out

    def _sample_body(self) -> None:
        keys, actions = self.sample_fn(self.state, self.keys)
        self.actions.copy_(actions)
        self.keys.copy_(keys)

    def _warm(self, body):
        """Compile and autotune outside the capture, on a side stream, leaving the buffers as they were;
        returns the body's result (its shapes size the packed results)."""
        saved = (tree.clone(self.state), self.keys.clone(), self.actions.clone())
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # each run from the same buffers: the actions are legal in that state only
                out = body()
                tree.copy_(self.state, saved[0])
                self.keys.copy_(saved[1])
                self.actions.copy_(saved[2])
        torch.cuda.current_stream().wait_stream(side)
        return out

    def _capture(self, body) -> torch.cuda.CUDAGraph:
        """A graph of ``body``; the capture runs nothing, so the buffers keep their values."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            body()
        return graph


class _Packed:
    """Tensors of fixed shapes and dtypes laid out in one flat buffer per dtype (each tensor 16-byte
    aligned), so copying them all out is one launch per dtype, and few host calls view the copies."""

    def __init__(self, like: tuple[torch.Tensor, ...], device: torch.device):
        self.count = len(like)
        groups: dict[torch.dtype, list[tuple[int, int, int, torch.Size]]] = {}
        for i, t in enumerate(like):
            align = max(1, 16 // t.element_size())
            groups.setdefault(t.dtype, []).append((i, t.numel(), -(-t.numel() // align) * align, t.shape))
        self.buffers = {dtype: torch.empty(sum(m[2] for m in members), dtype=dtype, device=device)
                        for dtype, members in groups.items()}
        self.plan = [(dtype, [m[2] for m in members],
                      [(i, None if padded == n else n, None if len(shape) == 1 else shape)
                       for i, n, padded, shape in members]) for dtype, members in groups.items()]
        """Per dtype: the split sizes (padded), and per tensor its index, its length where padded and its
        shape where not flat."""
        self.views = self._views(self.buffers)

    def _views(self, buffers: dict[torch.dtype, torch.Tensor]) -> list[torch.Tensor]:
        out: list = [None] * self.count
        for dtype, sizes, members in self.plan:
            for (i, length, shape), part in zip(members, buffers[dtype].split_with_sizes(sizes)):
                if length is not None:
                    part = part[:length]
                out[i] = part if shape is None else part.view(shape)
        return out

    def write(self, tensors) -> None:
        for view, t in zip(self.views, tensors):
            view.copy_(t)

    def read(self) -> list[torch.Tensor]:
        """Fresh copies of the tensors (one clone per dtype, viewed)."""
        return self._views({dtype: b.clone() for dtype, b in self.buffers.items()})
