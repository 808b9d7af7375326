import math

import pytest
import regex
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import decodekit
from decodekit.errors import ConstraintError
from decodekit.vocab import Vocab
from tests.fakes import HistoryLM, TableLM, all_completions, score

TOKENS = ["a", "b", "ab", "ba", "bb"]


def small_vocab(tokens=TOKENS):
    return Vocab(["<unk>", "<eos>", *tokens], separator="", eos="<eos>", unk="<unk>")


def regexes():
    atom = st.sampled_from(["a", "b", ".", "[ab]", "(ab)", "b?"])
    return st.recursive(
        atom,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda t: t[0] + t[1]),
            st.tuples(inner, inner).map(lambda t: f"({t[0]}|{t[1]})"),
            inner.map(lambda r: f"({r})*"),
            st.tuples(inner, st.integers(0, 2), st.integers(0, 2)).map(
                lambda t: f"({t[0]}){{{min(t[1], t[2])},{max(t[1], t[2])}}}"
            ),
        ),
        max_leaves=5,
    )


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
