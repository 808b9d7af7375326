"""The code-point class DAG of :mod:`~decodekit.constraints.automata.utf8` as lookups for the
character level (:class:`~decodekit.constraints.automata.charlevel.CharLevel`): which classes lie
under each lead byte and DAG node, with the partitions of ASCII-only patterns shared per process;
and the bit-mask helpers over classes."""

from __future__ import annotations

import functools

import numpy as np

from decodekit.constraints.automata.graph import HASH_MIX, first_and_inverse, unique_rows
from decodekit.constraints.automata.utf8 import level1_nodes, predicate_bit_blocks, utf8_layout
from decodekit.constraints.syntax.unicode import OCCURRING_BITS


@functools.lru_cache(maxsize=16)
def _shared_dag(groups: tuple[int, ...]) -> tuple:
    """The UTF-8 DAG of a pattern whose named characters are all ASCII, given only which of the
    occurring predicate-bit combinations (``OCCURRING_BITS``) share a class: ``groups`` numbers
    them by first occurrence (at most 15 such partitions, each made once per process; the classes
    themselves are applied by :func:`utf8_tables`). Returns (rows [R, 64] group of each
    continuation, then :func:`_upper_levels`)."""
    bit_rows, block = predicate_bit_blocks()
    of = np.zeros(8, dtype=np.int64)
    of[list(OCCURRING_BITS)] = groups
    rows, row_of = _unique_rows(of[bit_rows])
    return rows, *_levels(row_of[block])


def _levels(block: np.ndarray) -> tuple:
    """:func:`_upper_levels` of the DAG whose level-1 node of each 64-code-point block is
    ``block`` [_BLOCKS]."""
    two, three, four, _ = utf8_layout()
    sig2 = np.concatenate([level1_nodes(block, three), level1_nodes(block, four.reshape(-1, 64))])
    l2, l2_of = _unique_rows(sig2)
    return _upper_levels(l2, l2_of, block[two[0xC2:0xE0]])


def _upper_levels(l2: np.ndarray, l2_of: np.ndarray, lead1: np.ndarray) -> tuple:
    """(l2 as lists, l3 [n3, 64] as lists, (leads [256] (level, node), the same [256] packed
    ``level << 32 | node``, -1 invalid)) from the level-2 nodes
    [n2, 64], the level-2 node after each 3-byte lead and after each 4-byte lead and
    continuation (``l2_of`` [16 + 320]), and the level-1 node after each 2-byte lead (``lead1``
    [30])."""
    four = utf8_layout()[2]
    l2_three, l2_four = l2_of[:16], l2_of[16:].reshape(5, 64)
    l2_four = np.where((four >= 0).any(-1), l2_four, -1)
    l3, l3_of = _unique_rows(l2_four)
    leads = [(-1, -1)] * 0xC2 + [(1, n) for n in lead1.tolist()]
    leads += [(2, n) for n in l2_three.tolist()]
    valid4 = (four >= 0).reshape(5, -1).any(axis=1).tolist()
    leads += [(3, n) if ok else (-1, -1) for n, ok in zip(l3_of.tolist(), valid4)]
    leads += [(-1, -1)] * (256 - len(leads))
    packed = np.full(256, -1, dtype=np.int64)  # level << 32 | node, -1 invalid
    packed[0xC2:0xE0] = 1 << 32 | lead1
    packed[0xE0:0xF0] = 2 << 32 | l2_three
    packed[0xF0:0xF5] = np.where(valid4, 3 << 32 | l3_of, -1)
    packed.flags.writeable = False  # shared by every pattern of the same partition (_shared_dag)
    return l2.tolist(), l3.tolist(), (leads, packed)


def utf8_tables(classes, available: np.ndarray | None, other=None, explicit=None):
    """The code-point class DAG of :mod:`~decodekit.constraints.automata.utf8` as lookups.

    Returns a dict: ``ascii`` [128] class of each ASCII byte; ``lead`` [256] (level, node) of
    each lead byte (level 1: ``rows[node]`` is the classes of its 64 continuation bytes; level 2:
    ``l2[node]`` its level-1 children; level 3: ``l3[node]`` its level-2 children; -1 invalid)
    and ``lead_packed`` the same as [256] int64 ``level << 32 | node`` (-1 invalid);
    ``masks[level][node]``: the classes below a node reachable through ``available`` bytes (a bit
    mask). Given ``other`` and ``explicit`` (``chardfa.partition_characters``) with every named character
    ASCII, no block past ASCII is rewritten and the DAG's shape is :func:`_shared_dag`'s (its
    lists shared, read only); else it is built from ``classes`` over all of Unicode."""
    if other is not None and all(c < "\x80" for c in explicit):
        first: dict[int, int] = {}  # class -> its group, by first occurrence
        groups = tuple(first.setdefault(k, len(first)) for k in other[list(OCCURRING_BITS)].tolist())
        rows, l2, l3, leads = _shared_dag(groups)
        rows = np.array(list(first), dtype=np.int64)[rows]
        ascii_ = classes.ascii.tolist()
    else:
        rows, block = classes.rows, classes.block
        l2, l3, leads = _levels(block)
        ascii_ = rows[block[:2]].reshape(-1).tolist()
    avail = np.ones(256, dtype=bool) if available is None else available
    cont = avail[0x80:0xC0]
    ok = cont.tolist()
    m1 = [bits_of(r) for r in rows[:, cont]]
    m2 = [bit_or(m1[c] for c, y in zip(r, ok) if y and c >= 0) for r in l2]
    m3 = [bit_or(m2[c] for c, y in zip(r, ok) if y and c >= 0) for r in l3]
    return {
        "ascii": ascii_, "lead": leads[0], "lead_packed": leads[1], "rows": rows.tolist(), "l2": l2, "l3": l3,
        "masks": (None, m1, m2, m3), "avail": avail.tolist(),
    }  # fmt: skip


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows and the inverse [N] -> row index (as
    :func:`~decodekit.constraints.automata.graph.unique_rows`, in another fixed order: only the
    grouping matters to the DAG) for the few distinct rows of the UTF-8 layout: rows grouped by
    a hash, in the order of their keys, the grouping checked exactly (else the plain sort)."""
    keys = rows.astype(np.uint64) @ HASH_MIX[: rows.shape[1]]  # [N], wrapping
    first, inverse = first_and_inverse(keys)
    distinct = rows[first]
    if not (distinct[inverse] == rows).all():  # a hash collision
        return unique_rows(rows)
    return distinct, inverse


def bits_of(values) -> int:
    out = 0
    for v in set(values.tolist()):
        out |= 1 << v
    return out


def bit_or(masks) -> int:
    out = 0
    for m in masks:
        out |= m
    return out
