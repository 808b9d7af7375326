"""Interpolated modified Kneser-Ney: hand-computed values, a dict-based reference implementation
written from Chen & Goodman's formulas, normalisation, perplexity. (The step protocol and stream
scoring: tests/models/test_conformance.py.)"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from decodekit.models.kneser_ney import kn_discounts, train_kneser_ney, train_kneser_ney_on_sentences
from decodekit.models.scoring import stream_logprobs
from decodekit.training import evaluate
from decodekit.vocab import WordVocab

EOS = 1  # WordVocab.build puts <unk> at 0, <eos> at 1


def reference_kn(sentences, n, V, discounts):
    """p(w | history) by the textbook recursion, with dicts; sentences are lists of ids."""
    raw = [Counter() for _ in range(n + 1)]
    for s in sentences:
        seq = [EOS, *s, EOS]
        for t in range(1, len(seq)):
            for k in range(1, min(n, t + 1) + 1):
                raw[k][tuple(seq[t - k + 1 : t + 1])] += 1
    adj = [Counter() for _ in range(n + 1)]
    adj[n] = raw[n]
    for k in range(1, n):
        for g in raw[k + 1]:
            adj[k][g[1:]] += 1
        for g, c in raw[k].items():
            if k > 1 and g[0] == EOS:
                adj[k][g] = c

    def d(k, c):
        return 0.0 if c == 0 else discounts[k - 1][min(c, 3) - 1]

    def prob(h, w):
        k = len(h) + 1
        entries = {g[-1]: c for g, c in adj[k].items() if g[:-1] == h}
        if not entries:
            return prob(h[1:], w)
        total = sum(entries.values())
        gamma = sum(d(k, c) for c in entries.values()) / total
        c = entries.get(w, 0)
        lower = 1.0 / V if k == 1 else prob(h[1:], w)
        return (c - d(k, c)) / total + gamma * lower

    def dist(history):
        h = [EOS, *history]
        h = h[len(h) - 1 - h[::-1].index(EOS) :][-(n - 1) :] if n > 1 else []
        return [prob(tuple(h), w) for w in range(V)]

    return dist


DISC = [(0.5, 0.75, 1.0), (0.4, 0.8, 1.2), (0.3, 0.9, 1.4), (0.6, 1.1, 1.3)]


def test_hand_computed_bigram():
    # <s> a b </s> <s> a a </s> <s> b </s>; ids: <unk>=0 <eos>=1 a=2 b=3
    vocab = WordVocab(["<unk>", "<eos>", "a", "b"])
    m = train_kneser_ney_on_sentences([["a", "b"], ["a", "a"], ["b"]], 2, vocab, discounts=DISC[:2])
    # continuation counts: a <- {<s>, a}, b <- {a, <s>}, </s> <- {b, a}: 2 each, total 6
    p1 = {w: (2 - 0.75) / 6 + (3 * 0.75 / 6) / 4 for w in (1, 2, 3)} | {0: (3 * 0.75 / 6) / 4}
    assert math.isclose(sum(p1.values()), 1.0)
    # context <s>: a x2, b x1 -> disc 0.4 and 0.2, gamma (0.8 + 0.4) / 3 = 0.4
    want_s = [0.4 * p1[0], 0.4 * p1[1], 0.4 + 0.4 * p1[2], 0.2 + 0.4 * p1[3]]
    # context b: </s> x2 -> disc (2 - 0.8) / 2 = 0.6, gamma 0.4
    want_b = [0.4 * p1[0], 0.6 + 0.4 * p1[1], 0.4 * p1[2], 0.4 * p1[3]]
    state = m.initial_state(1)
    lp, state = m.step(state, torch.tensor([m.bos_id]))
    assert torch.allclose(lp[0].exp().double(), torch.tensor(want_s, dtype=torch.double), atol=1e-6)
    lp, _ = m.step(state, torch.tensor([3]))
    assert torch.allclose(lp[0].exp().double(), torch.tensor(want_b, dtype=torch.double), atol=1e-6)


def test_discount_formula():
    a = np.array([1] * 10 + [2] * 5 + [3] * 3 + [4] * 2 + [7])
    d1, d2, d3 = kn_discounts(a, 2)  # Y = 10 / 20
    assert (d1, d2) == pytest.approx((1 - 2 * 0.5 * 5 / 10, 2 - 3 * 0.5 * 3 / 5))
    assert d3 == pytest.approx(3 - 4 * 0.5 * 2 / 3)
    with pytest.warns(UserWarning, match="no valid discounts"):
        assert kn_discounts(np.array([1, 1, 2]), 3) == (0.5, 1.0, 1.5)


sentences_st = st.lists(st.lists(st.integers(2, 5), min_size=0, max_size=7), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(sentences_st, st.integers(1, 4), st.lists(st.integers(1, 5), max_size=6))
def test_matches_reference_and_normalised(sentences, n, history):
    V = 7  # id 6 never occurs: it only gets the uniform share
    ids = [w for s in sentences for w in (*s, EOS)]
    m = train_kneser_ney(ids, n, V, EOS, discounts=DISC[:n])
    ref = reference_kn(sentences, n, V, DISC)
    state = m.initial_state(1)
    lp, state = m.step(state, torch.tensor([EOS]))
    for t in range(len(history) + 1):
        want = torch.tensor(ref(history[:t]), dtype=torch.double)
        assert torch.allclose(lp[0].double().exp(), want, atol=1e-6), (history[:t], lp.exp(), want)
        assert abs(float(lp[0].double().exp().sum()) - 1) < 1e-5
        if t < len(history):
            lp, state = m.step(state, torch.tensor([history[t]]))


def test_perplexity_beats_unigram_and_is_exp_of_mean():
    ids = torch.tensor([2, 3, 4, EOS] * 50)
    m = train_kneser_ney(ids, 3, 6, EOS, discounts=DISC)
    assert evaluate(m, ids).ppl < 1.5
    assert math.isclose(
        evaluate(m, ids).ppl, math.exp(-float(stream_logprobs(m, ids).double().mean())), rel_tol=1e-9
    )


def test_bad_input():
    with pytest.raises(ValueError, match="order must be >= 1"):
        train_kneser_ney([1, 2], 0, 5, EOS)
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 5\)"):
        train_kneser_ney([1, 7], 2, 5, EOS)


def test_without_eos_no_context_reaches_before_the_start():
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 6, (2000,), generator=gen)
    m = train_kneser_ney(ids, 3, 6, None, discounts=DISC[:3])
    assert m.bos_id is None and m.eos_id is None
    lp, state = m.prefill(m.initial_state(2), torch.tensor([[4], [5]]))
    assert state.tolist() == [[-1, 4], [-1, 5]]
    # after one token only the bigram context exists: same as a bigram model's history
    want = m.next_logprobs(torch.tensor([[-1, 4], [-1, 5]]))
    assert torch.equal(lp, want)
    assert not torch.allclose(lp[0], m.next_logprobs(torch.tensor([[0, 4]]))[0])
    assert torch.allclose(lp.double().exp().sum(1), torch.ones(2, dtype=torch.double), atol=1e-6)
    # the first token of the stream is context only: 1999 tokens predicted
    assert stream_logprobs(m, ids).shape == (2000,)
    with pytest.raises(ValueError, match="empty stream"):
        train_kneser_ney([], 2, 6, None)
