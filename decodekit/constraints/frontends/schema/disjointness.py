"""What the front end proves about clauses before it writes them: two clauses share no value
(:func:`disjoint`, :func:`separate` writes less so that they do not), the text of one holds every
spelling of the other's values (:func:`covers`, for exclusions), and a JSON value satisfies a
clause (:func:`check_value`: True, False or None when not decided)."""

from __future__ import annotations

import itertools
import json
from decimal import Decimal
from typing import TYPE_CHECKING

import regex

from decodekit.constraints.frontends.schema.clauses import (
    KINDS,
    Clause,
    json_equal,
    kind_of,
    member_subs,
    name_matches,
    position_subs,
    without_enum,
)
from decodekit.constraints.frontends.schema.formats import FORMATS
from decodekit.constraints.frontends.schema.numbers import MAX_INT_DIGITS, NUMBER, intervals
from decodekit.errors import ConstraintError

if TYPE_CHECKING:
    from decodekit.constraints.frontends.schema.normal_form import Normalizer


def disjoint(a: Clause, b: Clause, norm: Normalizer, depth: int = 0) -> bool:
    """Whether no value satisfies both clauses (False: not proved)."""
    if not (a.exact and b.exact) or depth > 8:
        return False
    if not (a.kinds & b.kinds):
        return True
    if a.rule is not None or b.rule is not None:
        return False
    for x, y in ((a, b), (b, a)):
        if x.enum is not None and all(check_value(y, v, norm) is False for v in x.enum):
            return True
    if a.enum is not None or b.enum is not None:
        return False
    return all(kind_disjoint(a, b, kind, norm, depth) for kind in a.kinds & b.kinds)


def kind_disjoint(a: Clause, b: Clause, kind: str, norm: Normalizer, depth: int = 0) -> bool:
    """Whether no value of ``kind`` satisfies both exact clauses without enum (False: not proved)."""
    for _ in (0,):
        if kind in ("integer", "fraction"):
            alo, alos, ahi, ahis = intervals(a)
            blo, blos, bhi, bhis = intervals(b)
            if (ahi is not None and blo is not None and (ahi < blo or ahi == blo and (ahis or blos))) or (
                bhi is not None and alo is not None and (bhi < alo or bhi == alo and (bhis or alos))
            ):
                continue
            return False
        if kind == "object" and (
            any(
                subs_disjoint(member_subs(a, k), member_subs(b, k), norm, depth)
                for k in a.required & b.required
            )
            or a.required & b.forbid
            or b.required & a.forbid
        ):
            continue
        return False
    return True


def separate(a: Clause, b: Clause, wa: Clause, wb: Clause, norm: Normalizer) -> bool:
    """Write less of two exact clauses ``a``, ``b`` (what two oneOf branches accept) so that no
    value written from one (``wa``, ``wb``: what is written) satisfies the other: objects lacking
    a property the other requires; the kinds where that or a proof fails written by neither.
    False when an enum stands in the way (its values would need a complement)."""
    if not (a.exact and b.exact) or a.enum is not None or b.enum is not None:
        return False
    if a.rule is not None or b.rule is not None:  # a nonterminal is written whole or not at all
        return False
    for kind in sorted(a.kinds & b.kinds):
        if kind_disjoint(a, b, kind, norm):
            continue
        # what is written is now a part of what each branch accepts: no proof may rest on it
        # (an enclosing oneOf would read "no integer written" as "no integer accepted")
        wa.exact = wb.exact = False
        if kind == "object" and (a.required - b.required) and (b.required - a.required):
            wa.forbid.add(min(b.required - a.required))
            wb.forbid.add(min(a.required - b.required))
            continue
        wa.kinds.discard(kind)
        wb.kinds.discard(kind)
    return True


def json_text(v) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def value_kinds(c: Clause) -> set:
    """The kinds of value that may satisfy ``c`` (those of its enum values)."""
    return c.kinds if c.enum is None else c.kinds & {kind_of(v) for v in c.enum}


def number_form(c: Clause) -> str | None:
    """How :meth:`Compiler.number` writes the numbers of ``c``: ``NUMBER`` (the JSON grammar:
    ``1.0``, ``1e2`` and ``-0`` too), ``INTEGER`` (``-0`` too), ``MULT`` (multiples, canonical),
    ``RANGE`` (canonical integers in range, decimals ``I.F``), ``FRAC`` (decimals only); None:
    refused there."""
    if c.mult:
        ms = {m for m, _ in c.mult}
        m = next(iter(ms))
        if len(ms) > 1 or c.lo or c.hi or not float(m).is_integer() or 1000 % int(m):
            return None
        return "INTEGER" if int(m) == 1 else "MULT"
    if not c.lo and not c.hi:
        return (
            "NUMBER" if c.kinds >= {"integer", "fraction"} else "INTEGER" if "integer" in c.kinds else "FRAC"
        )
    return "RANGE"


