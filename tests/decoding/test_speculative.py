"""Speculative decoding (decodekit/decoding/speculative.py): greedy gives the target's greedy
tokens whatever the draft (perfect, random, adversarial, prompt lookup), on the conformance models
and under constraints; sampling has the target's (masked, processed) distribution of sequences,
checked against exhaustive enumeration of a tiny model within sampling error."""

from __future__ import annotations

import collections
import math

import pytest
import torch

import decodekit
from decodekit.decoding.speculative import LookupDraft, ModelDraft, speculative_generate
from decodekit.errors import ConfigError
from tests.models.test_conformance import model_of
from tests.support.exhaustive import Oracle, SparseLM, approx, vocab_of
from tests.support.fakes import HistoryLM


class Adversarial:
    """The target's distribution turned upside down: the draft proposes what the target likes least."""

    def __init__(self, model):
        self.model, self.vocab_size, self.bos_id, self.eos_id = (
            model,
            model.vocab_size,
            model.bos_id,
            model.eos_id,
        )

    def initial_state(self, batch_size):
        return self.model.initial_state(batch_size)

    def step(self, state, tokens):
        logprobs, state = self.model.step(state, tokens)
        return torch.log_softmax(-logprobs.clamp(min=-30), -1), state


def drafts(target, other):
    return {
        "perfect": ModelDraft(target),
        "random": ModelDraft(other),
        "adversarial": ModelDraft(Adversarial(target)),
        "lookup": LookupDraft(),
    }


def greedy_settings(max_length, constraint=None, **fields):
    return decodekit.GenerationConfig(
        strategy="greedy", max_length=max_length, constraint=constraint, **fields
    )


@pytest.mark.parametrize("name", ["lstm", "rnn", "ngram-kn3", "mixture", "stack-superposition", "hf-gpt2"])
@pytest.mark.parametrize("k", [2, None])
def test_greedy_gives_the_targets_greedy_tokens_on_conformance_models(name, k):
    target, other = model_of(name), model_of("ngram-kn3" if name != "ngram-kn3" else "lstm")
    prompts = [[2, 3, 2, 3], [5, 6, 5]]
    want = [decodekit.greedy(target, p, 10)[0] for p in prompts]
    for label, draft in drafts(target, other).items():
        settings = greedy_settings(10, num_assistant_tokens=k, prompt_lookup_num_tokens=None)
        got, search = speculative_generate(target, prompts, settings, draft)
        for g, w in zip(got, want, strict=True):
            assert (g[0].tokens, g[0].finished) == (w.tokens, w.finished), label
            assert g[0].token_logprobs == pytest.approx(w.token_logprobs, abs=1e-5)
        if label == "perfect":  # every draft token kept: fewer target calls than tokens
            assert search.kept == search.drafted > 0


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("pattern", [None, "(a|ab)+", "b?a(ab)*"])
@pytest.mark.parametrize("prompt", [[2], [2, 1, 2, 3, 2]], ids=["plain", "with-eos"])
def test_greedy_under_a_constraint_is_the_masked_greedy(seed, pattern, prompt):
    """(A prompt holding EOS: prompt lookup may find one in its draft.)"""
    vocab = vocab_of(["a", "b", "ab"])
    eos = None if seed % 3 == 2 else 1
    target = SparseLM(len(vocab), seed, 0.3, bos_id=1, eos_id=eos, vocab=vocab)
    other = SparseLM(len(vocab), seed + 100, 0.3, bos_id=1, eos_id=eos, vocab=vocab)
    want = Oracle(target, [2], 6, pattern).greedy()
    for label, draft in drafts(target, other).items():
        got, _ = speculative_generate(
            target, [[2]], greedy_settings(6, pattern, num_assistant_tokens=2), draft
        )
        assert [(h.tokens, h.finished) for h in got[0]] == ([] if want is None else [want[:2]]), label
        if want is not None:
            assert got[0][0].logprob == approx(want[2])


def sampling_distribution(model, prompt, max_length, pattern, temperature):
    """The masked, tempered sampling probability of every output (tokens, finished), by hand:
    at each prefix the allowed tokens (Oracle.allowed) of non-zero probability, renormalised."""
    oracle = Oracle(model, prompt, max_length, pattern)
    seq = [model.bos_id, *prompt]
    state = model.initial_state(1)
    for x in seq:
        logprobs, state = model.step(state, torch.tensor([x]))
    out = {}

    def walk(prefix, logprobs, state, prob):
        if len(prefix) == max_length:
            if oracle.matches(prefix):
                out[(prefix, False)] = out.get((prefix, False), 0) + prob
            return
        allowed = [v for v in oracle.allowed(prefix) if logprobs[v] > -math.inf]
        if not allowed:
            if model.eos_id is None and oracle.matches(prefix):
                out[(prefix, False)] = prob
            return
        weights = torch.tensor([logprobs[v] for v in allowed], dtype=torch.float64) / temperature
        for v, p in zip(allowed, torch.softmax(weights, 0).tolist(), strict=True):
            if v == model.eos_id:
                out[(prefix, True)] = prob * p
                continue
            nxt, nstate = model.step(state, torch.tensor([v]))
            walk((*prefix, v), nxt[0].tolist(), nstate, prob * p)

    walk((), logprobs[0].tolist(), state, 1.0)
    return out


