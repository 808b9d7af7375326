"""The JSON Schema front end's bounds, each in one place: nesting depth, regex size (characters,
NFA states), when a text is written sealed, the front end's own work (:func:`spend`), and the
one-line refusal helpers :func:`show` and :func:`needs`. Other modules read the tunable ones as
``limits.NAME`` at use, so that a test lowering one lowers it everywhere."""

from __future__ import annotations

import contextvars

from decodekit.constraints.syntax.budgets import MAX_NFA_STATES
from decodekit.errors import ConstraintError, ConstraintTooLarge

# Bounds checked while compiling, so that a hostile schema fails in one line, at once: subschemas
# nested deeper than MAX_DEPTH, a regex longer than MAX_PATTERN_CHARS or of more NFA states than
# the engine's MAX_NFA_STATES (counted while the text is built, before any larger text exists).
MAX_DEPTH, MAX_PATTERN_CHARS, MAX_STATES = 64, 16_000_000, MAX_NFA_STATES


# A regex text over SEAL_STATES NFA states becomes a leaf of a Pattern (parsed by itself); the
# whole is then bounded by its expanded text, MAX_PATTERN_CHARS.
SEAL_STATES = 100_000


# Sealed (a schema too large for one regex text): every subschema's text of more than SHARE_LEAF
# characters is its own leaf (equal texts: one leaf, parsed once).
SHARE_LEAF = 2_000


# steps one writing may take (a subschema written, a clause copied, an object's (member, count)
# piece): a bound on the front end's work, which sharing makes far larger than what it writes
# (recursions x optional properties x combinations); counted over all of a schema's attempts
# (recursions cut sooner included), so that past it the schema is refused at once as too large
MAX_WORK = 75_000


STR_STATES = 500_000  # a regex text of more NFA states than this is written sealed


# a Pattern (an intersection) of more NFA states than this is written sealed: its regex texts are
# parsed one by one and its subschemas shared (Kubernetes kb_696: 0.29 s sealed, a timeout at 10 s not)
PATTERN_STATES = 20_000


WORK: contextvars.ContextVar[list | None] = contextvars.ContextVar("work", default=None)  # [steps taken]


class MembersTooLarge(ConstraintTooLarge):
    """An object's optional properties would write a regex over the size bounds: written again
    with its first property among fewer (:meth:`Compiler.object`)."""


def spend(ptr: str) -> None:
    """One step of the writing under way; past :data:`MAX_WORK`, refused as too large."""
    work = WORK.get()
    if work is None:
        return
    work[0] += 1
    if work[0] > MAX_WORK:
        raise ConstraintTooLarge(
            f"{show(ptr)}: the JSON Schema's regex would exceed {MAX_WORK:,} steps to write (its "
            "recursions, combinations and optional properties): simplify the schema",
            bound="steps",
            limit=MAX_WORK,
            size=work[0],
        )


MAX_MEMBER_PIECES = 40_000  # (member, count so far) pieces of one object's members, each a DAG node


MAX_CLAUSES = 64  # alternatives of one subschema after distributing anyOf / oneOf over its siblings


MAX_REF_UNROLL = 3  # how many times one $ref may enclose itself (recursion cut below: no value);


MAX_ANY_ORDER = 4  # key_order="any": objects of at most this many listed properties, in every order


MAX_ENUM_UNIQUE = 5  # uniqueItems over a finite item set: at most this many values


def show(ptr: str) -> str:
    """A pointer for a one-line message: '/' for the root, repr when it has unprintable
    characters (a property name with a newline), cut to 80 characters."""
    ptr = ptr or "/"
    if not ptr.isprintable():
        ptr = repr(ptr)
    return ptr if len(ptr) <= 80 else ptr[:80] + "..."


def needs(ptr: str, what: str, op: str = "intersection"):
    """Refuse what needs the engine's intersection or complement of regular languages."""
    raise ConstraintError(f"{show(ptr)}: {what} needs the {op} of regular languages, which is not supported")
