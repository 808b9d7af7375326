"""From a character DFA to the DFA over UTF-8 bytes that accepts the same texts, encoded.

Tokens of byte-level vocabularies (GPT-2, Llama 3, Qwen) are byte strings, and a character may
be spelled across several tokens. Lifting over bytes makes that possible: the byte DFA accepts
a byte string iff it is valid UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF)
and its decoding is accepted by the character DFA.

Every code point has a class of the character DFA (:func:`code_point_classes`). UTF-8 spells a
code point of n bytes as a lead byte and n-1 continuation bytes, so the code points sharing a
prefix form a tree of depth at most 4 over bytes; identical subtrees are shared (a DAG with a
few hundred nodes: code points are grouped by 64 per last continuation byte, and 17,408 such
blocks have only 294 distinct patterns of ``\\w \\d \\s`` over the whole of Unicode). A byte-DFA
state is either a character state q or "q, then the bytes of an unfinished character", i.e.
(q, DAG node), and such pairs are numbered by their behaviour: the states their continuation
bytes lead to, level by level from the last byte of a character up. As the character DFA is
minimal, two character states differ in what they accept, and so do their encodings; two
unfinished-character states with the same behaviour are merged, and those with different
behaviours (over canonical states) differ. The result is therefore minimal once the unreachable
states are dropped: no partition refinement is needed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from decodekit.constraints.automata.graph import (
    distinct_columns,
    reverse_distances,
    small_unique,
    unique_edges,
    unique_rows,
)
from decodekit.constraints.syntax.unicode import CODE_POINTS, OCCURRING_BITS, predicate_bits

_BLOCKS = CODE_POINTS // 64  # code points grouped by all but their last 6 bits


@dataclass(frozen=True)
class ByteDFA:
    """A minimal DFA over byte classes.

    Attributes:
        table: [Q, B] int32 next state per byte class, -1 = dead.
        accepting: [Q] bool. initial: the start state (0).
        byte_class: [256] int64 class of each byte (bytes that act alike everywhere share one).
        boundary: [Q] bool, the state lies between characters (else inside one: only
            continuation bytes 80..BF lead on).
        distances: [Q] int64 the fewest bytes to acceptance (``graph.distances_to_accept`` of
            the table), where the construction found them on the way; else None.
    """

    table: np.ndarray
    accepting: np.ndarray
    initial: int
    byte_class: np.ndarray
    boundary: np.ndarray
    distances: np.ndarray | None = None


@functools.lru_cache(maxsize=1)
def predicate_bit_blocks() -> tuple[np.ndarray, np.ndarray]:
    """The distinct 64-code-point blocks of predicate bits: (rows [G, 64] uint8, block -> row
    [_BLOCKS])."""
    return unique_rows(predicate_bits().reshape(_BLOCKS, 64))


@functools.lru_cache(maxsize=1)
def utf8_layout() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The fixed shape of UTF-8, as block indices.

    Returns (two [256] block of each 2-byte lead byte or -1; three [16, 64] block after each
    3-byte lead E0..EF and continuation, -1 where invalid (overlong after E0, surrogates after
    ED); four [5, 64, 64] block after each 4-byte lead F0..F4 and two continuations, -1 where
    invalid (overlong after F0, past U+10FFFF after F4); lead [256] kind of each byte: 0 ASCII,
    2/3/4 a lead byte of that length, -1 never valid first)."""
    two = np.full(256, -1, dtype=np.int64)
    two[0xC2:0xE0] = np.arange(0xC2, 0xE0) & 0x1F
    s = np.arange(64)
    three = (np.arange(16)[:, None] << 6) | s[None, :]
    three[0, :0x20] = -1  # E0 80..9F: overlong
    three[0xD, 0x20:] = -1  # ED A0..BF: surrogates
    four = (np.arange(5)[:, None, None] << 12) | (s[None, :, None] << 6) | s[None, None, :]
    four[0, :0x10] = -1  # F0 80..8F: overlong
    four[4, 0x10:] = -1  # F4 90..BF: past U+10FFFF
    lead = np.full(256, -1, dtype=np.int64)
    lead[:0x80] = 0
    lead[0xC2:0xE0] = 2
    lead[0xE0:0xF0] = 3
    lead[0xF0:0xF5] = 4
    return two, three, four, lead


