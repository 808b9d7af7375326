"""read_lark: Lark grammars read by decodekit's reader, their language against lark's own loader and
Earley parser, and one-line errors with the place."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from decodekit.constraints.grammar.lark_reader import MAX_NESTING, read_lark
from decodekit.constraints.grammar.reduce import check_terminals, reduce
from decodekit.errors import ConstraintError
from tests.support.grammars import cfg_accepts, generate_texts, lark_oracle, mutate

SQLISH = r"""
start: select
?select: "select"i _cols "from"i NAME ["where"i cond]
_cols: NAME ("," NAME)* | "*"
cond: NAME OP value -> comparison
    | cond "and"i cond
?value: NUMBER | ESCAPED_STRING
OP.2: /[<>]=?|=/
NAME: /[a-z_][a-z0-9_]*/i
%import common.NUMBER
%import common.ESCAPED_STRING
%import common.WS
%ignore WS
"""


def read(text: str, source: str = "<grammar>"):
    cfg = reduce(read_lark(text, source), strict=True)
    check_terminals(cfg)
    return cfg


def test_reads_a_sql_grammar_with_lark_as_the_oracle():
    cfg = read(SQLISH)
    # lark as users run it (posix=False): ESCAPED_STRING is a shortest match there
    ours, theirs = lark_oracle(cfg), lark_oracle(SQLISH, posix=False)
    rng = random.Random(0)
    texts = generate_texts(cfg, 40, seed=2, max_depth=6)
    texts += ['SELECT a, b FROM t WHERE a >= 3 and b = "x\\"y"', "select * from t", "Select x From y"]
    for text in texts:
        assert ours(text) and theirs(text), text
        for _ in range(4):
            m = mutate(text, rng, 'sel* ,"=<>01')
            assert ours(m) == theirs(m), m
    assert not ours("select from t") and not ours("select a from")


def test_shaping_options_do_not_change_the_language():
    plain = read('start: a b\na: "x" | "y"\nb: "z"+\n')
    shaped = read('?start: _a b -> both\n_a: "x" | "y"\n!b.5: "z"+\n')
    for text in ["xz", "yzzz", "x", "zz", "xzy"]:
        assert cfg_accepts(plain, text) == cfg_accepts(shaped, text), text


def test_repeats_optionals_and_flags():
    cfg = read('start: "ab"i ~ 2 "c"~1..3 [D] E?\nD: /d+/i\nE: "e"\n')
    lark = lark_oracle(cfg)
    for text, ok in [
        ("abABc", True),
        ("aBabccc", True),
        ("ababcd", True),
        ("ababcDDe", True),
        ("abc", False),
        ("ababcccc", False),
    ]:
        assert lark(text) == ok == cfg_accepts(cfg, text), text


def test_optionals_are_rules_not_products():
    """lark distributes optionals (2^n alternatives); read_lark makes each one rule."""
    cfg = read("start: " + ' "x"?' * 40 + ' "y"\n')
    assert len(cfg.rules) < 200
    assert cfg_accepts(cfg, "xxxy") and not cfg_accepts(cfg, "x" * 41 + "y")


def test_common_terminals_keep_lark_meaning():
    """ESCAPED_STRING, C_COMMENT and _STRING_ESC_INNER between quotes are shortest matches in lark:
    the plain regexes that replace them have the same language (brute force over a small alphabet,
    lark as users run it)."""
    quoted = 'start: Q\nQ: "\\"" _STRING_ESC_INNER "\\""\n%import common._STRING_ESC_INNER\n'
    for name, alphabet, top in [
        ("ESCAPED_STRING", '"\\a\n', 6),
        ("C_COMMENT", "/*a\n", 6),
        (quoted, '"\\a', 5),
    ]:
        text = name if ":" in name else f"start: {name}\n%import common.{name}\n"
        cfg = read(text)
        lark = lark_oracle(text, posix=False)
        for n in range(1, top + 1):
            for chars in itertools.product(alphabet, repeat=n):
                s = "".join(chars)
                assert cfg_accepts(cfg, s) == lark(s), (name, s)


def test_imports_other_than_larks_own_grammars_are_refused(tmp_path):
    (tmp_path / "other.lark").write_text('X: "x"\n')
    for line in ["%import other.X", "%import .other.X"]:
        with pytest.raises(ConstraintError, match="only lark's grammars"):
            read_lark(f"{line}\nstart: X\n", source=str(tmp_path / "g.lark"))


@pytest.mark.parametrize(
    "text, message",
    [
        ('start: valeu\nvalue: "x"\n', "g.lark:1:8: undefined rule 'valeu' (in rule 'start')"),
        ('start: a\na: "x"\n  | B\n', "g.lark:3:5: undefined terminal 'B' (in rule 'a')"),
        ('start: "a" ]\n', "g.lark:1:12: unexpected ']'"),
        ("start: (\n", "g.lark:1:8: '(' is never closed"),
        ('start: "\n', "g.lark:1:8: unterminated string literal"),
        ("start: /a\n", "g.lark:1:8: unterminated regex literal"),
        ("start: fooBar\n", "g.lark:1:8: name 'fooBar' mixes cases"),
        ('start: "a"\n%ignoer "b"\n', "g.lark:2:1: unknown directive '%ignoer'"),
        ('start: "a"\nstart: "b"\n', "g.lark:2:1: rule 'start' is defined twice (first at 1:1)"),
        ('start: A\nA: "a" B\nB: A\n', "terminal 'A' uses itself"),
        ('start: A\nA: "a" b\nb: "b"\n', "g.lark:2:8: terminal 'A' uses rule 'b'"),
        ('start: p{"a"}\np{x, y}: x y\n', "g.lark:1:8: template 'p' takes 2 argument(s), given 1"),
        ("start: p\np{x}: x\n", "g.lark:1:8: template 'p' used without its 1 argument(s)"),
        ('start: "a"\n%override b: "b"\n', "g.lark:2:11: %override of rule 'b', which is not defined"),
        ('start: ""\n', "g.lark:1:8: an empty string literal"),
        ('start: "a"~3..2\n', "g.lark:1:11: ~ 3..2: the maximum is below the minimum"),
        ('start: "a" "b"..""\n', "g.lark:1:12: a range"),
        ('start: "a" :\n', "g.lark:1:12: unexpected ':'"),
        ('a: "x"\n', "g.lark: no rule 'start'"),
        ("start: A\n%declare A\n", "terminal 'A' has no pattern"),
        ("start: A\nA: /a*/\n", "g.lark:2:1: terminal 'A' matches the empty text"),
        ("start: A\nA: /(?<=a)b/\n", "g.lark:2:1: terminal 'A': unsupported regex feature"),
        ('start: "a"\nb: "b"\n', "g.lark:2:1: rule 'b' is never used (from 'start')"),
        ('start: "a" | b\nb: "b" b\n', "g.lark:2:1: rule 'b' derives no finite text"),
        ('start: s\ns: "(" s ")"\n', "g.lark:1:1: the grammar's language is empty"),
    ],
)
def test_errors_are_one_line_with_the_place(text, message):
    with pytest.raises(ConstraintError) as e:
        read(text, "g.lark")
    assert message in str(e.value)
    assert str(e.value).startswith("g.lark:") and "\n" not in str(e.value)


def test_nesting_past_the_limit_is_refused_before_the_reader_recurses():
    deep = MAX_NESTING + 1
    with pytest.raises(ConstraintError, match=f"nest more than {MAX_NESTING} deep"):
        read_lark("start: " + "(" * deep + '"a"' + ")" * deep)
    assert read_lark("start: " + "(" * MAX_NESTING + '"a"' + ")" * MAX_NESTING).rules


def test_a_long_lark_grammar_is_read_in_linear_time_and_a_huge_one_refused():
    cfg = read_lark("start: " + ' "x"' * 40_000 + "\n")
    assert len(cfg.rules[0].rhs) == 40_000
    with pytest.raises(ConstraintError, match="more than 200,000 symbols"):
        read_lark("start: " + ' "x"' * 200_001 + "\n")


FEATURES = r"""
// templates, imports with aliases and lists, ranges, flags, counted repeats, comments
start: _sep{item, ","} ";"?  -> top
_sep{x, sep}: x (sep x)*
?item: pair | NUMBER | WORD2 | "nil"i
pair: "(" item ":" item ")"
    # a comment between alternatives
    | "[" [item ("|" item)~0..2] "]"
