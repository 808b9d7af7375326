"""reduce (productive and reachable symbols, one-line errors) and inline_regular (the same
language with regular parts as terminals), checked with lark and the exact chart parser."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import regex

from decodekit.constraints.automata.charlevel import CharLevel
from decodekit.constraints.automata.lazybytes import LazyBytes
from decodekit.constraints.grammar.cfg import CFG, Rule, Terminal
from decodekit.constraints.grammar.gbnf import read_gbnf
from decodekit.constraints.grammar.lark_reader import read_lark
from decodekit.constraints.grammar.reduce import check_terminals, reduce
from decodekit.constraints.grammar.regular import MAX_GROUP_DEPTH, inline_regular
from decodekit.constraints.syntax.parser import parse
from decodekit.errors import ConstraintError
from tests.support.grammars import cfg_accepts, generate_texts, lark_oracle, mutate


def cfg_of(rules: dict[str, list[tuple[str, ...]]], terminals: dict[str, str], start="s", ignore=()):
    return CFG(
        start,
        tuple(Rule(lhs, rhs) for lhs, alts in rules.items() for rhs in alts),
        {n: Terminal(n, p) for n, p in terminals.items()},
        tuple(ignore),
    )


def test_reduce_removes_useless_symbols():
    cfg = cfg_of(
        {"s": [("a", "X"), ("dead",)], "a": [("X",)], "dead": [("X", "dead")], "lost": [("X",)]},
        {"X": "x", "Y": "y"},
    )
    out = reduce(cfg)
    assert set(out.nonterminals) == {"s", "a"} and set(out.terminals) == {"X"}
    assert out.rules == (Rule("s", ("a", "X")), Rule("a", ("X",)))


def test_reduce_errors():
    with pytest.raises(ConstraintError, match=r"^<grammar>: the grammar's language is empty: 's'"):
        reduce(cfg_of({"s": [("X", "s")]}, {"X": "x"}))
    with pytest.raises(ConstraintError, match=r"undefined symbol 'nope' \(in rule 's', item 2\)"):
        reduce(cfg_of({"s": [("X", "nope")]}, {"X": "x"}))
    with pytest.raises(ConstraintError, match="no rule 'start'"):
        reduce(cfg_of({"s": [("X",)]}, {"X": "x"}, start="start"))
    with pytest.raises(ConstraintError, match="both a rule and a terminal"):
        reduce(cfg_of({"s": [("X",)], "X": [("X",)]}, {"X": "x"}))


def test_unused_and_endless_user_rules_are_errors_only_when_strict():
    text = 'root ::= "a" | loop\nloop ::= "b" loop\nspare ::= "c"\n'
    cfg = read_gbnf(text, "g.gbnf")
    assert set(reduce(cfg).nonterminals) == {"root"}
    with pytest.raises(ConstraintError, match=r"^g\.gbnf:2:1: rule 'loop' derives no finite text"):
        reduce(cfg, strict=True)
    with pytest.raises(ConstraintError, match=r"^g\.gbnf:2:1: rule 'spare' is never used \(from 'root'\)"):
        reduce(read_gbnf('root ::= "a"\nspare ::= "c"\n', "g.gbnf"), strict=True)


def test_check_terminals():
    with pytest.raises(ConstraintError, match="terminal 'E' matches the empty text"):
        check_terminals(cfg_of({"s": [("E",)]}, {"E": "a?"}))
    with pytest.raises(ConstraintError, match="terminal 'B': invalid regex"):
        check_terminals(cfg_of({"s": [("B",)]}, {"B": "(a"}))


CASES = {
    "json-ish gbnf": (
        read_gbnf(
            'root ::= v\nv ::= "[" ws (v ("," ws v)*)? "]" ws | s ws | n\n'
            's ::= "\\"" [a-c\\\\]* "\\""\nn ::= "-"? [0-9]{1,3}\nws ::= [ ]?\n'
        ),
        '[]," -0123abc\\',
    ),
    "recursion forms": (
        read_gbnf(
            'root ::= l "|" r "|" m\nl ::= l "a" | "b"\nr ::= "a" r | "b"\nm ::= m "x" | "y" m | "z"\n'
        ),
        "abxyz|",
    ),
    "nullable everything": (read_gbnf('root ::= a b\na ::= "x"? "y"*\nb ::= ("z" a)?\n'), "xyz"),
    "lark with ignore": (
        read_lark(
            'start: item+\nitem: NAME "=" value ";"\n?value: NUMBER | "[" [value ("," value)*] "]"\n'
            "NAME: /[a-z]+/\n%import common.NUMBER\n%ignore /[ \\t]+/\n%ignore /#[^\\n]*\\n/\n"
        ),
        "ab=1;[], #\n",
    ),
    "regular start": (read_lark('start: ("a" | "b" "c")+ "d"?\n%ignore " "\n'), "abcd "),
}


@pytest.mark.parametrize("name", list(CASES))
def test_inline_regular_keeps_the_language(name):
    cfg, alphabet = CASES[name]
    cfg = reduce(cfg)
    out = inline_regular(cfg)
    check_terminals(out)
    assert out.start == cfg.start and out.start in out.nonterminals
    assert len(out.rules) <= len(cfg.rules)
    before, after = lark_oracle(cfg), lark_oracle(out)
    rng = random.Random(1)
    for text in generate_texts(cfg, 30, seed=5, max_depth=5) + generate_texts(out, 30, seed=6, max_depth=5):
        assert before(text) and after(text), text
        for _ in range(4):
            m = mutate(text, rng, alphabet)
            assert before(m) == after(m), m
            if len(m) <= 10:
                assert cfg_accepts(cfg, m) == cfg_accepts(out, m) == before(m), m


@pytest.mark.parametrize("name", list(CASES))
def test_a_made_terminals_expression_is_its_texts_language(name):
    """A made terminal read from its pieces' own regexes (``expression``) matches what its text
    fully matches: every text over the case's characters up to 5 (4 for larger alphabets)."""
    cfg, alphabet = CASES[name]
    made = [t for t in inline_regular(reduce(cfg)).terminals.values() if t.expression is not None]
    if name == "lark with ignore":
        assert any("[ \\t]+" in t.pattern for t in made)  # the ignore gap between pieces
    longest = 5 if len(alphabet) <= 6 else 4
    for term in made:
        states = LazyBytes(CharLevel(term.expression, np.ones(256, dtype=bool)))
        for n in range(longest + 1):
            for chars in itertools.product(alphabet, repeat=n):
                text, s = "".join(chars), 0
                for b in text.encode():
                    s = states.step(s, b)
                    if s < 0:
                        break
                got = s >= 0 and states.accepting(s)
                assert got == (regex.fullmatch(term.pattern, text) is not None), (term, text)