def within_sampling_error(counts, probs, n):
    """Every output's count within 5 standard deviations (+1) of n p; nothing impossible drawn."""
    assert set(counts) <= set(probs), set(counts) - set(probs)
    for key, p in probs.items():
        assert abs(counts.get(key, 0) - n * p) <= 5 * math.sqrt(n * p * max(0.0, 1 - p)) + 1, (
            key,
            counts.get(key),
            n * p,
        )


@pytest.mark.parametrize(
    ("pattern", "temperature", "draft_kind"),
    [(None, 1.0, "random"), (None, 0.7, "adversarial"), (None, 1.0, "lookup"), ("(a|ab)+", 1.0, "random")],
)
def test_sampling_keeps_the_targets_distribution(pattern, temperature, draft_kind):
    vocab = vocab_of(["a", "b", "ab"])
    target = HistoryLM(len(vocab), seed=3, bos_id=1, eos_id=1, sharpness=1.0, vocab=vocab)
    other = HistoryLM(len(vocab), seed=9, bos_id=1, eos_id=1, sharpness=2.0, vocab=vocab)
    probs = sampling_distribution(target, [2], 3, pattern, temperature)
    draft = drafts(target, other)[draft_kind]
    n = 1500
    settings = decodekit.GenerationConfig(
        strategy="sample", max_length=3, constraint=pattern, temperature=temperature, num_samples=n, seed=0,
        num_assistant_tokens=2,
    )  # fmt: skip
    got, search = speculative_generate(
        target, [[2, 3, 2]] if draft_kind == "lookup" else [[2]], settings, draft
    )
    if draft_kind == "lookup":  # the prompt differs: its own distribution
        probs = sampling_distribution(target, [2, 3, 2], 3, pattern, temperature)
    counts = collections.Counter((h.tokens, h.finished) for h in got[0])
    unmatched = n - len(got[0])
    # under a constraint a row may end unmatched (no output): its share is the missing mass
    probs = {**probs, "unmatched": max(0.0, 1 - sum(probs.values()))}
    within_sampling_error({**counts, "unmatched": unmatched}, probs, n)
    assert search.drafted > 0 and 0 < search.kept < search.drafted  # the draft was used and rejected


def test_the_distribution_check_can_fail():
    """Taking every draft token (no rejection) would give the draft's distribution: far outside."""
    vocab = vocab_of(["a", "b", "ab"])
    target = HistoryLM(len(vocab), seed=3, bos_id=1, eos_id=1, sharpness=1.0, vocab=vocab)
    other = HistoryLM(len(vocab), seed=9, bos_id=1, eos_id=1, sharpness=2.0, vocab=vocab)
    p, q = (sampling_distribution(m, [2], 3, None, 1.0) for m in (target, other))
    n = 1500
    assert any(abs(n * q.get(k, 0) - n * v) > 5 * math.sqrt(n * v * (1 - v)) + 1 for k, v in p.items())


def test_generate_takes_transformers_names():
    target, other = model_of("lstm"), model_of("ngram-kn3")
    want = decodekit.generate(target, [2, 3], max_new_tokens=10)
    assert decodekit.generate(target, [2, 3], max_new_tokens=10, assistant_model=other) == want
    assert (
        decodekit.generate(target, [2, 3], max_new_tokens=10, assistant_model=other, num_assistant_tokens=2)
        == want
    )
    assert decodekit.generate(target, [2, 3, 2], max_new_tokens=10, prompt_lookup_num_tokens=3) == (
        decodekit.generate(target, [2, 3, 2], max_new_tokens=10)
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(assistant_model="lstm"), "step-protocol model"),
        (dict(num_beams=3, prompt_lookup_num_tokens=2), "runs greedy or sample"),
        (dict(num_assistant_tokens=0, prompt_lookup_num_tokens=2), "num_assistant_tokens"),
        (dict(prompt_lookup_num_tokens=2, assistant_model=SparseLM(7)), "not both"),
        (dict(assistant_model=SparseLM(5)), "a draft must share"),
        (dict(prompt_lookup_num_tokens=2, prompt=[2, 99]), "outside the vocabulary"),
        (dict(prompt_lookup_num_tokens=2, logprobs=3), "not reported under speculative"),
    ],
)
def test_bad_settings_are_one_line_errors(options, message):
    prompt = options.pop("prompt", [2])
    with pytest.raises(ConfigError, match=message):
        decodekit.generate(model_of("lstm"), prompt, max_new_tokens=4, **options)


def test_sampling_under_speculation_takes_the_newer_samplers():
    """typical_p / epsilon / eta filter the speculative sampler's distributions as the plain
    sampler's: an epsilon cutoff that keeps only the most probable token samples the greedy text."""
    target = model_of("lstm")
    greedy = decodekit.generate(target, [2, 3, 2], max_new_tokens=8)
    for draft in (dict(prompt_lookup_num_tokens=2), dict(assistant_model=model_of("ngram-kn3"))):
        got = decodekit.generate(
            target, [2, 3, 2], max_new_tokens=8, do_sample=True, epsilon_cutoff=0.999, seed=1, **draft
        )
        assert [h.tokens for h in got] == [h.tokens for h in greedy], draft
