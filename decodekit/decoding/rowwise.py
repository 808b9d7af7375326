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

from decodekit.constraints import TokenConstraint
from decodekit.decoding import processors
from decodekit.decoding.plan import plan
from decodekit.decoding.prompts import Constraint, Prompt
from decodekit.decoding.search import NEG_INF, Search, Select, Selection, run
from decodekit.decoding.strategies import Settings, Strategy
from decodekit.models.base import LanguageModel, model_device
from decodekit.outputs import Hypothesis, SearchTree
from decodekit.util.checks import at_least

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
    settings = Settings(GREEDY, max_length, constraint)
    return run(plan(model, prompt, settings, max_memory=max_memory), record=record)


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
    typical_p: float | None = None,
    epsilon_cutoff: float | None = None,
    eta_cutoff: float | None = None,
    constraint: Constraint | None = None,
    record: SearchTree | None = None,
    max_memory: int | str | None = None,
) -> list[Hypothesis] | list[list[Hypothesis]]:
    """Ancestral sampling: each token drawn from ``softmax(process(logprobs))`` with temperature,
    top-k, top-p, min-p, typical-p, epsilon and eta cutoffs applied in that order
    (:mod:`~decodekit.decoding.processors`), after masking by the constraint. Draws use
    ``torch.multinomial`` with ``generator`` (an int seeds a new generator on the model's device;
    None: torch's global one), so a fixed seed gives the same samples. Returns ``num_samples``
    hypotheses per prompt in draw order, less those that ended unmatched under a constraint.
    """
    settings = Settings(SAMPLE, max_length, constraint, num_samples=num_samples, seed=generator)
    settings = settings.replace(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    settings = settings.replace(typical_p=typical_p, epsilon_cutoff=epsilon_cutoff, eta_cutoff=eta_cutoff)
    return run(plan(model, prompt, settings, max_memory=max_memory), record=record)


def check_sampling(settings) -> None:
    s = settings
    processors.validate(s.temperature, s.top_k, s.top_p, s.min_p, s.typical_p, s.epsilon_cutoff, s.eta_cutoff)
    at_least("num_samples", s.num_samples)


def _sampler(settings, model: LanguageModel) -> Chooser:
    """Draws from the processed distribution with the settings' ``seed`` (see :func:`sample`)."""
    s, generator = settings, settings.seed
    if isinstance(generator, int):
        generator = torch.Generator(device=model_device(model)).manual_seed(generator)

    def choose(logprobs: torch.Tensor) -> torch.Tensor:
        weights = processors.process_settings(logprobs, s)
        return torch.multinomial(torch.softmax(weights.float(), dim=-1), 1, generator=generator)[:, 0]

    return choose


def rowwise_selection(choose: Chooser, automaton: TokenConstraint | None, eos: int | None) -> Select:
    """Each row ends alone (EOS, cannot go on, ``max_length``); the others are the selection."""

    def select(logprobs: torch.Tensor, rows: Selection, remaining: int) -> Selection:
        keep = ended = ended_logprob = None
        cum, states, masked = rows.logprob, rows.states, logprobs
        if automaton is not None:
            masked = automaton.mask(logprobs, states, remaining)  # [N, V]
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

    return select


def _start(choose: Callable[[Search], Chooser]):
    def start(search: Search, batch: int) -> tuple[Select, Selection]:
        model, automaton, copies = search.model, search.automaton, search.strategy.rows(search.settings, 0)
        zeros = torch.zeros(batch * copies, dtype=torch.long, device=model_device(model))
        rows = Selection(zeros.double(), None if automaton is None else zeros + automaton.initial)
        return rowwise_selection(choose(search), automaton, model.eos_id), rows

    return start


GREEDY = Strategy(
    "greedy",
    "greedy search",
    start=_start(lambda search: lambda logprobs: logprobs.argmax(-1)),
    rows=lambda settings, states: 1,
    # [N, V] float32 tensors at a step's peak: the model's logits and log-probabilities, the
    # normalisation check's temporaries
    working_set=lambda settings: 2.5,
)
SAMPLE = Strategy(
    "sample",
    "sampling",
    start=_start(lambda search: _sampler(search.settings, search.model)),
    rows=lambda settings, states: settings.num_samples,
    # measured on the PTB LSTM: sampling 3.3 units, with top-k and top-p 4.6 (the processors' copies)
    working_set=lambda s: (
        3.5
        + 0.5 * (s.temperature != 1)
        + 0.5 * (s.top_k is not None)
        + 1 * (s.top_p is not None)
        + 0.5 * (s.min_p is not None)
        # not measured: the [N, V] tensors each allocates (typical: a full sort, its order, the mass)
        + 3 * (s.typical_p is not None)
        + 1 * (s.epsilon_cutoff is not None)
        + 1.5 * (s.eta_cutoff is not None)
    ),
    reads=(
        *("temperature", "top_k", "top_p", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff"),
        *("num_samples", "seed"),
    ),
    knob="num_samples",
    returns="num_samples",
    transformers=("do_sample", None),
    check=check_sampling,
)
