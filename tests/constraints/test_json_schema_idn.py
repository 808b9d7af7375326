"""``idn-hostname`` writes no label that IDNA 2008 rejects (issue 35.8): "xn--X" and "xn--7a"
(invalid Punycode) were accepted where the official JSON-Schema-Test-Suite and jsonschema's
checker reject them. No label has "--" in its 3rd and 4th characters (RFC 5891 4.2.3.1)."""

from __future__ import annotations

import random

import pytest
import regex

from decodekit.constraints import compile_regex, json_schema

SCHEMA = {"type": "string", "format": "idn-hostname"}
REJECTED = ["xn--X", "xn--7a", "xn--", "ab--c", "a.xn--zz", "xn--bcher-kva", "a-", "-a", "a..b"]
WRITTEN = ["a", "ab", "a-b", "abc-d", "a1.b2", "x-n", "xn-a", "a--b", "w.x.yz", "a" * 63]


def test_the_punycode_false_accepts_are_gone():
    pattern = str(json_schema(SCHEMA))
    for text in REJECTED:
        assert not regex.fullmatch(pattern, f'"{text}"'), text
    for text in WRITTEN:
        assert regex.fullmatch(pattern, f'"{text}"'), text
    tokens = [chr(c) for c in range(32, 127)] + ["<eos>"]
    automaton = compile_regex(pattern, tokens, len(tokens) - 1, lazy="masked")
    for text in REJECTED:
        assert not automaton.accepts([tokens.index(c) for c in f'"{text}"']), text


def test_no_written_hostname_is_rejected_by_jsonschema():
    jsonschema = pytest.importorskip("jsonschema", reason="the reference format checker")
    pytest.importorskip("idna", reason="jsonschema checks idn-hostname with idna")
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    pattern = regex.compile(str(json_schema(SCHEMA)))
    rng = random.Random(0)
    texts = ["".join(rng.choice("axn1-.") for _ in range(rng.randint(1, 9))) for _ in range(20_000)]
    texts += ["xn--" + "".join(rng.choice("abc1-") for _ in range(k)) for k in range(6) for _ in range(50)]
    written = [t for t in texts if pattern.fullmatch(f'"{t}"')]
    assert len(written) > 1000
    assert [t for t in written if not checker.conforms(t, "idn-hostname")] == []
