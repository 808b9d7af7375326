"""Context-free grammars as constraints (docs/constraints.md, "Grammars").

A grammar reaches the engine as a :class:`~decodekit.constraints.grammar.cfg.CFG`: plain BNF
rules over named symbols, each terminal a regular language written in Python ``regex`` syntax,
the ``ignore`` terminals allowed between any two terminals. The readers of Lark and GBNF text
produce it; the engine (:mod:`~decodekit.constraints.grammar.earley`) turns it into byte states
built on first visit, which the one first-visit token level lifts to a vocabulary.
"""
