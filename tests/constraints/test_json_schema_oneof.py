"""json_schema() for a oneOf whose branches overlap, and a not beyond types: exactly one branch
(each branch minus the others it may share a value with, a Pattern with a complement) where every
excluded branch's text holds every spelling of its values that the other branch writes; refused
otherwise. Proved against jsonschema: every short text over a small alphabet is accepted iff it
is valid (in the automaton's spelling: canonical numbers, strings in any spelling), and masked
decoding gives valid JSON."""

import itertools
import json

import pytest

import decodekit
from decodekit.constraints import compile_regex
from decodekit.constraints.automata.pattern import Pattern
from decodekit.constraints.frontends.schema import json_schema
from decodekit.errors import ConstraintError
from tests.constraints.test_json_schema import VOCAB, valid
from tests.support.fakes import HistoryLM, char_vocab

INTS = "-0123456789"
STRS = '"ab\\n'  # strings over a, b and the escapes \" \\ \n (and invalid ones)
ARRAYS = "[],-01"

EXACT = [
    ({"oneOf": [{"type": "integer", "maximum": 5}, {"type": "integer", "minimum": 3}]}, INTS, 3),
    ({"oneOf": [{"type": "integer", "multipleOf": 2}, {"type": "integer", "maximum": 4}]}, INTS, 3),
    ({"type": "integer", "not": {"minimum": 3}}, INTS, 3),
    ({"type": "integer", "not": {"multipleOf": 5}}, INTS, 3),
    ({"oneOf": [{"type": "string", "maxLength": 2}, {"type": "string", "minLength": 1}]}, STRS, 5),
    ({"type": "string", "oneOf": [{"minLength": 2}, {"maxLength": 3}]}, STRS, 5),
    ({"type": "string", "not": {"maxLength": 1}}, STRS, 5),
    ({"type": "integer", "not": {"enum": [3, 0]}}, INTS, 2),
    ({"oneOf": [{"enum": [1, "a"]}, {"type": "integer"}]}, INTS + '"a', 3),
    ({"oneOf": [{"type": ["integer", "null"]}, {"enum": [None, 1, 2]}]}, "-012nul", 4),
    (
        {"oneOf": [{"type": ["boolean", "string"]}, {"type": ["boolean", "string"], "maxLength": 1}]},
        '"a\\true',
        5,
    ),
    (
        {
            "type": "array",
            "items": {"type": "integer"},
            "oneOf": [{"maxItems": 1}, {"items": {"maximum": 0}}],
        },
        ARRAYS,
        5,
    ),
    (
        {
            "type": "array",
            "items": {"oneOf": [{"type": "integer", "maximum": 0}, {"type": "integer", "minimum": 0}]},
            "maxItems": 2,
        },
        ARRAYS,
        5,
    ),
]


def texts(alphabet: str, n: int):
    for k in range(1, n + 1):
        for chars in itertools.product(alphabet, repeat=k):
            yield "".join(chars)


def spelled(text: str) -> bool:
    """Whether ``text`` is in the automaton's spelling: compact, canonical numbers (no ``-0``,
    ``01``), a string in any spelling."""
    value = json.loads(text)
    return isinstance(value, str) or json.dumps(value, separators=(",", ":")) == text


@pytest.mark.parametrize("schema,alphabet,n", EXACT)
def test_exactly_one_branch_is_exact_on_every_short_text(schema, alphabet, n):
    pattern = json_schema(schema)
    assert isinstance(pattern, Pattern) and "~" in str(pattern)
    vocab = char_vocab(alphabet)
    auto = compile_regex(pattern, vocab.tokens)
    accepted = 0
    for text in texts(alphabet, n):
        ok, got = valid(schema, text), auto.accepts(vocab.encode(text))
        assert ok or not got, (schema, text)  # sound
        assert got or not ok or not spelled(text), (schema, text)  # exact in the spelling
        accepted += got
    assert accepted


@pytest.mark.parametrize("schema", [s for s, _, _ in EXACT[::2]])  # the rest: enumerated above
def test_masked_decoding_gives_valid_json(schema):
    constraint = json_schema(schema)
    finished = 0
    for seed in range(2):
        model = HistoryLM(len(VOCAB), seed=seed, bos_id=VOCAB.eos_id, eos_id=VOCAB.eos_id, vocab=VOCAB)
        [hyp] = decodekit.greedy(model, [], 40, constraint=constraint)
        samples = decodekit.sample(model, [], 40, generator=seed, num_samples=3, constraint=constraint)
        for h in [hyp, *samples]:
            if h.finished:
                finished += 1
                assert valid(schema, h.decode(VOCAB)), (schema, h.decode(VOCAB))
    assert finished


