"""Greedy decoding and ancestral sampling: one independent row per output.

A row leaves the batch when it emits EOS. Under a constraint, tokens that cannot reach
acceptance in the remaining steps are masked (``TokenAutomaton.mask``; EOS only in accepting
states); a token of probability 0 is never chosen. A row none of whose allowed tokens has
non-zero probability cannot go on: without EOS, in an accepting state, it ends there (a match,
``finished=False``); otherwise it ends unmatched and returns nothing (greedy: ``[]``). The
reported ``logprob`` is the model's own, not that of the masked or processed distribution;
``score`` = ``logprob``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from decodekit.checks import at_least
from decodekit.decoding import processors
from decodekit.decoding.prompts import Constraint, Prompt
from decodekit.decoding.search import NEG_INF, Selection, check_memory, decode
from decodekit.memory import SearchSpec
from decodekit.models.base import LanguageModel, model_device
from decodekit.outputs import Hypothesis, SearchTree

Chooser = Callable[[torch.Tensor], torch.Tensor]  # masked logprobs [N, V] -> tokens [N]


@torch.inference_mode()
def greedy(
    model: LanguageModel,
    prompt: Prompt | Sequence[Prompt],
    max_length: int,
    *,
    constraint: Constraint | None = None,
    record: SearchTree | None = None,
    max_memory: int | str | None = None,
) -> list[Hypothesis] | list[list[Hypothesis]]:
    """Greedy decoding: the argmax token at every step, until EOS or ``max_length`` tokens
    (EOS included). Arguments and the result: see :mod:`decodekit.decoding`; one hypothesis
    per prompt, none when it ended unmatched."""
    check_memory(model, prompt, SearchSpec("greedy", max_length, constraint=constraint), max_memory)
    return _decode(model, prompt, max_length, lambda lp: lp.argmax(-1), 1, constraint, record)


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
    record: SearchTree | None = None,
    max_memory: int | str | None = None,
) -> list[Hypothesis] | list[list[Hypothesis]]:
    """Ancestral sampling: each token drawn from ``softmax(process(logprobs))`` with temperature,
    top-k, top-p and min-p applied in that order (:mod:`~decodekit.decoding.processors`), after
    masking by the constraint. Draws use ``torch.multinomial`` with ``generator`` (an int seeds
    a new generator on the model's device; None: torch's global one), so a fixed seed gives the
    same samples. Returns ``num_samples`` hypotheses per prompt in draw order, less those that
    ended unmatched under a constraint.
    """
    processors.validate(temperature, top_k, top_p, min_p)
    at_least("num_samples", num_samples)
    spec = SearchSpec("sample", max_length, num_samples=num_samples, constraint=constraint)
    spec = spec.replace(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    check_memory(model, prompt, spec, max_memory)
    if isinstance(generator, int):
        generator = torch.Generator(device=model_device(model)).manual_seed(generator)

    def choose(logprobs: torch.Tensor) -> torch.Tensor:
        weights = processors.process(logprobs, t=temperature, k=top_k, p=top_p, minp=min_p)
        return torch.multinomial(torch.softmax(weights.float(), dim=-1), 1, generator=generator)[:, 0]

    return _decode(model, prompt, max_length, choose, num_samples, constraint, record)


def _decode(model, prompt, max_length, choose: Chooser, copies: int, constraint, record):
    """Each row ends alone (EOS, cannot go on, ``max_length``); the others are the selection."""
    eos = model.eos_id

    def start(automaton, batch: int):
        def select(t: int, logprobs: torch.Tensor, rows: Selection) -> Selection:
            keep = ended = ended_logprob = None
            cum, states, masked = rows.logprob, rows.states, logprobs
            if automaton is not None:
                masked = automaton.mask(logprobs, states, max_length - t)  # [N, V]
                stuck = masked.amax(-1) == NEG_INF  # [N] no allowed token of non-zero probability
                if bool(stuck.any()):  # without EOS an accepting row ends as a match; others fail
                    if eos is None:
                        ended = (stuck & automaton.is_accepting(states)).nonzero()[:, 0]
                        ended_logprob = cum[ended]
                    keep = (~stuck).nonzero()[:, 0]
                    masked, logprobs, cum, states = masked[keep], logprobs[keep], cum[keep], states[keep]
            tokens = choose(masked) if masked.shape[0] else masked.new_zeros(0, dtype=torch.long)  # [N']
            cum = cum + logprobs.gather(1, tokens[:, None])[:, 0]
            states = None if automaton is None else automaton.step(states, tokens)
            if eos is not None and bool((is_eos := tokens == eos).any()):
                go_on = (~is_eos).nonzero()[:, 0]
                ended, ended_logprob = is_eos.nonzero()[:, 0] if keep is None else keep[is_eos], cum[is_eos]
                keep = go_on if keep is None else keep[go_on]
                tokens, cum, states = tokens[go_on], cum[go_on], None if states is None else states[go_on]
            return Selection(cum, states, keep, tokens, ended, ended_logprob)

        zeros = torch.zeros(batch * copies, dtype=torch.long, device=model_device(model))
        return select, Selection(zeros.double(), None if automaton is None else zeros + automaton.initial)

    return decode(model, prompt, max_length, constraint, start, 1, 0.0, record, ranked=False)
