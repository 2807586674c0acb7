"""Adam over one flat parameter buffer, and the running statistics used to normalize.

Every parameter is a view into one flat fp32 buffer and every gradient a view into another, so
clipping, the NaN guard, the all-reduce and the Adam update are each a handful of kernels, and all
of it can be captured in a CUDA graph (the learning rate and step count are device tensors).
"""

from __future__ import annotations

import torch
from torch import nn


class FlatAdam:
    """Adam (Kingma & Ba) with bias correction, on the flat views of ``module``'s parameters."""

    def __init__(self, module: nn.Module, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        params = [p for p in module.parameters() if p.requires_grad]
        device = params[0].device
        total = sum(p.numel() for p in params)
        self.flat = torch.zeros(total, device=device)
        self.grad = torch.zeros(total, device=device)
        offset = 0
        for p in params:
            n = p.numel()
            self.flat[offset : offset + n].copy_(p.detach().flatten())
            p.data = self.flat[offset : offset + n].view_as(p)
            p.grad = self.grad[offset : offset + n].view_as(p)
            offset += n
        self.params = params
        self.exp_avg = torch.zeros_like(self.flat)
        self.exp_avg_sq = torch.zeros_like(self.flat)
        self.step_count = torch.zeros((), device=device)
        self.lr = torch.full((), float(lr), device=device)
        self.beta1, self.beta2 = betas
        self.eps = eps

    def zero_grad(self) -> None:
        self.grad.zero_()

    def step(self, apply: torch.Tensor | None = None) -> None:
        """One update from ``self.grad``; where the bool tensor ``apply`` is false nothing changes
        (how a non-finite minibatch is skipped without a host sync)."""
        keep = (lambda new, old: new) if apply is None else (lambda new, old: torch.where(apply, new, old))
        step = keep(self.step_count + 1, self.step_count)
        exp_avg = keep(self.exp_avg.lerp(self.grad, 1 - self.beta1), self.exp_avg)
        exp_avg_sq = keep(self.exp_avg_sq * self.beta2 + (1 - self.beta2) * self.grad**2, self.exp_avg_sq)
        denom = (exp_avg_sq / (1 - self.beta2**step)).sqrt() + self.eps
        update = self.lr * (exp_avg / (1 - self.beta1**step)) / denom
        self.flat.sub_(update if apply is None else torch.where(apply, update, 0.0))
        self.step_count.copy_(step)
        self.exp_avg.copy_(exp_avg)
        self.exp_avg_sq.copy_(exp_avg_sq)

    def state(self) -> dict[str, torch.Tensor]:
        return {"exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq, "step": self.step_count, "lr": self.lr}


class RunningMeanStd:
    """Mean and variance of a stream of batches (Chan et al.'s parallel merge), on the device."""

    def __init__(self, shape: tuple[int, ...], device, eps: float = 1e-4):
        self.mean = torch.zeros(shape, device=device)
        self.var = torch.ones(shape, device=device)
        self.count = torch.full((), eps, device=device)

    def update_from_moments(self, mean: torch.Tensor, var: torch.Tensor, count) -> None:
        delta = mean - self.mean
        total = self.count + count
        self.mean += delta * count / total
        m2 = self.var * self.count + var * count + delta**2 * self.count * count / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor, clip: float = 10.0) -> torch.Tensor:
        return ((x - self.mean) / torch.sqrt(self.var + 1e-8)).clamp(-clip, clip)

    def state(self) -> dict[str, torch.Tensor]:
        return {"mean": self.mean, "var": self.var, "count": self.count}
