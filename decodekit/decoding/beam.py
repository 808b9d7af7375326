"""Length-normalised beam search (optionally masked by a regex constraint).

Rows ``b * K + k`` (B prompts, K beams). Each step keeps the 2K best of the K·V extensions of
a prompt's beams (so EOS cannot starve the beam), sets aside EOS candidates ranked within the
top K as finished and goes on with the K best others, as fairseq and transformers do. Scores:
``logprob / len ** length_penalty`` (len counts EOS); exact stopping (``trace.reachable_bound``).
Under a constraint without EOS, an accepting hypothesis that cannot go on (no allowed token of
non-zero probability) ends unfinished at its own length. Tokens of probability 0 never extend one.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from decodekit.decoding.prompts import Constraint, Prompt, as_batch, check_beam_arguments, resolve_constraint
from decodekit.decoding.search import NEG_INF, Selection, accepting, decode
from decodekit.decoding.trace import Pool
from decodekit.models.base import LanguageModel, model_device
from decodekit.outputs import Hypothesis


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
) -> list[Hypothesis] | list[list[Hypothesis]]:
    """Beam search with ``beam_size`` live hypotheses per prompt.

    Args:
        model: any step-protocol model.
        prompt: one prompt (list of token ids) or a batch (list of lists).
        beam_size: K, live hypotheses kept per prompt.
        max_length: most tokens to generate, EOS included.
        length_penalty: alpha in ``score = logprob / len**alpha``; 0 ranks by raw log-probability.
        n_best: how many hypotheses to return per prompt (at most the number found).
        constraint: a regex or compiled automaton; tokens that cannot lead to a full match are
            masked (use :func:`constrained_beam_search` for Anderson-style search instead).

    Returns:
        The n-best hypotheses, best first: a list for one prompt, a list of lists for a batch.
    """
    check_beam_arguments(beam_size, max_length, length_penalty, n_best)
    prompts, single = as_batch(prompt)
    automaton = resolve_constraint(constraint, model, max_length)
    cum = torch.full((len(prompts), beam_size), NEG_INF, device=model_device(model))
    cum[:, 0] = 0.0  # only the first beam is live at step 0
    states = None if automaton is None else torch.full_like(cum, automaton.initial, dtype=torch.long).view(-1)
    select = beam_selection(beam_size, model.vocab_size, model.eos_id, automaton, max_length)
    pool = Pool(len(prompts), n_best, length_penalty)
    out = decode(
        model, prompts, select, Selection(cum.view(-1), states), pool, max_length, automaton, ranked=True
    )
    return out[0] if single else out


def beam_selection(beam: int, vocab: int, eos: int | None, automaton, max_length: int):
    """The K best extensions of each prompt's K rows (rows ``b * K + k``), EOS candidates ranked
    within the K best ending as finished; see the module docstring."""
    # A row contributes at most K survivors and one EOS, so its K+1 best tokens suffice (K
    # without EOS); 2K candidates per prompt hold K non-EOS ones, since each row has one EOS.
    per_row = min(beam + (eos is not None), vocab)
    n_cand = min(2 * beam if eos is not None else beam, beam * per_row)

    def select(t: int, logprobs: torch.Tensor, rows: Selection) -> Selection:
        batch, ended, ended_logprob = logprobs.shape[0] // beam, None, None
        row_base = torch.arange(batch, device=logprobs.device)[:, None] * beam  # [B, 1]
        if automaton is not None:
            logprobs = logprobs.masked_fill(~automaton.allowed(rows.states, max_length - t), NEG_INF)
            if eos is None:  # an accepting row that cannot go on (no allowed token of p > 0) ends here
                stuck = ~(logprobs > NEG_INF).any(-1) & accepting(automaton, rows.states)  # [N]
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
