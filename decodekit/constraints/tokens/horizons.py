"""How far into a token the parse around a lexeme can matter: :class:`LexemeHorizons`.

A grammar state's mask row depends on the sets its lexemes refer to (their origins) only through
what a token's bytes read after a lexeme completes. For a lexeme of terminal t in lexer state q,
``after(q, t)`` bounds that over the vocabulary's trie: the most lexemes any token can begin
after a point where the lexeme from q completes. After t completes, the next byte begins one of
t's followers (the terminals that may begin right after it); after that one completes, one of
its own followers; bytes that no such chain of lexemes reads kill the parse whatever the origin
holds. So the trie is read by walkers (node, lexer state, terminal, lexemes begun since t
completed): the lexeme from q first, and wherever a walker's lexeme accepts, one walker per
follower of its terminal, one lexeme more.

The origin is consulted only as deep as that many lexemes reach
(:meth:`~decodekit.constraints.grammar.earley.GrammarBytes.row_key`), so two positions whose
parses differ only deeper share one row: past a JSON string's closing quote a token holds at
most a separator (``",``), and past a ``[`` a number, so both key on one level of their context
instead of every level the longest token's bytes could close.
"""

from __future__ import annotations

import numpy as np

from decodekit.constraints.tokens.trie import EncodedVocab

MAX_FOLLOWERS = 64  # past this many followers of a terminal its horizon is not walked: unbounded
UNBOUNDED = 1 << 30  # no bound from the vocabulary (the caller's own applies)


