"""A context-free grammar intersected with a regular pattern, as byte states built on first visit:
:class:`GrammarPatternBytes` (``Grammar(...) & Pattern(...)``; the intersection of a
context-free language with a regular one is context-free).

A state is a pair (g, p): a :class:`~decodekit.constraints.grammar.earley.GrammarBytes` state and
a state of the pattern's minimal byte DFA; a byte steps both, and the pair accepts when both do.

Fewest bytes to acceptance (a weighted Bar-Hillel product, solved once per symbol and once per
Earley set). The fewest bytes of a grammar's completion and of a pattern's are not enough: the
shortest sentence may miss the pattern and the pattern's shortest match may not parse. So every
quantity of :mod:`~decodekit.constraints.grammar.distances` becomes a min-plus vector or matrix
over the DFA's Q states (:mod:`~decodekit.constraints.grammar.minplus`):

* ``D[a]`` [Q, Q] per lexer state a: the fewest bytes that complete a's lexeme, from DFA state q
  to q' (a fixpoint over the product of the lexer's states with the DFA's, all at once);
  a terminal's ``L_t = D[start_t]``;
* ``I* = (min_{ignored t} L_t)*``, the ignored text that may follow any lexeme (Lark's
  ``%ignore``), and ``M_t = L_t ⊗ I*``; a nonterminal's ``M_A = min over its rules of the product
  of its body's matrices``, solved by a worklist fixpoint (Knuth's least fixpoint, per entry);
* per set X and awaited symbol y, ``C(X, y)`` [Q]: the fewest bytes from y's completion (the DFA
  in state q) to the end of a sentence with the DFA accepting, ``min`` over the items waiting on
  y of ``M(rest of the rule) ⊗ C(origin, lhs)``, ``C(., start) = F`` (0 at accepting DFA states);
  inside a set a shortest-path fixpoint, across sets fixed when the earlier set was solved;
* a state's distance: ``min`` over its lexemes (t, a, o) of ``(D[a] ⊗ I* ⊗ C(o, t))[p]`` (an
  ignored lexeme: what may begin at o), over its expected terminals likewise from ``L_t``, and 0
  when both accept. Computed as one [Q] vector per Earley set, read at p.

Sizes are bounded, each checked as it is reached and before any mask: the pattern's DFA at most
:data:`MAX_PATTERN_STATES` states, the grammar's lexer at most :data:`MAX_LEXER_STATES`, and the
lexer-by-DFA and nonterminal-by-DFA products at most :data:`MAX_PRODUCT` entries each (Q * Q per
lexer state, per nonterminal; checked before they are allocated); past any, one line says so.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from decodekit.constraints.automata.charlevel import CharLevel
from decodekit.constraints.automata.lazybytes import LazyBytes
from decodekit.constraints.automata.protocol import UNKNOWN
from decodekit.constraints.grammar import minplus
from decodekit.constraints.grammar.distances import SELF
from decodekit.constraints.grammar.earley import MAX_STATES, GrammarBytes
from decodekit.constraints.grammar.minplus import INF
from decodekit.errors import ConstraintError, ConstraintTooLarge

MAX_PATTERN_STATES = 256  # states of the pattern's minimal byte DFA (products cost Q^3)
MAX_LEXER_STATES = 20_000  # the grammar lexer's byte states, enumerated whole
_CANDIDATES = 1 << 20  # predecessors made at once by the backward search (3 x 8 MiB)
MAX_PRODUCT = 8_000_000  # lexer states (and nonterminals) * Q * Q: the entries of D (64 MiB of int64)


class _Symbols:
    """The min-plus matrices of a grammar's symbols over a pattern DFA (module docstring):
    ``lexeme[a]`` = D[a], ``term[t]`` = L_t, ``istar`` = I*, ``term_then_ignore[t]`` = M_t,
    ``nt[A]`` = M_A."""

    def __init__(self, grammar: GrammarBytes, tp: np.ndarray, available: np.ndarray, label: str) -> None:
        g = grammar.g
        self.q = q = tp.shape[0]
        self.lexeme = _lexeme_matrices(grammar.lexer, tp, available, label)
        nowhere = np.full((q, q), INF, dtype=np.int64)
        self.term = [self.lexeme[s] if s >= 0 else nowhere for s in g.starts]  # -1: never begins
        ignored = [self.term[t] for t in g.ignore]
        self.istar = minplus.star(np.minimum.reduce(ignored)) if ignored else minplus.identity(q)
        self.term_then_ignore = [minplus.mm(m, self.istar) for m in self.term]
        self.identity = minplus.identity(q)
        self.end, self.rhs = g.end, g.rhs
        if len(g.names) * q * q > MAX_PRODUCT:  # checked before the allocation
            raise ConstraintTooLarge(
                f"constraint too large: {label}: {len(g.names):,} nonterminals times {q} pattern states "
                f"squared exceeds {MAX_PRODUCT:,}; use a pattern with fewer states or write it into the "
                "grammar",
                bound="states",
                limit=MAX_PRODUCT,
                size=len(g.names) * q * q,
            )
        self.nt = np.full((len(g.names), q, q), INF, dtype=np.int64)
        self._solve_nonterminals(g)

    def of(self, y: int) -> np.ndarray:
        """[Q, Q] the matrix of symbol y (a terminal followed by any ignored text)."""
        if y >= 0:
            return self.nt[y]
        if y == self.end:
            return self.identity
        return self.term_then_ignore[-1 - y]

    def rest(self, r: int, d: int, v: np.ndarray) -> np.ndarray:
        """``M(rhs[r][d:]) ⊗ v`` [Q], right to left, matrix by vector."""
        body = self.rhs[r]
        for k in range(len(body) - 1, d - 1, -1):
            v = minplus.mv(self.of(body[k]), v)
        return v

    def _solve_nonterminals(self, g) -> None:
        users: list[set[int]] = [set() for _ in g.names]
        for r, body in enumerate(g.rhs):
            for y in body:
                if y >= 0:
                    users[y].add(r)
        queue, queued = deque(range(1, len(g.rhs))), set(range(1, len(g.rhs)))
        while queue:
            r = queue.popleft()
            queued.discard(r)
            body = g.rhs[r]
            value = self.of(body[0]) if body else self.identity
            for y in body[1:]:
                if value.min() >= INF:
                    break
                value = minplus.mm(value, self.of(y))
            a = g.lhs[r]
            better = np.minimum(self.nt[a], value)
            if not np.array_equal(better, self.nt[a]):
                self.nt[a] = better
                for r2 in users[a]:
                    if r2 and r2 not in queued:
                        queued.add(r2)
                        queue.append(r2)


def _lexer_table(lexer: LazyBytes, available: np.ndarray, label: str) -> np.ndarray:
    """[L, 256] int64: every lexer byte state reachable from the states it has (the terminals'
    starts), each byte's next state, -1 where the byte is not available or the lexeme dies."""
    table = lexer.explore(
        available,
        MAX_LEXER_STATES,
        lambda size: ConstraintTooLarge(
            f"constraint too large: {label}: the grammar's terminals have more than "
            f"{MAX_LEXER_STATES:,} byte states to intersect with the pattern",
            bound="states",
            limit=MAX_LEXER_STATES,
            size=size,
        ),
    )
    n = len(table)
    live = np.array([lexer.distance(x) >= 0 for x in range(n)] + [False])
    return np.where(live[table], table, -1)


