"""The shortcuts of the derivative engine's first rows (tokens/derived.py, automata/lazybytes.py,
automata/charlevel.py) against the plain paths they replace: ``LazyBytes.fill`` stepping a
state between characters once per class (``CharLevel.steps``: once per derivative class) gives
the table, the numbering and the character states of byte-by-byte stepping; the UTF-8 class DAG
of a pattern naming only ASCII characters, read off the shared DAG of its predicate classes, is
the one built over all of Unicode (the same class after every byte sequence); the shortest text of
a ``simple`` expression read in one pass is the post-order's (a reference walk below) and a
shortest match (``regex.fullmatch``); the parser's one-step reading of plain classes is the
general reader's; and the masks of JSON Schemas and random regexes at every
budget 1..80 are the whole automaton's (``compile_regex(..., lazy=False)``)."""

from __future__ import annotations

import random
import re as regex_module

import pytest
import regex
import torch

from decodekit.constraints import Pattern, compile_regex
from decodekit.constraints.automata.algebra import CAT, OR, REP, SET
from decodekit.constraints.automata.chardfa import partition_characters
from decodekit.constraints.automata.charlevel import CharLevel
from decodekit.constraints.automata.classdag import utf8_tables
from decodekit.constraints.automata.conversion import collect_sets
from decodekit.constraints.automata.lazybytes import LazyBytes
from decodekit.constraints.automata.utf8 import code_point_classes
from decodekit.constraints.frontends.schema import json_schema
from decodekit.constraints.syntax import classes as classes_module
from decodekit.constraints.syntax.parser import parse
from decodekit.errors import ConstraintError
from tests.constraints.test_derived_bounds import derived

SCHEMAS = [
    {
        "type": "object",
        "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 99}, "ok": {"type": "boolean"}},
        "required": ["id", "ok"],
    },
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 3},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
        },
        "required": ["name"],
    },
    {"type": "array", "items": {"type": "object", "properties": {"x": {"const": 1}}, "required": ["x"]}},
]
CHARACTERS = '{}[]:,"0123456789abdefgiklmnorstux-.\\é中 '
WORDS = ['{"', '":', '","', '"name":"', '"tags":["', '"]', "true", "false", "null", "12", "é中"]


def vocabulary() -> list[str]:
    """Every character alone (the engine is exact), some longer tokens, EOS last."""
    return list(dict.fromkeys([*CHARACTERS, *WORDS])) + ["<eos>"]


def random_regex(rng: random.Random, depth: int = 3) -> str:
    """A random regex over a, b, é, 中 with sets, alternation, counted and open repetition."""
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(["a", "b", "é", "中", "[ab]", "[^a]", "[aé]", "."])
    kind = rng.choice(["cat", "cat", "alt", "rep", "opt"])
    if kind == "cat":
        return "".join(random_regex(rng, depth - 1) for _ in range(rng.randint(2, 3)))
    if kind == "alt":
        return "(?:" + "|".join(random_regex(rng, depth - 1) for _ in range(2)) + ")"
    body = "(?:" + random_regex(rng, depth - 1) + ")"
    if kind == "opt":
        return body + "?"
    lo = rng.randint(0, 2)
    return body + rng.choice(["*", "+", f"{{{lo},{lo + rng.randint(0, 3)}}}"])


RANDOM = [random_regex(random.Random(seed)) for seed in range(8)]
EXPRESSIONS = [
    *RANDOM,
    r".*\bab\b.*",
    r"(?:\w+ ){1,3}\W",
    Pattern("[ab é]{2,9}") & ~Pattern(".*(?:aa|é ).*"),
    json_schema(SCHEMAS[1]),
]


def _explore(lb: LazyBytes, by_fill: bool, limit: int = 300) -> None:
    """Every byte of every byte state discovered (breadth first, at most ``limit`` states): all
    256 at once through ``fill``, or one ``step`` at a time in ascending order."""
    s = 0
    while s < min(lb.size, limit):
        if by_fill:
            lb.fill(torch.full((256,), s).numpy(), torch.arange(256).numpy())
        else:
            for b in range(256):
                lb.step(s, b)
        s += 1


