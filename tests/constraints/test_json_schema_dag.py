"""Patterns as DAGs (a part used twice is one node) and json_schema() bounded by the DAG's size:
schemas whose regex text would repeat a subschema thousands of times (optional properties,
nested objects, nested arrays) compile to a small DAG. Proved by exhaustive comparison with the
expanded regex on tiny vocabularies, and against jsonschema on decoded and sampled outputs."""

import contextlib
import itertools
import json
import time

import jsonschema
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import decodekit
from decodekit.constraints.automata.pattern import LABEL_CHARS, Pattern, concat, union
from decodekit.constraints.frontends.schema import MAX_PATTERN_CHARS, json_schema, limits
from decodekit.errors import ConstraintError, ConstraintTooLarge
from decodekit.vocab import Vocab
from tests.constraints.test_json_schema import valid
from tests.constraints.test_json_schema_sound import JSON, SCHEMAS, fullmatcher
from tests.support.fakes import HistoryLM

# printable ASCII and one two-character token: every byte a token by itself, so the masked
# automaton (built on first visit; these schemas' whole automata are large) is exact
VOCAB = Vocab(["<unk>", "<eos>", *(chr(c) for c in range(32, 127)), '":'], separator="")


class masked:
    """``fullmatch`` through the masked automaton over :data:`VOCAB`."""

    def __init__(self, pattern):
        self.auto = decodekit.compile_regex(pattern, VOCAB.surfaces(), eos_id=VOCAB.eos_id, lazy="masked")

    def fullmatch(self, text: str) -> bool:
        ids = [VOCAB.tokens.index(c) for c in text]
        return self.auto.accepts([*ids, VOCAB.eos_id])


def decoded_texts(constraint, steps: int) -> list[str]:
    """Finished texts of masked greedy decoding and sampling (2 seeds) under ``constraint``."""
    out = []
    for seed in range(2):
        model = HistoryLM(len(VOCAB), seed=seed, bos_id=VOCAB.eos_id, eos_id=VOCAB.eos_id, vocab=VOCAB)
        [hyp] = decodekit.greedy(model, [], steps, constraint=constraint)
        samples = decodekit.sample(model, [], steps, generator=seed, num_samples=2, constraint=constraint)
        out += [h.decode(VOCAB) for h in [hyp, *samples] if h.finished]
    return out


def leaf(text: str) -> Pattern:
    """A regex leaf that concat() never joins into a longer regex text (a union of one)."""
    return Pattern("", "or", (Pattern(text),))


def test_equal_patterns_are_one_object():
    a = Pattern("[ab]+") | "c"
    b = Pattern("[ab]+") | "c"
    assert a is b and hash(a) == hash(b)
    assert (a + a) is (b + b) and (a + a).children == (a, a)
    assert Pattern(a) is a


def test_a_part_used_twice_is_one_node():
    part = leaf("[0-9]{3}")
    for _ in range(40):  # 2**40 copies written out, 40 nodes
        part = concat(part, ",", part)
    assert part.text_length() > 2**40 > 10**6 > part.size()
    assert part.regexes() == ["[0-9]{3}", ","]
    assert len(str(part)) == LABEL_CHARS + 3 and str(part).endswith("...")


def _walk_all(auto, vocab_size: int, depth: int):
    """(token prefix, allowed next tokens [V] as a tuple, accepting) for every live prefix up to
    ``depth`` tokens."""
    out, frontier = [], [()]
    for _ in range(depth + 1):
        nxt = []
        for prefix in frontier:
            s = auto.walk(list(prefix))
            if s < 0:
                continue
            allowed = auto.allowed(_tensor([s]))[0].tolist()
            out.append((prefix, tuple(allowed), bool(auto.is_accepting(_tensor([s]))[0])))
            nxt += [prefix + (t,) for t in range(vocab_size) if allowed[t] and t != auto.eos_id]
        frontier = nxt
    return out


def _tensor(xs):
    import torch

    return torch.tensor(xs, dtype=torch.long)


