"""Bounds past what a float or a C long holds (issue 35.9): JSON Schema integer bounds above
1e308 work exactly where both sides are bounded and are refused in one line where the unbounded
side's digit cap leaves nothing; ``minLength: 10**30`` (and 2**63) over a byte-level vocabulary
is refused in one line by every strategy, never an OverflowError."""

from __future__ import annotations

import json
import warnings

import pytest
import regex

import decodekit
from decodekit.constraints import ConstraintError, compile_regex, json_schema
from tests.support.exhaustive import SparseLM

BIG = 10**309  # 310 digits: float(BIG) overflows


@pytest.mark.parametrize(
    "schema, inside, outside",
    [
        (
            {"type": "integer", "exclusiveMinimum": BIG, "maximum": BIG + 20},
            [BIG + 1, BIG + 20],
            [BIG, BIG + 21],
        ),
        ({"type": "integer", "minimum": -BIG, "maximum": 3}, [-BIG, 3, 0], [-BIG - 1, 4]),
        ({"type": "integer", "minimum": 1.5e308, "maximum": BIG}, [BIG, 2 * 10**308], [BIG + 1, 10**308]),
    ],
)
def test_bounds_past_a_float_are_exact(schema, inside, outside):
    pattern = str(json_schema(schema))
    for v in inside:
        assert regex.fullmatch(pattern, json.dumps(v)), v
    for v in outside:
        assert not regex.fullmatch(pattern, json.dumps(v)), v


@pytest.mark.parametrize(
    "schema, message",
    [
        (
            {"type": "integer", "minimum": BIG},
            r"/minimum: an integer without a maximum is written",
        ),
        ({"type": "integer", "maximum": -BIG}, r"/maximum: an integer without a minimum"),
        ({"type": "integer", "minimum": 10**20}, r"minimum 100000000000000000000 leaves none"),
        ({"type": "integer", "multipleOf": BIG}, r"multipleOf is not supported"),
    ],
)
def test_unwritable_bounds_are_one_line(schema, message):
    with pytest.raises(ConstraintError, match=message) as info:
        json_schema(schema)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("n", [10**30, 2**63])
def test_a_huge_min_length_is_refused_in_one_line(n):
    tokens = [bytes([b]) for b in range(256)] + [b"ab", b'"a', b"<eos>"]
    eos = len(tokens) - 1
    automaton = compile_regex(json_schema({"type": "string", "minLength": n}), tokens, eos, lazy="masked")
    model = SparseLM(len(tokens), 0, 0.0, bos_id=eos, eos_id=eos)
    for strategy in (None, "greedy", "beam", "banked-beam", "masked-beam"):
        with warnings.catch_warnings(), pytest.raises(ConstraintError) as info:
            warnings.simplefilter("ignore")
            decodekit.generate(
                model, [[99]], constraint=automaton, strategy=strategy, max_length=20, beam_size=2
            )
        assert "\n" not in str(info.value), strategy
    with pytest.raises(ConstraintError, match="not computed"):
        _ = automaton.shortest
    assert not automaton.fits(10**6)
