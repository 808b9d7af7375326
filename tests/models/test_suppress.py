"""Suppressed(model, ids): transformers' suppress_tokens as a model, honoured by every strategy."""

import math

import pytest
import regex
import torch

import decodekit
from decodekit.errors import DecodekitError
from decodekit.models.suppress import Suppressed
from tests.support.fakes import HistoryLM, all_completions, score, word_vocab

WORDS = ["a", "b", "c", "d"]


def model(seed=0):
    """ids: 0 <unk>, 1 <eos> (also fed first), 2 a, 3 b, 4 c, 5 d."""
    return HistoryLM(len(WORDS) + 2, seed=seed, bos_id=1, eos_id=1, vocab=word_vocab(WORDS))


def test_the_distribution_is_the_model_conditioned_on_never_emitting_them():
    base = model()
    lp, _ = base.step(base.initial_state(2), torch.tensor([1, 3]))
    got, _ = Suppressed(base, [2, 4]).step(base.initial_state(2), torch.tensor([1, 3]))
    assert torch.isneginf(got[:, [2, 4]]).all()
    keep = [0, 1, 3, 5]
    want = lp[:, keep] - torch.logsumexp(lp[:, keep], -1, keepdim=True)
    torch.testing.assert_close(got[:, keep], want)


@pytest.mark.parametrize("alpha", [-0.5, 0.0, 1.0])
def test_beam_search_is_exact_over_the_completions_without_suppressed_tokens(alpha):
    """The best beam output equals exhaustive search over the renormalised model."""
    wrapped = Suppressed(model(seed=3), [0, 2])
    hyps = decodekit.beam_search(wrapped, [3], beam_size=64, max_length=3, length_penalty=alpha, n_best=3)
    outputs = [o for o in all_completions(wrapped, [3], 3) if o[1] > -math.inf]
    best = sorted((score(lp, n, alpha) for _, lp, n, _ in outputs), reverse=True)[:3]
    assert [h.score for h in hyps] == pytest.approx(best, abs=1e-5)
    assert all(not {0, 2} & set(h.tokens) for h in hyps)


def test_every_strategy_avoids_the_suppressed_tokens():
    wrapped = Suppressed(model(seed=5), [0, 2, 3])
    prompts = [[3], [4, 3]]
    outs = [
        *[h for hs in decodekit.greedy(wrapped, prompts, 6) for h in hs],
        *[h for hs in decodekit.beam_search(wrapped, prompts, 3, 6, n_best=3) for h in hs],
        *[h for hs in decodekit.sample(wrapped, prompts, 6, num_samples=4, generator=0) for h in hs],
    ]
    for h in decodekit.constrained_beam_search(wrapped, prompts, r"(c|d)( c| d)*", 2, 6, n_best=2):
        outs += h
        assert all(regex.fullmatch(r"(c|d)( c| d)*", wrapped.vocab.decode(x.tokens)) for x in h)
    assert outs and all(not {0, 2, 3} & set(h.tokens) for h in outs)


def test_mistakes_are_one_line_errors():
    with pytest.raises(DecodekitError, match=r"ids are in \[0, 6\)"):
        Suppressed(model(), [7])
    with pytest.raises(DecodekitError, match="every token is suppressed"):
        Suppressed(model(), range(6))
    wrapped = Suppressed(model(), [0, 2, 3, 4, 5])  # only EOS is left: every output is empty
    only = decodekit.greedy(wrapped, [3], 3)[0]
    assert only.tokens == () and only.finished


def test_a_suppressed_eos_means_the_search_never_ends_early():
    wrapped = Suppressed(model(), [1])
    assert wrapped.eos_id is None
    assert len(decodekit.greedy(wrapped, [3], 5)[0].tokens) == 5
