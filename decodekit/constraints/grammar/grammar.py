""":class:`Grammar`: a context-free grammar (Lark or GBNF text) as a constraint, and
:class:`GrammarAndPattern`, a grammar intersected with a regular constraint."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from functools import cached_property

from decodekit.constraints.grammar.cfg import CFG
from decodekit.errors import ConstraintError

__all__ = ["MAX_GRAMMAR_BYTES", "Grammar", "GrammarAndPattern"]

MAX_GRAMMAR_BYTES = 1 << 20  # a grammar file (or text, in UTF-8 bytes) larger is refused
SYNTAXES = ("lark", "gbnf")
_EXTENSIONS = {".lark": "lark", ".gbnf": "gbnf", ".ebnf": "gbnf"}
_GBNF_RULE = re.compile(r"^[ \t]*[A-Za-z0-9_-]+[ \t]*::=", re.M)
_NOT_CF = "the complement of a context-free language is not context-free in general"


def sniff(text: str) -> str:
    """``"gbnf"`` if ``text`` has a rule ``name ::= ...``, else ``"lark"``."""
    return "gbnf" if _GBNF_RULE.search(text) else "lark"


class Grammar:
    """A context-free grammar as a constraint: a text matches iff it is in the grammar's language
    (:mod:`decodekit.constraints.grammar.cfg`: scannerless, each terminal any full match of its
    regex, Lark's ``%ignore`` text allowed between any two terminals).

    Args:
        text: the grammar, in Lark syntax (start rule ``start``) or GBNF (start rule ``root``).
        syntax: ``"lark"``, ``"gbnf"``, or None: GBNF if the text has a ``name ::=`` rule.
        source: the name messages give (``source:line:col: ...``).
        start: the start rule (default: the syntax's).

    Reading checks everything a user can get wrong, each as a one-line :class:`ConstraintError`:
    syntax errors, undefined rules, rules the start never uses or that derive no text, an empty
    language, a terminal regex decodekit's reader refuses or that matches the empty text, and the
    limits (:data:`MAX_GRAMMAR_BYTES`, the readers' nesting and size limits).

    Attributes:
        cfg: the grammar reduced (every symbol productive and reachable).
        text, syntax, source, start: as given (``syntax`` and ``start`` resolved).

    ``grammar & Pattern(...)`` (or a regex string) is a :class:`GrammarAndPattern`; ``~grammar``
    and ``grammar & grammar`` are refused (neither is context-free in general).
    """

    _takes_pattern_and = True  # Pattern & Grammar defers to Grammar.__rand__

    def __init__(
        self, text: str, syntax: str | None = None, *, source: str = "<grammar>", start: str | None = None
    ):
        from decodekit.constraints.grammar.reduce import check_terminals, reduce

        if not isinstance(text, str):
            raise ConstraintError(f"{source}: a grammar is text (str), not {type(text).__name__}")
        if len(text) > MAX_GRAMMAR_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_GRAMMAR_BYTES:
            raise ConstraintError(
                f"{source}: the grammar is larger than {MAX_GRAMMAR_BYTES:,} bytes (the limit)"
            )
        if syntax is None:
            syntax = sniff(text)
        if syntax not in SYNTAXES:
            raise ConstraintError(f"{source}: unknown grammar syntax {syntax!r} (known: lark, gbnf)")
        self.text, self.syntax, self.source = text, syntax, source
        try:
            if syntax == "gbnf":
                from decodekit.constraints.grammar.gbnf import read_gbnf

                raw = read_gbnf(text, source)
                if start is not None and start != raw.start:
                    raw = CFG(start, raw.rules, raw.terminals, raw.ignore, raw.source, raw.where)
            else:
                from decodekit.constraints.grammar.lark_reader import read_lark

                raw = read_lark(text, source, start or "start")
            check_terminals(raw)
            self.cfg: CFG = reduce(raw, strict=True)
        except RecursionError:  # a last resort: the readers bound nesting before any recursion
            raise ConstraintError(f"{source}: the grammar nests too deeply") from None
        self.start = self.cfg.start
        self._rules_written = len(raw.where)

    @classmethod
    def from_file(cls, path, syntax: str | None = None, *, start: str | None = None) -> Grammar:
        """Read the grammar in the file at ``path`` (a regular file of at most
        :data:`MAX_GRAMMAR_BYTES` bytes, UTF-8); ``syntax`` from the extension (``.lark``;
        ``.gbnf`` or ``.ebnf``: GBNF) or else the content."""
        name = os.fspath(path)
        try:
            st = os.stat(name)
            if not stat.S_ISREG(st.st_mode):
                raise ConstraintError(f"{name}: not a regular file")
            if st.st_size > MAX_GRAMMAR_BYTES:
                raise ConstraintError(
                    f"{name}: the grammar file is larger than {MAX_GRAMMAR_BYTES:,} bytes (the limit)"
                )
            fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # replaced since the stat
                    raise ConstraintError(f"{name}: not a regular file")
                data = f.read(MAX_GRAMMAR_BYTES + 1)
        except OSError as e:
            raise ConstraintError(f"{name}: cannot read the grammar: {e.strerror or e}") from None
        if len(data) > MAX_GRAMMAR_BYTES:
            raise ConstraintError(
                f"{name}: the grammar file is larger than {MAX_GRAMMAR_BYTES:,} bytes (the limit)"
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConstraintError(f"{name}: the grammar is not UTF-8 (byte {e.start})") from None
        if syntax is None:
            syntax = _EXTENSIONS.get(os.path.splitext(name)[1].lower())
        return cls(text, syntax, source=name, start=start)

    @cached_property
    def regular(self) -> CFG:
        """:attr:`cfg` with its regular parts made terminals
        (:func:`~decodekit.constraints.grammar.regular.inline_regular`): what the engine reads."""
        from decodekit.constraints.grammar.regular import inline_regular

        return inline_regular(self.cfg, reduced=True)

    def __repr__(self) -> str:
        return (
            f"Grammar(syntax={self.syntax!r}, source={self.source!r}, start={self.start!r}, "
            f"nonterminals={len(self.cfg.nonterminals)}, terminals={len(self.cfg.terminals)})"
        )

    def __eq__(self, other) -> bool:
        if not isinstance(other, Grammar):
            return NotImplemented
        return (self.syntax, self.start, self.text) == (other.syntax, other.start, other.text)

    def __hash__(self) -> int:
        return hash((Grammar, self.syntax, self.start, self.text))

    def describe(self, max_lines: int = 40) -> str:
        """A few lines: the sizes, then the rules as the engine reads them (regular parts made
        terminals), cut after ``max_lines``."""
        from decodekit.constraints.grammar.render import draw

        cfg, reg = self.cfg, self.regular
        head = [
            f"grammar {self.source} ({'GBNF' if self.syntax == 'gbnf' else 'Lark'}), start '{self.start}'",
            f"  {self._rules_written} rules written; as BNF: {len(cfg.rules)} rules over "
            f"{len(cfg.nonterminals)} nonterminals and {len(cfg.terminals)} terminals",
            f"  regular parts as terminals: {len(reg.rules)} rules over {len(reg.nonterminals)} nonterminals "
            f"and {len(reg.terminals)} terminals"
            + (f"; ignored between terminals: {', '.join(cfg.ignore)}" if cfg.ignore else ""),
        ]
        return "\n".join(head + [draw(reg, max_lines=max_lines)])

    def __invert__(self):
        raise ConstraintError(f"{_NOT_CF}: ~grammar is not supported (intersect with ~Pattern(...) instead)")

    def __and__(self, other) -> GrammarAndPattern:
        return GrammarAndPattern.of(self, other)

    __rand__ = __and__


@dataclass(frozen=True)
class GrammarAndPattern:
    """The texts in ``grammar``'s language that also fully match ``pattern`` (a context-free
    language intersected with a regular one is context-free)."""

    grammar: Grammar
    pattern: object  # a decodekit Pattern

    _takes_pattern_and = True

    @classmethod
    def of(cls, grammar: Grammar, other) -> GrammarAndPattern:
        from decodekit.constraints.automata.pattern import Pattern

        if isinstance(other, (Grammar, GrammarAndPattern)):
            raise ConstraintError(
                "the intersection of two context-free languages is not context-free in general: "
                "grammar & grammar is not supported"
            )
        if isinstance(other, str):
            from decodekit.constraints.syntax.parser import parse

            parse(other)  # a bad regex is a one-line error now, not at compile time
            other = Pattern(other)
        if not isinstance(other, Pattern):
            raise ConstraintError(
                f"a grammar intersects a Pattern or a regex string, not {type(other).__name__}"
            )
        return cls(grammar, other)

    def __and__(self, other) -> GrammarAndPattern:
        if isinstance(other, (Grammar, GrammarAndPattern)):
            return GrammarAndPattern.of(self.grammar, other)  # refused
        return GrammarAndPattern.of(
            self.grammar, GrammarAndPattern.of(self.grammar, other).pattern & self.pattern
        )

    __rand__ = __and__

    def __invert__(self):
        raise ConstraintError(f"{_NOT_CF}: ~(grammar & pattern) is not supported")
