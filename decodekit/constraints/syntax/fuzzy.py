"""regex's ``parse_fuzzy``, read only to be refused: after a ``{`` that is not a repeat count,
``a{e<=1}`` opens a fuzzy constraint (refused, a finite automaton of the text cannot express it),
anything else leaves ``{`` a literal."""

from __future__ import annotations

from decodekit.constraints.syntax.scanner import ALPHA, DIGITS, Refusal, Scanner


class _NotFuzzy(Exception):
    """Internal: a ``{`` is not a fuzzy constraint (regex's ParseError)."""


class FuzzyReader(Scanner):
    """The fuzzy-constraint reader of :class:`~decodekit.constraints.syntax.parser._Parser`."""

    def _fuzzy(self) -> None:
        """regex's parse_fuzzy: a ``{`` that is not a repeat may open a fuzzy constraint
        (``a{e<=1}``): refused. Otherwise the position is restored and ``{`` is a literal."""
        saved = self.pos
        seen: set[str] = set()
        try:
            self._fuzzy_item(seen)
            while self.match(","):
                self._fuzzy_item(seen)
        except _NotFuzzy:
            self.pos = saved
            return
        raise Refusal("unsupported", f"fuzzy matching at position {saved - 1} (write \\{{ for a brace)")

    def _fuzzy_item(self, seen: set) -> None:
        saved = self.pos
        try:
            self._cost_constraint(seen)
        except _NotFuzzy:
            self.pos = saved
            self._fuzzy_equation(seen)

    def _cost_constraint(self, seen: set) -> None:
        saved = self.pos
        ch = self.get()
        if ch and ch in ALPHA:
            self._constraint(ch, seen)
            if self._fuzzy_compare() is not None:
                self._cost_limit()
        elif ch and ch in DIGITS:
            self.pos = saved
            self._cost_limit()
            if self._fuzzy_compare() is None:
                raise _NotFuzzy
            self._constraint(self.get(), seen)
            if self._fuzzy_compare() is None:
                raise _NotFuzzy
            self._cost_limit()
        else:
            raise _NotFuzzy

    @staticmethod
    def _constraint(ch: str, seen: set) -> None:
        if ch not in "deis" or ch in seen:
            raise _NotFuzzy
        seen.add(ch)

    def _cost_limit(self) -> None:
        if not self.get_while(DIGITS):
            raise Refusal("syntax", "bad fuzzy cost limit", self.pos)

    def _fuzzy_compare(self) -> bool | None:
        if self.match("<="):
            return True
        if self.match("<"):
            return False
        return None

    def _fuzzy_equation(self, seen: set) -> None:
        if "cost" in seen:
            raise Refusal("syntax", "more than one cost equation", self.pos)
        while True:
            self.get_while(DIGITS)
            if self.get() not in "dis":
                raise _NotFuzzy
            if not self.match("+"):
                break
        if self._fuzzy_compare() is None:
            raise _NotFuzzy
        seen.add("cost")
