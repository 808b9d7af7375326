"""Anderson-style constrained beam search (Anderson et al. 2017, arXiv:1612.00576).

The regex constraint is a token automaton with S states (see :mod:`decodekit.constraints`).
The search keeps **one beam of K hypotheses per automaton state**: rows ``(b * S + q) * K + k``
hold the hypotheses in state q. At each step every hypothesis is extended by one batched
``step`` call; a candidate (hypothesis, token) moves to the beam of its target state
``next_state[q, token]``, and each state's beam keeps its K best candidates by cumulative
log-probability, drawn from the **whole vocabulary** (the paper's forced transitions: a
transition toward acceptance survives however improbable its tokens; see
:mod:`decodekit.decoding.topk`). EOS ends a hypothesis only in an accepting state (the K best
such per prompt); without EOS, a hypothesis in an accepting state that cannot go on (no token
of non-zero probability leads to acceptance in time) ends there, unfinished. The output is
chosen among accepting states, ranked by ``logprob / len ** length_penalty`` and stopped
exactly as :func:`decodekit.beam_search`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from decodekit.decoding.prompts import Constraint, Prompt, as_batch, check_beam_arguments, resolve_constraint
from decodekit.decoding.search import NEG_INF, Selection, decode
from decodekit.decoding.topk import GroupedTopK
from decodekit.decoding.trace import Pool
from decodekit.models.base import LanguageModel, model_device
from decodekit.outputs import Hypothesis


@torch.inference_mode()
def constrained_beam_search(
    model: LanguageModel,
    prompt: Prompt | Sequence[Prompt],
    constraint: Constraint,
    beam_size: int,
    max_length: int,
    length_penalty: float = 1.0,
    n_best: int = 1,
) -> list[Hypothesis] | list[list[Hypothesis]]:
    """Generate text that fully matches ``constraint``, with one beam per automaton state.

    Args:
        model: any step-protocol model (with ``vocab`` when ``constraint`` is a pattern string).
        prompt: one prompt (list of token ids) or a batch (list of lists).
        constraint: a regex the continuation text must fully match, or a compiled automaton.
        beam_size: K, hypotheses kept per automaton state and prompt.
        max_length: most tokens to generate, EOS included.
        length_penalty: alpha in ``score = logprob / len**alpha`` (len counts EOS).
        n_best: how many matching hypotheses to return per prompt.

    Returns:
        The n-best **matching** hypotheses per prompt, best first; ``[]`` when none was found
        (always when every match has probability 0; possibly when each beam kept only
        hypotheses whose every way on has probability 0). ConstraintError if nothing can
        match in max_length.
    """
    check_beam_arguments(beam_size, max_length, length_penalty, n_best)
    prompts, single = as_batch(prompt)
    automaton = resolve_constraint(constraint, model, max_length)
    states, width = automaton.num_states, automaton.num_states * beam_size
    cum = torch.full((len(prompts), width), NEG_INF, device=model_device(model))  # [B, S*K]
    cum[:, automaton.initial * beam_size] = 0.0
    slot_state = torch.arange(states, device=cum.device).repeat_interleave(beam_size).repeat(len(prompts))
    select = anderson_selection(automaton, beam_size, model.eos_id, max_length)
    pool = Pool(len(prompts), n_best, length_penalty)
    out = decode(
        model, prompts, select, Selection(cum.view(-1), slot_state), pool, max_length, automaton, ranked=True
    )
    return out[0] if single else out


def anderson_selection(automaton, beam: int, eos: int | None, max_length: int):
    """One beam of K per automaton state: rows ``(b * S + q) * K + k`` are in state q."""
    states = automaton.num_states
    best_per_state = GroupedTopK(automaton.next_state, states, beam, beam)
    need = automaton.min_tokens_to_accept  # [S]
    accepting = automaton.accepting.repeat_interleave(beam)  # [S*K] rows in an accepting state

    def select(t: int, logprobs: torch.Tensor, rows: Selection) -> Selection:
        batch, vocab = logprobs.shape[0] // (states * beam), logprobs.shape[1]
        lp, cum = logprobs.view(batch, states, beam, vocab), rows.logprob.view(batch, states * beam)
        base = torch.arange(batch, device=cum.device)[:, None] * (states * beam)  # [B, 1]
        # Each state keeps the K best candidates leading to it, from every state's rows and tokens;
        # a state that cannot reach acceptance in the tokens left after this one gets none.
        closed = need > max_length - t - 1  # [S]
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
