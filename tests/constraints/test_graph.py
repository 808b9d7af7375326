"""The small graph routines against brute force."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from decodekit.constraints.automata import graph


@st.composite
def tables(draw):
    s = draw(st.integers(1, 6))
    x = draw(st.integers(1, 3))
    cells = draw(st.lists(st.integers(-1, s - 1), min_size=s * x, max_size=s * x))
    accepting = draw(st.lists(st.booleans(), min_size=s, max_size=s))
    return np.array(cells, dtype=np.int64).reshape(s, x), np.array(accepting)


def _accepted(table, accepting, start, max_len=6):
    """The accepted words of length <= max_len from ``start`` (brute force)."""
    out = set()
    for n in range(max_len + 1):
        for word in itertools.product(range(table.shape[1]), repeat=n):
            q = start
            for a in word:
                q = table[q, a] if q >= 0 else -1
            if q >= 0 and accepting[q]:
                out.add(word)
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(tables())
def test_minimize_preserves_the_language_and_merges_equivalent_states(data):
    table, accepting = data
    assume(all(_accepted(table, accepting, q, len(table)) for q in range(len(table))))  # all live
    new, acc, reps = graph.minimize(table, accepting, 0)
    assert _accepted(new, acc, 0) == _accepted(table, accepting, 0)
    for q in range(len(new)):  # each new state accepts what its representative does
        assert _accepted(new, acc, q, 4) == _accepted(table, accepting, int(reps[q]), 4)
    languages = [frozenset(_accepted(new, acc, q, 5)) for q in range(len(new))]
    assert len(set(languages)) == len(languages)  # no two remaining states are equivalent


def both_paths(compute):
    """``compute()`` by the small-table Python path and by the vectorised one (forced)."""
    small = compute()
    saved = graph.SMALL_TABLE
    graph.SMALL_TABLE = -1  # force the vectorised path
    try:
        return small, compute()
    finally:
        graph.SMALL_TABLE = saved


@settings(max_examples=60, deadline=None)
@given(tables(), st.booleans())
def test_small_and_vectorised_refinement_agree(data, use_hint):
    """Python-tuple and numpy refinement give the same partition, hence the same output."""
    table, accepting = data
    hint = np.arange(len(table)) % 2 if use_hint else None
    small, large = both_paths(lambda: graph.minimize(table, accepting, 0, hint=hint))
    for a, b in zip(small, large):
        assert np.array_equal(a, b)


@settings(max_examples=80, deadline=None)
@given(tables())
def test_reverse_distances(data):
    table, accepting = data
    src, sym = np.nonzero(table >= 0)
    dist = graph.reverse_distances(src, table[src, sym], accepting, len(table))
    for q in range(len(table)):
        lengths = [len(w) for w in _accepted(table, accepting, q, len(table))]
        assert dist[q] == (min(lengths) if lengths else -1)


@given(st.integers(1, 40), st.integers(0, 30), st.integers(1, 2**40), st.integers(0, 2**32))
def test_distinct_columns(rows, cols, span, seed):
    """Exact packing (small values x few rows) and hashing (wide values or many rows) agree with
    a set of tuples."""
    rng = np.random.default_rng(seed)
    table = rng.integers(-1, min(span, 3) if seed % 2 else span, size=(rows, cols))
    columns, which = graph.distinct_columns(table)
    assert np.array_equal(columns[:, which], table)
    assert columns.shape[1] == len({tuple(c) for c in table.T.tolist()})


def test_distinct_columns_verifies_hash_groups(monkeypatch):
    table = np.array([[0, 1, 0, 2], [1, 1, 1, -1]] * 20)  # 40 rows x 2 bits: hashed, not packed
    cols, which = graph.distinct_columns(table)
    assert np.array_equal(cols[:, which], table) and cols.shape[1] == 3
    monkeypatch.setattr(graph, "HASH_MIX", np.zeros(64, dtype=np.uint64))  # every column collides
    cols, which = graph.distinct_columns(table)
    assert np.array_equal(cols[:, which], table) and cols.shape[1] == 3


@settings(max_examples=60, deadline=None)
@given(tables())
def test_small_and_vectorised_distances_agree(data):
    table, accepting = data
    src, sym = np.nonzero(table >= 0)
    small, large = both_paths(lambda: graph.reverse_distances(src, table[src, sym], accepting, len(table)))
    assert np.array_equal(small, large)
