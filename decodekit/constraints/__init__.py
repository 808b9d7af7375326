"""Constraints (docs/constraints.md), in three nouns: a :class:`Vocabulary` (token bytes, EOS,
separator), a :class:`Compiler` for it (``.regex``, ``.expression``, ``.json_schema``,
``.grammar``) and the :class:`TokenConstraint` it returns, accepting exactly the token sequences
whose text ``separator.join(tokens)`` is in the language (``compile_regex(pattern,
token_strings, eos_id, separator)`` is the one-line convenience); the decoders read a
TokenConstraint, one beam per state needs the :class:`StateTables` refinement, and
:func:`fill_bitmask` writes any constraint's masks into a preallocated packed bitmask
(:class:`Bitmasks`: the peers' form).
Names are imported on first use (PEP 562): ``DEFAULT_MAX_STATES`` is read without importing
numpy or torch (``--help``).
"""

from __future__ import annotations

from decodekit.util.lazy import lazy_exports

DEFAULT_MAX_STATES = 100_000  # the state guard of a compile (its max_states)

_LAZY = {  # public name -> its module
    "Compiler": "decodekit.constraints.compiler",
    "ConstraintError": "decodekit.errors",
    "Grammar": "decodekit.constraints.grammar.grammar",
    "Pattern": "decodekit.constraints.automata.pattern",
    "complement": "decodekit.constraints.automata.pattern",
    "concat": "decodekit.constraints.automata.pattern",
    "excluding": "decodekit.constraints.automata.pattern",
    "repeat": "decodekit.constraints.automata.pattern",
    "intersect": "decodekit.constraints.automata.pattern",
    "union": "decodekit.constraints.automata.pattern",
    "Bitmasks": "decodekit.constraints.tokens.interface",
    "StateTables": "decodekit.constraints.tokens.interface",
    "Transitions": "decodekit.constraints.tokens.interface",
    "TokenConstraint": "decodekit.constraints.tokens.interface",
    "Vocabulary": "decodekit.constraints.compiler",
    "anderson_automaton": "decodekit.constraints.compile",
    "as_automaton": "decodekit.constraints.compile",
    "check_pattern": "decodekit.constraints.compile",
    "clear_cache": "decodekit.constraints.compile",
    "compile_for_vocab": "decodekit.constraints.compile",
    "compile_regex": "decodekit.constraints.compile",
    "describe": "decodekit.constraints.inspect",
    "fill_bitmask": "decodekit.constraints.tokens.masks",
    "json_schema": "decodekit.constraints.frontends.schema",
    "to_dot": "decodekit.constraints.inspect",
}

__all__ = ["DEFAULT_MAX_STATES", *_LAZY]


# implementation classes, no longer public (the three nouns are Vocabulary, Compiler and
# TokenConstraint): importable for a release (docs/changelog.md)
_KEPT = {
    "DerivedTokenAutomaton": "decodekit.constraints.tokens.derived",
    "LazyTokenAutomaton": "decodekit.constraints.tokens.lazy",
    "TokenAutomaton": "decodekit.constraints.tokens.automaton",
}

__getattr__, __dir__ = lazy_exports(globals(), {**_LAZY, **_KEPT})
