"""json_schema() on the cases that were unsound or wrongly refused, and on generated schemas:
every text the regex fully matches (samples of the regex, masked greedy decoding) is JSON that
jsonschema accepts; what needs an intersection or a complement is refused in one line."""

import json
import math
import time
from decimal import ROUND_FLOOR, Decimal

import jsonschema
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import decodekit
from decodekit.constraints.automata.pattern import Pattern
from decodekit.constraints.frontends.schema import MAX_REF_UNROLL, json_schema, limits
from decodekit.errors import ConstraintError
from tests.constraints.test_json_schema import VOCAB, valid
from tests.support.fakes import HistoryLM
from tests.support.schema_match import fullmatcher


def matches(schema, text: str) -> bool:
    return fullmatcher(json_schema(schema), [text]).fullmatch(text)


def refused(schema, says: str) -> str:
    with pytest.raises(ConstraintError) as e:
        json_schema(schema)
    message = str(e.value)
    assert says in message and "\n" not in message, message
    return message


# ---------------------------------------------------------------------------------------------
# oneOf / anyOf branches without "type": disjointness by the values a branch accepts


@pytest.mark.parametrize(
    "schema,both",
    [
        ({"oneOf": [{"type": "integer"}, {"maxLength": 3}]}, "5"),
        ({"oneOf": [{"type": "string"}, {"minimum": 0}]}, '"abc"'),
        ({"oneOf": [{"type": "null"}, {"properties": {"a": {"type": "integer"}}}]}, "null"),
        ({"$defs": {"x": {"maxLength": 3}}, "oneOf": [{"type": "integer"}, {"$ref": "#/$defs/x"}]}, "5"),
    ],
)
def test_oneof_with_overlapping_branches_writes_neither_overlap(schema, both):
    """The kind both branches may share is written by neither (a part of what oneOf allows)."""
    assert not valid(schema, both)  # the value matches two branches: invalid
    pattern = regex.compile(json_schema(schema))
    assert not pattern.fullmatch(both)
    for text in ["null", "true", "2.5", '"ab"', "[]", "{}", '{"a":1}', "7"]:
        if pattern.fullmatch(text):
            assert valid(schema, text), text


@pytest.mark.parametrize(
    "schema,texts",
    [
        ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, ["5", '"a"']),
        ({"oneOf": [{"enum": [1, 2]}, {"enum": ["1", 3]}]}, ["1", '"1"', "3"]),
        ({"oneOf": [{"type": "integer", "maximum": 0}, {"type": "integer", "minimum": 1}]}, ["0", "7"]),
        (
            {
                "oneOf": [
                    {"type": "object", "properties": {"k": {"const": "a"}, "x": {}}, "required": ["k"]},
                    {"type": "object", "properties": {"k": {"const": "b"}}, "required": ["k"]},
                ]
            },
            ['{"k":"a"}', '{"k":"b"}', '{"k":"a","x":1}'],
        ),
    ],
)
def test_oneof_with_disjoint_branches_compiles(schema, texts):
    for text in texts:
        assert valid(schema, text) and matches(schema, text), text


def test_untyped_schemas_generate_every_kind_their_keywords_allow():
    for schema, text in [
        ({"maxLength": 2}, "100"),
        ({"maxLength": 2}, "null"),
        ({"minimum": 0}, '"abc"'),
        ({"properties": {"a": {"type": "integer"}}}, "[]"),
        ({"anyOf": [{"maxLength": 1}, {"type": "null"}]}, "true"),
    ]:
        assert valid(schema, text) and matches(schema, text), (schema, text)
    assert not matches({"maxLength": 2}, '"abc"')


