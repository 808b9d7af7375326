"""What the syntax stage reads after a backslash and inside a class: ``regex``'s ``parse_escape``
and its set items, as named items (:data:`~decodekit.constraints.syntax.nodes.Item`)."""

from __future__ import annotations

import unicodedata

from decodekit.constraints.syntax.flags import ASCII, LOCALE
from decodekit.constraints.syntax.nodes import Anchor, Assert, Char, Item, Pred, Range, Scan
from decodekit.constraints.syntax.scanner import ALNUM, ALPHA, DIGITS, HEX, OCT, Refusal, Scanner
from decodekit.constraints.syntax.unicode import CODE_POINTS

_NAMED_CHAR_PART = ALNUM | frozenset(" -")
_PROPERTY_NAME_PART = ALNUM | frozenset(" &_-.")
_PROPERTY_VALUE_PART = ALNUM | frozenset(" &_-./")
_CHARACTER_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_PREDICATE_ESCAPES = {"w": ("w", False), "W": ("w", True), "d": ("d", False), "D": ("d", True)}
_PREDICATE_ESCAPES |= {"s": ("s", False), "S": ("s", True)}
_HEX_LENGTHS = {"x": 2, "u": 4, "U": 8}
_HINTS = {
    "K": "the whole text must match: remove it",
    "m": "start of a word: write \\b",
    "M": "end of a word: write \\b",
}
# escapes whose reading the parser does not prove equal to regex's: a parse with one of them is
# checked by regex.compile too (_Parser.core)
_OUTSIDE_CORE = frozenset("gGLNpPRXhKmM0123456789")
BACKREF_HINT = "(a finite automaton cannot remember text: repeat the group's pattern instead)"