class CodePointClasses:
    """The class of every code point under one pattern, stored by 64-code-point blocks; the
    tables past ASCII are built on first use (an ASCII-only automaton never reads them).

    Attributes:
        ascii: [128] int64 the class of each ASCII code point.
        beyond_ascii: the classes a code point past U+007F may have (a superset).
        rows: [R, 64] int64 distinct class patterns of a block (built on first use).
        block: [_BLOCKS] int64 row of each block (``rows[block[cp >> 6], cp & 63]``).
    """

    def __init__(self, other: np.ndarray, explicit: dict[str, int]) -> None:
        self._other, self._explicit = other, explicit
        self._uniform = not (other[list(OCCURRING_BITS)] != other[0]).any()
        beyond_ascii = {int(k) for k in other[list(OCCURRING_BITS)]}
        beyond_ascii |= {k for c, k in explicit.items() if ord(c) >= 0x80}
        self.beyond_ascii = np.array(sorted(beyond_ascii), dtype=np.int64)
        if self._uniform:
            ascii_ = np.full(128, other[0], dtype=np.int64)
        else:  # the first 128 predicate bits only (the table is computed once per process)
            ascii_ = other[predicate_bits()[:128]].astype(np.int64)
        for c, k in explicit.items():
            if ord(c) < 0x80:
                ascii_[ord(c)] = k
        self.ascii = ascii_
        self._tables: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def rows(self) -> np.ndarray:
        return self._whole()[0]

    @property
    def block(self) -> np.ndarray:
        return self._whole()[1]

    def _whole(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, block) over all of Unicode: ``other[bits]`` by 64-code-point blocks, the named
        code points written over them."""
        if self._tables is None:
            other, explicit = self._other, self._explicit
            if not self._uniform:
                bit_rows, block = predicate_bit_blocks()
                rows = other[bit_rows]
            else:
                rows, block = np.full((1, 64), other[0], dtype=np.int64), np.zeros(_BLOCKS, dtype=np.int64)
            if explicit:
                cps = np.fromiter((ord(c) for c in explicit), dtype=np.int64, count=len(explicit))
                named = np.fromiter(explicit.values(), dtype=np.int64, count=len(explicit))
                blocks, where = np.unique(cps >> 6, return_inverse=True)
                own = rows[block[blocks]]  # [E, 64]: the blocks that hold named code points, rewritten
                own[where, cps & 63] = named
                block = block.copy()
                block[blocks] = len(rows) + np.arange(len(blocks))
                rows = np.concatenate([rows, own])
            rows, inverse = _unique_rows(rows, int(max(other.max(), max(explicit.values(), default=0))) + 1)
            self._tables = rows, inverse[block]
        return self._tables


def code_point_classes(other: np.ndarray, explicit: dict[str, int]) -> CodePointClasses:
    """Each code point's class: the one the pattern gives it if it names it, else
    ``other[bits]`` by its predicate bits (:class:`CharDFA`). When ``other`` is the same for all
    bits (no ``\\w \\d \\s \\b``), the Unicode tables are not even read; the tables past ASCII
    are built on first use."""
    return CodePointClasses(other, explicit)


def byte_dfa(
    table: np.ndarray,
    accepting: np.ndarray,
    classes: CodePointClasses,
    available: np.ndarray | None = None,
    minimal: bool = True,
) -> ByteDFA:
    """The minimal byte DFA of a minimal character DFA (``table`` [Q, C] over classes, -1 dead,
    every state live, initial state 0) whose code points have the classes ``classes``.

    ``available`` [256] bool: the bytes that can occur at all (a vocabulary's, with its
    separator); transitions on the others are dropped, and the states left without a way to
    acceptance with them (the result is then trim, not necessarily minimal). An ASCII-only
    vocabulary thus never pays for the UTF-8 layout."""
    q = table.shape[0]
    ascii_only = (table[:, classes.beyond_ascii] < 0).all()  # no character past U+007F leads on
    if ascii_only or (available is not None and not available[0x80:].any()):
        # one column per character class of an ASCII byte, and a dead one for the others: no
        # [q, 256] table (65,536 states x 256 bytes would be 134 MB, copied several times)
        small, byte_of, _ = _ascii_columns(table, classes, np.int64)
        return _trim(small, accepting, q, available, byte_of, minimal)
    two, three, four, lead = utf8_layout()
    block_node = classes.block  # level 1: after all but the last byte, a row of 64 classes
    # level 2: after a 3-byte lead, or a 4-byte lead and one continuation: 64 level-1 nodes
    sig2 = np.concatenate([level1_nodes(block_node, three), level1_nodes(block_node, four.reshape(-1, 64))])
    l2_sig, l2_of = _unique_rows(sig2, len(classes.rows))
    l2_three, l2_four = l2_of[:16], l2_of[16:].reshape(5, 64)
    l2_four = np.where((four >= 0).any(-1), l2_four, -1)
    l3_sig, l3_of = _unique_rows(l2_four, len(l2_sig))  # level 3: after a 4-byte lead, 64 level-2 nodes

    count = [q]
    made = []  # the unfinished-character states' rows over the continuation bytes 80..BF
    # per level, [nodes, q]: the state "q, then the bytes of an unfinished character at this
    # node" (-1 where q dies inside the character whatever follows)
    id1 = _states(table[:, classes.rows].transpose(1, 0, 2), count, made)
    id2 = _states(_gather_ids(id1, l2_sig), count, made)
    id3 = _states(_gather_ids(id2, l3_sig), count, made)

    # one column per kind of byte, not 256 (the whole-table passes of _trim then read a table
    # a third as wide): ASCII bytes by their class, continuation bytes by their distinct columns
    # over the unfinished-character states, lead bytes by the node they enter, and a dead one
    ascii_kinds, ascii_of = small_unique(classes.ascii, table.shape[1])
    cont_cols, cont_of = distinct_columns(np.concatenate(made))
    entered = []  # per lead byte length: [q, nodes] the state entered, and each lead byte's node
    for ids, nodes in (
        (id1, block_node[two[np.flatnonzero(lead == 2)]]),
        (id2, l2_three[np.flatnonzero(lead == 3) - 0xE0]),
        (id3, l3_of[np.flatnonzero(lead == 4) - 0xF0]),
    ):
        kinds, of = small_unique(nodes, len(ids))
        entered.append((ids[kinds].T, of))
    widths = [len(ascii_kinds), cont_cols.shape[1], *(e[0].shape[1] for e in entered)]
    offsets = np.cumsum([0, *widths])
    full = np.full((count[0], int(offsets[-1]) + 1), -1, dtype=np.int64)  # + the dead column
    full[:q, : offsets[1]] = table[:, ascii_kinds]
    full[q:, offsets[1] : offsets[2]] = cont_cols
    byte_of = np.full(256, offsets[-1], dtype=np.int64)
    byte_of[:0x80] = offsets[0] + ascii_of
    byte_of[0x80:0xC0] = offsets[1] + cont_of
    for k, (length, (cols, of)) in enumerate(zip((2, 3, 4), entered)):
        full[:q, offsets[2 + k] : offsets[3 + k]] = cols
        byte_of[np.flatnonzero(lead == length)] = offsets[2 + k] + of
    acc = np.zeros(len(full), dtype=bool)
    acc[:q] = accepting
    return _trim(full, acc, q, available, byte_of, minimal)


def ascii_byte_dfa(
    table: np.ndarray, accepting: np.ndarray, distances, classes: CodePointClasses, available: np.ndarray
) -> ByteDFA | None:
    """:func:`byte_dfa` read off directly, or None where that does not apply: when no character
    past U+007F leads on, every ASCII byte the automaton reads is ``available``, and the
    character DFA (``table`` [Q, C], all Q states reachable from 0 and live) comes with its
    ``distances`` [Q] to acceptance, the byte DFA is the character DFA with a column per class
    of an ASCII byte and a dead one (the other bytes): already trim, the same distances. Its
    states are not merged and its columns may act alike (what the lazy automaton never needs),
    so none of :func:`byte_dfa`'s whole-table passes is made."""
    if distances is None or len(classes.beyond_ascii) and (table[:, classes.beyond_ascii] >= 0).any():
        return None
    small, byte_class, read = _ascii_columns(table, classes, np.int32)
    if not available[:0x80][read].all():
        return None
    boundary = np.ones(table.shape[0], dtype=bool)
    return ByteDFA(small, np.asarray(accepting, dtype=bool), 0, byte_class, boundary, distances)


