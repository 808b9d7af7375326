"""json_schema(): every text its regex matches is JSON valid against the schema (samples from the
regex and random walks through the compiled automaton, checked with jsonschema), hand-picked
documents, refusals naming their JSON pointer, agreement with outlines-core, one greedy run."""

import datetime
import json
import random
import re

import jsonschema
import pytest
import regex
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import decodekit
from decodekit.constraints import check_pattern, compile_for_vocab
from decodekit.constraints.frontends.schema import json_schema
from decodekit.constraints.grammar.cfg import CFG
from decodekit.errors import ConstraintError
from tests.support.fakes import HistoryLM, char_vocab
from tests.support.schema_match import fullmatcher

CHARS = "".join(chr(c) for c in range(32, 127)) + "é€😀\n"
VOCAB = char_vocab(CHARS)

SCHEMAS = {
    "flat": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "age": {"type": "integer"},
            "ok": {"type": "boolean"},
            "x": {"type": ["number", "null"]},
        },
        "required": ["name", "ok"],
    },
    "nested": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "items": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "type": "object",
                    "properties": {
                        "kind": {"enum": ["a", "b", 3, None, [1, 2]]},
                        "tags": {
                            "type": "array",
                            "items": {"type": "string", "minLength": 1, "maxLength": 3},
                        },
                    },
                    "required": ["kind"],
                },
            },
            "meta": {"type": "object", "properties": {"v": {"const": "1.0"}}},
        },
        "required": ["items"],
    },
    "ref": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"],
            }
        },
        "type": "array",
        "items": {"$ref": "#/$defs/point"},
        "maxItems": 4,
    },
    "anyof": {
        "anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 5}, {"type": "null"}]
    },
    "oneof": {"oneOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "number"}, "maxItems": 2}]},
    "formats": {
        "type": "object",
        "properties": {
            f: {"type": "string", "format": f} for f in ("date", "time", "date-time", "email", "ipv4")
        },
        "required": ["date", "date-time", "email", "ipv4"],
    },
    "ranges": {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": -37, "maximum": 1205},
            "b": {"type": "integer", "exclusiveMinimum": 9, "exclusiveMaximum": 101},
            "c": {"type": "number", "minimum": -2.5, "maximum": 7},
            "d": {"type": "number", "exclusiveMinimum": 0},
            "e": {"type": "integer", "maximum": -3},
        },
        "required": ["a", "b", "c", "d", "e"],
    },
    "strings": {
        "type": "array",
        "items": {
            "anyOf": [
                {"type": "string", "pattern": "^[A-Z][a-z0-9]{1,4}$"},
                {"type": "string", "minLength": 2},
            ]
        },
    },
    "free": {"type": "object", "properties": {"any": {}, "list": {"type": "array"}}, "required": ["any"]},
}
COMPILED = {name: json_schema(s) for name, s in SCHEMAS.items()}
FLEXIBLE = {name: json_schema(s, whitespace="flexible") for name, s in SCHEMAS.items()}


# jsonschema checks "date-time" and "time" only when the optional rfc3339-validator is installed:
# the tests check them themselves (RFC 3339 section 5.6, with the standard library) either way
FORMATS = jsonschema.FormatChecker()
FORMATS.checkers = dict(jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers)
FULL_TIME = r"(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))"
RFC3339 = re.compile(r"(?:(\d{4}-\d{2}-\d{2})[Tt])?" + FULL_TIME, re.ASCII)


def _rfc3339(text: str, with_date: bool) -> bool:
    m = RFC3339.fullmatch(text)
    if m is None or (m[1] is not None) != with_date:
        return False
    try:
        if with_date:
            datetime.date.fromisoformat(m[1])
    except ValueError:
        return False
    hour, minute, second = int(m[2]), int(m[3]), int(m[4])
    offset_ok = m[5] is None or (int(m[5]) < 24 and int(m[6]) < 60)
    return hour < 24 and minute < 60 and second <= 60 and offset_ok  # 60: a leap second


FORMATS.checks("date-time")(lambda text: not isinstance(text, str) or _rfc3339(text, True))
FORMATS.checks("time")(lambda text: not isinstance(text, str) or _rfc3339(text, False))


