"""Process-group helpers for runs under ``torchrun`` (PyTorch's own distributed engine).

Outside torchrun (no ``WORLD_SIZE`` in the environment) everything here is a no-op and
``world() == (0, 1)``.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def world() -> tuple[int, int]:
    """(rank, world size) from torchrun's environment, (0, 1) otherwise."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def init(device: torch.device | None = None) -> tuple[int, int]:
    """Join the process group torchrun set up (NCCL for CUDA devices, gloo otherwise)."""
    rank, size = world()
    if size > 1 and not dist.is_initialized():
        backend = "nccl" if device is not None and device.type == "cuda" else "gloo"
        dist.init_process_group(backend)
    return rank, size


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _scalar(value: int) -> torch.Tensor:
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
    return torch.tensor([value], dtype=torch.long, device=device)


def broadcast_int(value: int) -> int:
    """Rank 0's ``value`` on every rank (the identity outside a process group)."""
    if not (dist.is_available() and dist.is_initialized()):
        return value
    t = _scalar(value)
    dist.broadcast(t, src=0)
    return int(t.item())


def all_sum(value: int) -> int:
    """The sum of ``value`` over all ranks (the identity outside a process group)."""
    if not (dist.is_available() and dist.is_initialized()):
        return value
    t = _scalar(value)
    dist.all_reduce(t)
    return int(t.item())
