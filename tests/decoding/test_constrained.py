import math

import pytest
import regex
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import decodekit
from decodekit.errors import ConstraintError
from decodekit.vocab import Vocab
from tests.support.exhaustive import Oracle, SparseLM, assert_n_best, regexes
from tests.support.fakes import HistoryLM, TableLM, all_completions, char_vocab, score

TOKENS = ["a", "b", "ab", "ba", "bb"]


def small_vocab(tokens=TOKENS):
    return Vocab(["<unk>", "<eos>", *tokens], separator="", eos="<eos>", unk="<unk>")


def text(vocab, tokens):
    return vocab.decode(tokens)


def matching_completions(model, prompt, pattern, max_length):
    """Completions whose text fully matches; tokens without surface text (<unk>) never match."""
    surfaces = model.vocab.surfaces()
    return [
        c
        for c in all_completions(model, prompt, max_length)
        if all(surfaces[x] is not None for x in c[0]) and regex.fullmatch(pattern, text(model.vocab, c[0]))
    ]


def spellable(model, pattern, max_length):
    try:
        a = decodekit.compile_regex(pattern, model.vocab.surfaces(), model.eos_id)
    except ConstraintError:
        return False
    return int(a.min_tokens_to_accept[0]) <= max_length


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pattern=regexes(),
    seed=st.integers(0, 1000),
    max_length=st.integers(1, 4),
    strategy=st.sampled_from(["greedy", "sample", "beam", "grid"]),
    eos=st.booleans(),
)
def test_every_constrained_output_fully_matches(pattern, seed, max_length, strategy, eos):
    vocab = small_vocab()
    model = HistoryLM(len(vocab), seed=seed, vocab=vocab, bos_id=1, eos_id=1 if eos else None)
    if not spellable(model, pattern, max_length):
        with pytest.raises(ConstraintError):
            decodekit.greedy(model, [2], max_length, constraint=pattern)
        return
    if strategy == "greedy":
        hyps = decodekit.greedy(model, [2], max_length, constraint=pattern)
    elif strategy == "sample":
        hyps = decodekit.sample(model, [2], max_length, generator=seed, num_samples=3, constraint=pattern)
    elif strategy == "beam":
        hyps = decodekit.beam_search(model, [2], 3, max_length, n_best=3, constraint=pattern)
    else:
        hyps = decodekit.constrained_beam_search(model, [2], pattern, 2, max_length, n_best=3)
    assert hyps, "a match exists within max_length, so every strategy must return one"
    for h in hyps:
        assert regex.fullmatch(pattern, text(vocab, h.tokens)), (pattern, h)
        assert len(h.tokens) + h.finished <= max_length


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pattern=regexes(),
    seed=st.integers(0, 1000),
    max_length=st.integers(1, 3),
    alpha=st.sampled_from([0.0, 1.0]),
    n_best=st.integers(1, 3),
)
def test_wide_constrained_beam_equals_exhaustive_search(pattern, seed, max_length, alpha, n_best):
    vocab = small_vocab(["a", "b", "ab"])
    model = HistoryLM(len(vocab), seed=seed, vocab=vocab, bos_id=1, eos_id=1)
    if not spellable(model, pattern, max_length):
        return
    width = len(vocab) ** max_length
    hyps = decodekit.constrained_beam_search(model, [2], pattern, width, max_length, alpha, n_best)
    expected = sorted(
        matching_completions(model, [2], pattern, max_length), key=lambda c: -score(c[1], c[2], alpha)
    )[:n_best]
    assert [(h.tokens, h.finished) for h in hyps] == [(c[0], c[3]) for c in expected]
    for h, c in zip(hyps, expected):
        assert h.logprob == pytest.approx(c[1], abs=1e-4)


def dead_end_model():
    """Greedy masking walks into a trap: 'a' is likely first, but after 'a' the only way to
    satisfy the regex is an improbable token; 'b' first leads to a likely match."""
    vocab = Vocab(["<unk>", "<eos>", "a", "b", "x", "y"], separator="", eos="<eos>", unk="<unk>")
    p = torch.full((6, 6), 1e-9)
    p[1, 2], p[1, 3] = 0.6, 0.4  # after BOS: a .6, b .4
    p[2, 4], p[2, 5] = 0.999, 0.001  # after a: x (forbidden by the regex) .999, y .001
    p[3, 5] = 0.99  # after b: y .99
    p[5, 1] = 0.99  # after y: EOS
    p[4, 1] = 0.99
    return TableLM(torch.log(p), bos_id=1, eos_id=1, vocab=vocab)


def test_anderson_search_avoids_the_dead_end_that_masked_greedy_walks_into():
    model = dead_end_model()
    greedy = decodekit.greedy(model, [], 5, constraint="(a|b)y")[0]
    grid = decodekit.constrained_beam_search(model, [], "(a|b)y", 2, 5)[0]
    assert model.vocab.decode(greedy.tokens) == "ay" and model.vocab.decode(grid.tokens) == "by"
    assert grid.logprob > greedy.logprob + 3
    assert grid.logprob == pytest.approx(math.log(0.4), abs=1e-3)  # rows are renormalised: b, y, EOS


