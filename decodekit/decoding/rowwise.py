"""Greedy decoding and ancestral sampling: one independent row per output.

Both run every row of every prompt through one ``step`` call per time step; rows that emit
EOS leave the batch (their state rows are dropped with :func:`decodekit.models.state.select`).
Under a constraint, tokens whose automaton transition is dead or cannot reach acceptance in
the remaining steps are masked (``TokenAutomaton.allowed``); EOS is allowed only in accepting
states. A token of probability 0 (-inf) is never chosen. A constrained row none of whose
allowed tokens has non-zero probability cannot go on: without EOS, in an accepting state, it
ends there (a match, ``finished=False``); otherwise it ends unmatched and returns nothing, so
a prompt may get fewer hypotheses than asked for (greedy: none). The reported ``logprob`` is
always the model's own log-probability of the tokens, not that of the masked or processed
distribution the token was drawn from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from decodekit.decoding import processors
from decodekit.decoding.checks import check_logprobs, is_check_step
from decodekit.decoding.constraint import Constraint, resolve_constraint
from decodekit.decoding.prompts import Prompt, as_batch, check_positive, expand, prefill
from decodekit.models import state as st
from decodekit.models.base import LanguageModel
from decodekit.outputs import Hypothesis

Chooser = Callable[[torch.Tensor], torch.Tensor]  # masked logprobs [N, V] -> tokens [N]


@torch.inference_mode()
def greedy(
    model: LanguageModel,
    prompt: Prompt | Sequence[Prompt],
    max_length: int,
    *,
    constraint: Constraint | None = None,
) -> list[Hypothesis] | list[list[Hypothesis]]:
    """Greedy decoding: the argmax token at every step, until EOS or ``max_length`` tokens.

    Args:
        model: any step-protocol model.
        prompt: one prompt (list of token ids) or a batch (list of lists).
        max_length: most tokens to generate, EOS included.
        constraint: a regex string (compiled against ``model.vocab``) or a compiled
            ``TokenAutomaton``; tokens that cannot lead to a full match are masked.

    Returns:
        ``[Hypothesis]`` for one prompt, one such list per prompt for a batch. ``score`` = ``logprob``.
        Under a constraint the list is empty when the row ended unmatched (it reached a point
        where every allowed token has probability 0; see the module docstring).
    """
    return _decode(model, prompt, max_length, lambda lp: lp.argmax(-1), 1, constraint)


@torch.inference_mode()
def sample(
    model: LanguageModel,
    prompt: Prompt | Sequence[Prompt],
    max_length: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    generator: torch.Generator | int | None = None,
    num_samples: int = 1,
    *,
    constraint: Constraint | None = None,
) -> list[Hypothesis] | list[list[Hypothesis]]:
    """Ancestral sampling: draw each token from the model's (processed) distribution.

    The distribution sampled at each step is ``softmax(process(logprobs))`` with temperature,
    top-k, top-p and min-p applied in that order (see :mod:`decodekit.decoding.processors`),
    after masking by the constraint if one is given. Draws use ``torch.multinomial`` with
    ``generator`` (an int seeds a new CPU/device generator; None uses torch's global one), so
    a fixed seed gives the same samples.

    Returns ``num_samples`` hypotheses per prompt, in draw order; ``score`` = ``logprob``.
    Under a constraint, samples that ended unmatched (every allowed token had probability 0)
    are left out, so a prompt may get fewer.
    """
    processors.validate(temperature, top_k, top_p, min_p)
    check_positive("num_samples", num_samples)
    if isinstance(generator, int):
        seed = generator
        from decodekit.models.base import model_device

        generator = torch.Generator(device=model_device(model))
        generator.manual_seed(seed)

    def choose(logprobs: torch.Tensor) -> torch.Tensor:
        weights = processors.process(logprobs, t=temperature, k=top_k, p=top_p, minp=min_p)
        probs = torch.softmax(weights.float(), dim=-1)
        return torch.multinomial(probs, 1, generator=generator)[:, 0]

    return _decode(model, prompt, max_length, choose, num_samples, constraint)


class _LiveRows:
    """The rows still generating: their original row index, model state and automaton state."""

    def __init__(self, model, state, rows: int, device, constrained: bool) -> None:
        self.model, self.state = model, state
        self.index = torch.arange(rows, device=device)  # [n] original row of each live row
        self.dfa = torch.zeros(rows, dtype=torch.long, device=device) if constrained else None

    def drop(self, mask: torch.Tensor) -> torch.Tensor:
        """Remove the rows where ``mask`` [n] is True; returns the kept positions [n']."""
        keep = (~mask).nonzero()[:, 0]
        self.index, self.state = self.index[keep], st.select(self.state, keep, self.model)
        if self.dfa is not None:
            self.dfa = self.dfa[keep]
        return keep


def _decode(model, prompt, max_length, choose: Chooser, copies: int, constraint):
    check_positive("max_length", max_length, minimum=0)
    prompts, single = as_batch(prompt)
    automaton = resolve_constraint(constraint, model, max_length)
    logprobs, state = prefill(model, prompts)
    logprobs, state = expand(model, logprobs, state, copies)
    rows, device, eos = logprobs.shape[0], logprobs.device, model.eos_id
    history = torch.zeros(rows, max_length, dtype=torch.long, device=device)  # [N, T]
    lengths = torch.full((rows,), max_length, dtype=torch.long, device=device)
    cum_logprob = torch.zeros(rows, dtype=torch.float64, device=device)
    finished = torch.zeros(rows, dtype=torch.bool, device=device)
    matched = torch.ones(rows, dtype=torch.bool, device=device)  # False: ended unmatched, no output
    live = _LiveRows(model, state, rows, device, automaton is not None)
    for t in range(max_length):
        masked = logprobs
        if automaton is not None:
            allowed = automaton.allowed(live.dfa, max_length - t)  # [n, V]
            masked = logprobs.masked_fill(~allowed, float("-inf"))
            # A row cannot go on when no allowed token has non-zero probability. Without EOS an
            # accepting row ends there (a match); any other such row ends unmatched: no output.
            stuck = ~(masked > float("-inf")).any(-1)  # [n]
            if bool(stuck.any()):
                lengths[live.index[stuck]] = t
                failed = stuck if eos is not None else stuck & ~automaton.accepting[live.dfa]
                matched[live.index[failed]] = False
                keep = live.drop(stuck)
                logprobs, masked = logprobs[keep], masked[keep]
                if live.index.numel() == 0:
                    break
        tokens = choose(masked)  # [n]
        chosen = logprobs.gather(1, tokens[:, None])[:, 0].double()
        if live.index.numel() == rows:  # no row has ended yet: plain slices, no index_put
            cum_logprob += chosen
            history[:, t] = tokens
        else:
            cum_logprob[live.index] += chosen
            history[live.index, t] = tokens
        if automaton is not None:
            live.dfa = automaton.next_state[live.dfa, tokens]
        if eos is not None:
            ended = tokens == eos
            if bool(ended.any()):
                lengths[live.index[ended]] = t
                finished[live.index[ended]] = True
                tokens = tokens[live.drop(ended)]
        if live.index.numel() == 0 or t == max_length - 1:
            break
        logprobs, live.state = model.step(live.state, tokens)
        check_logprobs(logprobs, live.index.numel(), model.vocab_size, t + 1, is_check_step(t + 1))
    history, lengths = history.tolist(), lengths.tolist()
    cum_logprob, finished, matched = cum_logprob.tolist(), finished.tolist(), matched.tolist()
    hyps = [
        Hypothesis(tuple(history[r][: lengths[r]]), cum_logprob[r], cum_logprob[r], finished[r])
        if matched[r]
        else None
        for r in range(rows)
    ]
    out = [[h for h in hyps[b * copies : (b + 1) * copies] if h is not None] for b in range(len(prompts))]
    return out[0] if single else out
