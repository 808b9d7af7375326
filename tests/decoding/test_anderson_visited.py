"""Anderson-style search over the states as they are reached (one beam per visited state) returns
what the dense grid (one beam per state of the whole automaton) returns: the same hypotheses,
scores and order, on the dense automaton and on a lazy one; it runs where the whole automaton is
refused for size, and when the states it reaches no longer fit, the error names them."""

from __future__ import annotations

import math
from unittest import mock

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import decodekit
from decodekit import GenerationConfig, compile_regex, generate
from decodekit.constraints import (
    DerivedTokenAutomaton,
    LazyTokenAutomaton,
    TokenAutomaton,
    build,
    clear_cache,
)
from decodekit.constraints.automata.eagerbytes import EagerBytes
from decodekit.constraints.build import Laziness
from decodekit.constraints.tokens import lift
from decodekit.decoding import plan as planning
from decodekit.decoding.beam import ANDERSON, ANDERSON_GRID, ANDERSON_VISITED
from decodekit.decoding.memory import ResourceError
from decodekit.decoding.search import run
from decodekit.decoding.strategies import Settings
from tests.models.test_conformance import NAMES, VOCAB, model_of
from tests.support.engines import masked_by_lazy_token_automaton
from tests.support.exhaustive import Oracle, SparseLM, assert_n_best, regexes, vocab_of


@pytest.fixture(autouse=True, scope="module")
def _lazy_token_automaton():
    """The masked compiles here build LazyTokenAutomaton, whose own paths these tests exercise
    (the default, the first-visit class over EagerBytes: test_eager_bytes.py, the engine axis)."""
    yield from masked_by_lazy_token_automaton()


ALPHAS = [-1.0, -0.5, 0.0, 0.5, 1.0, 2.0]


def search(model, prompt, constraint, strategy, beam, max_length, alpha=1.0, n_best=1, **kw):
    s = Settings(strategy, max_length, constraint, beam_size=beam, length_penalty=alpha, n_best=n_best)
    return run(planning.plan(model, prompt, s, max_memory=kw.pop("max_memory", None)), **kw)


def same(a, b) -> None:
    """The same hypotheses in the same order, with the same scores (float32 sums: to 1e-5)."""
    assert [(h.tokens, h.finished) for h in a] == [(h.tokens, h.finished) for h in b], (a, b)
    for x, y in zip(a, b):
        assert math.isclose(x.logprob, y.logprob, rel_tol=1e-5, abs_tol=1e-5), (x, y)
        assert math.isclose(x.score, y.score, rel_tol=1e-5, abs_tol=1e-5), (x, y)


def spellable(vocab, pattern, max_length) -> bool:
    automaton = compile_regex(pattern, vocab.surfaces(), vocab.eos_id, vocab.separator)
    return automaton.fits(max_length)


@pytest.mark.filterwarnings("ignore:the search returned")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pattern=regexes(),
    seed=st.integers(0, 10_000),
    max_length=st.integers(0, 3),
    alpha=st.sampled_from(ALPHAS),
    n_best=st.integers(1, 3),
    beam=st.integers(1, 3),
    eos=st.booleans(),
    zeros=st.sampled_from([0.0, 0.3, 0.6]),
)
def test_visited_states_equal_the_dense_grid_and_exhaustive_search(
    pattern, seed, max_length, alpha, n_best, beam, eos, zeros
):
    """Narrow beams: the visited layout (on the dense automaton and on an exact lazy one) returns
    the grid's hypotheses, scores and order; a beam wider than every prefix: the true n best."""
    vocab = vocab_of(["a", "b", "ab", "ba"])
    model = SparseLM(len(vocab), seed, zeros, bos_id=1, eos_id=1 if eos else None, vocab=vocab)
    if not spellable(vocab, pattern, max_length):
        return
    eos_id = model.eos_id
    dense = compile_regex(pattern, vocab.surfaces(), eos_id, vocab.separator)
    lazy = _exact_lazy(vocab, pattern, eos_id)
    first_visit = _first_visit_class(vocab, pattern, eos_id)
    for width in (beam, len(vocab) ** max_length):
        grid = search(model, [2], dense, ANDERSON_GRID, width, max_length, alpha, n_best)
        same(search(model, [2], dense, ANDERSON_VISITED, width, max_length, alpha, n_best), grid)
        same(search(model, [2], lazy, ANDERSON, width, max_length, alpha, n_best), grid)
        same(search(model, [2], first_visit, ANDERSON, width, max_length, alpha, n_best), grid)
    assert_n_best(grid, Oracle(model, [2], max_length, pattern), alpha, n_best)