def test_anyof_ref_and_allof_beside_siblings_distribute():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "anyOf": [{"properties": {"a": {"maximum": 3}}}, {"properties": {"a": {"minimum": 10}}}],
        "allOf": [{"properties": {"a": {"minimum": 0}}}],
    }
    for n in range(-3, 14):
        text = f'{{"a":{n}}}'
        assert matches(schema, text) == valid(schema, text), n
    ref = {"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2}
    assert matches(ref, '"ab"') and not matches(ref, '"abc"')


# ---------------------------------------------------------------------------------------------
# pattern as ECMA-262


def test_posix_looking_classes_are_read_as_ecma_262_reads_them():
    schema = {"type": "string", "pattern": "^[[:digit:]]+$"}
    assert not valid(schema, '"123"') and not matches(schema, '"123"')
    for text in ['"d]"', '"t]]]"', '":]"']:
        assert valid(schema, text) and matches(schema, text), text


@pytest.mark.parametrize(
    "pattern", [r"^\p{L}+$", r"^\p{Letter}+$", "^(?i)abc$", r"(a)\1", "(?=a)", r"\bx", "a{,3}"]
)
def test_patterns_read_differently_are_refused(pattern):
    refused({"type": "string", "pattern": pattern}, "pattern")


def test_unanchored_patterns_are_searches_and_escapes_are_written_as_json():
    schema = {"type": "string", "pattern": "ab+"}
    for text in ['"ab"', '"xxabbby"', '"\\n ab \\""']:
        assert valid(schema, text) and matches(schema, text), text
    assert not matches(schema, '"a b"')
    dot = {"type": "string", "pattern": "^a.b$"}
    assert matches(dot, '"a\\"b"') and matches(dot, '"a\\tb"') and not matches(dot, '"a\\nb"')
    digits = {"type": "string", "pattern": r"^\d+$"}
    assert matches(digits, '"42"') and not matches(digits, '"\u0664"')  # Arabic-Indic 4: not in ECMA-262
    spaces = {"type": "string", "pattern": r"^\s$"}
    assert matches(spaces, '"\\t"') and not matches(spaces, '"\x1c"')  # \x1c: \s in Python re only


# ---------------------------------------------------------------------------------------------
# numbers as json.loads reads them


def test_exclusive_bounds_and_long_fractions():
    schema = {"type": "number", "exclusiveMaximum": 1}
    assert not valid(schema, "0.99999999999999999999") and not matches(schema, "0.99999999999999999999")
    assert matches(schema, "0.999999") and matches(schema, "-12.5")
    big = "1" * 4301
    for s in ({"type": "integer"}, {"type": "number"}, {"minimum": 0}, {}):
        assert not matches(s, big), s
    assert matches({"type": "number", "minimum": 14.86, "maximum": 14.86}, "14.86")
    between = {"type": "number", "minimum": 0.1, "maximum": 0.9}
    assert matches(between, "0.5") and matches(between, "0.1") and not matches(between, "0.95")
    assert not matches({"type": "number", "exclusiveMinimum": 0.1, "maximum": 1}, "0.1")


def _near(b) -> list[str]:
    """Numerals near the bound ``b``: integers, decimals of 1-20 fraction digits, exponents."""
    out = []
    for base in (math.floor(b) - 1, math.floor(b), math.ceil(b), math.ceil(b) + 1):
        out += [str(base), f"{base}.0", f"{base}e0"]
    for digits in (1, 2, 3, 6, 7, 15, 16, 17, 20):
        for delta in (-1, 0, 1):
            d = (
                Decimal(repr(b)).quantize(Decimal(10) ** -digits, rounding=ROUND_FLOOR)
                + delta * Decimal(10) ** -digits
            )
            out.append(str(d))
    return out + [s.replace("-", "") for s in out] + ["-" + s.lstrip("-") for s in out]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    lo=st.one_of(st.none(), st.floats(-1000, 1000), st.integers(-1000, 1000)),
    hi=st.one_of(st.none(), st.floats(-1000, 1000), st.integers(-1000, 1000)),
    strict=st.tuples(st.booleans(), st.booleans()),
    integer=st.booleans(),
)
def test_bounded_numbers_are_exact_as_floats(lo, hi, strict, integer):
    """Every numeral near a bound that the regex matches is valid as json.loads reads it."""
    schema = {"type": "integer" if integer else "number"}
    if lo is not None:
        schema["exclusiveMinimum" if strict[0] else "minimum"] = lo
    if hi is not None:
        schema["exclusiveMaximum" if strict[1] else "maximum"] = hi
    try:
        pattern = regex.compile(json_schema(schema))
    except ConstraintError as e:
        assert "allows no value" in str(e)
        return
    accepted = 0
    for text in {t for b in (lo, hi) if b is not None for t in _near(b)} | {"0", "0.5", "-0.5"}:
        if pattern.fullmatch(text):
            accepted += 1
            assert valid(schema, text), (schema, text)
    assert accepted or lo is not None and hi is not None and hi - lo < 1