def valid(schema, text: str) -> bool:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return False
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return validator(schema, format_checker=FORMATS).is_valid(value)


@pytest.mark.parametrize("name", SCHEMAS)
def test_regex_is_in_decodekits_dialect_and_compiles(name):
    for pattern in (COMPILED[name], FLEXIBLE[name]):
        check_pattern(pattern)
        assert compile_for_vocab(pattern, VOCAB).shortest >= 1


@pytest.mark.parametrize("name", [n for n in SCHEMAS if n != "free"])  # free: slow to draw from
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_samples_of_the_regex_are_valid(name, data):
    flexible = data.draw(st.booleans())
    text = data.draw(st.from_regex((FLEXIBLE if flexible else COMPILED)[name], fullmatch=True))
    assert valid(SCHEMAS[name], text), text


def random_walk(auto, rng: random.Random, max_len: int = 120) -> str:
    """A random accepted text of the automaton: tokens drawn uniformly among those that can still
    reach acceptance within ``max_len``; stops with probability 1/4 in accepting states."""
    state, text = auto.initial, []
    for left in range(max_len, 0, -1):
        row = auto.next_state[state]
        ok = [
            t
            for t in (row >= 0).nonzero().flatten().tolist()
            if auto.min_tokens_to_accept[row[t]] <= left - 1
        ]
        if auto.accepting[state] and (not ok or rng.random() < 0.25):
            break
        token = rng.choice(ok)
        text.append(VOCAB.decode([token]))
        state = int(row[token])
    assert auto.accepting[state]
    return "".join(text)


@pytest.mark.parametrize("name", SCHEMAS)
def test_random_walks_through_the_automaton_are_valid(name):
    rng = random.Random(name)
    for pattern in (COMPILED[name], FLEXIBLE[name]):
        auto = compile_for_vocab(pattern, VOCAB)
        for _ in range(25):
            text = random_walk(auto, rng)
            assert valid(SCHEMAS[name], text), text


HAND = {  # (schema, documents that must match, valid documents that must not: outside the subset)
    "flat": (
        [
            '{"name":"bo","ok":true}',
            '{"name":"\\u00e9\\n\\"","age":-0,"ok":false,"x":null}',
            '{"name":"","ok":true,"x":-1.5E+3}',
        ],
        [
            '{"ok":true,"name":"bo"}',
            '{"name":"bo","ok":true,"extra":1}',
            '{"name": "bo","ok":true}',
            '{"name":"\\ud800","ok":true}',  # a lone surrogate: valid for jsonschema, never generated
        ],
    ),
    "ranges": (
        ['{"a":-37,"b":10,"c":-2,"d":0.5,"e":-3}', '{"a":1205,"b":100,"c":6.75,"d":12,"e":-1000000}'],
        ['{"a":-37,"b":10,"c":-2.5,"d":1e3,"e":-3}'],  # -2.5 and 1e3 are valid but not generated
    ),
    "formats": (
        [
            '{"date":"2024-02-29","date-time":"1999-12-31T23:59:59.5+01:00","email":"a.b@c.de","ipv4":"10.0.0.255"}'
        ],
        [],
    ),
    "ref": (["[]", '[{"x":1,"y":-2},{"x":0,"y":0}]'], []),
    "anyof": (['"ab"', "5", "123", "null"], []),
}
INVALID = {  # documents no regex may match: invalid JSON or invalid against the schema
    "flat": [
        '{"name":"toolongname","ok":true}',
        '{"name":"a","ok":1}',
        '{"name":"a"}',
        '{"name":"\x01","ok":true}',
    ],
    "ranges": [
        '{"a":-38,"b":10,"c":0,"d":1,"e":-3}',
        '{"a":0,"b":9,"c":0,"d":1,"e":-3}',
        '{"a":0,"b":10,"c":7.5,"d":1,"e":-3}',
        '{"a":0,"b":10,"c":0,"d":0,"e":-3}',
        '{"a":0,"b":10,"c":0,"d":0.0,"e":-3}',
        '{"a":01,"b":10,"c":0,"d":1,"e":-3}',
    ],
    "formats": [
        '{"date":"2023-02-29","date-time":"1999-12-31T23:59:59Z","email":"a@b.c","ipv4":"1.2.3.4"}',
        '{"date":"2024-02-29","date-time":"1999-12-31T24:00:00Z","email":"a@b.c","ipv4":"1.2.3.4"}',
        '{"date":"2024-02-29","date-time":"1999-12-31T23:00:00Z","email":"a@b.c","ipv4":"1.2.3.04"}',
        '{"date":"0000-01-01","date-time":"1999-12-31T23:59:59Z","email":"a@b.c","ipv4":"1.2.3.4"}',
    ],
    "ref": [
        '[{"x":1}]',
        "[{},{},{},{},{}]",
        '[{"x":1,"y":2},{"x":1,"y":2},{"x":1,"y":2},{"x":1,"y":2},{"x":1,"y":2}]',
    ],
    "anyof": ['"abc"', "4", "-5", "true"],
    "oneof": ["[1,2,3]", '["a"]', "null"],
    "nested": [
        '{"items":[]}',
        '{"items":[{"kind":"c"}]}',
        '{"items":[{"kind":3,"tags":[""]}]}',
        '{"items":[{"kind":[2,1]}]}',
    ],
}


