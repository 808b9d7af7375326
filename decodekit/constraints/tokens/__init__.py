"""Stage 4, tokens: the vocabulary's trie (``trie``), a byte DFA lifted to token level
(``lift``), the protocols the decoders see (``interface``: ``TokenConstraint``, ``StateTables``),
the dense :class:`~.automaton.TokenAutomaton` and its mask caching (``masks``), and the
:class:`~.lazy.LazyTokenAutomaton` built on first visit (``lazy``)."""