def _ascii_columns(table: np.ndarray, classes: CodePointClasses, dtype):
    """The character DFA ``table`` [Q, C] over ASCII bytes: ([Q, U + 1] one column per class of
    an ASCII byte and a dead last one, [256] each byte's column (bytes past 0x7F: the dead one),
    [128] bool whether some state reads the byte)."""
    uniq, inverse = small_unique(classes.ascii, table.shape[1])
    small = np.full((table.shape[0], len(uniq) + 1), -1, dtype=dtype)
    small[:, :-1] = table[:, uniq]
    byte_of = np.full(256, len(uniq), dtype=np.int64)
    byte_of[:0x80] = inverse.reshape(-1)
    read = (small[:, :-1] >= 0).any(axis=0)[byte_of[:0x80]]
    return small, byte_of, read


def _states(behaviour: np.ndarray, count: list[int], made: list[np.ndarray]) -> np.ndarray:
    """Number the distinct behaviours that are not all dead.

    ``behaviour`` [N, q, 64]: what each continuation byte leads to from (node n, character state
    q). New states get ids from ``count[0]`` on (advanced) and their rows are appended to
    ``made``. Returns [N, q] the state id of each pair, -1 if all dead."""
    n, q, width = behaviour.shape
    rows, inverse = _unique_rows(behaviour.reshape(n * q, width), count[0])
    alive = (rows >= 0).any(axis=1)
    number = np.where(alive, np.cumsum(alive) - 1 + count[0], -1)
    count[0] += int(alive.sum())
    made.append(rows[alive])
    return number[inverse].reshape(n, q)


