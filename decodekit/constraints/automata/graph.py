"""Small vectorised graph routines on transition tables (-1 = dead)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

SMALL_TABLE = 256  # edges / table entries up to which plain Python beats numpy's per-call overhead
SMALL_FRONTIER = 48  # BFS levels with up to this many states are expanded in plain Python
DENSE_LEVELS = 4  # BFS levels done as one vectorised pass over all edges before switching to CSR
WIDE = 16  # ... and any level reaching at least 1/WIDE of the states
DEDUPE_PAIRS = 1 << 20  # states^2 up to which parallel edges are merged first (a bitmap of pairs)


def spans(lo: np.ndarray, counts: np.ndarray, total: int) -> np.ndarray:
    """[total] the positions ``lo[i] .. lo[i] + counts[i] - 1`` of every i, concatenated in
    order (``total = counts.sum()``): the children of a frontier in a CSR layout."""
    if len(lo) == 1:  # one parent (a walk's first depth): a quarter of the time
        return np.arange(lo[0], lo[0] + total)
    return np.repeat(lo - (np.cumsum(counts) - counts), counts) + np.arange(total)


def reverse_distances(src: np.ndarray, dst: np.ndarray, targets: np.ndarray, num_states: int) -> np.ndarray:
    """Shortest number of edges from each state to a target state (-1 if none).

    Args:
        src, dst: [E] edges ``src -> dst`` (duplicates allowed).
        targets: [S] bool, the states at distance 0.
    Returns: [S] int64 distances, breadth-first over the reversed edges: the first
    ``DENSE_LEVELS`` levels, and wide ones, are one vectorised pass over all edges; the others
    gather predecessors from a CSR adjacency (narrow levels in plain Python). O(S + E log E)."""
    if len(src) <= SMALL_TABLE:
        return _reverse_distances_small(src, dst, targets, num_states)
    if len(src) > 4 * num_states and num_states * num_states <= DEDUPE_PAIRS:
        seen = np.zeros(num_states * num_states, dtype=bool)  # parallel edges (a state's byte
        seen[np.asarray(src, dtype=np.int64) * num_states + dst] = True  # columns): one each
        pairs = np.flatnonzero(seen)
        src, dst = pairs // num_states, pairs % num_states
        if len(src) <= SMALL_TABLE:
            return _reverse_distances_small(src, dst, targets, num_states)
    dist = np.full(num_states, -1, dtype=np.int64)
    dist[targets] = 0
    frontier = targets.copy()
    level = width = 0
    while level < DENSE_LEVELS or width * WIDE >= num_states:  # levels are disjoint: <= WIDE wide ones
        level += 1
        hit = np.zeros(num_states, dtype=bool)
        hit[src[frontier[dst]]] = True
        hit &= dist < 0
        width = int(np.count_nonzero(hit))
        if not width:
            return dist
        dist[hit] = level
        frontier = hit
    keep = dist[src] < 0  # the only edges that can still matter
    src, dst = np.asarray(src)[keep], np.asarray(dst)[keep]
    preds = src[np.argsort(dst, kind="stable")].astype(np.int64)
    start = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=num_states))])
    frontier = np.flatnonzero(frontier)
    preds_list = start_list = None
    while len(frontier):
        level += 1
        if len(frontier) <= SMALL_FRONTIER:
            if preds_list is None:
                preds_list, start_list = preds.tolist(), start.tolist()
            found = []
            for q in frontier.tolist() if isinstance(frontier, np.ndarray) else frontier:
                for p in preds_list[start_list[q] : start_list[q + 1]]:
                    if dist[p] < 0:
                        dist[p] = level
                        found.append(p)
            frontier = found
            continue
        frontier = np.asarray(frontier, dtype=np.int64)
        lo = start[frontier]
        counts = start[frontier + 1] - lo
        total = int(counts.sum())
        if not total:
            break
        cand = preds[spans(lo, counts, total)]  # the predecessors of every frontier state
        cand = np.unique(cand[dist[cand] < 0])
        dist[cand] = level
        frontier = cand
    return dist


def distances_to_accept(
    table: np.ndarray, accepting: np.ndarray, columns: np.ndarray | None = None
) -> np.ndarray:
    """[Q] int64 fewest transitions from each state of a DFA to an accepting state (-1: none).

    Args:
        table: [Q, C] next state per column (class or token), -1 = dead.
        accepting: [Q] bool.
        columns: [C] bool, the columns that may be read (default: all)."""
    usable = table >= 0 if columns is None else (table >= 0) & columns
    src, col = np.nonzero(usable)
    return reverse_distances(src, table[src, col], np.asarray(accepting, dtype=bool), len(table))


def _reverse_distances_small(src, dst, targets, num_states: int) -> np.ndarray:
    """:func:`reverse_distances` in plain Python (few edges: numpy's per-call cost would dominate)."""
    preds: list[list[int]] = [[] for _ in range(num_states)]
    for a, b in zip(src.tolist(), dst.tolist()):
        preds[b].append(a)
    return levels_back(preds, np.flatnonzero(targets).tolist())


def levels_back(preds: list, targets: list[int]) -> np.ndarray:
    """[S] int64: the fewest edges from each state to one of ``targets``, -1 if none, breadth-first
    in plain Python over ``preds[s]`` (the states with an edge into s)."""
    dist = [-1] * len(preds)
    for q in targets:
        dist[q] = 0
    frontier, level = list(targets), 0
    while frontier:
        level += 1
        nxt = []
        for q in frontier:
            for p in preds[q]:
                if dist[p] < 0:
                    dist[p] = level
                    nxt.append(p)
        frontier = nxt
    return np.array(dist, dtype=np.int64)


def unique_edges(src: np.ndarray, dst: np.ndarray, num_states: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (src, dst) pairs of the edges (parallel edges, a state's byte columns,
    merged), as :func:`reverse_distances` merges them itself: done once for several searches
    over the same edges. Unchanged when they are few or the pair bitmap would be too large."""
    if len(src) > 4 * num_states and num_states * num_states <= DEDUPE_PAIRS:
        seen = np.zeros(num_states * num_states, dtype=bool)
        seen[np.asarray(src, dtype=np.int64) * num_states + dst] = True
        pairs = np.flatnonzero(seen)
        return pairs // num_states, pairs % num_states
    return src, dst


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of a 2-D array (sorted bytewise, each row one opaque byte string) and the
    inverse [N] -> row index."""
    rows = np.ascontiguousarray(rows)
    n, width = rows.shape
    packed = rows.view(np.dtype((np.void, max(width, 1) * rows.itemsize))).reshape(n)
    uniq, inverse = np.unique(packed, return_inverse=True)
    return uniq.view(rows.dtype).reshape(len(uniq), width), inverse.reshape(-1)


HASH_MIX = np.random.default_rng(12345).integers(1, 2**63, size=64, dtype=np.uint64) | np.uint64(1)


def first_and_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_index=True, return_inverse=True)[1:]`` by one stable argsort
    (numpy 2.4's unique took 2-3x as long on the few hundred keys of a compile): the first
    position of each distinct key, in increasing key order, and each key's rank [N]."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    new = np.empty(len(keys), dtype=bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    inverse = np.empty(len(keys), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return order[new], inverse


def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of a 1-D int array by one sort and a mask (numpy 2's ``unique``
    costs more on the few hundred (state, byte) pairs of a fill)."""
    out = np.sort(values)
    return out[np.concatenate(([True], out[1:] != out[:-1]))]


def runs(ordered: np.ndarray) -> list[int]:
    """Where the runs of equal values of the sorted ``ordered`` begin, and its length:
    ``[0, ..., len(ordered)]`` (run i is ``ordered[cuts[i]:cuts[i + 1]]``)."""
    return [0, *((ordered[1:] != ordered[:-1]).nonzero()[0] + 1).tolist(), len(ordered)]


def small_unique(values: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for ints in ``[0, size)``, by a bitmap."""
    present = np.zeros(size, dtype=bool)
    present[values] = True
    return np.flatnonzero(present), (np.cumsum(present) - 1)[values]


def distinct_columns(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct columns of a [S, W] int table: (columns [S, U], which [W]) with
    ``columns[:, which] == table``. When a column's S values fit in 63 bits together (each
    ``table - min`` in ``b`` bits, ``S * b <= 63``), columns are packed exactly into one integer;
    otherwise they are hashed (one vectorised pass) and the grouping is verified exactly, with a
    fallback to sorting whole columns on a hash collision."""
    s, w = table.shape
    if not s or not w:
        return table[:, :1], np.zeros(w, dtype=np.int64)
    low = table.min()
    bits = max(int(table.max() - low).bit_length(), 1)
    if s * bits <= 63:
        shifts = np.arange(s, dtype=np.uint64)[:, None] * np.uint64(bits)
        keys = ((table - low).astype(np.uint64) << shifts).sum(axis=0)  # disjoint bit fields
        first, which = first_and_inverse(keys)
        return np.take(table, first, axis=1), which
    mix = np.resize(HASH_MIX, s) * (np.arange(s, dtype=np.uint64) * np.uint64(2) + np.uint64(1))
    keys = (table.astype(np.uint64) * mix[:, None]).sum(axis=0)  # wraps modulo 2**64
    first, which = first_and_inverse(keys)
    columns = np.take(table, first, axis=1)
    if not np.array_equal(np.take(columns, which, axis=1), table):
        rows, which = unique_rows(table.T)
        columns = np.ascontiguousarray(rows.T)
    return columns, which.reshape(-1)


MOORE_ROUNDS = 24  # vectorised Moore rounds before switching to Hopcroft's algorithm


def _refine(table: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, int]:
    """The coarsest partition refining the labels ``start`` [S] that is stable under ``table``:
    (block [S], count). Moore's rounds, vectorised, need as many rounds as the longest word that
    tells two states apart (``[ab]{0,20000}c``: 20,000); after ``MOORE_ROUNDS`` the partition is
    finished by Hopcroft's algorithm (O(E log S)), which gives the same partition."""
    n, width = table.shape
    block = np.unique(start, return_inverse=True)[1].reshape(-1)
    key = np.empty((n, width + 1), dtype=np.int32)
    for _ in range(MOORE_ROUNDS):
        key[:, 0] = block
        np.take(np.append(block, -1).astype(np.int32), table, out=key[:, 1:])  # -1 -> the appended -1
        new = unique_rows(key)[1]  # refines block: the same number of blocks iff stable
        if new.max(initial=-1) == block.max(initial=-1):
            return new, int(new.max(initial=-1)) + 1
        block = new
    block = _hopcroft(table, block)
    return block, int(block.max()) + 1


def _hopcroft(table: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Hopcroft's refinement of the partition ``labels`` [S] (0 .. B-1) over the live transitions
    of ``table`` [S, X] (-1 = dead; all states live, every initial block a splitter, so no sink
    is needed): plain Python over a CSR of the reversed transitions and a refinable partition
    (states grouped by block, the marked ones first). Returns the blocks [S]."""
    n, _ = table.shape
    src, sym = np.nonzero(table >= 0)
    dst = table[src, sym].astype(np.int64)
    order = np.lexsort((sym, dst))
    pred_src, pred_sym = src[order].tolist(), sym[order].tolist()
    start = [0, *np.cumsum(np.bincount(dst, minlength=n)).tolist()]
    by_block = np.argsort(labels, kind="stable")
    elems = by_block.tolist()  # the states, grouped by block
    loc = np.argsort(by_block).tolist()  # position of each state in elems
    blk = labels.astype(np.int64).tolist()
    end = np.cumsum(np.bincount(labels)).tolist()
    first = [0, *end[:-1]]
    mid = list(first)  # elems[first[b]:mid[b]] are the marked states of block b
    work = list(range(len(first)))
    waiting = [True] * len(first)
    while work:
        splitter = work.pop()
        waiting[splitter] = False
        by_symbol: dict[int, list[int]] = {}
        for q in elems[first[splitter] : end[splitter]]:
            for i in range(start[q], start[q + 1]):
                by_symbol.setdefault(pred_sym[i], []).append(pred_src[i])
        for preimage in by_symbol.values():
            touched = []
            for p in preimage:  # mark p: swap it into its block's marked prefix
                b = blk[p]
                pos, m = loc[p], mid[b]
                if pos >= m:
                    if m == first[b]:
                        touched.append(b)
                    other = elems[m]
                    elems[pos], elems[m] = other, p
                    loc[other], loc[p] = pos, m
                    mid[b] = m + 1
            for b in touched:
                m = mid[b]
                if m == end[b]:  # every state of b moves into the splitter: no split
                    mid[b] = first[b]
                    continue
                new = len(first)  # the marked part becomes a new block
                first.append(first[b])
                end.append(m)
                mid.append(first[b])
                first[b] = mid[b] = m
                for i in range(first[new], m):
                    blk[elems[i]] = new
                if waiting[b] or m - first[new] <= end[b] - first[b]:
                    work.append(new)
                    waiting.append(True)
                else:
                    work.append(b)
                    waiting[b] = True
                    waiting.append(False)
    return np.unique(np.array(blk, dtype=np.int64), return_inverse=True)[1].reshape(-1)


def _minimize_small(table: np.ndarray, start: np.ndarray) -> np.ndarray:
    """:func:`_refine` for a tiny table: Moore's rounds on Python tuples. Returns the blocks [S]."""
    rows, labels = table.tolist(), start.tolist()
    count = len(set(labels))
    while True:
        ids: dict[tuple, int] = {}
        labels.append(-1)  # the dead state -1 reads labels[-1]
        labels = [
            ids.setdefault((labels[q], *(labels[t] for t in row)), len(ids)) for q, row in enumerate(rows)
        ]
        if len(ids) == count:
            return np.array(labels, dtype=np.int64)
        count = len(ids)


class Minimized(NamedTuple):
    """A minimal DFA: ``table`` [S', X], ``accepting`` [S'], ``reps`` [S'] an original state per
    new state."""

    table: np.ndarray
    accepting: np.ndarray
    reps: np.ndarray


def minimize(
    table: np.ndarray, accepting: np.ndarray, initial: int, hint: np.ndarray | None = None
) -> Minimized:
    """Merge the equivalent states of ``table`` [S, X] (-1 = dead, all states live) with
    ``accepting`` [S]; ``hint`` [S] an optional invariant equivalent states share (the distance
    to acceptance), which saves rounds. The initial state becomes 0, the others keep the order
    of their first member."""
    return minimize_with_blocks(table, accepting, initial, hint)[0]


def minimize_with_blocks(
    table: np.ndarray, accepting: np.ndarray, initial: int, hint: np.ndarray | None = None
) -> tuple[Minimized, np.ndarray]:
    """:func:`minimize`, and [S] the new state of each original state."""
    n, width = table.shape
    start = accepting.astype(np.int64) if hint is None else hint * 2 + accepting
    block = _minimize_small(table, start) if n * (width + 1) <= SMALL_TABLE else _refine(table, start)[0]
    firsts = np.unique(block, return_index=True)[1]  # each block's first member
    firsts[block[initial]] = -1  # the initial state's block comes first
    order = np.argsort(firsts)
    rep_of = np.where(firsts < 0, initial, firsts)[order]
    new_of = np.argsort(order)[block]
    new_table = np.append(new_of, -1).astype(table.dtype)[table[rep_of]]
    return Minimized(new_table, accepting[rep_of], rep_of), new_of
