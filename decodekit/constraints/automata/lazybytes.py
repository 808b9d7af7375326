"""The UTF-8 byte level of a :class:`~decodekit.constraints.automata.charlevel.CharLevel`,
built on first visit.

A byte state is a character state q between characters (``level`` 0), or q followed by the
first bytes of an unfinished character: (q, level, node), ``level`` continuation bytes still to
come, ``node`` the node of the code-point class DAG of
:mod:`~decodekit.constraints.automata.utf8` under which the character lies (level 1: a row of 64
classes; 2 and 3: rows of 64 child nodes). Byte states are numbered as they are reached; their
transitions fill a table ``[S, 256]`` (-2: not computed yet, -1: dead), so that stepping the
vocabulary's trie is a gather, with only the pairs never seen computed in Python. A state is dead
(-1) when its character state is ∅, or, inside a character, when every character it can still
complete to leads to ∅. Valid UTF-8 only: no overlong forms, surrogates or code points past
U+10FFFF (the DAG has no node for them).
"""

from __future__ import annotations

import numpy as np

from decodekit.constraints.automata.algebra import CAT, OR, REP, SET, Expr
from decodekit.constraints.automata.charlevel import CharLevel
from decodekit.constraints.automata.graph import (
    distances_to_accept,
    distinct_columns,
    minimize,
    runs,
    sorted_distinct,
)
from decodekit.constraints.automata.protocol import UNKNOWN
from decodekit.constraints.automata.utf8 import ByteDFA
from decodekit.errors import ConstraintTooLarge

FILL_BY_CLASS = 16  # bytes asked of one state between characters from which fill steps by class
KEY_NODES = 4096  # nodes a row key may read (row_key): past it the state keeps its own row


