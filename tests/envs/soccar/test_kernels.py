"""The Triton kernels against their PyTorch references.

On CUDA (`gpu` marker): every query at scale, the fused tick and the compiled / graphed steps.
On CPU with Triton installed (`slow` marker, skipped without Triton): the same kernels under
TRITON_INTERPRET=1 (Triton's numpy interpreter), in a subprocess because the variable must be set
before Triton is imported. CI without Triton skips both.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from nitro.envs.soccar import constants as C

ROOT = Path(__file__).resolve().parents[3]
HAS_TRITON = importlib.util.find_spec("triton") is not None
R, GAP = C.BALL_COLLISION_RADIUS_SOCCAR, C.BALL_CONTACT_BREAKING_THRESHOLD
OCTANE_HALF = (60.25, 43.35, 19.33)


def realistic_points(mesh, n: int, seed: int, lo: float, hi: float) -> torch.Tensor:
    """Points at a distance U(lo, hi) from random triangles (plus a third anywhere in the arena)."""
    rng = np.random.default_rng(seed)
    tri = rng.integers(0, mesh.num_triangles, n)
    bary = rng.random((n, 2))
    bary = np.where(bary.sum(1, keepdims=True) > 1, 1 - bary, bary)
    v = mesh.tri_verts[tri].numpy()
    on = v[:, 0] + bary[:, :1] * (v[:, 1] - v[:, 0]) + bary[:, 1:] * (v[:, 2] - v[:, 0])
    near = on + mesh.tri_normals[tri].numpy() * rng.uniform(lo, hi, (n, 1))
    anywhere = rng.uniform((-4200, -6100, -50), (4200, 6100, 2100), (n // 2, 3))
    return torch.from_numpy(np.concatenate([near, anywhere]).astype(np.float32))


# A ball never sinks more than ~10 UU into the arena (one tick of travel at 1200 UU/s, less the
# recovery), so queries sample penetrations down to 10 UU. Deeper, where a sphere cuts a dozen net
# triangles, the manifold's 4-point reduction compares areas that tie in exact arithmetic, and
# float rounding alone (a fused multiply-add, a different summation order) picks the survivor.
SPHERE_DEPTHS = (R - 10.0, R + GAP + 2.0)
# Kernel and reference compute the same float32 formulas; on the interpreter they agree bit for
# bit. On GPU, FMA contraction differs by an ulp per operation: 1e-3 UU on coordinates of ~5000.
VALUE_TOL = 1e-3
# The fused tick over 120 ticks: ulp differences per tick, amplified by ~120 bounces at most.
FUSED_POS_TOL = 0.05
# On GPU, the share of lanes where those ulps flip a tie in the manifold reduction (measured < 1e-4).
MAX_TIE_FLIPS = 1e-3


def compare_queries(mesh, device, n, exact: bool) -> None:
    """Assert kernel == reference for the sphere, ray and box queries at n random positions."""
    from nitro.envs.soccar import collide, kernels
    from nitro.envs.soccar.mesh import box_contacts, ray_cast

    centers = realistic_points(mesh, n, 0, *SPHERE_DEPTHS).to(device)
    ref = collide.sphere_manifolds(mesh, centers, R, GAP, use_kernels=False)
    ker = kernels.sphere_manifolds(mesh, centers, R, GAP)
    same = (ref.object == ker.object).all(1) & (ref.count == ker.count).all(1)
    same = same & ((ref.depth - ker.depth).abs() * ref.held()).amax((1, 2)).le(VALUE_TOL)
    flips = 1 - same.float().mean().item()
    assert flips == 0 if exact else flips <= MAX_TIE_FLIPS, f"{flips:.2%} of lanes differ"
    held = ref.held()[same]
    assert int(held.sum()) > n // 4  # the sample touches the arena
    for name in ("offset", "point", "normal"):
        diff = (getattr(ref, name)[same] - getattr(ker, name)[same]).abs().amax(-1)
        assert float(diff[held].max()) <= VALUE_TOL, name

    rng = np.random.default_rng(1)
    start = realistic_points(mesh, n, 1, 0.0, 60.0).to(device)
    direction = torch.from_numpy(rng.normal(size=(len(start), 3)).astype(np.float32)).to(device)
    length = torch.from_numpy(rng.uniform(10, mesh.query_radius, (len(start), 1)).astype(np.float32)).to(
        device
    )
    end = start + direction / direction.norm(dim=1, keepdim=True) * length
    a, b = ray_cast(mesh, start, end, use_kernels=False), ray_cast(mesh, start, end, use_kernels=True)
    assert torch.equal(a.hit, b.hit) and int(a.hit.sum()) > n // 10
    assert (a.feature == b.feature).float().mean() >= 1 - MAX_TIE_FLIPS
    assert float((a.fraction - b.fraction).abs().max()) <= 1e-4

    centers = realistic_points(mesh, n, 2, 0.0, 40.0).to(device)
    q, _ = torch.linalg.qr(torch.from_numpy(rng.normal(size=(len(centers), 3, 3)).astype(np.float32)))
    q, half = q.to(device), torch.tensor(OCTANE_HALF, device=device)
    a = box_contacts(mesh, centers, q, half, 2.0, 8, use_kernels=False)
    b = box_contacts(mesh, centers, q, half, 2.0, 8, use_kernels=True)
    assert torch.equal(a.count, b.count) and int((a.count > 0).sum()) > n // 10
    assert (a.feature == b.feature).all(1).float().mean() >= 1 - MAX_TIE_FLIPS
    assert float((a.depth - b.depth).abs().max()) <= VALUE_TOL


def compare_fused(device, per_family: int, ticks: int) -> None:
    """The fused kernel's ticks equal the PyTorch pipeline's on the parity throws."""
    from nitro.envs.soccar.arena import Arena

    sys.path.insert(0, str(ROOT))
    from tests.parity.rocketsim_harness import make_throws

    throws = make_throws(per_family, seed=5)
    start = {k: torch.from_numpy(getattr(throws, k)).to(device) for k in ("pos", "vel", "ang_vel")}
    eager, fused = (Arena(len(throws), blue=0, orange=0, device=device, mode=m) for m in ("eager", "fused"))
    eager.set_ball(**start)
    fused.set_ball(**start)
    goals = [(eager.step(ticks=ticks // 2), fused.step(ticks=ticks // 2)) for _ in range(2)]
    assert float((eager.ball.pos - fused.ball.pos).norm(dim=1).max()) <= FUSED_POS_TOL
    assert torch.equal(eager.state.tick_count, fused.state.tick_count)
    for e, f in goals:
        assert (e.goal_tick == f.goal_tick).float().mean() >= 0.98 and torch.equal(
            e.goal_blue | e.goal_orange, f.goal_blue | f.goal_orange
        )


# --- CPU: Triton's interpreter --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TRITON, reason="Triton is not installed (CPU-only PyTorch)")
def test_kernels_match_reference_interpreted():
    script = textwrap.dedent("""
        import torch
        torch.set_num_threads(1)
        from nitro.envs.soccar.mesh import load_arena_mesh
        from tests.envs.soccar.test_kernels import compare_fused, compare_queries
        compare_queries(load_arena_mesh(), "cpu", 64, exact=True)
        compare_fused("cpu", 2, 40)
        print("ok")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]


