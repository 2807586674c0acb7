"""The fast path, in one place: ``torch.compile`` a step and capture K of them in a CUDA graph.

Env authors never touch this. A loop is written as ``body(carry) -> carry`` over a tree of tensors
(env state, random key, rollout buffers, ...). ``Loop`` runs it eagerly, compiled, or compiled and
captured: the graph replays K bodies from static carry buffers that it updates in place, so a replay
is one launch and no host work per step.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import warnings
from pathlib import Path
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


HANDLE_MODES = ("eager", "compile", "graph", "auto", "aot")


def handle_mode(mode: str, device: torch.device) -> str:
    """``nitro.make(mode=...)`` resolved for ``device``: auto is graph on CUDA and eager elsewhere."""
    if mode not in HANDLE_MODES:
        raise ValueError(f"mode must be one of {', '.join(HANDLE_MODES)}, got {mode!r}")
    if mode == "auto":
        return "graph" if device.type == "cuda" else "eager"
    if mode == "graph" and device.type != "cuda":
        raise ValueError(f"mode='graph' needs a CUDA device, the env is on {device}; use mode='auto' (eager "
                         "on the CPU) or mode='compile'")
    if mode == "aot" and device.type != "cpu":
        raise ValueError(f"mode='aot' compiles a CPU step, the env is on {device}; use mode='auto' (graphs) "
                         "on a GPU")
    return mode


class AotStep:
    """``VecEnv.step`` (split the keys, step with same-step auto-reset) compiled ahead of time by
    AOTInductor into a C++ library for the CPU, for small batches stepped from Python (SB3's 8 envs): a
    call is one call into the library, no Python per operation and none of ``torch.compile``'s guards.

    The first step of an env, batch size and dtype compiles it (30-60 s on two cores) into
    ``cache_dir()/aot``; later ones load it. The file's name hashes what the library computes and where
    (`_aot_path`), so an edited env never runs a stale library. Arguments go in
    contiguous, as they were compiled. Results equal eager stepping's to Inductor's rounding (its sine,
    cosine and fused multiply-adds: an ulp or so), as ``mode="compile"``'s do."""

    def __init__(self, env, state, keys: torch.Tensor, actions: torch.Tensor):
        self.template, self.actions_dtype = state, actions.dtype
        self.count = len(tree.leaves(state))
        args = tuple(x.contiguous() for x in (*tree.leaves(state), keys, actions))
        path = _aot_path(env, args)
        if not path.exists():
            _aot_compile(_FlatStep(env, state, self.count), args, path)
        package = logging.getLogger("torch.export.pt2_archive._package")
        level = package.level
        package.setLevel(logging.ERROR)  # it warns that scalar code (CPU_OPTIONS) names no vector ISA
        try:
            self.run = torch._inductor.aoti_load_package(str(path)).loader.run
        finally:
            package.setLevel(level)

    def __call__(self, state, keys: torch.Tensor, actions: torch.Tensor):
        """(state, keys, (obs, reward, terminated, truncated, final_obs)) after one step."""
        out = self.run([x.contiguous() for x in (*tree.leaves(state), keys, actions)])
        return _rebuild(self.template, out[: self.count]), out[self.count], tuple(out[self.count + 1:])


class _FlatStep(torch.nn.Module):
    """The handle's step over flat tensors (what ``torch.export`` takes): state leaves, keys, actions in;
    next state leaves, next keys and the five results out."""

    def __init__(self, env, template, count: int):
        super().__init__()
        self.env, self.template, self.count = env, template, count

    def forward(self, *args):
        state, keys, results = _step(self.env, _rebuild(self.template, args[: self.count]), *args[self.count:])
        return (*tree.leaves(state), keys, *results)


def _aot_path(env, args: tuple) -> Path:
    """The library's file: its name hashes the env, its params and tensors, the arguments' shapes and
    dtypes, PyTorch's version, nitro's source and the CPU."""
    data = hashlib.sha256(b"".join(t.detach().cpu().numpy().tobytes()  # sync-ok: once, at the first step
                                   for t in tree.leaves(vars(env))))
    what = (repr(env), data.hexdigest(), [(tuple(a.shape), str(a.dtype)) for a in args], torch.__version__,
            source_digest(), CPU_OPTIONS, platform.machine(), torch.backends.cpu.get_cpu_capability())
    return cache_dir() / "aot" / f"{type(env).__name__}-{hashlib.sha256(repr(what).encode()).hexdigest()[:24]}.pt2"


def _aot_compile(module: torch.nn.Module, args: tuple, path: Path) -> None:
    """Export ``module`` at ``args`` and package its AOTInductor library at ``path`` (written beside it
    and renamed, so a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.stem}-{os.getpid()}.tmp.pt2")
    with warnings.catch_warnings():  # PyTorch's own pickling of its tree specs, deprecated in 2.13
        warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
        program = torch.export.export(module, args, strict=False)
        torch._inductor.aoti_compile_and_package(program, package_path=str(part), inductor_configs=dict(CPU_OPTIONS))
    os.replace(part, path)


def _rebuild(template, leaves):
    """``template``'s tree with ``leaves`` in its leaves' order."""
    it = iter(leaves)
    return tree.tree_map(lambda _: next(it), template)


def cache_dir() -> Path:
    """Where nitro keeps compiled code: $NITRO_CACHE_DIR, else $XDG_CACHE_HOME/nitro or ~/.cache/nitro."""
    if os.environ.get("NITRO_CACHE_DIR"):
        return Path(os.environ["NITRO_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nitro"


@functools.cache
def source_digest() -> str:
    """A hash of nitro's Python source (every file of the package), for names of compiled code."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for file in sorted(root.rglob("*.py")):
        digest.update(file.relative_to(root).as_posix().encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def _step(env, state, keys, actions):
    """One handle step (what ``VecEnv.step`` does): split the keys, step with same-step auto-reset;
    (state, keys, (obs, reward, terminated, truncated, final_obs))."""
    use, keys = rng.split(keys)
    t = autoreset_step(env, state, actions, use)
    return t.state, keys, (t.obs, t.reward, t.terminated, t.truncated, t.final_obs)


def _handle_step(env, state, keys, actions, results) -> None:
    """``_step`` in place: ``state`` and ``keys`` advance, the results are written to ``results``.
    Compiled, each result is stored straight from the kernel that computes it."""
    next_state, next_keys, values = _step(env, state, keys, actions)
    tree.copy_(state, next_state)
    keys.copy_(next_keys)
    for buffer, value in zip(results, values):
        buffer.copy_(value)


def _handle_sample(env, num_rows: int, num_agents: int, state, keys, actions) -> None:
    """Uniform legal actions for every agent row into ``actions`` (what ``VecEnv.sample_actions`` does);
    ``keys`` advance."""
    use, next_keys = rng.split(keys)
    actions.copy_(env.action_space.sample(agents.row_keys(use, num_agents), num_rows, env.action_mask(state)))
    keys.copy_(next_keys)


SHARED_RESULTS = 2
"""Result sets whose buffers a step hands out as they are: a loop that keeps only the latest results
(``obs, ... = env.step(...)``) alternates between two, and never pays a copy."""


class HandleSteps:
    """``VecEnv.step`` and ``sample_actions`` compiled ("compile"), and on CUDA each also captured in a
    CUDA graph ("graph"). Both run in place over static buffers (state, keys, actions), so a call is one
    compiled call or one replay. Sampled actions are handed out as a copy and, while unchanged, stepped
    without a copy or a check; a policy's own actions are checked and copied in. Results land in a result
    set (``_Results``): one of two shared sets, handed out without a copy as long as the caller no longer
    holds anything of that set's last results, else a private set whose results are cloned out, so
    tensors a caller holds are never overwritten by a later step."""

    def __init__(self, env, num_rows: int, num_agents: int, mode: str, check_actions: bool,
                 device: torch.device):
        self.env, self.num_rows, self.num_agents = env, num_rows, num_agents
        self.check_actions, self.device = check_actions, device
        self.graphed = mode == "graph"
        self.step_fn = compile(functools.partial(_handle_step, env))
        self.sample_fn = compile(functools.partial(_handle_sample, env, num_rows, num_agents))
        self.state = self.keys = self.actions = None
        """Static buffers: the state and keys every call advances, the actions every step reads."""
        self.shared: list[_Results] = []
        self.private: _Results | None = None
        self.sample_graph: torch.cuda.CUDAGraph | None = None
        self.pool = None
        """The graphs' shared memory pool (graph mode)."""
        self.sampled: tuple[torch.Tensor, int] | None = None
        """The last sample_actions result and its version counter, while the actions buffer holds it."""

    def step(self, state, keys, actions):
        """(state, keys, (obs, reward, terminated, truncated, final_obs)) after one step."""
        fresh = self.sampled is not None and actions is self.sampled[0] and actions._version == self.sampled[1]
        if self.check_actions and not fresh:
            self.env.action_space.check(actions, self.num_rows, self.device)
        self._load(state, keys, actions)
        if not fresh:
            self.actions.copy_(actions)
            self.sampled = None
        results = self._results()
        if results.graph is not None:
            results.graph.replay()
        else:
            self.step_fn(self.state, self.keys, self.actions, results.buffers)
        return self.state, self.keys, results.read()

    def sample(self, state, keys):
        """(keys, actions): uniform legal actions for every agent row."""
        self._load(state, keys, None)
        if self.graphed and self.sample_graph is None:
            self._warm(lambda: self.sample_fn(self.state, self.keys, self.actions))
            self.sample_graph = self._capture(lambda: self.sample_fn(self.state, self.keys, self.actions))
        if self.sample_graph is not None:
            self.sample_graph.replay()
        else:
            self.sample_fn(self.state, self.keys, self.actions)
        actions = self.actions.clone()
        self.sampled = (actions, actions._version)
        return self.keys, actions

    def _load(self, state, keys, actions) -> None:
        """Make ``state`` and ``keys`` (new tensors after a reset) the static buffers' contents."""
        if self.actions is None:  # shape and dtype from the first actions seen, given or sampled
            self.actions = (actions.detach().clone() if actions is not None else self.env.action_space.sample(
                agents.row_keys(keys, self.num_agents), self.num_rows, self.env.action_mask(state)))
        if state is self.state and keys is self.keys:
            return
        if self.state is None:
            self.state, self.keys = tree.clone(state), keys.clone()
        else:
            tree.copy_(self.state, state)
            self.keys.copy_(keys)

    def _results(self) -> _Results:
        """A shared result set the caller no longer holds, a new one, or else the private one."""
        free = next((r for r in self.shared if r.free()), None)
        if free is not None:
            return free
        if len(self.shared) < SHARED_RESULTS:
            self.shared.append(self._new_results(shared=True))
            return self.shared[-1]
        if self.private is None:
            self.private = self._new_results(shared=False)
        return self.private

    def _new_results(self, shared: bool) -> _Results:
        """Buffers shaped as one step's results (an eager step of the static buffers, nothing written)
        and, in graph mode, the graph that fills them."""
        results = _Results(_step(self.env, self.state, self.keys, self.actions)[2], shared)
        if self.graphed:
            step = functools.partial(self.step_fn, self.state, self.keys, self.actions, results.buffers)
            if not self.shared and self.private is None:  # the first set: compile and autotune first
                self._warm(step)
            results.graph = self._capture(step)
        return results

    def _warm(self, body) -> None:
        """Compile and autotune outside the capture, on a side stream, leaving the buffers as they were."""
        saved = (tree.clone(self.state), self.keys.clone(), self.actions.clone())
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # each run from the same buffers: the actions are legal in that state only
                body()
                tree.copy_(self.state, saved[0])
                self.keys.copy_(saved[1])
                self.actions.copy_(saved[2])
        torch.cuda.current_stream().wait_stream(side)

    def _capture(self, body) -> torch.cuda.CUDAGraph:
        """A graph of ``body``; the capture runs nothing, so the buffers keep their values. The graphs
        share one memory pool: each writes its results to buffers made outside it, so none leaves
        anything alive in the pool, and they run one after another on one stream."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            body()
        self.pool = graph.pool()
        return graph


class _Results:
    """One step's result buffers and, in graph mode, the graph that writes them. A shared set hands out
    views of its buffers; it is free again once the caller holds none of them (nor any view of them:
    each view holds the buffer's storage, so the storage's use count tells). The private set hands out
    clones."""

    def __init__(self, like: tuple[torch.Tensor, ...], shared: bool):
        self.buffers = tuple(torch.empty_like(t) for t in like)
        self.shared = shared
        self.graph: torch.cuda.CUDAGraph | None = None
        self.idle = [_uses(b) for b in self.buffers]
        """Each buffer's storage use count while only this set holds it."""

    def free(self) -> bool:
        return all(_uses(b) == n for b, n in zip(self.buffers, self.idle))

    def read(self) -> tuple[torch.Tensor, ...]:
        return tuple(b.view(b.shape) if self.shared else b.clone() for b in self.buffers)


def _uses(t: torch.Tensor) -> int:
    """How many tensors hold ``t``'s storage (PyTorch's own test of whether a graph's outputs are alive)."""
    return torch._C._storage_Use_Count(t.untyped_storage()._cdata)