@pytest.mark.parametrize("expr", EXPRESSIONS, ids=str)
def test_fill_by_class_is_byte_by_byte_stepping(expr):
    """The byte states (their keys, numbering and transitions) and the character states
    (numbering, acceptance, distance) are those of stepping byte by byte."""
    expr = Pattern(expr) if isinstance(expr, str) else expr
    fast, plain = LazyBytes(CharLevel(expr)), LazyBytes(CharLevel(expr))
    _explore(fast, True)
    _explore(plain, False)
    assert fast.keys == plain.keys
    n = fast.size
    assert (fast.table[:n] == plain.table[:n]).all()
    assert fast.char.trans == plain.char.trans
    for q in range(len(plain.char.states)):
        assert fast.char.accepting(q) == plain.char.accepting(q)
        assert fast.char.distance(q) == plain.char.distance(q)


def test_steps_by_derivative_class_match_one_step_per_class():
    """``CharLevel.steps`` over every class (past BLOCK_STEPS of them: by block) equals
    ``step`` class by class, from every state reached."""
    for r in [*RANDOM, r"(?:\w+ ){1,3}\W", json_schema(SCHEMAS[0])]:
        fast, plain = CharLevel(Pattern(r)), CharLevel(Pattern(r))
        q = 0
        while q < min(len(plain.states), 200):
            ks = list(plain.classes())
            assert fast.steps(q, ks) == [plain.step(q, k) for k in ks], (r, q)
            q += 1


def _reference_text(char: CharLevel, e) -> bytes:
    """The shortest text of a ``simple`` expression by plain recursion (small expressions only):
    a set's fewest-byte class (the lowest of them), a union's branch of least (minb, id)."""
    if e.op == SET:
        cost = char.alg.class_bytes
        ks = [k for k in range(char.num_classes) if e.mask >> k & 1]
        return char.spelling(min(ks, key=lambda k: (cost[k], k)))
    if e.op == CAT:
        return _reference_text(char, e.a) + _reference_text(char, e.b)
    if e.op == OR:
        return _reference_text(char, min(e.a, key=lambda y: (y.minb, y.id)))
    if e.op == REP:
        return _reference_text(char, e.a) * e.lo
    return b""


@pytest.mark.parametrize("r", [*RANDOM, json_schema(SCHEMAS[0]), json_schema(SCHEMAS[2])])
def test_simple_shortest_text_is_the_reference_and_a_shortest_match(r):
    """From every character state reached (each a ``simple`` expression), the text is the
    reference walk's, has the state's fewest bytes, and completes a match of the regex."""
    char = CharLevel(Pattern(r))
    lb = LazyBytes(char)
    _explore(lb, True, limit=80)
    prefixes = {0: b""}  # byte state -> one text leading to it (breadth first)
    for s in range(lb.size):
        for b in range(256):
            t = int(lb.table[s, b])
            if t >= 0 and t not in prefixes and s in prefixes:
                prefixes[t] = prefixes[s] + bytes([b])
    for s, prefix in prefixes.items():
        q, level, _ = lb.keys[s]
        if level or char.distance(q) < 0:
            continue
        e, _ = char.states[q]
        assert e.simple
        text = char.shortest_text(e)
        assert text == _reference_text(char, e)
        assert len(text) == char.distance(q)
        assert regex.fullmatch(r, (prefix + text).decode("utf-8")), (r, prefix, text)


def _same_masks_every_budget(expr, seed: int, walks: int = 3, steps: int = 8, budgets: int = 80) -> None:
    tokens = vocabulary()
    eos = len(tokens) - 1
    whole = compile_regex(expr, tokens, eos, lazy=False)
    auto = derived(expr, tokens)
    rng = random.Random(seed)
    for _ in range(walks):
        e, z = torch.tensor([whole.initial]), torch.tensor([auto.initial])
        for _ in range(steps):
            for remaining in [None, *range(1, budgets + 1)]:
                want, got = whole.allowed(e, remaining), auto.allowed(z, remaining)
                assert torch.equal(want, got), (str(expr), remaining, want.nonzero(), got.nonzero())
            choices = [t for t in whole.allowed(e)[0].nonzero()[:, 0].tolist() if t != eos]
            if not choices:
                break
            t = torch.tensor([rng.choice(choices)])
            e, z = whole.step(e, t), auto.step(z, t)


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_schema_masks_at_every_budget_are_the_whole_automatons(i):
    _same_masks_every_budget(json_schema(SCHEMAS[i]), seed=i)


@pytest.mark.parametrize("r", RANDOM[:5])
def test_random_regex_masks_at_every_budget_are_the_whole_automatons(r):
    _same_masks_every_budget(r, seed=7, budgets=30)


