"""Constraint expressions with intersection and complement, and their Brzozowski derivatives.

Users build :class:`Pattern` objects: ``Pattern(regex)`` (a regex, fully matched), combined with
``a & b`` (both match), ``a | b`` (either), ``~a`` (the text does not match ``a``; over valid
UTF-8 texts), at any depth; :func:`intersect`, :func:`union`, :func:`complement` and
:func:`excluding` are the same as functions. ``compile_regex`` and ``generate(constraint=...)``
accept them. A :class:`Pattern` is immutable and hashable (the compile cache's key) and its
``str`` reads like ``(A) & ~(B)``.

Compiling one (:class:`CharLevel`) parses every regex in it, computes one partition of the
characters into classes over all their character sets (:func:`chardfa._partition`, with the
word-character split when ``\\b``/``\\B`` occur), and rewrites the whole into a hash-consed
expression algebra (:class:`Expr`): ∅, ε, a set of classes (a bit mask), ``\\b``, ``\\B``,
concatenation (binary, right-nested), union and intersection (frozensets of operands),
complement, and counted repetition ``r{lo,hi}`` kept symbolic (``a{10000}`` is one node). The
smart constructors normalise (associativity, commutativity and idempotence of union and
intersection, ∅ and ε absorption, sets merged, ``~~r = r``), so that equal derivatives are the
same object and the derivatives of an expression are finitely many.

Word boundaries. Whether ``r`` matches the empty text at a position depends on the word-ness of
the characters before (``p``) and after (``n``) it: ``\\b`` holds iff ``p != n``, ``\\B`` iff
``p == n``; the text starts non-word and its end counts as non-word, as in
:mod:`~decodekit.constraints.automata.chardfa`. ``Expr.null`` holds the four cases as bits
``1 << (2 p + n)``. A state is (expression, ``p``); reading class ``k`` (word-ness ``n``) is the
derivative ``D_k`` taken with the assertions evaluated at (``p``, ``n``)::

    D(∅) = D(ε) = D(\\b) = D(\\B) = ∅      D(S) = ε if k in S else ∅
    D(r s) = D(r) s | (D(s) if ν(r, p, n))  D(r | s) = D(r) | D(s)
    D(r & s) = D(r) & D(s)                  D(~r) = ~D(r)
    D(r{lo,hi}) = D(r) r{lo',hi-1},  lo' = 0 if ν(r, p, n) else max(lo - 1, 0)

(empty iterations all sit at the same position, so when ``r`` is nullable there, ``r{lo,hi}``
is ``r{0,hi}``). A state accepts iff ``ν(r, p, non-word)``.
"""

from __future__ import annotations

import functools
import heapq
import re
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from decodekit.constraints.automata.chardfa import _partition
from decodekit.constraints.automata.graph import _MIX, first_and_inverse, unique_rows
from decodekit.constraints.automata.product import _refuse_anchors, _refuse_first_char_test, first_char_gate
from decodekit.constraints.automata.utf8 import _bits_blocks, _layout, _node_of, code_point_classes
from decodekit.constraints.syntax.nodes import Anchor, Kind, Node
from decodekit.constraints.syntax.parser import parse
from decodekit.constraints.syntax.unicode import OCCURRING_BITS
from decodekit.errors import ConstraintError, ConstraintTooLarge

ANY_TEXT = r"(?s:.*)"
SEARCH_BUDGET = 200_000  # derivatives a liveness / distance search may take from one state
MAX_STATES = 2_000_000  # character states one compiled expression may number
BLOCK_STEPS = 4  # classes to step from one state past which CharLevel.steps steps by derivative class
WIDE_UNION = 16  # members of a union past which its derivatives go through an index by first class


# ----------------------------------------------------------------------------- the user API


class Pattern:
    """A constraint expression: ``Pattern(regex)`` fully matches ``regex`` (Python ``regex``
    syntax, as :func:`~decodekit.constraints.compile.compile_regex`); ``a & b``: both match;
    ``a | b``: either matches; ``~a``: the text does not fully match ``a``; ``a + b``: the text
    is ``u v`` with ``u`` matching ``a`` and ``v`` matching ``b`` (:func:`concat`). Operands may be
    :class:`Pattern` objects or regex strings (``Pattern("[a-z]+") & "...."`` is a 4-letter
    word). Immutable and hashable; ``str()`` reads ``(A) & ~(B)`` (cut after
    :data:`LABEL_CHARS` characters).

    Patterns are hash-consed: equal ones are one object, so an expression is a DAG (a part used
    twice is one node, compiled once) and its size is :meth:`size`, not its expanded text.

    Attributes:
        op: ``"re"`` (``args``: the regex text), ``"and"``, ``"or"``, ``"cat"`` (``args``: a tuple of
            Patterns), ``"not"`` (``args``: a 1-tuple), ``"rep"`` (``args``: ``(part, lo, hi)``),
            ``"search"`` (``args``: a regex matched anywhere in the text, ``(?s:.*)(?:R)(?s:.*)``
            with R's flags kept inside R).
    """

    __slots__ = ("op", "args", "_hash", "_combined", "_bounds", "__weakref__")

    def __new__(cls, regex: str | Pattern = "", _op: str = "re", _args: tuple = ()):
        if isinstance(regex, Pattern):
            return regex
        if _op == "re":
            if not isinstance(regex, str):
                raise ConstraintError(f"Pattern takes a regex string, got {type(regex).__name__} {regex!r}")
            _args = regex
        key = (_op, _args)
        got = _INTERNED.get(key)
        if got is not None:
            return got
        self = object.__new__(cls)
        self.op, self.args, self._hash, self._bounds = _op, _args, hash(key), None
        kids = _args[:1] if _op == "rep" else _args if isinstance(_args, tuple) else ()
        self._combined = _op in ("and", "not") or any(a._combined for a in kids)
        _INTERNED[key] = self
        return self

    def __reduce__(self):
        return (Pattern, ("", self.op, self.args) if self.op != "re" else (self.args,))

    def __copy__(self) -> Pattern:
        return self

    def __deepcopy__(self, memo) -> Pattern:
        return self

    def __and__(self, other) -> Pattern:
        if getattr(type(other), "_takes_pattern_and", False):  # a Grammar: its __rand__ answers
            return NotImplemented
        return intersect(self, other)

    def __rand__(self, other) -> Pattern:
        return intersect(other, self)

    def __or__(self, other) -> Pattern:
        return union(self, other)

    def __ror__(self, other) -> Pattern:
        return union(other, self)

    def __invert__(self) -> Pattern:
        return complement(self)

    def __add__(self, other) -> Pattern:
        return concat(self, other)

    def __radd__(self, other) -> Pattern:
        return concat(other, self)

    def repeat(self, lo: int, hi: int | None = None) -> Pattern:
        """``lo`` to ``hi`` (None: any number of) texts of this one in a row (:func:`repeat`)."""
        return repeat(self, lo, hi)

    @staticmethod
    def concat(*parts) -> Pattern:
        """``parts[0] + parts[1] + ...`` (:func:`concat`)."""
        return concat(*parts)

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        return (
            isinstance(other, Pattern)
            and self._hash == other._hash
            and self.op == other.op
            and self.args == other.args
        )

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        """The expression's text, each shared part written where it is used, cut after
        :data:`LABEL_CHARS` characters (``...`` at the end): a label, not a regex."""
        out, length, stack = [], 0, [self]
        while stack:
            p = stack.pop()
            if isinstance(p, str):
                piece = p
            elif p.op == "re":
                piece = p.args
            elif p.op == "search":
                piece = f"...{p.args}..."
            else:
                stack.extend(reversed(_label_parts(p)))
                continue
            out.append(piece)
            length += len(piece)
            if length > LABEL_CHARS:
                return "".join(out)[:LABEL_CHARS] + "..."
        return "".join(out)

    def __repr__(self) -> str:
        return f"Pattern({str(self)!r})"

    def nodes(self) -> list[Pattern]:
        """Every distinct node of the DAG, each once, children before parents."""
        order, seen, stack = [], set(), [(self, False)]
        while stack:
            p, done = stack.pop()
            if done:
                order.append(p)
                continue
            if id(p) in seen:
                continue
            seen.add(id(p))
            stack.append((p, True))
            stack.extend((k, False) for k in reversed(_kids(p)) if id(k) not in seen)
        return order

    @property
    def children(self) -> tuple:
        """The Patterns this one is made of (none for a regex leaf)."""
        return _kids(self)

    def text_length(self) -> int:
        """The length of the text ``str()`` would write uncut (a shared part counted at each use),
        computed once per node."""
        memo: dict[Pattern, int] = {}
        for p in self.nodes():
            if p.op in ("re", "search"):
                memo[p] = len(p.args) + (6 if p.op == "search" else 0)
            else:
                memo[p] = sum(len(x) if isinstance(x, str) else memo[x] for x in _label_parts(p))
        return memo[self]

    def size(self) -> int:
        """The DAG's size: the characters of its distinct regex texts plus one per distinct node
        and operand (a part used many times counted once)."""
        return sum(len(p.args) + 1 if p.op in ("re", "search") else len(_kids(p)) + 1 for p in self.nodes())

    def regexes(self) -> list[str]:
        """Every regex text in the expression, each once, in order of first use."""
        out: dict[str, None] = {}
        for p in self.nodes():
            if p.op == "re":
                out[p.args] = None
                gate = first_char_gate(p.args)
                if gate is not None:
                    out[gate] = None
            elif p.op == "search":
                out[p.args] = None
                out[ANY_TEXT] = None
        return list(out)

    @property
    def combined(self) -> bool:
        """Whether it holds an intersection or a complement (not just regexes and unions)."""
        return self._combined