def _lexeme_matrices(lexer: LazyBytes, tp: np.ndarray, available: np.ndarray, label: str) -> np.ndarray:
    """[L, Q, Q] ``D[a, q, q']``: the fewest bytes leading lexer state a to an accepting one and
    the DFA (next-state table ``tp`` [Q, 256]) from q to q'. A breadth-first search backwards
    over the product graph, all targets q' at once, from the entries at distance 0 (a accepts,
    q = q'): each entry is settled once, so the work is the graph's edges times Q, not that
    times the longest distance (as a fixpoint over every entry each round was)."""
    tl = _lexer_table(lexer, available, label)
    n, q = tl.shape[0], tp.shape[0]
    if n * q * q > MAX_PRODUCT:
        raise ConstraintTooLarge(
            f"constraint too large: {label}: {n:,} lexer states times {q} pattern states squared "
            f"exceeds {MAX_PRODUCT:,}; use a pattern with fewer states or write it into the grammar",
            bound="states",
            limit=MAX_PRODUCT,
            size=n * q * q,
        )
    columns = np.unique(np.vstack([tl, tp]).T, axis=0)  # [K, L + Q]: each byte class's moves
    columns = columns[(columns[:, :n] >= 0).any(axis=1) & (columns[:, n:] >= 0).any(axis=1)]
    # per byte class, who steps into each lexer state and each DFA state (CSR, dead moves left out)
    preds = [(_inverse(c[:n], n), _inverse(c[n:], q)) for c in columns]
    d = np.full((n, q, q), INF, dtype=np.int64)
    accepting = np.flatnonzero([lexer.accepting(a) for a in range(n)])
    a, p = np.repeat(accepting, q), np.tile(np.arange(q), len(accepting))
    front = (a, p, p.copy())  # entries (a, q, q') at distance 0: a accepts, the DFA stays
    d[front] = 0
    flat_d, step = d.reshape(-1), 0
    while len(front[0]):  # breadth first backwards: each entry is settled once, at its distance
        step += 1
        settled = []
        for (l_first, l_of), (q_first, q_of) in preds:
            a1, p1, target = front
            la, lc = l_first[a1], l_first[a1 + 1] - l_first[a1]
            qa, qc = q_first[p1], q_first[p1 + 1] - q_first[p1]
            both = lc * qc  # each frontier entry's predecessors under this byte class
            ends = np.cumsum(both)
            lo = 0
            while lo < len(a1):  # frontier chunks of at most _CANDIDATES predecessors
                hi = max(lo + 1, int(np.searchsorted(ends, (ends[lo - 1] if lo else 0) + _CANDIDATES)))
                part = both[lo:hi]
                which = lo + np.repeat(np.arange(hi - lo), part)
                k = np.arange(len(which)) - np.repeat(np.cumsum(part) - part, part)
                pa = l_of[la[which] + k // qc[which]]
                pp = q_of[qa[which] + k % qc[which]]
                flat = np.unique((pa * q + pp) * q + target[which])
                flat = flat[flat_d[flat] >= INF]
                flat_d[flat] = step
                settled.append(flat)
                lo = hi
        flat = np.concatenate(settled) if settled else np.zeros(0, dtype=np.int64)
        front = (flat // (q * q), flat // q % q, flat % q)
    return d


def _inverse(moves: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The states stepping into each state under one byte class (``moves`` [S]: next state, -1
    dead): ``(first [size + 1], sources)``, the sources into s being ``sources[first[s]:first[s + 1]]``."""
    live = np.flatnonzero(moves >= 0)
    order = live[np.argsort(moves[live], kind="stable")]
    first = np.searchsorted(moves[order], np.arange(size + 1))
    return first, order


class GrammarPatternBytes:
    """The byte states of a grammar's language intersected with a pattern's (module docstring),
    a :class:`~decodekit.constraints.automata.protocol.ByteAutomaton`. State 0 is the initial
    pair. ConstraintError when no text of the available bytes is in both languages."""

    finite = False

    def __init__(self, grammar: GrammarBytes, pattern, available: np.ndarray, label: str) -> None:
        char = CharLevel(pattern, available)
        if char.initial < 0:  # no text of the vocabulary's characters matches it
            raise ConstraintError(f"{label}: the pattern matches no text of the vocabulary's bytes")
        try:
            dfa = LazyBytes(char).whole(available, MAX_PATTERN_STATES, "")
        except ConstraintTooLarge as e:  # its advice (a masked search) is for a regex alone
            raise ConstraintTooLarge(
                f"constraint too large: {label}: the pattern has more than {MAX_PATTERN_STATES} reachable "
                "byte-level states (a grammar takes patterns of up to that many; `.` and Unicode classes "
                "take several per character, an ASCII class such as [ -~] one); write the restriction "
                "into the grammar's rules or terminals instead",
                bound="states",
                limit=MAX_PATTERN_STATES,
                size=e.size,
            ) from None
        if dfa is None:
            raise ConstraintError(f"{label}: the pattern matches no text of the vocabulary's bytes")
        tp = dfa.table[:, dfa.byte_class].astype(np.int64)
        tp[:, ~available] = -1
        self.grammar, self._tp, self._pattern_accepts = grammar, tp, dfa.accepting.astype(bool)
        self._sym = _Symbols(grammar, tp, available, label)
        self._final = np.where(self._pattern_accepts, 0, INF).astype(np.int64)
        self._nowhere = np.full(tp.shape[0], INF, dtype=np.int64)
        self._costs: dict[int, dict[int, np.ndarray]] = {}  # set -> symbol -> C(set, symbol)
        self._after: dict[tuple[int, int], np.ndarray] = {}  # (set, terminal) -> I* ⊗ C
        self._begin: dict[int, np.ndarray] = {}  # set -> what may begin there, ignored text first
        self._dist: dict[int, np.ndarray] = {}  # set -> [Q] its distance at each DFA state
        self._pairs: dict[tuple[int, int], int] = {}
        self._row_keys: dict[tuple[int, int], tuple] = {}  # (pair, horizon) -> row_key
        self._noted: dict = {}  # the grammar's consults noted by _live_after
        self._live: dict[tuple[int, int | None], bytes] = {}
        self._g = np.zeros(64, dtype=np.int64)
        self._p = np.zeros(64, dtype=np.int64)
        self.table = np.full((64, 256), UNKNOWN, dtype=np.int32)
        self._size = 0
        if self._enter(0, int(dfa.initial)) != 0:
            raise ConstraintError(
                f"{label}: no text of this vocabulary is in both the grammar's language and the pattern's"
            )

    # ------------------------------------------------------------------ the ByteAutomaton interface

    @property
    def size(self) -> int:
        return self._size

    def sizes(self) -> dict[str, int]:
        return {**self.grammar.sizes(), "pattern_states": self._tp.shape[0], "product_states": self._size}

    def accepting(self, s: int) -> bool:
        return self.grammar.accepting(int(self._g[s])) and bool(self._pattern_accepts[self._p[s]])

    def distance(self, s: int) -> int:
        """The fewest bytes leading s to a text in both languages (module docstring)."""
        got = int(self._distances(int(self._g[s]))[self._p[s]])
        return -1 if got >= INF else got

    def lower(self, s: int) -> int:
        return self.distance(s)

    def reach(self, s: int) -> None:
        return None

    def row_key(self, s: int, horizon: int) -> tuple:
        """The grammar's key of the pair's set (:meth:`~.earley.GrammarBytes.key_of`) with every
        origin it reads noted by which DFA states can still end a sentence from it (the finite
        entries of ``C``: a pair's liveness reads the stack below only through them), every lexeme
        by its exact lexer state, and the DFA state."""
        got = self._row_keys.get((s, horizon))
        if got is None:
            key = self.grammar.key_of(int(self._g[s]), horizon, self._live_after, self._noted)
            got = self._row_keys[(s, horizon)] = (key, int(self._p[s]))
        return got

    def _live_after(self, o: int, y: int | None) -> bytes:
        """Which DFA states can end a sentence after symbol y completes with its items in set o
        (y None: after an ignored lexeme begun at o), as packed bits."""
        got = self._live.get((o, y))
        if got is None:
            if y is None:
                v = self._begins(o)
            elif y < 0 and y != self.grammar.g.end:
                v = self._after_terminal(o, -1 - y)
            else:
                v = self._costs[o].get(y, self._nowhere)
            got = self._live[(o, y)] = np.packbits(v < INF).tobytes()
        return got

    def witness(self, s: int) -> bytes | None:
        """One shortest completion: from each state, a byte to a state one byte nearer."""
        d = self.distance(s)
        if d < 0:
            return None
        out = bytearray()
        while d > 0:
            for b in np.flatnonzero(self._tp[self._p[s]] >= 0).tolist():
                nxt = self.step(s, b)
                if nxt >= 0 and self.distance(nxt) == d - 1:
                    out.append(b)
                    s, d = nxt, d - 1
                    break
            else:  # the distances are exact, so some byte is one nearer
                raise AssertionError(f"no byte leads state {s} nearer than {d}")
        return bytes(out)

    def step(self, s: int, b: int) -> int:
        got = int(self.table[s, b])
        if got == UNKNOWN:
            self.fill(np.array([s]), np.array([b]))
            got = int(self.table[s, b])
        return got

    def fill(self, states: np.ndarray, codes: np.ndarray) -> None:
        """The unknown ``table[states[i], codes[i]]``: both halves stepped at once (the grammar's
        table filled first), each distinct live pair interned."""
        pairs = np.unique(states.astype(np.int64) * 256 + codes)
        src, byte = pairs >> 8, pairs & 255
        gs = self._g[src]
        nxt_g = self.grammar.table[gs, byte]
        unknown = nxt_g == UNKNOWN
        if unknown.any():
            self.grammar.fill(gs[unknown], byte[unknown])
            nxt_g = self.grammar.table[gs, byte]
        nxt_p = self._tp[self._p[src], byte]
        out = np.full(len(pairs), -1, dtype=np.int32)
        ok = (nxt_g >= 0) & (nxt_p >= 0)
        q = self._tp.shape[0]
        keys, inverse = np.unique(nxt_g[ok].astype(np.int64) * q + nxt_p[ok], return_inverse=True)
        made = np.array([self._enter(int(k) // q, int(k) % q) for k in keys.tolist()], dtype=np.int32)
        out[ok] = made[inverse.reshape(-1)] if len(keys) else out[ok]
        self.table[src, byte] = out

    def _enter(self, g: int, p: int) -> int:
        """The id of live pair (g, p), interned; -1 if no text of both languages follows it."""
        got = self._pairs.get((g, p))
        if got is None:
            if self._distances(g)[p] >= INF:
                got = -1
            else:
                got = self._size
                if got >= MAX_STATES:
                    raise ConstraintTooLarge(
                        f"constraint too large: grammar & pattern visited over {MAX_STATES:,} states",
                        bound="states",
                        limit=MAX_STATES,
                    )
                if got >= len(self._g):
                    self._g, self._p = (np.concatenate([a, np.zeros_like(a)]) for a in (self._g, self._p))
                    grown = np.full((2 * len(self.table), 256), UNKNOWN, dtype=np.int32)
                    grown[: len(self.table)] = self.table
                    self.table = grown
                self._g[got], self._p[got] = g, p
                self._size += 1
            self._pairs[(g, p)] = got
        return got

    # ------------------------------------------------------------------ the vectors of a set

    def _distances(self, x: int) -> np.ndarray:
        """[Q] the fewest bytes from grammar set x, the DFA in each state, to a text of both."""
        got = self._dist.get(x)
        if got is None:
            self._solve(x)
            here, sym, ignore = self.grammar.sets[x], self._sym, self.grammar.g.ignore
            got = self._final.copy() if here.accepting else self._nowhere.copy()
            for t, a, o in here.lex:
                tail = self._begins(o) if t in ignore else self._after_terminal(o, t)
                np.minimum(got, minplus.mv(sym.lexeme[a], tail), out=got)
            for t, o in here.expect:
                o2 = x if o == SELF else o
                tail = self._begins(o2) if t in ignore else self._after_terminal(o2, t)
                np.minimum(got, minplus.mv(sym.term[t], tail), out=got)
            self._dist[x] = got
        return got

    def _after_terminal(self, o: int, t: int) -> np.ndarray:
        """``I* ⊗ C(o, t)``: after terminal t completes with its waiting items in set o."""
        got = self._after.get((o, t))
        if got is None:
            c = self._costs[o].get(-1 - t)
            got = self._after[(o, t)] = self._nowhere if c is None else minplus.mv(self._sym.istar, c)
        return got

    def _begins(self, o: int) -> np.ndarray:
        """From set o onwards, ignored text first: the end (o accepts) or a lexeme begun at o."""
        got = self._begin.get(o)
        if got is None:
            here, sym, ignore = self.grammar.sets[o], self._sym, self.grammar.g.ignore
            first = self._final.copy() if here.accepting else self._nowhere.copy()
            for t, o2 in here.expect:
                if t not in ignore:
                    tail = self._after_terminal(o if o2 == SELF else o2, t)
                    np.minimum(first, minplus.mv(sym.term[t], tail), out=first)
            got = self._begin[o] = minplus.mv(sym.istar, first)
        return got

    def _solve(self, s: int) -> None:
        """``C(X, .)`` for s and every set it refers to (earlier sets first, iteratively)."""
        sets, stack = self.grammar.sets, [s]
        while stack:
            x = stack[-1]
            if x in self._costs:
                stack.pop()
                continue
            missing = [o for o in sets[x].origins if o not in self._costs]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            self._costs[x] = self._solve_one(x)

    def _solve_one(self, x: int) -> dict[int, np.ndarray]:
        """``C(x, y)`` for each symbol y awaited in set x: the items begun earlier give fixed
        values; those begun in x refer to x's own ``C`` of their left side, relaxed until still."""
        g, sym = self.grammar.g, self._sym
        costs: dict[int, np.ndarray] = {0: self._final}
        inner: dict[int, list[tuple[int, int]]] = {}
        for r, d, o in self.grammar.sets[x].rules:
            if o == SELF:
                inner.setdefault(g.lhs[r], []).append((r, d))
                continue
            base = self._final if g.lhs[r] == 0 else self._costs[o].get(g.lhs[r])
            if base is not None:
                _lower(costs, g.rhs[r][d], sym.rest(r, d + 1, base))
        todo = [a for a in costs if a in inner]
        while todo:
            a = todo.pop()
            for r, d in inner[a]:
                y = g.rhs[r][d]
                if _lower(costs, y, sym.rest(r, d + 1, costs[a])) and y in inner:
                    todo.append(y)
        return costs


def _lower(costs: dict[int, np.ndarray], y: int, v: np.ndarray) -> bool:
    """``costs[y] = min(costs[y], v)``; whether that lowered an entry (v all INF: nothing)."""
    old = costs.get(y)
    if old is None:
        if v.min() >= INF:
            return False
        costs[y] = v
        return True
    new = np.minimum(old, v)
    if np.array_equal(new, old):
        return False
    costs[y] = new
    return True