def _unique_rows(rows: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~decodekit.constraints.automata.graph.unique_rows` of int64 ``rows`` whose values
    lie in [-1, bound), sorted in the narrowest integer type that holds them (rows are sorted as
    byte strings: 64 bytes sort several times faster than 512; the first level of
    ``.*\\bmarket\\b.*``, 2,619 rows: 0.9 -> 0.6 ms), returned as int64."""
    narrow = next(t for t in (np.int8, np.int16, np.int32, np.int64) if bound <= np.iinfo(t).max)
    if narrow is np.int64:
        return unique_rows(rows)
    uniq, inverse = unique_rows(rows.astype(narrow))
    return uniq.astype(np.int64), inverse


def level1_nodes(block_node: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """Level-1 node of each block index (-1 stays -1)."""
    return np.where(blocks >= 0, block_node[np.maximum(blocks, 0)], -1)


def _gather_ids(ids: np.ndarray, children: np.ndarray) -> np.ndarray:
    """[M, q, 64] the state of each child node per q (``ids`` [nodes, q]; ``children`` [M, 64],
    -1 -> dead)."""
    out = ids[np.maximum(children, 0)].transpose(0, 2, 1)  # [M, q, 64]
    return np.where(children[:, None, :] >= 0, out, -1)


def _trim(
    full: np.ndarray,
    accepting: np.ndarray,
    boundaries: int,
    available: np.ndarray | None,
    byte_of: np.ndarray | None = None,
    minimal: bool = True,
) -> ByteDFA:
    """Drop the transitions on bytes not ``available``, keep the states reachable from state 0
    (the initial one) that can still accept, and merge bytes that act alike in every state.
    States below ``boundaries`` lie between characters. ``full`` [Q, B]: a column per byte (B =
    256), or with ``byte_of`` [256] the column of each byte, whose last column is all dead.
    ``minimal=False`` (what the lazy automaton needs): only the states that cannot accept are
    dropped, unreachable ones and columns that act alike are kept (two passes fewer)."""
    if byte_of is None:
        byte_of = np.arange(256)
        if available is not None:
            full[:, ~available] = -1
    elif available is not None:
        byte_of = np.where(available, byte_of, full.shape[1] - 1)
        read = np.zeros(full.shape[1], dtype=bool)
        read[byte_of] = True
        full[:, ~read] = -1  # a column none of whose bytes can occur
    src, sym = np.nonzero(full >= 0)
    src, dst = unique_edges(src, full[src, sym], len(full))  # once for both searches
    dist = reverse_distances(src, dst, accepting, len(full))  # unchanged by dropping the others
    keep = dist >= 0
    if minimal:
        start = np.zeros(len(full), dtype=bool)
        start[0] = True
        keep &= reverse_distances(dst, src, start, len(full)) >= 0  # forward from state 0
    if not keep[0]:  # nothing is accepted with these bytes: a single dead start state
        return ByteDFA(
            np.full((1, 1), -1, dtype=np.int32), np.zeros(1, dtype=bool), 0,
            np.zeros(256, dtype=np.int64), np.ones(1, dtype=bool),
        )  # fmt: skip
    table = full if keep.all() else np.append(np.where(keep, np.cumsum(keep) - 1, -1), -1)[full[keep]]
    if minimal:
        table, column_class = distinct_columns(table)
    else:
        column_class = np.arange(table.shape[1])
    boundary = np.flatnonzero(keep) < boundaries
    byte_class = column_class[byte_of]
    table, acc = table.astype(np.int32), accepting[keep]
    return ByteDFA(table, acc, 0, byte_class.astype(np.int64), boundary, dist[keep])
