"""GBNF, as llama.cpp writes it, read into a :class:`~decodekit.constraints.grammar.cfg.CFG`.

The syntax (llama.cpp's ``grammars/README.md``): rules ``name ::= alternatives``; a rule goes on
until the next ``name ::=`` (so it may span lines anywhere, a superset of llama.cpp's layout);
string literals ``"..."`` and character classes ``[...]`` / ``[^...]`` with the escapes ``\\n \\t
\\r \\\\ \\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH`` (and ``\\-``, ``\\^``); ``.`` for any character;
groups ``( ... )``; alternation ``|``; the quantifiers ``*``, ``+``, ``?``, ``{m}``, ``{m,}``,
``{m,n}``, ``{,n}``; comments from ``#`` to the end of the line. Names are letters, digits, ``-``
and ``_``. The start symbol is ``root``.

What it makes: every distinct literal, class and ``.`` is one terminal, named by its GBNF
spelling (``"int"``, ``[a-z]``, ``.``: a name no rule can have); groups with alternatives and
quantified items become helper rules named ``rule/N`` (left-recursive for ``*`` and ``+``, as Lark
makes them); a group with one alternative is spliced into its sequence. The reader is iterative:
any nesting depth up to :data:`MAX_NESTING` costs neither recursion nor more than linear time.
"""

from __future__ import annotations

import bisect
import re

from decodekit.constraints.grammar.builder import (
    MAX_REPEAT,
    MAX_SYMBOLS,
    RuleBuilder,
    regex_char,
    regex_literal,
)
from decodekit.constraints.grammar.cfg import CFG, at
from decodekit.errors import ConstraintError

__all__ = ["MAX_NESTING", "MAX_REPEAT", "MAX_SYMBOLS", "read_gbnf"]

MAX_NESTING = 1_000  # open groups at once

_TOKEN = re.compile(
    r"""(?P<space>[ \t\r\n]+|\#[^\n]*)
      | (?P<def>::=)
      | (?P<name>[A-Za-z0-9_-]+)
      | (?P<lit>")
      | (?P<cls>\[)
      | (?P<dot>\.)
      | (?P<lp>\()
      | (?P<rp>\))
      | (?P<bar>\|)
      | (?P<quant>[*+?])
      | (?P<brace>\{\s*(?P<lo>[0-9]*)\s*(?P<comma>,)?\s*(?P<hi>[0-9]*)\s*\})""",
    re.VERBOSE,
)
_SIMPLE_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    '"': '"',
    "[": "[",
    "]": "]",
    "-": "-",
    "^": "^",
}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_CLASS_META = set("\\]^-[")


def _gbnf_char(c: str, meta: str) -> str:
    """``c`` spelled inside a GBNF literal (meta ``"\\"``) or class (meta ``"\\]^-["``)."""
    if c in meta:
        return "\\" + c
    return regex_char(c, meta=())


