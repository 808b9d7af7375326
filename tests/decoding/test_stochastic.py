"""Stochastic beam search against the Gumbel-top-k theorem: over every sequence of a tiny model,
the probability of each k-subset under sampling without replacement (sum over its orders of
prod p(y_i) / (1 - p(y_1) - ... - p(y_{i-1}))) equals its frequency over 10^4 searches, batched
as 10^4 prompts of one search (each prompt draws its own Gumbels). The 10^5-run version:
benchmarks/verify_stochastic_beam.py."""

from __future__ import annotations

import collections
import itertools
import math

import pytest
import regex
import torch

from decodekit import GenerationConfig, compile_regex, generate
from decodekit.decoding.stochastic import log1mexp, truncated_gumbel
from decodekit.errors import ConfigError
from tests.support.fakes import HistoryLM, TableLM, char_vocab

RUNS = 10_000
# Per subset |frequency - p| <= Z sd: P(any of <= 105 cells beyond) < 105 * 2 * Phi(-4.5) ~ 1e-3
# for a correct search (seeded: it passes or fails the same way each run); Gumbels not truncated
# to their parent's key (the classic mistake) land 7.6 sd off in the first test, past 4.5 in the second.
Z = 4.5


def leaves(model, prompt, max_length, automaton=None, temperature=1.0):
    """Every output of sampling and its probability: {(tokens, finished): p}, by walking the tree
    of the distribution sampled from (the model's tempered log-probabilities, masked by the
    constraint and renormalised at each step)."""
    out = {}

    def walk(tokens, p, state):
        if len(tokens) == max_length:
            if automaton is None or bool(automaton.is_accepting(torch.tensor([state]))[0]):
                out[(tokens, False)] = p
            return
        seq = torch.tensor([[model.bos_id, *prompt, *tokens]])
        lp, _ = model.step(*_through(model, seq))
        if automaton is not None:
            lp = automaton.mask(lp, torch.tensor([state]), max_length - len(tokens))
        dist = torch.softmax(lp.double()[0] / temperature, -1).tolist()
        for v, q in enumerate(dist):
            if q > 0:
                nxt = (
                    None
                    if automaton is None
                    else int(automaton.step(torch.tensor([state]), torch.tensor([v]))[0])
                )
                if v == model.eos_id:
                    out[(tokens, True)] = p * q
                else:
                    walk((*tokens, v), p * q, nxt)

    walk((), 1.0, None if automaton is None else automaton.initial)
    return out


def _through(model, seq):
    state = model.initial_state(1)
    for t in seq[0, :-1]:
        _, state = model.step(state, t.view(1))
    return state, seq[0, -1:]


def subset_probabilities(p: dict, k: int) -> dict:
    """P(sample without replacement of size k = S) for every S, by summing over orders."""
    out = collections.Counter()
    for order in itertools.permutations(p, k):
        prob, left = 1.0, 1.0
        for y in order:
            prob, left = prob * p[y] / left, left - p[y]
        out[frozenset(order)] += prob
    return out


def check_frequencies(results, exact: dict) -> None:
    freq = collections.Counter(frozenset((h.tokens, h.finished) for h in hyps) for hyps in results)
    assert set(freq) <= set(exact)
    for subset, p in exact.items():
        sd = math.sqrt(p * (1 - p) / RUNS)
        # + 3 counts: for a subset expected far less than once the normal bound is meaningless
        assert abs(freq[subset] / RUNS - p) <= Z * sd + 3 / RUNS, (subset, freq[subset] / RUNS, p)


def test_k_subsets_have_the_gumbel_top_k_frequencies_and_the_estimator_is_unbiased():
    model = TableLM(torch.tensor([[0.0, 1.0, 0.5], [0.3, -0.5, 1.2], [1.0, 0.2, -1.0]]))
    p = leaves(model, [1], 3)  # 7 sequences ending in EOS, 8 cut at max_length
    assert len(p) == 15 and sum(p.values()) == pytest.approx(1.0)
    config = GenerationConfig(strategy="stochastic-beam", beam_size=2, max_length=3, seed=1)
    results = generate(model, [[1]] * RUNS, config)
    assert all(len(hyps) == 2 and len({h.tokens for h in hyps}) == 2 for hyps in results)
    check_frequencies(results, subset_probabilities(p, 2))
    # Kool et al.'s estimator: sum over the sample of p(y) / q(y) f(y) has expectation E_p[f]
    f = {y: len(y[0]) + 2.0 * y[1] for y in p}
    weight = [[math.exp(h.sample_logprob) / h.inclusion_probability for h in hyps] for hyps in results]
    per_run = [
        sum(w * f[(h.tokens, h.finished)] for w, h in zip(ws, hyps)) for ws, hyps in zip(weight, results)
    ]
    mean = sum(per_run) / RUNS
    sd = math.sqrt(sum((x - mean) ** 2 for x in per_run) / (RUNS - 1) / RUNS)
    assert abs(mean - sum(p[y] * f[y] for y in p)) <= Z * sd
    for hyps in results[:50]:  # at temperature 1 without a constraint: the model's distribution
        for h in hyps:
            assert h.sample_logprob == pytest.approx(h.logprob, abs=1e-5)
            assert h.score >= hyps[-1].score and 0 < h.inclusion_probability <= 1