DAGS = [
    # (a DAG pattern, the same language as one regex text)
    (lambda: concat(leaf("a|bb"), ",", leaf("a|bb")), "(?:a|bb),(?:a|bb)"),
    (
        lambda: union(concat(leaf("ab?"), leaf("ab?")), leaf("ab?")).repeat(1, 3),
        "(?:(?:ab?)(?:ab?)|ab?){1,3}",
    ),
    (lambda: concat(leaf("b"), leaf("b")).repeat(0, None) & ~leaf("bbbb"), None),
]


@pytest.mark.parametrize("make, text", DAGS)
def test_a_dag_pattern_compiles_to_the_masks_of_its_expanded_text(make, text):
    tokens = ["a", "b", ",", "ab", "bb", "b,", None]
    eos = len(tokens) - 1
    dag = make()
    expanded = Pattern(text) if text is not None else None
    got = _walk_all(decodekit.compile_regex(dag, tokens, eos_id=eos), len(tokens), 5)
    if expanded is None:  # (bb)* without bbbb: compare with the enumerated language
        for prefix, _, accepting in got:
            word = "".join(tokens[t] for t in prefix)
            assert accepting == (regex.fullmatch("(?:bb)*", word) is not None and word != "bbbb"), word
        return
    want = _walk_all(decodekit.compile_regex(text, tokens, eos_id=eos), len(tokens), 5)
    assert got == want


def test_deep_dags_compile_without_recursion():
    part = leaf("x")
    for i in range(3000):  # 3,000 nested alternatives and concatenations
        part = union(concat(leaf("a"), part), leaf("b" if i % 2 else "c"))
    auto = decodekit.compile_regex(part, ["a", "b", "c", "x", None], eos_id=4)
    # a^k then the k-th alternative (b at the top, then c, b, ...), or a^3000 x
    assert auto.accepts([1, 4]) and auto.accepts([0, 2, 4]) and auto.accepts([0, 0, 1, 4])
    assert auto.accepts([0] * 3000 + [3, 4]) and not auto.accepts([0] * 2999 + [3, 4])
    assert not auto.accepts([0, 1, 4]) and not auto.accepts([0, 4])
    assert len(str(part)) <= LABEL_CHARS + 3


# ------------------------------------------------------------------------------- json_schema

LEAF = {"type": "object", "properties": {f"f{i}": {"type": "string", "maxLength": 8} for i in range(25)}}
MID = {"type": "object", "properties": {f"m{i}": {"$ref": "#/$defs/leaf"} for i in range(25)}}
# 12 x 25 x 25 optional properties: 160 million characters written out (refused before), a DAG
NESTED = {
    "$defs": {"leaf": LEAF, "mid": MID},
    "type": "object",
    "properties": {f"t{i}": {"$ref": "#/$defs/mid"} for i in range(12)},
    "required": ["t0"],
}


def test_optional_properties_of_nested_objects_compile_as_a_small_dag():
    start = time.process_time()
    pattern = json_schema(NESTED)
    assert time.process_time() - start < 5.0
    assert isinstance(pattern, Pattern)
    assert pattern.text_length() > MAX_PATTERN_CHARS > 50 * pattern.size()
    good = ['{"t0":{}}', '{"t0":{"m3":{"f1":"ab","f24":""}},"t11":{"m0":{}}}']
    bad = ["{}", '{"t1":{}}', '{"t0":{"m3":{"f1":"abcdefghi"}}}', '{"t0":{"m3":{"f24":"","f1":""}}}']
    match = masked(pattern)
    for text in good:
        assert valid(NESTED, text) and match.fullmatch(text), text
    for text in bad:
        assert not match.fullmatch(text), text
    texts = decoded_texts(match.auto, steps=80)
    assert texts
    for text in texts:
        assert valid(NESTED, text), text


def test_nested_arrays_share_their_items():
    deep: dict = {"type": "integer", "minimum": 0, "maximum": 9}
    for _ in range(12):
        deep = {"type": "array", "items": deep, "maxItems": 3}
    pattern = json_schema(deep)
    assert isinstance(pattern, Pattern) and pattern.size() < 20_000
    texts = ["[" * 12 + "]" * 12, "[" * 11 + "[1,2]" + "]" * 11, "[[" * 6 + "]]" * 6]
    bad = ["[" * 11 + "[1,2,3,4]" + "]" * 11, "[" * 13 + "]" * 13]
    match = masked(pattern)
    for text in texts:
        assert valid(deep, text) == match.fullmatch(text), text
    for text in bad:
        assert not match.fullmatch(text), text


