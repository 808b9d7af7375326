"""read_gbnf: llama.cpp's GBNF syntax, its language (against lark and the exact chart parser),
and one-line errors with the place."""

from __future__ import annotations

import os
import pathlib
import random

import pytest

from decodekit.constraints.grammar.gbnf import MAX_NESTING, MAX_REPEAT, read_gbnf
from decodekit.constraints.grammar.reduce import check_terminals, reduce
from decodekit.errors import ConstraintError
from tests.support.grammars import cfg_accepts, generate_texts, lark_oracle, mutate

JSONISH = r"""
# a small JSON
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::=
  "{" (
     string ":" value
     ("," string ":" value)*
  )? "}"
array  ::= "[" ( value ("," value)* )? "]"
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\nt] | "u" [0-9a-fA-F]{4}) )* "\""
number ::= "-"? ([0-9] | [1-9] [0-9]{1,3})
"""


def language(text: str):
    cfg = reduce(read_gbnf(text), strict=True)
    check_terminals(cfg)
    return cfg


def test_reads_a_json_grammar_and_agrees_with_lark():
    cfg = language(JSONISH)
    lark = lark_oracle(cfg)
    rng = random.Random(0)
    for text in generate_texts(cfg, 40, seed=3, max_depth=5):
        assert lark(text), text
        for _ in range(3):
            m = mutate(text, rng, '{}[]",:-0u\\a')
            if len(m) <= 12:
                assert lark(m) == cfg_accepts(cfg, m), m
    for good in ['{"a":[1,-12,true]}', '"\\u00e9"', "[]", '{"":null}']:
        assert lark(good), good
    for bad in ['{"a" 1}', "[1,]", "-", '"\\x"', "0123"]:
        assert not lark(bad), bad


@pytest.mark.parametrize(
    "rule, yes, no",
    [
        ('root ::= "a"*', ["", "a", "aaaa"], ["b"]),
        ('root ::= "a"+', ["a", "aaa"], [""]),
        ('root ::= "a"? "b"', ["b", "ab"], ["aab"]),
        ('root ::= "a"{3}', ["aaa"], ["aa", "aaaa"]),
        ('root ::= "a"{2,}', ["aa", "aaaaa"], ["a"]),
        ('root ::= "a"{1,3}', ["a", "aaa"], ["", "aaaa"]),
        ('root ::= "a"{,2}', ["", "aa"], ["aaa"]),
        ('root ::= "a"{0}', [""], ["a"]),
        ('root ::= ("ab" | "c")* "d"', ["d", "abcd", "ccabd"], ["abc", "ad"]),
        ("root ::= [^a-c] [-x]", ["d-", "zx"], ["a-", "dd"]),
        ("root ::= [a-] .", ["a\n", "-é"], ["b1"]),
        ('root ::= "\\x41\\u00e9\\U0001F600\\t\\n\\r\\\\\\"\\[\\]"', ['Aé😀\t\n\r\\"[]'], ["A"]),
        ("root ::= [\\x00-\\x1F\\]\\[\\^\\-]", ["\x01", "]", "[", "^", "-"], ["a"]),
        ('root ::= ""  "a"', ["a"], [""]),
        ('root ::= a-b_c\na-b_c ::= "x"', ["x"], ["y"]),
    ],
)
def test_constructs(rule, yes, no):
    cfg = language(rule)
    lark = lark_oracle(cfg)
    for s in yes:
        assert cfg_accepts(cfg, s) and lark(s), s
    for s in no:
        assert not cfg_accepts(cfg, s) and not lark(s), s


def test_a_rule_goes_on_until_the_next_rule_and_ends_at_the_end():
    cfg = language('root ::= "a"\n  "b" |\n "c" x # comment\n\nx ::= "x"\n')
    assert cfg_accepts(cfg, "ab") and cfg_accepts(cfg, "cx") and not cfg_accepts(cfg, "a")


def test_terminals_are_named_by_their_spelling_and_shared():
    cfg = read_gbnf('root ::= "a" [0-9] "a" x\nx ::= [0-9] .')
    assert set(cfg.terminals) == {'"a"', "[0-9]", "."}
    assert cfg.where == {"root": (1, 1), "x": (2, 1)}