_INTERNED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # (op, args) -> the Pattern
FLAT_CAT = 16  # concat() splices a concatenation of at most this many parts into its own
LABEL_CHARS = 20_000  # str() of a Pattern stops here: a DAG's expanded text may be far longer
MESSAGE_CHARS = 200  # of a label, what an error message shows


def short_label(label: str) -> str:
    """``label`` for a one-line error message: cut after :data:`MESSAGE_CHARS` characters."""
    return label if len(label) <= MESSAGE_CHARS else label[:MESSAGE_CHARS] + "..."


def _kids(p: Pattern) -> tuple:
    """The Patterns ``p`` is made of (none for a regex leaf)."""
    if p.op in ("re", "search"):
        return ()
    return p.args[:1] if p.op == "rep" else p.args


def _label_parts(p: Pattern) -> list:
    """``p``'s text as strings and child Patterns, for :meth:`Pattern.__str__`."""
    if p.op == "not":
        return ["~(", p.args[0], ")"]
    if p.op == "rep":
        a, lo, hi = p.args
        return ["(", a, f"){{{lo},{'' if hi is None else hi}}}"]
    sep = {"cat": " + ", "and": " & ", "or": " | "}[p.op]
    parts: list = []
    for i, a in enumerate(p.args):
        parts += [sep + "(" if i else "(", a, ")"]
    return parts


def _as_pattern(x) -> Pattern:
    if isinstance(x, Pattern):
        return x
    if isinstance(x, str):
        return Pattern(x)
    raise ConstraintError(
        f"a constraint expression takes regex strings or Patterns, got {type(x).__name__} {x!r}"
    )


def intersect(*parts) -> Pattern:
    """The texts every part fully matches (``a & b & ...``)."""
    if not parts:
        raise ConstraintError("intersect needs at least one pattern")
    items = tuple(_as_pattern(p) for p in parts)
    return items[0] if len(items) == 1 else Pattern("", "and", items)


def union(*parts) -> Pattern:
    """The texts some part fully matches (``a | b | ...``)."""
    if not parts:
        raise ConstraintError("union needs at least one pattern")
    items = tuple(_as_pattern(p) for p in parts)
    return items[0] if len(items) == 1 else Pattern("", "or", items)


_GLOBAL_FLAGS = re.compile(r"\(\?[a-zA-Z^-]+\)")


@functools.lru_cache(maxsize=4096)
def _joinable(r: str) -> bool:
    """Whether ``(?:r)`` inside a longer regex means what ``r`` alone fully matches: no anchor,
    word boundary, global inline flag or first-character test that would see past its ends."""
    if _GLOBAL_FLAGS.search(r) or first_char_gate(r) is not None:
        return False
    ast, boundaries = parse(r)
    if boundaries:
        return False
    stack = [ast]
    while stack:
        n = stack.pop()
        if n.kind is Kind.ASSERT:
            return False
        if n.kind is not Kind.SET:
            stack.extend(n.items)
    return True


_MAYBE_BOUNDARY = re.compile(r"(?<!\\)(?:\\\\)*\\[bB]")  # an escape \b or \B (or [\b]): parse to know


@functools.lru_cache(maxsize=4096)
def _regex_boundaries(r: str) -> bool:
    return _MAYBE_BOUNDARY.search(r) is not None and parse(r)[1]


def _boundaries(p: Pattern) -> bool:
    """Whether ``p`` holds ``\\b`` or ``\\B`` (each node and regex read once: the answer is kept
    on the node; iterative, as DAGs nest thousands deep)."""
    stack = [p]
    while stack:
        x = stack[-1]
        if x._bounds is not None:
            stack.pop()
        elif x.op in ("re", "search"):
            x._bounds = bool(_regex_boundaries(x.args))
            stack.pop()
        else:
            missing = [k for k in _kids(x) if k._bounds is None]
            if missing:
                stack.extend(missing)
            else:
                x._bounds = any(k._bounds for k in _kids(x))
                stack.pop()
    return p._bounds


