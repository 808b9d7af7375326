"""Hypothesis strategies shared by the constraint tests: small regexes and vocabularies."""

from __future__ import annotations

from hypothesis import strategies as st

LEAVES = ["a", "b", " ", ".", "[ab]", "[^a]", "[a ]", "(?:)"]
# the same alphabet written with the constructs the front end reads exactly (test_syntax.py)
SYNTAX_LEAVES = [
    "[]a]",
    "[^]a]",
    "(?i:a)",
    "(?i:[^A])",
    "(?i)B",
    "\\x61",
    "\\u0062",
    "\\N{SPACE}",
    "\\141",
    "[[:alpha:]]",
    "[[:space:]]",
    "\\p{Latin}",  # case-closed: fine under (?i) (\\p{Ll} would be refused there)
    "\\P{Han}",
    "a(?#note)",
    "(?x: a \\  )",
    "b{,1}",
    "[\\x20b]",
    "(?|a|B)",
    "]",
]


def regexes(leaves=LEAVES, max_leaves: int = 6):
    """Random regexes over the alphabet {a, b, ' '} built from concatenation, alternation,
    star, plus, optional and bounded repetition."""

    def extend(inner):
        return st.one_of(
            st.tuples(inner, inner).map(lambda p: p[0] + p[1]),
            st.tuples(inner, inner).map(lambda p: f"(?:{p[0]}|{p[1]})"),
            inner.map(lambda p: f"(?:{p})*"),
            inner.map(lambda p: f"(?:{p})+"),
            inner.map(lambda p: f"(?:{p})?"),
            st.tuples(inner, st.integers(0, 2), st.integers(0, 2)).map(
                lambda p: f"(?:{p[0]}){{{min(p[1], p[2])},{max(p[1], p[2])}}}"
            ),
        )

    return st.recursive(st.sampled_from(leaves), extend, max_leaves=max_leaves)


def vocabularies(alphabet: str = "ab ", max_size: int = 5, max_len: int = 3):
    """Lists of distinct token strings (multi-character, possibly with spaces)."""
    token = st.text(alphabet=alphabet, min_size=1, max_size=max_len)
    return st.lists(token, min_size=1, max_size=max_size, unique=True)
