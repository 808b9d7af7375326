"""What the compile no longer builds or repeats before the first mask gives what the whole
construction gives: the ASCII code-point classes without the Unicode tables, the byte DFA's
distances found while trimming, and the kept parse."""

from __future__ import annotations

import numpy as np
import pytest
import regex

from decodekit.constraints import ConstraintError, check_pattern, clear_cache, compile_regex
from decodekit.constraints.automata.chardfa import build_char_dfa, minimized
from decodekit.constraints.automata.graph import distances_to_accept
from decodekit.constraints.automata.utf8 import byte_dfa, code_point_classes
from decodekit.constraints.build import parsed
from decodekit.constraints.syntax.parser import parse

PATTERNS = [
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    r".*\bmarket\b.*",
    r"\w+@\w+é",
    r"[^a\d]é\s",
    r"(?i)straße",
    r"[a-z ]{0,40}",
    r"\D\W\S.{3}",
    r"(a|é)*b",
]
AVAILABLE = [None, np.ones(256, dtype=bool), np.arange(256) < 128, np.arange(256) % 3 > 0]


def _char_dfa(pattern: str):
    ast, boundaries = parse(pattern)
    return minimized(build_char_dfa(ast, boundaries, 1000))


@pytest.mark.parametrize("pattern", PATTERNS)
def test_ascii_classes_are_the_whole_tables_first_128(pattern):
    dfa = _char_dfa(pattern)
    classes = code_point_classes(dfa.other, dfa.explicit)
    assert classes._tables is None  # nothing past ASCII built yet
    assert np.array_equal(classes.ascii, classes.rows[classes.block[:2]].reshape(-1))


@pytest.mark.parametrize("pattern", PATTERNS)
def test_byte_dfa_distances_are_distances_to_accept(pattern):
    dfa = _char_dfa(pattern)
    for available in AVAILABLE:
        out = byte_dfa(dfa.table, dfa.accepting, code_point_classes(dfa.other, dfa.explicit), available)
        if out.distances is not None:  # None: nothing matches with these bytes
            assert np.array_equal(out.distances, distances_to_accept(out.table, out.accepting))


def test_the_parse_is_kept_until_clear_cache_and_refusals_are_not():
    clear_cache()
    check_pattern(r"[0-9]{3}x")
    assert parsed.cache_info().currsize == 1
    tokens = [str(d) for d in range(10)] + ["x", "0x"]
    automaton = compile_regex(r"[0-9]{3}x", tokens)
    assert parsed.cache_info().hits >= 1
    assert automaton.accepts([1, 2, 11]) and regex.fullmatch(r"[0-9]{3}x", "120x")
    assert not automaton.accepts([1, 11])
    clear_cache(vocabularies=False)
    assert parsed.cache_info().currsize == 0
    for _ in range(2):  # raised each time, never cached as a value
        with pytest.raises(ConstraintError, match="invalid regex"):
            check_pattern("a(")
    with pytest.raises(ConstraintError, match="must be a string"):
        check_pattern(["a"])


def test_the_unique_helpers_are_numpys_unique():
    from decodekit.constraints.automata.graph import first_and_inverse, small_unique

    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 300):
        for high in (3, 2**40):
            keys = rng.integers(0, high, n).astype(np.uint64)
            _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            got_first, got_inverse = first_and_inverse(keys)
            assert np.array_equal(got_first, first) and np.array_equal(got_inverse, inverse.reshape(-1))
        values = rng.integers(0, 9, n)
        uniq, inverse = np.unique(values, return_inverse=True)
        got_uniq, got_inverse = small_unique(values, 9)
        assert np.array_equal(got_uniq, uniq) and np.array_equal(got_inverse, inverse.reshape(-1))
