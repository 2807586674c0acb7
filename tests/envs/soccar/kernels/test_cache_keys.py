"""`kernels.settle_cache_keys`: a stage kernel's Triton cache key is the same whichever keys a process
computed before it, so a kernel compiled in one process (a warm-up, a compile on another machine) is
found in the cache by the next. Each key is computed in a fresh process, compiled Triton (no interpreter:
its functions have no keys); no GPU needed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

from nitro.envs.soccar.kernels import settle_cache_keys

PROGRAM = """
import sys
from nitro.envs.soccar.kernels import arena, car, settle_cache_keys
first = getattr(arena, sys.argv[1], None) or getattr(car, sys.argv[1], None)
if first is not None:
    first.cache_key  # what Triton's own launch path computes first, unsettled
settle_cache_keys(arena.pre_tick_kernel)
print(arena.pre_tick_kernel.cache_key)
"""


def key_after(first: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", PROGRAM, first], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_stage_kernel_keys_do_not_depend_on_what_was_keyed_before():
    """Before the fix, pre_tick's key differed after car_rows_kernel's or ball_and_rules_kernel's key
    (Triton 3.6 merges a callee's constants only when the callee was keyed first)."""
    keys = {first: key_after(first) for first in ("none", "car_rows_kernel", "ball_and_rules_kernel")}
    assert len(set(keys.values())) == 1, keys


@pytest.mark.parametrize("size", [(1, 0), (1, 1), (3, 3)])
def test_every_stage_kernel_settles(size):
    """Every stage kernel of a fused step settles its key: among others, none reads two modules' global
    constants of one name and different values (the car step read `UU_TO_BT` as 0.02 from one module and
    as its float32 from another, and Triton's order of the two followed the modules' addresses in memory,
    so the car step's key differed between processes and machines)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("under Triton's interpreter the kernels have no cache keys")
    sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "bench"))
    from soccar_compile_cpu import captured_launches

    for kernel, _ in captured_launches(*size, block=32):
        settle_cache_keys(kernel)  # (raises on a clash)
        assert kernel.cache_key
