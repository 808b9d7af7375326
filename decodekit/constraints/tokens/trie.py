"""The vocabulary's trie: every token's bytes, shared by prefix, prepared once per vocabulary and
shared by every pattern compiled for it (the lift and the lazy automaton step a byte DFA over it
depth by depth)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from decodekit.constraints.automata.graph import spans
from decodekit.constraints.automata.protocol import UNKNOWN
from decodekit.errors import ConstraintError

CHAIN = 256  # a single token's last bytes past this many are stepped one by one (see lift._walk_chain)


class TrieLists(NamedTuple):
    """The trie as plain Python lists, per depth d = 1 .. L (index d - 1), for walks that follow a
    few nodes in plain Python (a numpy call costs 1-5 us, a list lookup 30 ns).

    Attributes:
        first: [n_{d-1} + 1] ``first_child`` of depth d.
        byte: [n_d] the last byte of each node.
        token: [n_d] the token ending at each node (-1: none; the smallest id if several).
        token_at: [n_d] int64 the same, as numpy (sparse walks read it at their alive nodes).
        more: (d, node) -> the other tokens ending at that node (tokens with the same bytes).
    """

    first: tuple[list[int], ...]
    byte: tuple[list[int], ...]
    token: tuple[list[int], ...]
    token_at: tuple[np.ndarray, ...]
    more: dict[tuple[int, int], tuple[int, ...]]


class Subtrees(NamedTuple):
    """Each trie node's subtree, for walks that take a whole subtree at once (a state that every
    byte below a node keeps: then every token below it ends in that state).

    Attributes:
        order: [T] int64 the trie's tokens in byte order (a node's subtree is a run of it).
        lo: per depth d = 1 .. L, [n_d] int64: the tokens of node j's subtree (its own, then its
            descendants') are ``order[lo[j] : lo[j] + count[j]]``.
        count: per depth, [n_d] int64 the number of those tokens.
        below: per depth, [n_d, 4] uint64: bit ``b % 64`` of word ``b // 64`` is set iff byte b
            is the last byte of a node strictly below node j.
    """

    order: np.ndarray
    lo: tuple[np.ndarray, ...]
    count: tuple[np.ndarray, ...]
    below: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class EncodedVocab:
    """The tokens' bytes as a trie, prepared once per vocabulary.

    Attributes:
        parent: per depth d = 1 .. L, [n_d] int64 index of each node's parent among the nodes
            of depth d-1 (depth 0: the root, the empty prefix).
        byte: per depth, [n_d] int64 the last byte of each node.
        by_depth: per depth d = 0 .. L, (token ids [m_d] of length d, their node [m_d]).
        valid: [V] bool (the token has text: not None).
        present: [256] bool, the bytes some valid token contains.
        high_end: [V] bool, the token's last byte is not ASCII (it may end inside a character).
        lengths: [V] int64 the tokens' byte lengths (0 for None).
        first_child: per depth d = 1 .. L, [n_{d-1} + 1] int64: the children of node j of depth
            d-1 are the nodes ``first_child[j] .. first_child[j + 1] - 1`` of depth d (the nodes
            of a depth are ordered by parent).
        byte_counts: [256] int64 how often each byte occurs in the tokens.
        chain: (depth d, token t) when from depth d on only the single token t is left (one
            node per depth: stepped byte by byte, see :func:`_run`), else None.
    """

    parent: tuple[np.ndarray, ...]
    byte: tuple[np.ndarray, ...]
    by_depth: tuple[tuple[np.ndarray, np.ndarray], ...]
    valid: np.ndarray
    present: np.ndarray
    high_end: np.ndarray
    lengths: np.ndarray
    byte_counts: np.ndarray
    first_child: tuple[np.ndarray, ...]
    chain: tuple[int, int] | None = None

    @property
    def size(self) -> int:
        return len(self.valid)

    def available(self, separator: bytes) -> np.ndarray:
        """[256] bool, the bytes a text of these tokens joined by ``separator`` can contain."""
        out = self.present.copy()
        out[np.frombuffer(separator, dtype=np.uint8)] = True
        return out

    @functools.cached_property
    def memo(self) -> dict:
        """What later stages derive from the vocabulary alone (keyed by name and arguments), kept
        with the trie so that each pattern's compile finds it made."""
        return {}

    def usable(self, eos_id: int | None) -> np.ndarray:
        """[V] bool, read only: the valid tokens other than ``eos_id`` (kept in :attr:`memo`)."""
        key = ("usable", eos_id)
        got = self.memo.get(key)
        if got is None:
            got = self.valid.copy()
            if eos_id is not None:
                got[eos_id] = False
            got.flags.writeable = False
            self.memo[key] = got
        return got

    @functools.cached_property
    def subtrees(self) -> Subtrees:
        """:class:`Subtrees` of this trie, made on first use (a pass up and a pass down over the
        depths, some 20 ms for 50,000 tokens) and kept with it."""
        depths = len(self.parent)
        own = [  # the tokens ending at each node
            np.bincount(self.by_depth[d][1], minlength=len(self.byte[d - 1])) for d in range(1, depths + 1)
        ]
        count: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * depths
        below: list[np.ndarray] = [np.zeros((0, 4), dtype=np.uint64)] * depths
        for d in range(depths, 0, -1):  # up: counts and bytes below, from the children
            n = len(self.byte[d - 1])
            cnt, bits = own[d - 1].astype(np.int64), np.zeros((n, 4), dtype=np.uint64)
            if d < depths and len(self.parent[d]):
                parent, byte = self.parent[d], self.byte[d]
                np.add.at(cnt, parent, count[d])
                mine = below[d].copy()  # each child's bytes below it, and its own byte
                mine[np.arange(len(byte)), byte >> 6] |= np.uint64(1) << (byte & 63).astype(np.uint64)
                np.bitwise_or.at(bits, parent, mine)
            count[d - 1], below[d - 1] = cnt, bits
        lo: list[np.ndarray] = []
        order = np.zeros(int(sum(len(self.by_depth[d][0]) for d in range(1, depths + 1))), dtype=np.int64)
        for d in range(1, depths + 1):  # down: a node's run starts after its parent's own tokens
            parent, cnt = self.parent[d - 1], count[d - 1]
            before = np.cumsum(cnt) - cnt  # the runs of the earlier nodes of this depth
            first = self.first_child[d - 1][parent]  # the first sibling of each node
            start = np.zeros(1, dtype=np.int64) if d == 1 else lo[d - 2][parent] + own[d - 2][parent]
            mine = start + before - before[first]
            lo.append(mine)
            ids, nodes = self.by_depth[d]
            if len(ids):
                rank = np.argsort(nodes, kind="stable")
                ids, nodes = ids[rank], nodes[rank]
                k = np.arange(len(nodes)) - np.searchsorted(nodes, nodes)  # among tokens of one node
                order[mine[nodes] + k] = ids
        return Subtrees(order, tuple(lo), tuple(count), tuple(below))

    def step_children(self, d: int, alive: np.ndarray, state: np.ndarray, automaton) -> tuple:
        """One depth of a walk: the children (of depth d) of the nodes ``alive`` of depth d - 1,
        each parent's count, and the byte automaton's state after each child's byte from its
        parent's ``state`` (int32, -1 dead), unknown steps filled first (``automaton.table``
        [S, 256], ``automaton.fill(states, codes)``). Returns ``(child, counts, next)``."""
        first = self.first_child[d - 1]
        lo = first[alive]
        counts = first[alive + 1] - lo
        child = spans(lo, counts, int(counts.sum()))
        src = np.repeat(state, counts)
        codes = self.byte[d - 1][child]
        nxt = automaton.table[src, codes]
        unknown = (nxt == UNKNOWN).nonzero()[0]  # 1-D: np.flatnonzero's ravel costs more
        if len(unknown):
            automaton.fill(src[unknown], codes[unknown])
            nxt[unknown] = automaton.table[src[unknown], codes[unknown]]
        return child, counts, nxt

    def tokens_ending(self, d: int, alive: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The tokens ending at the nodes ``alive`` of depth d, and each one's entry of ``state``:
        read at the alive nodes (:attr:`lists`) when they are few, else over every token of the
        depth (one gather)."""
        ids, nodes = self.by_depth[d]
        if not len(ids) or not len(alive):
            return ids[:0], state[:0]
        if len(alive) * 8 < len(ids):
            lists = self.lists
            at = lists.token_at[d - 1][alive]
            hit = (at >= 0).nonzero()[0]
            tokens, ends = at[hit], state[hit]
            if lists.more:  # tokens with the same bytes as another
                extra = [
                    (t, e)
                    for n, e in zip(alive[hit].tolist(), ends.tolist())
                    for t in lists.more.get((d, n), ())
                ]
                if extra:
                    more_t, more_e = zip(*extra)
                    tokens = np.concatenate([tokens, np.array(more_t, dtype=np.int64)])
                    ends = np.concatenate([ends, np.array(more_e, dtype=ends.dtype)])
            return tokens, ends
        every = np.full(len(self.byte[d - 1]), -1, dtype=np.int64)
        every[alive] = state
        ends = every[nodes]
        hit = ends >= 0
        return ids[hit], ends[hit]

    def kept_below(self, d: int, node: np.ndarray, state: np.ndarray, table: np.ndarray) -> np.ndarray | None:
        """[M] bool: whether every byte below each node (of depth d) steps its state of ``table``
        [S, 256] to itself (a string's body; unknown steps never do), by :attr:`subtrees`' bytes
        below; None when no state there steps to itself on any byte."""
        present = np.flatnonzero(np.bincount(state))
        loops = table[present] == present[:, None]  # [U, 256]
        if not loops.any():
            return None
        bits = np.ascontiguousarray(np.packbits(loops, axis=1, bitorder="little")).view("<u8")
        below = self.subtrees.below[d - 1][node]
        return ~(below & ~bits[np.searchsorted(present, state)]).any(axis=1)

    @functools.cached_property
    def heights(self) -> tuple[np.ndarray, ...]:
        """Per depth d = 1 .. L, [n_d] int64: the most bytes a token has below each node (0: no
        token is longer than the node's prefix); made on first use (one pass up) and kept."""
        out = [np.zeros(len(b), dtype=np.int64) for b in self.byte]
        for d in range(len(out) - 1, 0, -1):
            np.maximum.at(out[d - 1], self.parent[d], out[d] + 1)
        return tuple(out)

    @functools.cached_property
    def lists(self) -> TrieLists:
        """:class:`TrieLists` of this trie, made on first use (about 10 ms for 50,000 tokens) and
        kept with it, as the peers keep their tokenizer info."""
        token_at, more = [], {}
        for d in range(1, len(self.by_depth)):
            ids, nodes = self.by_depth[d]
            at = np.full(len(self.byte[d - 1]), -1, dtype=np.int64)
            order = np.argsort(ids, kind="stable")[::-1]  # the smallest id written last
            at[nodes[order]] = ids[order]
            if len(np.unique(nodes)) < len(nodes):
                for t, n in zip(ids.tolist(), nodes.tolist()):
                    if t != at[n]:
                        more[(d, n)] = (*more.get((d, n), ()), t)
            token_at.append(at)
        return TrieLists(
            tuple(f.tolist() for f in self.first_child),
            tuple(b.tolist() for b in self.byte),
            tuple(a.tolist() for a in token_at),
            tuple(token_at),
            more,
        )


def as_bytes(token: str | bytes | None) -> bytes | None:
    """A token's bytes: ``str`` UTF-8 encoded (None if it holds a lone surrogate, which no UTF-8
    text contains), None stays None."""
    if isinstance(token, str):
        try:
            return token.encode("utf-8")
        except UnicodeEncodeError:
            return None
    if token is None or isinstance(token, (bytes, bytearray, memoryview)):
        return token if token is None or type(token) is bytes else bytes(token)
    raise ConstraintError(
        f"token_strings must hold str, bytes or None, got {type(token).__name__}: {token!r}"
    )


def encode_vocab(tokens: Sequence[str | bytes | None]) -> EncodedVocab:
    """Build the trie: the bytes of all tokens in one buffer, then one ``np.unique`` per depth
    over the tokens at least that long (no fixed-width arrays: memory is linear in the bytes)."""
    data = [as_bytes(t) for t in tokens]
    valid = np.array([b is not None for b in data], dtype=bool)
    lengths = np.fromiter((len(b) if b is not None else 0 for b in data), dtype=np.int64, count=len(data))
    flat = np.frombuffer(b"".join(b for b in data if b), dtype=np.uint8).astype(np.int64)
    offsets = np.cumsum(lengths) - lengths
    counts = np.bincount(flat, minlength=256)
    present = counts > 0
    by_length = np.argsort(-lengths, kind="stable")  # longest first: tokens alive at depth d lead
    sorted_lengths = lengths[by_length]
    node = np.zeros(len(data), dtype=np.int64)  # each token's node at the current depth
    empty = np.flatnonzero((lengths == 0) & valid)  # tokens with no text never join the trie
    parents, last, by_depth = [], [], [(empty, np.zeros(len(empty), dtype=np.int64))]
    chain = None
    for d in range(int(lengths.max(initial=0))):
        tok = by_length[: int(np.searchsorted(-sorted_lengths, -d, side="left"))]
        if len(tok) == 1 and d > 0 and lengths[tok[0]] - d >= CHAIN:  # one long token left
            t = int(tok[0])
            rest = flat[offsets[t] + d : offsets[t] + lengths[t]]
            one, none = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
            parents += [node[tok]] + [one] * (len(rest) - 1)
            last += list(rest.reshape(-1, 1))
            by_depth += [(none, none)] * (len(rest) - 1) + [(tok, one)]
            chain = (d + 1, t)
            break
        key = node[tok] * 256 + flat[offsets[tok] + d]
        keys, node[tok] = np.unique(key, return_inverse=True)
        parents.append(keys >> 8)
        last.append(keys & 255)
        ends = tok[lengths[tok] == d + 1]
        by_depth.append((ends, node[ends]))
    high_end = (lengths > 0) & (np.append(flat, 0)[offsets + lengths - 1] >= 0x80)  # -1: the appended 0
    sizes = [1] + [len(p) for p in parents]
    first_child = tuple(np.searchsorted(p, np.arange(n + 1)) for p, n in zip(parents, sizes))
    return EncodedVocab(
        tuple(parents),
        tuple(last),
        tuple(by_depth),
        valid,
        present,
        high_end,
        lengths,
        counts,
        first_child,
        chain,
    )
