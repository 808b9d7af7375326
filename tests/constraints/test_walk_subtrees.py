"""Whole subtrees in the first-visit walk: :attr:`EncodedVocab.subtrees` against the trie's
tokens by brute force, and ``walk_one`` taking subtrees whole (forced at every dense depth)
against the same walk without, and against ``regex`` (a token is allowed from the start iff its
text is a prefix of a match: ``regex.fullmatch(..., partial=True)``)."""

from __future__ import annotations

import pytest
import regex
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import decodekit.constraints.tokens.lift as lift
from decodekit.constraints import LazyTokenAutomaton, compile_regex
from decodekit.constraints.tokens.trie import encode_vocab
from tests.support.engines import masked_by_lazy_token_automaton


@pytest.fixture(autouse=True, scope="module")
def _lazy_token_automaton():
    """The masked compiles here build LazyTokenAutomaton, whose own paths these tests exercise
    (the default, the first-visit class over EagerBytes: test_eager_bytes.py, the engine axis)."""
    yield from masked_by_lazy_token_automaton()


ALPHABET = "abcdé "  # "é" is two bytes: a character spans trie depths


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=6), min_size=1, max_size=40))
def test_subtrees_hold_each_nodes_tokens_and_the_bytes_below_it(words):
    tokens = [*words, *words[:3], None]  # duplicates: several tokens end at one node
    enc = encode_vocab(tokens)
    sub = enc.subtrees
    data = [t.encode() if t else None for t in tokens]
    in_trie = [i for i, b in enumerate(data) if b]
    assert sorted(sub.order.tolist()) == in_trie
    assert [data[i] for i in sub.order] == sorted(data[i] for i in sub.order)  # byte order
    prefixes = [b""]
    for d in range(1, len(enc.parent) + 1):
        edges = zip(enc.parent[d - 1].tolist(), enc.byte[d - 1].tolist())
        prefixes = [prefixes[p] + bytes([b]) for p, b in edges]
        for j, prefix in enumerate(prefixes):
            lo, count = int(sub.lo[d - 1][j]), int(sub.count[d - 1][j])
            below = [i for i in in_trie if data[i].startswith(prefix)]
            assert sorted(sub.order[lo : lo + count].tolist()) == below
            seen = {b for i in below for b in data[i][len(prefix) :]}
            words64 = [int(w) for w in sub.below[d - 1][j]]
            assert {b for b in range(256) if words64[b >> 6] >> (b & 63) & 1} == seen


def _vocabulary(words):
    """Every byte as a token (the lazy automaton's masks are then exact), then ``words``."""
    return [bytes([b]) for b in range(256)] + [w.encode() for w in words] + [None]


PATTERNS = [r"[a-c]+ ?", r"[a-dé]*b", r"(?:ab|ba)*c?", r"a[^ ]*", r"\w+ \w*", r"[ab]{2,5}"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.text(alphabet=ALPHABET, min_size=2, max_size=7), min_size=1, max_size=60),
    st.sampled_from(PATTERNS),
)
def test_taking_subtrees_whole_changes_no_first_row(words, pattern):
    tokens = _vocabulary(words)
    eos = len(tokens) - 1
    rows = {}
    for forced in (True, False):
        old = lift.CLOSE_AT, lift.CLOSE_SHARE
        lift.CLOSE_AT, lift.CLOSE_SHARE = (1, 1.0) if forced else (1 << 60, 0.0)
        try:
            a = compile_regex(pattern, tokens, eos, lazy="masked")
            assert isinstance(a, LazyTokenAutomaton)
            sh = a._shared
            tok, ends = lift.walk_one(int(sh.start[0]), sh.enc, sh.lut, sh.flat, sh.dead, sh.loops)
            rows[forced] = sorted(zip(tok.tolist(), ends.tolist()))
            allowed = a.allowed(torch.tensor([a.initial]))[0]
        finally:
            lift.CLOSE_AT, lift.CLOSE_SHARE = old
        for t, data in enumerate(tokens[:eos]):
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue  # a token ending inside a character: regex cannot read it alone
            assert bool(allowed[t]) == (regex.fullmatch(pattern, text, partial=True) is not None), text
    assert rows[True] == rows[False]
