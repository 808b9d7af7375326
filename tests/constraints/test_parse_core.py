"""The parser's core syntax: where the parser alone decides validity, it must decide exactly as
``regex.compile`` does, since ``parse`` then skips ``regex.compile`` on success.

Random texts over the core's characters and near-misses (``{``, ``{,``, ``**``, ``(?``, ``[]``, a
trailing ``\\``, unknown escapes, huge counts, deep nesting): whenever the parser accepts a text
and says its checks were complete (``_Parser.core``), ``regex.compile`` accepts it too; whenever
the parser calls it a syntax error, so does ``regex``; and ``regex`` rejects nothing the parser
accepts on the fast path."""

import warnings

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decodekit.constraints import json_schema
from decodekit.constraints.syntax import parser
from decodekit.constraints.syntax.budgets import cheap_to_compile
from decodekit.constraints.syntax.scanner import Refusal
from decodekit.errors import ConstraintError

FRAGMENTS = [
    *"ab0129,-|().*+?^$[]{}:<>=!#xismé \n\\",
    "(?:", "(?i)", "(?s)", "(?s:", "(?-i:", "(?i-s:", "(?i-i:", "(?i-:", "(?", "(?)", "(?x)", "(?a)", "(?P<",
    "[^", "[]", "[]]", "[^]]", "[a-", "-]", "[\\", "**", "*?", "+?", "??", "{,", "{2}", "{,3}", "{1,}",
    "{2,1}", "{0}", "{1,2}?", "{3}+", "4294967295", "4294967294", "99999999999",
    "\\d", "\\D", "\\w", "\\W", "\\s", "\\S", "\\b", "\\B", "\\A", "\\Z", "\\z", "\\G", "\\n", "\\t", "\\a",
    "\\v", "\\x", "\\x4", "\\x41", "\\u00e", "\\u00e9", "\\U0010ffff", "\\U00110000", "\\q", "\\é", "\\.",
    "\\[", "\\]", "\\{", "\\}", "\\-", "\\(", "\\)", "\\\\", "\\0", "\\1", "\\8", "\\p", "\\N", "\\g",
]  # fmt: skip


def _ours(text: str) -> tuple[str, bool]:
    """(outcome, core): "ok" or the Refusal's kind, and whether the parse stayed in the core."""
    p = parser._Parser(text)
    try:
        p.run()
    except Refusal as r:
        return r.kind, p.core
    return "ok", p.core


def _regex_accepts(text: str) -> bool:
    regex.purge()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            regex.compile(text)
        except Exception:  # regex.error, and RecursionError / ValueError / OverflowError alike
            return False
    return True


def _agree(text: str) -> None:
    outcome, core = _ours(text)
    if outcome == "budget" or not cheap_to_compile(text):
        return  # regex.compile would expand the repetitions (gigabytes); the parser refused first
    accepts = _regex_accepts(text)
    if outcome == "ok" and core:
        assert accepts, f"the parser accepts {text!r} without regex's check, regex rejects it"
    if outcome == "syntax":
        assert not accepts, f"the parser calls {text!r} invalid, regex accepts it"


@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=10).map("".join))
def test_core_agrees_with_regex_compile(text):
    _agree(text)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet="ab|()[]^-?*+{},0123\\dws.:", max_size=12))
def test_core_agrees_on_single_characters(text):
    _agree(text)


@pytest.mark.parametrize(
    "text",
    [
        "{", "{,", "a{,", "a{", "**", "a**", "(?", "(?:", "[]", "\\", "a\\", "[\\", "\\q", "\\x4", "a{2,1}",
        "a{4294967295}", "a{99999999999}", "a{1}{2}", "a|*", "(?i-i:a)", "(?i-:a)", "()", "(?)", "a{,}",
        "^*", "$+", "\\b*", "a(?i)b", "[]]", "[^]]", "[a-]", "[\\d-z]", "[z-a]", "\\U00110000",
        "(" * 100 + ")" * 100, "(" * 101 + ")" * 101, "(?:a" * 100 + ")*" * 100, "(" * 100 + ")" * 99,
    ],
)  # fmt: skip
def test_near_misses(text):
    _agree(text)


def test_core_texts_skip_regex_compile(monkeypatch):
    """The date pattern and the JSON Schema front end's texts stay in the core: ``parse`` does
    not call ``regex.compile`` for them; a text outside the core still goes through it."""
    calls = []
    monkeypatch.setattr(parser, "_check_valid", calls.append)
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 5},
            "tags": {"type": "array", "items": {"enum": ["a{", "b]", "c\\"]}},
            "n": {"type": "number", "minimum": 0},
            "when": {"type": "string", "format": "date-time"},
        },
    }
    for text in ["[0-9]{4}-[0-9]{2}-[0-9]{2}", "(?i:ab)+c*?", json_schema(schema)]:
        assert _ours(text) == ("ok", True), text
        parser.parse(text)
    assert calls == []
    parser.parse("(?P<x>a)\\p{L}")
    assert calls == ["(?P<x>a)\\p{L}"]


def test_invalid_core_text_keeps_regex_message():
    with pytest.raises(ConstraintError, match=r"invalid regex 'a\*\*': multiple repeat at position 2"):
        parser.parse("a**")


def _same_tree(a, b) -> bool:
    if a.kind != b.kind or a.size != b.size:
        return False
    if a.kind.value == "set":
        return a.cset == b.cset
    return len(a.items) == len(b.items) and all(_same_tree(x, y) for x, y in zip(a.items, b.items))


PLAIN_PIECES = ["a", "b", "]", "}", "#", "-", "é", "\x00", " ", "\n", "😀"]
PLAIN_PIECES += ["\\" + c for c in "\\[]{}().*+?^$|-/:!\"' "]  # escaped punctuation


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PLAIN_PIECES), min_size=1, max_size=12).map("".join))
def test_a_plain_literal_reads_as_the_parser_reads_it(text):
    """A pattern of plain characters and escaped punctuation is read without the parser (a grammar's
    "true", "\\}"): the same tree as the parser's, and what ``regex`` matches."""
    assert parser._PLAIN.fullmatch(text)
    fast, boundaries = parser.parse(text)
    assert not boundaries and _same_tree(fast, parser._Parser(text).run().root)
    literal = regex.sub(r"\\(.)", r"\1", text, flags=regex.S)
    assert regex.fullmatch(text, literal)