def _shapes(u: dict) -> list:
    """Each lead byte's (level, structure of everything below it: the class after each
    continuation sequence), the structures numbered canonically (equal numbers: equal
    structures), and its mask; then the ASCII classes."""
    ids: dict = {}

    def canon(level: int, node: int) -> int:
        if node < 0:
            return -1
        if level == 1:
            key = (1, tuple(u["rows"][node]))
        else:
            kids = (u["l2"] if level == 2 else u["l3"])[node]
            key = (level, tuple(canon(level - 1, c) for c in kids))
        return ids.setdefault(key, len(ids))

    out = [(lv, canon(lv, nd), u["masks"][lv][nd] if lv > 0 and nd >= 0 else 0) for lv, nd in u["lead"]]
    return [*out, u["ascii"]]


@pytest.mark.parametrize(
    "r",
    [
        json_schema(SCHEMAS[1]),
        r"[^a\d]\w+\s?",
        r"(?i)[a-f]\W.",
        r"(?s).[^\n]\S\D",
        r"\bab\b[^ ]*",
        "[ab]*",
    ],
)
@pytest.mark.parametrize("cut", [False, True])
def test_shared_utf8_dag_is_the_whole_unicode_one(r, cut):
    """With every named character ASCII, the tables from the shared DAG describe the same
    classes after every byte sequence (and the same masks, also over a vocabulary missing some
    continuation bytes) as those built from all of Unicode."""
    ast, boundaries = parse(r)
    sets: dict = {}
    collect_sets(ast, sets)
    explicit, other, _, _, _ = partition_characters(list(sets), boundaries)
    assert all(ord(c) < 0x80 for c in explicit)
    available = None
    if cut:
        available = torch.ones(256, dtype=torch.bool).numpy()
        available[[0x80, 0x85, 0xA0, 0xBF, 0xC3]] = False
    classes = code_point_classes(other, explicit)
    shared = utf8_tables(classes, available, other, explicit)
    whole = utf8_tables(code_point_classes(other, explicit), available)
    assert _shapes(shared) == _shapes(whole)


def _parsed_or_error(pattern: str):
    try:
        ast, boundaries = parse(pattern)
    except ConstraintError as e:
        return "error", str(e)
    return ast.kind, ast.cset, [(x.kind, x.cset, x.lo, x.hi) for x in ast.items], boundaries


def test_plain_classes_read_at_once_as_the_general_reader_reads_them(monkeypatch):
    """Classes of plain characters and ranges (the parser's one-step reader) parse to the same
    character sets, or the same error, as through the general class reader."""
    rng = random.Random(5)
    alphabet = "az09AZ-^!+é中 ]["
    patterns = [
        "[0-9]",
        "[^a-z]",
        "[+-]",
        "[-a]",
        "[a-]",
        "[a-c-e]",
        "[z-a]",
        "[a--b]",
        "[a&&b]",
        "[^^]",
        "[^]",
        "[^-]",
        "[]a]",
        "[a-é]",
    ]
    for _ in range(300):
        patterns.append("[" + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) + "]")
    patterns = [f"{flags}{p}{tail}" for p in patterns for flags, tail in (("", ""), ("(?i)", "x?"))]
    fast = [_parsed_or_error(p) for p in patterns]
    monkeypatch.setattr(classes_module, "_PLAIN_CLASS", regex_module.compile(r"(?!)"))
    general = [_parsed_or_error(p) for p in patterns]
    assert fast == general
    assert sum(f[0] != "error" for f in fast) > 300


@pytest.mark.parametrize(
    "body",
    [
        r"(?:a|b)+(?:c)",
        r"(?a)(?:\w)(?i:[a-z])(?:\d|\s)",
        r"(?s)(?:.)(?:x(?:y(?:z)))",
        r"(?i)(?:k)(?:[^K])",
        r"(?a)(?:[\w-])(?:\W.)",
        r"(?:a)\b(?:\B.)",
        json_schema(SCHEMAS[0]),
    ],
)
def test_plain_groups_read_at_once_as_flag_groups_without_flags(body):
    """``(?:`` read in one step gives the AST that the inline-flags reader gives for ``(?V0:``,
    the same group with a flag that changes nothing (so both paths are taken)."""
    general = body.replace("(?:", "(?V0:")
    assert general != body
    assert repr(parse(body)) == repr(parse(general))
