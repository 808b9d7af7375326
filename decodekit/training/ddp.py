"""Data-parallel training under ``torchrun`` with PyTorch's DistributedDataParallel (DDP).

The trainer talks to one of two objects with the same methods: :class:`SingleProcess` (the
default; every method is the identity) and :class:`DataParallel` (one process per rank; gloo on
CPU, NCCL on CUDA with one GPU per ``LOCAL_RANK``).

How a global batch of B parallel streams is split over W ranks:

* The training stream is cut into the same [B, L] array as in one process
  (:func:`~decodekit.data.batchify`); rank r keeps the rows r*B/W ... (r+1)*B/W - 1
  (:func:`local_rows`; B must be divisible by W). The ranks read disjoint parts of the token
  stream, and together exactly the rows a single process would.
* The per-rank loss is normalised by the per-rank batch b = B/W (sum over time: sum / b; mean:
  sum / (b T)). DDP averages the gradients over ranks, so the averaged gradient is
  (1/W) sum_r grad(sum_r / b) = grad(sum / B): the single-process gradient on the global batch.
  Clipping and the optimiser step then act on identical averaged gradients on every rank.
* Everything in the resume state is rank-independent: the weights and optimiser buffers (equal
  on all ranks), the schedule, the RNG (all ranks seed alike and draw alike, so their generators
  stay equal), the chunk position in the global [B, L] array, the training-loss sums (summed over
  ranks after every update) and the carried BPTT state, gathered to all B rows before saving and
  split again on loading. A run may therefore resume with another world size.
* Validation: every rank computes the full validation perplexity (one stream, state carried: it
  cannot be split without changing the number); rank 0's value is broadcast so that schedule and
  early-stopping decisions are identical on all ranks. Only rank 0 writes checkpoints, metrics
  and the progress bar.
* Stopping (Ctrl-C or SIGTERM on any rank): the ranks act only on a stop they agreed on in a
  collective every rank reaches, the training-loss sum after each update (:meth:`tally`) and one
  flag after each epoch's save (:meth:`agree`); a signal that arrives between two such points
  waits for the next, so no rank ever enters a collective (a save's gather, validation's
  broadcast) that another rank skips.

Dropout masks (and the noise of sampled losses) come from generators that are equal on all
ranks: rank r's rows see the same masks as rank 0's rows, so a run with dropout is a valid
but not bitwise-identical counterpart of the single-process run.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from decodekit import distributed
from decodekit.errors import ConfigError, DecodekitError
from decodekit.models.state import batch_size, concat, map_state, select


def local_rows(batch_size: int, rank: int, size: int) -> slice:
    """The rows of the global [B, L] stream array that rank ``rank`` of ``size`` trains on."""
    if batch_size % size:
        raise ConfigError(
            f"the batch size {batch_size} (parallel streams, summed over all processes) is not "
            f"divisible by the world size {size}; pick a multiple of {size}"
        )
    b = batch_size // size
    return slice(rank * b, (rank + 1) * b)


class SingleProcess:
    """One process: no communication."""

    rank, size, is_main = 0, 1, True

    def shard(self, data: torch.Tensor) -> torch.Tensor:
        """This rank's rows of the global stream array [B, L] -> [B / W, L]."""
        return data

    def wrap(self, model: nn.Module, loss: nn.Module | None) -> Callable[[Any, torch.Tensor], tuple]:
        """The forward used for training: ``(state, x [b, T]) -> (H [b, T, D], state)``; ``loss``:
        the loss's module (:attr:`.losses.Loss.module`), whose parameters DDP must reduce too."""
        return model.features

    def local_state(self, state: Any, model: nn.Module) -> Any:
        """This rank's rows of a global BPTT state (B rows) or None."""
        return state

    def full_state(self, state: Any, model: nn.Module) -> Any:
        """All B rows of the carried state (collective), or None."""
        return state

    def tally(self, nll: torch.Tensor, tokens: int, stop: int) -> tuple[float, int, int]:
        """(sum of per-token losses, tokens, stop) of one update: the sums over ranks, and the
        stop every rank agrees on: ``stop`` is the signal number a rank was stopped by (SIGINT,
        SIGTERM) or 0; the result is the largest over ranks (0: go on). One collective per
        update, a second only when stopping."""
        return nll.item(), tokens, stop

    def agree(self, stop: int) -> int:
        """The largest ``stop`` (a signal number or 0, as in :meth:`tally`) over ranks (collective)."""
        return stop

    def broadcast(self, value: float) -> float:
        """Rank 0's ``value`` on every rank."""
        return value

    def align_rng(self) -> None:
        """Give every rank rank 0's generator state for its own CUDA device (after a resume)."""


