"""Mixtures of step-protocol models: exact mixing, states per component, EM weights."""

from __future__ import annotations

import math

import pytest
import torch

import decodekit
from decodekit.models.kneser_ney import train_kneser_ney
from decodekit.models.mixture import MixtureLM, fit_weights
from decodekit.models.ngram import NgramLM
from decodekit.models.scoring import stream_logprobs
from tests.support.fakes import HistoryLM, TableLM, all_completions, score, word_vocab


def test_step_is_the_weighted_sum_of_probabilities():
    a, b = HistoryLM(5, seed=1), HistoryLM(5, seed=2)
    mix = MixtureLM([a, b], [1.0, 3.0])  # normalised to 0.25 / 0.75
    sa, sb, sm = a.initial_state(3), b.initial_state(3), mix.initial_state(3)
    for tokens in ([0, 0, 0], [1, 2, 3], [4, 4, 1]):
        t = torch.tensor(tokens)
        (la, sa), (lb, sb), (lm, sm) = a.step(sa, t), b.step(sb, t), mix.step(sm, t)
        want = torch.log(0.25 * la.double().exp() + 0.75 * lb.double().exp())
        assert torch.allclose(lm.double(), want, atol=1e-6)
        assert torch.allclose(lm.double().exp().sum(1), torch.ones(3, dtype=torch.double), atol=1e-5)


def test_beam_search_over_a_mixture_equals_exhaustive_search():
    mix = MixtureLM([HistoryLM(3, seed=7), HistoryLM(3, seed=8)], [0.3, 0.7])
    hyps = decodekit.beam_search(mix, [1], 3**4, 3, length_penalty=0.0, n_best=3)
    best = sorted(all_completions(mix, [1], 3), key=lambda c: -score(c[1], c[2], 0.0))[:3]
    assert [h.tokens for h in hyps] == [c[0] for c in best]
    assert [h.logprob for h in hyps] == pytest.approx([c[1] for c in best], abs=1e-4)


def test_mismatched_components_are_refused():
    with pytest.raises(ValueError, match="differ in vocab_size: component 0 has 4, component 1 has 5"):
        MixtureLM([HistoryLM(4), HistoryLM(5)])
    with pytest.raises(ValueError, match="differ in eos_id"):
        MixtureLM([HistoryLM(4), HistoryLM(4, eos_id=None)])
    va, vb = word_vocab(["x", "y"]), word_vocab(["x", "z"])
    ta = TableLM(torch.zeros(4, 4), vocab=va)
    tb = TableLM(torch.zeros(4, 4), vocab=vb)
    with pytest.raises(ValueError, match=r"different vocabularies: component 0 vs 1 .*\(3, 'y', 'z'\)"):
        MixtureLM([ta, tb])
    with pytest.raises(ValueError, match="non-negative weights"):
        MixtureLM([ta, ta], [0.5, -0.1])
    with pytest.raises(ValueError, match="at least one component"):
        MixtureLM([])


def test_em_is_monotone_and_recovers_a_known_weight():
    gen = torch.Generator().manual_seed(0)
    V, T, lam = 20, 20_000, 0.3
    p1 = torch.softmax(2 * torch.randn(V, generator=gen, dtype=torch.float64), 0)
    p2 = torch.softmax(2 * torch.randn(V, generator=gen, dtype=torch.float64), 0)
    from_first = torch.rand(T, generator=gen, dtype=torch.float64) < lam
    tokens = torch.where(
        from_first,
        torch.multinomial(p1, T, replacement=True, generator=gen),
        torch.multinomial(p2, T, replacement=True, generator=gen),
    )
    lp = torch.stack([p1.log()[tokens], p2.log()[tokens]])  # [2, T]
    weights, history = fit_weights(lp, init=torch.tensor([0.9, 0.1]), max_iter=200, tol=1e-10)
    assert all(b >= a - 1e-12 for a, b in zip(history, history[1:])) and history[-1] > history[0]
    # the maximum-likelihood weight of this sample is within a few standard errors of 0.3
    assert abs(float(weights[0]) - lam) < 0.02
    grid = torch.linspace(0.01, 0.99, 99, dtype=torch.float64)
    ll = torch.logsumexp(torch.stack([grid.log(), (1 - grid).log()]).unsqueeze(2) + lp.unsqueeze(1), 0)
    best = float(grid[ll.mean(1).argmax()])
    assert abs(float(weights[0]) - best) <= 0.01 + 1e-9


def test_fit_on_ngram_components_improves_heldout_likelihood():
    vocab = word_vocab(["a", "b", "c", "d"])
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 6, (4000,), generator=gen)
    uni = train_kneser_ney(ids[:3000], 1, 6, 1, vocab=vocab, discounts=[(0.5, 1.0, 1.5)])
    tri = train_kneser_ney(ids[:3000], 3, 6, 1, vocab=vocab, discounts=[(0.5, 1.0, 1.5)] * 3)
    mix = MixtureLM([uni, tri])
    history = mix.fit([ids[3000:]])
    assert history[-1] >= history[0]
    held = ids[3000:]
    mixed = torch.logsumexp(
        torch.stack([stream_logprobs(m, held) for m in (uni, tri)]) + mix.weights.log().float().view(2, 1), 0
    )
    assert math.isclose(float(mixed.double().mean()), history[-1], rel_tol=1e-5)
    assert isinstance(mix.models[1], NgramLM) and mix.vocab == vocab


def test_stream_logprobs_steps_models_without_score():
    model = HistoryLM(4, seed=3)
    ids = torch.tensor([2, 3, 1, 0, 2])
    lp = stream_logprobs(model, ids)
    state, want = model.initial_state(1), []
    out, state = model.step(state, torch.tensor([0]))
    for x in ids.tolist():
        want.append(float(out[0, x]))
        out, state = model.step(state, torch.tensor([x]))
    assert lp.tolist() == pytest.approx(want, abs=1e-6)
