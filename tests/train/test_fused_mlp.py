"""The fused Triton MLP trunk (nitro/train/fused_mlp.py) against the nn.Sequential trunk of `policy.mlp`.

CPU: the kernels under TRITON_INTERPRET=1 (in a subprocess: the variable must be set before Triton is
imported; skipped without Triton). CUDA (`gpu` marker): the same comparison, a compiled loss through
the fused trunk, and a short PPO run with policy.fused=true against policy.fused=false.

Tolerances, as a share of the reference's largest magnitude:
- fp32: 1e-5. Both sides compute in fp32 with IEEE products; they differ only in summation order
  (over at most 128 terms per output, and over programs for the weight gradients): a few ulps.
- bf16 (autocast): 2^-5. Both sides round x, the weights, the hidden activation and the gradients to
  bf16 (unit roundoff 2^-9), but at different points (autocast also rounds the pre-activations and the
  bias, the kernel keeps them fp32): a handful of bf16 roundoffs on values near the maximum, plus, for
  relu, a rare unit whose pre-activation rounds across 0 on one side only.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
HAS_TRITON = importlib.util.find_spec("triton") is not None
FP32_TOL = 1e-5
BF16_TOL = 2.0**-5
CASES = [(4, 64, "tanh"), (8, 64, "relu"), (4, 128, "relu"), (8, 128, "tanh")]


def compare_trunks(device: str, m: int, in_dim: int, width: int, activation: str, bf16: bool,
                   depth: int = 2) -> None:
    """FusedMLP and `mlp` from the same seed: equal state-dict keys, forward and every gradient close."""
    from nitro.train.fused_mlp import FusedMLP
    from nitro.train.layers import mlp

    hidden = [width] * depth
    torch.manual_seed(0)
    ref = mlp(in_dim, hidden, activation, False).to(device)
    torch.manual_seed(0)
    fused = FusedMLP(in_dim, hidden, activation).to(device)
    assert list(ref.state_dict()) == list(fused.state_dict())
    g = torch.Generator().manual_seed(1)
    x = torch.randn(m, in_dim, generator=g).to(device)
    dy = torch.randn(m, width, generator=g).to(device)
    results = []
    for trunk in (fused, ref):
        xx = x.clone().requires_grad_()
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
            y = trunk(xx)
        assert y.dtype == (torch.bfloat16 if bf16 else torch.float32)
        y.backward(dy.to(y.dtype))
        results.append([y.detach().float(), xx.grad] + [p.grad for p in trunk.parameters()])
    tol = BF16_TOL if bf16 else FP32_TOL
    names = ["y", "dx"] + [n for n, _ in ref.named_parameters()]
    for name, a, b in zip(names, *results):
        assert a.shape == b.shape and a.dtype == b.dtype, name
        err = float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))
        assert err <= tol, f"{name}: relative error {err:.2e} > {tol:.1e} (m={m}, {in_dim}->{hidden}, " \
                           f"{activation}, bf16={bf16})"


def ppo_losses(device: str, precision: str, fused: str, tmp=None, num_envs: int = 8) -> dict:
    """The last update's losses of 3 PPO iterations on CartPole (num_envs x 16 steps each)."""
    import tempfile

    from nitro.train import config as C
    from nitro.train.ppo import Trainer

    cfg = C.load("cartpole", ["run.console=false", "run.tensorboard=false", f"run.device={device}",
                              f"run.precision={precision}", f"policy.fused={fused}", f"env.num_envs={num_envs}",
                              "ppo.num_steps=16", f"ppo.total_steps={3 * 16 * num_envs}", "ppo.target_return=none",
                              "run.checkpoint_every=1000"])
    with tempfile.TemporaryDirectory() as run_dir:
        metrics = Trainer(cfg, Path(tmp or run_dir) / fused).train()
    return {k: float(v) for k, v in metrics.items() if k.startswith("loss/")}


# --- CPU: Triton's interpreter --------------------------------------------------------------------