class _Reader(RuleBuilder):
    def __init__(self, text: str, source: str):
        super().__init__(source)
        self.text = text
        self.lines = [0] + [m.end() for m in re.finditer("\n", text)]
        self.where: dict[str, tuple[int, int]] = {}
        self.uses: dict[str, int] = {}  # a referenced name -> the offset of its first use

    # -- messages ---------------------------------------------------------------------------
    def place(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.lines, offset)
        return line, offset - self.lines[line - 1] + 1

    def error(self, offset: int, message: str) -> ConstraintError:
        return ConstraintError(at(self.source, self.place(offset)) + message)

    # -- lexing -----------------------------------------------------------------------------
    def read_char(self, pos: int, meta: str) -> tuple[str, int]:
        """One (possibly escaped) character at ``pos`` of a literal or class; its end."""
        text = self.text
        c = text[pos]
        if c != "\\":
            return c, pos + 1
        if pos + 1 >= len(text):
            raise self.error(pos, "a backslash ends the grammar")
        e = text[pos + 1]
        if e in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[e], pos + 2
        if e in _HEX_ESCAPES:
            n = _HEX_ESCAPES[e]
            digits = text[pos + 2 : pos + 2 + n]
            if len(digits) != n or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(pos, f"\\{e} needs {n} hex digits")
            cp = int(digits, 16)
            if cp > 0x10FFFF:
                raise self.error(pos, f"\\{e}{digits} is beyond the last code point U+10FFFF")
            return chr(cp), pos + 2 + n
        raise self.error(
            pos, f'unknown escape \\{e} (known: \\n \\t \\r \\\\ \\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH)'
        )

    def literal(self, pos: int) -> tuple[str | None, int]:
        """The string literal opening at ``pos``: (its terminal, None if empty; its end)."""
        text, chars, i = self.text, [], pos + 1
        while True:
            if i >= len(text):
                raise self.error(pos, "unterminated string literal")
            if text[i] == '"':
                break
            c, i = self.read_char(i, '"')
            if 0xD800 <= ord(c) <= 0xDFFF:
                raise self.error(pos, f"the literal has a lone surrogate U+{ord(c):04X}, not a character")
            chars.append(c)
        s = "".join(chars)
        if not s:
            return None, i + 1
        name = '"' + "".join(_gbnf_char(c, '\\"') for c in s) + '"'
        return self.terminal(name, regex_literal(s)), i + 1

    def char_class(self, pos: int) -> tuple[str, int]:
        """The character class opening at ``pos``: (its terminal, end)."""
        text, i = self.text, pos + 1
        negated = i < len(text) and text[i] == "^"
        i += negated
        parts: list[str] = []
        while True:
            if i >= len(text):
                raise self.error(pos, "unterminated character class")
            if text[i] == "]":
                break
            lo, i = self.read_char(i, "]")
            if text.startswith("-", i) and i + 1 < len(text) and text[i + 1] != "]":
                hi, i = self.read_char(i + 1, "]")
                if ord(hi) < ord(lo):
                    raise self.error(pos, f"class range {lo!r}-{hi!r} is reversed")
                parts.append(_class_char(lo) + "-" + _class_char(hi))
            else:
                parts.append(_class_char(lo))
        if not parts and not negated:
            raise self.error(pos, "the character class [] matches nothing")
        pattern = "(?s:.)" if not parts else "[" + "^" * negated + "".join(parts) + "]"
        return self.terminal(text[pos : i + 1] if not parts else pattern, pattern), i + 1

    # -- parsing ----------------------------------------------------------------------------
    def run(self) -> CFG:
        rule: str | None = None
        stack: list[tuple[list, list, int]] = []  # open groups: (alternatives, sequence, offset)
        kind, start, m, pos = self.token(0)
        while kind is not None:
            if kind == "name":
                after = self.token(pos)
                if after[0] == "def":
                    self.finish(rule, stack)
                    rule = m.group()
                    if rule in self.where:
                        line, col = self.where[rule]
                        raise self.error(start, f"rule '{rule}' is defined twice (first at {line}:{col})")
                    self.where[rule] = self.place(start)
                    stack = [([], [], start)]
                    kind, start, m, pos = self.token(after[3])
                    continue
            if rule is None:
                raise self.error(start, "expected a rule 'name ::= ...'")
            alts, seq, _ = stack[-1]
            if kind == "quant":
                if not seq:
                    raise self.error(start, f"{m.group()!r} follows nothing")
                lo, hi = _counts(m, self, start)
                last = seq.pop()
                symbol = self.group_symbol(rule, last[0]) if isinstance(last, tuple) else last
                seq.append(None if symbol is None else self.repeat(rule, symbol, lo, hi))
            elif kind == "name":
                self.uses.setdefault(m.group(), start)
                seq.append(m.group())
            elif kind == "lit":
                term, pos = self.literal(start)
                seq.append(term)
            elif kind == "cls":
                term, pos = self.char_class(start)
                seq.append(term)
            elif kind == "dot":
                seq.append(self.terminal(".", "(?s:.)"))
            elif kind == "lp":
                if len(stack) > MAX_NESTING:
                    raise self.error(start, f"groups nest more than {MAX_NESTING:,} deep (the limit)")
                stack.append(([], [], start))
            elif kind == "rp":
                if len(stack) == 1:
                    raise self.error(start, "')' closes no group")
                alts.append(seq)
                stack.pop()
                stack[-1][1].append(([self.flat(rule, a) for a in alts],))  # spliced or named later
            elif kind == "bar":
                alts.append(seq)
                stack[-1] = (alts, [], stack[-1][2])
            else:  # "def"
                raise self.error(start, "'::=' without a rule name before it")
            kind, start, m, pos = self.token(pos)
        self.finish(rule, stack)
        if "root" not in self.where:
            raise ConstraintError(f"{self.source}: no rule 'root' (the start symbol)")
        for name, offset in self.uses.items():
            if name not in self.where:
                raise self.error(offset, f"undefined rule '{name}'")
        return CFG("root", tuple(self.rules), self.terminals, (), self.source, self.where)

    def finish(self, rule: str | None, stack: list) -> None:
        """Close the rule being read: its alternatives become its rules."""
        if rule is None:
            return
        if len(stack) > 1:
            raise self.error(stack[-1][2], "'(' is never closed")
        alts, seq, _ = stack[0]
        alts.append(seq)
        if len(alts) == 1 and len(seq) == 1 and isinstance(seq[0], tuple):  # rule ::= ( ... | ... )
            alts = seq[0][0]
        for alt in alts:
            self.add_rule(rule, tuple(self.flat(rule, alt)))

    def flat(self, owner: str, seq: list) -> list[str]:
        """A sequence's symbols: closed groups (``(alternatives,)``, each alternative already flat)
        spliced (one alternative) or made helper rules; None (an empty repetition) dropped."""
        out: list[str] = []
        for item in seq:
            if isinstance(item, tuple):
                alts = item[0]  # already flat: made so when its ')' was read
                if len(alts) == 1:
                    out.extend(alts[0])
                else:
                    symbol = self.group_symbol(owner, alts)
                    if symbol is not None:
                        out.append(symbol)
            elif item is not None:
                out.append(item)
        return out

    def token(self, pos: int) -> tuple:
        """(kind, offset, match, end) of the token at or after ``pos`` (kind None at the end);
        a literal's or class's end is found by :meth:`literal` or :meth:`char_class`."""
        text, n = self.text, len(self.text)
        while pos < n:
            m = _TOKEN.match(text, pos)
            if m is None:
                c = text[pos]
                if c == "<":
                    raise self.error(pos, "token references <...> are not supported")
                raise self.error(pos, f"unexpected {c!r}")
            if m.lastgroup != "space":
                kind = "quant" if m.lastgroup in ("brace", "lo", "hi", "comma") else m.lastgroup
                return kind, m.start(), m, m.end()
            pos = m.end()
        return None, n, None, n


