"""json_schema() where a string needs several of pattern, format and minLength/maxLength: the
front end writes their intersection as a Pattern expression. Proved against jsonschema: every
string over a small alphabet is accepted iff valid (exact), and masked greedy decoding and
sampling give valid JSON (sound); what needed no intersection is still a str."""

import itertools
import json

import pytest
import regex

import decodekit
from decodekit.constraints import compile_regex
from decodekit.constraints.automata.pattern import Pattern
from decodekit.constraints.frontends.schema import json_schema
from decodekit.errors import ConstraintError
from tests.constraints.test_json_schema import VOCAB, valid
from tests.support.fakes import HistoryLM, char_vocab

ALPHABET = "ab\n"
SMALL = char_vocab('"ab\\n')  # JSON text of strings over a, b, newline (\n escaped)

COMBINED = [
    {"type": "string", "pattern": "^(?:ab)+$", "minLength": 3},
    {"type": "string", "pattern": "^a", "maxLength": 3, "minLength": 2},
    {"type": "string", "allOf": [{"pattern": "^a"}, {"pattern": "b$"}]},
    {"type": "string", "pattern": "a", "allOf": [{"pattern": "b"}], "maxLength": 4},
    {"type": "string", "pattern": "\n", "minLength": 2, "maxLength": 3},
    {"type": "string", "allOf": [{"pattern": "^[ab]*$"}, {"pattern": "(?:aa|bb)"}], "maxLength": 4},
]


def texts(n: int):
    for k in range(n + 1):
        for chars in itertools.product(ALPHABET, repeat=k):
            yield json.dumps("".join(chars))


@pytest.mark.parametrize("schema", COMBINED)
def test_an_intersection_is_exact_on_every_short_string(schema):
    """Every string of up to 5 characters over a, b and newline (newline spelled ``\\n``: one
    decoded character, two of JSON text) is accepted iff jsonschema accepts it, except a final
    newline before a ``$``, which Python's ``re`` (jsonschema's) allows and ECMA-262 does not."""
    pattern = json_schema(schema)
    assert isinstance(pattern, Pattern) and pattern.combined
    auto = compile_regex(pattern, SMALL.tokens)
    dollar = "$" in json.dumps(schema)
    for text in texts(5):
        accepted, ok = auto.accepts(SMALL.encode(text)), valid(schema, text)
        assert ok or not accepted, (schema, text)  # sound
        assert accepted or not ok or (dollar and text.endswith('\\n"')), (schema, text)  # exact


@pytest.mark.parametrize(
    "schema",
    [
        *({**s, "maxLength": min(s.get("maxLength", 12), 12)} for s in COMBINED),
        {"type": "string", "format": "email", "maxLength": 10},
        {"type": "string", "format": "date", "pattern": "^2020-"},
        {"type": "string", "format": "uuid", "pattern": "^0"},
        {"type": "string", "format": "ipv4", "pattern": "^1", "maxLength": 9},
        {"type": "object", "properties": {"k": {"pattern": "^[a-c]", "minLength": 3}}, "required": ["k"]},
        {
            "type": "array",
            "items": {"pattern": "a", "allOf": [{"pattern": "b"}], "maxLength": 3},
            "minItems": 1,
        },
        {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^a", "maxLength": 2, "minLength": 2}]},
    ],
)
def test_masked_decoding_and_samples_give_valid_json(schema):
    constraint = json_schema(schema)
    assert isinstance(constraint, Pattern)
    finished = 0
    for seed in range(3):
        model = HistoryLM(len(VOCAB), seed=seed, bos_id=VOCAB.eos_id, eos_id=VOCAB.eos_id, vocab=VOCAB)
        [hyp] = decodekit.greedy(model, [], 60, constraint=constraint)
        samples = decodekit.sample(model, [], 60, generator=seed, num_samples=4, constraint=constraint)
        for h in [hyp, *samples]:
            if h.finished:  # an unbounded string may run past the length: no verdict there
                finished += 1
                assert valid(schema, h.decode(VOCAB)), h.decode(VOCAB)
    assert finished


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "^a+$", "maxLength": 3},
        {"type": "string", "format": "date"},
        {"type": "string", "format": "date", "minLength": 10, "maxLength": 10},
        {"type": "string", "pattern": "^a", "maxLength": 5},
        {"type": "string", "minLength": 2},
    ],
)
def test_what_needed_no_intersection_is_still_one_regex(schema):
    assert isinstance(json_schema(schema), str)


