"""``nitro export RUN --onnx``: onnxruntime's (action, value) equal the torch policy's on random
observations, for a discrete (CartPole) and a continuous, observation-normalized (Pendulum) run."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
from train_helpers import tiny_config

from nitro.cli import main
from nitro.train.evaluate import load_policy
from nitro.train.export import export_onnx
from nitro.train.ppo import Trainer

RTOL, ATOL = 1e-5, 1e-5
"""float32 MLPs of width 64 in two runtimes: only the summation order differs (~1e-7 relative)."""
LOGIT_MARGIN = 1e-4
"""Discrete actions are compared where the best logit leads the runner-up by more than this, far
above the runtimes' rounding, so a near-tie cannot flip the argmax."""


def _export(run_dir, capsys) -> ort.InferenceSession:
    assert main(["export", str(run_dir), "--onnx"]) == 0
    out = run_dir / "policy.onnx"
    assert f"wrote {out}" in capsys.readouterr().out
    return ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])


def _torch_reference(run_dir, obs: torch.Tensor):
    _, _, policy, rms = load_policy(run_dir, "best", "cpu")
    with torch.no_grad():
        out, value, _ = policy(rms.normalize(obs) if rms else obs)
    return policy, out, value


@pytest.mark.parametrize("batch", [1, 257])
def test_cartpole_onnx_matches_torch(cartpole_run, capsys, batch):
    run_dir = cartpole_run[0]
    session = _export(run_dir, capsys)
    g = torch.Generator().manual_seed(batch)
    obs = torch.randn(batch, 4, generator=g) * torch.tensor([1.0, 1.0, 0.1, 1.0])  # theta within ~12 degrees
    action, value = session.run(["action", "value"], {"obs": obs.numpy()})
    policy, logits, want_value = _torch_reference(run_dir, obs)
    np.testing.assert_allclose(value, want_value.numpy(), rtol=RTOL, atol=ATOL)
    top2 = logits.topk(2, -1).values
    clear = (top2[:, 0] - top2[:, 1]) > LOGIT_MARGIN
    assert clear.float().mean() > 0.9  # the check is not vacuous
    assert np.array_equal(action[clear.numpy()], policy.dist.mode(logits)[clear].numpy())


def test_pendulum_onnx_matches_torch_with_obs_norm(tmp_path, capsys):
    cfg = tiny_config("pendulum", "ppo.total_steps=512")
    assert cfg.ppo.obs_norm  # the preset normalizes observations: the export must carry the statistics
    Trainer(cfg, tmp_path).train()
    session = _export(tmp_path, capsys)
    g = torch.Generator().manual_seed(0)
    theta = torch.rand(300, generator=g) * 2 * torch.pi
    obs = torch.stack([theta.cos(), theta.sin(), torch.randn(300, generator=g) * 3], -1)
    action, value = session.run(["action", "value"], {"obs": obs.numpy()})
    _, (mean, _), want_value = _torch_reference(tmp_path, obs)
    np.testing.assert_allclose(action, mean.clamp(-2.0, 2.0).numpy(), rtol=RTOL, atol=ATOL)  # as the env gets it
    np.testing.assert_allclose(value, want_value.numpy(), rtol=RTOL, atol=ATOL)
    assert action.shape == (300, 1) and value.shape == (300,)


def test_lstm_export_carries_the_hidden_state(tmp_path):
    """A recurrent policy exports as (obs, h, c) -> (action, value, h_next, c_next); feeding the state
    back over a short episode reproduces the torch policy step by step."""
    cfg = tiny_config("cartpole", "policy.lstm=8", "policy.bptt=8", "ppo.total_steps=128")
    Trainer(cfg, tmp_path).train()
    session = ort.InferenceSession(str(export_onnx(tmp_path)), providers=["CPUExecutionProvider"])
    _, _, policy, _ = load_policy(tmp_path, "best", "cpu")
    g = torch.Generator().manual_seed(0)
    h, c = policy.initial_hidden(5, "cpu")
    hidden = (h.numpy(), c.numpy())
    torch_hidden = (h, c)
    for _ in range(6):
        obs = torch.randn(5, 4, generator=g) * 0.1
        action, value, *hidden = session.run(None, {"obs": obs.numpy(), "h": hidden[0], "c": hidden[1]})
        with torch.no_grad():
            _, want_value, torch_hidden = policy(obs, torch_hidden)
        np.testing.assert_allclose(value, want_value.numpy(), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(hidden[0], torch_hidden[0].numpy(), rtol=RTOL, atol=ATOL)
        assert action.shape == (5,)
