"""Rows shared between grammar states (``GrammarBytes.row_key`` with the vocabulary's lexeme
horizons, decodekit.constraints.grammar.horizons) equal each state's own row: at every state of
random token walks, over random small grammars and vocabularies of several-byte tokens
(hypothesis) and over JSON grammars on a trained byte-level BPE, the automaton that shares rows
allows exactly what one computing every state's row alone allows, at every budget. And sharing
happens: a JSON document's positions take far fewer rows than positions."""

from __future__ import annotations

import json
import os
import random

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from decodekit import Grammar
from decodekit.constraints import Pattern, clear_cache, compile_regex
from decodekit.constraints.grammar.earley import GrammarBytes
from decodekit.constraints.grammar.follow import follow_sets
from decodekit.constraints.grammar.intersect import GrammarPatternBytes
from decodekit.errors import ConstraintError
from tests.support.exhaustive import small_vocab
from tests.support.grammars import JSON_GBNF

RULES = [  # rule bodies over nonterminals a, b and the terminals below
    "a b",
    'a "," b',
    '"(" a ")"',
    "A",
    "B",
    "A a",
    "a A",
    '"x"',
    "",
    "b b",
    'b "+" a',
    "C",
    "a C b",
]
TERMINALS = ["A: /x[ab]*/", "B: /[0-9]+/", 'C: /"[^"]*"/']
PIECES = ["x", "a", "b", "1", "2", ",", "(", ")", '"', "+", " ", "y", "[", "]", "z", "zz"]


def _unshared(monkeypatch, build):
    """``build()`` with every state its own row key (no row shared)."""
    with monkeypatch.context() as m:
        m.setattr(GrammarBytes, "row_key", lambda self, s, horizon: None)
        m.setattr(GrammarPatternBytes, "row_key", lambda self, s, horizon: None)
        clear_cache(vocabularies=False)
        return build()


def _assert_rows_equal(shared, alone, walks, budgets=(None, 1, 2, 4)) -> set[int]:
    """Compare the two automata's rows at every state of ``walks``; returns the states seen."""
    seen = set()
    for ids in walks:
        s1 = s2 = shared.initial
        for t in [None, *ids]:
            if t is not None:
                s1, s2 = shared.walk([t], s1), alone.walk([t], s2)
                assert (s1 < 0) == (s2 < 0)
                if s1 < 0:
                    break
            seen.add(s1)
            for budget in budgets:
                a = shared.allowed(torch.tensor([s1]), budget)[0]
                b = alone.allowed(torch.tensor([s2]), budget)[0]
                assert torch.equal(a, b), (ids, t, budget, (a ^ b).nonzero()[:, 0].tolist())
    return seen


@settings(
    max_examples=int(os.environ.get("SHARED_ROWS_EXAMPLES", 40)),
    deadline=None,
    # most random grammars are refused (unused rules, empty languages): filtering is the design
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(
    rules=st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from(RULES)), min_size=2, max_size=7),
    ignore=st.booleans(),
    extra=st.lists(st.text(alphabet="".join(PIECES), min_size=2, max_size=5), max_size=25),
    seed=st.integers(0, 10**6),
    pattern=st.sampled_from([None, None, "[^(]*", "(?s:.*xa.*)", "not 1,", ".{0,9}", "~"]),
)
def test_shared_rows_equal_own_rows_on_random_grammars(monkeypatch, rules, ignore, extra, seed, pattern):
    """Also ``grammar & Pattern``, whose pairs share rows by the grammar's key with each origin
    noted by the DFA states that can still end there."""
    bodies = {"a": [], "b": []}
    for lhs, body in rules:
        bodies[lhs].append(body)
    bodies["b"] = bodies["b"] or ['"x"']
    bodies["a"] = bodies["a"] or ["b"]
    text = "start: a\n" + "".join(f"{n}: {' | '.join(b)}\n" for n, b in bodies.items()) + "\n".join(TERMINALS)
    text += '\n%ignore " "\n' if ignore else "\n"
    try:
        grammar = Grammar(text, "lark")
        if pattern == "not 1,":
            grammar = grammar & ~Pattern("(?s:.*1,.*)")
        elif pattern is not None:  # "~": no text of the vocabulary (refused in one line)
            grammar = grammar & Pattern(pattern)
    except ConstraintError:
        assume(False)
    vocab = small_vocab(list(dict.fromkeys(PIECES + extra)))
    tokens, eos = vocab.surface_bytes(), vocab.eos_id
    try:
        shared = compile_regex(grammar, tokens, eos)
    except ConstraintError:
        assume(False)
    alone = _unshared(monkeypatch, lambda: compile_regex(grammar, tokens, eos))
    rng = random.Random(seed)
    walks = []
    for _ in range(6):  # masked random walks of the shared automaton
        state, ids = shared.initial, []
        for _ in range(8):
            allowed = shared.allowed(torch.tensor([state]))[0].nonzero()[:, 0].tolist()
            choices = [t for t in allowed if t != eos]
            if not choices:
                break
            ids.append(rng.choice(choices))
            state = shared.walk([ids[-1]], state)
        walks.append(ids)
    _assert_rows_equal(shared, alone, walks)


