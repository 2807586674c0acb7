"""Multi-process training under torchrun: one process per GPU (NCCL) or per CPU worker (gloo).

Each rank owns its share of the envs on its own device; gradients are averaged with one all-reduce
of the flat gradient buffer per minibatch (what DDP does, without its hooks, so it can be captured
in a CUDA graph); metrics are summed onto every rank and rank 0 writes them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init(device: str) -> tuple[Dist, torch.device]:
    """Join the torchrun job if there is one; returns the rank info and this rank's device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", local if world > 1 else torch.cuda.current_device())
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        backend = "nccl" if dev.type == "cuda" else "gloo"
        kwargs = {"device_id": dev} if dev.type == "cuda" else {}
        dist.init_process_group(backend, **kwargs)
    return Dist(rank, world, local), dev


def all_reduce_mean_(x: torch.Tensor, d: Dist) -> torch.Tensor:
    if d.enabled:
        dist.all_reduce(x)
        x /= d.world_size
    return x


def all_reduce_sum_(x: torch.Tensor, d: Dist) -> torch.Tensor:
    if d.enabled:
        dist.all_reduce(x)
    return x


def broadcast_(x: torch.Tensor, d: Dist) -> torch.Tensor:
    """Rank 0's values everywhere (initial parameters must agree)."""
    if d.enabled:
        dist.broadcast(x, 0)
    return x


def barrier(d: Dist) -> None:
    if d.enabled:
        dist.barrier()


def shutdown(d: Dist) -> None:
    if d.enabled and dist.is_initialized():
        dist.destroy_process_group()


def max_over_ranks(value: int, d: Dist) -> int:
    """The largest of the ranks' ``value`` (a host sync; for decisions all ranks must share)."""
    if not d.enabled:
        return value
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    x = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    return int(x.item())  # sync-ok: once per log