def test_forced_transition_keeps_improbable_tokens():
    # 'b' is astronomically unlikely at every step but required: a plain beam never finds it,
    # the grid search must.
    vocab = Vocab(["<unk>", "<eos>", "a", "b"], separator="", eos="<eos>", unk="<unk>")
    p = torch.tensor(
        [[1, 1, 1, 1], [1e-9, 1e-9, 1.0, 1e-12], [1e-9, 0.3, 0.7, 1e-12], [1e-9, 0.3, 0.7, 1e-12]]
    )
    model = TableLM(torch.log(p), bos_id=1, eos_id=1, vocab=vocab)
    hyps = decodekit.constrained_beam_search(model, [], ".*b.*", 1, 6)
    assert hyps and "b" in vocab.decode(hyps[0].tokens)


def test_batched_grid_equals_one_at_a_time():
    vocab = small_vocab()
    model = HistoryLM(len(vocab), seed=5, vocab=vocab)
    prompts = [[2], [3, 4], [], [2]]
    batched = decodekit.constrained_beam_search(model, prompts, "(a|b)*ab(a|b)*", 2, 5, n_best=2)
    assert batched == [
        decodekit.constrained_beam_search(model, p, "(a|b)*ab(a|b)*", 2, 5, n_best=2) for p in prompts
    ]


def test_unreachable_within_max_length_is_reported_before_decoding():
    model = HistoryLM(len(small_vocab()), vocab=small_vocab())
    with pytest.raises(ConstraintError, match="max_length"):
        decodekit.constrained_beam_search(model, [2], "a{10}", 2, 3)


ALPHAS = [-1.0, -0.5, 0.0, 0.5, 1.0, 2.0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pattern=regexes(),
    seed=st.integers(0, 10_000),
    max_length=st.integers(0, 3),
    alpha=st.sampled_from(ALPHAS),
    n_best=st.integers(1, 3),
    eos=st.booleans(),
    zeros=st.sampled_from([0.0, 0.3, 0.6]),
    search=st.sampled_from(["masked", "anderson"]),
)
def test_wide_constrained_searches_equal_exhaustive_search_with_zero_probability_tokens(
    pattern, seed, max_length, alpha, n_best, eos, zeros, search
):
    """Masked beam search and Anderson search with a beam wider than the set of sequences return
    the true n best matches: every sign of alpha, with and without EOS, and with tokens of
    probability 0 (an empty list exactly when no match has non-zero probability)."""
    vocab = small_vocab(["a", "b", "ab"])
    model = SparseLM(len(vocab), seed, zeros, bos_id=1, eos_id=1 if eos else None, vocab=vocab)
    if not spellable(model, pattern, max_length):
        return
    width = len(vocab) ** max_length  # at least the number of prefixes of any length
    if search == "masked":
        hyps = decodekit.beam_search(model, [2], width, max_length, alpha, n_best, constraint=pattern)
    else:
        hyps = decodekit.constrained_beam_search(model, [2], pattern, width, max_length, alpha, n_best)
    assert_n_best(hyps, Oracle(model, [2], max_length, pattern), alpha, n_best)


# Finite languages with matches of several token lengths (tokens a, b, ab): without EOS each match
# ends unfinished, in an accepting state it cannot leave, at its own length.
SEVERAL_LENGTHS = ["ab", "a|ab", "(ab)?b?", "a(b|ab)?", "(a|b)b?", "aba?", "(ab){1,2}", "b?ab?"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pattern=st.sampled_from(SEVERAL_LENGTHS),
    seed=st.integers(0, 10_000),
    max_length=st.integers(3, 4),
    alpha=st.sampled_from([-2.0, -1.0, -0.5, -0.25]),
    n_best=st.integers(1, 2),
    sharpness=st.sampled_from([1.0, 2.0, 4.0]),
    search=st.sampled_from(["masked", "anderson"]),
)
# Cases the former bound (a completion has at least one more token) got wrong, always run:
@example(pattern="b?ab?", seed=25, max_length=3, alpha=-1.0, n_best=1, sharpness=2.0, search="masked")
@example(pattern="(a|b)b?", seed=5, max_length=3, alpha=-1.0, n_best=1, sharpness=2.0, search="anderson")
@example(pattern="ab", seed=17, max_length=3, alpha=-0.5, n_best=1, sharpness=2.0, search="masked")
@example(pattern="ab", seed=28, max_length=3, alpha=-0.5, n_best=1, sharpness=2.0, search="anderson")
def test_negative_length_penalty_without_eos_equals_exhaustive_search(
    pattern, seed, max_length, alpha, n_best, sharpness, search
):
    """The early-stopping bound under alpha < 0 without EOS: a match found early must not end the
    search while a live hypothesis can still end (at its current length) with a better score."""
    vocab = small_vocab(["a", "b", "ab"])
    model = SparseLM(len(vocab), seed, 0.0, bos_id=1, eos_id=None, vocab=vocab, sharpness=sharpness)
    width = len(vocab) ** max_length
    if search == "masked":
        hyps = decodekit.beam_search(model, [2], width, max_length, alpha, n_best, constraint=pattern)
    else:
        hyps = decodekit.constrained_beam_search(model, [2], pattern, width, max_length, alpha, n_best)
    assert_n_best(hyps, Oracle(model, [2], max_length, pattern), alpha, n_best)