def concat(*parts) -> Pattern:
    """The texts ``u1 u2 ...`` where each ``ui`` fully matches ``parts[i]`` (``a + b + ...``):
    concatenation of the languages. Regexes whose joined text ``(?:a)(?:b)`` means exactly that
    are joined into one regex (a plain ``Pattern``, compiled as before); word boundaries inside
    a concatenation are refused (``\\b`` at a part's end would see the next part's text)."""
    if not parts:
        raise ConstraintError("concat needs at least one pattern")
    items: list[Pattern] = []
    for p in map(_as_pattern, parts):  # a long concatenation stays one node: shared, not copied
        items.extend(p.args if p.op == "cat" and len(p.args) <= FLAT_CAT else (p,))
    if len(items) == 1:
        return items[0]
    if all(p.op == "re" for p in items) and all(_joinable(p.args) for p in items):
        joined = "".join(f"(?:{p.args})" for p in items)
        if first_char_gate(joined) is None:
            return Pattern(joined)
    for p in items:
        if _boundaries(p):
            raise ConstraintError(
                f"a concatenation cannot hold word boundaries (\\b, \\B): rewrite {str(p)!r} without them"
            )
    return Pattern("", "cat", tuple(items))


def repeat(part, lo: int, hi: int | None = None) -> Pattern:
    """The texts ``u1 ... un`` with ``lo <= n <= hi`` (None: unbounded), each ``ui`` fully matching
    ``part``; a joinable regex (as in :func:`concat`) becomes the one regex ``(?:R){lo,hi}``."""
    p = _as_pattern(part)
    if not (isinstance(lo, int) and lo >= 0 and (hi is None or isinstance(hi, int) and hi >= lo)):
        raise ConstraintError(f"repeat needs 0 <= lo <= hi, got lo={lo!r}, hi={hi!r}")
    if p.op == "re" and _joinable(p.args):
        joined = f"(?:{p.args}){{{lo},{'' if hi is None else hi}}}"
        if first_char_gate(joined) is None:
            return Pattern(joined)
    if _boundaries(p):
        raise ConstraintError(
            f"a repetition cannot hold word boundaries (\\b, \\B): rewrite {str(p)!r} without them"
        )
    return Pattern("", "rep", (p, lo, hi))


def complement(part) -> Pattern:
    """The valid UTF-8 texts ``part`` does not fully match (``~a``)."""
    return Pattern("", "not", (_as_pattern(part),))


def excluding(positive, excluded: Iterable[str]) -> Pattern:
    """``positive`` and no match of any of ``excluded`` anywhere in the text: what
    ``compile_regex(..., exclude=...)`` means, as ``positive & ~(.*R.*) & ...``. An exclude's
    anchors and the first-character test ``regex.search`` would apply are refused, as there."""
    parts = [_as_pattern(positive)]
    for r in excluded:
        ast, _ = parse(r)
        _refuse_anchors(ast, r)
        _refuse_first_char_test(r)
        parts.append(complement(Pattern("", "search", r)))
    return intersect(*parts)


# ----------------------------------------------------------------------------- the algebra

EMPTY, EPS, SET, WB, NWB, CAT, OR, AND, NOT, REP = range(10)
_ALL_CONTEXTS = 0b1111


class Expr:
    """A hash-consed expression node (compare by identity). ``null``: its nullability bits over
    (previous, next) word-ness (module docstring); ``ctx``: it contains ``\\b``/``\\B``;
    ``simple``: no intersection, complement or boundary below (then it is non-empty iff not ∅).
    ``minb``: a lower bound on the bytes of a match (exact when ``simple``); ``reach`` (when
    ``simple``): an upper bound on the ``minb`` of every derivative, itself included. ``first``:
    a bit set over the classes, a superset of those whose derivative is not ∅ (-1: every class), so
    that a union's derivative visits only the members that can read the class."""

    __slots__ = (
        "op", "a", "b", "lo", "hi", "mask", "null", "ctx", "simple", "minb", "reach", "first", "id",
        "__weakref__",
    )  # fmt: skip

    def __repr__(self) -> str:
        names = ["∅", "ε", "S", "\\b", "\\B", "cat", "or", "and", "not", "rep"]
        if self.op == SET:
            return f"S{self.mask:b}"
        if self.op == REP:
            return f"({self.a!r}){{{self.lo},{self.hi}}}"
        if self.op == CAT:
            return f"{self.a!r}·{self.b!r}"
        if self.op in (OR, AND):
            return "(" + (" | " if self.op == OR else " & ").join(sorted(map(repr, self.a))) + ")"
        if self.op == NOT:
            return f"~{self.a!r}"
        return names[self.op]


