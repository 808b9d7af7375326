"""Fewest bytes to acceptance of a grammar's byte states
(:class:`~decodekit.constraints.grammar.earley.GrammarBytes`), and one shortest text: for a set X
and a symbol y awaited in it, ``C(X, y)`` the fewest bytes after y completes until the sentence
does, solved per set by Dijkstra over its awaited symbols from the costs of the sets it refers to
(earlier ones first); a state's distance is its best lexeme under way or expected, then that."""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from decodekit.constraints.grammar.earley import GrammarBytes

SELF = -1  # an item's origin: the set that holds it
INF = 1 << 62


class GrammarDistances:
    """The distances of one :class:`GrammarBytes`'s states, computed on first need and kept."""

    def __init__(self, states: GrammarBytes) -> None:
        self.states = states
        self._dist: dict[int, int] = {}
        self._costs: dict[int, dict[int, tuple[int, tuple | None]]] = {}  # set -> symbol -> C(set, symbol)
        # set -> the fewest bytes onwards through a lexeme begun there
        self._start: dict[int, tuple[int, tuple | None]] = {}

    def distance(self, s: int) -> int:
        """The fewest bytes leading state s to acceptance (module docstring); -1 if none."""
        got = self._dist.get(s)
        if got is None:
            best, _ = self._best(s)
            got = self._dist[s] = -1 if best >= INF else best
        return got

    def _best(self, s: int) -> tuple[int, tuple | None]:
        """(fewest bytes, how): ``("accept",)``, ``("lex", t, q, o)`` or ``("expect", t, o)``."""
        here, g, lexer = self.states.sets[s], self.states.g, self.states.lexer
        self._solve(s)
        best, how = (0, ("accept",)) if here.accepting else (INF, None)
        for t, q, o in here.lex:
            d = lexer.distance(q)
            if d < 0 or d >= best:
                continue
            v = d + self._after_terminal(o, t)
            if v < best:
                best, how = v, ("lex", t, q, o)
        for t, o in here.expect:
            if t in g.ignore:
                continue  # an ignored lexeme first is never shorter than what it lets follow
            o2 = s if o == SELF else o
            v = g.sym_min(-1 - t) + self._after_terminal(o2, t)
            if v < best:
                best, how = v, ("expect", t, o2)
        return best, how

    def _after_terminal(self, o: int, t: int) -> int:
        """Fewest bytes after terminal t, begun with its waiting items in set o, completes:
        ``C(o, t)``; for an ignored terminal, what may begin at o (:meth:`_begin`)."""
        if t in self.states.g.ignore:
            return self._begin(o)[0]
        return self._costs[o].get(-1 - t, (INF, None))[0]

    def _begin(self, o: int) -> tuple[int, tuple | None]:
        """Fewest bytes from set o onwards through a lexeme beginning there (or 0: o accepts)."""
        got = self._start.get(o)
        if got is None:
            here, g = self.states.sets[o], self.states.g
            best, how = (0, None) if here.accepting else (INF, None)
            for t, o2 in here.expect:
                if t in g.ignore:
                    continue
                o3 = o if o2 == SELF else o2
                v = g.sym_min(-1 - t) + self._costs[o3].get(-1 - t, (INF, None))[0]
                if v < best:
                    best, how = v, ("expect", t, o3)
            got = self._start[o] = (best, how)
        return got

    def _solve(self, s: int) -> None:
        """``C(X, y)`` for s and every set it refers to (earlier sets first, iteratively)."""
        stack = [s]
        while stack:
            x = stack[-1]
            if x in self._costs:
                stack.pop()
                continue
            missing = [o for o in self.states.sets[x].origins if o not in self._costs]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            self._costs[x] = self._solve_one(x)
            for o in self.states.sets[x].origins:  # what may begin at an origin, for ignored lexemes
                if o not in self._start:
                    self._begin(o)

    def _solve_one(self, x: int) -> dict[int, tuple[int, tuple | None]]:
        """Dijkstra over the symbols awaited in set x: ``C(x, y) = min`` over items ``(r, d, o)``
        waiting on y of ``suffix[r][d + 1] + C(o, lhs[r])`` (``C(., START) = 0``)."""
        g, here = self.states.g, self.states.sets[x]
        best: dict[int, tuple[int, tuple | None]] = {0: (0, None)}  # START: the sentence ends
        inner: dict[int, list] = {}  # lhs -> the items begun here waiting on something
        heap = [(0, 0)]
        for item in here.rules:
            r, d, o = item
            if o == SELF:
                inner.setdefault(g.lhs[r], []).append(item)
                continue
            y, w = g.rhs[r][d], g.suffix[r][d + 1]
            v = w + self._costs[o].get(g.lhs[r], (INF, None))[0] if g.lhs[r] else w
            if v < best.get(y, (INF,))[0]:
                best[y] = (v, item)
                heapq.heappush(heap, (v, y))
        settled = set()
        while heap:
            v, a = heapq.heappop(heap)
            if a in settled or v > best[a][0]:
                continue
            settled.add(a)
            for item in inner.get(a, ()):
                r, d, _ = item
                y = g.rhs[r][d]
                v2 = v + g.suffix[r][d + 1]
                if v2 < best.get(y, (INF,))[0]:
                    best[y] = (v2, item)
                    heapq.heappush(heap, (v2, y))
        return best

    def witness(self, s: int) -> bytes | None:
        """One shortest text leading s to acceptance (:meth:`distance` bytes), read back along
        the choices the distances made."""
        best, how = self._best(s)
        if best >= INF:
            return None
        g, out = self.states.g, []
        if how[0] == "accept":
            return b""
        if how[0] == "lex":
            _, t, q, o = how
            out.append(self.states.lexer.witness(q) or b"")
        else:
            _, t, o = how
            out.append(g.text(-1 - t))
        while True:  # after terminal t completes with its waiting items in set o
            if t in g.ignore:
                v, nxt = self._begin(o)
                if nxt is None:
                    break  # o accepts
                _, t, o = nxt
                out.append(g.text(-1 - t))
                continue
            y, x = -1 - t, o
            while y != 0:  # climb the items that wait, until the start symbol completes
                _, item = self._costs[x][y]
                r, d, o2 = item
                out.append(g.seq_text(g.rhs[r][d + 1 :]))
                y, x = g.lhs[r], x if o2 == SELF else o2
            break
        return b"".join(out)
