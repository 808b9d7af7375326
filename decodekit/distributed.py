"""Process-group helpers for runs under ``torchrun`` (PyTorch's own distributed engine).

Outside torchrun (no ``WORLD_SIZE`` in the environment) everything here is a no-op and
``world() == (0, 1)``.
"""

from __future__ import annotations

import os
import re

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


def joined() -> bool:
    """Whether this process is in a process group already."""
    return dist.is_available() and dist.is_initialized()


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


# what gloo and NCCL say when a collective fails because another process of the run has gone
_PEER_GONE = re.compile(r"third_party/gloo|ProcessGroupGloo|NCCL|Connection (?:reset|closed) by peer")


def peer_lost(error: BaseException) -> str | None:
    """When ``error`` is a collective failing in a process group (another rank was killed, its
    connection reset): one line saying so, with the backend's reason; else None. gloo raises a
    plain ``RuntimeError`` (from DDP's gradient hook, say) whose 40-line traceback told nothing
    more."""
    if not (dist.is_available() and dist.is_initialized()):
        return None
    text = str(error).strip()
    if not (isinstance(error, getattr(dist, "DistError", ())) or _PEER_GONE.search(text)):
        return None
    first = (text.splitlines() or [type(error).__name__])[0]
    reason = re.sub(r"^\[[^\]]*\]\s*", "", first)  # gloo's "[.../pair.cc:537] " prefix
    reason = reason.split(". This is typically")[0][:200]
    rank, size = world()
    return (
        f"rank {rank} of {size} lost another process of this run (killed or failed: the run's status "
        f"and that process's own message say why): {reason}"
    )


def launch(argv: list[str] | None = None) -> int:
    """``torchrun`` (the same arguments) returning the workers' exit status, and printing nothing
    of its own when a worker fails or Ctrl-C/SIGTERM stops the run: plain torchrun exits 1
    after a worker's one-line error and follows it with a ``ChildFailedError`` traceback.

    The status is that of the first worker to fail (2 for a mistake, 130 after Ctrl-C, 128 + N
    for a worker killed by signal N). torchrun's own log lines are kept when ``LOGLEVEL`` is set."""
    import logging

    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    if "LOGLEVEL" not in os.environ:  # "Sending process 123 closing signal SIGTERM", "failed (exitcode: 2)"
        for name in list(logging.root.manager.loggerDict):
            if name.startswith("torch.distributed.elastic") or name == "torch.distributed.run":  # its banner
                logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        run(parse_args(argv))
    except ChildFailedError as e:
        code = e.get_first_failure()[1].exitcode
        return code if code > 0 else 128 - code  # -N: killed by signal N
    except SignalException as e:  # after the workers were stopped with the same signal
        return 128 + int(e.sigval)
    return 0


if __name__ == "__main__":  # python -m decodekit.distributed --nproc-per-node 2 -m decodekit train ...
    import sys

    sys.exit(launch())
