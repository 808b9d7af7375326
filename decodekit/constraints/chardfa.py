"""Character-level DFA from a parsed pattern: Thompson NFA, bounded subset construction.

Characters are grouped into *classes*: two characters share a class iff every character set of
the pattern treats them alike (and, when the pattern has ``\\b``/``\\B``, iff both are word
characters or both are not, by Python ``regex``'s Unicode ``\\w``). Characters the pattern never
names fall into one or two "other" classes.

Word boundaries are zero-width assertion edges of the NFA. The subset construction runs over
pairs (set of NFA states, class of the previous character: word or not; the start of the text
counts as non-word): reading a character of class ``n`` from ``(S, p)`` first follows the
assertion edges that hold between ``p`` and ``n`` (``\\b``: ``p != n``, ``\\B``: ``p == n``), then
the character. A state accepts if, with ``n = non-word`` (the end of the text), the closure
reaches the NFA's final state. The construction stops with ConstraintError past ``max_states``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from decodekit.constraints.graph import minimize, reverse_distances
from decodekit.constraints.pattern import (
    NOT_WORD_BOUNDARY,
    OCCURRING_BITS,
    PREDICATE_BITS,
    WORD_BOUNDARY,
    predicate_bits,
)
from decodekit.errors import ConstraintError


@dataclass(frozen=True)
class CharDFA:
    """A minimal DFA over character classes; only states that can still accept are kept.

    Attributes:
        table: [Q, C] int32 next state per class, -1 = dead.
        accepting: [Q] bool.
        initial: the start state (-1 if the pattern matches nothing).
        explicit: character -> class for the characters the pattern names.
        other: [8] class of any other character, by its predicate bits
            (:func:`~decodekit.constraints.pattern.predicate_bits`).
        examples: [C] one example character per class (for messages).
    """

    table: np.ndarray
    accepting: np.ndarray
    initial: int
    explicit: dict[str, int]
    other: np.ndarray
    examples: tuple[str, ...]


_NO_EDGES: list[int] = []  # shared by the NFA states without eps edges (never mutated)


class _Sparse(dict):
    """\\b / \\B edges: few states have any, the others share one empty list."""

    def __missing__(self, q: int) -> list[int]:
        return _NO_EDGES


class _Metered(list):
    """The NFA's character edges, metering the subset construction (whose cost the number of DFA
    states alone does not bound: each may hold many NFA states, and each row has one cell per
    character class). Each read of ``char[q]`` (once per DFA state holding q) costs ``1 +`` the
    classes q's edges accept (``weights``, set by :func:`_partition`); each DFA state's row costs
    its cells (:class:`_Final`). Past either budget it stops with ConstraintError."""

    def __init__(self, items, visits: int, cells: int) -> None:
        super().__init__(items)
        self.visits, self.cells = visits, cells
        self.visits_left, self.cells_left = visits, cells
        self.weights: list[int] | None = None
        self.row_cells = 1

    def __getitem__(self, q):
        self.visits_left -= 1 if self.weights is None else self.weights[q]
        if self.visits_left < 0:
            raise ConstraintError(
                f"regex too expensive: building its character automaton would visit more than "
                f"{self.visits:,} (NFA state, class) pairs (patterns like (?:a?){{3000}} make every DFA "
                "state hold many NFA states)"
            )
        return list.__getitem__(self, q)

    def row(self) -> None:
        self.cells_left -= self.row_cells
        if self.cells_left < 0:
            raise ConstraintError(
                f"regex too large: its character automaton would need more than {self.cells:,} cells "
                f"(DFA states x {self.row_cells:,} character classes; a long text of many distinct "
                "characters does this)"
            )


class _Final(int):
    """The NFA's final state. ``build_char_dfa`` asks ``final in closed`` once per DFA state: the
    hash charges that state's row to the meter."""

    meter: _Metered | None = None

    def __hash__(self) -> int:
        if self.meter is not None:
            self.meter.row()
        return int.__hash__(self)


