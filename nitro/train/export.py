"""Export a trained policy to ONNX: observation in, deterministic action and value out."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from nitro.train.evaluate import load_policy


class Deployed(nn.Module):
    """Observation normalization + actor + critic, deterministic (feed-forward policies)."""

    def __init__(self, policy, rms):
        super().__init__()
        self.policy = policy
        self.register_buffer("mean", rms.mean.clone() if rms else torch.zeros(0))
        self.register_buffer("var", rms.var.clone() if rms else torch.zeros(0))
        self.normalize = rms is not None

    def forward(self, obs: torch.Tensor):
        if self.normalize:
            obs = ((obs - self.mean) / torch.sqrt(self.var + 1e-8)).clamp(-10, 10)
        out, value, _ = self.policy(obs)
        return self.policy.dist.to_env(self.policy.dist.mode(out)), value


def export_onnx(run: str | Path, out: str | Path | None = None, which: str = "best") -> Path:
    cfg, env, policy, rms = load_policy(run, which, "cpu")
    if policy.recurrent:
        raise NotImplementedError("ONNX export of LSTM policies is not supported yet; export a "
                                  "feed-forward policy (policy.lstm=0)")
    out = Path(out) if out else Path(run) / "policy.onnx"
    model = Deployed(policy, rms).eval()
    example = torch.zeros(1, env.observation_space.shape[0])
    torch.onnx.export(model, (example,), str(out), input_names=["obs"], output_names=["action", "value"],
                      dynamic_axes={"obs": {0: "batch"}, "action": {0: "batch"}, "value": {0: "batch"}},
                      dynamo=False)
    return out
