"""The one decoding loop: prefill -> expand -> [select -> record -> reorder -> step -> check].

A strategy is a selection function (as fairseq separates ``Search.step`` from the generator):
from the log-probabilities ``[N, V]`` of the N live rows and the rows, a :class:`Selection` of
the rows that go on and the hypotheses that end. The loop records both (``Trace``, ``Pool``),
reorders the model state by the parents and calls the model once for all rows: ``model.step``
is called only through :class:`~decodekit.decoding.ahead.Ahead` (which may feed tokens ahead of
the selections) and in :func:`~decodekit.decoding.prompts.prefill`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from decodekit.constraints import TokenConstraint
from decodekit.decoding.ahead import Ahead
from decodekit.decoding.prompts import check_logprobs, is_check_step, prefill
from decodekit.decoding.strategies import Strategy
from decodekit.decoding.trace import Pool, Trace
from decodekit.models import state as st
from decodekit.models.base import LanguageModel
from decodekit.outputs import Hypothesis, SearchTree

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
    key [N'] / ended_key [M]: what a ranked pool ranks by instead of the log-probability
    (length-normalised as it is; None: the log-probability): diverse beam search's penalised sums,
    stochastic beam search's perturbed log-probabilities.
    sample_logprob [N'] / ended_sample_logprob [M]: cumulative log-probability under the
    distribution a sampling search draws from (temperature, mask), carried to
    ``Hypothesis.sample_logprob``; None when not drawn.
    """

    logprob: torch.Tensor
    states: torch.Tensor | None
    parents: torch.Tensor | None = None
    tokens: torch.Tensor | None = None
    ended: torch.Tensor | None = None
    ended_logprob: torch.Tensor | None = None
    key: torch.Tensor | None = None
    ended_key: torch.Tensor | None = None
    sample_logprob: torch.Tensor | None = None
    ended_sample_logprob: torch.Tensor | None = None


Select = Callable[[torch.Tensor, Selection, int], Selection]  # (logprobs [N, V], rows, remaining)


@dataclass(frozen=True)
class Search:
    """One planned search (:func:`~decodekit.decoding.plan.plan` makes it; a strategy's ``start``
    reads it): the model, the strategy (as it runs), its settings (a ``GenerationConfig`` or
    :class:`~.strategies.Settings`) and the constraint compiled for the model (None:
    unconstrained): a :class:`~decodekit.constraints.TokenConstraint`, the
    :class:`~decodekit.constraints.StateTables` refinement when the strategy ``needs="states"``;
    the prompts as lists of token ids, and whether one prompt was given (not a batch)."""

    model: LanguageModel
    strategy: Strategy
    settings: Any
    automaton: TokenConstraint | None
    max_memory: int | str | None = None  # what the search may use, for a layout that grows
    prompts: list[list[int]] = dataclasses.field(default_factory=list)
    single: bool = False


def run(
    search: Search,
    *,
    record: SearchTree | None = None,
    observe: Callable[[Selection], None] | None = None,
) -> list[Hypothesis] | list[list[Hypothesis]]:
    """Run a planned search (:func:`~decodekit.decoding.plan.plan`: checked, its constraint
    compiled, its memory checked): the loop (:func:`decode`; ``observe(selection)`` is called
    after each step's selection: streaming), then each hypothesis's text where the model has a
    vocabulary, and the strategy's ``finish``. Compiles nothing."""
    with torch.inference_mode():
        out = decode(search, search.prompts, record, observe)
    vocab = getattr(search.model, "vocab", None)
    if vocab is not None:  # hypotheses carry their text when the search knows the vocabulary
        out = [[dataclasses.replace(h, text=vocab.decode(h.tokens)) for h in hyps] for hyps in out]
    return search.strategy.finish(out[0] if search.single else out, search.settings)