class _SetList(list):
    """The NFA's character sets; carries the meter to :func:`_partition`."""

    meter: _Metered | None = None


SUBSET_VISITS = 5  # x the NFA limit (5,000,000 by default): about 3 s and 300 MB
SUBSET_CELLS = 20  # x the NFA limit (20,000,000 by default): 320 MB of rows while building
MEMBER_CELLS = 50_000_000  # sets x classes of the membership matrix (bools)
MEMBER_PAIRS = 5_000_000  # (set, class) pairs accepted, listed while building


class _NFA:
    """Thompson NFA of a parsed pattern (:class:`decodekit.constraints.pattern.Node`): eps / \\b /
    \\B edges and character edges labelled with a set id. Its size is known before it is built
    (``Node.size``); past ``limit`` states it is refused without allocating anything. Built
    iteratively (no recursion over the nesting)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.eps: list[list[int]] = []
        self.wb: dict[int, list[int]] = _Sparse()
        self.nwb: dict[int, list[int]] = _Sparse()
        self.char: list = []
        self.sets: list[tuple[frozenset[str], tuple[tuple[str, bool], ...], bool]] = _SetList()
        self._set_ids: dict[tuple, int] = {}

    def build(self, node) -> tuple[int, int]:
        """Add the pattern ``node``; returns its (entry, exit) states."""
        if node.size > self.limit:
            raise ConstraintError(
                f"regex too large: its NFA needs {node.size:,} states (limit {self.limit:,}; "
                "repetition counts multiply)"
            )
        base = len(self.eps)
        self.eps.extend([_NO_EDGES] * node.size)
        self.char.extend([()] * node.size)
        self.count = base
        entry, exit_ = self._instantiate(node)
        assert self.count == base + node.size, (self.count, base, node.size)
        meter = _Metered(self.char, SUBSET_VISITS * self.limit, SUBSET_CELLS * self.limit)
        self.char = self.sets.meter = meter
        final = _Final(exit_)
        final.meter = meter
        return entry, final

    def _new(self, k: int) -> int:
        q = self.count
        self.count += k
        return q

    def _link(self, a: int, b: int) -> None:
        edges = self.eps[a]
        if edges is _NO_EDGES:
            self.eps[a] = [b]
        else:
            edges.append(b)

    def _instantiate(self, root) -> tuple[int, int]:
        """A fresh copy of ``root``'s fragment: post-order over an explicit stack of frames
        [node, next child, entry, current exit, end]."""
        link = self._link
        ids: dict[int, int] = {}  # id(set node) -> set id (the nodes outlive this call)
        ret = (-1, -1)
        stack = [[root, 0, -1, -1, -1]]
        while stack:
            fr = stack[-1]
            node = fr[0]
            kind = node.kind
            if kind == "set":
                s = self._new(2)
                g = ids.get(id(node))
                if g is None:
                    g = ids[id(node)] = self._set(node.cset)
                self.char[s] = ((g, s + 1),)
                ret = (s, s + 1)
                stack.pop()
                continue
            if kind == "assert":
                s = self._new(2)
                if node.lo == WORD_BOUNDARY:
                    self.wb[s] = [s + 1]
                elif node.lo == NOT_WORD_BOUNDARY:
                    self.nwb[s] = [s + 1]
                else:  # anchors were checked to be trivial: no-ops
                    link(s, s + 1)
                ret = (s, s + 1)
                stack.pop()
                continue
            i = fr[1]
            items = node.items
            if kind == "seq":
                if i == 0 and not items:
                    s = self._new(1)
                    ret = (s, s)
                    stack.pop()
                    continue
                if i > 0:
                    a, b = ret
                    if i == 1:
                        fr[2] = a
                    else:
                        link(fr[3], a)
                    fr[3] = b
                if i < len(items):
                    fr[1] = i + 1
                    stack.append([items[i], 0, -1, -1, -1])
                    continue
                ret = (fr[2], fr[3])
            elif kind == "alt":
                if i == 0:
                    fr[2] = self._new(2)
                    fr[3] = fr[2] + 1
                else:
                    a, b = ret
                    link(fr[2], a)
                    link(b, fr[3])
                if i < len(items):
                    fr[1] = i + 1
                    stack.append([items[i], 0, -1, -1, -1])
                    continue
                ret = (fr[2], fr[3])
            else:  # rep: lo chained copies, then a loop (unbounded) or hi - lo optional copies
                lo, hi = node.lo, node.hi
                if i == 0:
                    fr[2] = fr[3] = self._new(1)
                    if hi is not None:
                        fr[4] = self._new(1)
                else:
                    a, b = ret
                    link(fr[3], a)
                    if i > lo and hi is None:
                        link(b, fr[3])
                    else:
                        if i > lo:
                            link(fr[3], fr[4])
                        fr[3] = b
                if i < (lo + 1 if hi is None else hi):
                    fr[1] = i + 1
                    stack.append([items[0], 0, -1, -1, -1])
                    continue
                if hi is None:
                    ret = (fr[2], fr[3])
                else:
                    link(fr[3], fr[4])
                    ret = (fr[2], fr[4])
            stack.pop()
        return ret

    def _set(self, cset) -> int:
        """Register a character set (a :class:`~decodekit.constraints.pattern.CharSet`:
        explicit characters, predicates, negated). A set met again keeps its id."""
        known = self._set_ids.get(cset)
        if known is not None:
            return known
        self._set_ids[cset] = len(self.sets)
        self.sets.append((cset.chars, cset.preds, cset.negated))
        return len(self.sets) - 1


def _partition(sets, split_words: bool):
    """Character classes: characters named by the same sets and with the same (used) predicate
    bits share a class. Returns (explicit char -> class, other [8], member [G, C], word [C],
    examples)."""
    names = {p for _, preds, _ in sets for p, _ in preds} | ({"w"} if split_words else set())
    used = sum(PREDICATE_BITS[p] for p in names)
    sig: dict[str, list[int]] = defaultdict(list)
    for g, (chars, _, _) in enumerate(sets):
        for c in chars:
            sig[c].append(g)
    keys: dict[tuple, int] = {}
    examples: list[str] = []

    def key_id(key: tuple, example: str) -> int:
        if key not in keys:
            keys[key] = len(keys)
            examples.append(example)
        return keys[key]

    named = list(sig)
    if used:  # the predicate bits of the named characters (the table costs 0.1 s, once)
        bits = predicate_bits()[np.fromiter(map(ord, named), dtype=np.int64, count=len(named))] & used
    else:
        bits = np.zeros(len(named), dtype=np.int64)
    explicit = {c: key_id((tuple(sig[c]), b), c) for c, b in zip(named, bits.tolist())}
    spare = {0: " !#%&,;~\x01", 4: "xqzjkwé", 6: "0123456789", 1: " \t\n\r"}
    other = np.zeros(8, dtype=np.int64)
    for b in OCCURRING_BITS:
        example = next((c for c in spare[b] if c not in sig), spare[b][0])
        other[b] = key_id(((), b & used), example)
    if len(sets) * len(keys) > MEMBER_CELLS:
        raise ConstraintError(
            f"regex too large: {len(sets):,} distinct character sets over {len(keys):,} character classes "
            f"(at most {MEMBER_CELLS:,} pairs; a long text of many distinct characters does this)"
        )
    member = np.zeros((len(sets), len(keys)), dtype=bool)
    class_bits = np.array([b for _, b in keys], dtype=np.int64)
    for (groups, _), k in keys.items():
        member[list(groups), k] = True
    for g, (_, preds, negated) in enumerate(sets):
        for p, neg in preds:
            member[g] |= ((class_bits & PREDICATE_BITS[p]) > 0) != neg
        member[g] ^= negated
    word = (class_bits & PREDICATE_BITS["w"]) > 0
    accepted = member.sum(axis=1)
    if accepted.sum() > MEMBER_PAIRS:
        raise ConstraintError(
            f"regex too large: its {len(sets):,} character sets accept {int(accepted.sum()):,} (set, class) "
            f"pairs (at most {MEMBER_PAIRS:,}): fewer distinct negated classes or distinct characters"
        )
    meter = getattr(sets, "meter", None)
    if meter is not None:  # the subset construction's cost per NFA state, and per DFA row
        counts = accepted.tolist()
        meter.weights = [1 + sum(counts[g] for g, _ in edges) for edges in list.__iter__(meter)]
        meter.row_cells = len(keys)
    return explicit, other, member, word, tuple(examples)


def _closure(nfa: _NFA, states, wb: bool, nwb: bool) -> frozenset[int]:
    """States reachable through eps edges (and \\b / \\B edges where they hold)."""
    seen = set(states)
    stack = list(states)
    while stack:
        q = stack.pop()
        nxt = nfa.eps[q] + (nfa.wb[q] if wb else []) + (nfa.nwb[q] if nwb else [])
        for r in nxt:
            if r not in seen:
                seen.add(r)
                stack.append(r)
    return frozenset(seen)


def build_char_dfa(ast, has_boundaries: bool, max_states: int) -> CharDFA:
    """Thompson NFA + subset construction (bounded by ``max_states``) + pruning + minimisation."""
    nfa = _NFA(limit=max(10 * max_states, 100_000))
    start, final = nfa.build(ast)
    explicit, other, member, word, examples = _partition(nfa.sets, has_boundaries)
    num_classes = member.shape[1]
    # per side (next character non-word / word; one side without \b): the classes each set accepts
    sides = (False, True) if has_boundaries else (False,)
    word_of = word.tolist() if has_boundaries else [False] * num_classes
    accepts = [
        [[c for c in np.flatnonzero(m).tolist() if word_of[c] == side] for m in member] for side in sides
    ]
    first = (_closure(nfa, [start], False, False), False)
    index = {first: 0}
    order = [first]
    rows: list[list[int]] = []
    accepting: list[bool] = []
    plain: dict[frozenset[int], frozenset[int]] = {}
    for states, prev in order:  # `order` grows while we iterate; small Python sets beat numpy here
        row = [-1] * num_classes
        for nxt_word in sides:
            closed = _closure(nfa, states, prev != nxt_word, prev == nxt_word) if has_boundaries else states
            if not nxt_word:
                accepting.append(final in closed)
            targets: dict[int, set[int]] = {}
            for q in closed:
                for g, d in nfa.char[q]:
                    for c in accepts[nxt_word][g]:
                        targets.setdefault(c, set()).add(d)
            for c in sorted(targets):
                target = frozenset(targets[c])
                if target not in plain:
                    plain[target] = _closure(nfa, target, False, False)
                key = (plain[target], bool(nxt_word) and has_boundaries)
                if key not in index:
                    if len(index) >= max_states:
                        raise ConstraintError(
                            f"regex too large: its character automaton exceeds max_states={max_states} "
                            "states (patterns like (a|b)*a(a|b){20} blow up exponentially)"
                        )
                    index[key] = len(index)
                    order.append(key)
                row[c] = index[key]
        rows.append(row)
    table = np.array(rows, dtype=np.int64).reshape(len(rows), num_classes)
    acc = np.array(accepting, dtype=bool)
    # keep only states from which acceptance is reachable, then merge equivalent states
    src, cls = np.nonzero(table >= 0)
    dist = reverse_distances(src, table[src, cls], acc, len(acc))
    live = dist >= 0
    remap = np.where(live, np.cumsum(live) - 1, -1)
    table = np.where(table >= 0, remap[np.maximum(table, 0)], -1)[live]
    acc = acc[live]
    initial = int(remap[0])
    if initial >= 0:
        table, acc, _ = minimize(table, acc, initial, hint=dist[live])
        initial = 0
    return CharDFA(table.astype(np.int32), acc, initial, explicit, other, examples)