@pytest.mark.parametrize(
    "text, message",
    [
        ('root ::= valeu\nvalue ::= "x"', "<grammar>:1:10: undefined rule 'valeu'"),
        ('root ::= "a"\nroot ::= "b"', "<grammar>:2:1: rule 'root' is defined twice (first at 1:1)"),
        ('root ::= ("a"', "<grammar>:1:10: '(' is never closed"),
        ('root ::= "a")', "<grammar>:1:13: ')' closes no group"),
        ('root ::= "a', "<grammar>:1:10: unterminated string literal"),
        ("root ::= [a", "<grammar>:1:10: unterminated character class"),
        ('root ::= "\\q"', "<grammar>:1:11: unknown escape \\q"),
        ('root ::= "\\x4"', "<grammar>:1:11: \\x needs 2 hex digits"),
        ("root ::= [z-a]", "<grammar>:1:10: class range 'z'-'a' is reversed"),
        ("root ::= []", "<grammar>:1:10: the character class [] matches nothing"),
        ('root ::= * "a"', "<grammar>:1:10: '*' follows nothing"),
        ('root ::= "a"{3,1}', "<grammar>:1:13: '{3,1}' has its maximum below its minimum"),
        (f'root ::= "a"{{{MAX_REPEAT + 1}}}', "<grammar>:1:13: repetition count"),
        ('x ::= "a"', "<grammar>: no rule 'root'"),
        ('"a" ::= "b"', "<grammar>:1:1: expected a rule"),
        ('root ::= <think> "a"', "<grammar>:1:10: token references <...> are not supported"),
        ('root ::= "a" @', "<grammar>:1:14: unexpected '@'"),
        ('root ::= "\\uD800"', "<grammar>:1:10: the literal has a lone surrogate"),
    ],
)
def test_errors_are_one_line_with_the_place(text, message):
    with pytest.raises(ConstraintError) as e:
        read_gbnf(text)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


def test_the_source_names_the_file():
    with pytest.raises(ConstraintError, match=r"^g\.gbnf:3:9: undefined rule 'b'"):
        read_gbnf('root ::= a\na ::= "x"\n  | "y" b', source="g.gbnf")


def test_deep_nesting_is_refused_without_recursion():
    n = 60_000
    with pytest.raises(ConstraintError, match=f"nest more than {MAX_NESTING:,} deep"):
        read_gbnf("root ::= " + "(" * n + '"a"' + ")" * n)


def test_nesting_up_to_the_limit_is_read_iteratively():
    n = MAX_NESTING
    cfg = language("root ::= " + "(" * n + '"a" | "b"' + ")" * n)
    assert cfg_accepts(cfg, "a") and cfg_accepts(cfg, "b")
    cfg = language("root ::= " + "(" * n + '"a"' + ")*" * n)
    assert len(cfg.rules) == 2 * n + 1  # two rules per star, and root


def test_a_grammar_that_expands_too_far_is_refused():
    with pytest.raises(ConstraintError, match="expands to more than"):
        read_gbnf("root ::= " + " ".join(f'"y{i}"{{9999}}' for i in range(30)))


def _llama_dir() -> pathlib.Path:
    root = pathlib.Path(__file__).resolve().parents[3]
    return pathlib.Path(os.environ.get("DECODEKIT_GRAMMARS", root.parent / "shared" / "data" / "grammars"))


@pytest.mark.skipif(
    not _llama_dir().is_dir(), reason="llama.cpp's grammars are not here (DECODEKIT_GRAMMARS)"
)
def test_llama_cpp_grammars_read_and_agree_with_lark():
    names = sorted(p.name for p in _llama_dir().glob("*.gbnf"))
    assert {"json.gbnf", "c.gbnf", "arithmetic.gbnf"} <= set(names)
    for name in names:
        cfg = language((_llama_dir() / name).read_text(encoding="utf-8"))
        lark = lark_oracle(cfg)
        for text in generate_texts(cfg, 10, seed=1, max_depth=5):
            assert lark(text), (name, text)
