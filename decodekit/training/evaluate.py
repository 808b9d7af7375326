"""Perplexity with the full softmax over a token stream, state carried (batch-1 equivalent)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from decodekit.models.neural import NeuralLM
from decodekit.training.losses import softmax_cross_entropy


@dataclass(frozen=True)
class EvalResult:
    """nll: total negative log-likelihood (nats); tokens: predicted tokens; ppl = exp(nll / tokens)."""

    nll: float
    tokens: int
    ppl: float


@torch.no_grad()
def evaluate(model: NeuralLM, ids: torch.Tensor, *, chunk: int = 1024) -> EvalResult:
    """Perplexity of the stream ``ids`` [L] with the full softmax, one row whose state is
    carried through the whole stream (the same result as stepping with batch 1). When the
    model has a ``bos_id`` it is fed first, so all L tokens are predicted; else L - 1.

    ppl = exp(-(1/L) sum_t log p(x_t | x_<t))."""
    was_training = model.training
    model.eval()
    ids = ids.to(model.device)
    if model.bos_id is not None:
        inputs, targets = torch.cat([ids.new_tensor([model.bos_id]), ids[:-1]]), ids
    else:
        inputs, targets = ids[:-1], ids[1:]
    if targets.numel() == 0:
        raise ValueError("cannot evaluate an empty stream")
    state = model.initial_state(1)
    nll = torch.zeros((), dtype=torch.float64, device=ids.device)
    for i in range(0, inputs.numel(), chunk):
        hidden, state = model.features(state, inputs[None, i : i + chunk])
        nll += softmax_cross_entropy(model, hidden, targets[None, i : i + chunk]).double().sum()
    model.train(was_training)
    total = nll.item()
    return EvalResult(total, targets.numel(), math.exp(total / targets.numel()))
