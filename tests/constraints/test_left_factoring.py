"""Alternations of many branches are converted with their common prefixes factored out
(``conversion.left_factored``: ``xa|xb`` as ``x(a|b)``): the same language, by
``regex.fullmatch`` over every text up to 5 characters, on alternations with shared prefixes,
an empty branch, one-character branches, classes, groups and repetitions among the branches."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import regex

from decodekit.constraints import Pattern
from decodekit.constraints.automata.charlevel import CharLevel
from decodekit.constraints.automata.conversion import FACTOR_FROM
from decodekit.constraints.automata.lazybytes import LazyBytes


def _words(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [("".join(rng.choice("abc") for _ in range(rng.randint(0, 4)))) for _ in range(n)]


CASES = [
    "(?:" + "|".join(_words(0, 40)) + ")",  # shared prefixes, duplicates, the empty word
    "(?:" + "|".join(_words(1, 20)) + ")c*",  # before more text
    "x(?:" + "|".join([*_words(2, 18), "[ab]c", "(?:ab)+", "a|b"]) + ")?",  # classes, groups, nested
    "(?:" + "|".join(w + "b" for w in _words(3, 30)) + ")+",  # repeated
]


@pytest.mark.parametrize("pattern", CASES)
def test_a_factored_alternation_has_the_same_language(pattern):
    assert pattern.count("|") + 1 >= FACTOR_FROM
    states = LazyBytes(CharLevel(Pattern(pattern), np.ones(256, dtype=bool)))
    for n in range(6):
        for chars in itertools.product("abcx", repeat=n):
            text = "".join(chars)
            s = 0
            for b in text.encode():
                s = states.step(s, b)
                if s < 0:
                    break
            got = s >= 0 and states.accepting(s)
            assert got == (regex.fullmatch(pattern, text) is not None), (pattern, text)
            if s >= 0:  # a live prefix has a completion of its stated length
                w = states.witness(s)
                assert len(w) == states.distance(s) and regex.fullmatch(pattern, text + w.decode())
