"""Word boundaries (\\b, \\B), Unicode \\w \\d \\s and anchors against ``regex.fullmatch``."""

from __future__ import annotations

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decodekit.constraints import ConstraintError, compile_regex
from tests.support.regex_strategies import regexes

CHARS = "abxy _.é1-\u0663\t"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FIXED = [
    r".*\bab\b.*",
    r"\ba",
    r"a\b.*",
    r"(\bx|y)*",
    r"(?:\bx|y)*",
    r".*\Bb.*",
    r"\b\w+\b( \b\w+\b)*",
    r"(?:a|\b)+ ?x",
    r"[^a]\b.",
    r".*\bé\b.*",
    r"\w+",
    r"[\w ]*",
    r"\d\D+",
    r"[^\s]+\s",
    r"\S*\s\S*",
    r"[\W\d]+",
    r"(?i)[A-Z]\w*",
]


def _ids(text: str) -> list[int]:
    return [CHARS.index(c) for c in text]


@SETTINGS
@given(st.sampled_from(FIXED), st.lists(st.text(alphabet=CHARS, max_size=7), min_size=1, max_size=20))
def test_word_boundary_patterns_agree_with_fullmatch(pattern, texts):
    auto = compile_regex(pattern, list(CHARS))
    compiled = regex.compile(pattern)
    for text in texts:
        assert auto.accepts(_ids(text)) == bool(compiled.fullmatch(text)), (pattern, text)


@SETTINGS
@given(
    regexes(leaves=["a", "b", " ", ".", "[ab]", r"\b", r"\B", r"\w", r"\S", "(?:)"], max_leaves=7),
    st.sampled_from(["", " "]),
    st.lists(st.lists(st.sampled_from(["a", "b", " ", "ab", "a b"]), max_size=5), min_size=1, max_size=25),
)
def test_random_boundary_regexes_over_word_tokens(pattern, separator, sequences):
    tokens = ["a", "b", " ", "ab", "a b"]
    compiled = regex.compile(pattern)
    try:
        auto = compile_regex(pattern, tokens, separator=separator)
    except ConstraintError as e:
        assert "no token sequence" in str(e) or "matches no text" in str(e)
        for seq in sequences:
            assert not compiled.fullmatch(separator.join(seq))
        return
    for seq in sequences:
        ids = [tokens.index(t) for t in seq]
        assert auto.accepts(ids) == bool(compiled.fullmatch(separator.join(seq))), (pattern, seq)


@pytest.mark.parametrize(
    "pattern, plain",
    [
        ("^ab$", "ab"),
        (r"\Aab\Z", "ab"),
        ("^a|b$", "a|b"),
        ("(^a|b)c$", "(a|b)c"),
        ("(?:^a)?b", "(?:a)?b"),
        ("^(?:a|b)*$", "(?:a|b)*"),
        (r"\^a\$", r"\^a\$"),
        ("[^a]b[$^]", "[^a]b[$^]"),
        ("^$", ""),
    ],
)
def test_anchors_at_the_ends_are_no_ops(pattern, plain):
    tokens = list("abc^$")
    a = compile_regex(pattern, tokens)
    b = compile_regex(plain, tokens)
    assert a.num_states == b.num_states
    assert a.next_state.equal(b.next_state) and a.accepting.equal(b.accepting)


@pytest.mark.parametrize("pattern", ["a^b", "a$b", "(?:^a)*", "a(?:b$)+", "a|b^", r"a\Ab", "(a$)b"])
def test_anchors_elsewhere_are_rejected(pattern):
    with pytest.raises(ConstraintError, match="anchor .* only supported at the start/end"):
        compile_regex(pattern, list("ab"))