@pytest.mark.parametrize("name", HAND)
def test_hand_picked_documents(name):
    must, outside = HAND[name]
    for text in must:
        assert valid(SCHEMAS[name], text) and regex.fullmatch(COMPILED[name], text), text
    for text in outside:
        assert valid(SCHEMAS[name], text) and not regex.fullmatch(COMPILED[name], text), text


@pytest.mark.parametrize("name", INVALID)
def test_invalid_documents_never_match(name):
    for text in INVALID[name]:
        assert not valid(SCHEMAS[name], text), text
        for pattern in (COMPILED[name], FLEXIBLE[name]):
            assert not regex.fullmatch(pattern, text), text


def test_flexible_whitespace_is_one_optional_space_after_colon_and_comma():
    pattern = FLEXIBLE["flat"]
    assert regex.fullmatch(pattern, '{"name": "a", "ok": true,"x":[][:0]null}'.replace("[][:0]", ""))
    assert not regex.fullmatch(pattern, '{ "name":"a","ok":true}')
    assert not regex.fullmatch(pattern, '{"name":  "a","ok":true}')


@pytest.mark.parametrize(
    "schema,message",
    [
        (
            {"type": "object", "properties": {"age": {"type": "integer", "multipleOf": 3}}},
            "/properties/age/multipleOf is not supported",
        ),
        ({"type": "string", "format": "regex"}, "/format 'regex' is not supported"),
        (
            {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "maxLength": 3}]},
            "/oneOf: oneOf (its branches overlap in every kind of value)",
        ),
        ({"$ref": "#/$defs/missing"}, "does not resolve"),
        ({"$ref": "http://example.com/s.json"}, "only local references"),
        ({"type": "integer", "minimum": 5, "maximum": 4}, "allows no value"),
        ({"type": "string", "enum": [1, 2]}, "/enum: no value satisfies"),
        ({"not": {"minimum": 1}}, "/not: not needs the complement"),
        ("{not json", "not valid JSON"),
        ({"type": []}, "/type must be a type name"),
    ],
)
def test_refusals_name_the_keyword_and_its_pointer(schema, message):
    with pytest.raises(ConstraintError, match=regex.escape(message)):
        json_schema(schema)