# ---------------------------------------------------------------------------------------------
# enum beside siblings, empty items, messages


def test_enum_values_the_siblings_accept_are_kept():
    assert matches({"type": "object", "enum": [{"a": 1}]}, '{"a":1}')
    assert matches({"minimum": 1.2, "enum": [1.5, 1]}, "1.5")
    assert not matches({"minimum": 1.2, "enum": [1.5, 1]}, "1")
    assert matches({"type": "array", "items": {"type": "integer"}, "enum": [[1.0], [1.5]]}, "[1.0]")
    assert not matches({"type": "array", "items": {"type": "integer"}, "enum": [[1.0], [1.5]]}, "[1.5]")
    refused({"type": "string", "enum": [1, 2]}, "/enum: no value satisfies")


def test_items_that_allow_no_value_still_allow_the_empty_array():
    schema = {"type": "array", "items": {"type": "integer", "minimum": 5, "maximum": 4}}
    assert matches(schema, "[]") and not matches(schema, "[5]")
    refused({"type": "array", "items": False, "minItems": 1}, "allows no value")


def test_a_property_name_with_a_newline_gives_a_one_line_message():
    message = refused(
        {"type": "object", "properties": {"a\nb": {"multipleOf": 3}}}, "multipleOf is not supported"
    )
    assert "'/properties/a\\nb" in message


@pytest.mark.parametrize(
    "schema,says",
    [
        ({"type": "integer", "multipleOf": 3}, "/multipleOf is not supported"),
        ({"type": "string", "not": {"pattern": "^a"}}, "/not: not needs the complement"),
        ({"not": {"minimum": 3}}, "/not: not needs the complement"),
        ({"$ref": "#/$defs/missing"}, "does not resolve"),
        ({"$ref": "http://example.com/s.json"}, "only local references"),
        ({"type": "string", "format": "regex"}, "/format 'regex' is not supported"),
        (
            {"type": "array", "uniqueItems": True, "minItems": 2},
            "/uniqueItems is not supported with minItems > 1",
        ),
        ({"unevaluatedProperties": False}, "/unevaluatedProperties is not supported"),
        ({"type": "integer", "minimum": 5, "maximum": 4}, "allows no value"),
    ],
)
def test_what_stays_refused_is_one_line_with_its_pointer(schema, says):
    refused(schema, says)


# ---------------------------------------------------------------------------------------------
# coverage: annotations ignored, formats, objects, arrays


def test_annotations_and_unknown_keywords_are_ignored():
    schema = {
        "type": "object",
        "title": "t",
        "description": "d",
        "examples": [1],
        "default": {},
        "$comment": "c",
        "id": "x",
        "self": {"href": "y"},
        "links": [],
        "x-kubernetes-preserve-unknown-fields": True,
        "javaType": "Foo",
        "properties": {"p": {"$id": "p", "type": "null", "format": "my-own-format", "deprecated": True}},
        "required": ["p"],
    }
    assert matches(schema, '{"p":null}')


