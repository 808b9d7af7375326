"""Beam searches: length-normalised beam search (optionally masked by a constraint) and
Anderson-style constrained beam search, as selection functions for :func:`~.search.decode`.

Both rank by ``logprob / len ** length_penalty`` (len counts EOS) and stop exactly
(``trace.reachable_bound``); tokens of probability 0 never extend a hypothesis. Under a
constraint without EOS, an accepting hypothesis that cannot go on ends unfinished there.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence

import torch

from decodekit.constraints import StateTables, TokenConstraint, Transitions
from decodekit.constraints.tokens.interface import provides
from decodekit.decoding import memory
from decodekit.decoding.plan import plan
from decodekit.decoding.prompts import Constraint, Prompt
from decodekit.decoding.search import NEG_INF, Search, Select, Selection, run
from decodekit.decoding.strategies import Settings, Strategy
from decodekit.decoding.topk import GroupedTopK
from decodekit.models.base import LanguageModel, model_device
from decodekit.outputs import Hypothesis, SearchTree
from decodekit.util.checks import at_least, real


@torch.inference_mode()
def beam_search(
    model: LanguageModel,
    prompt: Prompt | Sequence[Prompt],
    beam_size: int,
    max_length: int,
    length_penalty: float = 1.0,
    n_best: int = 1,
    *,
    constraint: Constraint | None = None,
    record: SearchTree | None = None,
    max_memory: int | str | None = None,
) -> list[Hypothesis] | list[list[Hypothesis]]:
    """Beam search with ``beam_size`` (K) live hypotheses per prompt, rows ``b * K + k``.

    Each step keeps the 2K best of the K·V extensions of a prompt's beams (so EOS cannot starve
    the beam), sets aside EOS candidates ranked within the top K as finished and goes on with
    the K best others, as fairseq and transformers do. ``length_penalty``: alpha (0 ranks by
    raw log-probability); ``constraint``: tokens that cannot lead to a full match are masked
    (:func:`constrained_beam_search` is Anderson-style search). Other arguments and the
    result: see :mod:`decodekit.decoding`; the ``n_best`` best hypotheses, best first.
    ``max_memory``: what the search may use (:func:`decodekit.decoding.memory.check`, ResourceError).
    """
    strategy = BEAM if constraint is None else MASKED_BEAM
    settings = Settings(
        strategy, max_length, constraint, beam_size=beam_size, length_penalty=length_penalty, n_best=n_best
    )
    return run(plan(model, prompt, settings, max_memory=max_memory), record=record)


def _start_beam(search: Search, batch: int) -> tuple[Select, Selection]:
    """K rows per prompt, only the first live at step 0."""
    model, automaton, beam = search.model, search.automaton, search.settings.beam_size
    cum = torch.full((batch, beam), NEG_INF, device=model_device(model))
    cum[:, 0] = 0.0
    states = None if automaton is None else torch.full_like(cum, automaton.initial, dtype=torch.long)
    select = beam_selection(beam, model.vocab_size, model.eos_id, automaton)
    return select, Selection(cum.view(-1), None if states is None else states.view(-1))


def check_beam(settings) -> None:
    s = settings
    at_least("beam_size", s.beam_size), at_least("n_best", s.n_best), real("length_penalty", s.length_penalty)


def _warn_if_short(out, settings):
    """``out`` unchanged; a warning when ``n_best > beam_size`` and some prompt got fewer than
    ``n_best`` hypotheses: the pool keeps every hypothesis that ended while in a beam, but the
    beam holds only ``beam_size`` live ones, so more may not have been found (not a failure)."""
    n_best, beam_size = settings.n_best, settings.beam_size
    if n_best > beam_size:
        batch = out if out and isinstance(out[0], list) else [out]
        short = [(b, len(h)) for b, h in enumerate(batch) if len(h) < n_best]
        if short:
            b, got = short[0]
            warnings.warn(
                f"the search returned {got} of the n_best={n_best} hypotheses asked for prompt {b}"
                + (f" (and fewer for {len(short) - 1} more prompts)" if len(short) > 1 else "")
                + f": a beam of {beam_size} keeps at most {beam_size} live hypotheses at each step, so "
                "there may be more; a beam_size of at least n_best looks for them",
                stacklevel=5,  # the caller of beam_search (past run and the inference_mode wrapper)
            )
    return out


# The dense grid (S*K rows) below this many states; over the states reached (at most S*K rows)
# from it on. Measured (benchmarks/bench_anderson.py, V = 50,000, K = 2, per step): 21 states
# 19 vs 10 ms, 177 states 670 vs 100 ms, 656 states 6.5 vs 1.1 s; small automata keep the grid.
GRID_STATES = 64


def beam_selection(beam: int, vocab: int, eos: int | None, automaton: TokenConstraint | None) -> Select:
    """The K best extensions of each prompt's K rows, EOS candidates ranked within the K best
    ending as finished (see :func:`beam_search`)."""
    # A row contributes at most K survivors and one EOS, so its K+1 best tokens suffice (K
    # without EOS); 2K candidates per prompt hold K non-EOS ones, since each row has one EOS.
    per_row = min(beam + (eos is not None), vocab)
    n_cand = min(2 * beam if eos is not None else beam, beam * per_row)

    def select(logprobs: torch.Tensor, rows: Selection, remaining: int) -> Selection:
        batch, ended, ended_logprob = logprobs.shape[0] // beam, None, None
        row_base = torch.arange(batch, device=logprobs.device)[:, None] * beam  # [B, 1]
        if automaton is not None:
            logprobs = automaton.mask(logprobs, rows.states, remaining)  # [N, V]
            if eos is None:  # an accepting row that cannot go on (no allowed token of p > 0) ends here
                stuck = (logprobs.amax(-1) == NEG_INF) & automaton.is_accepting(rows.states)  # [N]
                ended, ended_logprob = stuck.nonzero()[:, 0], rows.logprob[stuck]
        # Select per row first (cheap), then across the K rows of each prompt.
        row_val, row_tok = logprobs.topk(per_row, dim=1)  # [N, K+1]
        flat = (rows.logprob.view(batch, beam, 1) + row_val.view(batch, beam, per_row)).view(batch, -1)
        top_val, top_idx = flat.topk(n_cand, dim=1)  # [B, 2K], best first
        parent, token = top_idx // per_row + row_base, row_tok.view(batch, -1).gather(1, top_idx)
        if eos is not None:
            is_eos = token == eos
            hit = is_eos[:, :beam] & torch.isfinite(top_val[:, :beam])  # EOS ranked within the K best
            ended, ended_logprob = parent[:, :beam][hit], top_val[:, :beam][hit]
            keep = torch.sort(is_eos.to(torch.uint8), dim=1, stable=True).indices[:, :beam]  # first K non-EOS
            top_val, parent, token = top_val.gather(1, keep), parent.gather(1, keep), token.gather(1, keep)
            top_val = top_val.masked_fill(token == eos, NEG_INF)
        else:
            top_val, parent, token = top_val[:, :beam], parent[:, :beam], token[:, :beam]
        parents, tokens = parent.reshape(-1), token.reshape(-1)
        states = None if automaton is None else automaton.step(rows.states[parents], tokens)
        return Selection(top_val.reshape(-1), states, parents, tokens, ended, ended_logprob)

    return select


@torch.inference_mode()
def constrained_beam_search(
    model: LanguageModel,
    prompt: Prompt | Sequence[Prompt],
    constraint: Constraint,
    beam_size: int,
    max_length: int,
    length_penalty: float = 1.0,
    n_best: int = 1,
    *,
    record: SearchTree | None = None,
    max_memory: int | str | None = None,
) -> list[Hypothesis] | list[list[Hypothesis]]:
    """Anderson-style constrained beam search (Anderson et al. 2017, arXiv:1612.00576): text
    that fully matches ``constraint``, with **one beam of K hypotheses per automaton state**.

    Rows ``(b * S + q) * K + k`` hold the hypotheses in state q. A candidate (hypothesis,
    token) moves to the beam of its target state, and each state keeps its K best candidates
    from the **whole vocabulary** (the paper's forced transitions: a transition toward
    acceptance survives however improbable its tokens; :mod:`~decodekit.decoding.topk`). EOS
    ends a hypothesis only in an accepting state (the K best such per prompt). Arguments: as
    :func:`beam_search`. Returns the n-best **matching** hypotheses, best first; ``[]`` when none
    was found (always when every match has probability 0; possibly when each beam kept only
    hypotheses whose every way on has probability 0).
    """
    settings = Settings(
        ANDERSON, max_length, constraint, beam_size=beam_size, length_penalty=length_penalty, n_best=n_best
    )
    return run(plan(model, prompt, settings, max_memory=max_memory), record=record)


def _start_anderson(search: Search, batch: int) -> tuple[Select, Selection]:
    """S*K rows per prompt (K per automaton state), only the first of the initial state's live;
    over the states as they are reached (:func:`_start_visited`) when the plan step gave an
    automaton without every state's tables (a :class:`~decodekit.constraints.Transitions`), or
    a whole automaton of at least :data:`GRID_STATES` states (the results are the same)."""
    automaton = search.automaton
    if not provides(automaton, StateTables) or automaton.num_states >= GRID_STATES:
        return _start_visited(search, batch)
    return _start_grid(search, batch)


def _start_grid(search: Search, batch: int) -> tuple[Select, Selection]:
    """S*K rows per prompt (K per automaton state), only the first of the initial state's live."""
    automaton, beam = search.automaton, search.settings.beam_size
    states, width = automaton.num_states, automaton.num_states * beam
    cum = torch.full((batch, width), NEG_INF, device=model_device(search.model))  # [B, S*K]
    cum[:, automaton.initial * beam] = 0.0
    slot_state = torch.arange(states, device=cum.device).repeat_interleave(beam).repeat(batch)
    return anderson_selection(automaton, beam, search.model.eos_id), Selection(cum.view(-1), slot_state)


