"""json_schema() on schemas too large for one regex text (written sealed: Pattern leaves, counted
repetitions symbolic, a large subschema one shared leaf; then recursions unrolled fewer times),
key_order="any", and the pointer in size refusals. Proved against jsonschema: masked greedy
decoding and sampling give valid JSON, and small objects are accepted iff valid."""

import itertools
import json

import pytest
import regex

import decodekit
import decodekit.constraints.frontends.schema as schema_module
from decodekit.constraints.automata.pattern import Pattern
from decodekit.constraints.frontends.schema import MAX_ANY_ORDER, json_schema, limits
from decodekit.errors import ConstraintError
from tests.constraints.test_json_schema import VOCAB, valid
from tests.constraints.test_json_schema_sound import fullmatcher
from tests.support.fakes import HistoryLM


def decoded_texts(constraint, steps: int = 120) -> list[str]:
    """Finished texts of masked greedy decoding and sampling (3 seeds) under ``constraint``."""
    out = []
    for seed in range(3):
        model = HistoryLM(len(VOCAB), seed=seed, bos_id=VOCAB.eos_id, eos_id=VOCAB.eos_id, vocab=VOCAB)
        [hyp] = decodekit.greedy(model, [], steps, constraint=constraint)
        samples = decodekit.sample(model, [], steps, generator=seed, num_samples=2, constraint=constraint)
        out += [h.decode(VOCAB) for h in [hyp, *samples] if h.finished]
    return out


# 30 strings of up to 1,000 characters: 1.2 million NFA states as one regex text (refused before)
WIDE = {
    "type": "object",
    "properties": {f"p{i}": {"type": "string", "maxLength": 1000} for i in range(30)},
    "required": ["p0", "p1"],
}
# one definition used by 60 properties: 60 copies as one regex text, one leaf sealed
ITEM = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 0},
        "tag": {"type": "string", "maxLength": 300},
        **{f"t{i}": {"type": "string", "format": "date-time"} for i in range(6)},
    },
    "required": ["id"],
}
SHARED = {
    "$defs": {"item": ITEM},
    "type": "object",
    "properties": {f"k{i}": {"$ref": "#/$defs/item"} for i in range(60)},
    "required": ["k0"],
}


@pytest.mark.parametrize("schema", [WIDE, SHARED], ids=["wide", "shared"])
def test_a_schema_too_large_for_one_regex_text_is_sealed_and_sound(schema):
    pattern = json_schema(schema)
    assert isinstance(pattern, Pattern)
    leaves = set(pattern.regexes())
    assert max(len(r) for r in leaves) < 200_000  # each regex text parsed alone stays small
    match = fullmatcher(pattern, ['{"p0":"a\\nb","p1":""}', '{"k0":{"id":3,"tag":"x"},"k5":{"id":0}}'])
    if schema is WIDE:
        assert match.fullmatch('{"p0":"a\\nb","p1":""}') and valid(schema, '{"p0":"a\\nb","p1":""}')
        assert not match.fullmatch('{"p0":"' + "a" * 1001 + '","p1":""}')  # over maxLength
        assert not match.fullmatch('{"p1":"","p0":""}')  # keys in the schema's order
    else:
        assert match.fullmatch('{"k0":{"id":3,"tag":"x"},"k5":{"id":0}}')
        assert not match.fullmatch('{"k0":{"id":-1}}')  # under minimum
        assert not match.fullmatch('{"k5":{"id":1}}')  # k0 is required


def test_masked_decoding_of_a_sealed_schema_gives_valid_json(monkeypatch):
    """Sealed at a small size (the thresholds lowered), so that the automaton stays small."""
    monkeypatch.setattr(limits, "STR_STATES", 300)
    monkeypatch.setattr(limits, "SEAL_STATES", 200)
    monkeypatch.setattr(limits, "SHARE_LEAF", 20)
    item = {**ITEM, "properties": {"id": ITEM["properties"]["id"], "tag": {"type": "string", "maxLength": 3}}}
    schema = {
        "$defs": {"item": item},
        "type": "object",
        "properties": {"k0": {"$ref": "#/$defs/item"}, "k1": {"$ref": "#/$defs/item"}, "n": {"maxLength": 2}},
        "required": ["k0"],
    }
    pattern = json_schema(schema)
    assert isinstance(pattern, Pattern) and not pattern.combined
    texts = decoded_texts(pattern)
    assert texts
    for text in texts:
        assert valid(schema, text), text


def test_a_shared_definition_is_one_leaf():
    pattern = json_schema(SHARED)
    item = json_schema(ITEM)  # the definition's own regex text
    assert isinstance(item, str)
    assert item in set(pattern.regexes())  # parsed once, though written for 60 properties


