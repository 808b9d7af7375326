"""The parser's caches of long patterns (classes and groups by their text, literals by code
point) change nothing: the same AST, the same flags, the same refusals as a parse without them."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decodekit.constraints import json_schema
from decodekit.constraints.syntax import parser
from decodekit.constraints.syntax.nodes import Kind
from decodekit.constraints.syntax.scanner import Refusal


def _shape(root):
    """The AST as nested tuples (kind, set or anchor, bounds, children), compared by value."""
    memo: dict[int, tuple] = {}
    stack = [root]
    while stack:
        node = stack[-1]
        missing = [c for c in node.items if id(c) not in memo]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        leaf = node.cset if node.kind is Kind.SET else node.anchor
        memo[id(node)] = (
            node.kind,
            leaf,
            node.lo,
            node.hi,
            node.size,
            tuple(memo[id(c)] for c in node.items),
        )
    return memo[id(root)]


def _outcome(text: str, cached: bool, monkeypatch):
    monkeypatch.setattr(parser, "_CACHE_FROM", 0 if cached else 10**12)
    p = parser._Parser(text)
    try:
        parsed = p.run()
    except Refusal as r:
        return ("refused", r.kind, r.message, r.pos, p.core)
    return (_shape(parsed.root), parsed.boundaries, p.core)


def _same(text, monkeypatch):
    assert _outcome(text, True, monkeypatch) == _outcome(text, False, monkeypatch), text


PIECES = [
    "(a|b)", "(?:ab)*", "(?i:Ab)", "(?s:.)", "[a-c]", "[^]x]", "[\\]]", "[(]", "\\(", "\\)", "(?i)", "\\b",
    "^", "$", "(", ")", "|", "*", "+?", "{2}", "[[:a]", "(?x: a #(\n)", "(?P<n>a)", "(?#)", "\\d",
    "(?:(?:a)", "x", "é", "[", "]", "(?|a)", "\\Z",
]  # fmt: skip


@settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=6), st.integers(1, 4))
def test_caches_change_nothing_on_repeated_pieces(monkeypatch, pieces, times):
    # repeated, so that classes and groups are seen again, in other contexts (flags, depth)
    _same("".join(pieces) * times + "(" + "".join(pieces[::-1]) + ")" + "".join(pieces) * times, monkeypatch)


@pytest.mark.parametrize(
    "text",
    [
        "(a)" * 5 + "(?i:(a))" + "(a)",
        "(?:" * 99 + "a" + ")" * 99 + "(?:" + "(?:" * 99 + "a" + ")" * 99 + ")",  # depth limit on a reuse
        "(\\b)" + "(a)(\\b)" * 3,
        "[a-z]" * 3 + "(?i:[a-z])" + "[a-z]",
        "(x)(?x: (x) )",
        "([[:alpha:]])" * 3,
    ],
)
def test_caches_change_nothing(monkeypatch, text):
    _same(text, monkeypatch)


def test_schema_texts_parse_the_same(monkeypatch):
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 3},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "sub": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "string"}}},
        },
    }
    _same(json_schema(schema), monkeypatch)
