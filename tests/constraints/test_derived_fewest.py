"""The derivative engine's fewest-tokens search is exact and never refuses halfway (issue 35.10):
over a byte-complete vocabulary with a few longer tokens, ``shortest`` equals the whole
automaton's, and a masked search with a tight ``max_length`` runs to a match. The A* search's
estimate uses only the tokens the texts from a state may contain; past its walks, the whole
automaton decides."""

from __future__ import annotations

from unittest import mock

import pytest

from decodekit import GenerationConfig, generate
from decodekit.constraints import build, clear_cache, compile_regex
from decodekit.constraints.tokens.derived import DerivedTokenAutomaton
from tests.support.exhaustive import SparseLM

BYTES = [bytes([b]) for b in range(256)]
CC = [*BYTES, b"cc", b"ccc", b"<eos>"]
MIX = [*BYTES, b"ab", b"ba", b"aa", b"abc", b"xyz", "中文".encode(), "é".encode(), b"<eos>"]


def derived(pattern: str, tokens) -> DerivedTokenAutomaton:
    clear_cache(vocabularies=False)
    with mock.patch.object(build, "DERIVE_ALWAYS", True):
        made = compile_regex(pattern, tokens, len(tokens) - 1, lazy="masked")
    clear_cache(vocabularies=False)
    assert isinstance(made, DerivedTokenAutomaton)
    return made


@pytest.mark.parametrize(
    "pattern, tokens, want",
    [
        ("(?:c){5000}", CC, 1667),  # refused after 4096 walks before
        (r"\w{60}", MIX, 20),
        ("(?:.){600}", MIX, 200),  # "abc" and "xyz": 3 characters a token
        ("(?:a|b){5000}", MIX, 2500),
    ],
)
def test_shortest_is_the_whole_automatons(pattern, tokens, want):
    assert derived(pattern, tokens).shortest == want
    clear_cache(vocabularies=False)
    assert compile_regex(pattern, tokens, len(tokens) - 1, lazy="whole").shortest == want


def test_a_tight_budget_is_decided_all_the_way():
    """Masked greedy with max_length 1700 where 1667 tokens are needed: raised the refusal after
    some 50 tokens before; now every length check is decided and the text matches."""
    automaton = compile_regex("(?:c){5000}", CC, len(CC) - 1, lazy="masked")
    assert isinstance(automaton, DerivedTokenAutomaton)
    model = SparseLM(len(CC), 0, 0.0, bos_id=len(CC) - 1, eos_id=len(CC) - 1)
    config = GenerationConfig(strategy="greedy", max_length=1700, constraint=automaton)
    (best,) = generate(model, [[99]], config)[0]
    assert b"".join(CC[t] for t in best.tokens) == b"c" * 5000


def test_the_fallback_equals_the_search_on_small_patterns(monkeypatch):
    """With no walks allowed, every length question goes to the whole automaton: the masks are
    the same as the search's, budget by budget."""
    import torch

    from decodekit.constraints.tokens import fewest as module

    for pattern in [r"(?:ab|c)+b", r"[abc]{3,9}", r"(?:a|abc)*x"]:
        searched = derived(pattern, MIX)
        monkeypatch.setattr(module, "NEED_WALKS", 0)
        fallback = derived(pattern, MIX)
        monkeypatch.setattr(module, "NEED_WALKS", 1024)
        state = torch.tensor([0])
        assert searched.shortest == fallback.shortest
        for remaining in range(1, 8):
            assert torch.equal(searched.allowed(state, remaining), fallback.allowed(state, remaining))
            assert searched.fits(remaining) == fallback.fits(remaining)
