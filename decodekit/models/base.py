"""The step protocol: the one interface between models and decoders.

Any object with these attributes and methods can be decoded by every strategy in
decodekit; it need not be an ``nn.Module``::

    class MyLM:
        vocab_size = 3
        bos_id = 0          # fed before the prompt; None: the prompt is fed as is (must be non-empty)
        eos_id = 0          # None: the model never ends a sequence
        def initial_state(self, batch_size):          # -> State, batch-first
            return torch.zeros(batch_size, 1)
        def step(self, state, tokens):                # tokens [N] long
            return logprobs, new_state                # logprobs [N, V], normalised

Optional methods, used when present; each has one default, which callers go through instead
of probing the model:

* ``prefill(state, tokens[N, T]) -> (logprobs[N, V], state)``: encode a prompt in one call;
  ``logprobs`` is the distribution after the last token. Default: :func:`prefill` (loops ``step``).
* ``step_many(state, tokens[N, L], keep_last=None) -> (logprobs[N, L, V], state)``: feed L tokens
  in one call, the distribution after each (verifying a speculative draft); with ``keep_last=k``
  only the last k of them (``[N, k, V]``: the others' output layer skipped). A model's own method
  may leave ``keep_last`` out. Default: :func:`step_many` (loops ``step``).
* ``reorder_state(state, rows[N']) -> state``: for states that are not a batch-first pytree.
  Default: :func:`decodekit.models.state.select` (``index_select`` of every tensor).
* ``concat_states(states) -> state``: join states of separately prefilled groups of prompts.
  Default: :func:`decodekit.models.state.concat`.
* ``target_logprobs(state, inputs[N, T], targets[N, T]) -> (logprobs[N, T], state)``: score a chunk
  of a stream at once. Default: :func:`decodekit.models.scoring.chunk_scorer` (steps).
* ``initial_logprobs(state) -> logprobs[N, V]``: the first token's distribution before any token,
  for a model without ``bos_id`` that has one (an n-gram model without sentence markers).
* ``vocab``: a :class:`decodekit.vocab.Vocab` used to render text and compile constraints.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Protocol, runtime_checkable

import torch

State = Any
"""A tensor, or a (nested) tuple / list / dict / NamedTuple of tensors, every tensor batch-first."""


@runtime_checkable
class LanguageModel(Protocol):
    """What decoders need from a model. ``step`` must be pure: never write into ``state``."""

    vocab_size: int
    bos_id: int | None
    eos_id: int | None

    def initial_state(self, batch_size: int) -> State: ...

    def step(self, state: State, tokens: torch.Tensor) -> tuple[torch.Tensor, State]:
        """Args: tokens [N] long. Returns (logprobs [N, V] normalised over V, new state)."""
        ...


def model_device(model: LanguageModel) -> torch.device:
    """The device a model's tensors live on: ``model.device`` if defined, else its first
    parameter's, else the CPU."""
    dev = getattr(model, "device", None)
    if dev is not None:
        return torch.device(dev)
    params = getattr(model, "parameters", None)
    if callable(params):
        for p in params():
            return p.device
    return torch.device("cpu")


def prefill(model: LanguageModel, state: State, tokens: torch.Tensor) -> tuple[torch.Tensor, State]:
    """``model.prefill(state, tokens)`` where the model defines it, else one ``step`` per token.

    Args: tokens [N, T] long, T >= 1. Returns (logprobs [N, V] after the last token, state)."""
    own = getattr(model, "prefill", None)
    if own is not None:
        return own(state, tokens)
    for t in range(tokens.shape[1]):
        logprobs, state = model.step(state, tokens[:, t])
    return logprobs, state


def step_many(
    model: LanguageModel, state: State, tokens: torch.Tensor, keep_last: int | None = None
) -> tuple[torch.Tensor, State]:
    """``model.step_many(state, tokens)`` where the model defines it, else one ``step`` per token.

    Args: tokens [N, L] long, L >= 1; ``keep_last``: None, or 0 <= k <= L. Returns (logprobs
    [N, L, V]: ``logprobs[:, i]`` is the distribution after ``tokens[:, : i + 1]``, equal to L
    single steps, or with ``keep_last=k`` the last k of them [N, k, V]; the state after all L).
    A model's ``step_many`` that takes ``keep_last`` skips the output layer at the other
    positions (the pending tokens of a speculative verification); one that does not is sliced."""
    length = tokens.shape[1]
    if keep_last is not None and not 0 <= keep_last <= length:
        raise ValueError(f"keep_last={keep_last} is not within 0..{length} (the tokens fed)")
    own = getattr(model, "step_many", None)
    if own is not None:
        if keep_last is not None and _takes_keep_last(own):
            return own(state, tokens, keep_last=keep_last)
        logprobs, state = own(state, tokens)
    else:
        out = []
        for t in range(length):
            logprobs, state = model.step(state, tokens[:, t])
            out.append(logprobs)
        logprobs = torch.stack(out, 1)
    return (logprobs if keep_last is None else logprobs[:, length - keep_last :]), state


def _takes_keep_last(method: Any) -> bool:
    """Whether a model's ``step_many`` takes ``keep_last`` (a bound method's function read once)."""
    function = getattr(method, "__func__", None)
    return _reads_keep_last(method) if function is None else _function_reads_keep_last(function)


def _reads_keep_last(method: Any) -> bool:
    try:
        return "keep_last" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # a builtin or a callable object without a signature
        return False


_function_reads_keep_last = functools.cache(_reads_keep_last)  # per function: its signature read once
