"""What the one first-visit token level reads of a byte-level machine: :class:`ByteAutomaton`.

A producer of byte states (a regular expression's derivatives:
:class:`~decodekit.constraints.automata.lazybytes.LazyBytes`; a context-free grammar's parser
configurations: :class:`~decodekit.constraints.grammar.earley.GrammarBytes`, and paired with a
pattern's DFA states: :class:`~decodekit.constraints.grammar.intersect.GrammarPatternBytes`; an
eager byte DFA, every entry known from the start:
:class:`~decodekit.constraints.automata.eagerbytes.EagerBytes`)
numbers its states as they are reached, state 0 the initial one, -1 dead. The token level
(:class:`~decodekit.constraints.tokens.derived.DerivedTokenAutomaton`) walks the vocabulary's
trie over :attr:`table`, asks :meth:`fill` for the entries it has not seen, and reads
acceptance and the fewest bytes to acceptance; nothing else.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

UNKNOWN = -2  # a table entry not computed yet


@runtime_checkable
class ByteAutomaton(Protocol):
    """Byte states built on first visit.

    Attributes:
        table: [capacity, 256] int32, ``table[s, b]`` the state after byte b from s, -1 dead,
            :data:`UNKNOWN` not computed yet (rows past :attr:`size` unused; the array may be
            replaced as it grows: read it again after :meth:`fill` or :meth:`step`).
        finite: whether the states are finitely many (a regular expression's), so that a search
            may keep one beam per state; a context-free grammar's are not.
        entered_live: optional (absent: False); True when every state a step enters (not -1)
            reaches acceptance, so the token level skips the distances of a static row's ends
            (a reduced grammar whose symbols the vocabulary can all spell).
    """

    table: np.ndarray
    finite: bool  # whether its states are finitely many (a grammar's are not)

    @property
    def size(self) -> int:
        """The states discovered so far."""

    def step(self, s: int, b: int) -> int:
        """The state after byte b from live state s (computed and stored on first need)."""

    def fill(self, states: np.ndarray, codes: np.ndarray) -> None:
        """Compute ``table[states[i], codes[i]]`` wherever it is :data:`UNKNOWN`."""

    def accepting(self, s: int) -> bool:
        """Whether the text read to s is in the language."""

    def distance(self, s: int) -> int:
        """The fewest bytes leading s to acceptance (-1: none; then s is never entered)."""

    def lower(self, s: int) -> int:
        """A lower bound on :meth:`distance` that is cheap to ask."""

    def witness(self, s: int) -> bytes | None:
        """One shortest text leading s to acceptance (:meth:`distance` bytes), or None."""

    def row_key(self, s: int, horizon: int) -> object | None:
        """A hashable key equal for states that read the same next ``horizon`` bytes alike (the
        token level shares their rows), or None: the state is its own key."""

    def reach(self, s: int) -> int | None:
        """An upper bound on :meth:`distance` of every state one token from s, or None: the
        token level reads it off the row's walk."""

    def sizes(self) -> dict[str, int]:
        """Sizes for the constraint's ``stats``."""