class _Features(nn.Module):
    """What DDP wraps: the model and the loss's learned parameters (NCE's log Z); its forward
    is ``model.features``. The loss uses ``model.head`` outside this forward, which DDP allows:
    it reduces gradients through hooks on every parameter, whichever code used it."""

    def __init__(self, model: nn.Module, loss: nn.Module | None) -> None:
        super().__init__()
        self.model = model
        self.loss = loss if loss is not None else nn.Module()

    def forward(self, state: Any, tokens: torch.Tensor) -> tuple[torch.Tensor, Any]:
        return self.model.features(state, tokens)


class DataParallel(SingleProcess):
    """Rank ``rank`` of ``size`` in an initialised process group; tensors live on ``device``."""

    def __init__(self, rank: int, size: int, device: torch.device) -> None:
        self.rank, self.size, self.is_main, self.device = rank, size, rank == 0, device

    @classmethod
    def from_env(cls, device: torch.device) -> tuple[DataParallel | None, torch.device]:
        """Under torchrun (``WORLD_SIZE`` set, even to 1): join the group and return (it, the
        device: ``cuda:LOCAL_RANK`` for CUDA). Outside torchrun: (None, ``device``)."""
        if "WORLD_SIZE" not in os.environ:
            return None, device
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        rank, size = distributed.world()
        return cls(rank, size, device), device

    def close(self) -> None:
        distributed.shutdown()

    def shard(self, data: torch.Tensor) -> torch.Tensor:
        return data[local_rows(data.shape[0], self.rank, self.size)]

    def wrap(self, model: nn.Module, loss: nn.Module | None) -> Callable[[Any, torch.Tensor], tuple]:
        ids = [self.device.index] if self.device.type == "cuda" else None
        # gradient_as_bucket_view: the .grad tensors are views into DDP's buckets (no copy in or out)
        return nn.parallel.DistributedDataParallel(
            _Features(model, loss), device_ids=ids, gradient_as_bucket_view=True
        )

    def local_state(self, state: Any, model: nn.Module) -> Any:
        if state is None:
            return None
        rows = local_rows(_rows(state), self.rank, self.size)
        return select(state, torch.arange(rows.start, rows.stop, device=self.device), model)

    def full_state(self, state: Any, model: nn.Module) -> Any:
        if state is None:
            return None
        parts: list[list[torch.Tensor]] = []

        def gather(t: torch.Tensor) -> torch.Tensor:
            out = [torch.empty_like(t.contiguous()) for _ in range(self.size)]
            dist.all_gather(out, t.contiguous())
            parts.append(out)
            return t

        map_state(state, gather)
        per_rank = []
        for r in range(self.size):
            leaves = iter([p[r] for p in parts])
            per_rank.append(map_state(state, lambda t, it=leaves: next(it)))
        return concat(per_rank, model)

    def tally(self, nll: torch.Tensor, tokens: int, stop: int) -> tuple[float, int, int]:
        counts = nll.new_tensor([tokens, stop], dtype=torch.float64)
        t = torch.cat([nll.double().reshape(1), counts])
        dist.all_reduce(t)  # a sum: "any rank stops" is a sum > 0
        nll_sum, n, stops = t.tolist()
        return nll_sum, round(n), self.agree(stop) if stops > 0 else 0

    def agree(self, stop: int) -> int:
        t = torch.tensor([stop], dtype=torch.int64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())

    def broadcast(self, value: float) -> float:
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.broadcast(t, src=0)
        return t.item()

    def align_rng(self) -> None:
        if self.device.type == "cuda":
            state = torch.cuda.get_rng_state(self.device).to(self.device)
            dist.broadcast(state, src=0)
            torch.cuda.set_rng_state(state.cpu(), self.device)


def _rows(state: Any) -> int:
    n = batch_size(state)
    if n is None:
        raise ConfigError("the carried state has no tensor to split over ranks")
    return n


def autocast(device: torch.device, amp: str) -> torch.autocast:
    """The autocast context of ``--amp``: "off" (float32) or "bf16" (bfloat16 forward, CUDA or CPU)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp == "bf16")


@functools.cache
def bf16_unsupported(device_type: str) -> str | None:
    """Why bfloat16 autocast cannot train here (None if it can): a small LSTM and linear layer
    are run forward and backward under it once per device type. oneDNN on CPUs without bf16
    instructions (AVX2 only) has no bfloat16 LSTM primitive and fails at the first forward."""
    try:
        lstm, head = torch.nn.LSTM(4, 4, batch_first=True), torch.nn.Linear(4, 3)
        lstm, head = lstm.to(device_type), head.to(device_type)
        with torch.autocast(device_type, dtype=torch.bfloat16):
            out, _ = lstm(torch.randn(2, 3, 4, device=device_type))
            loss = head(out).float().logsumexp(-1).sum()
        loss.backward()
    except RuntimeError as e:
        return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    return None


def check_amp(device: torch.device, amp: str) -> None:
    """DecodekitError (one line) when ``amp`` cannot run on ``device``."""
    if amp == "bf16" and (reason := bf16_unsupported(device.type)) is not None:
        raise DecodekitError(f"--amp bf16 cannot run on this {device.type.upper()} ({reason}); use --amp off")