@pytest.mark.parametrize(
    "fmt,good,bad",
    [
        (
            "date-time",
            ["1998-12-31t23:59:60z", "1998-12-31T23:59:60+00:00", "2024-02-29T00:00:00.5Z"],
            ["1998-12-31T12:59:60Z"],
        ),
        ("time", ["23:59:60Z", "08:30:00+05:30"], ["24:00:00Z"]),
        ("ipv6", ["::", "::1", "fe80::1:2", "1:2:3:4:5:6:7:8"], ["1:2:3:4:5:6:7:8:9", ":::"]),
        ("uri", ["https://example.com/a/b", "http://a.b:8080/"], ["example.com"]),
        ("uuid", ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000"]),
    ],
)
def test_formats(fmt, good, bad):
    schema = {"type": "string", "format": fmt}
    for text in good:
        assert valid(schema, json.dumps(text)) and matches(schema, json.dumps(text)), text
    for text in bad:
        assert not matches(schema, json.dumps(text)), text


def test_pattern_properties_additional_properties_and_counts():
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "patternProperties": {"^x-[a-z]+$": {"type": "string", "maxLength": 2}},
        "additionalProperties": False,
        "minProperties": 1,
        "maxProperties": 2,
    }
    for text in ['{"id":1}', '{"x-a":"ok"}', '{"id":1,"x-ab":""}']:
        assert valid(schema, text) and matches(schema, text), text
    for text in ["{}", '{"id":1,"x-a":"b","x-b":"c"}', '{"y":1}', '{"x-a":"long"}']:
        assert not matches(schema, text), text
    free = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": {"type": "boolean"},
    }
    assert matches(free, '{"a":1,"b":true,"c_2":false}') and not matches(free, '{"a":1,"a":true}')


def test_unique_items_where_regular():
    enum = {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True}
    assert matches(enum, '["a","c","b"]') and not matches(enum, '["a","a"]')
    booleans = {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}
    assert matches(booleans, "[true,false]") and not matches(booleans, "[true,true]")
    strings = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    assert matches(strings, '["x"]') and matches(strings, "[]") and not matches(strings, '["x","y"]')


