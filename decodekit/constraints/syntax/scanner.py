"""The syntax stage's scanner: ``regex``'s ``Source`` (the pattern text read character by
character, verbose whitespace and ``#`` comments skipped under ``(?x)``), and :class:`Refusal`, how
every part of the reader says no."""

from __future__ import annotations

DIGITS = frozenset("0123456789")
OCT = frozenset("01234567")
HEX = frozenset("0123456789abcdefABCDEF")
ALPHA = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
ALNUM = ALPHA | DIGITS


class Refusal(Exception):
    """Internal: the pattern is refused. ``kind``: syntax / unsupported / budget / anchor."""

    def __init__(self, kind: str, message: str, pos: int | None = None):
        super().__init__(message)
        self.kind, self.message, self.pos = kind, message, pos


class Scanner:
    """The position in the pattern ``s`` and the reading operations of ``regex``'s ``Source``."""

    def __init__(self, pattern: str):
        self.s = pattern
        self.n = len(pattern)
        self.pos = 0
        self.ignore_space = False  # (?x) in force: whitespace and comments are skipped

    def _skip(self, pos: int) -> int:
        s, n = self.s, self.n
        while pos < n:
            c = s[pos]
            if c.isspace():
                pos += 1
            elif c == "#":
                j = s.find("\n", pos)
                if j < 0:
                    return n
                pos = j
            else:
                break
        return pos

    def get(self, override: bool = False) -> str:
        pos = self._skip(self.pos) if self.ignore_space and not override else self.pos
        if pos >= self.n:
            self.pos = min(pos, self.n)
            return ""
        self.pos = pos + 1
        return self.s[pos]

    def peek(self) -> str:
        pos = self._skip(self.pos) if self.ignore_space else self.pos
        return self.s[pos] if pos < self.n else ""

    def match(self, sub: str) -> bool:
        if not self.ignore_space:
            if self.s.startswith(sub, self.pos):
                self.pos += len(sub)
                return True
            return False
        pos = self.pos
        for c in sub:
            pos = self._skip(pos)
            if pos >= self.n or self.s[pos] != c:
                return False
            pos += 1
        self.pos = pos
        return True

    def expect(self, sub: str) -> None:
        if not self.match(sub):
            raise Refusal("syntax", f"missing {sub}", self.pos)

    def get_while(self, allowed, keep_spaces: bool = False) -> str:
        """The characters from here that are in ``allowed`` (verbose space skipped unless ``keep_spaces``)."""
        return self._get_run(allowed, True, keep_spaces)

    def get_until(self, stop) -> str:
        """The characters from here up to one in ``stop`` (verbose space skipped)."""
        return self._get_run(stop, False, False)

    def _get_run(self, chars, inside: bool, keep_spaces: bool) -> str:
        s, n = self.s, self.n
        pos = self.pos
        out = []
        while pos < n:
            c = s[pos]
            if self.ignore_space and not keep_spaces and (c.isspace() or c == "#"):
                pos = self._skip(pos)
                continue
            if (c in chars) != inside:
                break
            out.append(c)
            pos += 1
        self.pos = pos
        return "".join(out)

    def _name(self, allow_numeric: bool = False) -> str:
        name = self.get_until(set(")>"))
        if not name:
            raise Refusal("syntax", "missing group name", self.pos)
        if name.isdigit() and not allow_numeric or not name.isdigit() and not name.isidentifier():
            raise Refusal("syntax", "bad character in group name", self.pos)
        return name