@pytest.mark.skipif(not HAS_TRITON, reason="Triton is not installed (CPU-only PyTorch)")
def test_fused_mlp_matches_trunk_interpreted():
    script = textwrap.dedent(f"""
        import torch
        torch.set_num_threads(1)
        from tests.train.test_fused_mlp import CASES, compare_trunks
        for in_dim, width, act in CASES:
            for bf16 in (False, True):
                compare_trunks("cpu", 333, in_dim, width, act, bf16)  # 333: not a multiple of any block
        compare_trunks("cpu", 70, 4, 64, "tanh", False, depth=3)  # a pair and a single layer
        compare_trunks("cpu", 70, 8, 128, "relu", True, depth=1)
        from tests.train.test_fused_mlp import ppo_losses
        a, b = ppo_losses("cpu", "fp32", "true"), ppo_losses("cpu", "fp32", "false")
        for k in a:
            assert abs(a[k] - b[k]) <= 1e-4 * abs(b[k]) + 1e-6, (k, a[k], b[k])
        print("ok")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]


# --- config ---------------------------------------------------------------------------------------


def test_fused_config_values_and_errors():
    from nitro.core.spaces import Discrete
    from nitro.train import config as C
    from nitro.train.policy import ActorCritic

    assert C.load("cartpole", ["policy.fused=true"]).policy.fused == "true"
    assert C.load("cartpole", ["run.precision=bf16", "policy.fused=true"]).run.precision == "bf16"
    assert C.TrainConfig().policy.fused == "auto"
    with pytest.raises(C.ConfigError, match="policy.fused"):
        C.load("cartpole", ["policy.fused=yes"])
    unsupported = [(dict(activation="gelu"), "activation"), (dict(layer_norm=True), "layer_norm"),
                   (dict(lstm=8), "LSTM"), (dict(hidden=[256, 256]), "up to 128")]
    for kw, what in unsupported:
        with pytest.raises(ValueError, match=what) as err:
            ActorCritic(4, Discrete(2), C.PolicyConfig(fused="true", **kw), "cuda")
        assert "policy.fused=false" in str(err.value)
    if os.environ.get("TRITON_INTERPRET") != "1":
        with pytest.raises(ValueError, match="CUDA device|Triton"):
            ActorCritic(4, Discrete(2), C.PolicyConfig(fused="true"), "cpu")
    plain = ActorCritic(4, Discrete(2), C.PolicyConfig(fused="false"), "cpu")
    assert isinstance(plain.actor_trunk, torch.nn.Sequential)
    # auto: fused only where it runs (a CUDA device and a supported trunk), else the plain trunk
    from nitro.train import fused_mlp

    for kw, device in [({}, "cpu"), (dict(activation="gelu"), "cuda"), (dict(lstm=8), "cuda")]:
        policy = ActorCritic(4, Discrete(2), C.PolicyConfig(fused="auto", **kw), device)
        assert not isinstance(policy.actor_trunk, fused_mlp.FusedMLP), kw
    if fused_mlp.triton is not None:
        policy = ActorCritic(4, Discrete(2), C.PolicyConfig(fused="auto"), "cuda")
        assert isinstance(policy.actor_trunk, fused_mlp.FusedMLP)


# --- CUDA -----------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("bf16", [False, True])
def test_fused_mlp_matches_trunk_cuda(bf16):
    for in_dim, width, act in CASES:
        for m in (333, 100_003):
            compare_trunks("cuda", m, in_dim, width, act, bf16)
    compare_trunks("cuda", 5000, 4, 64, "tanh", bf16, depth=3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("bf16", [False, True])
def test_compiled_loss_through_fused_mlp_cuda(bf16):
    from nitro.core import fast
    from nitro.train.fused_mlp import FusedMLP
    from nitro.train.layers import mlp

    torch.manual_seed(0)
    ref = mlp(4, [64, 64], "tanh", False).cuda()
    torch.manual_seed(0)
    fused = FusedMLP(4, [64, 64], "tanh").cuda()
    x = torch.randn(40_000, 4, device="cuda")
    target = torch.randn(40_000, 64, device="cuda")
    grads = []
    for trunk in (fused, ref):
        def loss(x, target, trunk=trunk):
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
                y = trunk(x)
            return (y.float() - target).square().mean()
        value = fast.compile(loss)(x, target)
        value.backward()
        grads.append([value.detach()] + [p.grad for p in trunk.parameters()])
    tol = BF16_TOL if bf16 else 1e-4  # Inductor may fuse the reference's loss differently
    for a, b in zip(*grads):
        assert float((a - b).abs().max() / b.abs().max()) <= tol


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_ppo_fused_matches_unfused_cuda(tmp_path, precision):
    losses = {fused: ppo_losses("cuda", precision, fused, tmp_path, num_envs=4096) for fused in ("false", "true")}
    # same init and seed: the rollouts agree until a near-tie between logits samples another action, so
    # the last update's losses agree to a few percent (policy loss and KL are near 0: absolute bounds)
    for k, rel, abs_ in [("loss/value", 0.1, 1e-3), ("loss/entropy", 0.02, 1e-3), ("loss/grad_norm", 0.1, 1e-3),
                         ("loss/policy", 0.0, 1e-2), ("loss/approx_kl", 0.0, 1e-2)]:
        a, b = float(losses["true"][k]), float(losses["false"][k])
        assert abs(a - b) <= rel * abs(b) + abs_, (k, a, b)
