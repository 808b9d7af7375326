"""Diverse beam search (Vijayakumar et al. 2018, arXiv:1610.02424) with Hamming diversity, as
transformers' group beam search (``num_beam_groups``, ``diversity_penalty``).

The K beams of a prompt are G groups of K/G; each group is a beam search of width K/G over its
own rows, started from the prompt (the first row of every group live at step 0). At each step the
groups choose in order, and group g ranks its extensions by

    key(y_<t, v) = key(y_<t) + log p(v | y_<t) - lambda * count_<g(v)

where ``count_<g(v)`` is how many of the prompt's beams in groups 0..g-1 appended token v at
this step (Hamming diversity) and lambda is ``diversity_penalty``. The key accumulates the
penalties, as transformers' beam scores do; a hypothesis is ranked by ``key / len ** alpha``
(its ``score``), while its ``logprob`` stays the model's. With one group, or with lambda = 0,
every group is plain beam search of width K/G (one group: :func:`~.beam.beam_search` exactly).
Under a constraint each group's step is masked as masked beam search's (every output matches).
"""

from __future__ import annotations

import dataclasses

import torch

from decodekit.constraints import TokenConstraint
from decodekit.decoding.beam import BEAM, beam_selection, beam_units, check_beam
from decodekit.decoding.search import NEG_INF, Search, Select, Selection
from decodekit.models.base import model_device
from decodekit.util.checks import at_least, real, require


def diverse_selection(
    beam: int, groups: int, penalty: float, vocab: int, eos: int | None, automaton: TokenConstraint | None
) -> Select:
    """Rows ``b * K + g * (K / G) + k``: group g's k-th beam of prompt b (see the module docstring).
    ``rows.key`` holds the penalised sums (None at step -1: the log-probabilities)."""
    size = beam // groups
    inner = beam_selection(size, vocab, eos, automaton)

    def select(logprobs: torch.Tensor, rows: Selection, remaining: int) -> Selection:
        if groups == 1:  # beam search; the key is the log-probability
            return inner(logprobs, rows, remaining)
        batch = logprobs.shape[0] // beam
        key = rows.logprob if rows.key is None else rows.key  # [N]
        grid = torch.arange(logprobs.shape[0], device=logprobs.device).view(batch, groups, size)
        counts = logprobs.new_zeros(batch, logprobs.shape[1])  # [B, V] tokens chosen by earlier groups
        parts = []
        for g in range(groups):
            at = grid[:, g].reshape(-1)  # [B * K/G] this group's rows
            lp = logprobs[at]  # [B * K/G, V]
            if g and penalty:
                lp = lp - penalty * counts.repeat_interleave(size, dim=0)
            states = None if rows.states is None else rows.states[at]
            sub = inner(lp, Selection(key[at], states), remaining)
            parents = at[sub.parents]  # [B * K/G] rows of the previous step
            live = sub.logprob > NEG_INF
            true = rows.logprob[parents] + logprobs[parents, sub.tokens]
            ended = at[sub.ended] if sub.ended is not None else at[:0]
            ended_true = rows.logprob[ended] + (0.0 if eos is None else logprobs[ended, eos])
            ended_key = sub.ended_logprob if sub.ended is not None else key[:0]
            parts.append((sub, parents, true.masked_fill(~live, NEG_INF), ended, ended_true, ended_key))
            counts.scatter_add_(1, sub.tokens.view(batch, size), live.view(batch, size).to(counts.dtype))

        def joined(values):  # per group [B * K/G, ...] -> [N] in rows b * K + g * K/G + k
            return torch.stack([v.view(batch, size) for v in values], 1).view(-1)

        subs = [p[0] for p in parts]
        return Selection(
            logprob=joined([p[2] for p in parts]),
            states=None if rows.states is None else joined([s.states for s in subs]),
            parents=joined([p[1] for p in parts]),
            tokens=joined([s.tokens for s in subs]),
            ended=torch.cat([p[3] for p in parts]),
            ended_logprob=torch.cat([p[4] for p in parts]),
            key=joined([s.logprob for s in subs]),
            ended_key=torch.cat([p[5] for p in parts]),
        )

    return select


def _start_diverse(search: Search, batch: int) -> tuple[Select, Selection]:
    """K rows per prompt, the first of each group live."""
    s, model, automaton = search.settings, search.model, search.automaton
    groups = s.num_beam_groups
    cum = torch.full((batch, s.beam_size), NEG_INF, device=model_device(model))
    cum[:, :: s.beam_size // groups] = 0.0
    states = None if automaton is None else torch.full_like(cum, automaton.initial, dtype=torch.long).view(-1)
    select = diverse_selection(
        s.beam_size, groups, float(s.diversity_penalty), model.vocab_size, model.eos_id, automaton
    )
    return select, Selection(cum.view(-1), states)


def check_diverse(settings) -> None:
    """beam_size a multiple of num_beam_groups (as transformers requires), a penalty >= 0."""
    check_beam(settings)
    at_least("num_beam_groups", settings.num_beam_groups)
    real("diversity_penalty", settings.diversity_penalty, 0.0)
    groups, beam = settings.num_beam_groups, settings.beam_size
    require(
        beam % groups == 0,
        f"beam_size must be a multiple of num_beam_groups (beam_size / num_beam_groups beams per "
        f"group), got beam_size={beam} and num_beam_groups={groups}",
    )


DIVERSE_BEAM = dataclasses.replace(
    BEAM,
    name="diverse-beam",
    what="diverse beam search",
    start=_start_diverse,
    # a beam's units, plus a group's copy of its rows and its penalised copy (G > 1)
    working_set=lambda settings: beam_units(settings) + (settings.num_beam_groups > 1),
    reads=(*BEAM.reads, "num_beam_groups", "diversity_penalty"),
    transformers=None,
    constrained=None,
    check=check_diverse,
)
