"""Lift a byte DFA to a token-level automaton for one vocabulary, vectorised over tokens.

States are stepped through all nodes of a depth of the vocabulary's trie at once:
``state[f, n] = T[state[f, parent[n]], class[byte[n]]]`` with a dead sink, cutting subtrees
dead from every state; a token's end state is its node's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from decodekit.constraints.automata.graph import (
    distances_to_accept,
    distinct_columns,
    minimize_with_blocks,
    reverse_distances,
    spans,
)
from decodekit.constraints.automata.utf8 import ByteDFA
from decodekit.constraints.tokens.trie import EncodedVocab, TrieLists
from decodekit.errors import ConstraintTooLarge

MAX_TABLE_ENTRIES = 2**27  # next_state [S, V] int64 and the lift's [states, nodes] arrays: 1 GiB each
MAX_STEP_ENTRIES = 2**25  # [states, trie nodes] of one depth: 256 MiB per array, ~4 alive at once
SPARSE_WALK = 8  # walk_one follows the alive nodes' children once fewer than 1/SPARSE_WALK are alive
# ... and in plain Python once at most PY_FRONTIER are alive with at most PY_CHILDREN children
# (measured over the structured patterns: neutral on the dense walks, 2.6x faster on sentence's)
PY_FRONTIER, PY_CHILDREN = 64, 256
# a dense depth with at least CLOSE_AT and at most CLOSE_SHARE of its nodes alive takes whole the
# subtrees a state keeps (when nearly all are alive, stepping the whole depth is as cheap as it gets,
# and the few left after taking would be followed sparsely through every depth below: .*\bmarket\b.*)
CLOSE_AT, CLOSE_SHARE = 512, 0.75


@dataclass(frozen=True)
class ByteTable:
    """A byte DFA premultiplied for stepping over the trie (the lift's and the lazy automaton's).

    Attributes:
        width: B, the byte classes; states are premultiplied: state q is ``q * B``.
        dead: ``Q * B``, the sink Q (every class leads back to it).
        succ: [Q + 1, B] next state per class, the sink's row last (not premultiplied).
        flat: [(Q + 1) * B] intp: ``flat[q * B + c] = q' * B``.
        lut: [256] intp the class of each byte.
        start: [1 + Q] intp the premultiplied start of each token-level candidate: 0 "nothing
            emitted yet" (the DFA's start), 1 + q "state q after a token" (the separator read).
    """

    width: int
    dead: int
    succ: np.ndarray
    flat: np.ndarray
    lut: np.ndarray
    start: np.ndarray


def byte_table(dfa: ByteDFA, separator: bytes) -> ByteTable:
    """:class:`ByteTable` of ``dfa`` with tokens joined by ``separator``."""
    num_byte, width = dfa.table.shape
    succ = np.append(np.where(dfa.table >= 0, dfa.table, num_byte), [[num_byte] * width], axis=0)
    flat = succ.astype(np.intp).reshape(-1) * width  # intp: no overflow, indexes without a cast
    lut = dfa.byte_class.astype(np.intp)
    after_sep = np.arange(num_byte + 1, dtype=np.intp) * width
    for k in lut[np.frombuffer(separator, dtype=np.uint8)].tolist():
        after_sep = flat[after_sep + k]
    start = np.concatenate([[dfa.initial * width], after_sep[:num_byte]]).astype(np.intp)
    return ByteTable(width, num_byte * width, succ, flat, lut, start)


class Reads(NamedTuple):
    """``tokens`` [n] alive from some of the starts (ids), ``ends`` [f, n] the (premultiplied)
    state each start reaches after each, ``dead`` if none."""

    tokens: np.ndarray
    ends: np.ndarray


def _walk(starts: np.ndarray, enc: EncodedVocab, lut: np.ndarray, flat, dead: int) -> Iterator[Reads]:
    """Per trie depth (depth 0 always), the tokens of that length alive from some of ``starts``
    [f] (premultiplied: ``flat[q * B + lut[byte]] = q' * B``, the sink ``dead``) and their end
    states; subtrees dead from every start are cut."""
    state = starts[:, None].astype(flat.dtype)  # [f, nodes alive at this depth]
    single = len(starts) == 1
    pos = None  # node index -> column of `state` at this depth (-1: cut); None: all alive
    found = 0  # entries of the end-state table so far
    for d, (tokens, nodes) in enumerate(enc.by_depth):
        if enc.chain is not None and d == enc.chain[0]:
            yield from _walk_chain(state, pos, enc, lut, flat, dead)
            return
        if d > 0:
            parent, byte = enc.parent[d - 1], enc.byte[d - 1]
            if pos is not None:  # cut the subtrees of dead nodes
                p = pos[parent]
                sel = np.flatnonzero(p >= 0)
                parent, byte = p[sel], byte[sel]
            if len(starts) * len(parent) > MAX_STEP_ENTRIES:
                raise ConstraintTooLarge(
                    f"constraint too large: stepping {len(starts)} automaton states through {len(parent)} "
                    f"token prefixes at once exceeds {MAX_STEP_ENTRIES} entries (a pattern with this "
                    "many states over this vocabulary: simplify it)",
                    bound="entries",
                    limit=MAX_STEP_ENTRIES,
                )
            step = flat[np.take(state, parent, axis=1) + lut[byte]]  # np.take: 3x faster than [:, idx]
            # the dead sink has the largest index: a node is alive iff some row is below it
            keep = step[0] < dead if single else step.min(axis=0, initial=dead) < dead
            alive = np.flatnonzero(keep)
            if len(alive) < len(keep) or pos is not None:
                if not len(alive):
                    return
                if len(alive) < len(keep):
                    step = np.take(step, alive, axis=1)
                nodes_alive = alive if pos is None else sel[alive]
                pos = np.full(len(enc.parent[d - 1]), -1, dtype=np.int64)
                pos[nodes_alive] = np.arange(len(alive))
            state = step
        if len(tokens) or not d:
            found += len(tokens) * len(starts)
            if found > MAX_TABLE_ENTRIES:
                raise ConstraintTooLarge(
                    f"constraint too large: {len(starts)} automaton states x the tokens alive from them "
                    f"exceed {MAX_TABLE_ENTRIES} table entries (simplify the pattern)",
                    bound="entries",
                    limit=MAX_TABLE_ENTRIES,
                )
            if pos is None:
                yield Reads(tokens, np.take(state, nodes, axis=1))
            else:
                p = pos[nodes]
                hit = p >= 0
                yield Reads(tokens[hit], np.take(state, p[hit], axis=1))


def walk_one(start: int, enc: EncodedVocab, lut: np.ndarray, flat: np.ndarray, dead: int, loops=None):
    """:func:`_walk` from one start state (premultiplied), as (tokens [n], end states [n]): the
    tokens alive from it, in no fixed order. Each depth is stepped
    whole (the dead sink steps to itself: no compaction) unless the alive nodes' children are
    fewer than 1/SPARSE_WALK of it; then only those (``first_child`` ranges), and once at most
    :data:`PY_FRONTIER` nodes are alive with at most :data:`PY_CHILDREN` children, in plain
    Python over :attr:`EncodedVocab.lists` (past the few wide depths, a trie of 50,000 tokens has
    some 40 depths of a few nodes each: numpy's per-call cost would be most of the walk).
    ``loops`` (None, or a call returning :func:`loop_bytes`' rows, asked only once a depth
    qualifies): a dense depth of at least :data:`CLOSE_AT` alive nodes, at most
    :data:`CLOSE_SHARE` of it, takes whole the subtrees whose state every byte below keeps
    (:func:`_take_subtrees`).
    """
    found_tokens, found_ends = [], []
    py_tokens: list[int] = []  # what the plain-Python depths found
    py_ends: list[int] = []
    empty = enc.by_depth[0][0]
    if len(empty):
        found_tokens.append(empty)
        found_ends.append(np.full(len(empty), start, dtype=flat.dtype))
    every = np.array([start], dtype=flat.dtype)  # the state of every node of depth d - 1 (dead:
    alive = state = None  # the sink), or the alive ones (increasing) and theirs (sparse), or
    nodes = states = None  # as lists (plain Python)
    lists = step_of = lut_list = None
    for d in range(1, len(enc.by_depth)):
        if enc.chain is not None and d == enc.chain[0]:  # one long token left: byte by byte
            s = _state_of(int(enc.parent[d - 1][0]), every, alive, state, dead, nodes, states)
            s = _chain_end([s], enc, lut, flat, dead)[0] if s != dead else dead
            if s != dead:
                found_tokens.append(np.array([enc.chain[1]], dtype=np.int64))
                found_ends.append(np.array([s], dtype=flat.dtype))
            break
        if nodes is not None:
            first = lists.first[d - 1]
            if sum(first[n + 1] - first[n] for n in nodes) <= PY_CHILDREN:
                nodes, states = _python_depth(
                    d, nodes, states, lists, step_of, lut_list, dead, py_tokens, py_ends
                )
                if not nodes:
                    break
                continue
            alive, state = np.array(nodes, dtype=np.int64), np.array(states, dtype=flat.dtype)
            nodes = states = None
        first, width = enc.first_child[d - 1], len(enc.byte[d - 1])
        if alive is not None:  # sparse so far: stay so while the children are few
            lo = first[alive]
            counts = first[alive + 1] - lo
            total = int(counts.sum())
            if not total:
                break
            if total * SPARSE_WALK < width:
                child = spans(lo, counts, total)
                step = flat[np.repeat(state, counts) + lut[enc.byte[d - 1][child]]]
                keep = np.flatnonzero(step < dead)
                if not len(keep):
                    break
                alive, state, every = child[keep], step[keep], None
            else:
                every = np.full(len(first) - 1, dead, dtype=flat.dtype)
                every[alive] = state
                alive = None
        live = None  # [width] bool, the nodes of this depth alive (dense depths)
        if alive is None:  # dense: the whole depth, then sparse if few nodes are left alive
            every = flat[every[enc.parent[d - 1]] + lut[enc.byte[d - 1]]]
            live = every < dead
            count = int(np.count_nonzero(live))
            qualifies = loops is not None and CLOSE_AT <= count <= CLOSE_SHARE * width
            if qualifies and (rows := loops()) is not None:
                classes = len(flat) - dead  # flat is [(Q + 1) * B], the sink Q * B
                count -= _take_subtrees(d, every, live, enc, dead, classes, rows, found_tokens, found_ends)
            if not count:
                break
            if count * SPARSE_WALK < width:
                alive = np.flatnonzero(live)
                state = every[alive]
        tokens, token_nodes = enc.by_depth[d]
        if len(tokens):
            if alive is not None and len(alive) * SPARSE_WALK < len(tokens):  # read at the alive nodes
                if lists is None:
                    lists = enc.lists
                at = lists.token_at[d - 1][alive]
                hit = np.flatnonzero(at >= 0)
                found_tokens.append(at[hit])
                found_ends.append(state[hit])
                if lists.more:
                    _more_tokens(d, alive[hit].tolist(), state[hit].tolist(), lists, py_tokens, py_ends)
            else:
                if every is None:
                    every = np.full(width, dead, dtype=flat.dtype)
                    every[alive] = state
                if live is not None and 2 * count < width:  # most dead: a bool gather, the ends of the hits
                    hit = np.flatnonzero(live[token_nodes])
                    found_tokens.append(tokens[hit])
                    found_ends.append(every[token_nodes[hit]])
                else:
                    ends = every[token_nodes]
                    hit = ends < dead
                    found_tokens.append(tokens[hit])
                    found_ends.append(ends[hit])
        if alive is not None and len(alive) <= PY_FRONTIER:  # few left: plain Python from here
            if lists is None:
                lists = enc.lists
            if step_of is None:
                step_of, lut_list = memoryview(np.ascontiguousarray(flat)), lut.tolist()
            nodes, states, alive, state, every = alive.tolist(), state.tolist(), None, None, None
    if py_tokens:
        found_tokens.append(np.array(py_tokens, dtype=np.int64))
        found_ends.append(np.array(py_ends, dtype=flat.dtype))
    if not found_tokens:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=flat.dtype)
    return np.concatenate(found_tokens), np.concatenate(found_ends)


def loop_bytes(succ: np.ndarray, lut: np.ndarray) -> np.ndarray | None:
    """[Q + 1, 4] little-endian uint64: bit ``b % 64`` of word ``b // 64`` of row q is set iff
    byte b steps state q to itself (``succ`` [Q + 1, B] by class, the sink last and left out;
    ``lut`` [256] each byte's class); None when no state but the sink steps to itself."""
    own = succ == np.arange(len(succ))[:, None]
    own[-1] = False
    if not own.any():
        return None
    return np.ascontiguousarray(np.packbits(own[:, lut], axis=1, bitorder="little")).view("<u8")


def _take_subtrees(d: int, every, live, enc: EncodedVocab, dead: int, width: int, loops, tokens, ends) -> int:
    """Take whole the subtrees of the alive nodes of depth d whose state steps to itself on every
    byte below them (``loops``, :func:`loop_bytes`; :attr:`EncodedVocab.subtrees`): each token
    there ends in that state (states premultiplied by ``width``, the byte classes; ``dead`` the
    sink). Their tokens are appended to ``tokens`` / ``ends``, the nodes marked dead in
    ``every`` / ``live`` (in place) and their number returned."""
    nodes = np.flatnonzero(live)
    states = every[nodes]
    sub = enc.subtrees
    whole = ~(sub.below[d - 1][nodes] & ~loops[states // width]).any(axis=1)
    taken = nodes[whole]
    if not len(taken):
        return 0
    lo, count = sub.lo[d - 1][taken], sub.count[d - 1][taken]
    tokens.append(sub.order[spans(lo, count, int(count.sum()))])
    ends.append(np.repeat(states[whole], count))
    every[taken] = dead
    live[taken] = False
    return len(taken)


def _python_depth(d: int, nodes, states, lists: TrieLists, step_of, lut_list, dead: int, tokens, ends):
    """One depth of :func:`walk_one` in plain Python: the children of ``nodes`` (depth d - 1, in
    states ``states``) alive after their byte, and their states; the tokens ending at them are
    appended to ``tokens`` / ``ends``."""
    first, byte, token = lists.first[d - 1], lists.byte[d - 1], lists.token[d - 1]
    more = lists.more
    out_nodes, out_states = [], []
    for n, s in zip(nodes, states):
        for child in range(first[n], first[n + 1]):
            t = step_of[s + lut_list[byte[child]]]
            if t != dead:
                out_nodes.append(child)
                out_states.append(t)
                k = token[child]
                if k >= 0:
                    tokens.append(k)
                    ends.append(t)
                    if more and (d, child) in more:
                        tokens.extend(more[(d, child)])
                        ends.extend([t] * len(more[(d, child)]))
    return out_nodes, out_states


def _more_tokens(d: int, nodes, states, lists: TrieLists, tokens, ends) -> None:
    """The tokens besides the first ending at ``nodes`` of depth d (tokens with the same bytes)."""
    for n, s in zip(nodes, states):
        extra = lists.more.get((d, n))
        if extra:
            tokens.extend(extra)
            ends.extend([s] * len(extra))


def _state_of(node: int, every, alive, state, dead: int, nodes=None, states=None) -> int:
    """The state of ``node`` of the current depth in :func:`walk_one` (dead if not alive)."""
    if nodes is not None:
        return states[nodes.index(node)] if node in nodes else dead
    if alive is None:
        return int(every[node])
    i = int(np.searchsorted(alive, node))
    return int(state[i]) if i < len(alive) and alive[i] == node else dead


def _walk_chain(state, pos, enc: EncodedVocab, lut, flat, dead: int) -> Iterator[Reads]:
    """The end of :func:`_walk` when one long token is left: its remaining bytes are stepped one
    by one from each row (plain Python, each row stopping when it dies)."""
    d, token = enc.chain
    col = int(enc.parent[d - 1][0] if pos is None else pos[enc.parent[d - 1][0]])
    if col < 0:
        return
    final = _chain_end(state[:, col].tolist(), enc, lut, flat, dead)
    if min(final) < dead:
        yield Reads(np.array([token], dtype=np.int64), np.array(final, dtype=flat.dtype)[:, None])


def _chain_end(states: list[int], enc: EncodedVocab, lut, flat, dead: int) -> list[int]:
    """The state each of ``states`` reaches over the chain token's bytes from depth
    ``enc.chain[0]`` on (plain Python, each stopping when it dies)."""
    steps = lut[np.concatenate(enc.byte[enc.chain[0] - 1 :])].tolist()
    final = []
    for s in states:
        for k in steps:
            s = int(flat[s + k])
            if s == dead:
                break
        final.append(s)
    return final


def _run(starts: np.ndarray, enc: EncodedVocab, usable: np.ndarray, lut, flat, dead: int) -> Reads:
    """All of :func:`_walk`'s reads in one table, the tokens not ``usable`` [V] left out."""
    reads = list(_walk(starts, enc, lut, flat, dead))
    tokens, ends = np.concatenate([r.tokens for r in reads]), np.concatenate([r.ends for r in reads], axis=1)
    keep = usable[tokens]
    return Reads(tokens, ends) if keep.all() else Reads(tokens[keep], ends[:, keep])


@dataclass(frozen=True)
class Lifted:
    """The token-level automaton, compressed by columns: ``next_state[:, tokens] = table[:, which]``,
    every other token dead everywhere.

    Attributes:
        table: [S, U] int32 next state per distinct token behaviour, -1 = dead.
        accepting: [S] bool. min_tokens: [S] int64 fewest tokens to acceptance.
        tokens: [W] int64 token ids with a transition somewhere. which: [W] their column.
        candidates: token-level states stepped through the vocabulary. live: those reachable and
            co-reachable, before merging equivalent states.
        state_of: [1 + Q] the state of each candidate (0: nothing emitted, 1 + q: byte state q
            after a token), -1 where it is not a live state (what the lazy automaton reads).
    """

    table: np.ndarray
    accepting: np.ndarray
    min_tokens: np.ndarray
    tokens: np.ndarray
    which: np.ndarray
    candidates: int
    live: int
    state_of: np.ndarray


class _Round(NamedTuple):
    """One round of the lift: the candidates ``pending`` [p], their row ``row_of`` [p] among the
    distinct starts, which of those are ``live`` (not the dead sink), and the ``reads`` from those."""

    pending: np.ndarray
    row_of: np.ndarray
    live: np.ndarray
    reads: Reads


def lift(
    dfa: ByteDFA, enc: EncodedVocab, separator: bytes, eos_id: int | None, max_states: int
) -> Lifted | None:
    """The token-level automaton of ``dfa`` over the vocabulary ``enc``, or None if it accepts
    nothing.

    Token-level candidate 0 is "nothing emitted yet" (the DFA start), candidate 1 + q is "DFA
    state q after at least one token" (the separator comes first). The states between characters
    are stepped first, then, round by round, those inside a character that some token ends in
    (at most 3 continuation bytes: few rounds). Unreachable and non-co-reachable states are then
    removed and equivalent states merged."""
    num_byte, width = dfa.table.shape
    classes = np.zeros(width, dtype=bool)  # first a cheap necessary condition: some text of the
    classes[dfa.byte_class[enc.available(separator)]] = True  # bytes the tokens have matches
    if distances_to_accept(dfa.table, dfa.accepting, classes)[dfa.initial] < 0:
        return None
    steps = byte_table(dfa, separator)
    dead, flat, lut, candidate_start = steps.dead, steps.flat, steps.lut, steps.start
    usable = enc.valid & (np.arange(enc.size) != eos_id)  # EOS gets no transition
    first = _walk(candidate_start[:1], enc, lut, flat, dead)  # stops at the first readable token
    if not dfa.accepting[dfa.initial] and not any(usable[r.tokens].any() for r in first):
        return None
    pending = np.concatenate([[0], 1 + np.flatnonzero(dfa.boundary)])
    done = np.zeros(num_byte + 1, dtype=bool)
    rounds = []
    while len(pending):
        done[pending] = True
        distinct, row_of = np.unique(candidate_start[pending], return_inverse=True)
        live = distinct != dead
        reads = _run(distinct[live], enc, usable, lut, flat, dead)
        rounds.append(_Round(pending, row_of, live, reads))
        if dfa.boundary.all():
            break
        reached = np.unique(reads.ends[:, enc.high_end[reads.tokens]]) // width
        reached = 1 + reached[reached < num_byte]
        pending = reached[~done[reached]]
    candidates = np.flatnonzero(done)  # in order: row 0 first
    if len(candidates) * enc.size > MAX_TABLE_ENTRIES:
        raise ConstraintTooLarge(
            f"constraint too large: {len(candidates)} candidate states x {enc.size} tokens exceed "
            f"{MAX_TABLE_ENTRIES} table entries",
            bound="entries",
            limit=MAX_TABLE_ENTRIES,
            size=len(candidates) * enc.size,
        )
    reads, start_row = _join_rounds(rounds, candidates, dead)
    columns, which = distinct_columns(reads.ends)  # tokens acting alike from every start share one
    index = np.full(num_byte + 2, -1, dtype=np.int64)  # candidate 1 + q -> its row; dead (Q) -> -1
    index[candidates] = np.arange(len(candidates))
    columns = np.concatenate([index[1 + columns // width], np.full((1, columns.shape[1]), -1)])
    table = columns[start_row].astype(np.int32)  # [candidates, U]
    accepting = np.concatenate([[dfa.accepting[dfa.initial]], dfa.accepting])[candidates]
    src, dst = _distinct_edges(table)
    reach = reverse_distances(dst, src, np.arange(len(accepting)) == 0, len(accepting)) >= 0  # from state 0
    dist = reverse_distances(src, dst, accepting, len(accepting))
    keep = reach & (dist >= 0)
    if not keep[0]:
        return None
    live = int(keep.sum())
    if live > max_states:
        raise ConstraintTooLarge(
            f"constraint too large: {live} token-level states > max_states={max_states}",
            bound="states",
            limit=max_states,
            size=live,
        )
    remap = np.append(np.where(keep, np.cumsum(keep) - 1, -1), -1).astype(np.int32)
    out, block = minimize_with_blocks(remap[table[keep]], accepting[keep], 0, hint=dist[keep])  # -1 reads -1
    state_of = np.full(num_byte + 1, -1, dtype=np.int64)
    state_of[candidates[keep]] = block
    return Lifted(
        out.table, out.accepting, dist[keep][out.reps], reads.tokens, which, len(candidates), live, state_of
    )


def _join_rounds(rounds: list[_Round], candidates: np.ndarray, dead: int) -> tuple[Reads, np.ndarray]:
    """One table from the rounds' results: the tokens alive in some round with the end state from
    each distinct live start of each round (``dead`` if none), and the row of each candidate
    [candidates] (one past the last row if it starts dead)."""
    reads = rounds[0].reads
    if len(rounds) > 1:  # the union of the rounds' tokens (increasing ids), each round in its rows
        tokens = np.unique(np.concatenate([r.reads.tokens for r in rounds]))
        ends = np.full((sum(len(r.reads.ends) for r in rounds), len(tokens)), dead, dtype=np.intp)
        row = 0
        for r in rounds:
            ends[row : row + len(r.reads.ends), np.searchsorted(tokens, r.reads.tokens)] = r.reads.ends
            row += len(r.reads.ends)
        reads = Reads(tokens, ends)
    position = np.empty(int(candidates.max()) + 1, dtype=np.int64)
    row = 0
    for r in rounds:
        slot = np.where(r.live, np.cumsum(r.live) - 1 + row, len(reads.ends))  # distinct start -> row
        position[r.pending] = slot[r.row_of]
        row += len(r.reads.ends)
    return reads, position[candidates]


def _distinct_edges(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (src, dst) pairs of a [S, W] table (dead -1 excluded)."""
    s = table.shape[0]
    keys = (np.arange(s, dtype=np.int64)[:, None] * s + table)[table >= 0]
    if s * s <= 50_000_000:
        seen = np.zeros(s * s, dtype=bool)
        seen[keys] = True
        pairs = np.flatnonzero(seen)
    else:
        pairs = np.unique(keys)
    return pairs // s, pairs % s
