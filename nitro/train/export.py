"""Export a trained policy to ONNX: observation in, deterministic action and value out.

Recurrent policies take and return their LSTM state too: inputs (obs, h, c), outputs
(action, value, h_next, c_next); start an episode with zeros for h and c."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from nitro.core.errors import NitroError
from nitro.train.evaluate import load_policy


class Deployed(nn.Module):
    """Observation normalization + actor + critic, deterministic."""

    def __init__(self, policy, rms):
        super().__init__()
        self.policy = policy
        self.register_buffer("mean", rms.mean.clone() if rms else torch.zeros(0))
        self.register_buffer("var", rms.var.clone() if rms else torch.zeros(0))
        self.normalize = rms is not None

    def forward(self, obs: torch.Tensor, *hidden: torch.Tensor):
        if self.normalize:
            obs = ((obs - self.mean) / torch.sqrt(self.var + 1e-8)).clamp(-10, 10)
        out, value, hidden = self.policy(obs, hidden)
        return (self.policy.dist.to_env(self.policy.dist.mode(out)), value, *hidden)


class ExportError(NitroError):
    """An export that cannot run here (its optional dependency is missing)."""


def export_onnx(run: str | Path, out: str | Path | None = None, which: str = "best") -> Path:
    try:
        import onnx  # noqa: F401  (PyTorch's exporter writes the model with it)
    except ImportError:
        raise ExportError('ONNX export needs the onnx package, which the export extra installs: pip install '
                          '"nitro-rl[export]"') from None
    cfg, env, policy, rms = load_policy(run, which, "cpu")
    out = Path(out) if out else Path(run) / "policy.onnx"
    model = Deployed(policy, rms).eval()
    example = (torch.zeros(1, env.observation_space.shape[0]), *policy.initial_hidden(1, "cpu"))
    inputs = ["obs", "h", "c"][: len(example)]
    outputs = ["action", "value", "h_next", "c_next"][: len(example) + 1]
    torch.onnx.export(model, example, str(out), input_names=inputs, output_names=outputs,
                      dynamic_axes={name: {0: "batch"} for name in inputs + outputs}, dynamo=False)
    return out
