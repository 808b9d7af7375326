"""Character-level DFA from a parsed pattern: Thompson NFA, bounded subset construction.

Characters share a *class* iff every character set of the pattern treats them alike (and, with
``\\b``/``\\B``, iff both are word characters or both are not: Python ``regex``'s Unicode ``\\w``);
the characters the pattern never names fall into a few "other" classes, by predicate bits.

Word boundaries are zero-width assertion edges. The subset construction runs over pairs (NFA
states, previous character word or not; the text starts non-word): reading class ``n`` from
``(S, p)`` follows the assertion edges that hold (``\\b``: ``p != n``, ``\\B``: ``p == n``), then the
character. A state accepts if with ``n = non-word`` (the end) the closure reaches the final state.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from decodekit.constraints.automata.graph import distances_to_accept, levels_back, minimize
from decodekit.constraints.syntax.nodes import Anchor, Kind, Node
from decodekit.constraints.syntax.unicode import OCCURRING_BITS, PREDICATE_BITS, predicate_bits
from decodekit.errors import ConstraintTooLarge


@dataclass(frozen=True)
class CharDFA:
    """A minimal DFA over character classes; only states that can still accept are kept.

    Attributes:
        table: [Q, C] int32 next state per class, -1 = dead.
        accepting: [Q] bool.
        initial: the start state (-1 if the pattern matches nothing).
        explicit: character -> class for the characters the pattern names.
        other: [8] class of any other character, by its predicate bits
            (:func:`~decodekit.constraints.syntax.unicode.predicate_bits`).
        examples: [C] one example character per class (for messages).
        distances: [Q] int64 the fewest characters to acceptance, where the construction has
            them (not minimised: the states as built), else None.
    """

    table: np.ndarray
    accepting: np.ndarray
    initial: int
    explicit: dict[str, int]
    other: np.ndarray
    examples: tuple[str, ...]
    distances: np.ndarray | None = None


_LEAVES = (Kind.SET, Kind.ASSERT, Kind.SEQ)
_NO_EDGES: list[int] = []  # shared by the NFA states without eps edges (never mutated)
SUBSET_VISITS = 5  # x the NFA limit (5,000,000 by default): about 3 s and 300 MB
SUBSET_CELLS = 20  # x the NFA limit (20,000,000 by default): 320 MB of rows while building
MEMBER_CELLS = 50_000_000  # sets x classes of the membership matrix (bools)
MEMBER_PAIRS = 5_000_000  # (set, class) pairs accepted, listed while building
SMALL_ROWS = 8192  # DFA cells up to which distances are found in plain Python (numpy's calls cost more)


class _NFA:
    """Thompson NFA of a parsed pattern (:class:`~decodekit.constraints.syntax.nodes.Node`): eps / \\b /
    \\B edges and character edges ``char[q] = ((set id, target), ...)``. Its size is known before
    it is built (``Node.size``); past ``limit`` states it is refused without allocating anything."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.eps: list[list[int]] = []
        self.wb: dict[int, list[int]] = {}
        self.nwb: dict[int, list[int]] = {}
        self.char: list[tuple[tuple[int, int], ...]] = []
        self.sets: dict = {}  # CharSet -> set id (its position)
        self._edges: dict[tuple[bool, bool], list[list[int]]] = {}

    def build(self, node: Node) -> tuple[int, int]:
        """Add the pattern ``node``; returns its (entry, exit) states. Iterative (no recursion
        over the nesting): each node is a generator that yields its children and receives their
        (entry, exit)."""
        if node.size > self.limit:
            raise ConstraintTooLarge(
                f"regex too large: its NFA needs {node.size:,} states (limit {self.limit:,}; "
                "repetition counts multiply)",
                bound="nfa_states",
                limit=self.limit,
                size=node.size,
            )
        base = self.count = len(self.eps)
        self.eps.extend([_NO_EDGES] * node.size)
        self.char.extend([()] * node.size)
        stack, ret = [self._fragment(node)], None
        while stack:
            try:
                child = stack[-1].send(ret)
            except StopIteration as done:
                stack.pop()
                ret = done.value
            else:
                stack.append(self._fragment(child))
                ret = None
        if self.count != base + node.size:  # Node's size formula and this construction disagree
            raise RuntimeError(f"NFA of {node!r}: {self.count - base} states made, {node.size} expected")
        return ret

    def edges(self, wb: bool, nwb: bool) -> list[list[int]]:
        """Each state's eps edges with its \\b edges (``wb``) and \\B edges (``nwb``), made once
        per combination (after :meth:`build`)."""
        key = (wb, nwb)
        if key not in self._edges:
            self._edges[key] = [
                e + (self.wb.get(q, []) if wb else []) + (self.nwb.get(q, []) if nwb else [])
                for q, e in enumerate(self.eps)
            ]
        return self._edges[key]

    def _new(self, k: int) -> int:
        q = self.count
        self.count += k
        return q

    def _link(self, a: int, b: int) -> None:
        if self.eps[a] is _NO_EDGES:
            self.eps[a] = [b]
        else:
            self.eps[a].append(b)

    def _fragment(self, node):
        """A fresh copy of ``node``'s fragment (a generator: see :meth:`build`)."""
        link, kind, items = self._link, node.kind, node.items
        if kind in _LEAVES and not items:  # the sizes of Node.leaf and Node.seq
            s = self._new(1 if kind is Kind.SEQ else 2)
            if kind is Kind.SEQ:
                return s, s
            if kind is Kind.SET:
                self.char[s] = ((self.sets.setdefault(node.cset, len(self.sets)), s + 1),)
            elif node.anchor in (Anchor.WORD_BOUNDARY, Anchor.NOT_WORD_BOUNDARY):
                (self.wb if node.anchor is Anchor.WORD_BOUNDARY else self.nwb)[s] = [s + 1]
            else:  # anchors were checked to be trivial: no-ops
                link(s, s + 1)
            return s, s + 1
        if kind is Kind.SEQ:
            entry, exit_ = yield items[0]
            for item in items[1:]:
                a, b = yield item
                link(exit_, a)
                exit_ = b
            return entry, exit_
        if kind is Kind.ALT:  # Node.alt's size
            s = self._new(2)
            for item in items:
                a, b = yield item
                link(s, a)
                link(b, s + 1)
            return s, s + 1
        # rep (Node.rep_size): lo chained copies, then a loop (unbounded) or hi - lo optional copies
        lo, hi = node.lo, node.hi
        entry = exit_ = self._new(1)
        end = self._new(1) if hi is not None else -1
        for i in range(lo + 1 if hi is None else hi):
            a, b = yield items[0]
            link(exit_, a)
            if i >= lo and hi is None:
                link(b, exit_)
                return entry, exit_
            if i >= lo:
                link(exit_, end)
            exit_ = b
        if hi is None:
            return entry, exit_
        link(exit_, end)
        return entry, end


