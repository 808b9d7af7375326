"""Banked constrained beam search: Anderson's forced transitions at the cost of one beam.

Dynamic beam allocation (Post & Vilar 2018), vectorised as in Hu et al. 2019 and fairseq's
``LexicallyConstrainedBeamSearch``, generalised from phrase lists to any token automaton. A
prompt has K = ``beam_size`` rows whatever the automaton's size (the per-state grid of
:data:`~decodekit.decoding.beam.ANDERSON` has S·K). A hypothesis in automaton state q is in
**bank** ``min(m(q), B - 1)``, ``m(q)`` = ``automaton.min_tokens`` (the fewest tokens still
needed to accept: 0 in an accepting state), with ``B = min(K, m(initial) + 1)`` banks. For
several constraints over a word vocabulary (``.*\\bdog\\b.*`` and ``.*\\bpark\\b.*``, a word a
token) the bank is the number of constraints not yet met; within one constraint over sub-word
tokens, the tokens still needed.

One step, for the N = P·K rows of P prompts (``logprobs [N, V]``):

1. mask by the constraint (every kept row can still accept within the tokens left);
2. EOS ends each accepting row with a finite ``logprob + log p(EOS)`` (the pool ranks them);
3. every candidate (row, allowed non-EOS token) goes to the bank of its next state, and each
   prompt's banks are filled **round-robin**: the r-th best candidate of bank j has priority
   ``r·B + j`` and the K candidates of lowest priority continue. So each bank keeps at least
   ``K // B`` of its best candidates when it has them (a candidate that reaches a closer bank
   competes only inside that bank, however improbable: the forced transitions), and the slots
   of banks with fewer candidates go to the others (nothing is left empty while a candidate
   remains).

Candidates. With a whole :class:`~decodekit.constraints.TokenAutomaton` (the plan compiles one
whole where its candidate states x V stay within
:data:`~decodekit.constraints.build.WHOLE_ENTRIES`) the banks of all V tokens of every state are one
``[S, V]`` int8 table built at the start, and step 3 takes, per bank, the K best of the
prompt's K·V candidates exactly. With a lazy automaton too large to build (only masks, no
``next_state``), the candidates are each row's ``2K`` most probable allowed tokens, stepped
through the automaton; their banks use its ``min_tokens``, a lower bound.

Guarantee. Every hypothesis returned fully matches and has non-zero probability, ranked and
stopped exactly as the other beam searches (``logprob / len ** length_penalty``, the bound of
:func:`~decodekit.decoding.trace.reachable_bound`). (a) When K is at least the number of
candidates of every step (``K >= V ** max_length`` suffices), nothing is pruned and it returns
the exact n best matches. (b) When every token the constraint allows has non-zero probability
(a softmax over finite logits), it returns a match whenever one exists within ``max_length``,
for every K >= 1: every kept row can still accept in time, and a row is dropped only for
another. (c) With a whole automaton and K >= B, the best candidate reaching each bank survives
the step. Where it differs from the grid: the grid keeps K hypotheses **per state**, so
hypotheses in two states never compete; here those of one bank do, and with zero-probability
tokens a narrow beam may keep only hypotheses whose every way on has probability 0 and return
fewer matches or none (as a narrow grid may).
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Sequence

import torch

from decodekit.constraints.tokens.interface import StateTables, provides
from decodekit.decoding.beam import BEAM
from decodekit.decoding.plan import plan
from decodekit.decoding.prompts import Constraint, Prompt
from decodekit.decoding.search import NEG_INF, Search, Select, Selection, run
from decodekit.decoding.strategies import Settings
from decodekit.models.base import LanguageModel, model_device
from decodekit.outputs import Hypothesis, SearchTree

_CHUNK = 1 << 22  # entries of next_state read at once while building the bank table
BANK_GROUP = 4  # banks masked at once (the working set: a [N, 4, V] copy)


@torch.inference_mode()
def banked_beam_search(
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
    """Banked constrained beam search (see the module docstring): text that fully matches
    ``constraint`` with ``beam_size`` (K) rows per prompt, rows ``b * K + k``, whatever the size
    of the automaton. Arguments and the result: as
    :func:`~decodekit.decoding.beam.constrained_beam_search` (``[]`` for a prompt without a
    match found)."""
    settings = Settings(
        BANKED, max_length, constraint, beam_size=beam_size, length_penalty=length_penalty, n_best=n_best
    )
    return run(plan(model, prompt, settings, max_memory=max_memory), record=record)


def bank_count(automaton, beam: int) -> int:
    """B = ``min(K, m(initial) + 1)``: one bank per count of tokens still needed, capped."""
    return max(1, min(beam, int(automaton.shortest) + 1))


_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # automaton -> {B: table}


def bank_table(automaton, banks: int) -> torch.Tensor:
    """``[S, V]`` int8: the bank ``min(m(next), B - 1)`` each token leads to from each state of a
    whole automaton, ``B`` where it leads nowhere (dead, EOS); kept while the automaton lives
    (the compiler's cache returns the same automaton for the same constraint)."""
    kept = _tables.setdefault(automaton, {})
    if banks not in kept:
        kept[banks] = _bank_table(automaton, banks)
    return kept[banks]


def _bank_table(automaton, banks: int) -> torch.Tensor:
    nxt, need = automaton.next_state, automaton.min_tokens_to_accept
    out = torch.empty(nxt.shape, dtype=torch.int8, device=nxt.device)
    step = max(1, _CHUNK // max(1, nxt.shape[1]))
    for lo in range(0, nxt.shape[0], step):  # chunks: no int64 [S, V] temporary
        part = nxt[lo : lo + step]
        bank = need[part.clamp(min=0)].clamp(max=banks - 1)
        out[lo : lo + step] = bank.masked_fill(part < 0, banks).to(torch.int8)
    return out


def _start_banked(search: Search, batch: int) -> tuple[Select, Selection]:
    """K rows per prompt, only the first live at step 0; plain beam search without a constraint."""
    if search.automaton is None:
        return BEAM.start(search, batch)
    model, beam, automaton = search.model, search.settings.beam_size, search.automaton
    cum = torch.full((batch, beam), NEG_INF, device=model_device(model))
    cum[:, 0] = 0.0
    rows = Selection(cum.view(-1), torch.full_like(cum, automaton.initial, dtype=torch.long).view(-1))
    return banked_selection(automaton, beam, model.vocab_size, model.eos_id), rows


def banked_selection(automaton, beam: int, vocab: int, eos: int | None) -> Select:
    """The selection of the module docstring over rows ``b * K + k`` (states: ``automaton``'s)."""
    banks = bank_count(automaton, beam)
    table = bank_table(automaton, banks) if provides(automaton, StateTables) else None
    per_row, width = min(2 * beam, vocab), min(beam, beam * vocab)
    lanes = torch.arange(banks, dtype=torch.int8, device=automaton.device).view(1, -1, 1, 1)  # [1, B, 1, 1]

    def select(logprobs: torch.Tensor, rows: Selection, remaining: int) -> Selection:
        n, states = logprobs.shape[0], rows.states
        batch = n // beam
        lp = automaton.mask(logprobs, states, remaining)  # [N, V], a new tensor
        accepting = automaton.is_accepting(states)  # [N]
        if eos is not None:  # EOS ends every accepting row (finite ones join the pool)
            done = (rows.logprob + lp[:, eos]).masked_fill(~accepting, NEG_INF)
            ended = (done > NEG_INF).nonzero()[:, 0]
            ended_logprob = done[ended]
            lp[:, eos] = NEG_INF
        else:  # an accepting row that cannot go on (no allowed token of p > 0) ends here
            stuck = (lp.amax(-1) == NEG_INF) & accepting
            ended, ended_logprob = stuck.nonzero()[:, 0], rows.logprob[stuck]
        cum = lp.add_(rows.logprob[:, None])  # [N, V]
        if table is not None:  # each prompt's K best per bank, from its K x V candidates
            bank_of = table[states.clamp(min=0)].view(batch, 1, beam, -1)  # [P, 1, K, V]
            cand = cum.view(batch, 1, beam, -1)
            parts = [  # BANK_GROUP banks at a time: a masked [P, G, K, V] copy each
                cand.masked_fill(bank_of != lanes[:, g : g + BANK_GROUP], NEG_INF)
                .flatten(2)
                .topk(width, dim=2)
                for g in range(0, banks, BANK_GROUP)
            ]
            top, pos = (torch.cat(x, 1) for x in zip(*parts)) if len(parts) > 1 else parts[0]  # [P, B, W]
            token, row = pos % vocab, pos // vocab
        else:  # a lazy automaton: each row's 2K best, banked by their next states
            val, tok = cum.topk(per_row, dim=1)  # [N, 2K]
            parent = torch.arange(n, device=cum.device)[:, None].expand_as(tok)
            nxt = automaton.step(states[parent.reshape(-1)], tok.reshape(-1)).view_as(tok)
            bank = automaton.min_tokens(nxt).clamp(max=banks - 1).masked_fill(nxt < 0, banks)
            top, pos = per_bank(val.reshape(batch, -1), bank.reshape(batch, -1), banks, beam)
            token, row = tok.reshape(batch, 1, -1).expand(-1, banks, -1).gather(2, pos), pos // per_row
        keep = round_robin(top, beam)  # [P, K] into [B * W]; B * W: an empty slot
        value, token, row = (x.flatten(1) for x in (top, token, row))
        value = torch.cat([value, value.new_full((batch, 1), NEG_INF)], 1).gather(1, keep)
        safe = keep.clamp(max=token.shape[1] - 1)
        tokens = token.gather(1, safe).view(-1)
        parents = (row.gather(1, safe) + torch.arange(batch, device=cum.device)[:, None] * beam).view(-1)
        nxt = automaton.step(states[parents], tokens).masked_fill(value.view(-1) == NEG_INF, -1)
        return Selection(value.view(-1), nxt, parents, tokens, ended, ended_logprob)

    return select


def per_bank(value: torch.Tensor, bank: torch.Tensor, banks: int, beam: int):
    """``value [P, R]`` candidates in ``bank [P, R]`` (``banks``: none) -> the ``W = min(K, R)``
    best of each bank, ``(values, positions)`` each ``[P, B, W]``, best first (-inf: none)."""
    lanes = torch.arange(banks, device=value.device)[None, :, None]
    masked = value[:, None, :].masked_fill(bank[:, None, :] != lanes, NEG_INF)  # [P, B, R]
    return masked.topk(min(beam, value.shape[1]), dim=-1)


def round_robin(top: torch.Tensor, beam: int) -> torch.Tensor:
    """``top [P, B, W]``, each bank's candidates best first (-inf: none) -> ``[P, K]`` positions
    in ``top.flatten(1)`` of the K kept: the r-th of bank j has priority ``r * B + j`` and the
    lowest K finite ones are kept, in that order; ``B * W`` pads a prompt with fewer than K."""
    p, banks, width = top.shape
    rank = torch.arange(width, device=top.device)[None, None, :] * banks
    none = banks * width  # the priority of an empty candidate
    lanes = torch.arange(banks, device=top.device)[None, :, None]
    priority = (rank + lanes).masked_fill(top == NEG_INF, none).flatten(1)  # [P, B * W]
    low, chosen = priority.topk(min(beam, priority.shape[1]), dim=1, largest=False)
    keep = chosen.masked_fill(low >= none, none)
    if keep.shape[1] < beam:
        keep = torch.cat([keep, keep.new_full((p, beam - keep.shape[1]), none)], 1)
    return keep


def fill_banks(value: torch.Tensor, bank: torch.Tensor, banks: int, beam: int) -> torch.Tensor:
    """``value [P, R]`` candidates in ``bank [P, R]`` (``banks``: none) -> ``[P, K]`` positions of
    the K kept (R: an empty slot): :func:`per_bank` then :func:`round_robin`."""
    top, pos = per_bank(value, bank, banks, beam)
    keep = round_robin(top, beam)
    r = value.shape[1]
    return torch.cat([pos.flatten(1), pos.new_full((pos.shape[0], 1), r)], 1).gather(1, keep)


def _banked_units(settings) -> float:
    """A beam's units, plus the bank of each token (int8: a quarter) and the masked copy of up to
    :data:`BANK_GROUP` banks at once (the candidate sums are the mask's copy, added in place)."""
    return BEAM.working_set(settings) + 0.25 + BANK_GROUP


BANKED = dataclasses.replace(
    BEAM,
    name="banked-beam",
    what="banked constrained beam search",
    start=_start_banked,
    working_set=_banked_units,
    needs="banks",
    transformers=None,
    constrained=None,
)