def _first_visit_class(vocab, pattern, eos_id) -> DerivedTokenAutomaton:
    """What the masked compile builds by default: the one first-visit class over the eager byte
    DFA, its transitions' next states the whole automaton's (``exact_rows``)."""
    clear_cache(vocabularies=False)
    with mock.patch.object(build, "EAGER_FIRST_VISIT", True):
        made = compile_regex(pattern, vocab.surfaces(), eos_id, vocab.separator, lazy=Laziness.MASKED)
    clear_cache(vocabularies=False)
    assert isinstance(made, DerivedTokenAutomaton) and isinstance(made.bytes, EagerBytes) and made.exact_rows
    return made


def _exact_lazy(vocab, pattern, eos_id) -> LazyTokenAutomaton:
    lazy = compile_regex(pattern, vocab.surfaces(), eos_id, vocab.separator, lazy=Laziness.MASKED)
    assert isinstance(lazy, LazyTokenAutomaton) and lazy.exact
    return lazy


@pytest.mark.parametrize("name", NAMES)
def test_visited_states_equal_the_dense_grid_on_every_model(name):
    """The strategy matrix's models, a batch of prompts, a word vocabulary (separator " ")."""
    model = model_of(name)
    pattern = r"(?:a|b)(?: [cd])*(?: e)?"
    automaton = compile_regex(pattern, VOCAB.surfaces(), model.eos_id, VOCAB.separator)
    prompts = [[2, 3], [4], [2, 5, 6]]
    for alpha in (-0.5, 1.0):
        grid = search(model, prompts, automaton, ANDERSON_GRID, 3, 5, alpha, 2)
        visited = search(model, prompts, automaton, ANDERSON_VISITED, 3, 5, alpha, 2)
        for a, b in zip(visited, grid):
            same(a, b)
            assert all(regex.fullmatch(pattern, VOCAB.decode(h.tokens)) for h in a)


def test_large_whole_automata_run_over_the_states_reached_with_the_grid_s_results():
    """From GRID_STATES states on, Anderson-style search on the whole automaton keeps one beam per
    state reached (fewer rows) and returns the grid's results."""
    from decodekit.decoding.beam import GRID_STATES

    vocab = vocab_of(["a", "b", "ab", "ba"])
    model = SparseLM(len(vocab), 4, 0.2, bos_id=1, eos_id=1, vocab=vocab)
    pattern = "(a|b){3,90}"
    dense = compile_regex(pattern, vocab.surfaces(), model.eos_id, vocab.separator)
    assert dense.num_states >= GRID_STATES
    rows = {}
    for strategy in (ANDERSON_GRID, ANDERSON):
        seen = rows[strategy.start] = []
        s = Settings(strategy, 12, dense, beam_size=2, length_penalty=0.5, n_best=3)
        observe = lambda sel, seen=seen: seen.append(sel.logprob.numel())  # noqa: E731
        rows[strategy] = run(planning.plan(model, [2], s), observe=observe)
    same(rows[ANDERSON], rows[ANDERSON_GRID])
    assert max(rows[ANDERSON.start]) < min(rows[ANDERSON_GRID.start])


BYTES = [chr(c) for c in range(ord("a"), ord("f"))]  # a..e, each a token by itself
MERGES = ["ab", "ba", "aa", "abc", "cd", "de", "bb", "aaa"]