def stuck_early_model():
    """No EOS; over a, b, c the pattern c|ab has two matches: "c" (logprob -2.5) and "ab" (-1.0).
    With alpha = -1 (score = logprob * len) "ab" scores -2.0 and wins, but "c" is complete one
    step earlier: it ends unfinished at length 1, in an accepting state it cannot leave."""
    vocab = char_vocab("abc")  # <unk> <eos> a b c
    p = torch.zeros(5, 5, dtype=torch.float64)
    p[1, 2], p[1, 4] = math.exp(-0.5), math.exp(-2.5)  # after BOS: a, c
    p[1, [0, 1, 3]] = (1 - p[1].sum()) / 3
    p[2, 3] = math.exp(-0.5)  # after a: b
    p[2, [0, 1, 2, 4]] = (1 - p[2].sum()) / 4
    p[[0, 3, 4]] = 0.2
    return TableLM(torch.log(p), bos_id=1, eos_id=None, vocab=vocab)


@pytest.mark.parametrize("search", ["masked", "anderson"])
def test_negative_length_penalty_does_not_stop_before_a_better_longer_match(search):
    # The early-stopping bound used to assume a live hypothesis ends no sooner than one token
    # later; without EOS it may end at its current length, so "c" (found at step 2) made the
    # search stop before "ab" joined the candidates.
    model = stuck_early_model()
    if search == "masked":
        hyps = decodekit.beam_search(model, [], 4, 3, length_penalty=-1.0, constraint="c|ab")
    else:
        hyps = decodekit.constrained_beam_search(model, [], "c|ab", 4, 3, length_penalty=-1.0)
    assert [(model.vocab.decode(h.tokens), h.finished) for h in hyps] == [("ab", False)]
    assert hyps[0].logprob == pytest.approx(-1.0, abs=1e-5) and hyps[0].score == pytest.approx(-2.0, abs=1e-5)


def zero_probability_model(eos: bool):
    """After "a" (probability .6) the pattern a|ab could go on with "b", which has probability
    0: "a" is the match (probability .6 * p(EOS | a)), "ab" has probability 0."""
    vocab = char_vocab("ab")  # <unk> <eos> a b
    p = torch.tensor(
        [[0.25] * 4, [0.1, 0.1, 0.6, 0.2], [0.5, 0.5, 0.0, 0.0], [0.25] * 4], dtype=torch.float64
    )
    if not eos:
        p[2] = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)  # after "a": <unk> only
    return TableLM(torch.log(p), bos_id=1, eos_id=1 if eos else None, vocab=vocab)


@pytest.mark.parametrize("eos", [True, False])
@pytest.mark.parametrize("search", ["masked", "anderson"])
def test_a_match_next_to_zero_probability_tokens_is_found(search, eos):
    model = zero_probability_model(eos)
    if search == "masked":
        hyps = decodekit.beam_search(model, [], 2, 4, constraint="a|ab")
    else:
        hyps = decodekit.constrained_beam_search(model, [], "a|ab", 2, 4)
    assert [(h.tokens, h.finished) for h in hyps] == [((2,), eos)]
    assert hyps[0].logprob == pytest.approx(math.log(0.6 * 0.5 if eos else 0.6), abs=1e-5)


def test_zero_probability_dead_end_needs_a_wider_beam():
    # (a|b)c: "a" (.6) and "b" (.3) reach the same automaton state, but c never follows a. A
    # beam of one per state keeps only "a" and finds nothing; two keep "b" and find "bc". This
    # is the documented limit: exact for a wide enough beam, not for every beam.
    vocab = char_vocab("abc")  # <unk> <eos> a b c
    p = torch.tensor(
        [
            [0.2] * 5,
            [0.0, 0.0, 0.6, 0.3, 0.1],
            [0.5, 0.5, 0.0, 0.0, 0.0],
            [0.0, 0.5, 0.0, 0.0, 0.5],
            [0, 1, 0, 0, 0],
        ],
        dtype=torch.float64,
    )
    model = TableLM(torch.log(p), bos_id=1, eos_id=1, vocab=vocab)
    assert decodekit.constrained_beam_search(model, [], "(a|b)c", 1, 4) == []
    assert decodekit.greedy(model, [], 4, constraint="(a|b)c") == []
    for hyps in (
        decodekit.constrained_beam_search(model, [], "(a|b)c", 2, 4),
        decodekit.beam_search(model, [], 2, 4, constraint="(a|b)c"),
    ):
        assert [(vocab.decode(h.tokens), h.finished) for h in hyps] == [("bc", True)]
        assert hyps[0].logprob == pytest.approx(math.log(0.3 * 0.5), abs=1e-5)
