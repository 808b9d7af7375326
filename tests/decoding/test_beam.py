import math
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import decodekit
from decodekit.errors import DecodekitError
from tests.support.exhaustive import Oracle, SparseLM, assert_n_best
from tests.support.fakes import HistoryLM, TableLM, all_completions, score


def exhaustive_best(model, prompt, max_length, alpha, n):
    comps = all_completions(model, prompt, max_length)
    comps.sort(key=lambda c: -score(c[1], c[2], alpha))
    return comps[:n]


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    vocab=st.integers(2, 3),
    max_length=st.integers(0, 4),
    alpha=st.sampled_from([0.0, 0.5, 1.0, 2.0, -0.5]),
    n_best=st.integers(1, 4),
)
def test_full_width_beam_equals_exhaustive_search(seed, vocab, max_length, alpha, n_best):
    model = HistoryLM(vocab, seed=seed)
    width = vocab ** (max_length + 1)  # wider than the number of sequences
    hyps = decodekit.beam_search(model, [1], width, max_length, length_penalty=alpha, n_best=n_best)
    expected = exhaustive_best(model, [1], max_length, alpha, n_best)
    assert len(hyps) == len(expected)
    for h, (toks, lp, length, finished) in zip(hyps, expected):
        assert h.tokens == toks
        assert h.finished == finished
        assert h.logprob == pytest.approx(lp, abs=1e-4)
        assert h.score == pytest.approx(score(lp, length, alpha), abs=1e-4)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    vocab=st.integers(2, 4),
    max_length=st.integers(0, 4),
    alpha=st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0]),
    n_best=st.integers(1, 4),
    eos=st.booleans(),
    zeros=st.sampled_from([0.0, 0.3, 0.6]),
)
def test_full_width_beam_equals_exhaustive_search_with_zero_probability_tokens(
    seed, vocab, max_length, alpha, n_best, eos, zeros
):
    """Tokens of probability 0 (EOS included) never appear in an output, every sign of alpha,
    with and without EOS."""
    model = SparseLM(vocab, seed, zeros, eos_id=0 if eos else None)
    width = vocab ** (max_length + 1)  # wider than the number of sequences
    hyps = decodekit.beam_search(model, [1], width, max_length, length_penalty=alpha, n_best=n_best)
    assert_n_best(hyps, Oracle(model, [1], max_length), alpha, n_best)


def test_beam_one_equals_greedy_without_eos():
    model = HistoryLM(5, seed=3, eos_id=None)
    g = decodekit.greedy(model, [1, 2], 6)[0]
    b = decodekit.beam_search(model, [1, 2], 1, 6, length_penalty=0.0)[0]
    assert g.tokens == b.tokens and g.logprob == pytest.approx(b.logprob, abs=1e-5)


def test_hand_computed_table():
    # bigram: from BOS(0): 1 w.p. .6, 2 w.p. .4; from 1: EOS .3, 2 .7 ; from 2: EOS .9, 1 .1
    probs = torch.tensor([[0.0, 0.6, 0.4], [0.3, 0.0, 0.7], [0.9, 0.1, 0.0]])
    model = TableLM(torch.log(probs + 1e-30))
    hyps = decodekit.beam_search(model, [], 2, 3, length_penalty=0.0, n_best=3)
    # step 1 ranks: "1 2" .42, "2 EOS" .36, "1 EOS" .18 (rank 2 >= K: not kept), "2 1" .04
    # step 2 ranks: "1 2 EOS" .378, "1 2 1" .042, "2 1 EOS" .012 (rank 2), "2 1 2" .028
    # at max_length the live "1 2 1" (.042) and "2 1 2" (.028) are unfinished candidates.
    assert [h.tokens for h in hyps] == [(1, 2), (2,), (1, 2, 1)]
    assert [h.finished for h in hyps] == [True, True, False]
    assert [h.logprob for h in hyps] == pytest.approx([math.log(p) for p in (0.378, 0.36, 0.042)], abs=1e-5)