class LexemeHorizons:
    """``after(q, t)`` (module docstring) for one grammar's lexer over one vocabulary, each pair
    walked once on first need and kept.

    Args:
        lexer: the grammar's :class:`~decodekit.constraints.automata.lazybytes.LazyBytes`.
        live: [M] lexer states -> [M] bool, which can still complete their terminal.
        starts: per terminal, its first lexer state (-1: no token can begin it).
        follows: per terminal, the bitset of the terminals that may begin right after it.
        vocab: the vocabulary's trie.
    """

    def __init__(self, lexer, live, starts: list[int], follows: list[int], vocab: EncodedVocab) -> None:
        self.lexer, self.live, self.vocab = lexer, live, vocab
        self.starts, self.follows = starts, follows
        self._next: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # t -> its followers' (starts, terminals)
        self._firsts: dict[int, np.ndarray] = {}  # t -> [4] uint64: the bytes that begin a follower
        self._begins: dict[int, np.ndarray] = {}  # lexer state -> [4] uint64: the bytes it reads alive
        self._memo: dict[tuple[int, int], int] = {}  # (lexer state, followers' bitset) -> after
        self._alike: dict[tuple[object, int], int] = {}  # (reads key, followers' bitset) -> after
        self._deepest: dict[int, int] = {}  # lexer state -> the deepest node a token keeps it alive to
        self._reads: dict[int, object] = {}
        self.walks_skipped = 0  # lexer states whose depth was read off an alike state's (reads)
        # terminal t -> n -> row_key(q, n) of t's walked lexer states q whose deepest node is n - 1
        self._walked_keys: dict[int, dict[int, set]] = {}

    def after(self, q: int, t: int) -> int:
        """The most lexemes a token can begin after the lexeme of terminal t in lexer state q
        completes within it (module docstring). Walked once per (:meth:`reads` key, followers):
        lexer states that tokens read alike end their lexemes at the same nodes, and terminals
        with the same followers walk alike from there (a JSON indentation's states, one per
        depth, share one walk)."""
        key = (q, self.follows[t])
        got = self._memo.get(key)
        if got is None:
            if self.follows[t].bit_count() > MAX_FOLLOWERS:  # a walker per follower at every node: too many
                got = UNBOUNDED
            else:
                alike = (self.reads(q, t), self.follows[t])
                got = self._alike.get(alike)
                if got is None:
                    got = self._alike[alike] = self._walk(q, t)
            self._memo[key] = got
        return got

    def reads(self, q: int, t: int):
        """A key equal for lexer states that every token reads alike from the root of the trie:
        the lexer's :meth:`~decodekit.constraints.automata.lazybytes.LazyBytes.row_key` one byte
        past the deepest node a token keeps the lexeme alive to (a JSON indentation's
        ``[ \\t]{0,20}`` after 3 or after 4 spaces, when no token holds more than 2), else q.
        The depth is measured by a walk of the lexeme alone (no followers), unless q reads the
        next n bytes as a state already walked whose deepest node is at n - 1 (its
        ``row_key(., n)`` equal): the tokens then keep q alive at the same nodes, so to the same
        depth, and the walk is skipped (a JSON indentation's new depth costs a key, not a walk)."""
        got = self._reads.get(q)
        if got is None:
            got = None if q in self._deepest else self._as_walked(q, t)
            if got is None:
                if q not in self._deepest:
                    self._walk(q, t, followers=False)
                n = self._deepest[q] + 1
                got = self.lexer.row_key(q, n)
                if got is not None:
                    self._walked_keys.setdefault(t, {}).setdefault(n, set()).add(got)
            got = self._reads[q] = ("state", q) if got is None else ("reads", got)
        return got

    def _as_walked(self, q: int, t: int):
        """q's lexer key one byte past the deepest node of a walked state of terminal t that reads
        alike that far (:meth:`reads`), its depth noted; None when no such state does."""
        for n, keys in self._walked_keys.get(t, {}).items():
            got = self.lexer.row_key(q, n)
            if got is not None and got in keys:
                self._deepest[q] = n - 1
                self.walks_skipped += 1
                return got
        return None

    def _walk(self, q: int, t: int, followers: bool = True) -> int:
        """Walkers (node, lexer state, terminal, lexemes begun), depth by depth, each distinct
        (node, state, terminal) once with its most lexemes; the lexeme's own walkers apart, kept
        to the deepest node they reach (:meth:`reads`). A follower walker that cannot beat the
        best found (a lexeme takes a byte: its node's height bounds what it can add) is dropped,
        and so is any walker whose state every byte below its node keeps without accepting (a
        string's body): no lexeme ends, so none begins, below it. Followers begin only where a
        byte below the node can begin one; a walker that every byte below keeps and that accepts
        (an identifier's letters) is dropped where none can. Without ``followers``, the lexeme
        alone: only its depth is measured."""
        enc, lexer, heights = self.vocab, self.lexer, self.vocab.heights
        one = np.zeros(1, dtype=np.int64)
        node, state, term, count = one, one + q, one + t, one
        best, deepest, width = 0, 0, np.int64(max(lexer.size, 1))
        for d in range(1, len(enc.by_depth)):
            child, counts, nxt = enc.step_children(d, node, state, lexer)
            if not len(child):
                break
            term, count, nxt = np.repeat(term, counts), np.repeat(count, counts), nxt.astype(np.int64)
            keep = np.flatnonzero(self.live(nxt))
            node, state, term, count = child[keep], nxt[keep], term[keep], count[keep]
            if not len(node):
                break
            best = max(best, int(count.max()))
            height = heights[d - 1][node]
            done = self._accepting(state)
            whole = enc.kept_below(d, node, state, lexer.table)
            stay = count + height > best
            can_follow = done & (height > 0) & (count + height > best) & followers
            if can_follow.any():  # where a byte below can begin a follower
                at = np.flatnonzero(can_follow)
                us, which = np.unique(term[at], return_inverse=True)
                firsts = np.stack([self._first_bytes(u) for u in us.tolist()])
                below = enc.subtrees.below[d - 1][node[at]]
                can_follow[at] = (below & firsts[which.reshape(-1)]).any(axis=1)
            own = count == 0  # the lexeme itself: followed to its deepest node, whatever best is
            if own.any():
                deepest = max(deepest, d)
                stay |= own
            if whole is not None:
                if (whole & own).any():  # it reads the whole subtree
                    deepest = max(deepest, d + int(height[whole & own].max()))
                stay &= ~(whole & ~can_follow)
            begin = np.flatnonzero(can_follow)
            parts = [(node[stay], state[stay], term[stay], count[stay])]
            for u in np.unique(term[begin]).tolist():
                at = begin[term[begin] == u]
                first, which = self._followers(u)
                if len(first):
                    k = len(first)
                    parts.append(
                        (
                            np.repeat(node[at], k),
                            np.tile(first, len(at)),
                            np.tile(which, len(at)),
                            np.repeat(count[at] + 1, k),
                        )
                    )
            node, state, term, count = (np.concatenate(x) for x in zip(*parts))
            if not len(node):
                break
            # each (node, state, terminal) once, with its most lexemes; the lexeme itself apart, so
            # that its deepest node is measured even where a follower reads on in its state
            packed = ((node * width + state) * len(self.starts) + term) * 2 + (count == 0)
            order = np.lexsort((-count, packed))
            packed = packed[order]
            first_of = order[np.r_[True, packed[1:] != packed[:-1]]]
            node, state, term, count = node[first_of], state[first_of], term[first_of], count[first_of]
        self._deepest[q] = max(deepest, self._deepest.get(q, 0))
        return best

    def _followers(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Terminal t's followers that a token can begin: their first lexer states and their
        terminals, int64 arrays (made on first need)."""
        got = self._next.get(t)
        if got is None:
            bits, us = self.follows[t], []
            while bits:
                low = bits & -bits
                u = low.bit_length() - 1
                if self.starts[u] >= 0:
                    us.append(u)
                bits ^= low
            starts = np.array([self.starts[u] for u in us], dtype=np.int64)
            got = self._next[t] = (starts, np.array(us, dtype=np.int64))
        return got

    def _first_bytes(self, t: int) -> np.ndarray:
        """[4] uint64: bit b set iff byte b begins a live lexeme of one of terminal t's followers
        (made on first need from the lexer's rows of their first states)."""
        got = self._firsts.get(t)
        if got is None:
            got = np.zeros(4, dtype=np.uint64)
            every = np.arange(256, dtype=np.int64)
            for q in self._followers(t)[0].tolist():
                if q not in self._begins:
                    self.lexer.fill(np.full(256, q, dtype=np.int64), every)
                    live = self.live(self.lexer.table[q].astype(np.int64))
                    self._begins[q] = np.packbits(live, bitorder="little").view("<u8")
                got = got | self._begins[q]
            self._firsts[t] = got
        return got

    def _accepting(self, states: np.ndarray) -> np.ndarray:
        """bool [M]: which lexer states accept."""
        uniq, inverse = np.unique(states, return_inverse=True)
        accept = np.array([self.lexer.accepting(int(s)) for s in uniq.tolist()], dtype=bool)
        return accept[inverse.reshape(-1)]
