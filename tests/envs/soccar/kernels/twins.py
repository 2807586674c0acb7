"""What the twin tests share: where the kernels run, and the tolerances of kernel against reference.

The tests in this folder run each kernel stage against its reference stage: on a CUDA device when
there is one, else on the CPU under Triton's interpreter (``TRITON_INTERPRET=1``, set before Triton is
imported: `tests/envs/soccar/test_kernels.py` runs this folder so in a subprocess). Without either
they are skipped. Stages are launched through small test kernels here: load per-lane inputs, call
the stage, store its outputs.

Tolerances. Kernel and reference evaluate the same float32 formulas in the same order. The
interpreter (numpy float32, no fused multiply-adds) rounds as PyTorch does, except where the kernel
normalises by multiplying with 1 / sqrt(x.x) (Bullet's way) and the reference divides: an ulp or two.
On a GPU, Triton contracts multiply-adds and its sqrt and division are approximate: a few ulps per
operation. So continuous outputs are compared within `kernel_checks`' tolerances: `VALUE_TOL` (16
ulps of arena coordinates, 0.0078 UU) for positions and depths, `NORMAL_TOL` (2e-4) for unit vectors,
and `REL_TOL` for velocities. Discrete outputs (has a contact, which point a manifold drops) must be
identical on the interpreter; on a GPU a decision whose margin is within that rounding may go the
other way, so there at most `GPU_TIE_SHARE` of the lanes may differ (the query checks in
`kernel_checks` classify such ties one by one; here the inputs are random, so ties are rare).
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from tests.envs.soccar.kernels.kernel_checks import NORMAL_TOL, VALUE_TOL

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cuda" if torch.cuda.is_available() and not INTERPRETED else "cpu"
runnable = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None or not (INTERPRETED or torch.cuda.is_available()),
    reason="needs Triton and a CUDA device, or TRITON_INTERPRET=1 (tests/envs/soccar/test_kernels.py "
    "runs this folder under the interpreter)",
)
BLOCK = 32  # lanes per program of the test kernels
REL_TOL = 2e-5
"""Relative error of solver outputs (velocities, impulses): 10 Gauss-Seidel iterations of ~20 float32
operations each, a few ulps (1.2e-7) apiece on the GPU: about 100 ulps."""
GPU_TIE_SHARE = 0.01
GPU_ROW_TOL = 1e-4 if DEVICE == "cuda" else 0.0
"""On a GPU, error allowed relative to the largest magnitude in the compared row (one car's vector or
wheel set): FMA contraction and approximate sqrt / division make a value that cancels or divides by a
small dot product (a suspension ray's fraction, a torque component far below its vector's size) lose
ulps of the row's size, not of its own. Measured on an H200: suspension lengths 2.9e-5 of 12-17 UU,
an auto-roll torque component 1.5 of a 3.1e7 vector (5e-8), angular velocities 4.2e-5 rad/s; 1e-4
leaves a margin of three. Zero on the interpreter, which rounds as PyTorch does."""
__all__ = [
    "exact_sqrt",
    "BLOCK",
    "DEVICE",
    "GPU_ROW_TOL",
    "GPU_TIE_SHARE",
    "INTERPRETED",
    "NORMAL_TOL",
    "REL_TOL",
    "VALUE_TOL",
    "runnable",
]


def assert_close(kernel: torch.Tensor, reference: torch.Tensor, atol: float, rtol: float = 0.0, rows=None):
    """|kernel - reference| <= atol + rtol |reference| (+ `GPU_ROW_TOL` x the row's largest |reference|
    on a GPU) elementwise, on ``rows`` (all when None)."""
    kernel, reference = kernel.cpu(), reference.cpu()
    if rows is not None:
        kernel, reference = kernel[rows.cpu()], reference[rows.cpu()]
    error = (kernel - reference).abs()
    bound = atol + rtol * reference.abs()
    if GPU_ROW_TOL and reference.dim() > 1:
        row_size = reference.abs().reshape(len(reference), -1).amax(1)
        bound = bound + GPU_ROW_TOL * row_size.reshape(-1, *[1] * (reference.dim() - 1))
    assert bool((error <= bound).all()), f"max error {float((error - bound).max()) + atol:.3g} > {atol:.3g}"


def assert_same(kernel: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Discrete outputs: identical on the interpreter, on all but `GPU_TIE_SHARE` of the lanes on a
    GPU. Returns the lanes that agree [N] (compare the continuous outputs there)."""
    kernel, reference = kernel.cpu(), reference.cpu()
    same = (kernel == reference).reshape(len(kernel), -1).all(1)
    if DEVICE == "cpu":
        assert bool(same.all()), f"{int((~same).sum())} of {len(same)} lanes differ"
    else:
        assert float((~same).float().mean()) <= GPU_TIE_SHARE, f"{int((~same).sum())} of {len(same)} differ"
    return same


def exact_sqrt(x: torch.Tensor) -> torch.Tensor:
    """IEEE's correctly rounded float32 sqrt (through float64: rounding twice is exact for sqrt), which
    numpy, and so Triton's interpreter, computes. PyTorch's CPU sqrt can be an ulp off it; a reference
    run with ``torch.sqrt`` patched to this one rounds as the interpreted kernel does."""
    return torch.ops.aten.sqrt.default(x.double()).float()


def programs(n: int) -> tuple[int]:
    return ((n + BLOCK - 1) // BLOCK,)
