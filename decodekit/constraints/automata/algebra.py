"""The expression algebra of a compiled :class:`~decodekit.constraints.automata.pattern.Pattern`
and its Brzozowski derivatives.

Compiling a Pattern (:class:`~decodekit.constraints.automata.charlevel.CharLevel`) parses every
regex in it, computes one partition of the characters into classes over all their character sets
(:func:`~decodekit.constraints.automata.chardfa.partition_characters`, with the word-character
split when ``\\b``/``\\B`` occur), and rewrites the whole into a hash-consed
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

from collections.abc import Callable, Iterable
from typing import Any

WIDE_UNION = 16  # members of a union past which its derivatives go through an index by first class

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
        self.one_byte = sum(1 << k for k, n in enumerate(class_bytes) if n == 1)  # the classes of 1 byte
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


def is_structural(e: Expr) -> bool:
    """Whether :meth:`CharLevel.min_bytes` reads the fewest bytes of ``e`` off its structure
    (no boundary in it, and not itself an intersection or complement, which are searched)."""
    return not e.ctx and e.op not in (AND, NOT)


def post_order(root: Expr, memo: dict, kids: Callable, value: Callable) -> Any:
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
