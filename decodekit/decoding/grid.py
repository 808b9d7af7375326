"""Anderson-style constrained beam search (Anderson et al. 2017, arXiv:1612.00576).

The regex constraint is a token automaton (S live states, see :mod:`decodekit.constraints`).
The search keeps one beam of up to K hypotheses **per automaton state**: rows are laid out
``(b * S + q) * K + k``. At each step every live hypothesis of every state-beam is extended
by one batched ``step`` call; each candidate (hypothesis, token) moves to the beam of its
target state ``q' = next_state[q, token]``, and each state-beam keeps its K best candidates
by cumulative log-probability, drawn from the **whole vocabulary** (the paper's forced
transitions: a transition toward acceptance survives however improbable its tokens). EOS
ends a hypothesis only in an accepting state; without EOS, a hypothesis in an accepting state
that cannot go on (no token of non-zero probability leads to acceptance in time) ends there,
unfinished. Completed hypotheses are ranked by ``logprob / len ** length_penalty`` as in
:func:`decodekit.beam_search`, with the same exact stopping rule.

Exact grouped top-K without an [B, S, S·K·V] tensor: for each source state the tokens are
grouped by target. A group of at most K tokens is kept whole ("sparse" candidates, one
gather); from a larger group only the K best tokens of each row can survive, found by one
masked top-K per such group (J of them per state, usually one or two). The resulting
``S·K·(J·K + P)`` candidates are then grouped by target with a static gather and cut to K.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from decodekit.decoding.beam import NEG_INF
from decodekit.decoding.checks import check_logprobs, is_check_step
from decodekit.decoding.constraint import Constraint, resolve_constraint
from decodekit.decoding.prompts import Prompt, as_batch, check_length_penalty, check_positive, expand, prefill
from decodekit.decoding.trace import Candidate, Pool, Trace, length_normalised
from decodekit.models import state as st
from decodekit.models.base import LanguageModel
from decodekit.outputs import Hypothesis


@dataclass(frozen=True)
class _Plan:
    """Static candidate layout for one automaton and beam size (all on the model's device)."""

    big_slot: torch.Tensor  # [S, V] long: index j of the big group of (q, v), -1 otherwise
    num_big: int  # J
    sparse_tokens: torch.Tensor  # [S, P] long (0 where padded)
    cand_target: torch.Tensor  # [C_all] long: target state of each candidate, in layout order
    group_index: torch.Tensor  # [S, W] long: candidate positions per target (C_all = padding)
    sparse_pad: torch.Tensor  # [S, P] bool: padded sparse entries
    scan: int  # J == 1: top-`scan` of the unmasked row holds the big group's K best; 0: mask instead
    cand_need: torch.Tensor  # [C_all] long: min_tokens_to_accept of each candidate's target (huge: none)
    max_need: int  # largest finite cand_need: below this many remaining tokens, mask by cand_need


def _plan(next_state: np.ndarray, min_tokens: np.ndarray, beam: int, device) -> _Plan:
    """Group each state's tokens by target state; see the module docstring."""
    num_states, vocab = next_state.shape
    live = next_state >= 0
    src = np.broadcast_to(np.arange(num_states)[:, None], next_state.shape)
    pair = np.where(live, src * num_states + next_state, -1)
    counts = np.bincount(pair[live], minlength=num_states * num_states).reshape(num_states, num_states)
    big = counts > beam  # [S, S'] pairs kept by a masked top-K
    big_rank = np.cumsum(big, axis=1) - 1  # j of each big pair within its source
    num_big = int(big.sum(1).max(initial=0))
    safe_next = np.where(live, next_state, 0)
    is_big = live & big[src, safe_next]
    big_slot = np.where(is_big, big_rank[src, safe_next], -1)
    big_target = np.full((num_states, num_big), -1)
    for q, q2 in zip(*np.nonzero(big)):  # S x S pairs, host-side, once per search
        big_target[q, big_rank[q, q2]] = q2
    sparse = live & ~is_big
    width = int(sparse.sum(1).max(initial=0))
    order = np.argsort(~sparse, axis=1, kind="stable")[:, :width]  # sparse tokens first
    sparse_pad = ~np.take_along_axis(sparse, order, 1)
    sparse_tokens = np.where(sparse_pad, 0, order)
    sparse_target = np.where(sparse_pad, -1, np.take_along_axis(safe_next, sparse_tokens, 1))
    # Candidate layout per (q, k): [J groups x K tokens, P sparse tokens]; k repeats the targets.
    per_row = np.concatenate([np.repeat(big_target, beam, axis=1), sparse_target], axis=1)  # [S, J*K+P]
    cand_target = np.repeat(per_row[:, None, :], beam, axis=1).reshape(-1)  # [S*K*(J*K+P)]
    groups = [np.nonzero(cand_target == q2)[0] for q2 in range(num_states)]
    group_width = max([len(g) for g in groups] + [1])
    group_index = np.full((num_states, group_width), len(cand_target))
    for q2, g in enumerate(groups):
        group_index[q2, : len(g)] = g

    # With one big group per state, its K best tokens are among the K + (V - |group|) best of
    # the whole row: when that is small, one top-k replaces a masked pass over [N, V].
    outside = vocab - np.where(is_big, 1, 0).sum(1)  # [S]
    has_big = is_big.any(1)
    widest = int(outside[has_big].max(initial=0))
    scan = min(vocab, beam + widest) if num_big == 1 and widest <= max(64, 4 * beam) else 0

    cand_need = np.where(cand_target >= 0, min_tokens[np.maximum(cand_target, 0)], np.iinfo(np.int64).max)

    def tensor(a, dtype=torch.long):
        return torch.as_tensor(np.ascontiguousarray(a), dtype=dtype, device=device)

    return _Plan(
        tensor(big_slot),
        num_big,
        tensor(sparse_tokens),
        tensor(cand_target),
        tensor(group_index),
        tensor(sparse_pad, torch.bool),
        scan,
        tensor(cand_need),
        int(cand_need[cand_target >= 0].max(initial=0)),
    )


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
        The n-best **matching** hypotheses per prompt, best first; an empty list when no
        matching hypothesis was found: always when every matching sequence has probability 0,
        and, when the model gives some tokens probability 0, possibly also when each beam
        kept only hypotheses whose every way on has probability 0 (a beam as wide as the set
        of sequences finds the best matches exactly). Raises ConstraintError if nothing can
        match in max_length.
    """
    for name, value in (("beam_size", beam_size), ("n_best", n_best)):
        check_positive(name, value)
    check_positive("max_length", max_length, minimum=0)
    check_length_penalty(length_penalty)
    prompts, single = as_batch(prompt)
    automaton = resolve_constraint(constraint, model, max_length)
    logprobs, state = prefill(model, prompts)
    batch, states, beam, vocab = len(prompts), automaton.num_states, beam_size, logprobs.shape[1]
    width = states * beam  # slots per prompt
    logprobs, state = expand(model, logprobs, state, width)
    device, eos = logprobs.device, model.eos_id
    next_state = automaton.next_state.cpu().numpy()
    min_tokens = automaton.min_tokens_to_accept.cpu().numpy()  # [S]
    plan = _plan(next_state, min_tokens, beam, device)
    accepting = automaton.accepting.to(device)  # [S]
    cum = torch.full((batch, width), NEG_INF, device=device)  # [B, S*K]
    cum[:, automaton.initial * beam] = 0.0
    row_base = torch.arange(batch, device=device)[:, None] * width  # [B, 1]
    slot_state = torch.arange(states, device=device).repeat_interleave(beam)  # [S*K]
    state_index = torch.arange(states, device=device)[:, None]  # [S, 1]
    slot_accepting = accepting[slot_state]  # [S*K]
    slot_need = automaton.min_tokens_to_accept.to(device)[slot_state] + (eos is not None)  # [S*K]
    trace, pool = Trace(), Pool(batch, n_best)
    steps = 0
    for t in range(max_length):
        remaining = max_length - t - 1  # tokens that may follow this step's token
        lp4 = logprobs.view(batch, states, beam, vocab)
        if eos is not None:
            _collect_eos(
                pool, cum, lp4[..., eos].reshape(batch, width), slot_accepting, beam, t, length_penalty
            )
        if plan.cand_target.numel() == 0:  # no state has any way on: every hypothesis ends here
            if eos is None:
                pool.add_unfinished(cum.masked_fill(~slot_accepting[None, :], NEG_INF), t, length_penalty)
            cum = torch.full_like(cum, NEG_INF)
            break
        steps = t + 1
        cand_value, cand_token = _candidates(lp4, cum.view(batch, states, beam), plan, beam)  # [B, C]
        if remaining < plan.max_need:  # near max_length some targets can no longer reach acceptance
            cand_value = cand_value.masked_fill(plan.cand_need > remaining, NEG_INF)
        if eos is None:  # without EOS, an accepting hypothesis that cannot go on ends here
            # "cannot go on": no token leads on in time, or none that does has non-zero probability
            blocked = ~(cand_value.view(batch, width, -1) > NEG_INF).any(-1)  # [B, S*K]
            stuck = blocked & slot_accepting[None, :]
            pool.add_unfinished(cum.masked_fill(~stuck, NEG_INF), t, length_penalty)
        padded = torch.cat([cand_value, cand_value.new_full((batch, 1), NEG_INF)], 1)
        grouped = padded[:, plan.group_index]  # [B, S, W]
        top_val, top_pos = grouped.topk(min(beam, grouped.shape[-1]), dim=-1)  # [B, S, K']
        cand_pos = plan.group_index[state_index, top_pos].clamp_max(cand_value.shape[1] - 1)  # [B, S, K']
        token = cand_token.gather(1, cand_pos.view(batch, -1))
        parent = cand_pos.view(batch, -1) // (cand_value.shape[1] // width)  # candidates per source slot
        cum = _pad_beam(top_val, beam).view(batch, width)
        token = _pad_beam(token.view(batch, states, -1), beam).view(batch, width)
        parent = _pad_beam(parent.view(batch, states, -1), beam).view(batch, width)
        trace.push(parent, token)
        pool.update(cum, t + 1 + slot_need, max_length, length_penalty)  # see reachable_bound
        if all(pool.done) or t == max_length - 1:
            break
        state = st.select(state, (row_base + parent).view(-1), model)
        logprobs, state = model.step(state, token.view(-1))
        check_logprobs(logprobs, batch * width, vocab, t + 1, is_check_step(t + 1))
    pool.add_unfinished(cum.masked_fill(~slot_accepting[None, :], NEG_INF), steps, length_penalty)
    out = pool.results(trace)
    return out[0] if single else out


def _candidates(lp4, cum3, plan: _Plan, beam: int):
    """All candidates that can survive: returns (values [B, S*K*C], tokens [B, S*K*C]).

    lp4 [B, S, K, V] logprobs, cum3 [B, S, K] cumulative log-probabilities."""
    values, tokens = [], []
    if plan.scan:
        v, tok = lp4.topk(plan.scan, dim=-1)  # [B, S, K, scan]
        states = torch.arange(lp4.shape[1], device=lp4.device)[None, :, None, None]
        in_group = plan.big_slot[states, tok] == 0
        first = torch.sort((~in_group).to(torch.uint8), dim=-1, stable=True).indices[..., :beam]
        v = v.gather(-1, first).masked_fill(~in_group.gather(-1, first), NEG_INF)  # [B, S, K, K]
        values.append(v)
        tokens.append(tok.gather(-1, first))
    else:
        for j in range(plan.num_big):  # J is the largest number of big groups of one state
            masked = lp4.masked_fill((plan.big_slot != j)[None, :, None, :], NEG_INF)
            v, tok = masked.topk(min(beam, lp4.shape[-1]), dim=-1)  # [B, S, K, K]
            values.append(v)
            tokens.append(tok)
    if plan.sparse_tokens.shape[1]:
        b, s, k, _ = lp4.shape
        idx = plan.sparse_tokens[None, :, None, :].expand(b, s, k, -1)
        v = lp4.gather(-1, idx).masked_fill(plan.sparse_pad[None, :, None, :], NEG_INF)  # [B, S, K, P]
        values.append(v)
        tokens.append(idx)
    value = torch.cat(values, -1) + cum3[..., None]
    token = torch.cat(tokens, -1)
    return value.flatten(1), token.flatten(1)


def _pad_beam(x: torch.Tensor, beam: int) -> torch.Tensor:
    """[B, S, K'] -> [B, S, K], padding with -inf (values) or 0 (indices) when K' < K."""
    if x.shape[-1] == beam:
        return x
    fill = NEG_INF if x.is_floating_point() else 0
    return torch.cat([x, x.new_full((*x.shape[:-1], beam - x.shape[-1]), fill)], -1)


def _collect_eos(pool: Pool, cum, eos_logprob, slot_accepting, beam: int, t: int, alpha: float) -> None:
    """The K best EOS completions (from accepting slots) of each prompt join the pool.

    cum [B, S*K], eos_logprob [B, S*K], slot_accepting [S*K]."""
    value = (cum + eos_logprob).masked_fill(~slot_accepting[None, :], NEG_INF)
    top_val, top_slot = value.topk(min(beam, value.shape[1]), dim=1)
    mask = torch.isfinite(top_val)
    if not bool(mask.any()):
        return
    for (b, _), v, slot in zip(mask.nonzero().tolist(), top_val[mask].tolist(), top_slot[mask].tolist()):
        pool.add(b, Candidate(length_normalised(v, t + 1, alpha), v, t - 1, slot, True))
