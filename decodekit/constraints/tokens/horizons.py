"""How far into a token the parse around a lexeme can matter: :class:`LexemeHorizons`.

A grammar state's mask row depends on the sets its lexemes refer to (their origins) only through
what a token's bytes read after a lexeme completes. For a lexeme in lexer state q whose terminal's
followers (the terminals that may begin right after it) are the lexer state ``follow``,
``after(q, follow)`` bounds those bytes over the vocabulary's trie: the most bytes any token holds
after a point where the lexeme from q may complete, counting only bytes that can follow it. After
the lexeme completes, the next byte begins a follower; bytes no follower can begin or continue
kill that parse whatever the origin holds. So the walk reads the trie in two phases: the lexeme
from q until it accepts at a node, then from that node the followers until one of them
completes, and from there every byte below counts (the trie node's height).

With it :meth:`~decodekit.constraints.grammar.earley.GrammarBytes.row_key` consults each origin
only as deep as its lexeme's horizon, so two positions whose parses differ only deeper share one
row: a JSON string's body (a token may hold ``",`` at most past the closing quote) keys on two
bytes of its context instead of the longest token's.
"""

from __future__ import annotations

import numpy as np

from decodekit.constraints.tokens.trie import EncodedVocab


class LexemeHorizons:
    """``after(q, follow)`` (module docstring) for one grammar's lexer over one vocabulary, each
    pair walked once on first need and kept.

    Args:
        lexer: the grammar's :class:`~decodekit.constraints.automata.lazybytes.LazyBytes`.
        live: [M] lexer states -> [M] bool, which can still complete their terminal.
        vocab: the vocabulary's trie.
    """

    def __init__(self, lexer, live, vocab: EncodedVocab) -> None:
        self.lexer, self.live, self.vocab = lexer, live, vocab
        self._memo: dict[tuple[int, int], int] = {}

    def after(self, q: int, follow: int) -> int:
        """The most bytes a token holds after the lexeme in lexer state q completes within it,
        counting only bytes that the followers (lexer state ``follow``, -1: none) can read
        (module docstring)."""
        got = self._memo.get((q, follow))
        if got is None:
            got = self._memo[(q, follow)] = self._walk(q, follow)
        return got

    def _walk(self, q: int, follow: int) -> int:
        """The trie read from the root by walkers (node, lexer state, the depth at which the
        lexeme completed: -1 while it has not); depth by depth, each distinct walker once. A walker
        that cannot beat the best found (its node's height bounds what it can still add) is
        dropped, and so is one whose state every byte below its node keeps (a string's body): it
        reads the whole subtree, and a lexeme that does not accept there never will."""
        enc, lexer, heights = self.vocab, self.lexer, self.vocab.heights
        node, state, since = (np.zeros(1, dtype=np.int64), np.array([q], dtype=np.int64), np.full(1, -1))
        best, depths = 0, len(enc.by_depth)
        for d in range(1, depths):
            child, counts, nxt = enc.step_children(d, node, state, lexer)
            if not len(child):
                break
            since, nxt = np.repeat(since, counts), nxt.astype(np.int64)
            keep = np.flatnonzero(self.live(nxt))
            node, state, since = child[keep], nxt[keep], since[keep]
            if not len(node):
                break
            height = heights[d - 1][node]
            done, whole = self._accepting(state), enc.kept_below(d, node, state, lexer.table)
            if whole is None:
                whole = np.zeros(len(node), dtype=bool)
            following = since >= 0
            reach = np.where(following, d - since + height, height)  # the most a walker can give
            if following.any():  # bytes read after the completion; all below a follower's end or loop
                counted = np.where(done | whole, reach, d - since)[following]
                best = max(best, int(counted.max()))
            begin = done & ~following & (height > best)
            stay = (reach > best) & ~(following & (done | whole)) & ~(whole & ~done)
            spawned = node[begin] if follow >= 0 else node[:0]
            node = np.concatenate([node[stay], spawned])
            state = np.concatenate([state[stay], np.full(len(spawned), follow, dtype=np.int64)])
            since = np.concatenate([since[stay], np.full(len(spawned), d, dtype=np.int64)])
            if not len(node):
                break
            # each distinct walker once: (node, state, since) packed in one int64
            packed = (node * np.int64(max(lexer.size, 1)) + state) * (depths + 1) + since + 1
            _, first_of = np.unique(packed, return_index=True)
            node, state, since = node[first_of], state[first_of], since[first_of]
        return best

    def _accepting(self, states: np.ndarray) -> np.ndarray:
        """bool [M]: which lexer states accept."""
        uniq, inverse = np.unique(states, return_inverse=True)
        accept = np.array([self.lexer.accepting(int(s)) for s in uniq.tolist()], dtype=bool)
        return accept[inverse.reshape(-1)]
