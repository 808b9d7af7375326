"""Minimum Bayes risk decoding: the built-in utilities against hand-computed values, the ranking
against a hand-computed expected utility, and the strategy equal to ranking sampling's own
samples (same seed) by the same rule."""

from __future__ import annotations

import pytest

from decodekit import GenerationConfig, Hypothesis, generate, minimum_bayes_risk
from decodekit.decoding.mbr import chrf, exact_match, token_f1
from decodekit.errors import ConfigError
from tests.support.fakes import HistoryLM


def hyp(tokens, logprob=-1.0, text=None):
    return Hypothesis(tuple(tokens), logprob, logprob, True, text=text)


def test_utilities_by_hand():
    a, b = hyp([1, 2, 2, 3]), hyp([2, 2, 4])
    # bags {1, 2, 2, 3} and {2, 2, 4}: overlap 2, P = 2/4, R = 2/3, F1 = 2PR/(P+R) = 4/7
    assert token_f1(a, b) == pytest.approx(4 / 7) and token_f1(b, a) == pytest.approx(4 / 7)
    assert token_f1(hyp([]), hyp([])) == 1.0 and token_f1(hyp([]), hyp([5])) == 0.0
    assert exact_match(a, hyp([1, 2, 2, 3])) == 1.0 and exact_match(a, b) == 0.0


def test_ranking_by_expected_utility_by_hand():
    a, b, c = hyp([1, 2]), hyp([1, 3]), hyp([4, 5])
    # F1: a-b 1/2, a-c 0, b-c 0. E(a) = (1/2 + 0) / 2 = 1/4, E(b) = 1/4, E(c) = 0
    ranked = minimum_bayes_risk([c, a, b], "f1")
    assert [h.tokens for h in ranked] == [(1, 2), (1, 3), (4, 5)]  # ties keep the given order
    assert [h.score for h in ranked] == pytest.approx([0.25, 0.25, 0.0])
    # two copies of c: E(c) = (0 + 0 + 1) / 3 beats E(a) = (1/2 + 0 + 0) / 3
    assert minimum_bayes_risk([a, b, c, c], "exact")[0].tokens == (4, 5)
    # weighted by probability: w = exp(logprob); E(a) = w_b * 1/2 / (w_b + w_c)
    a, b, c = hyp([1, 2], -1.0), hyp([1, 3], -2.0), hyp([4, 5], -0.5)
    weighted = {h.tokens: h.score for h in minimum_bayes_risk([a, b, c], token_f1, weighted=True)}
    wb, wc = 2.718281828459045**-2.0, 2.718281828459045**-0.5
    assert weighted[(1, 2)] == pytest.approx(wb * 0.5 / (wb + wc))
    (alone,) = minimum_bayes_risk([a])
    assert alone.tokens == (1, 2) and alone.score == 0.0


def test_the_strategy_ranks_sampling_s_own_samples():
    model = HistoryLM(5, seed=8)
    common = dict(num_samples=12, max_length=4, seed=5, temperature=1.3)
    samples = generate(model, [[1], [2]], GenerationConfig(strategy="sample", **common))
    for utility in ("f1", "exact", lambda x, y: -abs(len(x.tokens) - len(y.tokens))):
        config = GenerationConfig(strategy="mbr", n_best=3, mbr_utility=utility, **common)
        chosen = generate(model, [[1], [2]], config)
        assert chosen == [minimum_bayes_risk(s, utility)[:3] for s in samples]
        assert all(len(c) == 3 for c in chosen)


def test_chrf_through_sacrebleu():
    sacrebleu = pytest.importorskip("sacrebleu", reason="chrF is the optional extra decodekit[mbr]")
    a, b = hyp([1], text="the cat sat"), hyp([2], text="the cat sits")
    assert chrf(a, b) == pytest.approx(sacrebleu.sentence_chrf("the cat sat", ["the cat sits"]).score / 100)


def test_bad_utilities_are_one_line_errors():
    with pytest.raises(ConfigError, match="mbr_utility"):
        GenerationConfig(strategy="mbr", mbr_utility="bleu")
    try:
        import sacrebleu  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="sacrebleu"):
            generate(HistoryLM(4), [[1]], GenerationConfig(strategy="mbr", num_samples=2, mbr_utility="chrf"))
