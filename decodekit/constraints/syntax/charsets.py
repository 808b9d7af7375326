"""Character-set semantics of the syntax stage: a class's items (characters, ranges, ``\\w \\d \\s``,
scanned properties) as one :class:`~decodekit.constraints.syntax.nodes.CharSet`, case-folded under
``(?i)`` by ``regex``'s rules, stored by its members or by what it excludes, whichever is small."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import regex

from decodekit.constraints.syntax import casefold
from decodekit.constraints.syntax.budgets import MAX_CLASS_CHARS
from decodekit.constraints.syntax.flags import IGNORECASE
from decodekit.constraints.syntax.nodes import Char, CharSet, Item, Pred, Range, Scan
from decodekit.constraints.syntax.scanner import Refusal
from decodekit.constraints.syntax.unicode import CODE_POINTS, PREDICATE_BITS, predicate_bits, scan


class SetContext(Protocol):
    """What :func:`make_set` reads of the parser: the pattern, the position, the flags."""

    s: str
    pos: int
    flags: int
    ascii: bool
    inline_fold: bool


def make_set(items: list[Item], negate: bool, reader: SetContext) -> CharSet:
    """The CharSet of a class's items (union), case-folded under (?i), then negated. A class
    is stored by the characters it names, or as the negation of those it excludes, whichever
    is small; neither fits MAX_CLASS_CHARS -> refused."""
    fold, ascii_only = bool(reader.flags & IGNORECASE), reader.ascii
    intervals = [(x.cp, x.cp) if isinstance(x, Char) else x for x in items if isinstance(x, (Char, Range))]
    preds = tuple(sorted({x for x in items if isinstance(x, Pred)}))
    positive: list[frozenset] = []  # the class matches these ...
    excluded: list[frozenset] = []  # ... and everything except each of these
    if intervals:
        merged = merge(intervals)
        count = sum(hi - lo + 1 for lo, hi in merged)
        # Surrogates (U+D800-U+DFFF) have no UTF-8 form, so no text the automata read holds one:
        # a class is stored without them, either way (JSON's string class excludes all 2,048,
        # which every later stage would otherwise carry as explicit characters).
        lo_s, hi_s = SURROGATES
        if all(hi < lo_s or lo > hi_s for lo, hi in merged):
            named = merged
        else:
            named = gaps(merge([*gaps(merged), SURROGATES]))
        if count <= MAX_CLASS_CHARS:
            chars = frozenset(chr(c) for lo, hi in named for c in range(lo, hi + 1))
            positive.append(frozenset(casefold.fold(chars, ascii_only)) if fold else chars)
        elif CODE_POINTS - count <= MAX_CLASS_CHARS:
            left_out = gaps(merge([*merged, SURROGATES]))
            rest = frozenset(chr(c) for lo, hi in left_out for c in range(lo, hi + 1))
            excluded.append(frozenset(casefold.fold_complement(rest, ascii_only)) if fold else rest)
        else:
            raise too_many(reader.s, count)
    for x in items:
        if isinstance(x, Scan):
            try:
                is_excluded, chars, matched = scan(("(?a)" if ascii_only else "") + x.text)
            except regex.error as e:
                raise Refusal("syntax", e.msg, reader.pos) from None
            if chars is None:
                raise too_many(reader.s, matched, x.text)
            if (fold or reader.inline_fold) and not case_closed(is_excluded, chars, ascii_only):
                # regex's (?i)\p{Lu} matches U+0138 at the start of a pattern but not after
                # (?:a)*: no single meaning to compile
                raise Refusal(
                    "unsupported",
                    f"{x.text} with (?i) in the pattern: it does not contain every case of its letters, "
                    "and regex's result then depends on where it and the flag stand (list the cases "
                    "instead)",
                )
            (excluded if is_excluded else positive).append(chars)
    if not excluded:
        return CharSet(frozenset().union(*positive), preds, negate)
    rest = frozenset.intersection(*excluded)
    if positive:
        rest -= frozenset().union(*positive)
    if preds:
        rest = without_predicates(rest, preds)
    return CharSet(rest, (), not negate)


SURROGATES = (0xD800, 0xDFFF)  # code points no UTF-8 text contains


def too_many(pattern: str, count: int, item: str | None = None) -> Refusal:
    what = f"{item!r} matches" if item else "a character class names"
    return Refusal(
        "budget",
        f"regex {pattern[:60]!r}: {what} {count:,} characters and excludes {CODE_POINTS - count:,} "
        f"(at most {MAX_CLASS_CHARS:,} either way): use \\w \\d \\s, '.', or a smaller range",
    )


def merge(intervals):
    out = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def gaps(merged, end: int = CODE_POINTS) -> list[tuple[int, int]]:
    """The ranges of code points below ``end`` that the sorted, disjoint ranges ``merged`` leave
    out."""
    out, prev = [], 0
    for lo, hi in merged:
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev < end:
        out.append((prev, end - 1))
    return out


def case_closed(is_excluded: bool, chars: frozenset, ascii_only: bool) -> bool:
    """Whether a scanned item holds every case variant of each character it holds (then ``(?i)``
    does not change it: ``\\p{Han}``, ``[[:alpha:]]``; not ``\\p{Lu}``)."""
    for c, variants in casefold.cased(ascii_only).items():
        inside = (c in chars) != is_excluded
        if any(((v in chars) != is_excluded) != inside for v in variants):
            return False
    return True


def without_predicates(chars: frozenset, preds) -> frozenset:
    """The characters of ``chars`` for which none of the predicates ``(name, negated)`` holds."""
    if not chars:
        return chars
    ordered = list(chars)
    bits = predicate_bits()[np.fromiter(map(ord, ordered), dtype=np.int64, count=len(ordered))]
    holds = np.zeros(len(ordered), dtype=bool)
    for name, neg in preds:
        holds |= ((bits & PREDICATE_BITS[name]) > 0) != neg
    return frozenset(c for c, h in zip(ordered, holds.tolist()) if not h)