JSON_LARK = r"""
?start: value
?value: object | array | string | SIGNED_NUMBER | "true" | "false" | "null"
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : string ":" value
string : ESCAPED_STRING
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""

DOCUMENTS = [
    '{"name": "Zoë", "tags": ["a", "bb", {"x": [1, 2.5, -3e4]}], "ok": true, "none": null}',
    '{"list": [{"a": 1}, {"b": "ß"}, {"c": [[], {}, "ünï"]}, {"d": {"e": {"f": [1, [2, [3]]]}}}]}',
    '{"k": "v", "n": null, "list": [[1, [2, [3]]], {"q": "r"}], "s": "a \\"quoted\\" word"}',
]
INDENTED = [json.dumps(json.loads(d), indent=1, ensure_ascii=False) for d in DOCUMENTS]


@pytest.fixture(scope="module")
def bpe():
    pytest.importorskip("tokenizers", reason="the test trains a byte-level BPE")
    pytest.importorskip("transformers", reason="the test trains a byte-level BPE")
    from decodekit.models.hf import HFVocab
    from tests.support.fakes import byte_bpe

    tok = byte_bpe((DOCUMENTS + INDENTED) * 20, 500, bos=False)
    vocab = HFVocab(tok, len(tok))
    return tok, tuple(vocab.surface_bytes()), vocab.eos_id


@pytest.mark.parametrize("name", ["json.lark", "json.gbnf"])
def test_shared_rows_equal_own_rows_on_json_over_a_bpe(bpe, monkeypatch, name):
    """Lark's JSON grammar (ignored whitespace) and llama.cpp's (counted indentation) over
    canonical and random tokenizations of nested documents; the canonical walks' states take
    fewer row keys with the lexemes' horizons than with every origin consulted over the longest
    token."""
    tok, tokens, eos = bpe
    grammar = Grammar(JSON_LARK, "lark") if name == "json.lark" else Grammar(JSON_GBNF, "gbnf")
    shared = compile_regex(grammar, tokens, eos)
    alone = _unshared(monkeypatch, lambda: compile_regex(grammar, tokens, eos))
    by_bytes = {t: i for i, t in enumerate(tokens) if t is not None}
    rng, walks = random.Random(3), []
    for doc in (DOCUMENTS[0], INDENTED[1], DOCUMENTS[2]):
        walks.append(tok.encode(doc, add_special_tokens=False))
        data = doc.encode("utf-8")
        ids, i = [], 0
        while i < len(data):  # a random split into tokens of the vocabulary
            n = rng.randint(1, 5)
            while n > 1 and data[i : i + n] not in by_bytes:
                n -= 1
            ids.append(by_bytes[data[i : i + n]])
            i += n
        walks.append(ids)
    states = _assert_rows_equal(shared, alone, walks[:2], budgets=(None, 3))
    states |= _assert_rows_equal(shared, alone, walks[2:], budgets=(None,))
    canonical = set()
    for ids in walks[::2]:
        state = shared.initial
        canonical.add(state)
        for t in ids:
            state = shared.walk([t], state)
            canonical.add(state)
    assert canonical <= states
    keys = {shared._key(s) for s in canonical}
    shared.bytes.horizons = None  # the bound without the vocabulary: the longest token everywhere
    wider = {shared.bytes.row_key(s, shared._longest + 10**6) for s in canonical}
    assert len(keys) < len(wider) < len(canonical), (len(keys), len(wider), len(canonical))


def test_follow_sets_of_an_ignored_terminal_are_every_terminal():
    grammar = Grammar('start: "a" "b"\n%ignore " "\n', "lark")
    gb = GrammarBytes(grammar.cfg)
    follows = follow_sets(gb.g)
    ignored = next(iter(gb.g.ignore))
    assert follows[ignored] == (1 << len(gb.g.term_names)) - 1
    assert all(f >> ignored & 1 for f in follows)


def test_lexeme_depths_read_off_an_alike_state_equal_their_own_walks(bpe):
    """``LexemeHorizons.reads`` skips the walk of a lexer state that reads the next bytes as a
    state already walked (a JSON indentation's deeper levels): every depth and key so taken
    equals what the state's own walk gives, and the shortcut is taken over indented documents."""
    from decodekit.constraints.tokens.horizons import LexemeHorizons

    tok, tokens, eos = bpe
    auto = compile_regex(Grammar(JSON_GBNF, "gbnf"), tokens, eos)
    bitmask = torch.zeros(1, (len(tokens) + 31) // 32, dtype=torch.int32)
    for doc in INDENTED + [json.dumps(json.loads(DOCUMENTS[1]), indent=4)]:
        state = auto.initial
        for t in tok.encode(doc, add_special_tokens=False):
            state = auto.walk([t], state)
            auto.fill_bitmask(bitmask, torch.tensor([state]))
    gb, seen = auto.bytes, auto.bytes.horizons
    fresh = LexemeHorizons(gb.lexer, gb.live_lexemes, gb.g.starts, gb.follows, seen.vocab)
    for q, key in seen._reads.items():
        fresh._walk(q, 0, followers=False)
        assert seen._deepest[q] == fresh._deepest[q], q
        own = gb.lexer.row_key(q, fresh._deepest[q] + 1)
        assert key == (("state", q) if own is None else ("reads", own)), q
    assert seen.walks_skipped > 0, "no lexer state's depth was read off another's"


@pytest.mark.parametrize("available", ["every byte", "no digit"])
def test_a_lexer_of_plain_terminals_reads_liveness_off_existence(bpe, available):
    """Terminals without intersection, complement or boundary: every lexer state the walks number
    is live exactly when its distance says so (the liveness read as ``q >= 0`` without asking),
    over every byte and over bytes that cannot spell a number."""
    import numpy as np

    tok, tokens, eos = bpe
    bytes_ = np.ones(256, dtype=bool)
    if available == "no digit":
        bytes_[list(b"0123456789")] = False
    gb = GrammarBytes(Grammar(JSON_LARK, "lark").regular, bytes_)
    assert gb._exists_is_live
    rng = random.Random(0)
    for doc in DOCUMENTS:
        s = 0
        for b in doc.encode("utf-8"):
            for c in rng.sample(range(256), 8):
                gb.step(s, c)
            if gb.step(s, b) < 0:
                break
            s = gb.step(s, b)
    qs = np.arange(-1, gb.lexer.size)
    assert gb.lexer.size > 20
    assert gb.live_lexemes(qs).tolist() == [q >= 0 and gb.lexer.distance(q) >= 0 for q in qs.tolist()]


def test_a_hash_collision_between_outcomes_falls_back_to_exact_tuples(monkeypatch):
    """``_learn_outcomes`` trusts its hash only after checking every pair against its outcome's
    first pair: with the hash made to lump every pair into one outcome, the states and their
    transitions are those of the plain run, over every byte of several JSON documents."""
    import numpy as np

    from decodekit.constraints.grammar import earley

    def walk(gb):
        rows = []
        for doc in DOCUMENTS:
            s = 0
            for b in doc.encode("utf-8"):
                gb.fill(np.full(256, s, dtype=np.int64), np.arange(256))
                rows.append(gb.table[s].tolist())
                s = int(gb.table[s, b])
                if s < 0:
                    break
        return rows, [(x.rules, x.lex, x.expect, x.accepting) for x in gb.sets]

    plain = walk(GrammarBytes(Grammar(JSON_LARK, "lark").regular))
    lumped = []

    def one_outcome(keys):
        lumped.append(len(keys))
        return np.zeros(1, dtype=np.int64), np.zeros(len(keys), dtype=np.int64)

    monkeypatch.setattr(earley, "first_and_inverse", one_outcome)
    assert walk(GrammarBytes(Grammar(JSON_LARK, "lark").regular)) == plain
    assert lumped and max(lumped) > 1  # the fallback was taken on fills of several pairs


def test_a_lexer_with_an_intersection_asks_its_states_liveness():
    """A terminal with an intersection (a JSON Schema's regular part, a Pattern): a lexer state
    may exist and be dead ("a" below: ``a(b|c)`` and ``a(c|d)x`` share no text), so liveness is
    read from distances; the byte states equal brute force over every text up to 4 characters."""
    import numpy as np
    import regex

    from decodekit.constraints.automata.protocol import UNKNOWN
    from decodekit.constraints.grammar.cfg import CFG, Rule, Terminal
    from tests.support.grammars import check_byte_states

    word = (Pattern("a(?:b|c)") & Pattern("a(?:c|d)x")) | Pattern("z+")
    cfg = CFG(
        "s",
        (Rule("s", ("W",)), Rule("s", ("W", "C", "s"))),
        {"W": Terminal("W", word), "C": Terminal("C", ",")},
    )
    available = np.zeros(256, dtype=bool)
    available[list(b"abcdxz,")] = True
    gb = GrammarBytes(cfg, available)
    assert not gb._exists_is_live

    class ByRows:  # each state's whole row made by fill (the walk's path), then read
        def __getattr__(self, name):
            return getattr(gb, name)

        def step(self, s: int, b: int) -> int:
            if gb.table[s, b] == UNKNOWN:
                gb.fill(np.full(256, s, dtype=np.int64), np.arange(256))
            return int(gb.table[s, b])

    assert ByRows().step(0, ord("a")) == -1  # the lexeme after "a" exists in the lexer and is dead
    member = lambda t: regex.fullmatch(r"z+(?:,z+)*", t) is not None  # noqa: E731
    check_byte_states(ByRows(), member, "abcdxz,", lookahead=3, length=4)
