"""Every registered strategy, with and without a constraint, on every conformance model: a batch
gives what each prompt gives alone, constrained outputs fully match, and every hypothesis's
log-probability equals a re-score by stepping the model over its tokens."""

from __future__ import annotations

import math

import pytest
import regex
import torch

from decodekit import STRATEGIES, GenerationConfig, compile_regex, generate
from tests.models.test_conformance import NAMES, VOCAB, model_of

PATTERN = r"(?:a|b)(?: [cd])*(?: e)?"  # over VOCAB's words, joined by " "
PROMPTS = [[2, 3], [4], [2, 5, 6]]


def rescore(model, prompt: list[int], tokens: tuple[int, ...], finished: bool) -> float:
    """sum log p(token | history) by stepping (EOS counted when finished)."""
    fed = ([] if model.bos_id is None else [model.bos_id]) + prompt
    targets = [*tokens, model.eos_id] if finished else list(tokens)
    state, total = model.initial_state(1), 0.0
    with torch.no_grad():
        for t in fed:
            logprobs, state = model.step(state, torch.tensor([t]))
        for t in targets:
            total += float(logprobs[0, t])
            logprobs, state = model.step(state, torch.tensor([t]))
    return total


def configs(eos: int | None):
    automaton = compile_regex(PATTERN, VOCAB.surfaces(), eos, VOCAB.separator)
    for name in STRATEGIES:
        for constraint in (None, automaton):
            if constraint is None and name == "masked-beam":
                continue  # beam search without a mask
            yield (
                f"{name}{'+constraint' if constraint is not None else ''}",
                GenerationConfig(
                    strategy=name,
                    max_length=5,
                    beam_size=3,
                    n_best=2,
                    num_samples=2,
                    seed=3,
                    constraint=constraint,
                ),
            )


@pytest.mark.parametrize("name", NAMES)
def test_every_strategy_on_every_model(name):
    model = model_of(name)
    for label, config in configs(model.eos_id):
        batch = generate(model, PROMPTS, config)
        for prompt, hyps in zip(PROMPTS, batch):
            if config.strategy != "sample":  # sampling draws from one generator for the batch
                alone = generate(model, [prompt], config)[0]
                assert [(h.tokens, h.finished) for h in hyps] == [(h.tokens, h.finished) for h in alone]
                for a, b in zip(hyps, alone):  # left-padded batches move float32 results by an ulp
                    assert math.isclose(a.logprob, b.logprob, rel_tol=1e-5, abs_tol=1e-5), (name, label)
            for h in hyps:
                want = rescore(model, prompt, h.tokens, h.finished)
                assert math.isclose(h.logprob, want, rel_tol=1e-4, abs_tol=1e-4), (name, label, h, want)
                if config.constraint is not None:
                    assert regex.fullmatch(PATTERN, VOCAB.decode(h.tokens)), (name, label, h.tokens)