@pytest.mark.parametrize("n, required", [(3, ()), (4, ("p1",))])
def test_small_objects_through_the_dag_accept_exactly_the_valid_ones(n, required, monkeypatch):
    """Sealed (the thresholds lowered so that every member is its own node): every object of the
    listed properties in the schema's order, each present or not, is accepted iff valid."""

    monkeypatch.setattr(limits, "STR_STATES", 10)
    monkeypatch.setattr(limits, "SEAL_STATES", 10)
    monkeypatch.setattr(limits, "SHARE_LEAF", 5)
    inner = {"type": "object", "properties": {"x": {"enum": [1, 2]}, "y": {"type": "boolean"}}}
    schema = {
        "type": "object",
        "properties": {f"p{i}": inner for i in range(n)},
        "required": list(required),
        "maxProperties": 2,
    }
    pattern = json_schema(schema)
    assert isinstance(pattern, Pattern)
    values = ["{}", '{"x":1}', '{"x":2,"y":true}', '{"y":false}']
    cases = []
    for k in range(n + 1):
        for names in itertools.combinations(range(n), k):
            for vs in itertools.product(values, repeat=k):
                cases.append("{" + ",".join(f'"p{i}":{v}' for i, v in zip(names, vs)) + "}")
    match = masked(pattern)
    for text in cases:
        assert match.fullmatch(text) == valid(schema, text), text


# ------------------------------------------------------------------------------- multipleOf


@pytest.mark.parametrize("m", [0.1, 0.01, 0.001, 1e-6])
def test_a_decimal_multiple_of_writes_the_integers_validators_accept(m):
    """``n / m`` in floating point is integral for every integer (jsonschema's test), so the
    integers are a sound part; 0.07 is not a multiple of 0.01 for jsonschema (7.000000000000001)."""
    schema = {"type": ["number", "null"], "multipleOf": m}
    pattern = json_schema(schema)
    for text in ["0", "-7", "null", "19", "123456789012345678", "-999999999999999999"]:
        assert regex.fullmatch(pattern, text) and valid(schema, text), text
    for text in ["0.07", "1.5", "1e2", '"1"']:
        assert not regex.fullmatch(pattern, text), text


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number", "multipleOf": 2, "not": {"type": "integer"}},  # wrote the integers before
        {"type": "number", "multipleOf": 0.1, "not": {"type": "integer"}},
        {"type": "number", "multipleOf": 0.3},
        {"type": "number", "multipleOf": 0.01, "minimum": 1},
    ],
)
def test_multiple_of_outside_the_subset_is_refused_with_the_reason(schema):
    with pytest.raises(ConstraintError, match="multipleOf is not supported"):
        json_schema(schema)


def test_a_large_intersection_is_written_sealed(monkeypatch):
    """A Pattern (strings with a pattern, a format and a length) of more than PATTERN_STATES NFA
    states is written sealed (the thresholds lowered: leaves of at most about SHARE_LEAF
    characters, 2,056 unsealed), and stays sound."""

    monkeypatch.setattr(limits, "PATTERN_STATES", 1_000)
    monkeypatch.setattr(limits, "SHARE_LEAF", 200)
    item = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[a-z]+", "format": "email", "maxLength": 40},
            **{f"f{i}": {"type": "string", "format": "date"} for i in range(8)},
        },
        "required": ["code"],
    }
    schema = {
        "$defs": {"item": item},
        "type": "object",
        "properties": {f"k{i}": {"$ref": "#/$defs/item"} for i in range(30)},
        "required": ["k0"],
    }
    pattern = json_schema(schema)
    assert isinstance(pattern, Pattern) and pattern.combined
    assert max(len(r) for r in pattern.regexes()) < 1_000
    assert pattern.size() < pattern.text_length() // 5
    match = masked(pattern)
    good = ['{"k0":{"code":"a@b.cd"}}', '{"k0":{"code":"x@y.z","f3":"2024-02-29"},"k29":{"code":"q@r.s"}}']
    bad = [
        '{"k0":{"code":"a"}}',
        '{"k0":{"code":"AB"}}',
        '{"k1":{"code":"ab"}}',
        '{"k0":{"code":"ab","f3":"2023-02-29"}}',
    ]
    for text in good:
        assert valid(schema, text) and match.fullmatch(text), text
    for text in bad:
        assert not match.fullmatch(text), text
    for text in decoded_texts(match.auto, steps=60):
        assert valid(schema, text), text


