"""Anchors inside groups at a pattern's edges (``^$|(^a+$)``): read where they stand, exactly.
Proved by exhaustive enumeration against Python ``re.search`` (what jsonschema runs) over short
strings of a small alphabet."""

import itertools
import json

import pytest
import regex

from decodekit.constraints.frontends.schema import json_schema
from decodekit.errors import ConstraintError

ALPHABET = ["a", "b", " ", "x"]


def _strings(n: int):
    for k in range(n + 1):
        for t in itertools.product(ALPHABET, repeat=k):
            yield "".join(t)


@pytest.mark.parametrize(
    "pattern",
    [
        r"^$|(^(?:\S+\s+){0,2}\S+$)",  # a GitHub schema's "at most 3 words"
        r"(^a+$)",
        r"((^a)|(b$))",
        r"(^a)b",
        r"(?:(?:^ab$))",
        r"^x|(a(b$))",
    ],
)
def test_anchors_in_groups_at_the_edges_match_as_python_re(pattern):
    import re

    text = json_schema({"type": "string", "pattern": pattern})
    assert isinstance(text, str)
    for s in _strings(4):
        want = re.search(pattern, s) is not None
        assert (regex.fullmatch(text, json.dumps(s)) is not None) == want, (pattern, s)


@pytest.mark.parametrize("pattern", [r"x(^a)", r"(?:(^a))+", r"(^a|b)c"])
def test_anchors_not_at_the_texts_edges_stay_refused(pattern):
    with pytest.raises(ConstraintError, match=r"'\^' or '\$' inside the pattern"):
        json_schema({"type": "string", "pattern": pattern})
