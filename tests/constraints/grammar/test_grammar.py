"""Grammar: the public object (sniffing, files, describe, & and ~), to_lark, and hostile input
(read or refused in one line, never a RecursionError or a traceback)."""

from __future__ import annotations

import os

import lark
import pytest

from decodekit.constraints import Grammar, Pattern
from decodekit.constraints.grammar.cfg import CFG, Rule, Terminal
from decodekit.constraints.grammar.grammar import MAX_GRAMMAR_BYTES, GrammarAndPattern
from decodekit.constraints.grammar.render import to_lark
from decodekit.errors import ConstraintError
from tests.support.grammars import HOSTILE, cfg_accepts, generate_texts, lark_oracle

GBNF = 'root ::= "[" (item ("," item)*)? "]"\nitem ::= [a-z]+ | root\n'
LARK = 'start: "[" [item ("," item)*] "]"\n?item: WORD | start\n%import common.WORD\n%ignore " "\n'


def test_syntax_is_sniffed_and_both_read():
    g, h = Grammar(GBNF), Grammar(LARK)
    assert (g.syntax, g.start, h.syntax, h.start) == ("gbnf", "root", "lark", "start")
    assert cfg_accepts(g.cfg, "[ab,[c]]") and cfg_accepts(h.cfg, "[ ab , [c] ]")
    assert Grammar(GBNF, "gbnf") == g and hash(Grammar(GBNF)) == hash(g) and g != h
    assert "syntax='gbnf'" in repr(g) and "nonterminals=" in repr(g)


def test_describe_draws_sizes_and_rules():
    text = Grammar(GBNF, source="list.gbnf").describe()
    lines = text.splitlines()
    assert lines[0] == "grammar list.gbnf (GBNF), start 'root'"
    assert "2 rules written" in lines[1] and "terminals" in lines[2]
    assert any("root ::=" in line for line in lines)


def test_from_file(tmp_path):
    (tmp_path / "g.lark").write_text(LARK)
    (tmp_path / "g.gbnf").write_text(GBNF)
    (tmp_path / "g.txt").write_text(GBNF)
    assert Grammar.from_file(tmp_path / "g.lark").syntax == "lark"
    assert Grammar.from_file(str(tmp_path / "g.gbnf")).source == str(tmp_path / "g.gbnf")
    assert Grammar.from_file(tmp_path / "g.txt").syntax == "gbnf"
    (tmp_path / "bad.gbnf").write_text('root ::= "a" nope\n')
    with pytest.raises(ConstraintError, match=r"bad\.gbnf:1:14: undefined rule 'nope'$"):
        Grammar.from_file(tmp_path / "bad.gbnf")


@pytest.mark.usefixtures("blocking_alarm")
def test_from_file_refuses_what_is_not_a_small_regular_utf8_file(tmp_path):
    fifo = tmp_path / "pipe.gbnf"
    os.mkfifo(fifo)
    big = tmp_path / "big.gbnf"
    big.write_text("# " + "x" * MAX_GRAMMAR_BYTES)
    latin = tmp_path / "latin.gbnf"
    latin.write_bytes(b'root ::= "\xe9"\n')
    cases = [
        (fifo, "not a regular file"),
        (tmp_path, "not a regular file"),
        (tmp_path / "missing.lark", "No such file"),
        (big, "larger than"),
        (latin, r"not UTF-8 \(byte 10\)"),
    ]
    for path, message in cases:
        with pytest.raises(ConstraintError, match=message) as e:
            Grammar.from_file(path)
        assert "\n" not in str(e.value)


def test_and_with_patterns_and_no_complement():
    g = Grammar(GBNF)
    for both in (
        g & "\\[.{0,9}\\]",
        "\\[.{0,9}\\]" & g,
        Pattern("\\[.{0,9}\\]") & g,
        g & Pattern("\\[.{0,9}\\]"),
    ):
        assert isinstance(both, GrammarAndPattern) and both.grammar is g
        assert both.pattern == Pattern("\\[.{0,9}\\]")
    twice = (g & "\\[.*") & "[^x]*"
    assert twice.pattern == Pattern("[^x]*") & Pattern("\\[.*")
    with pytest.raises(
        ConstraintError, match="^the complement of a context-free language is not context-free"
    ):
        _ = ~g
    with pytest.raises(ConstraintError, match="complement"):
        ~(g & "a")
    with pytest.raises(ConstraintError, match="two context-free languages"):
        g & g
    with pytest.raises(ConstraintError, match="invalid regex"):
        g & "(a"
    with pytest.raises(ConstraintError, match="not int"):
        g & 3


def test_errors_are_constraint_errors():
    for text, syntax in [(b"root ::= x", None), (GBNF, "ebnf"), ("start: (", "lark"), ("root ::= (", "gbnf")]:
        with pytest.raises(ConstraintError):
            Grammar(text, syntax)


def test_to_lark_renders_any_cfg():
    cfg = CFG(
        "top",
        (Rule("top", ("Item-1", "top")), Rule("top", ()), Rule("Item-1", ('"/"', "NL"))),
        {'"/"': Terminal('"/"', "/"), "NL": Terminal("NL", '\n|\\\n|"\\\\"')},
    )
    text = to_lark(cfg)
    assert text.startswith("start: ")
    lark.Lark(text, parser="earley", lexer="dynamic_complete")  # re-compatible as written
    accepts = lark_oracle(cfg)
    for s, ok in [
        ("", True),
        ("/\n", True),
        ('/"\\"', True),
        ('/"\\"/\n', True),
        ("/\\\n", False),
        ("/", False),
        ("\n", False),
    ]:
        assert accepts(s) == ok == cfg_accepts(cfg, s), s


def test_generated_texts_are_in_the_language():
    g = Grammar(LARK)
    accepts = lark_oracle(LARK)
    for text in generate_texts(g.cfg, 50, seed=0, max_depth=4):
        assert accepts(text), text


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n.startswith("1 MB") else n for n in HOSTILE]
)
def test_hostile_grammars_are_read_or_refused_in_one_line(name):
    text, refusal = HOSTILE[name]
    if refusal is None:
        g = Grammar(text)
        assert g.cfg.rules and g.regular.rules
    else:
        with pytest.raises(ConstraintError, match=refusal) as e:
            Grammar(text)
        assert "\n" not in str(e.value)
