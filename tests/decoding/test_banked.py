"""Banked constrained beam search against exhaustive enumeration, its narrow-beam guarantee,
its bank filling against a slow reference, and the default choice between it and the grid."""

from __future__ import annotations

import contextlib
import math
import warnings
from unittest import mock

import pytest
import regex
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import decodekit
from decodekit import GenerationConfig, generate
from decodekit.constraints import build, clear_cache
from decodekit.decoding import banked, plan
from decodekit.decoding.banked import banked_beam_search, fill_banks
from decodekit.outputs import SearchTree
from tests.support.exhaustive import (
    ALPHAS,
    Oracle,
    SparseLM,
    assert_n_best,
    regexes,
    small_vocab,
    spellable,
    wide_search_cases,
)
from tests.support.fakes import HistoryLM, TableLM, char_vocab


@contextlib.contextmanager
def banking(lazy: bool):
    """Both ways of banking: the [S, V] bank table of the automaton the plan builds whole, and
    (``lazy``: nothing built whole) the candidates' next states stepped through a lazy automaton;
    the compiled automata are forgotten around the lazy way."""
    if not lazy:
        yield
        return
    with mock.patch.object(build, "WHOLE_ENTRIES", 0):
        clear_cache(vocabularies=False)
        try:
            yield
        finally:
            clear_cache(vocabularies=False)


@pytest.fixture(params=["whole", "lazy"])
def path(request):
    with banking(request.param == "lazy"):
        yield request.param


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**wide_search_cases(), lazy=st.booleans())
def test_wide_banked_search_equals_exhaustive_search(
    pattern, seed, max_length, alpha, n_best, eos, zeros, lazy
):
    """K as wide as the set of sequences: the true n best matches, every sign of alpha, with
    and without EOS and zero-probability tokens ([] exactly when no match has p > 0); ``lazy``:
    banked from the candidates' next states (the masked search's lazy automaton, exact here)."""
    vocab = small_vocab(["a", "b", "ab"])
    model = SparseLM(len(vocab), seed, zeros, bos_id=1, eos_id=1 if eos else None, vocab=vocab)
    if not spellable(model, pattern, max_length):
        return
    width = len(vocab) ** max_length
    with (
        warnings.catch_warnings(),
        banking(lazy),
    ):
        warnings.simplefilter("ignore")  # max_length 0: a beam of 1, fewer than n_best (said)
        hyps = banked_beam_search(model, [2], pattern, width, max_length, alpha, n_best)
    assert_n_best(hyps, Oracle(model, [2], max_length, pattern), alpha, n_best)


@pytest.mark.parametrize("alpha", [-1.0, 0.0, 1.0])
@pytest.mark.parametrize("eos", [True, False])
def test_wide_banked_search_on_both_paths(path, alpha, eos):
    vocab = small_vocab(["a", "b", "ab"])
    pattern = "(a|b)*ab(a|b)*"
    for seed in range(4):
        model = SparseLM(len(vocab), seed, 0.3, bos_id=1, eos_id=1 if eos else None, vocab=vocab)
        hyps = banked_beam_search(model, [2], pattern, len(vocab) ** 3, 3, alpha, 3)
        assert_n_best(hyps, Oracle(model, [2], 3, pattern), alpha, 3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pattern=regexes(),
    seed=st.integers(0, 10_000),
    max_length=st.integers(1, 5),
    beam=st.integers(1, 3),
    alpha=st.sampled_from(ALPHAS),
    eos=st.booleans(),
    lazy=st.booleans(),
)
def test_narrow_banked_search_finds_a_match_without_zero_probability_tokens(
    pattern, seed, max_length, beam, alpha, eos, lazy
):
    """Guarantee (b): every allowed token of p > 0, so any K >= 1 returns a match whenever one
    exists within max_length; every output fully matches and fits."""
    vocab = small_vocab()
    model = HistoryLM(len(vocab), seed=seed, vocab=vocab, bos_id=1, eos_id=1 if eos else None)
    if not spellable(model, pattern, max_length):
        return
    with banking(lazy):
        hyps = banked_beam_search(model, [2], pattern, beam, max_length, alpha, min(2, beam))
    assert hyps, (pattern, max_length, beam)
    for h in hyps:
        assert regex.fullmatch(pattern, vocab.decode(h.tokens)), (pattern, h)
        assert len(h.tokens) + h.finished <= max_length
        assert math.isfinite(h.logprob)


