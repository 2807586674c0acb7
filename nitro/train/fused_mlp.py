"""A fused Triton MLP trunk: ``x -> act(x W1^T + b1) -> act(. W2^T + b2)`` with the hidden activations
kept on chip.

Why: PPO's update on small policies (64x64 tanh trunks, minibatches of 10^5-10^6 samples) is
memory-bound on the [samples, 64] activations that cuBLAS and Inductor's pointwise kernels write and
read back. Here one program takes a tile of BLOCK_M rows, holds both weight matrices on chip, and
writes only the trunk's output. The backward recomputes the first layer's activations from ``x``
(the output, which the forward returns anyway, gives the second layer's derivative) and reduces the
weight gradients per program into a [programs, ...] fp32 buffer that one ``sum`` finishes: no
atomics, so the result is deterministic for a given grid.

Dtypes: ``bf16=True`` (what ``FusedMLP`` passes under bf16 autocast) rounds x, the weights and the
hidden activation to bf16 for ``tl.dot`` (fp32 accumulation, fp32 bias and activation) and returns a
bf16 output, as autocast's ``nn.Linear`` + activation would. ``bf16=False`` computes in fp32 (IEEE
products, or TF32 where ``torch.get_float32_matmul_precision()`` allows it, as cuBLAS would).
Weight and bias gradients are fp32 (the master weights' dtype); ``grad_x`` has ``x``'s dtype.

The kernels are registered with ``torch.library.triton_op`` (forward and backward ops) and an autograd
formula, so ``torch.compile`` traces them, the compiled loss's backward calls the backward kernel, and
CUDA graphs capture both. Launches read only shapes on the host: no syncs.
Widths and input dims up to 128 (padded to powers of two >= 16 inside the kernel); one or two layers
per op (``FusedMLP`` chains ops for deeper trunks).
"""

from __future__ import annotations

import os
from typing import Optional

import torch
from torch import nn

from nitro.train.layers import mlp

try:  # Triton comes with CUDA builds of PyTorch; CPU installs have only the unfused trunk.
    import triton
    import triton.language as tl
    from torch.library import triton_op, wrap_triton
except ImportError:  # pragma: no cover - exercised on CPU-only installs
    triton = None

ACTIVATIONS = ("tanh", "relu")
MAX_DIM = 128
FWD_BLOCK_M = 128  # rows per forward program
BWD_BLOCK_M = 64  # rows per backward tile (a program loops over several tiles)
_ACT_CODE = {"tanh": 0, "relu": 1}


def available() -> bool:
    """Triton can be imported (a CUDA build of PyTorch, or TRITON_INTERPRET=1 for CPU testing)."""
    return triton is not None


def interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _pad(n: int) -> int:
    return max(16, 1 << (n - 1).bit_length())