def test_contradicting_keywords_are_refused_when_compiled():
    pattern = json_schema({"type": "string", "pattern": "^a+$", "allOf": [{"pattern": "^b"}]})
    with pytest.raises(ConstraintError, match="no token sequence|no text"):
        compile_regex(pattern, SMALL.tokens)


NOT_OTHER_KINDS = [
    {"not": {"type": "object", "properties": {"foo": {"type": "string"}}}},
    {"not": {"type": "integer", "minimum": 3}},
    {"not": {"type": ["string", "array"], "maxLength": 2}},
]
VALUES = [
    "1",
    "7",
    "-2",
    "2.5",
    "1.0",
    '"a"',
    '"abc"',
    "[]",
    "[1]",
    "{}",
    '{"foo":1}',
    '{"foo":"x"}',
    "null",
    "true",
]


@pytest.mark.parametrize("schema", NOT_OTHER_KINDS)
def test_not_of_some_kinds_writes_the_other_kinds(schema):
    """``not`` of a subschema accepting only some kinds: every value of another kind fails it, so
    those are written (a part of what ``not`` allows); each text written is valid."""
    pattern = json_schema(schema)
    assert isinstance(pattern, str)
    written = [t for t in VALUES if regex.fullmatch(pattern, t)]
    assert written and all(valid(schema, t) for t in written), written
    model = HistoryLM(len(VOCAB), seed=0, bos_id=VOCAB.eos_id, eos_id=VOCAB.eos_id, vocab=VOCAB)
    [hyp] = decodekit.greedy(model, [], 40, constraint=pattern)
    assert not hyp.finished or valid(schema, hyp.decode(VOCAB)), hyp.decode(VOCAB)


@pytest.mark.parametrize(
    "schema",
    [{"not": {"minimum": 1}}, {"type": "string", "not": {"pattern": "^a"}}, {"not": {"maxLength": 2}}],
)
def test_not_of_a_subschema_every_kind_passes_stays_refused(schema):
    with pytest.raises(ConstraintError, match="/not: not needs the complement"):
        json_schema(schema)


BOTH_PATTERNS = [
    {
        "allOf": [
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}},
                "patternProperties": {"^x": {"maximum": 5}},
            },
            {
                "properties": {"xb": {"type": "integer", "minimum": 2}},
                "patternProperties": {"b$": {"maximum": 3}},
                "additionalProperties": False,
            },
        ]
    },
    {
        "type": "object",
        "properties": {"xa": {"type": "integer"}, "b": {}},
        "required": ["xa"],
        "patternProperties": {"a": {"minimum": 0}},
        "allOf": [{"patternProperties": {"^x": {"maximum": 1}}, "additionalProperties": {"type": "null"}}],
    },
]


@pytest.mark.parametrize("schema", BOTH_PATTERNS)
def test_allof_of_objects_with_pattern_properties_on_both_sides_is_sound(schema):
    """Every object of up to 2 members over keys a, b, xa, xb with values -1, 0, 2, 4, null that
    the regex accepts validates (the listed properties written, each with every side's
    subschemas; no extra key); and a valid listed object is written."""
    pattern = json_schema(schema)
    compiled = regex.compile(pattern)
    accepted = 0
    for n in range(3):
        for keys in itertools.permutations(["a", "b", "xa", "xb"], n):
            for values in itertools.product(["-1", "0", "2", "4", "null"], repeat=n):
                text = "{" + ",".join(f'"{k}":{v}' for k, v in zip(keys, values)) + "}"
                if compiled.fullmatch(text):
                    accepted += 1
                    assert valid(schema, text), (schema, text)
    assert accepted
