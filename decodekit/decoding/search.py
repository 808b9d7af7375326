"""The one decoding loop: prefill -> expand -> [select -> record -> reorder -> step -> check].

A strategy is a selection function (as fairseq separates ``Search.step`` from the generator):
given the log-probabilities ``[N, V]`` of the N live rows after step t and the rows themselves,
it returns a :class:`Selection`: which rows go on (each extending a parent row by a token, with
its cumulative log-probability and automaton state) and which hypotheses end here. The loop
records both (back-pointers in a :class:`~decodekit.decoding.trace.Trace`, completed
hypotheses in a :class:`~decodekit.decoding.trace.Pool`), reorders the model state by the
parents and calls the model once for all rows. ``model.step`` is called only here and in
:func:`~decodekit.decoding.prompts.prefill`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from decodekit.decoding.prompts import check_logprobs, expand, is_check_step, prefill
from decodekit.decoding.trace import Pool, Trace
from decodekit.models import state as st
from decodekit.models.base import LanguageModel
from decodekit.outputs import Hypothesis

NEG_INF = float("-inf")


@dataclass(frozen=True)
class Rows:
    """The N live hypotheses: ``logprob [N]`` cumulative log-probability (-inf: an empty slot),
    ``states [N]`` automaton states (-1: dead; None without a constraint)."""

    logprob: torch.Tensor
    states: torch.Tensor | None


@dataclass(frozen=True)
class Selection:
    """What one step keeps: N' new rows and the hypotheses that end.

    parents [N'] long: the row (of the N) each new row extends; None: row i extends row i.
    tokens [N'] long: the token each new row appended. logprob [N'], states [N']: as in :class:`Rows`.
    ended [M] long: rows (of the N) whose hypothesis ends here, with total ``ended_logprob [M]``:
    with EOS (EOS counted in the log-probability) when the model has an EOS, else unfinished.
    """

    parents: torch.Tensor | None
    tokens: torch.Tensor
    logprob: torch.Tensor
    states: torch.Tensor | None
    ended: torch.Tensor | None = None
    ended_logprob: torch.Tensor | None = None


Select = Callable[[int, torch.Tensor, Rows], Selection]  # (step t, logprobs [N, V], rows) -> Selection


def accepting(automaton, states: torch.Tensor) -> torch.Tensor:
    """[N] states -> [N] bool: whether each is an accepting state (dead states are not)."""
    return (states >= 0) & automaton.accepting[states.clamp(min=0)]


def decode(
    model: LanguageModel,
    prompts: list[list[int]],
    select: Select,
    start: Rows,
    pool: Pool,
    max_length: int,
    automaton=None,
    ranked: bool = False,
) -> list[list[Hypothesis]]:
    """Run ``select`` from ``start`` (rows ``b * W + j``: W = len(start.logprob) // len(prompts)
    rows per prompt) for at most ``max_length`` tokens.

    Pool item of a row: its prompt when ``ranked`` (beam searches: the layout stays [B, W] and a
    prompt is done when no live row can beat its n best, see ``Pool.update``), else its starting
    row (greedy and sampling: a row's item is done when the row ends). At the end the live rows
    (in an accepting state, under a constraint) join the pool unfinished. Returns the pool's
    results, one list per item."""
    logprobs, state = prefill(model, prompts)
    width = start.logprob.shape[0] // len(prompts)
    logprobs, state = expand(model, logprobs, state, width)
    rows, eos, vocab = start, model.eos_id, logprobs.shape[1]
    items = torch.arange(rows.logprob.shape[0], device=logprobs.device) // (width if ranked else 1)
    trace, steps = Trace(), 0
    for t in range(max_length):
        sel = select(t, logprobs, rows)
        if sel.ended is not None:
            pool.add_many(items[sel.ended], sel.ended, sel.ended_logprob, t, eos is not None)
        trace.push(sel.parents, sel.tokens)
        rows, steps = Rows(sel.logprob, sel.states), t + 1
        if sel.parents is not None:
            items = items[sel.parents]
        if ranked and (automaton is not None or pool.has_candidates(pool.n_best)):
            cum = rows.logprob.view(len(prompts), width)
            pool.update(cum, _shortest(automaton, rows.states, t + 1, max_length, eos, cum.shape), max_length)
        if all(pool.done) or rows.logprob.numel() == 0 or t == max_length - 1:
            break
        if sel.parents is not None:
            state = st.select(state, sel.parents, model)
        logprobs, state = model.step(state, sel.tokens)
        check_logprobs(logprobs, sel.tokens.shape[0], vocab, t + 1, is_check_step(t + 1))
    live = (
        rows.logprob
        if automaton is None
        else rows.logprob.masked_fill(~accepting(automaton, rows.states), NEG_INF)
    )
    pool.add_many(items, torch.arange(live.shape[0], device=live.device), live, steps, False)
    return pool.results(trace)


def _shortest(automaton, states, length: int, max_length: int, eos: int | None, shape):
    """The fewest tokens (EOS included) a completion of a live row of ``length`` tokens can
    have, for :func:`~decodekit.decoding.trace.reachable_bound`. Unconstrained: ``length + 1``
    (EOS next), or ``max_length`` without EOS (such a hypothesis ends only there). Under a
    constraint: ``length + min_tokens_to_accept[state]``, plus 1 for EOS; without EOS an
    accepting row (0 more tokens) may end unfinished at its current length. Dead rows (-1) are
    empty slots (-inf), whatever their bound."""
    if automaton is None:
        return length + 1 if eos is not None else max_length
    need = automaton.min_tokens_to_accept[states.clamp(min=0)]  # [N]
    return (length + (eos is not None) + need).view(shape)  # [B, W]
