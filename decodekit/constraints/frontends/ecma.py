"""ECMA-262 patterns (JSON Schema's ``pattern``, ``patternProperties``) -> decodekit's regex dialect.

A JSON Schema ``pattern`` is an ECMA-262 regular expression without flags, tested as a search
(``^``/``$`` anchor it). Validators differ: ECMA-262 without the ``u`` flag reads UTF-16 code
units and ASCII ``\\d \\w``; Python ``re`` (what ``jsonschema`` calls) reads code points and
Unicode ``\\d \\w \\s``. The translation is a **subset of both readings**, so that every string it
accepts is matched under either:

* every character class is cut to the Basic Multilingual Plane without surrogates (where code
  units and code points agree);
* ``\\d \\w \\s`` and ``.`` take the narrower of the two readings in a class that matches them
  (``[0-9]`` for ``\\d``), and the wider one inside a negated class (``[^\\d]`` excludes every
  Unicode digit), so ``\\D \\W \\S`` are the complement of the wider reading;
* ``^`` and ``$`` only at the ends of a top-level alternative; an unanchored end is a search:
  any characters may stand there (``.*p.*`` over JSON string characters).

Refused (:class:`ConstraintError`, one line): what the two readings parse differently or what a
finite automaton cannot do: back-references, lookarounds, named groups, ``\\b``, ``\\p{...}``
(a literal ``p`` in ECMA-262 without ``u``), inline flags ``(?i)`` (a syntax error there),
letter escapes other than ``\\d \\D \\w \\W \\s \\S \\t \\n \\v \\f \\r \\x \\u \\0``, ``{,n}``, class
ranges with a class escape at an end, empty classes, characters outside the BMP in the pattern.
POSIX ``[[:digit:]]`` is read as ECMA-262 reads it: the class ``[[:digt]`` then a literal ``]``.

:func:`translate` gives two regexes: over the decoded string (to test names and enum values) and
over its JSON text between the quotes (each character spelled one way: raw, or the escape
``json.dumps`` writes for ``"``, ``\\`` and control characters).
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from decodekit.constraints.syntax.charsets import gaps
from decodekit.errors import ConstraintError

BMP = 0x10000
_SURROGATES = (0xD800, 0xDFFF)
# ECMA-262 WhiteSpace and LineTerminator (\s)
_ECMA_SPACE = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0xA0, 0x1680, *range(0x2000, 0x200B)]
_ECMA_SPACE += [0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF]
_LINE_ENDS = (0x0A, 0x0D, 0x2028, 0x2029)
_SHORT = {
    0x22: '\\\\"',
    0x5C: "\\\\\\\\",
    0x08: "\\\\b",
    0x0C: "\\\\f",
    0x0A: "\\\\n",
    0x0D: "\\\\r",
    0x09: "\\\\t",
}
_SIMPLE = {"t": 0x09, "n": 0x0A, "v": 0x0B, "f": 0x0C, "r": 0x0D}


class Translated(NamedTuple):
    """``decoded``: a regex (decodekit's dialect) whose full matches are strings the pattern
    matches; ``encoded``: the same strings as JSON text between the quotes; ``states``: an upper
    bound of the NFA states of ``encoded``; ``shortest``, ``longest``: the lengths (characters) of
    the strings ``decoded`` matches (``longest`` None: unbounded)."""

    decoded: str
    encoded: str
    states: int
    shortest: int
    longest: int | None


# A parsed pattern: ("set", frozenset-free interval tuple) | ("seq", [..]) | ("alt", [..])
# | ("rep", node, lo, hi) | ("start",) | ("end",)


def _intervals(codes) -> tuple:
    out: list[list[int]] = []
    for c in sorted(set(codes)):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return tuple((a, b) for a, b in out)


def _union(*sets) -> tuple:
    spans = sorted(s for x in sets for s in x)
    out: list[list[int]] = []
    for a, b in spans:
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


def _complement(s: tuple) -> tuple:
    """Within the BMP without surrogates."""
    return _cut(tuple(gaps(s, BMP)))


def _cut(s: tuple) -> tuple:
    """Intersect with the BMP without surrogates."""
    out = []
    for a, b in s:
        for lo, hi in ((a, min(b, _SURROGATES[0] - 1)), (max(a, _SURROGATES[1] + 1), min(b, BMP - 1))):
            if lo <= hi:
                out.append((lo, hi))
    return tuple(out)


@functools.cache
def _python_class(name: str) -> tuple:
    pred = re.compile("\\" + name)
    return _intervals(c for c in range(BMP) if pred.match(chr(c)))


@functools.cache
def _escape_sets(letter: str) -> tuple[tuple, tuple]:
    """(narrow, wide) readings of ``\\d \\w \\s \\D \\W \\S`` over the BMP."""
    ecma = {
        "d": _intervals(range(0x30, 0x3A)),
        "w": _intervals([*range(0x30, 0x3A), *range(0x41, 0x5B), 0x5F, *range(0x61, 0x7B)]),
        "s": _intervals(_ECMA_SPACE),
    }
    low = letter.lower()
    python = _python_class(low)
    narrow = tuple(_cut(_intersect(ecma[low], python)))
    wide = _cut(_union(ecma[low], python))
    if letter == low:
        return narrow, wide
    return _complement(wide), _complement(narrow)


def _intersect(a: tuple, b: tuple) -> tuple:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


class _Reader:
    """ECMA-262 Pattern (Annex B, no flags) -> the tree above, refusing what differs in ``re``."""

    def __init__(self, p: str, ptr: str):
        self.p, self.i, self.ptr = p, 0, ptr

    def fail(self, why: str):
        shown = self.p if len(self.p) <= 60 else self.p[:60] + "..."
        raise ConstraintError(f"{self.ptr or '/'}: pattern {shown!r}: {why}")

    def peek(self) -> str:
        return self.p[self.i] if self.i < len(self.p) else ""

    def alternation(self, depth: int = 0):
        if depth > 50:
            self.fail("groups nested more than 50 deep")
        branches = [self.sequence(depth)]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.sequence(depth))
        return ("alt", branches) if len(branches) > 1 else branches[0]

    def sequence(self, depth: int):
        items = []
        while self.i < len(self.p) and self.peek() not in "|)":
            atom = self.atom(depth)
            items.append(self.quantified(atom))
        return ("seq", items)

    def quantified(self, atom):
        c = self.peek()
        if c in ("*", "+", "?"):
            self.i += 1
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        elif c == "{" and (m := re.compile(r"\{([0-9]+)(,([0-9]*))?\}").match(self.p, self.i)):
            self.i = m.end()
            lo = int(m[1])
            hi = lo if m[2] is None else (int(m[3]) if m[3] else None)
            if hi is not None and hi < lo:
                self.fail("a quantifier {n,m} with m < n")
        elif c == "{" and self.p.startswith("{,", self.i):
            self.fail("'{,n}' is literal text in ECMA-262 but a quantifier in Python re")
        else:
            return atom
        if atom[0] in ("start", "end"):
            self.fail("a quantified anchor")
        if self.peek() == "?":  # lazy: the same matches
            self.i += 1
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and re.match(r"\{[0-9]", self.p[self.i :])):
            self.fail("a quantifier after a quantifier")
        return ("rep", atom, lo, hi)

    def atom(self, depth: int):
        c = self.peek()
        self.i += 1
        if c == "^":
            return ("start",)
        if c == "$":
            return ("end",)
        if c == ".":
            every = _complement(_intervals(_LINE_ENDS))
            return ("set", every, every)
        if c == "(":
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.peek() == "?":
                self.fail(
                    "lookarounds, named groups and inline flags are not supported (not regular, or not ECMA)"
                )
            inner = self.alternation(depth + 1)
            if self.peek() != ")":
                self.fail("an unclosed group")
            self.i += 1
            return inner
        if c == ")":
            self.fail("an unmatched ')'")
        if c in "*+?":
            self.fail(f"nothing to repeat before {c!r}")
        if c == "{" and re.match(r"[0-9]+(,[0-9]*)?\}", self.p[self.i :]):
            self.fail("nothing to repeat before '{'")
        if c == "[":
            return self.klass()
        if c == "\\":
            return self.escape(in_class=False)
        return self.literal(c)

    def literal(self, c: str):
        code = ord(c)
        if code >= BMP or _SURROGATES[0] <= code <= _SURROGATES[1]:
            self.fail(
                "characters outside the Basic Multilingual Plane are not supported (UTF-16 reads them as two)"
            )
        one = ((code, code),)
        return ("set", one, one)

    def escape(self, in_class: bool):
        c = self.peek()
        if not c:
            self.fail("a trailing backslash")
        self.i += 1
        if c in "dDwWsS":
            narrow, wide = _escape_sets(c)
            return ("set", narrow, wide)
        if c in _SIMPLE:
            return self.literal(chr(_SIMPLE[c]))
        if c == "0" and not self.peek().isdigit():
            return self.literal("\x00")
        if c in "xu":
            n = 2 if c == "x" else 4
            digits = self.p[self.i : self.i + n]
            if len(digits) != n or not all(d in "0123456789abcdefABCDEF" for d in digits):
                self.fail(f"\\{c} without {n} hex digits (a literal {c!r} in ECMA-262, an error in re)")
            self.i += n
            return self.literal(chr(int(digits, 16)))
        if c.isdigit():
            self.fail("back-references and octal escapes are not supported")
        if c in "bB" and not in_class:
            self.fail("word boundaries \\b \\B are not supported")
        if c.isalnum() or c == "_":
            self.fail(f"the escape \\{c} means different things in ECMA-262 and in Python re")
        return self.literal(c)

    def klass(self):
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        if self.peek() == "]":
            self.fail("an empty class [] or [^] (ECMA-262 and Python re read it differently)")
        narrow, wide = [], []
        while True:
            c = self.peek()
            if not c:
                self.fail("an unclosed class")
            if c == "]":
                self.i += 1
                break
            first = self.class_atom()
            if self.peek() == "-" and self.p[self.i + 1 : self.i + 2] not in ("]", ""):
                self.i += 1
                last = self.class_atom()
                if first[2] is None or last[2] is None:
                    self.fail("a class range with a class escape at an end")
                if last[2] < first[2]:
                    self.fail("a class range out of order")
                span = ((first[2], last[2]),)
                narrow.append(span)
                wide.append(span)
            else:
                narrow.append(first[0])
                wide.append(first[1])
        if negated:
            s = _complement(_union(*wide))
            return ("set", s, _complement(_union(*narrow)))
        return ("set", _cut(_union(*narrow)), _cut(_union(*wide)))

    def class_atom(self):
        """(narrow, wide, code point or None for a class escape)."""
        c = self.peek()
        self.i += 1
        if c == "\\":
            if self.peek() == "b":
                self.i += 1
                return ((8, 8),), ((8, 8),), 8
            if self.peek() == "-":
                self.i += 1
                return ((0x2D, 0x2D),), ((0x2D, 0x2D),), 0x2D
            node = self.escape(in_class=True)
            narrow, wide = node[1], node[2]
            single = (
                narrow[0][0] if len(narrow) == 1 and narrow[0][0] == narrow[0][1] and narrow == wide else None
            )
            return narrow, wide, single
        if c == "[" and self.peek() in ":=.":
            pass  # POSIX-looking: ECMA-262 reads '[' and ':' as members (Python re warns, reads the same)
        code = ord(c)
        if code >= BMP or _SURROGATES[0] <= code <= _SURROGATES[1]:
            self.fail(
                "characters outside the Basic Multilingual Plane are not supported (UTF-16 reads them as two)"
            )
        return ((code, code),), ((code, code),), code


def _set_text(s: tuple) -> str:
    """A class of decodekit's dialect for the intervals ``s`` (empty: a class matching nothing)."""
    if not s:
        return "[^\\x00-\\U0010ffff]"

    def ch(c: int) -> str:
        return chr(c) if chr(c).isascii() and chr(c).isalnum() else f"\\u{c:04x}"

    size = sum(b - a + 1 for a, b in s)
    if size > (BMP - 2048) // 2:  # name the complement (the parser budgets the characters named)
        comp = _complement(s)
        parts = "".join(ch(a) if a == b else f"{ch(a)}-{ch(b)}" for a, b in comp)
        return f"[^{parts}\\ud800-\\udfff\\U00010000-\\U0010ffff]"
    return "[" + "".join(ch(a) if a == b else f"{ch(a)}-{ch(b)}" for a, b in s) + "]"


def _encoded_set(s: tuple) -> tuple[str, int]:
    """(regex over JSON text, NFA states) for one character of ``s``."""
    special = _intervals([0x22, 0x5C, *range(0x20)])
    raw = _intersect(s, _complement(special))
    alts = [_set_text(raw)] if raw else []
    long: dict[int, list[str]] = {}  # \u00XX escapes, by their first hex digit
    for a, b in _intersect(s, special):
        for c in range(a, b + 1):
            if c in _SHORT:
                alts.append(_SHORT[c])
            else:
                long.setdefault(c >> 4, []).append(f"{c & 15:x}")
    if long:
        hexes = "|".join(f"{hi}[{''.join(lo)}]" for hi, lo in sorted(long.items()))
        alts.append(f"\\\\u00(?:{hexes})")
    if not alts:
        return "[^\\x00-\\U0010ffff]", 2
    text = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
    return text, 2 + 8 * len(alts)


def _emit(node, encoded: bool) -> tuple[str, int]:
    kind = node[0]
    if kind == "set":
        return _encoded_set(node[1]) if encoded else (_set_text(node[1]), 2)
    if kind == "seq":
        parts = [_emit(x, encoded) for x in node[1]]
        return "".join(f"(?:{t})" if "|" in t and not t.startswith("(?:") else t for t, _ in parts), sum(
            n for _, n in parts
        ) + 1
    if kind == "alt":
        parts = [_emit(x, encoded) for x in node[1]]
        return "(?:" + "|".join(t for t, _ in parts) + ")", sum(n for _, n in parts) + 2
    if kind == "rep":
        t, n = _emit(node[1], encoded)
        lo, hi = node[2], node[3]
        q = (
            "*"
            if (lo, hi) == (0, None)
            else "+"
            if (lo, hi) == (1, None)
            else "?"
            if (lo, hi) == (0, 1)
            else None
        )
        q = q or (f"{{{lo}}}" if lo == hi else f"{{{lo},{'' if hi is None else hi}}}")
        return f"(?:{t}){q}", n * max(lo, hi or 0, 1) + 2
    raise AssertionError(kind)


def _lengths(node) -> tuple[int, int | None]:
    kind = node[0]
    if kind == "set":
        return (1, 1) if node[1] else (0, 0)
    if kind in ("start", "end"):
        return 0, 0
    if kind == "rep":
        lo, hi = _lengths(node[1])
        return lo * node[2], None if hi is None or node[3] is None else hi * node[3]
    parts = [_lengths(x) for x in node[1]]
    if kind == "seq":
        return sum(a for a, _ in parts), None if any(b is None for _, b in parts) else sum(
            b for _, b in parts
        )
    if not parts:
        return 0, 0
    return min(a for a, _ in parts), None if any(b is None for _, b in parts) else max(b for _, b in parts)


def _anchors_inside(node) -> bool:
    if node[0] in ("start", "end"):
        return True
    if node[0] in ("seq", "alt"):
        return any(_anchors_inside(x) for x in node[1])
    if node[0] == "rep":
        return _anchors_inside(node[1])
    return False


def _opened(tree) -> list[list]:
    """The top-level alternatives as item lists with the groups at their edges opened (the same
    strings): a group at a branch's start or end is spliced into it (``(^a)b`` is ``^ab``) and a
    branch that is one group of alternatives is those alternatives, so that an anchor inside
    such a group, at the text's edge, is read where it stands (``^$|(^a+$)``)."""
    out, todo = [], [tree]
    while todo:
        b = todo.pop(0)
        if b[0] == "alt":
            todo[0:0] = list(b[1])
            continue
        items = list(b[1]) if b[0] == "seq" else [b]
        while items and (items[0][0] == "seq" or items[-1][0] == "seq"):
            items = list(items[0][1]) + items[1:] if items[0][0] == "seq" else items[:-1] + list(items[-1][1])
        if len(items) == 1 and items[0][0] == "alt":
            todo[0:0] = list(items[0][1])
        else:
            out.append(items)
    return out


ANY_CHAR = (((0, BMP - 1),), ((0, BMP - 1),))


def _capped(node, cap: int):
    """``node`` with every repetition at most ``cap`` times (or its minimum): a part of its strings."""
    kind = node[0]
    if kind == "rep":
        hi = node[3] if node[3] is not None and node[3] <= cap else max(node[2], cap)
        return ("rep", _capped(node[1], cap), node[2], hi)
    if kind in ("seq", "alt"):
        return (kind, [_capped(x, cap) for x in node[1]])
    return node


def _raised(items: list, need: int) -> list:
    """``items`` (a sequence) with repetitions of one character class repeated more often, adding
    up to ``need`` characters to the shortest match: a part of its strings."""
    out = []
    for x in items:
        if need > 0 and x[0] == "rep" and x[1][0] == "set":
            more = need if x[3] is None else min(need, x[3] - x[2])
            x, need = ("rep", x[1], x[2] + more, x[3]), need - more
        out.append(x)
    return out


@functools.lru_cache(maxsize=4096)
def translate(pattern: str, ptr: str = "", cap: int | None = None, need: int = 0) -> Translated:
    """The ECMA-262 ``pattern`` as a search, in both forms (see the module docstring); raises
    ConstraintError naming ``ptr`` for what it refuses. ``cap``: every repetition (and the free
    text around an unanchored pattern) at most ``cap`` times; ``need``: at least that many more
    characters from repeated classes (both give a part of the pattern's strings, to fit lengths)."""
    reader = _Reader(pattern, ptr)
    tree = reader.alternation()
    if reader.i != len(pattern):
        reader.fail("an unmatched ')'")
    branches = [list(b[1]) if b[0] == "seq" else [b] for b in (tree[1] if tree[0] == "alt" else [tree])]
    if any(_anchors_inside(x) for items in branches for x in items):
        branches = _opened(tree)
    dec, enc, states, shortest, longest = [], [], 0, [], []
    for items in branches:
        start = bool(items) and items[0][0] == "start"
        items = items[1:] if start else items
        end = bool(items) and items[-1][0] == "end"
        items = items[:-1] if end else items
        if any(_anchors_inside(x) for x in items):
            reader.fail("'^' or '$' inside the pattern (only at the ends of an alternative) is not supported")
        if cap is not None:
            items = [_capped(x, cap) for x in items]
        if need:
            items = _raised(items, need)
        lo, hi = _lengths(("seq", items))
        free = "*" if cap is None else f"{{0,{cap}}}"
        shortest.append(lo)
        free_len = 0 if start and end else None if cap is None else cap * (2 - start - end)
        longest.append(None if hi is None or free_len is None else hi + free_len)
        d, _ = _emit(("seq", items), False)
        e, n = _emit(("seq", items), True)
        if not start:
            d, e = r"[\s\S]" + free + d, f"{_JSON_CHAR}{free}{e}"
        if not end:
            d, e = d + r"[\s\S]" + free, f"{e}{_JSON_CHAR}{free}"
        dec.append(d)
        enc.append(e)
        states += n + 200
    join = "|".join
    return Translated(
        f"(?:{join(dec)})" if len(dec) > 1 else dec[0],
        f"(?:{join(enc)})" if len(enc) > 1 else enc[0],
        states,
        min(shortest),
        None if None in longest else max(longest),
    )


# One character of a JSON string (the same as schema.CHAR; kept here so that this module is a leaf)
_JSON_CHAR = (
    r'(?:[^"\\\x00-\x1f\ud800-\udfff]|\\["\\/bfnrt]'
    r"|\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))"
)
