"""Numbers: the JSON integer and number grammars as written (:data:`INTEGER`, :data:`NUMBER`),
bounded integers as digit-range regexes (:func:`signed_range`), bounded decimals
(:func:`fraction_range`), ``multipleOf`` (:func:`multiple_text`), and a clause's number fragment
(:func:`number_text`)."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

from decodekit.constraints.frontends.schema.fragments import either, fragment
from decodekit.constraints.frontends.schema.limits import show
from decodekit.errors import ConstraintError

if TYPE_CHECKING:
    from decodekit.constraints.frontends.schema.clauses import Clause


# a schema whose regex would be too large is compiled again with its recursions unrolled fewer times
MAX_INT_DIGITS = 18  # digits of an integer without an upper bound (json.loads refuses over 4,300)


MAX_FRACTION_DIGITS = 6  # fraction digits of a number with bounds (15 significant digits at most)


INTEGER = rf"-?(?:0|[1-9][0-9]{{0,{MAX_INT_DIGITS - 1}}})"


NUMBER = INTEGER + r"(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"


def intervals(c: Clause):
    """(lo, lo_strict, hi, hi_strict) of the numeric bounds, as Decimals of the shortest repr
    (None: unbounded)."""
    lo = hi = None
    lo_s = hi_s = False
    for b, strict in c.lo:
        d = Decimal(repr(b)) if isinstance(b, float) else Decimal(b)
        if lo is None or d > lo or (d == lo and strict):
            lo, lo_s = d, strict
    for b, strict in c.hi:
        d = Decimal(repr(b)) if isinstance(b, float) else Decimal(b)
        if hi is None or d < hi or (d == hi and strict):
            hi, hi_s = d, strict
    return lo, lo_s, hi, hi_s


def number_text(c: Clause, widen: bool):
    """A number's fragment (its kinds, bounds and multipleOf), and why it writes no integer when
    its bounds leave only integers past the digits written ("" otherwise). ``widen``: an excluded
    text, holding ``-0`` beside ``0``."""
    if c.mult:
        return multiple_text(c, widen), ""
    if not c.lo and not c.hi:
        if c.kinds >= {"integer", "fraction"}:
            return fragment(NUMBER), ""
        if "integer" in c.kinds:
            return fragment(INTEGER), ""
    why_none = ""
    lo, lo_s, hi, hi_s = intervals(c)
    parts = []
    if "integer" in c.kinds:
        ilo = None if lo is None else (math.floor(lo) + 1 if lo_s and lo == math.floor(lo) else math.ceil(lo))
        ihi = None if hi is None else (math.ceil(hi) - 1 if hi_s and hi == math.ceil(hi) else math.floor(hi))
        ints = signed_range(ilo, ihi)
        parts.append(ints)
        if not ints and signed_range(ilo, ihi, cap=None):  # only integers past the written digits
            side, bound = ("minimum", ilo) if ilo is not None and ilo > 0 else ("maximum", ihi)
            other = "maximum" if side == "minimum" else "minimum"
            why_none = (
                f"{show(c.ptr)}/{side}: an integer without a {other} is written with at most "
                f"{MAX_INT_DIGITS} digits, and {side} {short_number(bound)} leaves none; "
                f"give the {other} too"
            )
        if widen and (ilo is None or ilo <= 0) and (ihi is None or ihi >= 0):
            parts.append("-0")
    if "fraction" in c.kinds:
        parts.append(fraction_range(lo, lo_s, hi, hi_s))
    return either([fragment(p) for p in parts if p]), why_none


def multiple_text(c: Clause, widen: bool):
    """multipleOf for integers: a divisor of a power of ten, by the last digits."""
    ms = {m for m, _ in c.mult}
    m = ms.pop() if len(ms) == 1 else None
    ptr = c.mult[0][1]
    if "integer" not in c.kinds:  # only integers are written: none of them may be
        raise ConstraintError(f"{show(ptr)}/multipleOf is not supported where integers are excluded")
    if m is not None and not c.lo and not c.hi and not widen and integers_pass(m):
        return fragment(
            INTEGER
        )  # 10**-k: the integers, a part (their multiples of m with fractions are not written)
    if m is None or not (isinstance(m, int) or float(m).is_integer()) or c.lo or c.hi:
        raise ConstraintError(
            f"{show(ptr)}/multipleOf is not supported (only a divisor of 1000 or 10**-k, unbounded)"
        )
    m = int(m)
    k = next((k for k in range(4) if 10**k % m == 0), None)
    if k is None:
        raise ConstraintError(
            f"{show(ptr)}/multipleOf is not supported (only a divisor of 1000 or 10**-k, unbounded)"
        )
    if k == 0:
        return fragment(INTEGER)
    ends = [f"{r:0{k}d}" for r in range(0, 10**k, m)]
    zero = "-?0" if widen else "0"
    head = f"[1-9][0-9]{{0,{MAX_INT_DIGITS - k - 1}}}"
    small = [str(int(e)) for e in ends if e != "0" * k]  # below 10**k
    return fragment(
        f"(?:{zero}|-?(?:{head}(?:{'|'.join(ends)})|{'|'.join(small)}))"
        if small
        else f"(?:{zero}|-?{head}{'0' * k})"
    )


def integers_pass(m) -> bool:
    """Whether ``m`` is a float ``10**-k`` (``0.1``, ``0.01``, ...) that every JSON integer ``n`` is a
    multiple of as validators compute it: ``n / m`` in floating point is integral. The double
    nearest ``10**-k`` is ``10**-k (1 + d)``; with ``|d| < 2**-54`` (under half an ulp of any
    quotient), ``n / m`` rounds to ``n 10**k`` where that is below ``2**53``, and any quotient above
    is an integral double."""
    if isinstance(m, bool) or not isinstance(m, float) or not 0 < m < 1:
        return False
    k = round(-math.log10(m))
    if not 1 <= k <= 15 or Decimal(repr(m)) != Decimal(1).scaleb(-k):
        return False
    exact = Fraction(1, 10**k)
    return abs(exact / Fraction(m) - 1) < Fraction(1, 2**54)


def signed_range(lo: int | None, hi: int | None, cap: int | None = 10**MAX_INT_DIGITS - 1) -> str:
    """Integers in [lo, hi] (None: unbounded, then at most MAX_INT_DIGITS digits); '' when none.
    ``cap=None``: whether any integer is in [lo, hi] ('-' or '' ; nothing is written)."""
    if cap is None:
        return "-" if lo is None or hi is None or lo <= hi else ""
    lo = -cap if lo is None else lo
    hi = cap if hi is None else hi
    neg = digit_range(max(-hi, 1), -lo) if lo < 0 else ""
    pos = digit_range(max(lo, 0), hi) if hi >= 0 else ""
    alts = [a for a in ("-" + neg if neg else "", pos) if a]
    return alts[0] if len(alts) == 1 else f"(?:{'|'.join(alts)})" if alts else ""


def short_number(n: int) -> str:
    """An integer for a message: in full up to 30 digits, else its digit count."""
    text = str(n)
    return text if len(text) <= 30 else f"{text[:6]}... ({len(text.lstrip('-'))} digits)"


def digit_range(lo: int, hi: int) -> str:
    """Decimal numerals (no leading zero) of lo <= n <= hi; '' when none."""
    if hi < lo:
        return ""
    alts, n, full = [], len(str(lo)), []
    while n <= len(str(hi)):
        a, b = max(lo, 10 ** (n - 1) if n > 1 else 0), min(hi, 10**n - 1)
        if n > 1 and a == 10 ** (n - 1) and b == 10**n - 1:
            full.append(n)  # every numeral of n digits: merged with the next lengths
        else:
            alts.extend(digit_runs(full))
            full = []
            alts.append(same_length(str(a), str(b)))
        n += 1
    alts.extend(digit_runs(full))
    return alts[0] if len(alts) == 1 else f"(?:{'|'.join(alts)})"


def digit_runs(lengths: list[int]) -> list[str]:
    """Every numeral (no leading zero) of lengths[0] to lengths[-1] digits (consecutive)."""
    if not lengths:
        return []
    lo, hi = lengths[0] - 1, lengths[-1] - 1
    return ["[1-9][0-9]" + (f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}")]


def same_length(a: str, b: str) -> str:
    """Fixed-width numerals from a to b (same length, a <= b; leading zeros allowed)."""
    if a == b:
        return a
    if a[1:] == "0" * (len(a) - 1) and b[1:] == "9" * (len(b) - 1):
        first = a[0] if a[0] == b[0] else f"[{a[0]}-{b[0]}]"
        return first + ("" if len(a) == 1 else "[0-9]" if len(a) == 2 else f"[0-9]{{{len(a) - 1}}}")
    if a[0] == b[0]:
        return a[0] + same_length(a[1:], b[1:])
    k = len(a) - 1
    parts = [a[0] + same_length(a[1:], "9" * k)]
    if int(a[0]) + 1 <= int(b[0]) - 1:
        mid = f"{int(a[0]) + 1}" if int(a[0]) + 1 == int(b[0]) - 1 else f"[{int(a[0]) + 1}-{int(b[0]) - 1}]"
        parts.append(mid + (f"[0-9]{{{k}}}" if k > 1 else "[0-9]"))
    parts.append(b[0] + same_length("0" * k, b[1:]))
    return f"(?:{'|'.join(parts)})"


def fixed_width(a: int, b: int, k: int) -> str:
    """Numerals of the integers a..b (0 <= a <= b) written with a point before the last k digits."""
    if k == 0:
        return digit_range(a, b)
    unit = 10**k
    ia, ib = a // unit, b // unit
    fa, fb = f"{a % unit:0{k}d}", f"{b % unit:0{k}d}"
    if ia == ib:
        return f"{ia}\\.{same_length(fa, fb)}"
    parts = [f"{ia}\\.{same_length(fa, '9' * k)}"]
    if ia + 1 <= ib - 1:
        parts.append(f"{digit_range(ia + 1, ib - 1)}\\.[0-9]{{{k}}}")
    parts.append(f"{ib}\\.{same_length('0' * k, fb)}")
    return f"(?:{'|'.join(parts)})"


def positive_fractions(lo: Decimal, lo_s: bool, hi: Decimal | None, hi_s: bool) -> list[str]:
    """Decimals v > 0 (1 to MAX_FRACTION_DIGITS fraction digits, the last non-zero, 15 significant
    digits at most) with lo < v (lo <= v unless lo_s) and v < hi (v <= hi unless hi_s)."""
    out = []
    for j in range(1, MAX_FRACTION_DIGITS + 1):
        unit = 10**j
        low, high = lo * unit, None if hi is None else hi * unit
        a = int(low) + (1 if lo_s else 0) if low == int(low) else math.ceil(low)
        b = (
            10**15 - 1
            if high is None
            else int(high) - (1 if hi_s else 0)
            if high == int(high)
            else math.floor(high)
        )
        a, b = max(a, 1), min(b, 10**15 - 1)
        if a > b:
            continue
        qa, qb = a // 10, b // 10  # M = 10 q + r with r in 1-9: the last digit non-zero

        def head(x: int, y: int, j: int = j) -> str:
            return fixed_width(x, y, j - 1) + ("\\." if j == 1 else "")

        def digit(x: int, y: int) -> str:
            return str(x) if x == y else f"[{x}-{y}]"

        if qa == qb:
            if max(a % 10, 1) <= b % 10:
                out.append(head(qa, qa) + digit(max(a % 10, 1), b % 10))
            continue
        out.append(head(qa, qa) + digit(max(a % 10, 1), 9))
        if qa + 1 <= qb - 1:
            out.append(head(qa + 1, qb - 1) + "[1-9]")
        if b % 10 >= 1:
            out.append(head(qb, qb) + digit(1, b % 10))
    return out


def fraction_range(lo, lo_s, hi, hi_s) -> str:
    """Non-integral decimals within the bounds (None: unbounded) as json.loads reads them: 15
    significant digits at most, so the float of one is strictly inside any bound it is inside."""
    zero = Decimal(0)
    pos = neg = []
    if hi is None or hi > 0:
        pos = positive_fractions(lo if lo is not None and lo > 0 else zero, lo_s, hi, hi_s)
    if lo is None or lo < 0:
        neg = positive_fractions(
            -hi if hi is not None and hi < 0 else zero, hi_s, None if lo is None else -lo, lo_s
        )
    alts = pos + ["-" + p for p in neg]
    return alts[0] if len(alts) == 1 else f"(?:{'|'.join(alts)})" if alts else ""
