"""check_pattern: the parser's verdict without compiling, through the public API."""

from __future__ import annotations

import subprocess
import sys

import pytest

import decodekit.constraints as constraints
from decodekit.constraints import ConstraintError, check_pattern, compile_regex, describe, to_dot


def test_check_pattern_accepts_and_refuses_with_the_parsers_message():
    assert check_pattern(r"[a-z]+ (is|was) \d{2}") is None
    with pytest.raises(ConstraintError, match=r"invalid regex 'a\(': missing \) at position 2"):
        check_pattern("a(")
    with pytest.raises(ConstraintError, match="unsupported regex feature"):
        check_pattern(r"(a)\1")
    with pytest.raises(ConstraintError, match="must be a string"):
        check_pattern(3)
    assert "check_pattern" in constraints.__all__


def test_the_package_imports_lazily():
    """``DEFAULT_MAX_STATES`` (shown by ``--help``) is read without numpy or torch."""
    probe = (
        "import sys; from decodekit.constraints import DEFAULT_MAX_STATES; "
        "print(DEFAULT_MAX_STATES, 'numpy' in sys.modules or 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [str(constraints.DEFAULT_MAX_STATES), "False"]
    assert set(constraints.__all__) == {"DEFAULT_MAX_STATES", *constraints._LAZY}
    assert all(getattr(constraints, name) is not None for name in constraints.__all__)
    with pytest.raises(AttributeError, match="no_such_name"):
        constraints.no_such_name  # noqa: B018


def test_describe_and_to_dot():
    tokens = ["a", "b", "ab", None, "c"]
    automaton = compile_regex("([ac]b)+", tokens, eos_id=3)
    info = describe(automaton)
    assert info["states"] == automaton.num_states == 3 and info["shortest"] == 1
    assert info["accepting_states"] == 1 and info["transitions"] == 7 and info["vocab_size"] == 5
    dot = to_dot(automaton, tokens, examples=1)
    assert dot.startswith("digraph token_automaton {") and dot.endswith("}")
    assert "doublecircle" in dot and "start -> 0;" in dot
    assert dot.count(" -> ") == 1 + 5  # the start arrow and one per (state, next state) pair
    assert '0 -> 1 [label="\\"a\\", ... (2 tokens)"];' in dot  # "a" and "c": one shown, both counted


def test_the_expression_functions_the_docs_name_import():
    """Issue 35 item 11: docs/constraints.md named concat, repeat and excluding as functions of
    decodekit.constraints, where only intersect, union and complement imported."""
    from decodekit.constraints import Pattern, complement, concat, excluding, intersect, repeat, union

    a, b = Pattern("a+"), Pattern("b")
    assert concat(a, b) == a + b and repeat(b, 1, 2) == b.repeat(1, 2)
    assert excluding(a, ["aa"]) is not None and intersect(a, b) == (a & b)
    assert union(a, b) == (a | b) and complement(a) == ~a