def short_integers(c: Clause) -> bool:
    """Whether every integer written for ``c`` has at most MAX_INT_DIGITS digits."""
    if number_form(c) != "RANGE":
        return True
    lo, lo_s, hi, hi_s = intervals(c)
    cap = Decimal(10) ** MAX_INT_DIGITS
    return (lo is None or lo > -cap) and (hi is None or hi < cap)


def covers(b: Clause, a: Clause, norm: Normalizer, depth: int = 0) -> bool:
    """Whether the text written for ``b`` holds every text written for ``a`` whose value satisfies
    ``b`` (False: not proved), so that ``W(a) & ~W(b)`` removes exactly the values of ``a`` that
    satisfy ``b``. Both are written by one compiler: one whitespace rule, and strings in every
    spelling (``"a"`` and ``"\u0061"``: a length is counted per decoded character). Proved for
    null, booleans, strings without ``pattern``/``format`` (whose texts are a part: one spelling,
    the BMP), integers where ``a`` writes them canonically or ``b`` writes the whole JSON number
    grammar (``-0`` is added to what an exclusion writes, see :meth:`Compiler.excluded`),
    fractions where ``b`` writes the whole grammar, and arrays item by item. Never for objects:
    a text's key order, and the extra members a schema accepts but does not write, would need one
    spelling per value. ``b`` must be exact and without enum (an enum writes one spelling)."""
    if depth > 6 or not b.exact or a.rule is not None or b.rule is not None:
        return False
    kinds = a.kinds & b.kinds
    if b.enum is not None:
        return enum_covers(b, a, norm)
    if a.enum is not None:
        return all(enum_covered(b, v, norm) for v in a.enum if kind_of(v) in b.kinds)
    if "object" in kinds:
        return False
    if "string" in kinds and (b.patterns or b.formats):
        return False
    bf = number_form(b)
    if "integer" in kinds:
        af = number_form(a)
        if af is None or bf is None or af == "NUMBER" and bf != "NUMBER" or not short_integers(a):
            return False
    if "fraction" in kinds and bf != "NUMBER":
        return False
    if "array" in kinds:
        if b.prefix or b.contains or b.unique or not b.items or a.unique:
            return False
        positions = [list(p) for p in a.prefix] + [a.items]
        if a.contains:
            positions.append(a.items + a.contains)
        try:
            bs = conjunction(b.items, norm)
            for subs in positions:
                for x in conjunction(subs, norm) if subs else [Clause(a.ptr)]:
                    if not all(
                        y.exact and covers(y, x, norm, depth + 1) for y in bs if not disjoint(x, y, norm)
                    ):
                        return False
        except ConstraintError:
            return False
    return True


def enum_covers(b: Clause, a: Clause, norm: Normalizer) -> bool:
    """:func:`covers` for an enum ``b``, written in one spelling each: where ``a`` writes only
    that spelling (null, booleans; integers where ``a`` writes canonical ones: not ``1.0``, and
    ``-0`` only where 0 is not in the enum) and the enum writes every value that satisfies ``b``."""
    if a.enum is not None:  # both in compact JSON: the same text where the same value is written
        texts = {json_text(w) for w in b.enum if check_value(without_enum(b), w, norm) is True}
        return all(
            check_value(b, v, norm) is False or check_value(b, v, norm) is True and json_text(v) in texts
            for v in a.enum
        )
    form = number_form(a) if a.kinds & {"integer", "fraction"} else "RANGE"
    for v in b.enum:
        kind = kind_of(v)
        if kind not in a.kinds or check_value(without_enum(b), v, norm) is False:
            continue  # a writes no text of it, or it does not satisfy b
        if check_value(without_enum(b), v, norm) is not True and not (
            b.constrains_only_kinds() and b.kinds == KINDS
        ):
            return False  # the enum writer leaves out what it cannot decide
        if kind in ("null", "boolean"):
            continue
        if (
            kind != "integer"
            or isinstance(v, float)
            or form in (None, "NUMBER")  # 0 is excluded as -0 too (Compiler.enum)
        ):
            return False
    return True


