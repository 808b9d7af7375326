"""benchmarks/bench_grammar.py stays runnable: its options parse, and its decodekit engine and
masked-sample check work on a tiny grammar and byte vocabulary (no ../shared, no peers)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
pytest.importorskip("lark")

import bench_grammar  # noqa: E402

LIST = 'start: "[" [item ("," item)*] "]"\nitem: /[a-c]+/ | start\n'


def test_options_parse():
    args = bench_grammar.parse_args(["--repeats", "1", "--samples", "0", "--grammars", "json.gbnf"])
    assert args.repeats == 1 and args.grammars == ["json.gbnf"]


def test_the_decodekit_engine_and_the_sample_check_on_a_tiny_grammar():
    tokens = [None, *(bytes([b]) for b in range(256)), b"[a", b"],["]
    engine = bench_grammar.Decodekit(tokens, 0)
    auto = engine.compile(LIST, "lark")
    times = engine.walk(auto, [257, ord(",") + 1, ord("b") + 1, ord("]") + 1])
    assert len(times) == 4
    n, failures, cut = bench_grammar.sample_check(tokens, 0, LIST, "lark", 10, 8)
    assert (n, failures, cut) == (10, 0, 0)


def test_the_sample_check_judges_the_pattern_too():
    tokens = [None, *(bytes([b]) for b in range(256)), b"[a", b"],["]
    n, failures, cut = bench_grammar.sample_check(tokens, 0, LIST, "lark", 10, 12, pattern=r".*b.*")
    assert (n, failures, cut) == (10, 0, 0)
    assert bench_grammar.parse_args(["--and-pattern"]).and_pattern