def improbable_word_model():
    """Over a, c, b: "a" and "c" are likely at every step, "b" (what .*b.* needs) unlikely, but
    after "b" EOS is likely. The most probable match is "b" EOS (.05 * .9); a beam of 2 masked by
    the constraint keeps "a" and "c" and meets "b" only where the mask forces it."""
    vocab = char_vocab("acb")  # <unk> <eos> a c b
    p = torch.full((5, 5), 1e-6, dtype=torch.float64)
    for prev in (1, 2, 3):  # after BOS, a, c
        p[prev, 2], p[prev, 3], p[prev, 4], p[prev, 1] = 0.5, 0.44, 0.05, 0.01
    p[4, 1], p[4, 2] = 0.9, 0.1  # after b
    return TableLM(torch.log(p), bos_id=1, eos_id=1, vocab=vocab)


def test_forced_transition_keeps_an_improbable_token_that_reaches_a_closer_bank(path):
    model = improbable_word_model()
    masked = decodekit.beam_search(model, [], 2, 6, 0.0, constraint=".*b.*")[0]
    hyps = banked_beam_search(model, [], ".*b.*", 2, 6, 0.0)
    grid = decodekit.constrained_beam_search(model, [], ".*b.*", 2, 6, 0.0)
    assert (
        [model.vocab.decode(h.tokens) for h in hyps] == ["b"] == [model.vocab.decode(h.tokens) for h in grid]
    )
    assert hyps[0].logprob == pytest.approx(grid[0].logprob, abs=1e-5)
    assert model.vocab.decode(masked.tokens) != "b" and masked.logprob < hyps[0].logprob - 0.5


def reference_fill(value, bank, banks, beam):
    """Round-robin by hand: the r-th best of bank j has priority r * B + j."""
    out = []
    for vals, bks in zip(value.tolist(), bank.tolist()):
        ranked = []
        for j in range(banks):
            members = sorted(
                (i for i in range(len(vals)) if bks[i] == j and vals[i] > -math.inf),
                key=lambda i: (-vals[i], i),
            )
            ranked += [(r * banks + j, i) for r, i in enumerate(members)]
        out.append([vals[i] for _, i in sorted(ranked)[:beam]])
    return out


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    prompts=st.integers(1, 3),
    cands=st.integers(1, 12),
    banks=st.integers(1, 4),
    beam=st.integers(1, 6),
)
def test_fill_banks_equals_round_robin_by_hand(seed, prompts, cands, banks, beam):
    g = torch.Generator().manual_seed(seed)
    value = torch.randn(prompts, cands, generator=g).masked_fill(
        torch.rand(prompts, cands, generator=g) < 0.3, -math.inf
    )
    bank = torch.randint(0, banks + 1, (prompts, cands), generator=g)  # banks: no bank
    keep = fill_banks(value, bank, banks, beam)
    assert keep.shape == (prompts, beam)
    got = value.gather(1, keep.clamp(max=cands - 1)).masked_fill(keep >= cands, -math.inf)
    for row, want in zip(got.tolist(), reference_fill(value, bank, banks, beam)):
        assert [v for v in row if v > -math.inf] == want


def test_each_bank_keeps_its_share():
    # Bank 1 holds the 6 most probable candidates, bank 0 two improbable ones: a width of 4
    # over 2 banks keeps 2 of each (then the rest by round-robin).
    value = torch.tensor([[-9.0, -8.0, -1.0, -1.1, -1.2, -1.3, -1.4, -1.5]])
    bank = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1]])
    assert sorted(fill_banks(value, bank, 2, 4)[0].tolist()) == [0, 1, 2, 3]


def test_batched_equals_one_at_a_time(path):
    vocab = small_vocab()
    model = HistoryLM(len(vocab), seed=5, vocab=vocab)
    prompts = [[2], [3, 4], [], [2]]
    pattern = "(a|b)*ab(a|b)*"
    batched = banked_beam_search(model, prompts, pattern, 3, 6, n_best=2)
    assert batched == [banked_beam_search(model, p, pattern, 3, 6, n_best=2) for p in prompts]


def test_rows_do_not_grow_with_the_automaton():
    vocab = small_vocab()
    model = HistoryLM(len(vocab), seed=1, vocab=vocab)
    pattern = "(a|b)*a(a|b){4}"  # 32 states: the grid has 32 x 3 rows per prompt
    states = decodekit.compile_regex(pattern, vocab.surfaces(), 1).num_states
    tree = SearchTree()
    hyps = banked_beam_search(model, [[2], [3]], pattern, 3, 8, record=tree)
    assert states >= 16 and all(len(step) == 2 * 3 for step in tree.tokens)
    assert all(regex.fullmatch(pattern, vocab.decode(h.tokens)) for hs in hyps for h in hs)


