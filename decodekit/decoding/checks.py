"""Cheap sanity checks on what a model's ``step`` returns."""

from __future__ import annotations

import torch

from decodekit.errors import ModelOutputError


def is_check_step(step: int) -> bool:
    """Full normalisation checks run at steps 0, 1, 2, 4, 8, ...: a constant number of passes
    over [N, V] per doubling of the length, so their cost vanishes on long generations."""
    return step & (step - 1) == 0


def check_logprobs(logprobs: torch.Tensor, rows: int, vocab_size: int, step: int, full: bool) -> None:
    """Raise :class:`ModelOutputError` unless ``logprobs`` is [rows, vocab_size] and, when
    ``full``, every row is a normalised log-distribution (logsumexp within tolerance of 0;
    -inf entries are allowed, NaN and +inf are not)."""
    if not isinstance(logprobs, torch.Tensor) or tuple(logprobs.shape) != (rows, vocab_size):
        shape = tuple(logprobs.shape) if isinstance(logprobs, torch.Tensor) else type(logprobs).__name__
        raise ModelOutputError(
            f"step {step}: the model returned log-probabilities of shape {shape}, "
            f"expected ({rows}, {vocab_size})"
        )
    if not full:
        return
    lse = torch.logsumexp(logprobs.float(), dim=-1)  # [N]
    tol = 2e-2 if logprobs.dtype in (torch.float16, torch.bfloat16) else 1e-3
    bad = ~(lse.abs() <= tol)
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        value = float(lse[row])
        what = "NaN" if value != value else f"logsumexp {value:.4g} instead of 0"
        raise ModelOutputError(
            f"step {step}: the model's log-probabilities for row {row} are not normalised ({what}); "
            "step must return log_softmax over the vocabulary"
        )
