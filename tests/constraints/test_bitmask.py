"""Packed bitmasks (``fill_bitmask``) and the warm-row caches, against an oracle: a token is
allowed iff some continuation of at most ``remaining - 1`` more tokens makes the text fully match
(``regex.fullmatch``, with ``partial=True`` pruning the texts that cannot become a match)."""

from __future__ import annotations

import functools
import itertools

import pytest
import regex
import torch

from decodekit.constraints import (
    ConstraintError,
    DerivedTokenAutomaton,
    LazyTokenAutomaton,
    TokenAutomaton,
    compile_regex,
    intersect,
)
from decodekit.constraints.tokens.interface import Bitmasks, provides
from decodekit.constraints.tokens.masks import bitmask_words, fill_bitmask, pack_bits
from tests.support.engines import masked_by_lazy_token_automaton


@pytest.fixture(autouse=True, scope="module")
def _lazy_token_automaton():
    """The masked compiles here build LazyTokenAutomaton, whose own paths these tests exercise
    (the default, the first-visit class over EagerBytes: test_eager_bytes.py, the engine axis)."""
    yield from masked_by_lazy_token_automaton()


# 37 tokens (two int32 words per row), EOS last; the letters d..z never match
TOKENS = (
    ["a", "b", "ab", "c", "ca", "bab", "abc"]
    + [chr(c) for c in range(ord("d"), ord("z") + 1)]
    + [
        "zz",
        "yy",
        "xx",
        None,
    ]
)


EOS = len(TOKENS) - 1
PATTERN = r"(?:ab|c){1,3}a?"
BUDGETS = [None, 1, 2, 3, 5, None, 2, 1, 4]  # mixed, so that a warm static row must not leak into a tight one


@functools.cache
def _finishes(text: str, more: int) -> bool:
    """Whether at most ``more`` further tokens turn ``text`` into a full match."""
    frontier = {text}
    for _ in range(more + 1):
        if any(regex.fullmatch(PATTERN, x) for x in frontier):
            return True
        frontier = {
            x + t for x in frontier for t in TOKENS[:EOS] if regex.fullmatch(PATTERN, x + t, partial=True)
        }
        if not frontier:
            return False
    return False


def _oracle(prefix: tuple[int, ...], remaining: int | None) -> list[bool]:
    return list(_oracle_of("".join(TOKENS[t] for t in prefix), remaining))


@functools.cache
def _oracle_of(text: str, remaining: int | None) -> tuple[bool, ...]:
    more = 12 if remaining is None else remaining - 1  # 12: more than any match needs
    out = [more >= 0 and _finishes(text + t, more) if t is not None else False for t in TOKENS]
    out[EOS] = regex.fullmatch(PATTERN, text) is not None
    return tuple(out)