class LazyBytes:
    """Byte states of ``char`` on first visit (module docstring). ``table`` [capacity, 256]
    int32 (rows past :attr:`size` unused); state 0 is the initial one."""

    finite = True

    def __init__(self, char: CharLevel) -> None:
        self.char = char
        self.keys: list[tuple[int, int, int]] = []
        self.index: dict[tuple[int, int, int], int] = {}
        self.table = np.full((64, 256), UNKNOWN, dtype=np.int32)
        u = char.utf8
        self._ascii, self._lead, self._rows, self._l2, self._l3 = (
            u["ascii"],
            u["lead"],
            u["rows"],
            u["l2"],
            u["l3"],
        )
        self._masks = u["masks"]
        self._ascii_np = np.array(self._ascii, dtype=np.int64)
        self._lead_np = u["lead_packed"]
        self._dist: dict[int, int] = {}
        self._classes_of: dict[bytes, tuple] = {}  # _byte_classes, per codes asked
        if self.state(char.initial, 0, 0) != 0:
            raise RuntimeError("the initial byte state is not 0")

    @property
    def size(self) -> int:
        return len(self.keys)

    def state(self, q: int, level: int, node: int) -> int:
        """The id of byte state (q, level, node), -1 if q is ∅ or node invalid."""
        if q < 0 or node < 0:
            return -1
        key = (q, level, node)
        s = self.index.get(key)
        if s is None:
            if level and not self._completes(q, level, node):
                self.index[key] = -1
                return -1
            s = self.index[key] = len(self.keys)
            self.keys.append(key)
            if s >= len(self.table):
                grown = np.full((2 * len(self.table), 256), UNKNOWN, dtype=np.int32)
                grown[: len(self.table)] = self.table
                self.table = grown
        return s

    def _completes(self, q: int, level: int, node: int) -> bool:
        """Whether some character under ``node`` (available bytes only) leads q somewhere: only the
        classes q can read are stepped (its expression's ``first``; the others lead to ∅)."""
        char = self.char
        m = self._masks[level][node] & char.states[q][0].first
        while m:
            low = m & -m
            if char.step(q, low.bit_length() - 1) >= 0:
                return True
            m ^= low
        return False

    def step(self, s: int, b: int) -> int:
        """The state after byte b from state s (computed and stored on first need)."""
        got = int(self.table[s, b])
        if got != UNKNOWN:
            return got
        q, level, node = self.keys[s]
        if level == 0:
            if b < 0x80:
                out = self.state(self.char.step(q, self._ascii[b]), 0, 0)
            else:
                lv, nd = self._lead[b]
                out = -1 if lv < 0 else self.state(q, lv, nd)
        elif not 0x80 <= b < 0xC0:
            out = -1
        elif level == 1:
            out = self.state(self.char.step(q, self._rows[node][b - 0x80]), 0, 0)
        else:
            child = (self._l2 if level == 2 else self._l3)[node][b - 0x80]
            out = self.state(q, level - 1, child)
        self.table[s, b] = out
        return out

    def fill(self, states: np.ndarray, codes: np.ndarray) -> None:
        """Compute the unknown entries ``table[states[i], codes[i]]`` (each distinct pair once): a
        state between characters asked for many bytes is stepped once per distinct class or lead
        node among them (:meth:`_fill_between`), the rest byte by byte."""
        pairs = sorted_distinct(states.astype(np.int64) * 256 + codes)
        src = pairs >> 8
        cuts = runs(src)
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            s = int(src[lo])
            if hi - lo >= FILL_BY_CLASS and self.keys[s][1] == 0:
                self._fill_between(s, (pairs[lo:hi] & 255).astype(np.int64))
                continue
            for key in pairs[lo:hi].tolist():
                self.step(key >> 8, key & 255)

    def _fill_between(self, s: int, codes: np.ndarray) -> None:
        """``table[s, codes]`` for a state between characters and ascending unknown ``codes``:
        what :meth:`step` gives byte by byte, with one character step per distinct ASCII class
        (:meth:`CharLevel.steps`) and one state per distinct lead node, each taken at its first
        byte (so that states are numbered as byte-by-byte stepping numbers them)."""
        q = self.keys[s][0]
        low, ks, low_of, high, packed, high_of = self._byte_classes(codes)
        if len(low):
            out = [self.state(r, 0, 0) for r in self.char.steps(q, ks)]
            self.table[s, low] = np.array(out, dtype=np.int32)[low_of]
        if len(high):  # a lead byte: level << 32 | node, -1 never valid first
            out = [-1 if v < 0 else self.state(q, v >> 32, v & 0xFFFFFFFF) for v in packed]
            self.table[s, high] = np.array(out, dtype=np.int32)[high_of]  # after state() grew it

    def _byte_classes(self, codes: np.ndarray) -> tuple:
        """``codes`` split for :meth:`_fill_between`: the ASCII ones, their distinct classes in
        order of first occurrence and each one's index among them; the others, their distinct
        lead nodes likewise. Kept per codes for a few sets of them: a first visit fills several
        states over the same bytes (a grammar's terminals that may begin, over every byte)."""
        key = codes.tobytes()
        got = self._classes_of.get(key)
        if got is None:
            low, high = codes[codes < 0x80], codes[codes >= 0x80]
            got = (low, *_by_first(self._ascii_np[low]), high, *_by_first(self._lead_np[high]))
            if len(self._classes_of) >= 16:
                self._classes_of.clear()
            self._classes_of[key] = got
        return got

    def accepting(self, s: int) -> bool:
        q, level, _ = self.keys[s]
        return level == 0 and self.char.accepting(q)

    def distance(self, s: int) -> int:
        """The fewest bytes from s to acceptance over the available bytes (-1: none)."""
        got = self._dist.get(s)
        if got is None:
            q, level, node = self.keys[s]
            if level == 0:
                got = self.char.distance(q)
            else:
                got, m = -1, self._masks[level][node]
                while m:
                    low = m & -m
                    r = self.char.step(q, low.bit_length() - 1)
                    d = self.char.distance(r) if r >= 0 else -1
                    if d >= 0 and (got < 0 or level + d < got):
                        got = level + d
                    m ^= low
            self._dist[s] = got
        return got

    def witness(self, s: int) -> bytes | None:
        """The bytes of one shortest text leading s to acceptance (:meth:`distance` bytes; None
        if none): inside a character, the completion of its class nearest to acceptance first."""
        q, level, node = self.keys[s]
        if level == 0:
            return self.char.witness(q)
        best, m = None, self._masks[level][node]
        while m:
            low = m & -m
            k = low.bit_length() - 1
            r = self.char.step(q, k)
            d = self.char.distance(r) if r >= 0 else -1
            if d >= 0 and (best is None or d < best[0]):
                best = (d, k, r)
            m ^= low
        if best is None:
            return None
        tail = self.char.witness(best[2])
        return None if tail is None else self.char.completion(level, node, best[1]) + tail

    def lower(self, s: int) -> int:
        """A lower bound on :meth:`distance` that never searches (0 inside a character)."""
        got = self._dist.get(s)
        if got is not None:
            return got
        q, level, _ = self.keys[s]
        return self.char.lower(q) if level == 0 else level

    def sizes(self) -> dict[str, int]:
        """Sizes for a constraint's ``stats``: the character states visited."""
        return {"char_states": len(self.char.states)}

    def row_key(self, s: int, horizon: int):
        """A key equal for byte states whose texts agree on every prefix of at most ``horizon``
        bytes (and so have the same token row without a length check), or None (no such key: the
        state is its own): for an expression without intersection, complement or boundary, the
        part of it ``horizon`` bytes can reach (:func:`_prefix_key`), with the state's place
        inside a character and its acceptance."""
        q, level, node = self.keys[s]
        e, _ = self.char.states[q]
        key = _prefix_key(e, horizon, {}) if e.simple else None
        return None if key is None else (key, level, node, self.accepting(s))

    def reach(self, s: int) -> int | None:
        """An upper bound on the bytes to acceptance of every state within the next token of s
        (``Expr.reach``, plus 3: a token may end inside a character), or None where the
        expression gives none (the token level reads it off the row's walk)."""
        e, _ = self.char.states[self.keys[s][0]]
        return e.reach + 3 if e.simple else None

    def explore(self, available: np.ndarray, limit: int, refused) -> np.ndarray:
        """Every byte state reachable over the ``available`` [256] bytes, each row filled: [S, 256]
        int64, -1 where a byte is dead or not available (inside a character only the continuation
        bytes 80..BF are asked: any other is dead there). Past ``limit`` states, raises
        ``refused(size)`` (an exception saying which bound)."""
        codes = np.flatnonzero(available)
        inner = codes[(codes >= 0x80) & (codes < 0xC0)]
        x = 0
        while x < self.size:
            mine = codes if self.keys[x][1] == 0 else inner
            unknown = mine[self.table[x, mine] == UNKNOWN]
            if len(unknown):
                self.fill(np.full(len(unknown), x, dtype=np.int64), unknown)
            x += 1
            if self.size > limit:
                raise refused(self.size)
        table = self.table[: self.size].astype(np.int64)
        table[:, ~available] = -1
        table[table == UNKNOWN] = -1
        return table

    def whole(self, available: np.ndarray, max_states: int, label: str) -> ByteDFA | None:
        """Every byte state reachable over the ``available`` [256] bytes, as a trim, minimal
        :class:`ByteDFA` (what the whole token automaton is lifted from); None if nothing is
        accepted. Past ``max_states`` reachable byte states, ConstraintError."""
        table = self.explore(
            available,
            max_states,
            lambda size: ConstraintTooLarge(
                f"constraint too large: {label} has more than {max_states} reachable byte-level states "
                f"(max_states={max_states}); use a masked search, which builds it on first visit",
                bound="states",
                limit=max_states,
                size=size,
            ),
        )
        n = len(table)
        acc = np.array([self.accepting(x) for x in range(n)], dtype=bool)
        dist = distances_to_accept(table, acc)
        live = dist >= 0
        if not live[0]:
            return None
        remap = np.append(np.where(live, np.cumsum(live) - 1, -1), -1)
        out = minimize(remap[table[live]], acc[live], 0, hint=dist[live])
        boundary = np.array([k[1] == 0 for k in self.keys], dtype=bool)[np.flatnonzero(live)[out.reps]]
        columns, which = distinct_columns(out.table)
        return ByteDFA(columns.astype(np.int32), out.accepting, 0, which.astype(np.int64), boundary)


