"""What every strategy shares before its loop: arguments, prompts, constraint, prefill, and the
cheap checks of what a model's ``step`` returns."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch

from decodekit.constraints import TokenConstraint
from decodekit.errors import ConfigError, ModelOutputError
from decodekit.models import base
from decodekit.models import state as st
from decodekit.models.base import LanguageModel, State, model_device
from decodekit.util.checks import collector_paused, require

Prompt = Sequence[int]
# what a caller constrains with: a regex (str), a list of them (all must match), or a compiled
# TokenConstraint; decoding.plan.compile_for makes the TokenConstraint the decoders see
Constraint = str | Sequence[str] | TokenConstraint


def as_batch(prompt: Prompt | Sequence[Prompt]) -> tuple[list[list[int]], bool]:
    """One prompt (a sequence of ints, possibly empty) or a batch (a sequence of sequences).

    Returns (prompts as lists of ints, True if a single prompt was given)."""
    if isinstance(prompt, torch.Tensor):
        prompt = prompt.tolist()
    items = list(prompt)
    if all(not hasattr(x, "__len__") for x in items):  # numbers (token_ids refuses all but integers)
        return [token_ids(items, 0)], True
    for i, p in enumerate(items):
        ok = not isinstance(p, (str, bytes)) and hasattr(p, "__iter__")
        require(ok, f"prompt {i} must be a list of token ids, got {type(p).__name__}")
    with collector_paused():  # a batch may hold a million prompts
        return [token_ids(p, i) for i, p in enumerate(items)], False


def token_ids(prompt: Any, i: int) -> list[int]:
    """Prompt ``i`` as a list of ints: integers only (Python's, numpy's, an integer tensor's),
    never a float or a bool, which ``int`` would silently truncate (1.5 -> 1, True -> 1)."""
    if hasattr(prompt, "tolist"):  # a tensor or an array: its items as Python numbers
        prompt = prompt.tolist()
    require(isinstance(prompt, list | tuple) or hasattr(prompt, "__iter__"),
            f"prompt {i} must be a list of token ids, got {type(prompt).__name__}")  # fmt: skip
    kinds = set(map(type, prompt))
    if kinds <= {int}:
        return list(prompt)
    if bool not in kinds:
        try:
            return list(map(operator.index, prompt))  # numpy's integers, 0-d integer tensors
        except TypeError:
            pass
    bad = next(x for x in prompt if isinstance(x, bool) or not _is_index(x))
    raise ConfigError(f"prompt {i} must hold integer token ids, got {bad!r} ({type(bad).__name__})")


def _is_index(x: Any) -> bool:
    try:
        operator.index(x)
    except TypeError:
        return False
    return True


def prefill(model: LanguageModel, prompts: list[list[int]], copies: int = 1) -> tuple[torch.Tensor, State]:
    """Encode every prompt (``bos_id`` first when the model has one), ``copies`` rows each.

    Prompts of equal length share one ``prefill`` call (or one ``step`` per token when the model
    has no ``prefill``); the groups' states are joined and put in prompt order, each repeated.

    Returns (logprobs [B * copies, V] for the first generated token, state): rows ``b * copies + j``."""
    vocab_size = model.vocab_size
    inputs = []
    for i, p in enumerate(prompts):
        bad = [t for t in p if not 0 <= t < vocab_size]
        require(not bad, f"prompt {i} has token id(s) {bad[:5]} outside the vocabulary [0, {vocab_size})")
        inputs.append(p if model.bos_id is None else [model.bos_id, *p])
        require(bool(inputs[-1]), f"prompt {i} is empty and the model has no bos_id to start from")
    device = model_device(model)
    groups: dict[int, list[int]] = {}
    for i, seq in enumerate(inputs):
        groups.setdefault(len(seq), []).append(i)
    order, logprob_parts, states = [], [], []
    for members in groups.values():
        tokens = torch.tensor([inputs[i] for i in members], dtype=torch.long, device=device)  # [G, T]
        state = model.initial_state(len(members))
        logprobs, state = base.prefill(model, state, tokens)
        check_logprobs(logprobs, len(members), vocab_size, step=0, full=True)
        order += members
        logprob_parts.append(logprobs)
        states.append(state)
    logprobs, state = torch.cat(logprob_parts, 0), st.concat(states, model)
    if order != sorted(order) or copies > 1:  # one reorder: prompt order, each row `copies` times
        rows = torch.tensor(order).argsort().repeat_interleave(copies).to(device)
        logprobs, state = logprobs.index_select(0, rows), st.select(state, rows, model)
    return logprobs, state


def prompt_logprobs(model: LanguageModel, prompts: list[list[int]], n: int) -> list[tuple]:
    """vLLM's ``prompt_logprobs``: per prompt, per prompt token, None when no token precedes it
    (a first token without ``bos_id``), else ``(token id, log p(token | the tokens before), the n
    most probable (id, logprob) pairs)``. Prompts of equal length are stepped together (one ``step``
    per position for the group; ``prefill`` gives only the last position's distribution)."""
    device = model_device(model)
    out: list[tuple] = [()] * len(prompts)
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(len(p), []).append(i)
    for length, members in groups.items():
        tokens = torch.tensor([prompts[i] for i in members], dtype=torch.long, device=device).view(-1, length)
        state = model.initial_state(len(members))
        entries: list[list] = [[] for _ in members]
        logprobs = None
        if model.bos_id is not None:
            logprobs, state = model.step(state, tokens.new_full((len(members),), model.bos_id))
        for t in range(length):
            if logprobs is None:
                for e in entries:
                    e.append(None)
            else:
                own = logprobs.gather(1, tokens[:, t : t + 1])[:, 0].double().tolist()
                values, ids = logprobs.topk(min(n, logprobs.shape[-1]), dim=-1)
                rows = zip(entries, tokens[:, t].tolist(), own, values.double().tolist(), ids.tolist())
                for e, token, lp, vs, js in rows:
                    e.append((token, lp, tuple((j, v) for j, v in zip(js, vs) if v > float("-inf"))))
            if t < length - 1:
                logprobs, state = model.step(state, tokens[:, t])
        for i, e in zip(members, entries):
            out[i] = tuple(e)
    return out


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