def test_refused_whole_runs_over_the_states_it_reaches_and_equals_the_whole(monkeypatch):
    """With the whole automaton refused for size when the search is planned (a lowered table
    limit), ``constrained_beam_search`` on the pattern string runs over a lazy automaton: its
    outputs match and equal the grid's on the whole automaton, at every length budget (the lazy
    masks' length check builds the whole automaton once, under the normal limit, on first need).
    With the limit low throughout, the length check keeps the one-byte-per-token bound: the
    outputs still match."""

    vocab = vocab_of(BYTES + MERGES)
    model = SparseLM(len(vocab), 7, 0.2, bos_id=1, eos_id=1, vocab=vocab)
    pattern = "(a|b)*a(a|b){3}(cd|e)?"
    budgets = (4, 5, 7, 12)
    clear_cache(vocabularies=False)
    whole = {m: decodekit.constrained_beam_search(model, [2], pattern, 2, m, n_best=3) for m in budgets}
    assert isinstance(decodekit.constraints.anderson_automaton(pattern, model), TokenAutomaton)
    plan = planning._for_states

    def refusing(*args):
        with monkeypatch.context() as patch:
            patch.setattr(lift, "MAX_TABLE_ENTRIES", 10)  # every automaton too large to build whole
            clear_cache(vocabularies=False)
            with pytest.raises(decodekit.ConstraintError, match="too large"):
                decodekit.constraints.anderson_automaton(pattern, model)
            out = plan(*args)
        assert isinstance(out, LazyTokenAutomaton)
        return out

    monkeypatch.setattr(planning, "_for_states", refusing)
    for m, want in whole.items():
        got = decodekit.constrained_beam_search(model, [2], pattern, 2, m, n_best=3)
        same(got, want)
        assert got and all(regex.fullmatch(pattern, vocab.decode(h.tokens)) for h in got)
    monkeypatch.setattr(lift, "MAX_TABLE_ENTRIES", 10)
    for m in budgets:
        clear_cache(vocabularies=False)
        got = decodekit.constrained_beam_search(model, [2], pattern, 2, m, n_best=3)
        assert got and all(regex.fullmatch(pattern, vocab.decode(h.tokens)) for h in got)
    clear_cache(vocabularies=False)


def test_the_size_error_names_the_states_reached(monkeypatch):
    """The estimate before the run counts the one state it starts in; as states are reached the
    rows grow, and past the memory allowed the error says how many states were reached."""
    from decodekit.decoding import memory

    vocab = vocab_of(BYTES + MERGES)
    model = SparseLM(len(vocab), 1, 0.0, bos_id=1, eos_id=1, vocab=vocab)
    pattern = "[abcde]{0,8}e"
    lazy = _exact_lazy(vocab, pattern, model.eos_id)
    s = Settings(ANDERSON, 9, lazy, beam_size=50, length_penalty=1.0, n_best=1)
    one = memory.estimate(model, [1], s, states=1).host
    many = memory.estimate(model, [1], s, states=4).host
    assert many > one
    limit = (one + many) // 2
    with pytest.raises(ResourceError, match=r"has reached [0-9,]+ automaton states, [0-9,]+ of them"):
        run(planning.plan(model, [2], s, max_memory=limit))
    assert run(planning.plan(model, [2], s))  # without the limit it runs


def test_generate_with_anderson_on_a_constraint_refused_whole(monkeypatch):
    """generate(): where the whole automaton is refused, the plan step gives Anderson-style search
    the lazy automaton (a non-exact lazy one, over a word vocabulary, is still refused, naming the
    masked searches: tests/constraints/test_interface.py)."""
    vocab = vocab_of(BYTES + MERGES)
    model = SparseLM(len(vocab), 2, 0.0, bos_id=1, eos_id=1, vocab=vocab)
    monkeypatch.setattr(lift, "MAX_TABLE_ENTRIES", 10)
    clear_cache(vocabularies=False)
    hyps = generate(
        model, [[2]], GenerationConfig(strategy="beam", constraint="a(b|cd)+e", beam_size=2, max_length=8)
    )
    assert hyps[0] and all(regex.fullmatch("a(b|cd)+e", vocab.decode(h.tokens)) for h in hyps[0])
    clear_cache(vocabularies=False)
