"""Every registered strategy, with and without a constraint, on every conformance model: a batch
gives what each prompt gives alone, constrained outputs fully match, and every hypothesis's
log-probability equals a re-score by stepping the model over its tokens."""

from __future__ import annotations

import math

import pytest
import regex
import torch

from decodekit import STRATEGIES, GenerationConfig, compile_regex, generate
from decodekit.models import base
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


# The engine axis: each constrained strategy over the token-level engines (whole, first
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


def rescore_top(model, prompt: list[int], tokens: tuple[int, ...], finished: bool) -> list[torch.Tensor]:
    """The model's log-probabilities [V] at each position of a hypothesis: the prompt prefilled
    (a controlled model counts only the tokens stepped after it as generated), then stepping."""
    fed = ([] if model.bos_id is None else [model.bos_id]) + prompt
    logprobs, state = base.prefill(model, model.initial_state(1), torch.tensor([fed]))
    out = []
    with torch.no_grad():
        for t in [*tokens, model.eos_id] if finished else tokens:
            out.append(logprobs[0])
            logprobs, state = model.step(state, torch.tensor([t]))
    return out


def issue_39_configs(eos: int | None):
    """Every strategy with the samplers, the OpenAI controls and logprobs=3 (issue 39)."""
    automaton = compile_regex(PATTERN, VOCAB.surfaces(), eos, VOCAB.separator)
    for name in STRATEGIES:
        for constraint in (None, automaton):
            if constraint is None and name == "masked-beam":
                continue
            yield GenerationConfig(
                strategy=name, max_length=5, beam_size=3, n_best=2, num_samples=2, seed=3,
                constraint=constraint, logprobs=3, prompt_logprobs=2,
                typical_p=0.9 if name == "sample" else None, eta_cutoff=0.05 if name == "sample" else None,
                presence_penalty=0.5, frequency_penalty=0.3, logit_bias={"4": 1.5, 3: -0.5},
                bad_words=[[5, 5], [2, 5]],
            )  # fmt: skip


# the model axis of the issue-39 options: recurrent, wrapped (controls, suppression), n-gram with
# and without EOS and BOS, MLP, stack (all models: ~100 s, the transformers one a quarter of it)
ISSUE_39_MODELS = [
    "controlled-lstm",
    "lstm",
    "mlp",
    "ngram-kn1",
    "ngram-kn2-no-eos",
    "stack-rns-window3",
    "suppressed-lstm",
]


@pytest.mark.parametrize("name", ISSUE_39_MODELS)
def test_every_strategy_with_the_samplers_controls_and_logprobs(name):
    """The hypotheses' log-probabilities are the controlled model's (a re-score by stepping
    it), no bad word is generated, and top_logprobs / prompt_logprobs are the controlled /
    plain model's n most probable tokens at each position (a re-score by stepping)."""
    from decodekit.decoding.generation import with_controls

    model = model_of(name)
    for config in issue_39_configs(model.eos_id):
        controlled = with_controls(model, config)
        batch = generate(model, PROMPTS, config)
        assert any(batch), (name, config.strategy)
        for prompt, hyps in zip(PROMPTS, batch):
            for h in hyps:
                label = (name, config.strategy, config.constraint is not None)
                steps = rescore_top(controlled, prompt, h.tokens, h.finished)  # the prompt prefilled:
                targets = [*h.tokens, model.eos_id] if h.finished else h.tokens  # not counted as generated
                want = sum(float(lp[t]) for lp, t in zip(steps, targets))
                assert math.isclose(h.logprob, want, rel_tol=1e-4, abs_tol=1e-4), label
                pairs = list(
                    zip([*prompt, *h.tokens][len(prompt) - 1 :], h.tokens)
                )  # each ending in a new token
                assert not any(a == b == 5 or (a, b) == (2, 5) for a, b in pairs), label
                assert len(h.top_logprobs) == len(steps) == len(h.token_logprobs), label
                for top, lp in zip(h.top_logprobs, steps):
                    finite = lp[lp > -math.inf].sort(descending=True).values[:3].tolist()
                    assert [v for _, v in top] == pytest.approx(finite, abs=1e-4), label
                    assert all(math.isclose(float(lp[i]), v, abs_tol=1e-4) for i, v in top), label
                assert len(h.prompt_logprobs) == len(prompt)
                plain = rescore_top(model, [], tuple(prompt), False) if model.bos_id is not None else None
                for k, entry in enumerate(h.prompt_logprobs):
                    if plain is None:  # no BOS: the first token has no distribution; the rest, stepped
                        assert (entry is None) == (k == 0)
                        continue
                    token, value, top = entry
                    assert token == prompt[k] and math.isclose(value, float(plain[k][token]), abs_tol=1e-4)
                    assert [v for _, v in top] == pytest.approx(plain[k].topk(2).values.tolist(), abs=1e-4)