class Algebra:
    """The hash-consed nodes of one compiled expression and their smart constructors.

    ``class_bytes`` [C]: the fewest UTF-8 bytes of a spellable character of each class (a large
    number when none), for the byte lower bounds; ``word`` [C] bool: the class is ``\\w``."""

    def __init__(self, class_bytes: list[int], word: list[bool]):
        self._table: dict[tuple, Expr] = {}
        self.class_bytes, self.word = class_bytes, word
        self.one_byte = _or(1 << k for k, n in enumerate(class_bytes) if n == 1)  # the classes of 1 byte
        self.empty = self._make((EMPTY,), EMPTY, null=0, simple=True, minb=0)  # first 0: as ε, \b and \B
        self.eps = self._make((EPS,), EPS, null=_ALL_CONTEXTS, simple=True, minb=0)
        self.wb = self._make((WB,), WB, null=0b0110, ctx=True, minb=0)
        self.nwb = self._make((NWB,), NWB, null=0b1001, ctx=True, minb=0)
        self.top = self.complement(self.empty)
        self._deriv: dict[tuple, Expr] = {}
        self._by_first: dict[Expr, tuple[dict[int, list[Expr]], list[Expr]]] = {}  # wide unions' index

    def _make(
        self, key, op, a=None, b=None, lo=0, hi=None, mask=0, null=0, ctx=False, simple=False, minb=0,
        reach=0, first=0,
    ):  # fmt: skip
        e = self._table.get(key)
        if e is None:
            e = Expr()
            e.op, e.a, e.b, e.lo, e.hi, e.mask = op, a, b, lo, hi, mask
            e.null, e.ctx, e.simple, e.minb, e.reach, e.first = null, ctx, simple, minb, reach, first
            e.id = len(self._table)
            self._table[key] = e
        return e

    def chars(self, mask: int) -> Expr:
        if not mask:
            return self.empty
        got = self._table.get((SET, mask))
        if got is not None:
            return got
        best = self.class_bytes[self.cheapest(mask)]  # the fewest bytes over the classes in the set
        return self._make((SET, mask), SET, mask=mask, simple=True, minb=best, reach=best, first=mask)

    def cheapest(self, mask: int) -> int:
        """The lowest class of ``mask`` (not 0) with the fewest bytes (``class_bytes``)."""
        one = mask & self.one_byte
        if one:  # no class has fewer bytes than one
            return (one & -one).bit_length() - 1
        cost, m, k = self.class_bytes, mask, -1
        while m:
            low = m & -m
            c = low.bit_length() - 1
            if k < 0 or cost[c] < cost[k]:
                k = c
            m ^= low
        return k

    def cat(self, a: Expr, b: Expr) -> Expr:
        """``a b``, right-nested: a chain ``a1 (a2 (... an))`` as ``a`` is rebuilt onto ``b``
        (iteratively: chains of thousands of parts, a JSON object's characters, are common)."""
        if a.op == EMPTY or b.op == EMPTY:
            return self.empty
        if a.op == EPS:
            return b
        if b.op == EPS:
            return a
        if a.op != CAT:
            return self._cat2(a, b)
        chain = []
        while a.op == CAT:
            chain.append(a.a)
            a = a.b
        chain.append(a)
        out = b
        for x in reversed(chain):
            out = self._cat2(x, out)
        return out

    def _cat2(self, a: Expr, b: Expr) -> Expr:
        """The node ``a b`` for ``a`` not a concatenation, neither ∅ nor ε, and ``b`` not ∅."""
        key = (CAT, a, b)
        e = self._table.get(key)
        if e is None:  # _make's work, inline: the commonest node
            e = Expr()
            e.op, e.a, e.b, e.lo, e.hi, e.mask = CAT, a, b, 0, None, 0
            e.null, e.ctx, e.simple = a.null & b.null, a.ctx or b.ctx, a.simple and b.simple
            e.minb, e.reach = a.minb + b.minb, max(a.reach + b.minb, b.reach)
            e.first = a.first | b.first if a.null else a.first
            e.id = len(self._table)
            self._table[key] = e
        return e

    def _flat(self, op: int, items: Iterable[Expr]) -> tuple[set, int]:
        out, mask = set(), 0
        for x in items:
            if x.op == op:
                out.update(x.a)
            else:
                out.add(x)
        sets = [x for x in out if x.op == SET]
        if sets:
            mask = sets[0].mask
            for s in sets[1:]:
                mask = mask | s.mask if op == OR else mask & s.mask
            out.difference_update(sets)
        return out, (mask if sets else -1)

    def union(self, items: Iterable[Expr]) -> Expr:
        out, mask = self._flat(OR, items)
        out.discard(self.empty)
        if mask > 0:
            out.add(self.chars(mask))
        if self.top in out:
            return self.top
        if not out:
            return self.empty
        if len(out) == 1:
            return next(iter(out))
        key = frozenset(out)
        got = self._table.get((OR, key))  # the attributes only for a new node
        if got is not None:
            return got
        null = first = 0
        for x in key:
            null |= x.null
            first |= x.first
        return self._make(
            (OR, key), OR, key, null=null, ctx=any(x.ctx for x in key),
            simple=all(x.simple for x in key), minb=min(x.minb for x in key), reach=max(x.reach for x in key),
            first=first,
        )  # fmt: skip

    def intersection(self, items: Iterable[Expr]) -> Expr:
        out, mask = self._flat(AND, items)
        if self.empty in out or mask == 0:
            return self.empty
        out.discard(self.top)
        if mask > 0:
            out.add(self.chars(mask))
        if not out:
            return self.top
        if len(out) == 1:
            return next(iter(out))
        if self.eps in out and any(x.op == SET for x in out):
            return self.empty
        key = frozenset(out)
        got = self._table.get((AND, key))
        if got is not None:
            return got
        null, first = _ALL_CONTEXTS, -1
        for x in key:
            null &= x.null
            first &= x.first
        return self._make(
            (AND, key), AND, key, null=null, ctx=any(x.ctx for x in key), minb=max(x.minb for x in key),
            first=first,
        )  # fmt: skip

    def complement(self, a: Expr) -> Expr:
        if a.op == NOT:
            return a.a
        return self._make((NOT, a), NOT, a, null=~a.null & _ALL_CONTEXTS, ctx=a.ctx, minb=0, first=-1)

    def rep(self, a: Expr, lo: int, hi: int | None) -> Expr:
        if hi == 0 or a.op == EPS:
            return self.eps
        if a.op == EMPTY:
            return self.eps if lo == 0 else self.empty
        if lo == 1 and hi == 1:
            return a
        if a.op == REP and a.lo == 0 and a.hi is None and lo <= 1 and hi is None:
            return a  # (r*)* = (r*)+ = r*
        null = _ALL_CONTEXTS if lo == 0 else a.null
        return self._make(
            (REP, a, lo, hi), REP, a, lo=lo, hi=hi, null=null, ctx=a.ctx, simple=a.simple,
            minb=lo * a.minb, reach=a.reach + lo * a.minb, first=a.first,
        )  # fmt: skip

    def derivative(self, e: Expr, k: int, p: bool) -> Expr:
        """``D_k(e)`` with the previous character's word-ness ``p`` (module docstring)."""
        key = (e, k, p)
        got = self._deriv.get(key)
        if got is not None:
            return got
        op = e.op
        if op == SET:
            out = self.eps if e.mask >> k & 1 else self.empty
        elif op in (EMPTY, EPS, WB, NWB):
            out = self.empty
        elif op == CAT:  # D(a b) = D(a) b | D(b) if a is nullable, along the chain iteratively
            bit, terms, x = 2 * p + self.word[k], [], e
            while True:
                terms.append(self.cat(self.derivative(x.a, k, p), x.b))
                if not x.a.null >> bit & 1:
                    break
                x = x.b
                got = self._deriv.get((x, k, p))
                if got is not None or x.op != CAT:
                    terms.append(got if got is not None else self.derivative(x, k, p))
                    break
            out = terms[0] if len(terms) == 1 else self.union(terms)
        elif op == OR:
            out = self.union([self.derivative(x, k, p) for x in self._readers(e, k)])
        elif op == AND:
            out = self.intersection([self.derivative(x, k, p) for x in e.a])
        elif op == NOT:
            out = self.complement(self.derivative(e.a, k, p))
        else:  # REP
            first = self.derivative(e.a, k, p)
            if first.op == EMPTY:
                out = first
            else:
                lo = 0 if e.a.null >> (2 * p + self.word[k]) & 1 else max(e.lo - 1, 0)
                out = self.cat(first, self.rep(e.a, lo, None if e.hi is None else e.hi - 1))
        self._deriv[key] = out
        return out

    def _readers(self, e: Expr, k: int) -> list[Expr] | frozenset:
        """The members of the union ``e`` whose ``first`` holds class k (the others' derivatives
        are ∅). A wide union (an alternation of thousands of words) is indexed by class once, so a
        derivative visits the few members that read k instead of every member."""
        if len(e.a) <= WIDE_UNION:
            return [x for x in e.a if x.first >> k & 1]
        index = self._by_first.get(e)
        if index is None:
            by_class: dict[int, list[Expr]] = {}
            every = []
            for x in e.a:
                m = x.first
                if m < 0 or m.bit_count() > WIDE_UNION:
                    every.append(x)
                    continue
                while m:
                    low = m & -m
                    by_class.setdefault(low.bit_length() - 1, []).append(x)
                    m ^= low
            index = self._by_first[e] = (by_class, every)
        return index[0].get(k, []) + index[1]


