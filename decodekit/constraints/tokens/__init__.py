"""Stage 4, tokens: the vocabulary's trie (``trie``), a byte DFA lifted to token level
(``lift``), the dense :class:`~.automaton.TokenAutomaton` with its mask tables, and the
:class:`~.lazy.LazyTokenAutomaton` built on first visit (``lazy``)."""