def test_made_terminals_are_read_only_through_their_pieces(monkeypatch):
    """Compiling a grammar reads each regex once: the regex reader never sees a made terminal's
    text when the terminal carries an expression (json.lark-like: strings, pairs, gaps)."""
    import decodekit.constraints.syntax.parser as parser
    from decodekit.constraints import clear_cache
    from decodekit.constraints.grammar.earley import GrammarBytes

    text = (
        'start: value\n?value: "{" [pair ("," pair)*] "}" | "[" [value ("," value)*] "]" | STRING\n'
        'pair: STRING ":" value\nSTRING: /"[a-z]*"/\n%ignore /[ ]+/\n'
    )
    regular = inline_regular(reduce(read_lark(text)))
    made = {t.pattern for t in regular.terminals.values() if t.expression is not None}
    assert made  # the pair: a string, a gap, a colon
    clear_cache()
    read = []
    monkeypatch.setattr(parser, "parse", lambda pattern: read.append(pattern) or parse(pattern))
    GrammarBytes(regular)
    assert read and not made & set(read)


def test_inline_regular_makes_one_terminal_of_a_regular_grammar():
    out = inline_regular(read_gbnf('root ::= ("a" | "bc")+ [0-9]{2,4}\n'))
    assert len(out.terminals) == 1 and out.rules == (Rule("root", ("<root>",)),)
    assert cfg_accepts(out, "abc12") and not cfg_accepts(out, "abc1")


def test_inline_regular_respects_the_bounds():
    chain = "root ::= r0\n" + "".join(f'r{i} ::= "x" r{i + 1} | "y"\n' for i in range(300)) + 'r300 ::= "z"\n'
    out = inline_regular(read_gbnf(chain))
    for term in out.terminals.values():
        parse(term.pattern)  # every made pattern is read by decodekit's reader
    assert len(out.nonterminals) > 300 - MAX_GROUP_DEPTH  # the deep part stayed rules
    texts = ["x" * 5 + "y", "x" * 300 + "z", "y"]
    assert all(cfg_accepts(out, t) for t in texts[:1] + texts[2:])
    big = inline_regular(read_gbnf("root ::= " + " | ".join(f'"w{i}" [a-c]' for i in range(5000)) + "\n"))
    assert len(big.rules) == 5000  # past MAX_PATTERN_CHARS: left as rules (literals alone: below)


def test_an_alternation_of_literals_past_the_pattern_bound_becomes_one_terminal():
    """root ::= "w0" | ... | "w2999" (29,000 characters of regex, over MAX_PATTERN_CHARS): one
    terminal, read with its prefixes factored out, so that the engine keeps one lexeme under way
    where 3,000 rules kept 3,000 (the 1 MB hostile grammar of 60,000: 2.8 CPU s, was 68)."""
    from decodekit.constraints import Grammar, compile_regex
    from decodekit.constraints.grammar.regular import MAX_PATTERN_CHARS

    words = [f"w{i}x" for i in range(3000)]
    text = "root ::= " + " | ".join(f'"{w}"' for w in words)
    assert len(text) > MAX_PATTERN_CHARS
    regular = Grammar(text, syntax="gbnf").regular
    assert len(regular.terminals) == 1 and len(regular.rules) == 1
    tokens = [None, *(bytes([b]) for b in range(256))]
    auto = compile_regex(Grammar(text, syntax="gbnf"), tokens, 0)
    spell = lambda s: [b + 1 for b in s.encode()]  # noqa: E731
    assert auto.accepts([*spell("w2999x"), 0]) and auto.accepts([*spell("w7x"), 0])
    assert not auto.accepts([*spell("w3000x"), 0]) and not auto.accepts([*spell("w7"), 0])