# ----------------------------------------------------------------------------- compiling


@functools.lru_cache(maxsize=16)
def _shared_dag(groups: tuple[int, ...]) -> tuple:
    """The UTF-8 DAG of a pattern whose named characters are all ASCII, given only which of the
    occurring predicate-bit combinations (``OCCURRING_BITS``) share a class: ``groups`` numbers
    them by first occurrence (at most 15 such partitions, each made once per process; the classes
    themselves are applied by :func:`_utf8_tables`). Returns (rows [R, 64] group of each
    continuation, then :func:`_upper_levels`)."""
    bit_rows, block = _bits_blocks()
    of = np.zeros(8, dtype=np.int64)
    of[list(OCCURRING_BITS)] = groups
    rows, row_of = _unique_rows(of[bit_rows])
    return rows, *_levels(row_of[block])


def _levels(block: np.ndarray) -> tuple:
    """:func:`_upper_levels` of the DAG whose level-1 node of each 64-code-point block is
    ``block`` [_BLOCKS]."""
    two, three, four, _ = _layout()
    sig2 = np.concatenate([_node_of(block, three), _node_of(block, four.reshape(-1, 64))])
    l2, l2_of = _unique_rows(sig2)
    return _upper_levels(l2, l2_of, block[two[0xC2:0xE0]])


def _upper_levels(l2: np.ndarray, l2_of: np.ndarray, lead1: np.ndarray) -> tuple:
    """(l2 as lists, l3 [n3, 64] as lists, (leads [256] (level, node), the same [256] packed
    ``level << 32 | node``, -1 invalid)) from the level-2 nodes
    [n2, 64], the level-2 node after each 3-byte lead and after each 4-byte lead and
    continuation (``l2_of`` [16 + 320]), and the level-1 node after each 2-byte lead (``lead1``
    [30])."""
    four = _layout()[2]
    l2_three, l2_four = l2_of[:16], l2_of[16:].reshape(5, 64)
    l2_four = np.where((four >= 0).any(-1), l2_four, -1)
    l3, l3_of = _unique_rows(l2_four)
    leads = [(-1, -1)] * 0xC2 + [(1, n) for n in lead1.tolist()]
    leads += [(2, n) for n in l2_three.tolist()]
    valid4 = (four >= 0).reshape(5, -1).any(axis=1).tolist()
    leads += [(3, n) if ok else (-1, -1) for n, ok in zip(l3_of.tolist(), valid4)]
    leads += [(-1, -1)] * (256 - len(leads))
    packed = np.full(256, -1, dtype=np.int64)  # level << 32 | node, -1 invalid
    packed[0xC2:0xE0] = 1 << 32 | lead1
    packed[0xE0:0xF0] = 2 << 32 | l2_three
    packed[0xF0:0xF5] = np.where(valid4, 3 << 32 | l3_of, -1)
    packed.flags.writeable = False  # shared by every pattern of the same partition (_shared_dag)
    return l2.tolist(), l3.tolist(), (leads, packed)


