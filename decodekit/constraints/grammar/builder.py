"""What both grammar readers build with: :class:`RuleBuilder` turns groups, options and repetitions
into BNF rules of a :class:`~decodekit.constraints.grammar.cfg.CFG` (helper rules, each made once,
left-recursive for ``*`` and ``+`` as Lark makes them, nested optionals for counted repeats: linear
in the counts), and :func:`regex_literal` spells a literal text as a terminal's regex."""

from __future__ import annotations

import unicodedata

from decodekit.constraints.grammar.cfg import Rule, Terminal
from decodekit.errors import ConstraintError

__all__ = ["MAX_REPEAT", "MAX_SYMBOLS", "RuleBuilder", "regex_char", "regex_literal"]

MAX_REPEAT = 10_000  # the largest count of a repetition ({m,n} in GBNF, ~ m..n in Lark)
MAX_SYMBOLS = 200_000  # symbols on all right-hand sides, helper rules included (reading is linear in them)

_REGEX_META = set(".^$*+?{}[]\\|()")


def regex_char(c: str, meta=_REGEX_META) -> str:
    """``c`` spelled for a regex (``re`` and ``regex`` alike): metacharacters escaped, control and
    other invisible characters as ``\\xHH`` / ``\\uHHHH`` / ``\\UHHHHHHHH``."""
    if c in meta:
        return "\\" + c
    cp = ord(c)
    if c in "\n\t\r":
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}[c]
    if c == " " or (c.isprintable() and unicodedata.category(c)[0] not in "CZ"):
        return c
    if cp < 0x100:
        return f"\\x{cp:02x}"
    return f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def regex_literal(text: str) -> str:
    """A regex matching exactly ``text``."""
    return "".join(regex_char(c) for c in text)


class RuleBuilder:
    """The rules and terminals of a grammar being read (``source`` names it in messages).

    Helper rules are named ``owner/N``; a terminal made by a reader is named by its spelling."""

    def __init__(self, source: str):
        self.source = source
        self.terminals: dict[str, Terminal] = {}
        self.rules: list[Rule] = []
        self.helpers: dict[tuple, str] = {}  # (symbol, lo, hi) or alternatives -> helper rule
        self.counter: dict[str, int] = {}
        self.symbols = 0

    def add_rule(self, lhs: str, rhs: tuple[str, ...]) -> None:
        self.symbols += len(rhs) + 1
        if self.symbols > MAX_SYMBOLS:
            raise ConstraintError(
                f"{self.source}: the grammar expands to more than {MAX_SYMBOLS:,} symbols (the limit)"
            )
        self.rules.append(Rule(lhs, rhs))

    def helper(self, owner: str) -> str:
        n = self.counter.get(owner, 0) + 1
        self.counter[owner] = n
        return f"{owner}/{n}"

    def terminal(self, name: str, pattern: str, where: tuple[int, int] | None = None) -> str:
        if name not in self.terminals:
            self.terminals[name] = Terminal(name, pattern, where)
        return name

    def group_symbol(self, owner: str, alts: list[list[str]]) -> str | None:
        """The symbol for a group of alternatives (None: the group is the empty text)."""
        if len(alts) == 1 and len(alts[0]) == 1:
            return alts[0][0]
        if all(not a for a in alts):
            return None
        key = ("alts", tuple(tuple(a) for a in alts))
        if key not in self.helpers:
            name = self.helpers[key] = self.helper(owner)
            for alt in dict.fromkeys(tuple(a) for a in alts):
                self.add_rule(name, alt)
        return self.helpers[key]

    def repeat(self, owner: str, symbol: str, lo: int, hi: int | None) -> str | None:
        """The symbol for ``symbol{lo,hi}`` (None: the empty text)."""
        if hi == 0:
            return None
        if (lo, hi) == (1, 1):
            return symbol
        key = (symbol, lo, hi)
        if key in self.helpers:
            return self.helpers[key]
        name = self.helper(owner)
        if hi is None and lo <= 1:  # S -> S x | x (or the empty text): left recursion, as Lark
            self.add_rule(name, (name, symbol))
            self.add_rule(name, (symbol,) if lo else ())
        elif hi is None:
            self.add_rule(name, (symbol,) * lo + (self.repeat(owner, symbol, 0, None),))
        else:  # lo copies, then hi - lo nested optionals: O_k -> x O_(k-1) | ()
            tail = None
            for k in range(1, hi - lo + 1):
                opt = self.helper(owner) if k < hi - lo or lo else name
                self.add_rule(opt, (symbol,) + ((tail,) if tail else ()))
                self.add_rule(opt, ())
                tail = opt
            if lo:
                self.add_rule(name, (symbol,) * lo + ((tail,) if tail else ()))
        self.helpers[key] = name
        return name
