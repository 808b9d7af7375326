"""The one decoding loop: prefill -> expand -> [select -> record -> reorder -> step -> check].

A strategy is a selection function (as fairseq separates ``Search.step`` from the generator):
from the log-probabilities ``[N, V]`` of the N live rows and the rows, a :class:`Selection` of
the rows that go on and the hypotheses that end. The loop records both (``Trace``, ``Pool``),
reorders the model state by the parents and calls the model once for all rows: ``model.step``
is called only here and in :func:`~decodekit.decoding.prompts.prefill`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from decodekit import memory
from decodekit.checks import at_least
from decodekit.decoding.prompts import as_batch, check_logprobs, is_check_step, prefill, resolve_constraint
from decodekit.decoding.trace import Pool, Trace
from decodekit.models import state as st
from decodekit.models.base import LanguageModel

NEG_INF = float("-inf")


@dataclass(frozen=True)
class Selection:
    """The N' rows one step keeps, and the hypotheses that end (the loop starts from a Selection
    with only ``logprob`` and ``states``: the rows of step -1).

    logprob [N']: cumulative log-probability of each row (-inf: an empty slot).
    states [N'] long: automaton states (-1: dead); None without a constraint.
    parents [N'] long: the row of the previous step each row extends (None: row i extends row i).
    tokens [N'] long: the token each row appended.
    ended [M] long: rows of the previous step whose hypothesis ends here, with total log-probability
    ``ended_logprob [M]``: with EOS (counted) when the model has an EOS, else unfinished.
    """

    logprob: torch.Tensor
    states: torch.Tensor | None
    parents: torch.Tensor | None = None
    tokens: torch.Tensor | None = None
    ended: torch.Tensor | None = None
    ended_logprob: torch.Tensor | None = None


def check_memory(model: LanguageModel, prompt, spec: memory.SearchSpec, max_memory) -> None:
    """Refuse a search that would not fit in memory before it allocates anything
    (:func:`decodekit.memory.check`: ResourceError naming the largest setting that fits)."""
    memory.check(model, as_batch(prompt)[0], spec, limit=max_memory, small=0.01)


def decode(
    model: LanguageModel, prompt, max_length: int, constraint, start, n_best, alpha, record, ranked=True
):
    """Check ``max_length``, batch the prompt(s), compile the constraint, ``start(automaton, B) ->
    (select, rows of step -1)`` (W rows per prompt, rows ``b * W + j``), prefill, and run
    ``select`` for at most ``max_length`` tokens. ``ranked`` (beam searches): the layout stays
    [B, W], a row's pool item is its prompt, done when no live row can beat its ``n_best`` by
    ``logprob / len ** alpha`` (``Pool.update``); else (greedy, sampling) each row is its own
    item, done when the row ends. At the end the live rows (under a constraint: the accepting
    ones) join the pool unfinished; ``record`` is filled with the search. Returns a list of
    hypotheses for one prompt, a list of lists for a batch (a prompt's rows' together)."""
    at_least("max_length", max_length, 0)
    prompts, single = as_batch(prompt)
    automaton = resolve_constraint(constraint, model, max_length)
    select, rows = start(automaton, len(prompts))
    width = rows.logprob.shape[0] // len(prompts)
    pool = Pool(len(prompts) if ranked else rows.logprob.shape[0], n_best, alpha)
    logprobs, state = prefill(model, prompts, width)
    eos, vocab = model.eos_id, logprobs.shape[1]
    items = torch.arange(rows.logprob.shape[0], device=logprobs.device) // (width if ranked else 1)
    trace, steps = Trace(), 0
    for t in range(max_length):
        sel = select(t, logprobs, rows)
        if sel.ended is not None:
            pool.add_many(items[sel.ended], sel.ended, sel.ended_logprob, t, eos is not None)
        rows, steps = sel, t + 1
        if sel.parents is not None:
            items = items[sel.parents]
        trace.push(sel.parents, sel.tokens, sel.logprob, sel.states, items)
        if ranked and (automaton is not None or pool.has_candidates(pool.n_best)):
            cum = rows.logprob.view(len(prompts), width)
            pool.update(cum, _shortest(automaton, rows.states, t + 1, max_length, eos, cum.shape), max_length)
        if all(pool.done) or rows.logprob.numel() == 0 or t == max_length - 1:
            break
        if sel.parents is not None:
            state = st.select(state, sel.parents, model)
        logprobs, state = model.step(state, sel.tokens)
        check_logprobs(logprobs, sel.tokens.shape[0], vocab, t + 1, is_check_step(t + 1))
    live = rows.logprob
    if automaton is not None:  # only matches end unfinished
        live = live.masked_fill(~automaton.is_accepting(rows.states), NEG_INF)
    pool.add_many(items, torch.arange(live.shape[0], device=live.device), live, steps, False)
    if record is not None:
        trace.draw(record, pool, 1 if ranked else width)
    out = pool.results(trace)
    if not ranked:
        out = [sum(out[b * width : (b + 1) * width], []) for b in range(len(prompts))]
    return out[0] if single else out


def _shortest(automaton, states, length: int, max_length: int, eos: int | None, shape):
    """The fewest tokens (EOS included) a completion of a live row of ``length`` tokens can have
    (:func:`~decodekit.decoding.trace.reachable_bound`): ``length + 1`` (EOS next), ``max_length``
    without EOS; under a constraint ``length + automaton.min_tokens(state)`` (+ 1 for EOS), so an
    accepting row without EOS may end at its current length. Dead rows (-1) are empty slots."""
    if automaton is None:
        return length + 1 if eos is not None else max_length
    need = automaton.min_tokens(states)  # [N]
    return (length + (eos is not None) + need).view(shape)  # [B, W]
