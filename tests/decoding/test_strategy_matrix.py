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
                    num_beam_groups=3,  # diverse beam search: 3 groups of 1
                    diversity_penalty=0.5,
                    constraint=constraint,
                ),
            )


@pytest.mark.parametrize("name", NAMES)
def test_every_strategy_on_every_model(name):
    model = model_of(name)
    for label, config in configs(model.eos_id):
        batch = generate(model, PROMPTS, config)
        for prompt, hyps in zip(PROMPTS, batch):
            if "seed" not in config.search.reads:  # sampling draws from one generator for the batch
                alone = generate(model, [prompt], config)[0]
                assert [(h.tokens, h.finished) for h in hyps] == [(h.tokens, h.finished) for h in alone]
                for a, b in zip(hyps, alone):  # left-padded batches move float32 results by an ulp
                    assert math.isclose(a.logprob, b.logprob, rel_tol=1e-5, abs_tol=1e-5), (name, label)
            for h in hyps:
                want = rescore(model, prompt, h.tokens, h.finished)
                assert math.isclose(h.logprob, want, rel_tol=1e-4, abs_tol=1e-4), (name, label, h, want)
                if config.constraint is not None:
                    assert regex.fullmatch(PATTERN, VOCAB.decode(h.tokens)), (name, label, h.tokens)


# The engine axis: each constrained strategy over the three token-level engines (whole, first
# visit over an eager byte DFA, first visit over derivatives) on a byte-level vocabulary of the
# models' size. The masks are exact on all three, so every strategy returns the same hypotheses
# on each. A few models (with and without EOS, recurrent, n-gram, stack): the model axis is above.
BYTE_PATTERN = r"[ab]c*(?:ab)?"
ENGINE_MODELS = ["lstm", "ngram-kn2-no-eos", "stack-rns"]


@pytest.mark.parametrize("name", ENGINE_MODELS)
def test_every_constrained_strategy_on_every_engine(name):
    from decodekit.constraints import ConstraintError
    from tests.support.engines import BYTE_TOKENS, ENGINES, compile_on, text_of

    model = model_of(name)
    assert model.vocab_size == len(BYTE_TOKENS)
    automata = {engine: compile_on(engine, BYTE_PATTERN, eos_id=model.eos_id) for engine in ENGINES}
    for strategy in STRATEGIES:
        found = {}
        for engine, automaton in automata.items():
            config = GenerationConfig(
                strategy=strategy, max_length=5, beam_size=3, n_best=2, num_samples=2, seed=3,
                num_beam_groups=3, diversity_penalty=0.5, constraint=automaton,
            )  # fmt: skip
            if strategy == "beam" and engine == "derivatives":
                # one beam per state needs canonical states; the derivative engine's are not merged
                with pytest.raises(ConstraintError, match="masked"):
                    generate(model, PROMPTS, config)
                continue
            batch = generate(model, PROMPTS, config)
            found[engine] = batch
            for prompt, hyps in zip(PROMPTS, batch):
                if "seed" not in STRATEGIES[strategy].reads:
                    alone = generate(model, [prompt], config)[0]
                    assert [(h.tokens, h.finished) for h in hyps] == [(h.tokens, h.finished) for h in alone]
                for h in hyps:
                    assert regex.fullmatch(BYTE_PATTERN, text_of(h.tokens)), (name, strategy, engine, h)
                    want = rescore(model, prompt, h.tokens, h.finished)
                    assert math.isclose(h.logprob, want, rel_tol=1e-4, abs_tol=1e-4), (name, strategy, engine)
        first, *others = found.values()
        for other in others:  # the same masks: the same hypotheses on every engine
            assert [[(h.tokens, h.finished) for h in hyps] for hyps in other] == [
                [(h.tokens, h.finished) for h in hyps] for hyps in first
            ], (name, strategy)
