"""The character level of a compiled :class:`~decodekit.constraints.automata.pattern.Pattern`:
states numbered on first visit (an expression of the
:class:`~decodekit.constraints.automata.algebra.Algebra` and the previous character's
word-ness), their transitions by character class, acceptance, and how to spell a class in UTF-8
bytes; distances and shortest texts are :class:`~decodekit.constraints.automata.shortest.ShortestTexts`'."""

from __future__ import annotations

import numpy as np

from decodekit.constraints.automata.algebra import (
    AND,
    CAT,
    EMPTY,
    NOT,
    OR,
    REP,
    SET,
    Algebra,
    Expr,
    post_order,
)
from decodekit.constraints.automata.chardfa import partition_characters
from decodekit.constraints.automata.classdag import bit_or, bits_of, utf8_tables
from decodekit.constraints.automata.conversion import collect_sets, combine, convert
from decodekit.constraints.automata.pattern import Pattern
from decodekit.constraints.automata.shortest import ShortestTexts
from decodekit.constraints.automata.utf8 import code_point_classes
from decodekit.constraints.syntax.parser import parsed as parse_kept
from decodekit.errors import ConstraintError, ConstraintTooLarge

MAX_STATES = 2_000_000  # character states one compiled expression may number
BLOCK_STEPS = 4  # classes to step from one state past which CharLevel.steps steps by derivative class


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
                parsed[r] = parse_kept(r)
        boundaries = any(b for _, b in parsed.values())
        sets: dict = {}
        for ast, _ in parsed.values():
            collect_sets(ast, sets)
        explicit, other, member, word, examples = partition_characters(list(sets), boundaries)
        self.examples = examples
        self.num_classes = member.shape[1]
        self.word = word.tolist()
        classes = code_point_classes(other, explicit)
        self.utf8 = utf8_tables(classes, available, other, explicit)
        avail_classes = self._available_classes()
        class_bytes = [1 << 20] * self.num_classes
        for k, n in avail_classes.items():
            class_bytes[k] = n
        self.alg = alg = Algebra(class_bytes, self.word)
        mask_all = bit_or(1 << k for k in avail_classes)
        packed = np.packbits(member, axis=1, bitorder="little")  # [G, ceil(C / 8)]: row g's classes as bits
        set_mask = [int.from_bytes(row.tobytes(), "little") & mask_all for row in packed]
        set_of = {cs: i for i, cs in enumerate(sets)}
        converted = {r: convert(ast, alg, set_of, set_mask) for r, (ast, _) in parsed.items()}
        self.converted = converted  # regex -> its expression (a grammar's terminals start there)
        self.root = combine(pattern, alg, converted)
        self.boundaries = boundaries
        self.states: list[tuple[Expr, bool]] = []
        self.index: dict[tuple[Expr, bool], int] = {}
        self.trans: list[dict[int, int]] = []
        self._blocks: dict[Expr, tuple[int, ...]] = {}
        self._all = (1 << self.num_classes) - 1
        self._word_split = bits_of(np.flatnonzero(word)) if boundaries else 0
        self._spelled: dict[int, bytes] = {}
        self.texts = ShortestTexts(self)
        self.initial = self.state(self.root, False)

    def expression(self, p: Pattern) -> Expr:
        """The expression of a Pattern made of this level's regexes (a part of the pattern it
        was built for: a grammar's terminal), as the pattern's own is made."""
        return combine(p, self.alg, self.converted)

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
            block_of = {}  # class -> its block (the blocks are disjoint)
            for block in self.blocks(self.states[q][0]):
                m = block
                while m:
                    low = m & -m
                    block_of[low.bit_length() - 1] = block
                    m ^= low
            made = {}
            for k in todo:
                got = made.get(block_of[k])
                if got is None:
                    got = made[block_of[k]] = self.step(q, k)
                row[k] = got
            return [row[k] for k in ks]
        step = self.step
        return [step(q, k) for k in ks]

    def accepting(self, q: int) -> bool:
        e, p = self.states[q]
        return bool(e.null >> (2 * p) & 1)

    def classes(self) -> range:
        return range(self.num_classes)

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
        class k (which must lie under it: the ``masks`` of
        :func:`~decodekit.constraints.automata.classdag.utf8_tables`)."""
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

        return post_order(e, self._blocks, kids, value)

    def distance(self, q: int) -> int:
        """The fewest bytes of a text leading q to acceptance, -1 if none
        (:meth:`ShortestTexts.distance`)."""
        return self.texts.distance(q)

    def lower(self, q: int) -> int:
        """A lower bound on :meth:`distance` that never searches."""
        return self.texts.lower(q)

    def live(self, q: int) -> bool:
        return self.texts.live(q)

    def witness(self, q: int) -> bytes | None:
        """One shortest text leading q to acceptance (:meth:`ShortestTexts.witness`)."""
        return self.texts.witness(q)

    def min_bytes(self, e: Expr) -> int:
        """The fewest bytes of a text of ``e`` (:meth:`ShortestTexts.min_bytes`)."""
        return self.texts.min_bytes(e)

    def shortest_text(self, e: Expr) -> bytes:
        """One shortest text of ``e`` (:meth:`ShortestTexts.shortest_text`)."""
        return self.texts.shortest_text(e)


def _meet(p: tuple[int, ...], q: tuple[int, ...]) -> tuple[int, ...]:
    """The common refinement of two partitions of the classes (tuples of disjoint bit masks)."""
    if len(p) == 1:
        return q
    if len(q) == 1:
        return p
    return tuple(x & y for x in p for y in q if x & y)
