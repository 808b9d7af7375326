"""Prompt handling shared by every strategy: batching, validation, prefill."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch

from decodekit.decoding.checks import check_logprobs
from decodekit.errors import DecodekitError
from decodekit.models import state as st
from decodekit.models.base import LanguageModel, State, model_device

Prompt = Sequence[int]


def as_batch(prompt: Prompt | Sequence[Prompt]) -> tuple[list[list[int]], bool]:
    """One prompt (a sequence of ints, possibly empty) or a batch (a sequence of sequences).

    Returns (prompts as lists of ints, True if a single prompt was given)."""
    if isinstance(prompt, torch.Tensor):
        prompt = prompt.tolist()
    items = list(prompt)
    if not items or all(
        isinstance(x, int) or (hasattr(x, "__index__") and not hasattr(x, "__len__")) for x in items
    ):
        return [[int(x) for x in items]], True
    batch = []
    for i, p in enumerate(items):
        if isinstance(p, (str, bytes)) or not hasattr(p, "__iter__"):
            raise ValueError(f"prompt {i} must be a list of token ids, got {type(p).__name__}")
        batch.append([int(x) for x in p])
    return batch, False


def check_positive(name: str, value: int | None, minimum: int = 1) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < minimum):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_length_penalty(value: float) -> None:
    """Raise :class:`DecodekitError` (a ValueError) unless ``value`` is a finite real number."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not ok:
        raise DecodekitError(f"length_penalty must be a finite number, got {value!r}")


def prefill(model: LanguageModel, prompts: list[list[int]]) -> tuple[torch.Tensor, State]:
    """Encode every prompt (``bos_id`` first when the model has one).

    Prompts of equal length share one ``prefill`` call (or one ``step`` per token when the model
    has no ``prefill``); the groups' states are joined and put back in prompt order.

    Returns (logprobs [B, V] for the first generated token, state with B rows)."""
    vocab_size = model.vocab_size
    inputs = []
    for i, p in enumerate(prompts):
        bad = [t for t in p if not 0 <= t < vocab_size]
        if bad:
            raise ValueError(f"prompt {i} has token id(s) {bad[:5]} outside the vocabulary [0, {vocab_size})")
        seq = p if model.bos_id is None else [model.bos_id, *p]
        if not seq:
            raise ValueError(f"prompt {i} is empty and the model has no bos_id to start from")
        inputs.append(seq)
    device = model_device(model)
    groups: dict[int, list[int]] = {}
    for i, seq in enumerate(inputs):
        groups.setdefault(len(seq), []).append(i)
    order, logprob_parts, states = [], [], []
    for length, members in groups.items():
        tokens = torch.tensor([inputs[i] for i in members], dtype=torch.long, device=device)  # [G, T]
        state = model.initial_state(len(members))
        if hasattr(model, "prefill"):
            logprobs, state = model.prefill(state, tokens)
        else:
            for t in range(length):
                logprobs, state = model.step(state, tokens[:, t])
        check_logprobs(logprobs, len(members), vocab_size, step=0, full=True)
        order += members
        logprob_parts.append(logprobs)
        states.append(state)
    logprobs = torch.cat(logprob_parts, 0)
    state = st.concat(states, model)
    if order != sorted(order):
        inverse = torch.empty(len(order), dtype=torch.long)
        inverse[torch.tensor(order)] = torch.arange(len(order))
        inverse = inverse.to(device)
        logprobs = logprobs.index_select(0, inverse)
        state = st.select(state, inverse, model)
    return logprobs, state


def expand(model: LanguageModel, logprobs: torch.Tensor, state: State, copies: int):
    """Repeat each prompt's row ``copies`` times: rows ``b*copies + j``."""
    if copies == 1:
        return logprobs, state
    rows = torch.arange(logprobs.shape[0], device=logprobs.device).repeat_interleave(copies)
    return logprobs.index_select(0, rows), st.select(state, rows, model)
