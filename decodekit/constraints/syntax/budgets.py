"""The syntax stage's budgets (docs/constraints.md, "Time and memory budget"): how large a pattern
may be before anything is expanded, and the messages of a refusal for size."""

from __future__ import annotations

import re

from decodekit.constraints.syntax.scanner import Refusal

# Budgets (docs/constraints.md, "Time and memory budget")
MAX_NFA_STATES = 1_000_000  # Thompson NFA states of the whole pattern (repetitions multiplied out)
MAX_CLASS_CHARS = 300_000  # characters named by the pattern's classes (each: its members or its complement)
MAX_DEPTH = 100  # nested groups


_BRACES = re.compile(r"\{([0-9\s,#]*)\}")


def cheap_to_compile(pattern: str) -> bool:
    """Whether ``regex.compile`` surely runs quickly: the product of the pattern's repetition
    counts is small (it expands fixed repetitions; ``a{4294967294}`` takes 9 GB)."""
    product = 1
    for m in _BRACES.finditer(pattern):
        for part in re.sub(r"\s", "", m.group(1)).split(","):
            if part.isdigit():
                product *= min(int(part[:12]), 10**12) + 1
                if product > 100_000:
                    return False
    return True


def size_message(what: str, needed: int, limit: int, pattern: str) -> str:
    shown = repr(pattern[:60]) + ("..." if len(pattern) > 60 else "")
    return f"regex too large: {shown} {what} {needed:,} ({limit:,} allowed)"


def check_class_chars(named: int, pattern: str) -> None:
    """Refuse a pattern whose distinct classes name more than :data:`MAX_CLASS_CHARS` characters."""
    if named > MAX_CLASS_CHARS:
        shown = repr(pattern[:60]) + ("..." if len(pattern) > 60 else "")
        raise Refusal(
            "budget",
            f"regex too large: {shown} names {named:,} characters in its classes "
            f"({MAX_CLASS_CHARS:,} allowed): use \\w \\d \\s, '.', or negated classes",
        )