if triton is not None:

    @triton.jit
    def _act(z, ACT: tl.constexpr):
        if ACT == 0:
            # tanh(z) = sign(z) (1 - e) / (1 + e), e = exp(-2|z|) in (0, 1]: no overflow
            e = tl.exp(-2.0 * tl.abs(z))
            t = (1.0 - e) / (1.0 + e)
            return tl.where(z < 0.0, -t, t)
        else:
            return tl.maximum(z, 0.0)

    @triton.jit
    def _act_grad(h, ACT: tl.constexpr):
        """Derivative of the activation from its output h."""
        if ACT == 0:
            return 1.0 - h * h
        else:
            return tl.where(h > 0.0, 1.0, 0.0)

    @triton.jit
    def _cast(x, DT: tl.constexpr, PREC: tl.constexpr):
        """x.to(DT), rounding to nearest even. The interpreter truncates fp32 to bf16: round by hand there."""
        if PREC == "emulate" and DT == tl.bfloat16:
            b = x.to(tl.float32).to(tl.uint32, bitcast=True)
            b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
            return b.to(tl.float32, bitcast=True).to(DT)
        else:
            return x.to(DT)

    @triton.jit
    def _dot(a, b, DT: tl.constexpr, PREC: tl.constexpr):
        if PREC == "emulate":
            # the interpreter multiplies bf16 operands as their raw bits: round to bf16, multiply in fp32
            # (exact: a product of two bf16 fits in fp32's mantissa), accumulate in fp32 as a tensor core does
            return tl.dot(_cast(a, DT, PREC).to(tl.float32), _cast(b, DT, PREC).to(tl.float32),
                          input_precision="ieee", out_dtype=tl.float32)
        else:
            return tl.dot(a.to(DT), b.to(DT), input_precision=PREC, out_dtype=tl.float32)

    @triton.jit
    def _fwd_kernel(
        x_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr, y_ptr,
        M, K, H1, H2,
        KP: tl.constexpr, H1P: tl.constexpr, H2P: tl.constexpr,
        TWO: tl.constexpr, ACT: tl.constexpr, DT: tl.constexpr, PREC: tl.constexpr,
        BLOCK_M: tl.constexpr,
    ):
        rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
        live = rows < M
        k = tl.arange(0, KP)
        h1 = tl.arange(0, H1P)
        x = tl.load(x_ptr + rows[:, None] * K + k[None, :], mask=live[:, None] & (k[None, :] < K), other=0.0)
        w1t = tl.load(w1_ptr + h1[None, :] * K + k[:, None], mask=(h1[None, :] < H1) & (k[:, None] < K), other=0.0)
        b1 = tl.load(b1_ptr + h1, mask=h1 < H1, other=0.0).to(tl.float32)
        h = _act(_dot(x, w1t, DT, PREC) + b1[None, :], ACT)
        if TWO:
            h2 = tl.arange(0, H2P)
            w2t = tl.load(w2_ptr + h2[None, :] * H1 + h1[:, None], mask=(h2[None, :] < H2) & (h1[:, None] < H1),
                          other=0.0)
            b2 = tl.load(b2_ptr + h2, mask=h2 < H2, other=0.0).to(tl.float32)
            h = _act(_dot(_cast(h, DT, PREC), w2t, DT, PREC) + b2[None, :], ACT)
            tl.store(y_ptr + rows[:, None] * H2 + h2[None, :], _cast(h, y_ptr.dtype.element_ty, PREC),
                     mask=live[:, None] & (h2[None, :] < H2))
        else:
            tl.store(y_ptr + rows[:, None] * H1 + h1[None, :], _cast(h, y_ptr.dtype.element_ty, PREC),
                     mask=live[:, None] & (h1[None, :] < H1))

    @triton.jit
    def _bwd_kernel(
        x_ptr, w1_ptr, b1_ptr, w2_ptr, y_ptr, dy_ptr,
        dx_ptr, dw1_ptr, db1_ptr, dw2_ptr, db2_ptr,
        M, K, H1, H2, TILES, PROGRAMS,
        KP: tl.constexpr, H1P: tl.constexpr, H2P: tl.constexpr,
        TWO: tl.constexpr, ACT: tl.constexpr, DT: tl.constexpr, PREC: tl.constexpr, NEED_DX: tl.constexpr,
        BLOCK_M: tl.constexpr,
    ):
        pid = tl.program_id(0)
        k = tl.arange(0, KP)
        h1 = tl.arange(0, H1P)
        h2 = tl.arange(0, H2P)
        kmask = k < K
        h1mask = h1 < H1
        h2mask = h2 < H2
        w1 = tl.load(w1_ptr + h1[:, None] * K + k[None, :], mask=h1mask[:, None] & kmask[None, :], other=0.0)
        b1 = tl.load(b1_ptr + h1, mask=h1mask, other=0.0).to(tl.float32)
        dw1 = tl.zeros((H1P, KP), dtype=tl.float32)
        db1 = tl.zeros((H1P,), dtype=tl.float32)
        if TWO:
            w2 = tl.load(w2_ptr + h2[:, None] * H1 + h1[None, :], mask=h2mask[:, None] & h1mask[None, :], other=0.0)
            dw2 = tl.zeros((H2P, H1P), dtype=tl.float32)
            db2 = tl.zeros((H2P,), dtype=tl.float32)
        # tiles pid, pid + PROGRAMS, ... (a while loop: the interpreter cannot index a range by a runtime int)
        tile = pid
        while tile < TILES:
            rows = tile.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
            live = rows < M
            x = tl.load(x_ptr + rows[:, None] * K + k[None, :], mask=live[:, None] & kmask[None, :], other=0.0)
            # recompute the first layer's activation (rows past M are zero: their gradients vanish)
            h = _act(_dot(x, tl.trans(w1), DT, PREC) + b1[None, :], ACT)
            h = _cast(h, DT, PREC).to(tl.float32)  # as the forward rounds it
            if TWO:
                out = live[:, None] & h2mask[None, :]
                y = tl.load(y_ptr + rows[:, None] * H2 + h2[None, :], mask=out, other=0.0).to(tl.float32)
                dy = tl.load(dy_ptr + rows[:, None] * H2 + h2[None, :], mask=out, other=0.0).to(tl.float32)
                g2 = _cast(dy * _act_grad(y, ACT), DT, PREC)
                dw2 += _dot(tl.trans(g2), h, DT, PREC)
                db2 += tl.sum(g2.to(tl.float32), axis=0)
                dh = _dot(g2, w2, DT, PREC)
            else:
                out = live[:, None] & h1mask[None, :]
                dh = tl.load(dy_ptr + rows[:, None] * H1 + h1[None, :], mask=out, other=0.0).to(tl.float32)
            g1 = _cast(dh * _act_grad(h, ACT), DT, PREC)
            dw1 += _dot(tl.trans(g1), x, DT, PREC)
            db1 += tl.sum(g1.to(tl.float32), axis=0)
            if NEED_DX:
                dx = _dot(g1, w1, DT, PREC)
                tl.store(dx_ptr + rows[:, None] * K + k[None, :], _cast(dx, dx_ptr.dtype.element_ty, PREC),
                         mask=live[:, None] & kmask[None, :])
            tile += PROGRAMS
        # this program's partial sums, in its own slot of the [programs, ...] buffers
        base = pid.to(tl.int64)
        tl.store(dw1_ptr + base * H1 * K + h1[:, None] * K + k[None, :], dw1, mask=h1mask[:, None] & kmask[None, :])
        tl.store(db1_ptr + base * H1 + h1, db1, mask=h1mask)
        if TWO:
            tl.store(dw2_ptr + base * H2 * H1 + h2[:, None] * H1 + h1[None, :], dw2,
                     mask=h2mask[:, None] & h1mask[None, :])
            tl.store(db2_ptr + base * H2 + h2, db2, mask=h2mask)

    def _consts(x: torch.Tensor, w1: torch.Tensor, w2: Optional[torch.Tensor], activation: str, bf16: bool):
        K, H1 = x.shape[1], w1.shape[0]
        H2 = w2.shape[0] if w2 is not None else H1
        tf32 = torch.get_float32_matmul_precision() != "highest"
        return dict(
            KP=_pad(K), H1P=_pad(H1), H2P=_pad(H2), TWO=w2 is not None, ACT=_ACT_CODE[activation],
            DT=tl.bfloat16 if bf16 else tl.float32,
            PREC="emulate" if (bf16 and interpreted()) else "tf32" if (tf32 and not bf16) else "ieee",
        ), (K, H1, H2)

    def _warps(*dims: int) -> int:
        return 8 if max(dims) > 64 else 4

    def _programs(device: torch.device, tiles: int) -> int:
        """Backward programs: a few per SM, each looping over tiles and keeping one partial sum."""
        if device.type == "cuda":
            per = 4 * torch.cuda.get_device_properties(device).multi_processor_count
        else:  # the interpreter: few programs, so few partial sums to check
            per = 4
        return max(1, min(tiles, per))

    @triton_op("nitro::fused_mlp_fwd", mutates_args={})
    def _fwd_op(
        x: torch.Tensor,
        w1: torch.Tensor,
        b1: torch.Tensor,
        w2: Optional[torch.Tensor],
        b2: Optional[torch.Tensor],
        activation: str,
        bf16: bool,
    ) -> torch.Tensor:
        x = x.contiguous()
        M = x.shape[0]
        c, (K, H1, H2) = _consts(x, w1, w2, activation, bf16)
        y = torch.empty(M, H2, device=x.device, dtype=torch.bfloat16 if bf16 else torch.float32)
        if M == 0:
            return y
        w2_ = w1 if w2 is None else w2.contiguous()
        b2_ = b1 if b2 is None else b2.contiguous()
        wrap_triton(_fwd_kernel)[(triton.cdiv(M, FWD_BLOCK_M),)](
            x, w1.contiguous(), b1.contiguous(), w2_, b2_, y, M, K, H1, H2, **c,
            BLOCK_M=FWD_BLOCK_M, num_warps=_warps(c["H1P"], c["H2P"]),
        )
        return y

    @triton_op("nitro::fused_mlp_bwd", mutates_args={})
    def _bwd_op(
        x: torch.Tensor,
        w1: torch.Tensor,
        b1: torch.Tensor,
        w2: Optional[torch.Tensor],
        y: torch.Tensor,
        dy: torch.Tensor,
        activation: str,
        bf16: bool,
        need_dx: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        x, y, dy = x.contiguous(), y.contiguous(), dy.contiguous()
        M = x.shape[0]
        c, (K, H1, H2) = _consts(x, w1, w2, activation, bf16)
        tiles = triton.cdiv(M, BWD_BLOCK_M)
        P = _programs(x.device, tiles)
        f32 = dict(device=x.device, dtype=torch.float32)
        dx = torch.empty(M if need_dx else 0, K, device=x.device, dtype=x.dtype)
        dw1, db1 = torch.empty(P, H1, K, **f32), torch.empty(P, H1, **f32)
        dw2, db2 = torch.empty(P, H2, H1 if w2 is not None else 0, **f32), torch.empty(P, H2, **f32)
        if M == 0:
            return dx, dw1.zero_().sum(0), db1.zero_().sum(0), dw2.zero_().sum(0), db2.zero_().sum(0)
        w2_ = w1 if w2 is None else w2.contiguous()
        wrap_triton(_bwd_kernel)[(P,)](
            x, w1.contiguous(), b1.contiguous(), w2_, y, dy, dx if need_dx else x, dw1, db1,
            dw2 if w2 is not None else dw1, db2, M, K, H1, H2, tiles, P, **c, NEED_DX=need_dx,
            BLOCK_M=BWD_BLOCK_M, num_warps=_warps(c["H1P"], c["H2P"]),
        )
        return dx, dw1.sum(0), db1.sum(0), dw2.sum(0), db2.sum(0)

    def _setup_context(ctx, inputs, output):
        x, w1, b1, w2, b2, activation, bf16 = inputs
        ctx.save_for_backward(x, w1, b1, w2, output)
        ctx.activation, ctx.bf16, ctx.two = activation, bf16, w2 is not None

    def _backward(ctx, dy):
        x, w1, b1, w2, y = ctx.saved_tensors
        dx, dw1, db1, dw2, db2 = _bwd_op(x, w1, b1, w2 if ctx.two else None, y, dy, ctx.activation, ctx.bf16,
                                          ctx.needs_input_grad[0])
        two = ctx.two
        return (dx if ctx.needs_input_grad[0] else None, dw1, db1, dw2 if two else None, db2 if two else None,
                None, None)

    torch.library.register_autograd("nitro::fused_mlp_fwd", _backward, setup_context=_setup_context)


def fused_layers(x: torch.Tensor, w1, b1, w2=None, b2=None, activation: str = "tanh",
                 bf16: bool = False) -> torch.Tensor:
    """``act(act(x W1^T + b1) W2^T + b2)`` (one layer if ``w2`` is None) over the last dim of ``x``."""
    if triton is None:
        raise RuntimeError("Triton is not installed: the fused MLP needs a CUDA build of PyTorch (which ships "
                           "Triton), or `pip install triton` with TRITON_INTERPRET=1 for CPU tests")
    lead = x.shape[:-1]
    y = _fwd_op(x.reshape(-1, x.shape[-1]), w1, b1, w2, b2, activation, bf16)
    return y.reshape(*lead, y.shape[-1])


def check_supported(hidden: list[int], in_dim: int, activation: str, layer_norm: bool, lstm: int,
                    device) -> None:
    """Raise a ValueError naming what ``policy.fused=true`` does not support here and how to fix it."""
    fix = "; set policy.fused=false"
    if activation not in ACTIVATIONS:
        raise ValueError(f"policy.fused=true supports activation {' | '.join(ACTIVATIONS)}, not "
                         f"{activation!r}{fix} or choose policy.activation=tanh|relu")
    if layer_norm:
        raise ValueError(f"policy.fused=true does not support policy.layer_norm=true{fix} or policy.layer_norm=false")
    if lstm:
        raise ValueError(f"policy.fused=true does not support an LSTM core (policy.lstm={lstm}){fix} or "
                         "policy.lstm=0")
    if max([in_dim, *hidden]) > MAX_DIM:
        raise ValueError(f"policy.fused=true supports trunk widths and observation sizes up to {MAX_DIM}, got "
                         f"obs {in_dim} and hidden {list(hidden)}{fix}")
    if triton is None:
        raise ValueError(f"policy.fused=true needs Triton (a CUDA build of PyTorch){fix}")
    if (device is None or torch.device(device).type != "cuda") and not interpreted():
        raise ValueError(f"policy.fused=true needs a CUDA device (got {device}; pass ActorCritic its device; "
                         f"TRITON_INTERPRET=1 runs the kernels slowly on the CPU for tests){fix}")


def supported(hidden: list[int], in_dim: int, activation: str, layer_norm: bool, lstm: int, device) -> bool:
    """What ``policy.fused=auto`` asks: would the fused trunks run here, on a CUDA device?"""
    if device is None or torch.device(device).type != "cuda":
        return False
    try:
        check_supported(hidden, in_dim, activation, layer_norm, lstm, device)
    except ValueError:
        return False
    return True


class FusedMLP(nn.Sequential):
    """The ``layers.mlp`` trunk (same modules, so the same parameter names, init and checkpoints) whose
    forward runs the fused Triton kernels, two layers per launch. Activations: tanh or relu."""

    def __init__(self, in_dim: int, hidden: list[int], activation: str):
        if activation not in ACTIVATIONS:
            raise ValueError(f"FusedMLP supports activations {ACTIVATIONS}, got {activation!r}")
        if max([in_dim, *hidden]) > MAX_DIM:
            raise ValueError(f"FusedMLP supports dims up to {MAX_DIM}, got {in_dim} -> {list(hidden)}")
        super().__init__(*mlp(in_dim, list(hidden), activation, False))
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        linears = [m for m in self if isinstance(m, nn.Linear)]
        dev = x.device.type
        bf16 = torch.is_autocast_enabled(dev) and torch.get_autocast_dtype(dev) == torch.bfloat16
        if not bf16 and x.dtype != torch.float32:
            x = x.float()
        for i in range(0, len(linears), 2):
            a = linears[i]
            b = linears[i + 1] if i + 1 < len(linears) else None
            x = fused_layers(x, a.weight, a.bias, None if b is None else b.weight, None if b is None else b.bias,
                             self.activation, bf16)
        return x