@pytest.mark.parametrize(
    "schema",
    [
        # a pattern's text is one spelling of a part of its strings: its complement is too large
        {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "maxLength": 2}]},
        # objects: a key order and extra members accepted but not written
        {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}}, {"type": "object"}]},
        # the JSON number grammar spells 3 as 3.0 and 3e0, which the integer branch never writes
        {"oneOf": [{"type": "number"}, {"type": "integer", "minimum": 3}, {"type": "number", "maximum": 1}]},
        # a string enum is one spelling of each ("a", not "\u0061")
        {"oneOf": [{"enum": ["a", "b"]}, {"type": "string"}]},
    ],
)
def test_a_oneof_whose_complement_would_not_be_exact_stays_refused(schema):
    with pytest.raises(ConstraintError, match="oneOf") as e:
        json_schema(schema)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "schema",
    [{"type": "number", "not": {"minimum": 3}}, {"type": "string", "not": {"pattern": "^a"}}],
)
def test_a_not_whose_complement_would_not_be_exact_stays_refused(schema):
    with pytest.raises(ConstraintError, match="/not: not needs the complement"):
        json_schema(schema)


def test_a_not_read_as_other_kinds_is_no_proof_for_a_oneof():
    """``not: {integer, minimum 3}`` is written as the non-integers, but it accepts 1 too: a
    oneOf beside the integers may not read it as disjoint from them."""
    schema = {"oneOf": [{"not": {"type": "integer", "minimum": 3}}, {"type": "integer"}]}
    assert not valid(schema, "1") and valid(schema, "5")
    try:
        pattern = json_schema(schema)
    except ConstraintError as e:
        assert "oneOf" in str(e) and "\n" not in str(e)
        return
    vocab = char_vocab(INTS + '"nultrefs[]{}.')
    auto = compile_regex(pattern, vocab.tokens)
    assert not auto.accepts(vocab.encode("1")) and auto.accepts(vocab.encode("null"))


def test_an_enum_beside_an_exact_oneof_keeps_only_values_of_one_branch():
    schema = {
        "enum": [1, 4, 7],
        "oneOf": [{"type": "integer", "maximum": 5}, {"type": "integer", "minimum": 3}],
    }
    vocab = char_vocab(INTS)
    auto = compile_regex(json_schema(schema), vocab.tokens)
    assert [t for t in ("1", "4", "7") if auto.accepts(vocab.encode(t))] == ["1", "7"]


def test_integers_minus_a_bounded_branch_are_exact():
    """``-0`` (an integer's text, value 0) is excluded with the bounded branch: it holds 0."""
    schema = {"oneOf": [{"type": "integer"}, {"type": "integer", "maximum": 3}]}
    vocab = char_vocab(INTS)
    auto = compile_regex(json_schema(schema), vocab.tokens)
    for text in texts(INTS, 3):
        ok, got = valid(schema, text), auto.accepts(vocab.encode(text))
        assert ok or not got, text
        assert got or not ok or not spelled(text), text


POOL = [
    {"type": "integer", "maximum": 2},
    {"type": "integer", "minimum": 1},
    {"type": "integer", "multipleOf": 2},
    {"type": "integer"},
    {"minimum": 1},
    {"type": "null"},
    {"enum": [0, None]},
    {"type": ["integer", "null"]},
    {"not": {"type": "integer", "maximum": 0}},
    {"type": "array", "items": {"type": "integer", "maximum": 1}},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 1},
]
EXTRA = ["null", "true", "1.0", "2e0", "-0", "[]", "[1]", "[2]", "[0,1]", "[-0]", "{}", '"a"']


def test_every_oneof_of_two_or_three_small_branches_is_sound():
    """Every oneOf of two or three schemas of the pool, with and without a sibling not: every
    short text it accepts is valid; most of them compile, many as exactly one branch."""
    vocab = char_vocab('-012nultre.[],{}"a')
    short = [*texts("-012", 3), *EXTRA]
    compiled = exclusive = 0
    combos = [*itertools.combinations(POOL, 2), *itertools.combinations(POOL[:5], 3)]
    for branches in combos:
        for extra in ({}, {"not": {"enum": [1]}}):
            schema = {"oneOf": list(branches), **extra}
            try:
                pattern = json_schema(schema)
            except ConstraintError as e:
                assert "\n" not in str(e)
                continue
            compiled += 1
            exclusive += "~" in str(pattern)
            try:
                auto = compile_regex(pattern, vocab.tokens)
            except ConstraintError as e:  # nothing written (every value in two branches, or a part)
                assert "no text" in str(e), schema
                continue
            for text in short:
                assert not auto.accepts(vocab.encode(text)) or valid(schema, text), (schema, text)
    assert compiled > len(combos) and exclusive > len(combos) // 2, (compiled, exclusive)


def test_flexible_whitespace_excludes_every_spacing():
    """Both sides write ``, ?``: ``[0, 1]`` and ``[0,1]`` are excluded alike."""
    schema = {
        "type": "array",
        "items": {"type": "integer"},
        "oneOf": [{"maxItems": 1}, {"items": {"maximum": 0}}],
    }
    vocab = char_vocab(ARRAYS + " ")
    auto = compile_regex(json_schema(schema, whitespace="flexible"), vocab.tokens)
    for text in ["[0, -1]", "[0,-1]", "[0]", "[1, 1]", "[1]", "[]", "[-1, 0]"]:
        assert auto.accepts(vocab.encode(text)) == valid(schema, text), text
