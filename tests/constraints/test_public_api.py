"""check_pattern: the parser's verdict without compiling, through the public API."""

from __future__ import annotations

import pytest

import decodekit.constraints as constraints
from decodekit.constraints import ConstraintError, check_pattern


def test_check_pattern_accepts_and_refuses_with_the_parsers_message():
    assert check_pattern(r"[a-z]+ (is|was) \d{2}") is None
    with pytest.raises(ConstraintError, match=r"invalid regex 'a\(': missing \) at position 2"):
        check_pattern("a(")
    with pytest.raises(ConstraintError, match="unsupported regex feature"):
        check_pattern(r"(a)\1")
    with pytest.raises(ConstraintError, match="must be a string"):
        check_pattern(3)
    assert "check_pattern" in constraints.__all__
