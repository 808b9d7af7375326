"""``fullmatch`` for what ``json_schema`` returns: a regex str, a Pattern, or a grammar (a
recursive schema's :class:`~decodekit.constraints.grammar.cfg.CFG`)."""

from __future__ import annotations

import regex

import decodekit
from decodekit.constraints.automata.pattern import Pattern
from decodekit.constraints.grammar.cfg import CFG
from decodekit.errors import ConstraintError


class fullmatcher:  # noqa: N801 (used as a function)
    """``regex`` for a str; for a Pattern or a grammar, its automaton over the characters of
    ``texts`` and printable ASCII (first-visit, as the masked searches build it), walked
    character by character."""

    def __init__(self, pattern, texts=()):
        self.pattern = pattern
        if isinstance(pattern, (Pattern, CFG)):
            self.chars = sorted({chr(c) for c in range(32, 127)} | {c for t in texts for c in t})
            self.ids = {c: i for i, c in enumerate(self.chars)}
            lazy = "masked" if isinstance(pattern, CFG) else None
            try:
                self.auto = decodekit.compile_regex(pattern, self.chars, lazy=lazy)
            except ConstraintError as e:  # an intersection no text satisfies: nothing matches
                assert "no text" in str(e) or "no token sequence" in str(e), str(e)
                self.auto = None

    def fullmatch(self, text: str) -> bool:
        if isinstance(self.pattern, str):
            return regex.fullmatch(self.pattern, text) is not None
        ok = self.auto is not None and all(c in self.ids for c in text)
        return ok and self.auto.accepts([self.ids[c] for c in text])