class ItemReader(Scanner):
    """Reads escapes and class members (``flags``, ``ascii``: the parser's flags in force)."""

    flags: int
    ascii: bool
    core: bool

    def _escape(self, in_set: bool) -> Item:
        """regex's parse_escape: a :class:`Char`, :class:`Pred`, :class:`Scan` or (outside a class)
        :class:`Assert`."""
        saved_ignore = self.ignore_space
        self.ignore_space = False
        at = self.pos - 1
        ch = self.get()
        self.ignore_space = saved_ignore
        if not ch:
            raise Refusal("syntax", "bad escape (end of pattern)", self.pos)
        if ch in _HEX_LENGTHS:
            return self._hex(ch, _HEX_LENGTHS[ch])
        if ch in _OUTSIDE_CORE:
            self.core = False
        if ch == "g" and not in_set:
            saved = self.pos
            try:
                self.expect("<")
                self._name(allow_numeric=True)
                self.expect(">")
            except Refusal:
                self.pos = saved
                return Char(ord("g"))
            raise Refusal("unsupported", f"back-references at position {at} " + BACKREF_HINT)
        if ch == "G" and not in_set:
            return Assert(Anchor.START)  # the search anchor: position 0 of a full match
        if ch == "L" and not in_set:
            raise Refusal("unsupported", f"named lists \\L<...> at position {at} (write the alternation out)")
        if ch == "N":
            saved = self.pos
            if self.match("{"):
                name = self.get_while(_NAMED_CHAR_PART, keep_spaces=True)
                if self.match("}"):
                    try:
                        return Char(ord(unicodedata.lookup(name)))
                    except KeyError:
                        raise Refusal("syntax", "undefined character name", self.pos) from None
            self.pos = saved
            return Char(ord("N"))
        if ch in "pP":
            return self._property(ch == "p", in_set)
        if ch == "R" and not in_set:
            raise Refusal(
                "unsupported",
                f"\\R at position {at} (it is an atomic group)",
            )
        if ch == "X" and not in_set:
            raise Refusal("unsupported", f"grapheme clusters \\X at position {at} (use . or a class)")
        if ch in ALPHA:
            if not in_set:
                if ch == "A":
                    return Assert(Anchor.START)
                if ch in "Zz":
                    return Assert(Anchor.END)
                if ch in "bB":
                    if self.ascii:
                        raise Refusal(
                            "unsupported",
                            "\\b and \\B with the ASCII flag (?a) (drop (?a), or spell ASCII classes out)",
                        )
                    return Assert(Anchor.WORD_BOUNDARY if ch == "b" else Anchor.NOT_WORD_BOUNDARY)
                if ch in "KmM":
                    raise Refusal("unsupported", f"\\{ch} at position {at} ({_HINTS[ch]})")
            if ch in _PREDICATE_ESCAPES:
                if self.ascii:  # ASCII \w \d \s: the characters themselves
                    return Scan(f"\\{ch}")
                return Pred(*_PREDICATE_ESCAPES[ch])
            if ch == "h":
                return Scan("\\h")
            if ch in _CHARACTER_ESCAPES:
                return Char(ord(_CHARACTER_ESCAPES[ch]))
            raise Refusal("syntax", f"bad escape \\{ch}", self.pos)
        if ch in DIGITS:
            return self._numeric_escape(ch, in_set, at)
        return Char(ord(ch))

    def _hex(self, esc: str, length: int):
        saved = self.pos
        digits = []
        for _ in range(length):
            c = self.get()
            if not c or c not in HEX:
                raise Refusal("syntax", f"incomplete escape \\{esc}{''.join(digits)}", saved)
            digits.append(c)
        value = int("".join(digits), 16)
        if value >= CODE_POINTS:
            raise Refusal("syntax", f"bad hex escape \\{esc}{''.join(digits)}", saved)
        return Char(value)

    def _numeric_escape(self, ch: str, in_set: bool, at: int):
        if in_set or ch == "0":
            digits = [ch]
            saved = self.pos
            c = self.get()
            while len(digits) < 3 and c and c in OCT:
                digits.append(c)
                saved = self.pos
                c = self.get()
            self.pos = saved
            if digits[0] not in OCT:
                raise Refusal("syntax", f"bad escape \\{digits[0]}", self.pos)
            return Char(int("".join(digits), 8))
        digits = ch
        saved = self.pos
        c = self.get()
        if c and c in DIGITS:
            digits += c
            saved = self.pos
            c = self.get()
            if all(d in OCT for d in digits) and c and c in OCT:
                mask = 0xFF if self.flags & (ASCII | LOCALE) else 0x1FF
                return Char(int(digits + c, 8) & mask)
        self.pos = saved
        raise Refusal("unsupported", f"back-references at position {at} " + BACKREF_HINT)

    def _property(self, positive: bool, in_set: bool):
        saved = self.pos
        ch = self.get()
        letter = "p" if positive else "P"
        if ch == "{":
            negate = self.match("^")
            prop, name = self._property_name()
            if self.match("}"):
                body = ("^" if negate else "") + (f"{prop}={name}" if prop is not None else name)
                return Scan(f"[\\{letter}{{{body}}}]" if in_set else f"\\{letter}{{{body}}}")
        elif ch and ch in "CLMNPSZ":
            return Scan(f"[\\{letter}{ch}]" if in_set else f"\\{letter}{ch}")
        self.pos = saved
        return Char(ord(letter))

    def _property_name(self):
        name = self.get_while(_PROPERTY_NAME_PART)
        saved = self.pos
        ch = self.get()
        if ch and ch in ":=":
            value = self.get_while(_PROPERTY_VALUE_PART).strip()
            if value:
                return name, value
            self.pos = saved
            return None, name
        self.pos = saved
        return None, name

    def _set_member(self) -> list[Item]:
        first = self._set_item()
        if not isinstance(first, Char) or not self.match("-"):
            return [first]
        saved = self.pos
        if self.match("]"):
            self.pos = saved
            return [first, Char(ord("-"))]
        last = self._set_item()
        if not isinstance(last, Char):
            return [first, Char(ord("-")), last]
        if first.cp > last.cp:
            raise Refusal("syntax", "bad character range", self.pos)
        return [first] if first.cp == last.cp else [Range(first.cp, last.cp)]

    def _set_item(self) -> Item:
        if self.match("\\"):
            return self._escape(True)
        saved = self.pos
        if self.match("[:"):
            self.core = False
            negate = self.match("^")
            prop, name = self._property_name()
            if self.match(":]"):
                body = ("^" if negate else "") + (f"{prop}={name}" if prop is not None else name)
                return Scan(f"[[:{body}:]]")
            self.pos = saved
        ch = self.get()
        if not ch:
            raise Refusal("syntax", "unterminated character set", self.pos)
        return Char(ord(ch))