def test_a_recursion_too_large_is_unrolled_fewer_times(monkeypatch):
    node = {
        "type": "object",
        "properties": {
            "v": {"type": "string", "maxLength": 20},
            "left": {"$ref": "#"},
            "right": {"$ref": "#"},
        },
        "required": ["v"],
    }
    # as where its grammar is refused (a recursion inside a not): the recursion unrolled
    monkeypatch.setattr(schema_module, "recursive_refs", lambda root: frozenset())
    full = len(str(json_schema(node)))
    monkeypatch.setattr(limits, "MAX_PATTERN_CHARS", full // 3)
    monkeypatch.setattr(limits, "STR_STATES", 10)  # every text sealed, bounded by its size
    pattern = json_schema(node)
    assert len(str(pattern)) <= full // 3
    match = fullmatcher(pattern)
    monkeypatch.undo()
    shallow = '{"v":"a","left":{"v":"b"},"right":{"v":"c"}}'
    assert valid(node, shallow) and match.fullmatch(shallow)
    deep = '{"v":"a","left":{"v":"b","left":{"v":"c","left":{"v":"d"}}}}'
    assert valid(node, deep) and not match.fullmatch(deep)  # cut deeper: written less, still sound
    for text in decoded_texts(pattern):
        assert valid(node, text), text


def test_a_size_refusal_names_its_pointer(monkeypatch):
    monkeypatch.setattr(limits, "MAX_PATTERN_CHARS", 5_000)
    monkeypatch.setattr(limits, "MAX_STATES", 5_000)
    schema = {
        "type": "object",
        "properties": {"outer": {"type": "object", "properties": {f"p{i}": WIDE for i in range(3)}}},
    }
    with pytest.raises(ConstraintError) as e:
        json_schema(schema)
    message = str(e.value)
    assert message.startswith("/properties/outer") and "\n" not in message, message


# key_order="any" ------------------------------------------------------------------------------

SMALL_OBJECTS = [
    {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "maximum": 1},
            "b": {"type": "boolean"},
            "c": {"type": "null"},
        },
        "required": ["b"],
    },
    {
        "type": "object",
        "properties": {"a": {"type": "null"}, "b": {"type": "null"}},
        "minProperties": 1,
        "maxProperties": 1,
    },
    {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"x": {"enum": [1, 2]}, "y": {"type": "object", "properties": {"z": {}, "w": {}}}},
            "required": ["x"],
        },
        "maxItems": 1,
    },
]
POOL = ["1", "2", "null", "true", "{}", '{"w":1,"z":null}', '{"z":1}']


def objects(keys: str, limit: int = 3):
    """Every object text of up to ``limit`` members over ``keys`` (repeats too) and POOL values."""
    for n in range(limit + 1):
        for ks in itertools.product(keys, repeat=n):
            for vs in itertools.product(POOL, repeat=n):
                yield "{" + ",".join(f'"{k}":{v}' for k, v in zip(ks, vs)) + "}"


def distinct_listed_keys(text: str, listed) -> bool:
    keys = [k for k, _ in json.loads(text, object_pairs_hook=list)]
    return len(keys) == len(set(keys)) and set(keys) <= set(listed)


@pytest.mark.parametrize("schema", SMALL_OBJECTS)
def test_any_key_order_is_exact_on_small_objects(schema):
    """Every object over the schema's keys with values from a small pool (up to 3 members, in
    every order, repeated keys too) is accepted only if jsonschema accepts it, and is accepted
    when valid with distinct listed keys (JSON keeps one of two equal keys: such a text is never
    written, nor properties not listed); nested objects in any order too."""
    pattern = json_schema(schema, key_order="any")
    assert isinstance(pattern, str)
    compiled = regex.compile(pattern)
    in_array = schema["type"] == "array"
    accepted = 0
    for obj in objects("xy" if in_array else "abc", 2 if in_array else 3):
        text = f"[{obj}]" if in_array else obj
        hit = compiled.fullmatch(text) is not None
        accepted += hit
        assert not hit or valid(schema, text), text  # sound
        listed = (schema["items"] if in_array else schema)["properties"]
        if distinct_listed_keys(obj, listed):
            assert hit or not valid(schema, text), text  # exact
    assert accepted


def test_any_key_order_leaves_large_objects_in_schema_order():
    many = {"type": "object", "properties": {k: {"type": "null"} for k in "abcdef"[: MAX_ANY_ORDER + 1]}}
    pattern = json_schema(many, key_order="any")
    assert regex.fullmatch(pattern, '{"a":null,"b":null}')
    assert not regex.fullmatch(pattern, '{"b":null,"a":null}')
    for text in decoded_texts(json_schema(SMALL_OBJECTS[0], key_order="any"), 60):
        assert valid(SMALL_OBJECTS[0], text), text


def test_key_order_must_be_named():
    with pytest.raises(ConstraintError, match="key_order must be 'schema' or 'any'"):
        json_schema({"type": "object"}, key_order="sorted")


def test_an_enum_no_value_satisfies_leaves_an_optional_property_out():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "object", "enum": ["x", "y"]}, "b": {"type": "integer"}},
    }
    pattern = json_schema(schema)
    for text, ok in [('{"b":1}', True), ("{}", True), ('{"a":"x"}', False), ('{"a":"x","b":1}', False)]:
        assert (regex.fullmatch(pattern, text) is not None) == ok == valid(schema, text), text
    with pytest.raises(ConstraintError) as e:
        json_schema({**schema, "required": ["a"]})
    assert str(e.value) == "/properties/a/enum: no value satisfies the rest of the schema"