# Refused before, and now compiled (every sample validates): the keywords lifted by the normal form
FORMERLY_REFUSED = [
    {"type": "integer", "multipleOf": 2},
    {"type": "string", "pattern": "a+"},
    {"type": "string", "pattern": "^a.b$"},
    {"type": "string", "pattern": "^\\s$"},
    {"type": "string", "pattern": "^a$", "maxLength": 3},
    {"type": "string", "format": "hostname"},
    {"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}, "$ref": "#/$defs/t"},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/x", "maxLength": 2}}, "$defs": {"x": {}}},
    {"type": "object", "required": ["a"]},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": [{"type": "integer"}]},
    {"type": "array", "uniqueItems": True},
    {"not": {"type": "null"}},
    {"allOf": [{"type": "null"}, {"type": "null"}]},
    {"type": "object", "properties": {"p": {"$id": "x", "type": "null"}}},
]


CANDIDATES = [
    "null",
    "true",
    "0",
    "2",
    "-7",
    "1.5",
    '""',
    '"a"',
    '"ab"',
    '"a\\"b"',
    '"a\\tb"',
    '"\\t"',
    '"aaa"',
    '"x.example"',
    "[]",
    "[1]",
    "[[]]",
    "[[],[[]]]",
    "[1,1]",
    "[1,2]",
    '["a","a"]',
    "{}",
    '{"a":1}',
    '{"a":"ab"}',
    '{"a":null}',
    '{"p":null}',
    '{"a":[]}',
]


@pytest.mark.parametrize("schema", FORMERLY_REFUSED)
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_formerly_refused_schemas_compile_soundly(schema, data):
    pattern = json_schema(schema)
    if isinstance(pattern, CFG):  # a recursion: its grammar's automaton judges the candidates
        match = fullmatcher(pattern, CANDIDATES)
        texts = [t for t in CANDIDATES if match.fullmatch(t)]
    else:
        texts = [t for t in CANDIDATES if regex.fullmatch(pattern, t)]
    if isinstance(pattern, str) and len(pattern) < 3000:
        texts.append(data.draw(st.from_regex(pattern, fullmatch=True)))
    assert texts
    for text in texts:
        assert valid(schema, text), text


def test_enum_is_filtered_by_its_siblings_and_text_schemas_are_read():
    assert json_schema({"type": "integer", "enum": [1, "1", 2.5, 3]}) == "(?:1|3)"
    assert json_schema('{"const": "a\\"b"}') == '"a\\\\"b"'
    assert regex.fullmatch(json_schema({"const": {"k": [1, None]}}), '{"k":[1,null]}')


def test_integer_ranges_are_exact():
    rng = random.Random(0)
    for _ in range(60):
        lo, hi = sorted(rng.randint(-3000, 3000) for _ in range(2))
        lo, hi = rng.choice([lo, None]), rng.choice([hi, None])
        pattern = regex.compile(
            json_schema(
                {
                    "type": "integer",
                    **({"minimum": lo} if lo is not None else {}),
                    **({"maximum": hi} if hi is not None else {}),
                }
            )
        )
        for n in range(-3100, 3100, 7):
            assert bool(pattern.fullmatch(str(n))) == ((lo is None or n >= lo) and (hi is None or n <= hi)), (
                lo,
                hi,
                n,
            )


OUTLINES_SCHEMAS = ["flat", "ref", "ranges"]


@pytest.mark.parametrize("name", OUTLINES_SCHEMAS)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_agrees_with_outlines_core_on_its_samples(name, data):
    """outlines-core's regex for these schemas is a subset of ours (strings without \\u escapes),
    but for its integers unbounded: ours have at most 18 digits without an upper bound
    (docs/constraints.md), so its samples with a longer integer part are not compared ("ranges"
    compares strings of its own values, its bounds ignored)."""
    outlines = pytest.importorskip("outlines_core.json_schema")
    schema = SCHEMAS[name]
    if name == "ranges":  # outlines-core ignores the bounds: compare the unbounded schema
        schema = {**schema, "properties": {k: {"type": v["type"]} for k, v in schema["properties"].items()}}
    theirs = outlines.build_regex_from_schema(json.dumps(schema), whitespace_pattern="")
    text = data.draw(st.from_regex(theirs, fullmatch=True))
    assume(not re.search(r'(?<![0-9."])-?[1-9][0-9]{18}', text))  # past the documented 18-digit cap
    assert regex.fullmatch(json_schema(schema), text), text
    assert valid(schema, text)


def test_greedy_under_a_schema_gives_valid_json():
    schema = SCHEMAS["nested"]
    model = HistoryLM(len(VOCAB), seed=5, bos_id=VOCAB.eos_id, eos_id=VOCAB.eos_id, vocab=VOCAB)
    [hyp] = decodekit.greedy(model, [], 120, constraint=json_schema(schema))
    assert hyp.finished
    assert valid(schema, hyp.decode(VOCAB)), hyp.decode(VOCAB)