def test_under_a_constraint_and_a_temperature_it_samples_the_masked_renormalised_distribution():
    vocab = char_vocab("ab")  # <unk> <eos> a b
    table = torch.randn(len(vocab), len(vocab), generator=torch.Generator().manual_seed(4))
    model = TableLM(table, bos_id=vocab.eos_id, eos_id=vocab.eos_id)  # a bigram model: fast at 10^4 rows
    pattern = "a*b?a?"
    automaton = compile_regex(pattern, vocab.surfaces(), vocab.eos_id)
    p = leaves(model, [2], 3, automaton, temperature=0.7)
    assert 6 <= len(p) <= 10 and sum(p.values()) == pytest.approx(1.0)
    config = GenerationConfig(
        strategy="stochastic-beam", beam_size=3, max_length=3, seed=7, temperature=0.7, constraint=automaton
    )
    results = generate(model, [[2]] * RUNS, config)
    for hyps in results[:200]:
        for h in hyps:
            assert regex.fullmatch(pattern, vocab.decode(h.tokens))
    check_frequencies(results, subset_probabilities(p, 3))
    h = results[0][0]  # the probability it was sampled with, and the model's own
    assert h.sample_logprob == pytest.approx(math.log(p[(h.tokens, h.finished)]), abs=1e-4)


def test_when_k_covers_the_support_every_sequence_comes_once_with_inclusion_one():
    model = TableLM(torch.tensor([[0.0, 1.0, 0.5], [0.3, -0.5, 1.2], [1.0, 0.2, -1.0]]))
    p = leaves(model, [1], 1)  # EOS, then (1,) and (2,) cut at max_length
    config = GenerationConfig(strategy="stochastic-beam", beam_size=5, max_length=1, seed=0)
    hyps = generate(model, [[1]], config)[0]
    assert {(h.tokens, h.finished) for h in hyps} == set(p) and len(hyps) == 3
    assert all(h.inclusion_probability == 1.0 for h in hyps)
    assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def test_a_seed_gives_the_same_sample():
    model = HistoryLM(5, seed=3)
    config = GenerationConfig(strategy="stochastic-beam", beam_size=3, max_length=4, seed=12)
    assert generate(model, [[1], [2]], config) == generate(model, [[1], [2]], config)


def test_the_stable_truncated_gumbel_equals_the_direct_formula_and_keeps_the_maximum():
    g = torch.Generator().manual_seed(0)
    perturbed = torch.randn(64, 5, generator=g, dtype=torch.float64) * 3
    top = perturbed.amax(1, keepdim=True)
    parent = top + torch.rand(64, 1, generator=g, dtype=torch.float64) * 4 - 2
    direct = -torch.log(torch.exp(-parent) - torch.exp(-top) + torch.exp(-perturbed))
    stable = truncated_gumbel(parent, perturbed, top)
    assert torch.allclose(stable, direct, atol=1e-9)
    assert torch.equal(stable.amax(1, keepdim=True), parent)  # the children's maximum is the parent's key
    points = [-1e-20, -0.1, -0.7, -5.0, -50.0]  # log(1 - exp(a)), accurate at both ends
    want = torch.tensor(
        [math.log(-math.expm1(a)) if a > -1 else math.log1p(-math.exp(a)) for a in points],
        dtype=torch.float64,
    )
    assert torch.allclose(log1mexp(torch.tensor(points, dtype=torch.float64)), want, rtol=1e-12)


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ConfigError, match="beam_size"):
        generate(HistoryLM(3), [[1]], GenerationConfig(strategy="stochastic-beam", beam_size=0))
    for strategy in ("stochastic-beam", "mbr"):  # not silently 1, as for searches without a temperature
        with pytest.raises(ConfigError, match="temperature must be > 0"):
            GenerationConfig(strategy=strategy, temperature=0)
