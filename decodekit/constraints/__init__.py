"""Regex constraints: compile a regex into a token-level automaton for a vocabulary.

See docs/constraints.md. ``compile_regex(pattern, token_strings, eos_id, separator)`` returns a
:class:`TokenAutomaton` whose accepted token sequences are exactly those whose text
``separator.join(token_strings)`` fully matches the pattern.
"""

from decodekit.constraints.automaton import TokenAutomaton
from decodekit.constraints.compile import (
    DEFAULT_MAX_STATES,
    as_automaton,
    check_pattern,
    clear_cache,
    compile_for_vocab,
    compile_regex,
)
from decodekit.errors import ConstraintError

__all__ = [
    "DEFAULT_MAX_STATES",
    "ConstraintError",
    "TokenAutomaton",
    "as_automaton",
    "check_pattern",
    "clear_cache",
    "compile_for_vocab",
    "compile_regex",
]
