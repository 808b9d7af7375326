"""PCFG tasks against brute-force enumeration of every leftmost derivation on tiny lengths:
string probabilities (all parses summed), totals by length, the lower bound, and
length-conditioned sampling frequencies."""

from __future__ import annotations

import math

import numpy as np
import pytest

from decodekit.errors import DecodekitError
from decodekit.tasks import TASK_NAMES, make_task
from decodekit.tasks.pcfg import PCFG, inside_by_length, string_probabilities

MAX_LEN = {"marked-reversal": 7, "unmarked-reversal": 8, "padded-reversal": 7, "dyck": 8, "hardest-cfl": 8}


def min_lengths(grammar: PCFG) -> dict:
    m = {nt: math.inf for nt in grammar.nonterminals}
    for _ in range(len(m) + 1):
        for lhs, rhs, _ in grammar.rules:
            m[lhs] = min(m[lhs], sum(1 if isinstance(x, int) else m[x] for x in rhs))
    return m


def brute_force(grammar: PCFG, max_len: int) -> dict:
    """{string: total probability of its leftmost derivations} for strings of length <= max_len."""
    mins, out = min_lengths(grammar), {}
    by_lhs: dict = {}
    for lhs, rhs, p in grammar.rules:
        by_lhs.setdefault(lhs, []).append((rhs, p))

    def expand(form: tuple, prob: float) -> None:
        k = next((i for i, x in enumerate(form) if not isinstance(x, int)), None)
        if k is None:
            out[form] = out.get(form, 0.0) + prob
            return
        for rhs, p in by_lhs[form[k]]:
            new = form[:k] + rhs + form[k + 1 :]
            if sum(1 if isinstance(x, int) else mins[x] for x in new) <= max_len:
                expand(new, prob * p)

    expand((grammar.start,), 1.0)
    return out


@pytest.fixture(scope="module", params=TASK_NAMES)
def case(request):
    task = make_task(request.param, max_length=12)
    return task, brute_force(task.grammar, MAX_LEN[request.param])


def test_parse_probabilities_and_length_totals(case):
    task, exact = case
    strings = sorted(exact)
    got = string_probabilities(task.grammar, [list(s) for s in strings])
    np.testing.assert_allclose(got, [exact[s] for s in strings], rtol=1e-12)
    totals = inside_by_length(task.grammar, MAX_LEN[task.name])[task.grammar.start]
    for n in range(MAX_LEN[task.name] + 1):
        assert totals[n] == pytest.approx(
            sum(p for s, p in exact.items() if len(s) == n), rel=1e-12, abs=1e-300
        )
    # Strings outside the language have probability 0.
    assert string_probabilities(task.grammar, [[1, 0, 0]])[0] == 0.0


def test_lower_bound_matches_brute_force(case):
    task, exact = case
    n = max(len(s) for s in exact)
    strings = [list(s) for s in exact if len(s) == n][:5]
    total = sum(p for s, p in exact.items() if len(s) == n)
    want = -sum(math.log(exact[tuple(s)] / total) for s in strings) / (len(strings) * (n + 1))
    assert task.lower_bound(strings, None) == pytest.approx(want, rel=1e-10)
    want3 = want + math.log(3) / (n + 1)
    assert task.lower_bound(strings, 3) == pytest.approx(want3, rel=1e-10)


def test_length_conditioned_sampling(case):
    task, exact = case
    n = max(len(s) for s in exact)
    support = {s: p for s, p in exact.items() if len(s) == n}
    total = sum(support.values())
    rng = np.random.default_rng(0)
    draws = 4000
    counts: dict = {}
    for _ in range(draws):
        s = tuple(task.sampler.sample(n, rng))
        assert s in support
        counts[s] = counts.get(s, 0) + 1
    tv = 0.5 * sum(abs(counts.get(s, 0) / draws - p / total) for s, p in support.items())
    assert tv < 0.06 + 0.5 * math.sqrt(len(support) / draws)


def test_batches_share_one_valid_length():
    task = make_task("marked-reversal")
    batches = task.sample_batches(25, 10, 40, 80, np.random.default_rng(1))
    assert [b.shape[0] for b in batches] == [10, 10, 5]
    for b in batches:
        assert b.shape[1] % 2 == 1 and 41 <= b.shape[1] <= 79
        for row in b:
            mid = len(row) // 2
            assert row[mid] == 2 and list(row[:mid]) == list(row[mid + 1 :][::-1])
    assert task.valid_lengths(40, 80) == list(range(41, 80, 2))


def test_bad_input():
    with pytest.raises(DecodekitError, match="unknown task"):
        make_task("palindromes")
    task = make_task("dyck", max_length=10)
    with pytest.raises(DecodekitError, match="length 3"):
        task.sampler.sample(3, np.random.default_rng(0))
    with pytest.raises(DecodekitError, match="not in the dyck language"):
        task.log_prob_given_length([[0, 0]])
