"""The derivative engine at the sizes JSON Schemas reach (tokens/derived.py, automata/algebra.py,
automata/charlevel.py): chains of thousands of parts (a schema's object written out character by
character, its optional properties in a row) stepped without recursion limits. Oracle:
``regex.fullmatch(..., partial=True)`` (the text read is a prefix of a match) and brute force
over a tiny vocabulary for the length budgets."""

from __future__ import annotations

import itertools
import random

import pytest
import regex
import torch

from decodekit.constraints import Pattern
from decodekit.constraints.automata.charlevel import CharLevel
from decodekit.constraints.tokens.derived import DerivedTokenAutomaton
from decodekit.constraints.tokens.trie import encode_vocab

TOKENS = ["a", "b", ",", ",a", "b,", "<eos>"]
EOS = len(TOKENS) - 1
N = 2500  # parts: more than Python's default recursion limit
CHAINS = {
    "optional parts in a row": "".join(f"(?:,{'ab'[i % 3 == 0]})?" for i in range(N)) + "b",
    "a long body repeated": "(?:" + "".join(f",{'ab'[i % 2]}" for i in range(N)) + ")*b",
    "a long body optional, then more": "(?:" + ",a" * N + ")?(?:b,)*" + "a" * 3,
}


def derived(pattern: str) -> DerivedTokenAutomaton:
    enc = encode_vocab(TOKENS)
    return DerivedTokenAutomaton(CharLevel(Pattern(pattern), enc.available(b"")), enc, TOKENS, EOS, pattern)


def completes(compiled, text: str, tokens_left: int) -> bool:
    """Whether at most ``tokens_left`` tokens (brute force) extend ``text`` to a match."""
    for n in range(tokens_left + 1):
        for seq in itertools.product(TOKENS[:-1], repeat=n):
            if compiled.fullmatch(text + "".join(seq)):
                return True
    return False


@pytest.mark.parametrize("name", CHAINS)
def test_long_chains_step_and_mask_as_regex_says(name):
    pattern = CHAINS[name]
    compiled = regex.compile(pattern)
    auto = derived(pattern)
    rng = random.Random(0)
    for _ in range(3):
        state, text = torch.tensor([auto.initial]), ""
        for _ in range(8):
            row = auto.allowed(state)[0]
            want = [bool(compiled.fullmatch(text + t, partial=True)) for t in TOKENS[:-1]]
            assert row[:-1].tolist() == want, (name, text)
            assert bool(row[EOS]) == bool(compiled.fullmatch(text))
            for remaining in (1, 2, 3):
                got = auto.allowed(state, remaining)[0][:-1].tolist()
                assert got == [completes(compiled, text + t, remaining - 1) for t in TOKENS[:-1]]
            choices = [t for t in row.nonzero()[:, 0].tolist() if t != EOS]
            if not choices:
                break
            t = rng.choice(choices)
            state, text = auto.step(state, torch.tensor([t])), text + TOKENS[t]