def _by_first(values: np.ndarray) -> tuple[list[int], np.ndarray]:
    """The distinct ``values`` in the order of their first occurrence, and the index of each
    value among them [N] (a dict over at most 256 values: cheaper than numpy's sorts)."""
    index: dict[int, int] = {}
    which = [index.setdefault(v, len(index)) for v in values.tolist()]
    return list(index), np.array(which, dtype=np.int64)


def _prefix_key(e: Expr, budget: int, memo: dict):
    """A hashable key equal for two ``simple`` expressions whose texts agree on every prefix of
    at most ``budget`` bytes (and so have the same static row): counts of repetitions that
    ``budget`` bytes cannot exhaust are capped, and what lies past ``budget`` bytes is cut
    (iterative over the nesting: a long chain of optional parts is deep). None past
    :data:`KEY_NODES` nodes within reach (an alternation of thousands of words): such a state's
    row is rarely another's, and its key would cost more than the row it might share."""
    stack = [(e, budget)]
    while stack:
        if len(memo) > KEY_NODES:
            return None
        x, b = stack[-1]
        k = (x.id, b)
        if k in memo:
            stack.pop()
            continue
        op = x.op
        if b < 0:
            kids = ()
        elif op == CAT:
            kids = ((x.a, b), (x.b, b - x.a.minb))
        elif op == OR:
            kids = tuple((y, b) for y in x.a)
        elif op == REP:
            kids = ((x.a, b),)
        else:
            kids = ()
        missing = [(y, c) for y, c in kids if (y.id, c) not in memo]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        if b < 0:
            got = "..."
        elif op == SET:
            got = (SET, x.mask)
        elif op == CAT:
            got = (CAT, memo[(x.a.id, b)], memo[(x.b.id, b - x.a.minb)])
        elif op == OR:
            got = (OR, frozenset(memo[(y.id, b)] for y in x.a))
        elif op == REP and x.a.minb >= 1:
            cap = b // x.a.minb + 1
            lo, hi = min(x.lo, cap), cap if x.hi is None else min(x.hi, cap)
            got = (REP, memo[(x.a.id, b)], lo, hi, x.hi is None and x.lo < cap)
        elif op == REP:
            got = (REP, memo[(x.a.id, b)], x.lo, x.hi)
        else:
            got = (op,)
        memo[k] = got
    return memo[(e.id, budget)]