def test_recursive_ref_is_a_grammar_of_any_depth():
    """A recursive $ref is a nonterminal (issue 38 item 6): any depth is written, and only
    valid nestings."""
    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}},
            }
        },
        "$ref": "#/$defs/node",
    }
    deep = '{"v":1,"next":' * (4 * MAX_REF_UNROLL) + "{}" + "}" * (4 * MAX_REF_UNROLL)
    assert valid(schema, deep) and matches(schema, deep)
    wrong = '{"v":1,"next":' * (4 * MAX_REF_UNROLL) + '{"v":"x"}' + "}" * (4 * MAX_REF_UNROLL)
    assert not valid(schema, wrong) and not matches(schema, wrong)
    shallow = '{"v":1,"next":' * (MAX_REF_UNROLL - 1) + "{}" + "}" * (MAX_REF_UNROLL - 1)
    assert matches(schema, shallow)
    tree = {"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}, "$ref": "#/$defs/t"}
    assert matches(tree, "[[],[[]]]")


def test_size_is_bounded_by_the_dag_before_the_text_is_built(monkeypatch):
    """12**8 paths to the innermost string: one node per definition (a DAG of about 12,000), so
    it compiles; with the bound lowered under the DAG's size it is refused, fast."""
    layer = {"type": "object", "properties": {f"p{i}": {"$ref": "#/$defs/l1"} for i in range(12)}}
    defs = {
        f"l{d}": {"type": "object", "properties": {f"q{i}": {"$ref": f"#/$defs/l{d + 1}"} for i in range(12)}}
        for d in range(1, 8)
    }
    defs["l8"] = {"type": "string"}
    schema = {"$defs": defs, **layer}
    start = time.process_time()
    pattern = json_schema(schema)
    assert time.process_time() - start < 5.0
    assert pattern.size() < 50_000 < 10**9 < pattern.text_length()
    monkeypatch.setattr(limits, "MAX_PATTERN_CHARS", 5_000)
    start = time.process_time()
    refused(schema, "automaton states")
    assert time.process_time() - start < 2.0


# ---------------------------------------------------------------------------------------------
# generated schemas: whatever compiles is sound

LEAF = st.one_of(
    st.just({}),
    st.builds(lambda t: {"type": t}, st.sampled_from(["null", "boolean", "integer", "number", "string"])),
    st.builds(
        lambda a, b: {"type": "integer", "minimum": min(a, b), "maximum": max(a, b)},
        st.integers(-50, 50),
        st.integers(-50, 50),
    ),
    st.builds(lambda a: {"exclusiveMinimum": a}, st.floats(-5, 5).map(lambda x: round(x, 2))),
    st.builds(lambda n: {"maxLength": n}, st.integers(0, 3)),
    st.builds(
        lambda p: {"type": "string", "pattern": p},
        st.sampled_from(["^a[bc]*$", "x", "^[^a]?$", r"^\d{2}$", "^(?:ab|c)+$"]),
    ),
    st.builds(
        lambda vs: {"enum": vs},
        st.lists(st.sampled_from([0, 1, 1.5, "a", None, True, [1], {"k": 2}]), min_size=1, max_size=3),
    ),
    st.builds(lambda f: {"type": "string", "format": f}, st.sampled_from(["date", "ipv4", "email"])),
    st.builds(lambda t: {"not": {"type": t}}, st.sampled_from(["string", "integer", "object"])),
)


def _extend(children):
    props = st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3)
    return st.one_of(
        st.builds(
            lambda p, r, add: {"type": "object", "properties": p, "required": [k for k in p if r], **add},
            props,
            st.booleans(),
            st.sampled_from(
                [{}, {"additionalProperties": False}, {"additionalProperties": {"type": "integer"}}]
            ),
        ),
        st.builds(
            lambda i, lo, u: {
                "type": "array",
                "items": i,
                "minItems": lo,
                "maxItems": lo + 2,
                "uniqueItems": u,
            },
            children,
            st.integers(0, 1),
            st.booleans(),
        ),
        st.builds(lambda bs: {"anyOf": bs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda bs: {"oneOf": bs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda bs: {"allOf": bs}, st.lists(children, min_size=1, max_size=2)),
        st.builds(lambda a, b: {**a, **b}, children, children),
    )


SCHEMAS = st.recursive(LEAF, _extend, max_leaves=6)


JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-60, 60),
        st.sampled_from([1.5, -0.25, 0.0, 3.12, 1e3]),
        st.sampled_from(["", "a", "ab", "abc", "x", "c", "12", "2024-02-29", "1.2.3.4", "a@b.cd", "\n", '"']),
    ),
    lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "c", "k"]), kids, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=SCHEMAS, values=st.lists(JSON, min_size=40, max_size=40), data=st.data())
