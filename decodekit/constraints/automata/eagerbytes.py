"""An eager byte DFA as one more producer of byte states: :class:`EagerBytes`.

The byte DFA of a regular expression (:class:`~decodekit.constraints.automata.utf8.ByteDFA`,
built whole before the first mask) read through the
:class:`~decodekit.constraints.automata.protocol.ByteAutomaton` interface, so that the one
first-visit token level (:class:`~decodekit.constraints.tokens.derived.DerivedTokenAutomaton`)
walks it as it walks the derivatives' byte states: the table is filled from the start (``fill``
does nothing), the fewest bytes to acceptance are the DFA's distance table, and the states are
finitely many.
"""

from __future__ import annotations

import numpy as np

from decodekit.constraints.automata.graph import distances_to_accept, unique_rows
from decodekit.constraints.automata.utf8 import ByteDFA

GROUP_AFTER = 16  # row keys asked before states with equal rows are grouped (compiling stays cheap)
MAX_ROUNDS = 64  # Moore rounds for grouping; a longer horizon: every state its own key


class EagerBytes:
    """The states of ``dfa`` (module docstring): state s is the DFA's state s, 0 the initial one
    (a DFA whose initial state is another is renumbered so that it is 0), -1 dead.

    Attributes:
        dfa: the byte DFA, its states renumbered so that the initial one is 0.
        table: [Q, 256] int32 ``table[s, b]`` the state after byte b (every entry known).
        distances: [Q] int64 the fewest bytes to acceptance (-1: none), read only.
        finite: True (one beam per state can run over it).
    """

    finite = True

    def __init__(self, dfa: ByteDFA) -> None:
        dfa = _initial_first(dfa)
        self.dfa = dfa
        self.table = np.ascontiguousarray(dfa.table[:, dfa.byte_class], dtype=np.int32)  # [Q, 256]
        dist = dfa.distances if dfa.distances is not None else distances_to_accept(dfa.table, dfa.accepting)
        self._dist = self.distances = np.array(dist, dtype=np.int64)  # [Q], -1: acceptance out of reach
        self.distances.flags.writeable = False
        self._accepting = np.asarray(dfa.accepting, dtype=bool)
        self._onward: np.ndarray | None = None  # [Q] a byte one step closer to acceptance (witness)
        self._groups: dict[int, np.ndarray | None] = {}  # horizon -> [Q] row keys (None: none)
        self._asked = 0
        self._representatives: dict[bytes, np.ndarray] = {}  # readable bytes -> [Q] representatives

    @property
    def size(self) -> int:
        return len(self.table)

    def step(self, s: int, b: int) -> int:
        return int(self.table[s, b])

    def fill(self, states: np.ndarray, codes: np.ndarray) -> None:
        """Nothing to compute: every entry is known."""

    def accepting(self, s: int) -> bool:
        return bool(self._accepting[s])

    def distance(self, s: int) -> int:
        return int(self._dist[s])

    def lower(self, s: int) -> int:
        return int(self._dist[s])

    def witness(self, s: int) -> bytes | None:
        """One shortest text from s to acceptance: at each state a byte to a state one closer."""
        if self._dist[s] < 0:
            return None
        if self._onward is None:
            closer = np.append(self._dist, -2)[self.table] == (self._dist - 1)[:, None]  # [Q, 256]
            self._onward = np.argmax(closer, axis=1)
        out = bytearray()
        while self._dist[s] > 0:
            b = int(self._onward[s])
            out.append(b)
            s = int(self.table[s, b])
        return bytes(out)

    def row_key(self, s: int, horizon: int) -> object | None:
        """After :data:`GROUP_AFTER` questions, the class of s among states that read every text
        of at most ``horizon`` bytes alike (dead, acceptance out of reach, accepting or not after
        each of them: ``horizon`` rounds of Moore refinement, computed once per horizon), so that
        ``a{10000}`` walks a row per class, not per state; before that, or past
        :data:`MAX_ROUNDS` rounds, None (s is its own key)."""
        self._asked += 1
        if self._asked <= GROUP_AFTER or horizon > MAX_ROUNDS:
            return None
        groups = self._groups.get(horizon)
        if groups is None:
            groups = self._groups[horizon] = _moore(self.dfa.table, self._dist, self._accepting, horizon)
        return int(groups[s])

    def representatives(self, readable: np.ndarray) -> np.ndarray:
        """[Q] each state's smallest equivalent state: the same acceptance after every text over
        the ``readable`` [256] bool bytes (the bytes the vocabulary's tokens hold; the others never
        matter), by Moore refinement from acceptance over their classes (computed once per
        ``readable``); past :data:`MAX_ROUNDS` rounds still splitting, every state its own (sound:
        only fewer beams are shared)."""
        key = readable.tobytes()
        got = self._representatives.get(key)
        if got is None:
            columns = np.unique(self.dfa.byte_class[readable])
            n = self.size
            succ = np.where(self.dfa.table[:, columns] < 0, n, self.dfa.table[:, columns])
            succ = np.append(succ, np.full((1, len(columns)), n, dtype=succ.dtype), axis=0)  # [Q + 1, C]
            label = np.append(self._accepting.astype(np.int64), 2)
            count, got = len(np.unique(label)), None
            for _ in range(MAX_ROUNDS):
                _, label = unique_rows(np.concatenate([label[:, None], label[succ]], axis=1))
                if int(label.max()) + 1 == count:
                    _, first, inverse = np.unique(label[:n], return_index=True, return_inverse=True)
                    got = first[inverse.reshape(-1)]
                    break
                count = int(label.max()) + 1
            if got is None:
                got = np.arange(n)
            got = self._representatives[key] = got
        return got

    def reach(self, s: int) -> int | None:
        """None: the token level reads the bound off the row's walk."""
        return None

    def sizes(self) -> dict[str, int]:
        return {"byte_states": self.size}


def _initial_first(dfa: ByteDFA) -> ByteDFA:
    """``dfa`` with its states renumbered so that the initial one is 0 (itself if it is)."""
    if dfa.initial == 0:
        return dfa
    n = len(dfa.table)
    order = np.concatenate([[dfa.initial], np.delete(np.arange(n), dfa.initial)])
    new_of = np.empty(n + 1, dtype=np.int64)
    new_of[order], new_of[n] = np.arange(n), -1
    table = new_of[dfa.table[order]].astype(dfa.table.dtype)
    dist = None if dfa.distances is None else dfa.distances[order]
    return ByteDFA(table, dfa.accepting[order], 0, dfa.byte_class, dfa.boundary[order], dist)


def _moore(table: np.ndarray, dist: np.ndarray, accepting: np.ndarray, rounds: int) -> np.ndarray:
    """[Q] class ids after ``rounds`` rounds of Moore refinement over the byte classes, from
    (acceptance out of reach / live and accepting / live and not), the dead state its own class."""
    n = len(table)
    label = np.where(dist < 0, 0, 1 + accepting.astype(np.int64))
    label = np.append(label, 3)  # the dead sink, read where table is -1
    succ = np.where(table < 0, n, table)
    succ = np.append(succ, np.full((1, table.shape[1]), n, dtype=succ.dtype), axis=0)  # [Q + 1, B]
    count = len(np.unique(label))
    for _ in range(rounds):
        _, label = unique_rows(np.concatenate([label[:, None], label[succ]], axis=1))
        if int(label.max()) + 1 == count:
            break
        count = int(label.max()) + 1
    return label[:n]
