"""Length-normalised beam search (optionally masked by a regex constraint).

Rows are laid out ``b * K + k`` (B prompts, K beams). Each step scores all K·V extensions
of each prompt's beams, keeps the 2K best (so EOS candidates cannot starve the beam), sets
aside EOS candidates ranked within the top K as finished, and continues with the K best
non-EOS candidates, as fairseq and transformers do. Completed candidates are ranked by
``score = logprob / len ** length_penalty`` (len counts EOS). The search stops for a prompt
only when it holds ``n_best`` completed candidates that no live hypothesis can still beat
(see :func:`decodekit.decoding.trace.reachable_bound`), or at ``max_length``, where the live
hypotheses join the candidates as unfinished. Under a constraint without EOS, a hypothesis in
an accepting state that cannot go on (no allowed token of non-zero probability) joins them
earlier, unfinished at its own length. Tokens of probability 0 never extend a hypothesis.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from decodekit.decoding.checks import check_logprobs, is_check_step
from decodekit.decoding.constraint import Constraint, resolve_constraint
from decodekit.decoding.prompts import Prompt, as_batch, check_length_penalty, check_positive, expand, prefill
from decodekit.decoding.trace import Candidate, Pool, Trace, length_normalised
from decodekit.models import state as st
from decodekit.models.base import LanguageModel
from decodekit.outputs import Hypothesis

NEG_INF = float("-inf")


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
    check_positive("beam_size", beam_size)
    check_positive("n_best", n_best)
    check_positive("max_length", max_length, minimum=0)
    check_length_penalty(length_penalty)
    prompts, single = as_batch(prompt)
    automaton = resolve_constraint(constraint, model, max_length)
    logprobs, state = prefill(model, prompts)
    batch, beam, vocab = len(prompts), beam_size, logprobs.shape[1]
    logprobs, state = expand(model, logprobs, state, beam)
    device, eos = logprobs.device, model.eos_id
    cum = torch.full((batch, beam), NEG_INF, device=device)  # [B, K]
    cum[:, 0] = 0.0  # only the first beam is live at step 0
    dfa = None if automaton is None else torch.zeros(batch * beam, dtype=torch.long, device=device)
    row_base = torch.arange(batch, device=device)[:, None] * beam  # [B, 1]
    trace, pool = Trace(), Pool(batch, n_best)
    # A row contributes at most K survivors and one EOS, so its K+1 best tokens suffice (K
    # without EOS); 2K candidates per prompt hold K non-EOS ones, since each row has one EOS.
    per_row = min(beam + (eos is not None), vocab)
    n_cand = min(2 * beam if eos is not None else beam, beam * per_row)
    steps = 0
    for t in range(max_length):
        steps = t + 1
        if automaton is not None:
            allowed = automaton.allowed(dfa, max_length - t)  # [N, V]
            logprobs = logprobs.masked_fill(~allowed, NEG_INF)
            if eos is None:  # without EOS, an accepting hypothesis that cannot go on ends here
                # "cannot go on": no allowed token, or none with non-zero probability
                stuck = ~(logprobs > NEG_INF).any(-1) & automaton.accepting[dfa]
                pool.add_unfinished(cum.masked_fill(~stuck.view(batch, beam), NEG_INF), t, length_penalty)
        # Select per row first (cheap), then across the K rows of each prompt.
        row_val, row_tok = logprobs.topk(per_row, dim=1)  # [N, K+1]
        flat = (cum[:, :, None] + row_val.view(batch, beam, per_row)).view(batch, beam * per_row)
        top_val, top_idx = flat.topk(n_cand, dim=1)  # [B, 2K], best first
        parent = top_idx // per_row
        token = row_tok.view(batch, beam * per_row).gather(1, top_idx)
        if eos is not None:
            is_eos = token == eos
            _collect_finished(pool, top_val[:, :beam], parent[:, :beam], is_eos[:, :beam], t, length_penalty)
            keep = torch.sort(is_eos.to(torch.uint8), dim=1, stable=True).indices[:, :beam]  # first K non-EOS
            top_val, parent, token = top_val.gather(1, keep), parent.gather(1, keep), token.gather(1, keep)
            top_val = top_val.masked_fill(token == eos, NEG_INF)
        else:
            top_val, parent, token = top_val[:, :beam], parent[:, :beam], token[:, :beam]
        cum = top_val
        trace.push(parent, token)
        rows = (row_base + parent).view(-1)  # [B*K]
        if automaton is not None:
            dfa = automaton.next_state[dfa[rows], token.reshape(-1)].clamp_min(0)
        if automaton is not None or pool.has_candidates(n_best):  # else no item can be done yet
            shortest = _shortest(automaton, dfa, cum.shape, t + 1, max_length, eos)
            pool.update(cum, shortest, max_length, length_penalty)
        if all(pool.done) or t == max_length - 1:
            break
        state = st.select(state, rows, model)
        logprobs, state = model.step(state, token.reshape(-1))
        check_logprobs(logprobs, batch * beam, vocab, t + 1, is_check_step(t + 1))
    if automaton is not None:
        cum = cum.masked_fill(~automaton.accepting[dfa].view(batch, beam), NEG_INF)
    pool.add_unfinished(cum, steps, length_penalty)
    out = pool.results(trace)
    return out[0] if single else out


def _shortest(automaton, dfa, shape, length: int, max_length: int, eos: int | None):
    """The fewest tokens (EOS included) a completion of a live slot of ``length`` tokens can
    have, for :func:`decodekit.decoding.trace.reachable_bound`. Unconstrained: ``length + 1``
    (EOS next), or ``max_length`` without EOS (such a hypothesis ends only there). Under a
    constraint: ``length + min_tokens_to_accept[state]``, plus 1 for EOS; without EOS an
    accepting slot (0 more tokens) may end unfinished at its current length."""
    if automaton is None:
        return length + 1 if eos is not None else max_length
    return length + (eos is not None) + automaton.min_tokens_to_accept[dfa].view(shape)  # [B, K]


def _collect_finished(pool: Pool, value, parent, is_eos, t: int, alpha: float) -> None:
    """EOS candidates (value [B, K], parent [B, K], is_eos [B, K]) join the pool."""
    mask = is_eos & torch.isfinite(value)
    if not bool(mask.any()):
        return
    hits = mask.nonzero().tolist()
    values, parents = value[mask].tolist(), parent[mask].tolist()
    for (b, _), v, p in zip(hits, values, parents):
        pool.add(b, Candidate(length_normalised(v, t + 1, alpha), v, t - 1, p, True))