def test_generated_schemas_accept_only_valid_json(schema, values, data):
    """Whatever compiles is sound: JSON values near the schema's vocabulary that the regex
    matches validate (and a sample of the regex, where it is short enough to draw from)."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError:
        return
    try:
        pattern = json_schema(schema)
    except ConstraintError as e:
        assert "\n" not in str(e)
        return
    texts = [json.dumps(v, separators=(",", ":"), ensure_ascii=False) for v in values]
    if isinstance(pattern, str) and len(pattern) < 3000:
        texts.append(data.draw(st.from_regex(pattern, fullmatch=True)))
    compiled = fullmatcher(pattern, texts)
    for text in texts:
        if compiled.fullmatch(text):
            assert valid(schema, text), (schema, text)


@pytest.mark.parametrize(
    "schema",
    [
        {"oneOf": [{"type": "integer", "minimum": 3}, {"type": "string", "pattern": "^[a-c]+$"}]},
        {
            "type": "object",
            "properties": {"n": {"maxLength": 1}, "m": {"type": "number", "exclusiveMinimum": 0.5}},
            "required": ["n", "m"],
        },
    ],
)
def test_masked_greedy_decoding_gives_valid_json(schema):
    for seed in range(3):
        model = HistoryLM(len(VOCAB), seed=seed, bos_id=VOCAB.eos_id, eos_id=VOCAB.eos_id, vocab=VOCAB)
        [hyp] = decodekit.greedy(model, [], 80, constraint=json_schema(schema))
        text = hyp.decode(VOCAB)
        assert hyp.finished and valid(schema, text), text


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    pattern=st.sampled_from(
        ["^[a-z]+$", "^[a-z]*$", "x", "^a", "b$", r"^[A-Z]{2}-\d+$", "^(?:ab|c)+$", "^a?b*c{1,3}$"]
    ),
    lo=st.integers(0, 4),
    width=st.one_of(st.none(), st.integers(0, 4)),
    data=st.data(),
)
def test_pattern_beside_lengths_is_cut_to_fit(pattern, lo, width, data):
    """A pattern beside minLength/maxLength: its repetitions capped or repeated more, so every
    string written has an allowed length and matches the pattern; else refused."""
    schema = {"type": "string", "pattern": pattern, "minLength": lo}
    if width is not None:
        schema["maxLength"] = lo + width
    try:
        compiled = json_schema(schema)
    except ConstraintError as e:
        assert "needs the intersection" in str(e) or "allows no value" in str(e)
        return
    if isinstance(compiled, Pattern):  # pattern & length: texts of the pattern within the length
        for _ in range(20):
            text = data.draw(st.from_regex(compiled.args[0].args, fullmatch=True))
            if all(regex.fullmatch(part.args, text) for part in compiled.args):
                assert valid(schema, text), (schema, text)
        return
    text = data.draw(st.from_regex(compiled, fullmatch=True))
    assert valid(schema, text), (schema, text)


def test_overlapping_oneof_writes_a_part_no_two_branches_share():
    exclusive = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
    }
    for text in ['{"a":1}', '{"b":1}']:
        assert valid(exclusive, text) and matches(exclusive, text), text
    assert not valid(exclusive, '{"a":1,"b":2}') and not matches(exclusive, '{"a":1,"b":2}')
    numbers = {"oneOf": [{"type": "integer"}, {"type": "number", "maximum": 3}]}
    assert matches(numbers, "2.5") and not matches(numbers, "2") and not matches(numbers, "7")


def test_many_optional_properties_stay_within_the_size_bound():
    schema = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "format": "date-time"} for i in range(120)},
    }
    pattern = json_schema(schema)
    assert matches(schema, '{"p0":"2024-01-01T00:00:00Z","p7":"2024-01-01T00:00:00Z"}')
    assert regex.fullmatch(pattern, "{}") and valid(schema, "{}")


def test_oneof_of_three_equal_branches_writes_nothing():
    for schema in ({"oneOf": [True, True, True]}, {"oneOf": [{}, {"type": "null"}, {}]}):
        with pytest.raises(ConstraintError, match="oneOf"):
            json_schema(schema)


def test_a_oneof_made_disjoint_is_no_proof_for_an_enclosing_oneof():
    """The inner oneOf writes no integer (its branches {} and 0 overlap there) but accepts 1:
    the outer oneOf may not read "no integer written" as "no integer accepted"."""
    schema = {
        "oneOf": [
            {"anyOf": [{"type": "integer"}]},
            {"oneOf": [{}, {"type": "null"}, {"type": "integer", "minimum": 0, "maximum": 0}]},
        ]
    }
    assert not valid(schema, "1")
    try:
        pattern = json_schema(schema)
    except ConstraintError as e:
        assert "oneOf" in str(e) and "\n" not in str(e)
        return
    assert not regex.fullmatch(pattern, "1")
