"""The token automaton agrees with ``regex.fullmatch`` on the detokenised text."""

from __future__ import annotations

import itertools

import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decodekit.constraints import ConstraintError, compile_regex
from tests.support.regex_strategies import SYNTAX_LEAVES, regexes, vocabularies

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _all_sequences(vocab_size: int, max_len: int):
    for n in range(max_len + 1):
        yield from itertools.product(range(vocab_size), repeat=n)


@SETTINGS
@given(regexes(), vocabularies(), st.sampled_from(["", " "]), st.data())
def test_automaton_agrees_with_fullmatch(pattern, tokens, separator, data):
    """Every token sequence up to length 3 (and random longer ones) is accepted iff its text
    fully matches; an unspellable pattern matches none of them."""
    _agrees(pattern, tokens, separator, data)


@SETTINGS
@given(regexes(SYNTAX_LEAVES), vocabularies("abAB ]"), st.sampled_from(["", " "]), st.data())
def test_syntax_constructs_agree_over_multicharacter_tokens(pattern, tokens, separator, data):
    """The same, for patterns written with escapes, POSIX and property classes, ']' first,
    inline and scoped (?i), comments and verbose groups, over tokens of several characters."""
    _agrees(pattern, tokens, separator, data)


def _agrees(pattern, tokens, separator, data):
    compiled = regex.compile(pattern)
    try:
        auto = compile_regex(pattern, tokens, separator=separator)
    except ConstraintError as e:
        assert "no token sequence" in str(e) or "matches no text" in str(e)
        for seq in _all_sequences(len(tokens), 3):
            assert not compiled.fullmatch(separator.join(tokens[t] for t in seq))
        return
    seqs = list(_all_sequences(len(tokens), 3))
    seqs += data.draw(st.lists(st.lists(st.integers(0, len(tokens) - 1), max_size=8), max_size=10))
    for seq in seqs:
        text = separator.join(tokens[t] for t in seq)
        assert auto.accepts(seq) == bool(compiled.fullmatch(text)), (pattern, tokens, seq, text)


@SETTINGS
@given(regexes(), vocabularies(), st.sampled_from(["", " "]))
def test_min_tokens_matches_brute_force(pattern, tokens, separator):
    """min_tokens_to_accept[s] equals the shortest suffix (by enumeration, <= 3 tokens) that
    makes a witness prefix of s match; every state is reachable and co-reachable."""
    try:
        auto = compile_regex(pattern, tokens, separator=separator)
    except ConstraintError:
        return
    compiled = regex.compile(pattern)
    table = auto.next_state.tolist()
    witness = {0: ()}
    frontier = [0]
    while frontier:  # BFS: a shortest prefix reaching each state
        nxt = []
        for s in frontier:
            for t, r in enumerate(table[s]):
                if r >= 0 and r not in witness:
                    witness[r] = witness[s] + (t,)
                    nxt.append(r)
        frontier = nxt
    assert sorted(witness) == list(range(auto.num_states)), "unreachable state kept"
    for s, prefix in witness.items():
        best = next(
            (
                len(suffix)
                for suffix in _all_sequences(len(tokens), 3)
                if compiled.fullmatch(separator.join(tokens[t] for t in prefix + suffix))
            ),
            None,
        )
        m = int(auto.min_tokens_to_accept[s])
        assert m >= 0
        if best is not None:
            assert m == best, (pattern, tokens, s, prefix)
        else:
            assert m > 3, (pattern, tokens, s, prefix)
        assert bool(auto.accepting[s]) == (m == 0)
