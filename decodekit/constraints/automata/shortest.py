"""Fewest bytes and shortest texts of the character level's states
(:class:`~decodekit.constraints.automata.charlevel.CharLevel`): read off an expression's
structure where it has no boundary, intersection or complement, else searched over its
derivatives (Dijkstra, bounded by :data:`SEARCH_BUDGET`)."""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from decodekit.constraints.automata.algebra import (
    AND,
    CAT,
    EMPTY,
    NOT,
    OR,
    REP,
    SET,
    Expr,
    is_structural,
    post_order,
)
from decodekit.constraints.automata.classdag import bit_or
from decodekit.errors import ConstraintTooLarge

if TYPE_CHECKING:
    from decodekit.constraints.automata.charlevel import CharLevel

SEARCH_BUDGET = 200_000  # derivatives a liveness / distance search may take from one state


class ShortestTexts:
    """The distances and shortest texts of one :class:`CharLevel`'s states, computed on first need
    and kept: ``distance(q)`` the fewest bytes leading state q to acceptance (-1: none),
    ``witness(q)`` one such text."""

    def __init__(self, level: CharLevel) -> None:
        self.level = level
        self._dist: dict[int, int] = {}
        self._hop: dict[int, tuple[int, int]] = {}  # state -> (class, next state) on a shortest way
        self._short: dict[Expr, bytes] = {}
        self._minbytes: dict[Expr, int] = {}

    def distance(self, q: int) -> int:
        """The fewest bytes of a text leading q to acceptance, -1 if none (exact: read off the
        expression where it has no boundary (:meth:`min_bytes`), else a bounded Dijkstra
        search; ConstraintError past :data:`SEARCH_BUDGET` states)."""
        got = self._dist.get(q)
        if got is not None:
            return got
        e, _ = self.level.states[q]
        if is_structural(e):
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
                return self.distance(self.level.state(x, False))
            if op == CAT:
                return -1 if min(parts) < 0 else sum(parts)
            if op == OR:
                return min((n for n in parts if n >= 0), default=-1)
            return 0 if not x.lo else -1 if parts[0] < 0 else x.lo * parts[0]  # REP

        return post_order(e, self._minbytes, kids, value)

    def lower(self, q: int) -> int:
        """A lower bound on :meth:`distance` that never searches."""
        got = self._dist.get(q)
        return got if got is not None else self.level.states[q][0].minb

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
            e, _ = self.level.states[q]
            if is_structural(e):
                out.append(self.shortest_text(e))
                break
            hop = self._hop.get(q)
            if hop is None:  # distance known without a search (cannot happen; be safe)
                return None
            k, q = hop
            out.append(self.level.spelling(k))
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
                return self.witness(self.level.state(x, False))
            if op == SET:
                return self.level.spelling(self.level.alg.cheapest(x.mask))
            if op == CAT:
                return parts[0] + parts[1]
            if op == OR:
                return parts[0]
            if op == REP and x.lo:
                return parts[0] * x.lo
            return b""  # ε, an empty repetition

        return post_order(e, self._short, kids, value)

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
                got = self.level.spelling(self.level.alg.cheapest(x.mask))
            else:  # ε, an empty repetition
                got = b""
            stack.pop()
            memo[x] = got
        return memo[e]

    def _search(self, q0: int) -> int:
        """The fewest bytes from q0 to acceptance by Dijkstra over the states (one step per
        derivative class, its cheapest class), recording the distances and next steps on the
        way found; -1 if none; ConstraintTooLarge past :data:`SEARCH_BUDGET` states."""
        cost = [n if n < (1 << 20) else -1 for n in self.level.alg.class_bytes]
        spellable = bit_or(1 << k for k in range(self.level.num_classes) if cost[k] > 0)

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
            known = 0 if self.level.accepting(q) else self._dist.get(q)
            e = self.level.states[q][0]
            if known is None and is_structural(e):  # exact without a search
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
            for block in self.level.blocks(e):  # one derivative per block: the cheapest class of it
                k = min(usable_in(block), key=cost.__getitem__, default=-1)
                if k < 0:
                    continue
                r = self.level.step(q, k)
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
