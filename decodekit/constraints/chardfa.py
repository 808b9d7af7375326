"""Character-level DFA from an ``interegular`` AST: Thompson NFA, bounded subset construction.

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

import functools
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import regex
from interegular.patterns import _DOT, REFlags, _Repeated

from decodekit.constraints.graph import minimize, reverse_distances
from decodekit.constraints.pattern import (
    END,
    NOT_WORD_BOUNDARY,
    PREDICATES,
    START,
    WORD_BOUNDARY,
    node_kind,
)
from decodekit.errors import ConstraintError

BITS = {"w": 4, "d": 2, "s": 1}
_PRED_RE = {name: regex.compile(f"\\{name}") for name in BITS}
_POSSIBLE = (0, 4, 6, 1)  # (w, d, s) combinations that occur: none, \w only, \w and \d, \s
_SINGLE_LINE = REFlags.SINGLE_LINE.value  # flags as ints: enum operations are slow
_CASE_INSENSITIVE = REFlags.CASE_INSENSITIVE.value


@functools.lru_cache(maxsize=65536)
def _bits(c: str) -> int:
    return sum(bit for name, bit in BITS.items() if _PRED_RE[name].match(c))


def char_bits(chars) -> np.ndarray:
    """[n] int64 predicate bits of each character: 4 if ``\\w``, 2 if ``\\d``, 1 if ``\\s``
    (Python ``regex``'s Unicode definitions; memoised per character)."""
    return np.array([_bits(c) for c in chars], dtype=np.int64)


@dataclass(frozen=True)
class CharDFA:
    """A minimal DFA over character classes; only states that can still accept are kept.

    Attributes:
        table: [Q, C] int32 next state per class, -1 = dead.
        accepting: [Q] bool.
        initial: the start state (-1 if the pattern matches nothing).
        explicit: character -> class for the characters the pattern names.
        other: [8] class of any other character, by its predicate bits (:func:`char_bits`).
        examples: [C] one example character per class (for messages).
    """

    table: np.ndarray
    accepting: np.ndarray
    initial: int
    explicit: dict[str, int]
    other: np.ndarray
    examples: tuple[str, ...]

    def class_of(self, chars: list[str], bits: np.ndarray) -> np.ndarray:
        """Class ids [n] of the characters ``chars`` given their predicate bits [n]."""
        out = self.other[bits].astype(np.int64)
        for i, c in enumerate(chars):
            k = self.explicit.get(c)
            if k is not None:
                out[i] = k
        return out


class _NFA:
    """Thompson NFA: eps / \\b / \\B edges and character edges labelled with a set id."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.eps: list[list[int]] = []
        self.wb: list[list[int]] = []
        self.nwb: list[list[int]] = []
        self.char: list[list[tuple[int, int]]] = []
        self.sets: list[tuple[frozenset[str], tuple[tuple[str, bool], ...], bool]] = []
        self._set_ids: dict[tuple[frozenset[str], bool], int] = {}

    def new(self) -> int:
        n = len(self.eps)
        if n >= self.limit:
            raise ConstraintError(f"regex too large: its NFA exceeds {self.limit} states")
        self.eps.append([])
        self.wb.append([])
        self.nwb.append([])
        self.char.append([])
        return n

    def build(self, node, flags: int) -> tuple[int, int]:
        """Add ``node`` under ``flags`` (``REFlags`` as an int: enum operations are slow);
        returns its (entry, exit) states."""
        kind = node_kind(node)
        if kind == "pattern":
            flags = (flags | node.added_flags.value) & ~node.removed_flags.value
            s, e = self.new(), self.new()
            for option in node.options:
                a, b = self.build(option, flags)
                self.eps[s].append(a)
                self.eps[b].append(e)
            return s, e
        if kind == "concat":
            s = e = self.new()
            for part in node.parts:
                a, b = self.build(part, flags)
                self.eps[e].append(a)
                e = b
            return s, e
        if kind == "repeat":
            return self._repeat(node, flags)
        s, e = self.new(), self.new()
        if node is _DOT or type(node) is type(_DOT):
            newline = frozenset() if flags & _SINGLE_LINE else frozenset("\n")
            self.char[s].append((self._set(newline, True), e))
        elif kind == "chars":
            if node.chars == frozenset({START}) or node.chars == frozenset({END}):
                self.eps[s].append(e)  # anchors were checked to be trivial: no-ops
            elif node.chars == frozenset({WORD_BOUNDARY}):
                self.wb[s].append(e)
            elif node.chars == frozenset({NOT_WORD_BOUNDARY}):
                self.nwb[s].append(e)
            else:
                chars = node.chars
                if flags & _CASE_INSENSITIVE:
                    chars = frozenset(x for c in chars for x in (c, c.lower(), c.upper()) if len(x) == 1)
                self.char[s].append((self._set(chars, node.negated), e))
        else:  # the empty pattern
            self.eps[s].append(e)
        return s, e

    def _repeat(self, node: _Repeated, flags: int) -> tuple[int, int]:
        s = e = self.new()
        for _ in range(node.min):
            a, b = self.build(node.base, flags)
            self.eps[e].append(a)
            e = b
        if node.max is None:
            a, b = self.build(node.base, flags)
            self.eps[e].append(a)
            self.eps[b].append(e)
            return s, e
        end = self.new()
        for _ in range(node.max - node.min):
            a, b = self.build(node.base, flags)
            self.eps[e].append(a)
            self.eps[e].append(end)
            e = b
        self.eps[e].append(end)
        return s, end

    def _set(self, chars: frozenset[str], negated: bool) -> int:
        """Register a character set: explicit characters plus predicate markers (\\w ...). A set
        met again (a repeated group) keeps its id."""
        known = self._set_ids.get((chars, negated))
        if known is not None:
            return known
        self._set_ids[chars, negated] = len(self.sets)
        preds = tuple(sorted(PREDICATES[c] for c in chars if c in PREDICATES))
        self.sets.append((frozenset(c for c in chars if c not in PREDICATES), preds, negated))
        return len(self.sets) - 1


def _partition(sets, split_words: bool):
    """Character classes: characters named by the same sets and with the same (used) predicate
    bits share a class. Returns (explicit char -> class, other [8], member [G, C], word [C],
    examples)."""
    names = {p for _, preds, _ in sets for p, _ in preds} | ({"w"} if split_words else set())
    used = sum(BITS[p] for p in names)
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
    bits = char_bits(named) & used
    explicit = {c: key_id((tuple(sig[c]), b), c) for c, b in zip(named, bits.tolist())}
    spare = {0: " !#%&,;~\x01", 4: "xqzjkwé", 6: "0123456789", 1: " \t\n\r"}
    other = np.zeros(8, dtype=np.int64)
    for b in _POSSIBLE:
        example = next((c for c in spare[b] if c not in sig), spare[b][0])
        other[b] = key_id(((), b & used), example)
    member = np.zeros((len(sets), len(keys)), dtype=bool)
    class_bits = np.array([b for _, b in keys], dtype=np.int64)
    for (groups, _), k in keys.items():
        member[list(groups), k] = True
    for g, (_, preds, negated) in enumerate(sets):
        for p, neg in preds:
            member[g] |= ((class_bits & BITS[p]) > 0) != neg
        member[g] ^= negated
    word = (class_bits & BITS["w"]) > 0
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
    start, final = nfa.build(ast, 0)
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
