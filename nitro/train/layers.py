"""The policies' building blocks: orthogonally initialised linear layers and MLP trunks (below both
`policy` and `fused_mlp`, which builds the same trunk to run it with its kernels)."""

from __future__ import annotations

import math

from torch import nn

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU, "silu": nn.SiLU}


def linear(i: int, o: int, gain: float) -> nn.Linear:
    """nn.Linear(i, o) with orthogonal weights of ``gain`` and zero bias."""
    layer = nn.Linear(i, o)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def mlp(in_dim: int, hidden: list[int], activation: str, layer_norm: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in hidden:
        layers.append(linear(in_dim, width, math.sqrt(2)))
        if layer_norm:
            layers.append(nn.LayerNorm(width))
        layers.append(ACTIVATIONS[activation]())
        in_dim = width
    return nn.Sequential(*layers)
