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


class LexemeHorizons:
    """``after(q, t)`` (module docstring) for one grammar's lexer over one vocabulary, each pair
    walked once on first need and kept.

    Args:
        lexer: the grammar's :class:`~decodekit.constraints.automata.lazybytes.LazyBytes`.
        live: [M] lexer states -> [M] bool, which can still complete their terminal.
        starts: per terminal, its first lexer state (-1: no token can begin it).
        follows: per terminal, the terminals that may begin right after it.
        vocab: the vocabulary's trie.
    """

    def __init__(self, lexer, live, starts: list[int], follows: list, vocab: EncodedVocab) -> None:
        self.lexer, self.live, self.vocab = lexer, live, vocab
        # per terminal: its followers' first lexer states and their terminals, as arrays
        self._next = []
        for after in follows:
            us = [u for u in sorted(after) if starts[u] >= 0]
            self._next.append(
                (np.array([starts[u] for u in us], dtype=np.int64), np.array(us, dtype=np.int64))
            )
        self._firsts: np.ndarray | None = None  # [T, 4] uint64: the bytes that begin a follower of t
        self._memo: dict[tuple[int, int], int] = {}
        self._deepest: dict[int, int] = {}  # lexer state -> the deepest node a token keeps it alive to
        self._reads: dict[int, object] = {}

    def after(self, q: int, t: int) -> int:
        """The most lexemes a token can begin after the lexeme of terminal t in lexer state q
        completes within it (module docstring)."""
        got = self._memo.get((q, t))
        if got is None:
            got = self._memo[(q, t)] = self._walk(q, t)
        return got

    def reads(self, q: int, t: int):
        """A key equal for lexer states that every token reads alike from the root of the trie:
        the lexer's :meth:`~decodekit.constraints.automata.lazybytes.LazyBytes.row_key` one byte
        past the deepest node a token keeps the lexeme alive to (a JSON indentation's
        ``[ \\t]{0,20}`` after 3 or after 4 spaces, when no token holds more than 2), else q."""
        got = self._reads.get(q)
        if got is None:
            self.after(q, t)  # its walk measures the depth
            got = self.lexer.row_key(q, self._deepest[q] + 1)
            got = self._reads[q] = ("state", q) if got is None else ("reads", got)
        return got

    def _walk(self, q: int, t: int) -> int:
        """Walkers (node, lexer state, terminal, lexemes begun), depth by depth, each distinct
        (node, state, terminal) once with its most lexemes. A walker that cannot beat the best
        found (a lexeme takes a byte: its node's height bounds what it can add) is dropped, and so
        is one whose state every byte below its node keeps without accepting (a string's body):
        no lexeme ends, so none begins, below it. Followers begin only where a byte below the node
        can begin one; a walker kept by every byte below that accepts (an identifier's letters)
        is dropped where none can."""
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
            can_follow = done & (height > 0) & (count + height > best)
            if can_follow.any():
                below = enc.subtrees.below[d - 1][node]
                can_follow &= (below & self._first_bytes()[term]).any(axis=1)
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
                first, which = self._next[u]
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
            # each (node, state, terminal) once, with its most lexemes
            packed = (node * width + state) * len(self._next) + term
            order = np.lexsort((-count, packed))
            packed = packed[order]
            first_of = order[np.r_[True, packed[1:] != packed[:-1]]]
            node, state, term, count = node[first_of], state[first_of], term[first_of], count[first_of]
        self._deepest[q] = max(deepest, self._deepest.get(q, 0))
        return best

    def _first_bytes(self) -> np.ndarray:
        """[T, 4] uint64, per terminal: bit b set iff byte b begins a live lexeme of one of its
        followers (made on first need from the lexer's rows of their first states)."""
        if self._firsts is None:
            every = np.arange(256, dtype=np.int64)
            firsts = np.zeros((len(self._next), 4), dtype=np.uint64)
            begins: dict[int, np.ndarray] = {}
            for t, (starts, _) in enumerate(self._next):
                for q in starts.tolist():
                    if q not in begins:
                        self.lexer.fill(np.full(256, q, dtype=np.int64), every)
                        live = self.live(self.lexer.table[q].astype(np.int64))
                        begins[q] = np.packbits(live, bitorder="little").view("<u8")
                    firsts[t] |= begins[q]
            self._firsts = firsts
        return self._firsts

    def _accepting(self, states: np.ndarray) -> np.ndarray:
        """bool [M]: which lexer states accept."""
        uniq, inverse = np.unique(states, return_inverse=True)
        accept = np.array([self.lexer.accepting(int(s)) for s in uniq.tolist()], dtype=bool)
        return accept[inverse.reshape(-1)]