def test_batched_equals_one_at_a_time():
    model = HistoryLM(6, seed=11)
    prompts = [[1], [2, 3, 4], [], [5, 5]]
    batched = decodekit.beam_search(model, prompts, 3, 5, n_best=2)
    for p, hyps in zip(prompts, batched):
        assert hyps == decodekit.beam_search(model, p, 3, 5, n_best=2)


def test_stops_early_only_when_no_live_hypothesis_can_win():
    # EOS is certain after the first token: one step suffices, the search must stop.
    probs = torch.tensor([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    model = TableLM(torch.log(probs + 1e-30))
    hyps = decodekit.beam_search(model, [], 2, 50, length_penalty=1.0)
    assert hyps[0].finished and len(hyps[0].tokens) == 1
    assert model.calls <= 3


def test_one_step_call_per_time_step_for_the_whole_batch():
    model = HistoryLM(4, seed=2, eos_id=None)
    decodekit.beam_search(model, [[1], [2], [3]], 4, 5)
    assert model.calls == 2 + 4  # BOS + prompt token for all rows at once, then 4 decoding steps


@pytest.mark.parametrize(
    "kwargs,msg",
    [
        (dict(beam_size=0, max_length=3), "beam_size"),
        (dict(beam_size=2, max_length=-1), "max_length"),
        (dict(beam_size=2, max_length=3, n_best=0), "n_best"),
    ],
)
def test_bad_arguments(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        decodekit.beam_search(HistoryLM(3), [1], **kwargs)


@pytest.mark.parametrize("alpha", [float("nan"), float("inf"), float("-inf"), "1", None, True])
@pytest.mark.parametrize("search", ["beam", "masked", "anderson"])
def test_length_penalty_must_be_finite(alpha, search):
    model = HistoryLM(5, vocab=small_char_vocab())
    with pytest.raises(DecodekitError, match="length_penalty must be a finite number"):
        if search == "anderson":
            decodekit.constrained_beam_search(model, [2], "a*", 2, 3, length_penalty=alpha)
        else:
            constraint = "a*" if search == "masked" else None
            decodekit.beam_search(model, [2], 2, 3, length_penalty=alpha, constraint=constraint)


@pytest.mark.parametrize("alpha", [1000.0, -1000.0, 1e300, -1e300, 5e-324])
def test_extreme_finite_length_penalties_neither_fail_nor_give_nan(alpha):
    # len ** alpha overflows (or underflows to 0) for such alphas; scores stay ordered numbers.
    model = HistoryLM(4, seed=1, sharpness=1.0)
    for n_best in (1, 3):
        hyps = decodekit.beam_search(model, [1], 3, 5, length_penalty=alpha, n_best=n_best)
        assert hyps and all(not math.isnan(h.score) and math.isfinite(h.logprob) for h in hyps)
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def small_char_vocab():
    from tests.support.fakes import char_vocab

    return char_vocab("abc")


def test_prompt_outside_vocabulary():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        decodekit.beam_search(HistoryLM(3), [7], 2, 3)


def test_fewer_hypotheses_than_n_best_beyond_the_beam_are_said():
    """``n_best > beam_size`` is allowed (the pool keeps every hypothesis that ended in a beam:
    test_hand_computed_table), but when a prompt gets fewer than asked, a warning says why."""
    model = SparseLM(5, seed=0, zeros=0.0, bos_id=None, eos_id=0)
    with pytest.warns(UserWarning, match=r"returned 3 of the n_best=5 .*prompt 0.*beam of 2"):
        assert len(decodekit.beam_search(model, [1], 2, 4, n_best=5)) == 3
    with pytest.warns(UserWarning, match="n_best=9"):
        auto = decodekit.compile_regex("[abcd]+", ["<eos>", "a", "b", "c", "d"], 0)
        decodekit.constrained_beam_search(model, [[1], [2]], auto, 2, 3, n_best=9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decodekit.beam_search(model, [1], 2, 4, n_best=2)  # at most the beam: nothing to say
        decodekit.beam_search(model, [1], 3, 4, n_best=3)