def partition_characters(sets, split_words: bool):
    """Character classes: characters named by the same sets and with the same (used) predicate
    bits share a class. Returns (explicit char -> class, other [8], member [G, C] bool, word [C],
    examples)."""
    names = {p for _, preds, _ in sets for p, _ in preds} | ({"w"} if split_words else set())
    used = sum(PREDICATE_BITS[p] for p in names)
    sig: dict[str, list[int]] = defaultdict(list)
    for g, (chars, _, _) in enumerate(sets):
        for c in chars:
            sig[c].append(g)
    keys: dict[tuple, int] = {}  # (sets naming it, predicate bits) -> class
    named = list(sig)
    bits = np.zeros(len(named), dtype=np.int64)
    if used:  # the predicate bits of the named characters (the table costs 0.1 s, once)
        bits = predicate_bits()[np.fromiter(map(ord, named), dtype=np.int64, count=len(named))] & used
    explicit = {c: keys.setdefault((tuple(sig[c]), b), len(keys)) for c, b in zip(named, bits.tolist())}
    examples = dict(zip(reversed(explicit.values()), reversed(explicit)))  # class -> its first character
    spare = {0: " !#%&,;~\x01", 4: "xqzjkwé", 6: "0123456789", 1: " \t\n\r"}
    other = np.zeros(8, dtype=np.int64)
    for b in OCCURRING_BITS:
        k = other[b] = keys.setdefault(((), b & used), len(keys))
        examples.setdefault(k, next((c for c in spare[b] if c not in sig), spare[b][0]))
    if len(sets) * len(keys) > MEMBER_CELLS:
        raise ConstraintTooLarge(
            f"regex too large: {len(sets):,} distinct character sets over {len(keys):,} character classes "
            f"(at most {MEMBER_CELLS:,} pairs; a long text of many distinct characters does this)",
            bound="class_cells",
            limit=MEMBER_CELLS,
            size=len(sets) * len(keys),
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
        raise ConstraintTooLarge(
            f"regex too large: its {len(sets):,} character sets accept {int(accepted.sum()):,} (set, class) "
            f"pairs (at most {MEMBER_PAIRS:,}): fewer distinct negated classes or distinct characters",
            bound="class_pairs",
            limit=MEMBER_PAIRS,
            size=int(accepted.sum()),
        )
    return explicit, other, member, word, tuple(examples[k] for k in range(len(keys)))


def _closure(nfa: _NFA, states, wb: bool, nwb: bool) -> frozenset[int]:
    """States reachable through eps edges (and \\b / \\B edges where they hold)."""
    seen = set(states)
    stack = list(states)
    eps = nfa.eps
    if (wb and nfa.wb) or (nwb and nfa.nwb):
        eps = nfa.edges(bool(wb and nfa.wb), bool(nwb and nfa.nwb))
    while stack:
        for r in eps[stack.pop()]:
            if r not in seen:
                seen.add(r)
                stack.append(r)
    return frozenset(seen)


def build_char_dfa(ast, has_boundaries: bool, max_states: int, minimal: bool = True) -> CharDFA:
    """Thompson NFA + subset construction (bounded by ``max_states``) + pruning + minimisation
    (``minimal=False`` skips it: for the lazy automaton, which never merges states anyway;
    :func:`minimized` can still be applied).

    The subset construction's cost is metered too (the number of DFA states alone does not bound
    it): each DFA state costs, per NFA state it holds, ``1 +`` the classes of that state's
    character edges, and its row one cell per class; past either budget, ConstraintError."""
    nfa = _NFA(limit=max(10 * max_states, 100_000))
    start, final = nfa.build(ast)
    explicit, other, member, word, examples = partition_characters(nfa.sets, has_boundaries)
    num_classes = member.shape[1]
    accepted = member.sum(axis=1).tolist()
    weight = [  # most NFA states have no character edge or one
        1 + accepted[edges[0][0]] if len(edges) == 1 else 1 + sum(accepted[g] for g, _ in edges)
        for edges in nfa.char
    ]
    visits = 0
    # per side (next character non-word / word; one side without \b): the classes each set accepts
    sides = (False, True) if has_boundaries else (False,)
    word_of = word.tolist() if has_boundaries else [False] * num_classes
    accepts = [[[] for _ in range(len(member))] for _ in sides]
    for g, c in zip(*(x.tolist() for x in np.nonzero(member))):  # one pass, set by set
        accepts[word_of[c] if has_boundaries else 0][g].append(c)
    order = [(_closure(nfa, [start], False, False), False)]
    index = {order[0]: 0}
    rows: list[list[int]] = []
    accepting: list[bool] = []
    plain: dict[frozenset[int], frozenset[int]] = {}
    for states, prev in order:  # `order` grows while we iterate; small Python sets beat numpy here
        if (len(rows) + 1) * num_classes > SUBSET_CELLS * nfa.limit:
            raise ConstraintTooLarge(
                f"regex too large: its character automaton would need more than {SUBSET_CELLS * nfa.limit:,} "
                f"cells (DFA states x {num_classes:,} character classes; a long text of many distinct "
                "characters does this)",
                bound="cells",
                limit=SUBSET_CELLS * nfa.limit,
            )
        row = [-1] * num_classes
        for nxt_word in sides:
            closed = _closure(nfa, states, prev != nxt_word, prev == nxt_word) if has_boundaries else states
            visits += sum(map(weight.__getitem__, closed))
            if visits > SUBSET_VISITS * nfa.limit:
                raise ConstraintTooLarge(
                    f"regex too expensive: building its character automaton would visit more than "
                    f"{SUBSET_VISITS * nfa.limit:,} (NFA state, class) pairs (patterns like (?:a?){{3000}} "
                    "make every DFA state hold many NFA states)",
                    bound="steps",
                    limit=SUBSET_VISITS * nfa.limit,
                    size=visits,
                )
            if not nxt_word:
                accepting.append(final in closed)
            targets: dict[int, set[int]] = {}
            side, char = accepts[nxt_word], nfa.char
            for q in closed:
                for g, d in char[q]:
                    for c in side[g]:
                        if c in targets:
                            targets[c].add(d)
                        else:
                            targets[c] = {d}
            for c in sorted(targets):
                target = frozenset(targets[c])
                if target not in plain:
                    plain[target] = _closure(nfa, target, False, False)
                key = (plain[target], bool(nxt_word) and has_boundaries)
                if key not in index:
                    if len(index) >= max_states:
                        raise ConstraintTooLarge(
                            f"regex too large: its character automaton exceeds max_states={max_states} "
                            "states (patterns like (a|b)*a(a|b){20} blow up exponentially)",
                            bound="states",
                            limit=max_states,
                        )
                    index[key] = len(index)
                    order.append(key)
                row[c] = index[key]
        rows.append(row)
    table = np.array(rows, dtype=np.int64).reshape(len(rows), num_classes)
    acc = np.array(accepting, dtype=bool)
    # keep the states that can still accept, merge equivalent ones
    dist = (
        _distances(rows, accepting)
        if len(rows) * num_classes <= SMALL_ROWS
        else distances_to_accept(table, acc)
    )
    live = dist >= 0
    if not live.all():
        table, acc = np.append(np.where(live, np.cumsum(live) - 1, -1), -1)[table[live]], acc[live]
        dist = dist[live]
    if live[0] and minimal:  # else nothing is live (every state is reachable from 0)
        table, acc, _ = minimize(table, acc, 0, hint=dist)
        dist = None
    return CharDFA(table.astype(np.int32), acc, 0 if live[0] else -1, explicit, other, examples, dist)


def _distances(rows: list[list[int]], accepting: list[bool]) -> np.ndarray:
    """:func:`~decodekit.constraints.automata.graph.distances_to_accept` of a small table given as
    Python lists (breadth-first over the reversed edges, no numpy call but the result)."""
    preds: list[set[int]] = [set() for _ in rows]
    for q, row in enumerate(rows):
        for r in row:
            if r >= 0:
                preds[r].add(q)
    return levels_back(preds, [q for q, a in enumerate(accepting) if a])


def minimized(dfa: CharDFA) -> CharDFA:
    """``dfa`` (built with ``minimal=False``) with its equivalent states merged."""
    if dfa.initial < 0:
        return dfa
    dist = distances_to_accept(dfa.table, dfa.accepting)
    table, acc, _ = minimize(dfa.table.astype(np.int64), dfa.accepting, 0, hint=dist)
    return dataclasses.replace(dfa, table=table.astype(np.int32), accepting=acc, distances=None)