def test_the_default_keeps_the_grid_where_it_fits_and_banks_beyond(monkeypatch):
    vocab = small_vocab()
    model = HistoryLM(len(vocab), seed=2, vocab=vocab)
    config = GenerationConfig(constraint="(a|b)*ab(a|b)*", max_length=6, beam_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert plan.choose(model, config)[0] is config  # small: the grid, silently
        assert generate(model, [2], config) == decodekit.constrained_beam_search(
            model, [2], config.constraint, 2, 6
        )
    monkeypatch.setattr(plan, "GRID_ENTRIES", 10)
    with warnings.catch_warnings():  # the banked search, silently (issue 36 item 8)
        warnings.simplefilter("error")
        chosen = plan.choose(model, config)[0]
        out = generate(model, [2], config)
    assert chosen.search is banked.BANKED
    assert out == banked_beam_search(model, [2], config.constraint, 2, 6)
    named = config.replace(strategy="beam")
    assert plan.choose(model, named)[0] is named  # a named strategy is never replaced
    assert plan.choose(model, GenerationConfig(max_length=6))[0].strategy is None  # unconstrained


def test_without_a_constraint_it_is_beam_search():
    vocab = small_vocab()
    model = HistoryLM(len(vocab), seed=3, vocab=vocab)
    config = GenerationConfig(strategy="banked-beam", beam_size=3, max_length=5, n_best=2)
    assert generate(model, [2], config) == decodekit.beam_search(model, [2], 3, 5, n_best=2)


def test_the_default_counts_the_states_of_a_word_vocabulary(monkeypatch):
    # Words are not single bytes, so the automaton cannot be compiled lazily: it is built to count.
    from decodekit.vocab import WordVocab

    vocab = WordVocab(["<unk>", "<eos>", "dog", "park", "ran", "the"])
    model = TableLM(torch.zeros(6, 6), bos_id=1, eos_id=1, vocab=vocab)
    config = GenerationConfig(constraint=(r".*\bdog\b.*", r".*\bpark\b.*"), max_length=6, beam_size=2)
    states = decodekit.compile_regex(config.constraint, vocab.surfaces(), 1, " ").num_states
    assert plan.choose(model, config)[0] is config
    monkeypatch.setattr(plan, "GRID_ENTRIES", states * 2 * 6)
    assert plan.choose(model, config)[0] is config  # S x K x V at the bound: the grid
    monkeypatch.setattr(plan, "GRID_ENTRIES", states * 2 * 6 - 1)
    chosen = plan.choose(model, config)[0]  # one entry over: the banked search (silently)
    assert chosen.strategy == "banked-beam"
    hyps = generate(model, [[]], chosen)[0]
    assert hyps and all(w in vocab.decode(hyps[0].tokens).split() for w in ("dog", "park"))


@pytest.mark.parametrize("eos", [True, False])
def test_more_banks_than_are_masked_at_once(eos):
    # "a[ab]{4}b" needs 6 tokens: 7 banks, masked BANK_GROUP = 4 at a time.
    vocab = small_vocab(["a", "b"])
    pattern = "a[ab]{4}b"
    for seed in range(3):
        model = SparseLM(len(vocab), seed, 0.2, bos_id=1, eos_id=1 if eos else None, vocab=vocab)
        automaton = decodekit.compile_regex(pattern, vocab.surfaces(), model.eos_id)
        assert banked.bank_count(automaton, 64) == 7 > banked.BANK_GROUP
        hyps = banked_beam_search(model, [2], pattern, 64, 7, 1.0, 2)
        assert_n_best(hyps, Oracle(model, [2], 7, pattern), 1.0, 2)


@pytest.mark.parametrize("strategy", ["banked-beam", None])
def test_banked_search_over_an_expression_of_the_derivative_engine(strategy):
    """Issues 35 and 37: an expression with ``&`` / ``~`` compiles to the derivative engine,
    whose ``min_tokens`` flattened the banked search's [P, 2K] next states (a shape RuntimeError
    at the first step); the default strategy given the compiled automaton too."""
    from decodekit.constraints import Pattern

    vocab = char_vocab("abc")
    expr = Pattern("[a-c]{1,4}") & ~Pattern(".*cc.*")
    for seed in range(3):
        model = SparseLM(len(vocab), seed, 0.2, bos_id=1, eos_id=1, vocab=vocab)
        compiled = decodekit.compile_regex(expr, vocab.surfaces(), 1, lazy="masked")
        for constraint in (expr, compiled):
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                hyps = decodekit.generate(
                    model, [2], constraint=constraint, strategy=strategy, beam_size=2, max_length=4
                )
            assert not any("inf" in str(w.message) for w in said), [str(w.message) for w in said]
            assert hyps and all(
                regex.fullmatch("[a-c]{1,4}", vocab.decode(h.tokens)) and "cc" not in vocab.decode(h.tokens)
                for h in hyps
            )