def _class_char(c: str) -> str:
    if 0xD800 <= ord(c) <= 0xDFFF:
        return f"\\u{ord(c):04x}"
    return regex_char(c, meta=_CLASS_META)


def _counts(m: re.Match, reader: _Reader, start: int) -> tuple[int, int | None]:
    q = m.group()
    if q in ("*", "+", "?"):
        return {"*": (0, None), "+": (1, None), "?": (0, 1)}[q]
    lo_text, hi_text = m.group("lo"), m.group("hi")
    lo = int(lo_text) if lo_text else 0
    hi = lo if not m.group("comma") else (int(hi_text) if hi_text else None)
    if not lo_text and not m.group("comma"):
        raise reader.error(start, f"{q!r} has no count")
    if max(lo, hi or 0) > MAX_REPEAT:
        raise reader.error(start, f"repetition count in {q!r} is above {MAX_REPEAT:,} (the limit)")
    if hi is not None and hi < lo:
        raise reader.error(start, f"{q!r} has its maximum below its minimum")
    return lo, hi


def read_gbnf(text: str, source: str = "<grammar>") -> CFG:
    """Read GBNF ``text`` (module docstring) into a :class:`CFG` whose start is ``root``.

    Raises :class:`ConstraintError` as ``source:line:col: message`` for a syntax error, an
    undefined or twice-defined rule, a group nested deeper than :data:`MAX_NESTING`, a count
    above :data:`MAX_REPEAT`, or a grammar expanding to more than :data:`MAX_SYMBOLS` symbols."""
    if not isinstance(text, str):
        raise ConstraintError(f"{source}: a GBNF grammar is text, not {type(text).__name__}")
    return _Reader(text, source).run()
