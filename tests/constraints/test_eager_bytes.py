"""The eager byte DFA as one more producer of byte states (automata/eagerbytes.py): the one
first-visit token level over it has the whole automaton's masks at every budget, its byte-level
answers are the DFA's (a shortest text by ``regex.fullmatch`` and its length, the row keys by
the rows they share), and the compiler takes it under ``build.EAGER_FIRST_VISIT``."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import regex
import torch

from decodekit.constraints import DerivedTokenAutomaton, clear_cache, compile_regex
from decodekit.constraints import build as build_module
from decodekit.constraints.automata.chardfa import build_char_dfa
from decodekit.constraints.automata.eagerbytes import GROUP_AFTER, EagerBytes
from decodekit.constraints.automata.protocol import UNKNOWN, ByteAutomaton
from decodekit.constraints.automata.utf8 import ByteDFA, byte_dfa, code_point_classes
from decodekit.constraints.build import Laziness, parsed
from decodekit.constraints.tokens.trie import encode_vocab
from tests.constraints.test_derivatives import same_masks

# byte-level (every byte a token contains is a token by itself), as the masked compile needs
WORDS = ["ab", "bc", "é中", "{a", "a:", "00", "中}", "é"]
TOKENS = [bytes([b]) for b in sorted(set("abc{}:,0123é中".encode()))] + [w.encode() for w in WORDS] + [None]
PATTERNS = [r"[ab]*a[ab]{4}", r"\{(?:a:[0-3]{1,2},)*a:0\}", "(?:ab|é中){3,6}b", "a{40}", "(?:bc|é)*中?"]


def eager_bytes(pattern: str) -> EagerBytes:
    ast, boundaries = parsed(pattern)
    dfa = build_char_dfa(ast, boundaries, 10_000)
    available = encode_vocab(tuple(TOKENS)).available(b"")
    return EagerBytes(
        byte_dfa(dfa.table, dfa.accepting, code_point_classes(dfa.other, dfa.explicit), available)
    )


def eager(pattern: str):
    clear_cache(vocabularies=False)
    try:
        with mock.patch.object(build_module, "EAGER_FIRST_VISIT", True):
            return compile_regex(pattern, TOKENS, len(TOKENS) - 1, lazy=Laziness.MASKED)
    finally:
        clear_cache(vocabularies=False)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_first_visit_class_over_the_eager_dfa_has_the_whole_masks(pattern):
    made = eager(pattern)
    assert type(made) is DerivedTokenAutomaton and type(made.bytes) is EagerBytes
    whole = compile_regex(pattern, TOKENS, len(TOKENS) - 1, lazy=Laziness.WHOLE)
    assert made.shortest == whole.shortest
    same_masks(whole, made, walks=4, steps=8, budgets=10)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_witness_is_a_shortest_accepted_text(pattern):
    lb = eager_bytes(pattern)
    for s in range(lb.size):
        text = lb.witness(s)
        if lb.distance(s) < 0:
            assert text is None
            continue
        assert len(text) == lb.distance(s) == lb.lower(s)
        end = s
        for b in text:
            end = lb.step(end, b)
        assert end >= 0 and lb.accepting(end)
    prefix_free = lb.witness(0).decode("utf-8")
    assert regex.fullmatch(pattern, prefix_free)
    shorter = [t for t in range(len(prefix_free)) if regex.fullmatch(pattern, prefix_free[:t])]
    assert not shorter


@pytest.mark.parametrize("pattern", PATTERNS)
def test_states_with_one_row_key_read_every_text_of_the_horizon_alike(pattern):
    lb, horizon = eager_bytes(pattern), 3
    for s in range(GROUP_AFTER):
        assert lb.row_key(s % lb.size, horizon) is None  # the first questions: each state its own
    keys = [lb.row_key(s, horizon) for s in range(lb.size)]
    fate = np.where(lb.table < 0, -1, 0)  # [Q, 256]: bytes -> dead or not, compared over 3 bytes
    for s in range(lb.size):
        for t in range(lb.size):
            if keys[s] != keys[t]:
                continue
            assert lb.accepting(s) == lb.accepting(t) and (lb.distance(s) < 0) == (lb.distance(t) < 0)
            assert np.array_equal(fate[s], fate[t])
            for b in np.flatnonzero(lb.table[s] >= 0).tolist():
                ns, nt = lb.step(s, b), lb.step(t, b)
                assert lb.accepting(ns) == lb.accepting(nt) and (lb.distance(ns) < 0) == (lb.distance(nt) < 0)


def test_an_initial_state_other_than_zero_is_renumbered_first():
    table = np.array([[1, -1], [-1, 0]], dtype=np.int32)  # 0 -a-> 1 -b-> 0; 1 initial, 0 accepting
    dfa = ByteDFA(
        table, np.array([True, False]), 1, (np.arange(256) != ord("a")).astype(np.int64), np.ones(2, bool)
    )
    lb = EagerBytes(dfa)
    assert (
        not lb.accepting(0) and lb.step(0, ord("b")) == 1 and lb.accepting(1) and lb.step(0, ord("a")) == -1
    )
    assert (
        lb.step(0, lb.witness(0)[0]) == 1
        and lb.step(1, ord("a")) == 0
        and lb.distance(0) == 1
        and lb.distance(1) == 0
    )


def test_no_match_is_refused_as_before():
    with pytest.raises(build_module.ConstraintError, match="no token sequence|needs characters"):
        eager("xyz")
    a = TOKENS.index(b"a")
    assert torch.equal(eager("a").allowed(torch.tensor([0]))[0].nonzero()[:, 0], torch.tensor([a]))


@pytest.mark.parametrize("pattern", PATTERNS[:2])
def test_every_byte_automaton_member_answers(pattern):
    """The members of the ByteAutomaton protocol the token level may call: the table is whole
    (``fill`` changes nothing, no entry unknown), ``sizes`` counts the states, ``reach`` defers to
    the walk, the states are finitely many."""
    lb = eager_bytes(pattern)
    assert isinstance(lb, ByteAutomaton) and lb.finite is True
    before = lb.table.copy()
    lb.fill(np.arange(lb.size), np.zeros(lb.size, dtype=np.int64))
    assert np.array_equal(lb.table, before) and not (lb.table == UNKNOWN).any()
    assert lb.table.shape == (lb.size, 256) and lb.sizes() == {"byte_states": lb.size}
    assert all(lb.reach(s) is None for s in range(lb.size))
    assert all(lb.lower(s) == lb.distance(s) for s in range(lb.size))