def _utf8_tables(classes, available: np.ndarray | None, other=None, explicit=None):
    """The code-point class DAG of :mod:`~decodekit.constraints.automata.utf8` as lookups.

    Returns a dict: ``ascii`` [128] class of each ASCII byte; ``lead`` [256] (level, node) of
    each lead byte (level 1: ``rows[node]`` is the classes of its 64 continuation bytes; level 2:
    ``l2[node]`` its level-1 children; level 3: ``l3[node]`` its level-2 children; -1 invalid)
    and ``lead_packed`` the same as [256] int64 ``level << 32 | node`` (-1 invalid);
    ``masks[level][node]``: the classes below a node reachable through ``available`` bytes (a bit
    mask). Given ``other`` and ``explicit`` (``chardfa._partition``) with every named character
    ASCII, no block past ASCII is rewritten and the DAG's shape is :func:`_shared_dag`'s (its
    lists shared, read only); else it is built from ``classes`` over all of Unicode."""
    if other is not None and all(c < "\x80" for c in explicit):
        first: dict[int, int] = {}  # class -> its group, by first occurrence
        groups = tuple(first.setdefault(k, len(first)) for k in other[list(OCCURRING_BITS)].tolist())
        rows, l2, l3, leads = _shared_dag(groups)
        rows = np.array(list(first), dtype=np.int64)[rows]
        ascii_ = classes.ascii.tolist()
    else:
        rows, block = classes.rows, classes.block
        l2, l3, leads = _levels(block)
        ascii_ = rows[block[:2]].reshape(-1).tolist()
    avail = np.ones(256, dtype=bool) if available is None else available
    cont = avail[0x80:0xC0]
    ok = cont.tolist()
    m1 = [_bits(r) for r in rows[:, cont]]
    m2 = [_or(m1[c] for c, y in zip(r, ok) if y and c >= 0) for r in l2]
    m3 = [_or(m2[c] for c, y in zip(r, ok) if y and c >= 0) for r in l3]
    return {
        "ascii": ascii_, "lead": leads[0], "lead_packed": leads[1], "rows": rows.tolist(), "l2": l2, "l3": l3,
        "masks": (None, m1, m2, m3), "avail": avail.tolist(),
    }  # fmt: skip


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows and the inverse [N] -> row index (as
    :func:`~decodekit.constraints.automata.graph.unique_rows`, in another fixed order: only the
    grouping matters to the DAG) for the few distinct rows of the UTF-8 layout: rows grouped by
    a hash, in the order of their keys, the grouping checked exactly (else the plain sort)."""
    keys = rows.astype(np.uint64) @ _MIX[: rows.shape[1]]  # [N], wrapping
    first, inverse = first_and_inverse(keys)
    distinct = rows[first]
    if not (distinct[inverse] == rows).all():  # a hash collision
        return unique_rows(rows)
    return distinct, inverse


def _bits(values) -> int:
    out = 0
    for v in set(values.tolist()):
        out |= 1 << v
    return out


def _or(masks) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def _meet(p: tuple[int, ...], q: tuple[int, ...]) -> tuple[int, ...]:
    """The common refinement of two partitions of the classes (tuples of disjoint bit masks)."""
    if len(p) == 1:
        return q
    if len(q) == 1:
        return p
    return tuple(x & y for x in p for y in q if x & y)


def _structural(e: Expr) -> bool:
    """Whether :meth:`CharLevel.min_bytes` reads the fewest bytes of ``e`` off its structure
    (no boundary in it, and not itself an intersection or complement, which are searched)."""
    return not e.ctx and e.op not in (AND, NOT)


class CharLevel:
    """The character level of a compiled :class:`Pattern`: numbered states (expression, previous
    character word or not), their transitions by class, acceptance, liveness and distances, all
    computed on first need.

    ``available`` [256] bool: the bytes a text may contain (a vocabulary's); character sets are
    cut to the classes spellable with them, so that a ``simple`` state is live iff it exists.
    ``parsed``: regex -> its :func:`~decodekit.constraints.syntax.parser.parse` result, for the
    regexes the caller has parsed already (the rest are parsed here)."""

    def __init__(
        self, pattern: Pattern, available: np.ndarray | None = None, parsed: dict | None = None
    ) -> None:
        parsed = dict(parsed or {})  # regex -> parse(regex), what the caller already parsed
        for r in pattern.regexes():
            if r not in parsed:
                parsed[r] = parse(r)
        boundaries = any(b for _, b in parsed.values())
        sets: dict = {}
        for ast, _ in parsed.values():
            _collect_sets(ast, sets)
        explicit, other, member, word, examples = _partition(list(sets), boundaries)
        self.examples = examples
        self.num_classes = member.shape[1]
        self.word = word.tolist()
        classes = code_point_classes(other, explicit)
        self.utf8 = _utf8_tables(classes, available, other, explicit)
        avail_classes = self._available_classes()
        class_bytes = [1 << 20] * self.num_classes
        for k, n in avail_classes.items():
            class_bytes[k] = n
        self.alg = alg = Algebra(class_bytes, self.word)
        mask_all = _or(1 << k for k in avail_classes)
        packed = np.packbits(member, axis=1, bitorder="little")  # [G, ceil(C / 8)]: row g's classes as bits
        set_mask = [int.from_bytes(row.tobytes(), "little") & mask_all for row in packed]
        set_of = {cs: i for i, cs in enumerate(sets)}
        converted = {r: _convert(ast, alg, set_of, set_mask) for r, (ast, _) in parsed.items()}
        self.converted = converted  # regex -> its expression (a grammar's terminals start there)
        self.root = _combine(pattern, alg, converted)
        self.boundaries = boundaries
        self.states: list[tuple[Expr, bool]] = []
        self.index: dict[tuple[Expr, bool], int] = {}
        self.trans: list[dict[int, int]] = []
        self._live: dict[int, bool] = {}
        self._dist: dict[int, int] = {}
        self._hop: dict[int, tuple[int, int]] = {}  # state -> (class, next state) on a shortest way
        self._short: dict[Expr, bytes] = {}
        self._minbytes: dict[Expr, int] = {}
        self._blocks: dict[Expr, tuple[int, ...]] = {}
        self._all = (1 << self.num_classes) - 1
        self._word_split = _bits(np.flatnonzero(word)) if boundaries else 0
        self._spelled: dict[int, bytes] = {}
        self.initial = self.state(self.root, False)

    def expression(self, p: Pattern) -> Expr:
        """The expression of a Pattern made of this level's regexes (a part of the pattern it
        was built for: a grammar's terminal), as the pattern's own is made."""
        return _combine(p, self.alg, self.converted)

    def _available_classes(self) -> dict[int, int]:
        """class -> the fewest bytes of a character of it spellable with the available bytes."""
        u = self.utf8
        out: dict[int, int] = {}
        for b in range(128):
            if u["avail"][b]:
                out[u["ascii"][b]] = 1
        below = [0, 0, 0, 0]  # per level: the classes under the available lead bytes of that level
        for b, (level, node) in enumerate(u["lead"]):
            if level > 0 and u["avail"][b]:
                below[level] |= u["masks"][level][node]
        for level in (1, 2, 3):  # the fewest bytes first
            m = below[level]
            while m:
                low = m & -m
                out.setdefault(low.bit_length() - 1, level + 1)
                m ^= low
        return out

    def state(self, e: Expr, p: bool) -> int:
        """The id of state (e, p); -1 for ∅."""
        if e.op == EMPTY:
            return -1
        key = (e, bool(p) and self.boundaries and e.ctx)
        q = self.index.get(key)
        if q is None:
            q = self.index[key] = len(self.states)
            if q >= MAX_STATES:
                raise ConstraintTooLarge(
                    f"constraint too large: more than {MAX_STATES:,} character states visited",
                    bound="states",
                    limit=MAX_STATES,
                )
            self.states.append(key)
            self.trans.append({})
        return q

    def step(self, q: int, k: int) -> int:
        """The state after reading a character of class k from state q (-1: ∅)."""
        row = self.trans[q]
        got = row.get(k)
        if got is None:
            e, p = self.states[q]
            got = row[k] = self.state(self.alg.derivative(e, k, p), self.word[k])
        return got

    def steps(self, q: int, ks: list[int]) -> list[int]:
        """:meth:`step` from q for each class of ``ks`` (in that order, so that new states are
        numbered as one by one): one derivative per derivative class (:meth:`blocks`) among
        the classes not stepped yet, when there are more than :data:`BLOCK_STEPS` of them."""
        row = self.trans[q]
        todo = [k for k in ks if k not in row]
        if len(todo) > BLOCK_STEPS:
            blocks, made = self.blocks(self.states[q][0]), {}
            for k in todo:
                block = next(b for b in blocks if b >> k & 1)
                got = made.get(block)
                if got is None:
                    got = made[block] = self.step(q, k)
                row[k] = got
        step = self.step
        return [step(q, k) for k in ks]

    def accepting(self, q: int) -> bool:
        e, p = self.states[q]
        return bool(e.null >> (2 * p) & 1)

    def classes(self) -> range:
        return range(self.num_classes)

    def distance(self, q: int) -> int:
        """The fewest bytes of a text leading q to acceptance, -1 if none (exact: read off the
        expression where it has no boundary (:meth:`min_bytes`), else a bounded Dijkstra
        search; ConstraintError past :data:`SEARCH_BUDGET` states)."""
        got = self._dist.get(q)
        if got is not None:
            return got
        e, _ = self.states[q]
        if _structural(e):
            got = self._dist[q] = self.min_bytes(e)
            return got
        return self._search(q)

    def min_bytes(self, e: Expr) -> int:
        """The fewest bytes of a text of ``e`` (no ``\\b``/``\\B`` in it; -1: no text): a
        concatenation's is the sum of its parts', a union's the least, ``r{lo,hi}``'s ``lo``
        times r's; an intersection or a complement is searched from its own state, over its
        derivatives only (iterative over the nesting; memoised per node)."""

        def kids(x: Expr) -> tuple:
            if x.simple or x.op in (AND, NOT):
                return ()
            return (x.a, x.b) if x.op == CAT else tuple(x.a) if x.op == OR else (x.a,) if x.lo else ()

        def value(x: Expr, parts: list) -> int:
            op = x.op
            if x.simple:
                return -1 if op == EMPTY else x.minb
            if op in (AND, NOT):
                return self.distance(self.state(x, False))
            if op == CAT:
                return -1 if min(parts) < 0 else sum(parts)
            if op == OR:
                return min((n for n in parts if n >= 0), default=-1)
            return 0 if not x.lo else -1 if parts[0] < 0 else x.lo * parts[0]  # REP

        return _post_order(e, self._minbytes, kids, value)

    def lower(self, q: int) -> int:
        """A lower bound on :meth:`distance` that never searches."""
        got = self._dist.get(q)
        return got if got is not None else self.states[q][0].minb

    def live(self, q: int) -> bool:
        return q >= 0 and self.distance(q) >= 0

    def witness(self, q: int) -> bytes | None:
        """The bytes of one shortest text leading q to acceptance (:meth:`distance` bytes; None
        if there is none): read off the expression where it has no boundary
        (:meth:`shortest_text`), else along the next steps the distance search recorded."""
        out = []
        while True:
            d = self.distance(q)
            if d < 0:
                return None
            if d == 0:
                break
            e, _ = self.states[q]
            if _structural(e):
                out.append(self.shortest_text(e))
                break
            hop = self._hop.get(q)
            if hop is None:  # distance known without a search (cannot happen; be safe)
                return None
            k, q = hop
            out.append(self.spelling(k))
        return b"".join(out)

    def shortest_text(self, e: Expr) -> bytes:
        """The bytes of one shortest text of a non-empty expression without boundaries
        (:meth:`min_bytes` bytes): a set's fewest-byte character, the shortest branch of a union,
        ``lo`` copies of the body of a repetition, an intersection's or complement's from the
        search of its own state (iterative over the nesting; memoised per node)."""
        if e.simple:
            return self._simple_text(e)

        def kids(x: Expr) -> tuple:
            op = x.op
            if op == CAT:
                return (x.a, x.b)
            if op == OR:
                live = [y for y in x.a if self.min_bytes(y) >= 0]
                return (min(live, key=lambda y: (self.min_bytes(y), y.id)),)
            return (x.a,) if op == REP and x.lo else ()

        def value(x: Expr, parts: list) -> bytes:
            op = x.op
            if op in (AND, NOT):
                return self.witness(self.state(x, False))
            if op == SET:
                return self.spelling(self.alg.cheapest(x.mask))
            if op == CAT:
                return parts[0] + parts[1]
            if op == OR:
                return parts[0]
            if op == REP and x.lo:
                return parts[0] * x.lo
            return b""  # ε, an empty repetition

        return _post_order(e, self._short, kids, value)

    def _simple_text(self, e: Expr) -> bytes:
        """:meth:`shortest_text` of a ``simple`` expression, whose fewest bytes are ``minb`` (the
        same text: a union's branch of least ``(minb, id)``); a concatenation's chain is read as
        one node, memoised at its head and at the parts it is made of."""
        memo, stack = self._short, [e]
        while stack:
            x = stack[-1]
            if x in memo:
                stack.pop()
                continue
            op = x.op
            if op == CAT:
                chain, y = [], x
                while y.op == CAT and y not in memo:
                    chain.append(y.a)
                    y = y.b
                chain.append(y)
                missing = [z for z in chain if z not in memo]
                if missing:
                    stack.extend(missing)
                    continue
                got = b"".join([memo[z] for z in chain])
            elif op == OR:
                y = min(x.a, key=_by_size)
                if y not in memo:
                    stack.append(y)
                    continue
                got = memo[y]
            elif op == REP and x.lo:
                if x.a not in memo:
                    stack.append(x.a)
                    continue
                got = memo[x.a] * x.lo
            elif op == SET:
                got = self.spelling(self.alg.cheapest(x.mask))
            else:  # ε, an empty repetition
                got = b""
            stack.pop()
            memo[x] = got
        return memo[e]

    def spelling(self, k: int) -> bytes:
        """The UTF-8 bytes of a character of class k with the fewest bytes, over the available
        bytes (``alg.class_bytes[k]`` of them; the class must be spellable)."""
        got = self._spelled.get(k)
        if got is None:
            u = self.utf8
            if not self._spelled:  # every ASCII class at once, from its first available byte
                for b in range(127, -1, -1):
                    if u["avail"][b]:
                        self._spelled[u["ascii"][b]] = bytes((b,))
                got = self._spelled.get(k)
            if got is None:
                for b, (level, node) in enumerate(u["lead"]):
                    if level > 0 and u["avail"][b] and u["masks"][level][node] >> k & 1:
                        text = bytes((b,)) + self.completion(level, node, k)
                        if got is None or len(text) < len(got):
                            got = text
            if got is None:
                raise ConstraintError(f"internal error: class {k} has no character of the available bytes")
            self._spelled[k] = got
        return got

    def completion(self, level: int, node: int, k: int) -> bytes:
        """The ``level`` continuation bytes that finish, under DAG node ``node``, a character of
        class k (which must lie under it, :func:`_utf8_tables` ``masks``)."""
        u = self.utf8
        avail, out = u["avail"], []
        while level > 1:
            below = u["masks"][level - 1]
            kids = (u["l2"] if level == 2 else u["l3"])[node]
            i = next(i for i, c in enumerate(kids) if c >= 0 and avail[0x80 + i] and below[c] >> k & 1)
            out.append(0x80 + i)
            node, level = kids[i], level - 1
        row = u["rows"][node]
        out.append(0x80 + next(i for i, c in enumerate(row) if c == k and avail[0x80 + i]))
        return bytes(out)

    def blocks(self, e: Expr) -> tuple[int, ...]:
        """Disjoint class masks covering every class, such that the derivative of ``e`` is the
        same for all classes of a block (Owens, Reppy & Turon 2009's derivative classes): a
        set splits into itself and the rest; a concatenation refines its head's blocks by its
        tail's where the head can be empty; unions and intersections meet their parts';
        with boundaries, word and non-word classes apart (iterative; memoised per node)."""

        def kids(x: Expr) -> tuple:
            op = x.op
            if op == CAT:
                return (x.a, x.b) if x.a.null else (x.a,)
            if op in (OR, AND):
                return tuple(x.a)
            return (x.a,) if op in (NOT, REP) else ()

        def value(x: Expr, parts: list) -> tuple[int, ...]:
            if x.op == SET:
                got = tuple(m for m in (x.mask, self._all & ~x.mask) if m)
            else:
                got = (self._all,)
                for part in parts:
                    got = _meet(got, part)
            if x.ctx and self._word_split:
                got = _meet(got, (self._word_split, self._all & ~self._word_split))
            return got

        return _post_order(e, self._blocks, kids, value)

    def _search(self, q0: int) -> int:
        cost = [n if n < (1 << 20) else -1 for n in self.alg.class_bytes]
        spellable = _or(1 << k for k in range(self.num_classes) if cost[k] > 0)

        def usable_in(block: int):
            m = block & spellable
            while m:
                low = m & -m
                yield low.bit_length() - 1
                m ^= low

        best = {q0: 0}
        parent: dict[int, tuple[int, int]] = {}  # state -> (the state before it, the class read)
        heap = [(0, 0, q0)]  # (bytes, 1 if the rest of the way is known, state)
        done = set()
        visited = 0
        while heap:
            d, final, q = heapq.heappop(heap)
            if final:  # the first final entry popped is the shortest way
                x = q
                while True:  # the states on it get their exact distance and their next step
                    self._dist[x] = d - best[x]
                    if x == q0:
                        break
                    before, k = parent[x]
                    self._hop[before] = (k, x)
                    x = before
                return d
            if q in done:
                continue
            done.add(q)
            known = 0 if self.accepting(q) else self._dist.get(q)
            e = self.states[q][0]
            if known is None and _structural(e):  # exact without a search
                known = self._dist[q] = self.min_bytes(e)
            if known is not None and known >= 0:  # the rest of the way from q is known
                heapq.heappush(heap, (d + known, 1, q))
                continue
            if known is not None:  # a dead state: nothing beyond it
                continue
            visited += 1
            if visited > SEARCH_BUDGET:
                raise ConstraintTooLarge(
                    f"constraint too expensive: deciding whether a state can still match searched more "
                    f"than {SEARCH_BUDGET:,} states (an intersection or complement whose matches are far "
                    "or rare); simplify the expression",
                    bound="steps",
                    limit=SEARCH_BUDGET,
                    size=visited,
                )
            for block in self.blocks(e):  # one derivative per block: the cheapest class of it
                k = min(usable_in(block), key=cost.__getitem__, default=-1)
                if k < 0:
                    continue
                r = self.step(q, k)
                if r < 0 or r in done:
                    continue
                nd = d + cost[k]
                if nd < best.get(r, 1 << 60):
                    best[r], parent[r] = nd, (q, k)
                    heapq.heappush(heap, (nd, 0, r))
        for x in done:  # every state reachable from q0 was seen: none accepts
            self._dist[x] = -1
        return -1


def _by_size(x: Expr) -> tuple[int, int]:
    return x.minb, x.id


def _post_order(root: Expr, memo: dict, kids: Callable, value: Callable) -> Any:
    """``memo[root]``, computed bottom-up without recursion (expressions nest thousands deep):
    ``kids(x)`` names the nodes whose values ``x``'s value reads, ``value(x, [their values])``
    makes it once they are all in ``memo``; every node's value is kept in ``memo``."""
    stack = [root]
    while stack:
        x = stack[-1]
        if x in memo:
            stack.pop()
            continue
        below = kids(x)
        missing = [c for c in below if c not in memo]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        memo[x] = value(x, [memo[c] for c in below])
    return memo[root]


def _collect_sets(root: Node, sets: dict) -> None:
    """The character sets of the AST ``root`` into ``sets`` (set -> its number, first seen first);
    a subtree the parser shares is walked once."""
    stack, seen = [root], set()
    while stack:
        n = stack.pop()
        if n.kind is Kind.SET:
            sets.setdefault(n.cset, len(sets))
        elif id(n) not in seen:
            seen.add(id(n))
            stack.extend(n.items)


def _convert(root: Node, alg: Algebra, set_of: dict, set_mask: list[int]) -> Expr:
    """The parsed AST as an :class:`Expr` (iterative over the nesting; a node the parser shares
    is converted once)."""
    done: dict[int, Expr] = {}
    stack = [root]
    set_kind, assert_kind, seq_kind, alt_kind = Kind.SET, Kind.ASSERT, Kind.SEQ, Kind.ALT
    while stack:
        node = stack[-1]
        key = id(node)
        if key in done:
            stack.pop()
            continue
        kind = node.kind
        if kind is set_kind:
            stack.pop()
            done[key] = alg.chars(set_mask[set_of[node.cset]])
            continue
        if kind is assert_kind:
            stack.pop()
            a = node.anchor
            done[key] = (
                alg.wb if a is Anchor.WORD_BOUNDARY else alg.nwb if a is Anchor.NOT_WORD_BOUNDARY else alg.eps
            )
            continue
        items = node.items
        missing = [c for c in items if id(c) not in done]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        if kind is seq_kind:
            out = alg.eps
            for c in reversed(items):
                out = alg.cat(done[id(c)], out)
        elif kind is alt_kind:
            out = alg.union([done[id(c)] for c in items])
        else:
            out = alg.rep(done[id(items[0])], node.lo, node.hi)
        done[key] = out
    return done[id(root)]


def _combine(p: Pattern, alg: Algebra, converted: dict[str, Expr]) -> Expr:
    """The expression of ``p``: a regex leaf gated by ``regex``'s first-character test
    (:func:`~decodekit.constraints.automata.product.first_char_gate`) as a single pattern's
    compile does; an exclude's search leaf ``.*R.*``. Each node of the DAG is converted once,
    without recursion (a shared part is one expression)."""

    def value(x: Pattern, parts: list[Expr]) -> Expr:
        if x.op == "re":
            gate = first_char_gate(x.args)
            e = converted[x.args]
            return e if gate is None else alg.intersection((e, converted[gate]))
        if x.op == "search":
            anything = converted[ANY_TEXT]
            return alg.cat(anything, alg.cat(converted[x.args], anything))
        if x.op == "rep":
            return alg.rep(parts[0], x.args[1], x.args[2])
        if x.op == "and":
            return alg.intersection(parts)
        if x.op == "or":
            return alg.union(parts)
        if x.op == "cat":
            out = alg.eps
            for e in reversed(parts):
                out = alg.cat(e, out)
            return out
        return alg.complement(parts[0])

    return _post_order(p, {}, _kids, value)
