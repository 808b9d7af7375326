"""Scoring a token stream: ``log p(w_t | w_<t)`` for every token, the one implementation behind
perplexity (:func:`decodekit.training.evaluate`, ``decodekit eval``, ``decodekit ngram``) and
mixture-weight fitting (:meth:`decodekit.models.mixture.MixtureLM.fit`), for every model.

A model may define ``target_logprobs(state, inputs[N, T], targets[N, T]) -> (logprobs[N, T], state)``
to score a chunk at once (:class:`~decodekit.models.neural.NeuralLM`: one ``features`` call;
:class:`~decodekit.models.ngram.NgramLM`: table lookups vectorised over positions); any other model
is stepped token by token (:func:`step_target_logprobs`). Both give what stepping with batch 1 gives.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch

from decodekit.errors import ConfigError
from decodekit.models.base import LanguageModel, State, model_device

__all__ = ["chunk_scorer", "step_target_logprobs", "stream_logprobs"]

ChunkScorer = Callable[[State, torch.Tensor, torch.Tensor], tuple[torch.Tensor, State]]


def step_target_logprobs(
    model: LanguageModel, state: State, inputs: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, State]:
    """The default chunk scorer: ``step`` over inputs [N, T]. Returns (logprobs of targets [N, T], state)."""
    out = []
    for t in range(inputs.shape[1]):
        logprobs, state = model.step(state, inputs[:, t])  # [N, V]
        out.append(logprobs.gather(1, targets[:, t : t + 1].to(logprobs.device)).float())
    return torch.cat(out, 1), state


def chunk_scorer(model: LanguageModel) -> ChunkScorer:
    """The model's ``target_logprobs`` if it has one, else :func:`step_target_logprobs` bound to it."""
    own = getattr(model, "target_logprobs", None)
    return own if own is not None else functools.partial(step_target_logprobs, model)


@torch.no_grad()
def stream_logprobs(
    model: LanguageModel, ids: torch.Tensor | Sequence[int], *, chunk: int = 1024
) -> torch.Tensor:
    """``log p(w_t | w_<t)`` of the stream ``ids`` [T], which starts after a sentence boundary:
    one row whose state is carried through the whole stream, ``chunk`` tokens per call.

    A model with a position limit (``max_positions``, e.g. a transformers model) whose stream
    does not fit in it is scored in windows (the usual perplexity of fixed-length models): windows
    of ``max_positions`` inputs, each starting ``stride`` tokens after the previous one (the
    model's ``stride``, default half the limit), each from a fresh state; a window scores only the
    tokens no earlier window scored (the first all of its own), so every token is predicted once,
    from at least ``max_positions - stride`` preceding tokens once past the first window.

    Which tokens are predicted: with a ``bos_id``, it is fed first and all T tokens are predicted;
    without one, the first token is context only (T-1 values), unless the model defines
    ``initial_logprobs(state)`` (an n-gram model without sentence markers predicts it from the
    empty context). ``nn.Module`` models run in eval mode (their mode is restored afterwards).

    Returns:
        float32 log-probabilities [T] or [T-1], on the CPU.
    """
    dev = model_device(model)
    ids = torch.as_tensor(ids, dtype=torch.long).view(-1).to(dev)
    if ids.numel() == 0:
        return torch.zeros(0)
    state, out = model.initial_state(1), []
    if model.bos_id is not None:
        inputs, targets = torch.cat([ids.new_tensor([model.bos_id]), ids[:-1]]), ids
    else:
        inputs, targets = ids[:-1], ids[1:]
        first = getattr(model, "initial_logprobs", None)
        if first is not None:
            out.append(first(state)[0, ids[:1]].float().cpu())
    score = chunk_scorer(model)
    was_training = getattr(model, "training", False)
    if was_training:
        model.train(False)
    limit = getattr(model, "max_positions", None)
    try:
        if limit is not None and inputs.numel() > limit:
            out += _windows(model, score, inputs, targets, limit, getattr(model, "stride", None))
        else:
            for i in range(0, inputs.numel(), chunk):
                logprobs, state = score(state, inputs[None, i : i + chunk], targets[None, i : i + chunk])
                out.append(logprobs[0].float().cpu())
    finally:
        if was_training:
            model.train(True)
    return torch.cat(out) if out else torch.zeros(0)


def _windows(
    model: LanguageModel,
    score: ChunkScorer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    limit: int,
    stride: int | None,
) -> list[torch.Tensor]:
    """The log-probabilities of ``targets`` [T] in windows of ``limit`` inputs every ``stride``
    (see :func:`stream_logprobs`)."""
    stride = max(limit // 2, 1) if stride is None else stride
    if not 1 <= stride <= limit:
        raise ConfigError(f"the stride must be in [1, {limit}] (the model's position limit), got {stride}")
    out, done, begin, total = [], 0, 0, inputs.numel()
    while done < total:
        end = min(begin + limit, total)
        logprobs, _ = score(model.initial_state(1), inputs[None, begin:end], targets[None, begin:end])
        out.append(logprobs[0, done - begin :].float().cpu())
        done, begin = end, begin + stride
    return out