def _unpack(bitmask: torch.Tensor, vocab: int) -> list[list[bool]]:
    return [[bool((int(row[t // 32]) >> (t % 32)) & 1) for t in range(vocab)] for row in bitmask]


def _automata():
    yield compile_regex(PATTERN, TOKENS, EOS, lazy="masked")  # built on first visit
    yield compile_regex(PATTERN, TOKENS, EOS, lazy=False)  # whole
    yield compile_regex(intersect(PATTERN, ".{0,7}"), TOKENS, EOS, lazy="masked")  # derivatives


def test_the_three_engines_are_exercised():
    kinds = [type(a) for a in _automata()]
    assert kinds[0] is LazyTokenAutomaton and kinds[1] is TokenAutomaton
    assert kinds[2] is DerivedTokenAutomaton
    assert all(provides(a, Bitmasks) for a in _automata())


@pytest.mark.parametrize("which", range(3))
def test_fill_bitmask_and_allowed_equal_the_oracle_at_every_budget(which):
    automaton = list(_automata())[which]
    prefixes = [p for n in range(3) for p in itertools.product(range(7), repeat=n)]
    walked = [(p, automaton.walk(p)) for p in prefixes]
    live = [(p, s) for p, s in walked if s >= 0]
    assert len(live) >= 10
    words = bitmask_words(len(TOKENS))
    for remaining in BUDGETS:
        states = torch.tensor([s for _, s in live] + [-1])  # and a dead row: nothing allowed
        want = [_oracle(p, remaining) for p, _ in live] + [[False] * len(TOKENS)]
        bitmask = torch.full((len(states), words), -1, dtype=torch.int32)  # stale bits everywhere
        assert automaton.fill_bitmask(bitmask, states, remaining) is bitmask
        assert _unpack(bitmask, len(TOKENS)) == want, remaining
        assert all(int(row[-1]) >> (len(TOKENS) % 32) == 0 for row in bitmask)  # the bits past V
        one = torch.zeros(1, words, dtype=torch.int32)
        for (_, s), row in zip(live, want):  # one row at a time: the warm single-row path
            automaton.fill_bitmask(one, torch.tensor([s]), remaining)
            assert _unpack(one, len(TOKENS))[0] == row
            assert automaton.allowed(torch.tensor([s]), remaining)[0].tolist() == row


def test_per_row_budgets_and_the_generic_packer_agree():
    automaton = compile_regex(PATTERN, TOKENS, EOS, lazy="masked")
    states = torch.tensor([automaton.walk(p) for p in [(), (3,), (2,), (0, 1)]])
    remaining = torch.tensor([1, 2, 3, 4])
    want = automaton.allowed(states, remaining)
    bitmask = torch.zeros(4, bitmask_words(len(TOKENS)), dtype=torch.int32)
    automaton.fill_bitmask(bitmask, states, remaining)
    assert torch.equal(bitmask, torch.from_numpy(pack_bits(want.numpy())))
    again = torch.zeros_like(bitmask)

    class Plain:  # a TokenConstraint without fill_bitmask: the generic packer packs its allowed
        vocab_size = automaton.vocab_size

        def allowed(self, s, r=None):
            return automaton.allowed(s, r)

    assert torch.equal(fill_bitmask(Plain(), again, states, remaining), bitmask)


def test_a_wrong_bitmask_says_how_to_allocate_it():
    automaton = compile_regex(PATTERN, TOKENS, EOS, lazy="masked")
    for bad in (torch.zeros(1, 1, dtype=torch.int32), torch.zeros(1, 2, dtype=torch.int64)):
        with pytest.raises(ConstraintError, match=r"torch.zeros\(N, \(V \+ 31\) // 32"):
            automaton.fill_bitmask(bad, torch.tensor([0]))


def test_buffers_swapped_reshaped_or_strided_are_filled_right():
    automaton = compile_regex(PATTERN, TOKENS, EOS, lazy="masked")
    words = bitmask_words(len(TOKENS))
    s1, s2 = automaton.walk([3]), automaton.walk([0])
    want1, want2 = (
        torch.from_numpy(pack_bits(automaton.allowed(torch.tensor([s]))[0].numpy())) for s in (s1, s2)
    )
    a, b = torch.zeros(1, words, dtype=torch.int32), torch.zeros(1, words, dtype=torch.int32)
    automaton.fill_bitmask(a, torch.tensor([s1]))
    automaton.fill_bitmask(b, torch.tensor([s2]))  # another buffer: the kept view must not be reused
    assert torch.equal(a[0], want1) and torch.equal(b[0], want2)
    automaton.fill_bitmask(a, torch.tensor([s2]))
    assert torch.equal(a[0], want2) and torch.equal(b[0], want2)
    fresh = compile_regex(PATTERN, TOKENS, EOS, lazy="masked", max_states=99)  # rows not packed yet
    wide = torch.zeros(2, 2 * words, dtype=torch.int32)
    strided = wide[:, words:]  # not contiguous: filled row by row
    fresh.fill_bitmask(strided, torch.tensor([s1, s2]))
    assert torch.equal(wide[0, words:], want1) and torch.equal(wide[1, words:], want2)
    assert not wide[:, :words].any()
    with pytest.raises(ConstraintError, match="shape"):
        automaton.fill_bitmask(a, torch.tensor([s1, s2]))  # 2 states, 1 row


def test_evicted_rows_keep_the_cache_bounded_and_answers_stay(monkeypatch):
    from decodekit.constraints.tokens import lazy

    monkeypatch.setattr(lazy, "STATIC_ROWS", 2)  # evict at every third distinct row
    automaton = compile_regex(PATTERN, TOKENS, EOS, lazy="masked", max_states=98)
    live = [
        (p, s)
        for n in range(3)
        for p in itertools.product(range(7), repeat=n)
        if (s := automaton.walk(p)) >= 0
    ]
    bitmask = torch.zeros(1, bitmask_words(len(TOKENS)), dtype=torch.int32)
    for _ in range(2):
        for prefix, s in live:
            automaton.fill_bitmask(bitmask, torch.tensor([s]))
            assert _unpack(bitmask, len(TOKENS))[0] == list(_oracle(prefix, None))
            assert len(automaton._static) <= 2  # the warm rows (rows.RowCache) answer past eviction