def test_many_members_counted_up_to_a_large_max_properties_are_refused_at_once():
    """600 optional members counted up to maxProperties 300: 135,000 (member, count) pieces, each
    a DAG node; refused before any is built."""
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(600)}}
    start = time.process_time()
    with pytest.raises(ConstraintError, match="optional properties, counted up to 300") as e:
        json_schema({**schema, "maxProperties": 300})
    assert time.process_time() - start < 1.0 and str(e.value).startswith("/: ")
    few = {
        "type": "object",
        "properties": {f"p{i}": {"type": "integer"} for i in range(60)},
        "maxProperties": 2,
    }
    small = json_schema(few)  # counted up to 2: 180 pieces
    assert regex.fullmatch(small, '{"p3":1,"p59":2}') and not regex.fullmatch(small, '{"p1":1,"p2":2,"p3":3}')


# ------------------------------------------------------------------------- generated schemas


@contextlib.contextmanager
def _sealed_everywhere():
    """Every schema written sealed, in pieces of a few NFA states (each a DAG node)."""

    names = {"STR_STATES": 0, "PATTERN_STATES": 0, "SEAL_STATES": 30, "SHARE_LEAF": 10}
    saved = {k: getattr(limits, k) for k in names}
    try:
        for k, v in names.items():
            setattr(limits, k, v)
        yield
    finally:
        for k, v in saved.items():
            setattr(limits, k, v)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=SCHEMAS, values=st.lists(JSON, min_size=30, max_size=30))
def test_generated_schemas_sealed_as_dags_match_as_written_whole(schema, values):
    """The DAG (every piece its own node, shared where used twice) accepts exactly the texts the
    schema's regex written whole accepts, and those validate."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
        whole = json_schema(schema)
        with _sealed_everywhere():
            dag = json_schema(schema)
    except (jsonschema.SchemaError, ConstraintError):
        return
    texts = [json.dumps(v, separators=(",", ":"), ensure_ascii=False) for v in values]
    a, b = fullmatcher(whole, texts), fullmatcher(dag, texts)
    for text in texts:
        assert a.fullmatch(text) == b.fullmatch(text), (schema, text)
        if b.fullmatch(text):
            assert valid(schema, text), (schema, text)


def _recursive_tree(width: int) -> dict:
    """A node with ``width`` optional children, each a node again, and an anyOf over which one
    is required: small to state, its writing takes steps that grow with every unrolling."""
    names = [f"c{i}" for i in range(width)]
    node = {
        "type": "object",
        "properties": {n: {"$ref": "#/$defs/node"} for n in names},
        "anyOf": [{"required": [n]} for n in names] + [{"maxProperties": 0}],
    }
    return {"$defs": {"node": node}, "$ref": "#/$defs/node"}


def test_the_front_ends_work_is_bounded(monkeypatch):

    schema = _recursive_tree(4)
    counted = []
    spend = limits.spend

    def counting(ptr):
        spend(ptr)
        counted.append(ptr)

    monkeypatch.setattr(limits, "spend", counting)
    json_schema(schema)  # within the default bound
    steps = len(counted)
    assert steps > 50
    monkeypatch.setattr(limits, "MAX_WORK", steps // 2)
    start = time.process_time()
    with pytest.raises(ConstraintError, match=r"would exceed [\d,]+ steps to write") as e:
        json_schema(schema)
    assert "\n" not in str(e.value) and time.process_time() - start < 5
    assert isinstance(e.value, ConstraintTooLarge)
    assert (e.value.bound, e.value.limit) == ("steps", steps // 2) and e.value.size > steps // 2


def test_the_front_end_decides_by_refusal_type_not_message():
    """Which smaller form is tried next depends on the refusal's class (ConstraintTooLarge,
    MembersTooLarge), never on its message's text (issue 37 item 3)."""
    import pathlib

    import decodekit.constraints.frontends.schema as schema_module

    for path in pathlib.Path(schema_module.__file__).parent.glob("*.py"):
        assert "in str(" not in path.read_text(), path