def enum_covered(b: Clause, v, norm: Normalizer) -> bool:
    """Whether the compact JSON text of ``v`` is written for ``b`` where ``v`` satisfies ``b``."""
    verdict = check_value(b, v, norm)
    if verdict is False:
        return True
    if verdict is None:
        return False
    kind = kind_of(v)
    if kind in ("null", "boolean"):
        return True
    if kind == "string":
        return not (b.patterns or b.formats)
    if kind == "integer":  # 1.0 is written "1.0": only the full grammar writes it
        form = number_form(b)
        return form is not None and abs(v) < 10**MAX_INT_DIGITS and (form == "NUMBER" or isinstance(v, int))
    if kind == "fraction":
        return number_form(b) == "NUMBER" and regex.fullmatch(NUMBER, json.dumps(v)) is not None
    return False


def subs_disjoint(xs: list, ys: list, norm: Normalizer, depth: int) -> bool:
    if not xs or not ys:
        return False
    cx, cy = conjunction(xs, norm), conjunction(ys, norm)
    return all(disjoint(a, b, norm, depth + 1) for a in cx for b in cy)


def conjunction(subs: list, norm: Normalizer) -> list[Clause]:
    """The clauses of the conjunction of ``subs`` (each ``(schema, ctx, pointer)``)."""
    alts = [Clause(subs[0][2] if subs else "")]
    for s, ctx, ptr in subs:
        alts = norm.product(alts, norm.clauses(s, ctx, ptr), ptr)
    return alts


def check_value(c: Clause, v, norm: Normalizer, depth: int = 0):
    """Whether the value ``v`` satisfies the clause: True, False, or None (not decided)."""
    if depth > 20:
        return None
    if c.rule is not None:
        return check_subs([c.rule[1]], v, norm, depth)
    kind = kind_of(v)
    if kind not in c.kinds:
        return False if c.exact else None
    if c.enum is not None and not any(json_equal(v, w) for w in c.enum):
        return False if c.exact else None
    verdicts = []
    if kind in ("integer", "fraction"):
        for b, strict in c.lo:
            verdicts.append(v > b if strict else v >= b)
        for b, strict in c.hi:
            verdicts.append(v < b if strict else v <= b)
        for m, _ in c.mult:
            verdicts.append(True if isinstance(v, int) and isinstance(m, int) and v % m == 0 else None)
    elif kind == "string":
        verdicts.append(c.min_len <= len(v) and (c.max_len is None or len(v) <= c.max_len))
        for p, ptr in c.patterns:
            surely, maybe = name_matches(p, v, ptr)
            verdicts.append(True if surely else False if not maybe else None)
        for f, _ in c.formats:
            verdicts.append(True if regex.fullmatch(FORMATS[f], v) else None)
    elif kind == "array":
        verdicts.append(c.min_items <= len(v) and (c.max_items is None or len(v) <= c.max_items))
        for i, x in enumerate(v):
            verdicts.append(check_subs(position_subs(c, i), x, norm, depth))
        if c.unique:
            verdicts.append(all(not json_equal(x, y) for x, y in itertools.combinations(v, 2)))
        if c.contains:
            hits = [check_subs(c.contains, x, norm, depth) for x in v]
            n_true, n_maybe = hits.count(True), hits.count(None)
            verdicts.append(
                True if n_true >= c.min_contains else None if n_true + n_maybe >= c.min_contains else False
            )
    elif kind == "object":
        verdicts.append(c.required <= v.keys() and not (c.forbid & v.keys()))
        verdicts.append(c.min_props <= len(v) and (c.max_props is None or len(v) <= c.max_props))
        for k, x in v.items():
            verdicts.append(check_subs(member_subs(c, k), x, norm, depth))
            if c.names:
                verdicts.append(check_subs(c.names, k, norm, depth))
            if k in c.dep_required:
                verdicts.append(c.dep_required[k] <= v.keys())
            if k in c.dep_schemas:
                verdicts.append(check_subs(c.dep_schemas[k], v, norm, depth))
    if False in verdicts:
        return False if c.exact else None
    if None in verdicts:
        return None
    for x, *_ in c.excl:  # a value satisfying an excluded clause fails this one
        r = check_value(x, v, norm, depth + 1)
        if r is not False:
            return False if r is True and c.exact else None
    return True


def check_subs(subs: list, v, norm: Normalizer, depth: int):
    if not subs:
        return True
    verdict = True
    for s, ctx, ptr in subs:
        try:
            parts = norm.clauses(s, ctx, ptr)
        except ConstraintError:
            return None
        results = [check_value(p, v, norm, depth + 1) for p in parts]
        r = True if True in results else None if None in results or not all(p.exact for p in parts) else False
        if r is False:
            return False
        if r is None:
            verdict = None
    return verdict