def decode(
    search: Search,
    prompts: list[list[int]],
    record: SearchTree | None,
    observe: Callable[[Selection], None] | None = None,
) -> list[list[Hypothesis]]:
    """``strategy.start(search, B) -> (select, rows of step -1)`` (W rows per prompt, rows
    ``b * W + j``), prefill, and run ``select(logprobs, rows, remaining)`` for at most
    ``max_length`` tokens (``remaining``: the tokens left, this one included). A ranked strategy
    (beam searches) keeps the layout [B, W]; a row's pool item is its prompt, done when no live
    row can beat its ``n_best`` by ``logprob / len ** length_penalty`` (``Pool.update``); else
    (greedy, sampling) each row is its own item, done when the row ends. At the end the live rows
    (under a constraint: the accepting ones) join the pool unfinished; ``record`` is filled with
    the search. ``observe(selection)`` returning true stops the search after that step, as if
    ``max_length`` were reached (the live rows join the pool unfinished). Returns the hypotheses
    of each prompt (a prompt's rows' together)."""
    model, automaton, settings = search.model, search.automaton, search.settings
    ranked, max_length = search.strategy.ranked, settings.max_length
    select, rows = search.strategy.start(search, len(prompts))
    width = rows.logprob.shape[0] // len(prompts)
    n_best, alpha = (search.strategy.keeps(settings), settings.length_penalty) if ranked else (1, 0.0)
    if "length_penalty" not in search.strategy.reads:  # e.g. stochastic beam: ranks by its keys alone
        alpha = 0.0
    pool = Pool(len(prompts) if ranked else rows.logprob.shape[0], n_best, alpha)
    logprobs, state = prefill(model, prompts, width)
    eos, vocab = model.eos_id, logprobs.shape[1]
    items = torch.arange(rows.logprob.shape[0], device=logprobs.device) // (width if ranked else 1)
    trace, steps = Trace(), 0
    top = getattr(settings, "logprobs", None)  # the model's n most probable tokens, every step
    ahead = Ahead(model, automaton, getattr(settings, "fast_forward", False), _drafting(search))
    for t in range(max_length):
        if top:
            trace.push_top(logprobs, top)
        sel = select(logprobs, rows, max_length - t)
        if sel.ended is not None:
            pool.add_many(
                items[sel.ended], sel.ended, sel.ended_logprob, t, eos is not None,
                sel.ended_key, sel.ended_sample_logprob,
            )  # fmt: skip
        rows, steps = sel, t + 1
        if sel.parents is not None:
            items = items[sel.parents]
        trace.push(sel.parents, sel.tokens, sel.logprob, sel.states, items)
        if observe is not None and observe(sel):  # asked to stop (Ctrl-C in the CLI): end here
            break
        if ranked and (automaton is not None or pool.has_candidates(pool.n_best)):
            # W rows per prompt (over visited states: grows)
            cum = (rows.logprob if rows.key is None else rows.key).view(len(prompts), -1)
            pool.update(cum, _shortest(automaton, rows.states, t + 1, max_length, eos, cum.shape), max_length)
        if all(pool.done) or rows.logprob.numel() == 0 or t == max_length - 1:
            break
        if sel.parents is not None:
            state = st.select(state, sel.parents, model)
            ahead.reorder(sel.parents)
        logprobs, state = ahead.next(state, sel, max_length - t - 1, eos)
        check_logprobs(logprobs, sel.tokens.shape[0], vocab, t + 1, is_check_step(t + 1))
    live = rows.logprob
    if automaton is not None:  # only matches end unfinished
        live = live.masked_fill(~automaton.is_accepting(rows.states), NEG_INF)
    ends = torch.arange(live.shape[0], device=live.device)
    pool.add_many(items, ends, live, steps, False, rows.key, rows.sample_logprob)
    if record is not None:
        trace.draw(record, pool, 1 if ranked else width)
    out = pool.results(trace)
    if not ranked:
        out = [sum(out[b * width : (b + 1) * width], []) for b in range(len(prompts))]
    return out


def _drafting(search: Search) -> Callable[[str], list[int]] | None:
    """The tokenizer forced texts are drafted with (``draft_forced_text`` under a constraint,
    a model whose tokens are text pieces: :func:`~.speculative.text_encoder`), else None."""
    if search.automaton is None or not getattr(search.settings, "draft_forced_text", False):
        return None
    from decodekit.decoding.speculative import text_encoder  # at the top: speculative -> plan -> here

    return text_encoder(search.model)


def _shortest(
    automaton: TokenConstraint | None, states, length: int, max_length: int, eos: int | None, shape
):
    """The fewest tokens (EOS included) a completion of a live row of ``length`` tokens can have
    (:func:`~decodekit.decoding.trace.reachable_bound`): ``length + 1`` (EOS next), ``max_length``
    without EOS; under a constraint ``length + automaton.min_tokens(state)`` (+ 1 for EOS), so an
    accepting row without EOS may end at its current length. Dead rows (-1) are empty slots."""
    if automaton is None:
        return length + 1 if eos is not None else max_length
    need = automaton.min_tokens(states)  # [N]
    return (length + (eos is not None) + need).view(shape)  # [B, W]
