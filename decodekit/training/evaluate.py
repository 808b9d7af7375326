"""Perplexity with the full softmax over a token stream, state carried (batch-1 equivalent)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from decodekit.errors import ConfigError
from decodekit.models.base import LanguageModel
from decodekit.models.scoring import chunk_scorer, stream_logprobs


@dataclass(frozen=True)
class EvalResult:
    """nll: total negative log-likelihood (nats); tokens: predicted tokens; ppl = exp(nll / tokens)."""

    nll: float
    tokens: int
    ppl: float


def evaluate(
    model: LanguageModel, ids: torch.Tensor | Sequence[int], *, chunk: int = 1024, progress: bool = False
) -> EvalResult:
    """Perplexity of the stream ``ids`` [L] under any step-protocol model (bundled, n-gram,
    mixture, transformers): one row whose state is carried through the whole stream, the same
    result as stepping with batch 1 (:func:`decodekit.models.scoring.stream_logprobs`, ``chunk``
    tokens per call). When the model has a ``bos_id`` it is fed first, so all L tokens are
    predicted; else L - 1.

    ppl = exp(-(1/L) sum_t log p(x_t | x_<t)).

    With ``progress``, a bar over the tokens is drawn on stderr when stderr is a terminal.

    Raises:
        ValueError: no token is predicted (an empty stream)."""
    if progress:
        from tqdm import tqdm

        total = len(ids)
        with tqdm(total=total, desc="scoring", unit="tok", unit_scale=True, disable=None, leave=False) as bar:
            logprobs = stream_logprobs(_Counted(model, bar), ids, chunk=chunk)  # [L] float32
    else:
        logprobs = stream_logprobs(model, ids, chunk=chunk)  # [L] float32
    if logprobs.numel() == 0:
        raise ConfigError("cannot evaluate an empty stream")
    nll = -float(logprobs.double().sum())
    mean = nll / logprobs.numel()
    return EvalResult(nll, logprobs.numel(), math.exp(mean) if mean < 709 else math.inf)  # a diverged model


class _Counted:
    """``model`` seen by :func:`stream_logprobs`, advancing ``bar`` by each chunk it scores (every
    other attribute is the model's)."""

    def __init__(self, model: LanguageModel, bar) -> None:
        self._model, self._bar, self._score = model, bar, chunk_scorer(model)

    def __getattr__(self, name: str):
        return getattr(self._model, name)

    def target_logprobs(self, state, inputs: torch.Tensor, targets: torch.Tensor):
        out = self._score(state, inputs, targets)
        self._bar.update(inputs.numel())
        return out