# --- CUDA -----------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_kernels_match_reference_cuda(mesh):
    compare_queries(mesh.to("cuda"), "cuda", 1 << 16, exact=False)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_fused_ticks_match_pipeline_cuda():
    compare_fused("cuda", 20, 120)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("mode", ["compile", "graph"])
def test_compiled_ball_step_matches_eager_cuda(mode):
    from nitro.envs.soccar.arena import Arena

    sys.path.insert(0, str(ROOT))
    from tests.parity.rocketsim_harness import make_throws

    throws = make_throws(10, seed=6)
    start = {k: torch.from_numpy(getattr(throws, k)).cuda() for k in ("pos", "vel", "ang_vel")}
    eager, fast = (Arena(len(throws), blue=0, orange=0, device="cuda", mode=m) for m in ("eager", mode))
    eager.set_ball(**start)
    fast.set_ball(**start)
    for _ in range(3):
        eager.step(ticks=40)
        fast.step(ticks=40)
    # Inductor may contract multiply-adds: agreement to rounding, amplified by contacts over 120 ticks.
    assert float((eager.ball.pos - fast.ball.pos).norm(dim=1).max()) <= FUSED_POS_TOL


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("mode", ["eager", "fused"])
def test_ticks_never_sync_with_the_host_cuda(mode):
    """DESIGN principle 3: stepping launches work and returns; nothing waits for the device."""
    from nitro.envs.soccar.arena import Arena

    arena = Arena(4096, blue=0, orange=0, device="cuda", mode=mode)
    g = torch.Generator().manual_seed(0)
    arena.set_ball(
        pos=(
            torch.rand(4096, 3, generator=g) * torch.tensor([7000.0, 9000.0, 1800.0])
            - torch.tensor([3500.0, 4500.0, -100.0])
        ).cuda(),
        vel=(torch.randn(4096, 3, generator=g) * 1000).cuda(),
    )
    arena.step(ticks=2)  # first call: kernel compilation and caches
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(4):
            arena.step(ticks=8)
    finally:
        torch.cuda.set_sync_debug_mode(0)
