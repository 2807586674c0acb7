"""The Triton twins of the soccar mechanics, for CUDA: per-lane code (one env per thread), fused.

Each module here is the twin of the reference module of the same name one level up (`ball.py` and
`kernels/ball.py`, `manifolds.py` and `kernels/manifolds.py`, ...): the same function names in the
same order, with the reference's (RocketSim's, Bullet's) variable names, reading the same
`TickParams` fields under the same names, so the two read side by side. In a kernel module:

- ``name`` (``@jit``): the stage, the twin of the reference's ``name``, over (x, y, z) tuples of
  [BLOCK] tensors (`vec`); Triton inlines it into every kernel that calls it;
- ``name_kernel``: a launchable kernel around a stage (loads, the stage, stores), ``name_op`` its
  registration with ``torch.library.triton_op`` (so ``torch.compile`` traces it and CUDA graphs
  capture it), ``launch_name`` the host function that launches it and returns the reference's
  dataclass (`contacts`).

`kernels/arena.py` holds the fused step, `tick` launching its stage kernels in Arena::Step order.
Kernels import data (constants, contacts, arena_mesh, mutators, state) and each other, never the
reference mechanics. Tests run each stage under ``TRITON_INTERPRET=1`` against its reference stage
(tests/envs/soccar/kernels). Triton comes with CUDA builds of PyTorch only: without it these modules
still import (the decorators below are stand-ins) and `require_triton` says what to install.
"""

from __future__ import annotations

import ast
import inspect

import torch

try:  # Triton comes with CUDA builds of PyTorch; CPU installs use the PyTorch reference instead.
    import triton
    import triton.language as tl
    from torch.library import triton_op, wrap_triton

    jit = triton.jit
    constexpr = tl.constexpr
except ImportError:  # pragma: no cover - exercised on CPU-only installs
    triton = tl = wrap_triton = None

    def jit(fn=None, **options):
        """Stand-in for ``triton.jit`` without Triton: the function is kept, never launched."""
        return fn if fn is not None else (lambda fn: fn)

    class constexpr:  # named as the Triton class it stands in for
        """Stand-in for ``tl.constexpr`` without Triton: holds the value as ``.value``, as Triton's does
        (host code reads module-level constants through ``.value``)."""

        def __init__(self, value):
            self.value = value.value if isinstance(value, constexpr) else value

        def __repr__(self) -> str:
            return f"constexpr[{self.value!r}]"

    def triton_op(name, mutates_args):
        """Stand-in for ``torch.library.triton_op`` without Triton: nothing is registered."""
        return lambda fn: fn


UNSPECIALIZED = ("n", "ticks", "hashed_seed", "deferred_count_ptr", "world_pairs_capacity")
"""Arguments the fused step's stage kernels are not specialized on (Triton would compile a kernel
again when such an integer becomes 1 or stops being a multiple of 16, or such a pointer stops being
16-byte aligned): one compile per team size, whatever the env count, seed or ticks per launch (the
car-world pairs' room is 1 for a two-env arena, a multiple of 16 for large ones, `world_pair_buffers`).
None of the integers sizes a memory access; the pointer is a row of the two-pass car kernels' counts of
deferred cars (`kernels/arena.tick`), 4 bytes per car slot, read as a scalar."""


def stage_jit(fn):
    """``jit`` for a stage kernel of the fused step: not specialized on `UNSPECIALIZED`."""
    names = [name for name in UNSPECIALIZED if name in inspect.signature(fn).parameters]
    return jit(do_not_specialize=names, do_not_specialize_on_alignment=names)(fn)


def settle_cache_keys(kernel) -> None:
    """Compute the Triton cache keys of ``kernel`` and of every JIT function it reaches, callees first,
    once per process (`launch` of `kernels/arena.py` calls it before a kernel's first launch).

    Triton 3.6 adds a callee's global constants to its caller's key only when the callee's own key was
    computed before the caller's (its dependency finder reads the callee's ``used_global_vals`` before
    asking for its ``cache_key``), so a kernel's key depended on which keys the process happened to
    compute first: a kernel compiled in one process (a warm-up, a compile on another machine) missed
    the cache in the next. Callees first, every key holds all of its constants, whatever the order.
    Triton orders a key's constants by name, then by their module's address in memory: two modules'
    constants of one name and different values would key the kernel apart from process to process,
    so that raises here. Under the interpreter there are no keys."""
    if id(kernel) in _SETTLED or not isinstance(kernel, triton.runtime.jit.JITFunction):
        return  # (checked on every launch: a set lookup, no key computed)
    order: list = []
    seen: set[int] = set()

    def visit(fn) -> None:
        seen.add(id(fn))
        for node in ast.walk(fn.parse()):
            callee = _jit_reference(node, fn.__globals__)
            if callee is not None and id(callee) not in seen:
                visit(callee)
        order.append(fn)

    visit(kernel)
    for fn in order:
        if id(fn) not in _SETTLED:  # (a function settled for an earlier kernel keeps its complete key)
            fn.hash, fn.used_global_vals = None, {}
    for fn in order:
        fn.cache_key  # noqa: B018 - computed for its side effect, callees first
        _SETTLED.add(id(fn))
    values: dict[str, set[str]] = {}
    for (name, _), (value, _) in kernel.used_global_vals.items():
        values.setdefault(name, set()).add(repr(value))
    clashes = {name: sorted(v) for name, v in values.items() if len(v) > 1}
    if clashes:
        raise RuntimeError(
            f"{kernel.__name__} reads same-named global constants of different values from different modules "
            f"({clashes}), which keys it differently in each process; give them one value or different names"
        )


_SETTLED: set[int] = set()


def _jit_reference(node, scope: dict):
    """The JIT function an AST name (``f``) or attribute (``module.f``) refers to in ``scope``, or None."""
    if isinstance(node, ast.Name):
        value = scope.get(node.id)
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        value = getattr(scope.get(node.value.id), node.attr, None)
    else:
        return None
    return value if isinstance(value, triton.runtime.jit.JITFunction) else None


def available() -> bool:
    """Triton can be imported (a CUDA build of PyTorch, or TRITON_INTERPRET=1 for CPU testing)."""
    return triton is not None


def use_kernels(tensor: torch.Tensor, requested: bool | None) -> bool:
    """Whether a query runs as a kernel: ``requested`` when given, else on CUDA tensors with Triton."""
    if requested is None:
        return tensor.is_cuda and available()
    return requested


def require_triton() -> None:
    if triton is None:
        raise RuntimeError(
            "Triton is not installed: the soccar kernels need a CUDA build of PyTorch "
            "(which ships Triton), or `pip install triton` with TRITON_INTERPRET=1 for CPU tests"
        )


def warps(block: int) -> int:
    """One lane per thread: a program of ``block`` lanes runs ``block / 32`` warps (Triton's default of 4
    warps would run each lane of a 64-lane program on two threads)."""
    if block < 32 or block & (block - 1):
        raise ValueError(f"the kernels run 32, 64, 128, ... lanes per program, got {block}")
    return block // 32