def anderson_selection(automaton: StateTables, beam: int, eos: int | None) -> Select:
    """One beam of K per automaton state: rows ``(b * S + q) * K + k`` are in state q."""
    states = automaton.num_states
    best_per_state = GroupedTopK(automaton.next_state, states, beam, beam)
    need = automaton.min_tokens_to_accept  # [S]
    accepting = automaton.accepting.repeat_interleave(beam)  # [S*K] rows in an accepting state

    def select(logprobs: torch.Tensor, rows: Selection, remaining: int) -> Selection:
        batch, vocab = logprobs.shape[0] // (states * beam), logprobs.shape[1]
        lp, cum = logprobs.view(batch, states, beam, vocab), rows.logprob.view(batch, states * beam)
        base = torch.arange(batch, device=cum.device)[:, None] * (states * beam)  # [B, 1]
        # Each state keeps the K best candidates leading to it, from every state's rows and tokens;
        # a state that cannot reach acceptance in the tokens left after this one gets none.
        closed = need > remaining - 1  # [S]
        value, row, token, alive = best_per_state(lp, cum.view(batch, states, beam, 1), closed)  # [B, S, K]
        if eos is not None:  # EOS ends a hypothesis in an accepting state: the K best per prompt
            done = (cum + lp[..., eos].view(batch, -1)).masked_fill(~accepting, NEG_INF)
            top, slot = done.topk(min(beam, states * beam), dim=1)
            ended, ended_logprob = (base + slot)[top > NEG_INF], top[top > NEG_INF]
        else:  # an accepting hypothesis with no way on (a token of p > 0 reaching acceptance in time)
            ended = (~alive.view(batch, -1) & accepting).view(-1).nonzero()[:, 0]
            ended_logprob = rows.logprob[ended]
        parents = (row + base[:, :, None]).view(-1)
        return Selection(value.view(-1), rows.states, parents, token.view(-1), ended, ended_logprob)

    return select