WORD2.2: ("a".."c" | DIGIT)~2..3 \
   | /x+/i
%import common (NUMBER, DIGIT)
%import common.WS_INLINE -> _W
%ignore _W
%ignore "~"
"""


@pytest.mark.parametrize(
    "text, alphabet",
    [
        (FEATURES, "(),:[]|ac1xX ~;nN"),
        ('start: a\na: "x"\n%override a: "y" | b\nb: "z"\n%extend b: "w"+\n', "xyzw"),
        ('start: "\\x41" "\\u00e9" "\\"" "\\\\" "a\\d" "\\t"\n', 'Aé"\\ad\t'),
        ('start: X+\nX: /[a-c]/ "." | /b+/i ~ 2\n%ignore /\\s/\n', "abcB. "),
    ],
)
def test_reads_lark_syntax_as_lark_does(text, alphabet):
    """Our reading against lark's own (its loader and Earley parser on the same text): every text
    generated from our CFG, and mutations of it, accepted alike."""
    cfg = read(text)
    theirs, rng = lark_oracle(text), random.Random(0)
    for s in generate_texts(cfg, 25, seed=1, max_depth=5):
        assert cfg_accepts(cfg, s) and theirs(s), s
        for _ in range(3):
            m = mutate(s, rng, alphabet)
            assert cfg_accepts(cfg, m) == theirs(m), m


def test_larks_own_grammars_are_read_or_refused_in_one_line():
    """lark's grammar of grammars spells REGEXP with a look-ahead, python.lark declares terminals
    (%declare): each refused in one line naming the place."""
    from importlib.resources import files

    for name, message in [
        ("lark.lark", "terminal 'REGEXP': unsupported regex feature"),
        ("python.lark", "has no pattern (%declare'd terminals are not supported)"),
    ]:
        with pytest.raises(ConstraintError) as e:
            read((files("lark") / "grammars" / name).read_text(encoding="utf-8"), name)
        assert message in str(e.value) and "\n" not in str(e.value)
        assert re.match(rf"{name}:\d+:\d+: ", str(e.value))


def _common_terminals() -> list[str]:
    from importlib.resources import files

    text = (files("lark") / "grammars" / "common.lark").read_text(encoding="utf-8")
    return list(dict.fromkeys(re.findall(r"^([A-Z][A-Z_]*)\s*:", text, re.M)))


@pytest.mark.parametrize("name", _common_terminals())
def test_every_terminal_of_common_lark_reads_as_lark_runs_it(name):
    """Each terminal of the installed lark's common.lark, imported alone: texts generated from our
    reading and mutations of them, accepted alike by lark as users run it (shortest matches)."""
    text = f"start: {name}\n%import common.{name}\n"
    cfg, theirs, rng = read(text), lark_oracle(text, posix=False), random.Random(0)
    for s in generate_texts(cfg, 12, seed=1):
        assert theirs(s), s
        for _ in range(3):
            m = mutate(s, rng, 'aZ09_.-+eE "\\\n\t/*#')
            assert cfg_accepts(cfg, m) == theirs(m), m


def test_mutated_grammars_read_or_fail_in_one_line():
    """Random edits of a grammar using every construct: read, or refused as one ConstraintError
    line; never another exception (6,000 edits passed once here; 300 in CI)."""
    from decodekit import Grammar

    base = FEATURES + '%override item: "k" | pair\n%extend pair: "<" item ">"\nb: _sep{"y", ";"}\n'
    pieces = list('()[]{}|?*+~.:,"/\\%_-> \n\tabzAZ019#!') + ["%import ", "%ignore ", "common.", "->", ".."]
    rng = random.Random(1)
    for _ in range(300):
        s = list(base)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(s))
            if rng.random() < 0.4:
                del s[pos]
            elif rng.random() < 0.7:
                s.insert(pos, rng.choice(pieces))
            else:
                j = rng.randrange(len(s))
                s[pos:pos] = s[j : j + rng.randint(1, 20)]
        try:
            Grammar("".join(s), "lark")
        except ConstraintError as e:
            assert "\n" not in str(e)