def _start_visited(search: Search, batch: int) -> tuple[Select, Selection]:
    """K rows per prompt, all in the initial state, only the first live (:func:`visited_selection`)."""
    automaton, beam = search.automaton, search.settings.beam_size
    cum = torch.full((batch, beam), NEG_INF, device=model_device(search.model))  # [B, K]
    cum[:, 0] = 0.0
    states = torch.full((batch * beam,), automaton.initial, dtype=torch.long, device=cum.device)
    guard = memory.rows_guard(search.model, search.settings, batch, search.max_memory)
    return visited_selection(automaton, beam, search.model.eos_id, guard), Selection(cum.view(-1), states)


def visited_selection(
    automaton: Transitions, beam: int, eos: int | None, guard: Callable[[int, int], None] | None = None
) -> Select:
    """:func:`anderson_selection` over the states reached so far: rows ``(b * G + g) * K + k``
    are in state ``groups[g]``, the G states (ascending) that hold a candidate of finite score
    after the last step (one, the initial state, at step 0), so a state no hypothesis reached
    costs nothing and the automaton's other states are never built.

    Each step: ``automaton.transitions(groups, remaining)`` lists the E allowed (state, token,
    next state) edges; the B x E x K candidates ``cum[b, owner, k] + logprobs[b, owner, k, token]``
    are sorted by (next state, -score) (two stable sorts) and the first K of each next state kept:
    the K best per state from the whole vocabulary, as the dense grid's
    :class:`~decodekit.decoding.topk.GroupedTopK`. EOS and the hypotheses that cannot go on end as
    there. ``guard(reached, G)`` is called when G grows (the states reached so far, for the size
    error: :func:`decodekit.decoding.memory.rows_guard`)."""
    groups = torch.tensor([automaton.initial], dtype=torch.long)
    reached: set[int] = {automaton.initial}
    widest = [1]

    def select(logprobs: torch.Tensor, rows: Selection, remaining: int) -> Selection:
        nonlocal groups
        device, vocab = logprobs.device, logprobs.shape[1]
        width = groups.numel()
        batch = logprobs.shape[0] // (width * beam)
        lp, cum = logprobs.view(batch, width, beam, vocab), rows.logprob.view(batch, width, beam)
        owner, tok, nxt = (x.to(device) for x in automaton.transitions(groups.to(device), remaining))
        cand = lp[:, owner, :, tok].permute(1, 0, 2) + cum[:, owner, :]  # [B, E, K]
        base = torch.arange(batch, device=device)[:, None] * (width * beam)  # [B, 1]
        accepting = automaton.is_accepting(groups.to(device)).to(device).repeat_interleave(beam)  # [G*K]
        if eos is not None:  # EOS ends a hypothesis in an accepting state: the K best per prompt
            done = (cum + lp[..., eos]).view(batch, -1).masked_fill(~accepting, NEG_INF)
            top, slot = done.topk(min(beam, width * beam), dim=1)
            ended, ended_logprob = (base + slot)[top > NEG_INF], top[top > NEG_INF]
        else:  # an accepting hypothesis with no way on (a token of p > 0 reaching acceptance in time)
            at = owner.view(1, -1, 1).expand_as(cand)
            best = cum.new_full((batch, width, beam), NEG_INF).scatter_reduce_(1, at, cand, "amax")
            ended = ((best == NEG_INF).view(batch, -1) & accepting).view(-1).nonzero()[:, 0]
            ended_logprob = rows.logprob[ended]
        targets, inv = torch.unique(nxt, return_inverse=True)  # [T] ascending, [E]
        flat = cand.reshape(batch, -1)  # [B, E*K], column e * K + k
        key = inv.repeat_interleave(beam)  # [E*K] the next state of each column
        order = flat.sort(dim=1, descending=True, stable=True).indices
        order = order.gather(1, key[order].sort(dim=1, stable=True).indices)  # by (next, -score)
        counts = torch.bincount(inv, minlength=targets.numel()) * beam  # [T], the same for every prompt
        first = counts.cumsum(0) - counts
        j = torch.arange(beam, device=device)
        valid = j < counts[:, None]  # [T, K]
        pos = (first[:, None] + j).clamp(max=max(flat.shape[1] - 1, 0))
        if flat.shape[1]:
            col = order[:, pos.view(-1)].view(batch, -1, beam)  # [B, T, K]
            value = flat.gather(1, col.view(batch, -1)).view_as(col).masked_fill(~valid, NEG_INF)
        else:
            col = value = torch.zeros(batch, 0, beam, device=device)
        live = (value[..., 0] > NEG_INF).any(0) if value.numel() else torch.zeros(0, dtype=torch.bool)
        if live.any():
            targets, value, col = targets[live], value[:, live], col[:, live]
            edge, k = col.long() // beam, col.long() % beam
            parents = ((owner[edge] + (base // beam)[:, :, None]) * beam + k).view(-1)
            tokens = tok[edge].view(-1)
        else:  # nothing goes on: one empty group keeps the layout (every row -inf)
            targets, value = groups[:1].to(device), cum.new_full((batch, 1, beam), NEG_INF)
            parents = (base + torch.arange(beam, device=device)).view(-1)
            tokens = torch.zeros_like(parents)
        groups = targets
        if guard is not None:
            reached.update(targets.tolist())
            if targets.numel() > widest[0]:
                widest[0] = targets.numel()
                guard(len(reached), targets.numel())
        states = targets.repeat_interleave(beam).repeat(batch)
        return Selection(value.reshape(-1), states, parents, tokens, ended, ended_logprob)

    return select


def beam_units(settings) -> float:
    """[N, V] float32 tensors at a step's peak (measured on the PTB LSTM: 4.6 at K = 2000): the
    model's logits and log-probabilities, the normalisation check's temporaries, the rows copied
    for the beams. Wide beams peak higher (the flattened [B, K*V] candidate sums and the gathers
    from them): over V = 1,000 at K = 10^6 it was killed past 21 GB where 3.5 units said 14 GB,
    so a beam counts 2 more units from K = 1,000 on."""
    return 3.5 + 2 * (settings.beam_size >= 1000)


def _anderson_units(settings) -> float:
    """A beam's units, plus a masked copy per group of tokens, the candidates and their sums (4.6
    units at 600 rows, 3 at 50,000); at K = 10,000 (2 states, the PTB LSTM) it peaked at 11.2 GB
    where 6 units said 7.7 GB (0.76 of the estimate at K = 2,000): 3 more from K = 1,000 on."""
    return beam_units(settings) + 2.5 + 3 * (settings.beam_size >= 1000)


ANDERSON = Strategy(
    "beam",
    "constrained beam search ({states} automaton states)",
    start=_start_anderson,
    rows=lambda settings, states: states * settings.beam_size,
    working_set=_anderson_units,
    reads=("beam_size", "length_penalty", "n_best"),
    needs="states",
    ranked=True,
    knob="beam_size",
    returns="n_best",
    check=check_beam,
    finish=_warn_if_short,
)
BEAM = dataclasses.replace(
    ANDERSON,
    what="beam search",
    start=_start_beam,
    rows=lambda settings, states: settings.beam_size,
    working_set=beam_units,
    needs="masks",
    transformers=("num_beams", "beam_size"),
    constrained=ANDERSON,
)
# One beam per state reached, on any Transitions (the dense automaton's too): what ANDERSON runs on
# a lazy automaton, and how to compare the two layouts on one automaton (not a registered strategy).
ANDERSON_VISITED = dataclasses.replace(
    ANDERSON,
    what="constrained beam search over the states it reaches ({states} at once)",
    start=_start_visited,
)
ANDERSON_GRID = dataclasses.replace(ANDERSON, start=_start_grid)  # the dense grid at any size
MASKED_BEAM = dataclasses.replace(
    BEAM, name="masked-beam", what="masked beam search", transformers=None, constrained=None
)
