"""The one form every grammar reader produces and the engine reads: :class:`CFG`.

The language of a :class:`CFG` (scannerless, what ``lark.Lark(text, parser="earley",
lexer="dynamic_complete")`` parses): a text t is in it iff t = i0 w1 i1 w2 ... wn in where the
terminal names T1 ... Tn of some derivation of ``start`` (after every rule is expanded) have
``regex.fullmatch(terminals[Tk].pattern, wk)`` for each k, and each ik is a (possibly empty)
concatenation of texts of the ``ignore`` terminals. No lexer decides between terminals: every
split of the text into lexemes counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Terminal:
    """A terminal: ``pattern`` in Python ``regex`` syntax (flags inline, e.g. ``(?i:select)``),
    matched against a whole lexeme; ``where`` = (line, column) of its definition, 1-based, or
    None for one made by a reader (a string literal inside a rule). ``expression``: the same
    language as a :class:`~decodekit.constraints.automata.pattern.Pattern` over other terminals'
    regexes (a run of them made one terminal, :mod:`~decodekit.constraints.grammar.regular`), so
    that the engine reads each regex once; None: the engine reads ``pattern``."""

    name: str
    pattern: str
    where: tuple[int, int] | None = None
    expression: object = None


@dataclass(frozen=True)
class Rule:
    """One alternative ``lhs -> rhs``; ``rhs`` names nonterminals (symbols with rules) and
    terminals (keys of :attr:`CFG.terminals`); ``()`` is the empty alternative."""

    lhs: str
    rhs: tuple[str, ...]


@dataclass(frozen=True)
class CFG:
    """A context-free grammar over terminals with regular languages (module docstring).

    Attributes:
        start: the start nonterminal.
        rules: every alternative, BNF (repetition and options already expanded into rules).
        terminals: name -> :class:`Terminal`; a name is a terminal iff it is a key here.
        ignore: names of terminals allowed between any two terminals (and before the first,
            after the last): Lark's ``%ignore``.
        source: the file name or ``"<grammar>"``, for messages (``source:line:col: ...``).
        where: nonterminal name -> (line, column) of its definition, for messages.
    """

    start: str
    rules: tuple[Rule, ...]
    terminals: Mapping[str, Terminal]
    ignore: tuple[str, ...] = ()
    source: str = "<grammar>"
    where: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def nonterminals(self) -> tuple[str, ...]:
        """The names with rules, in order of first definition."""
        return tuple(dict.fromkeys(r.lhs for r in self.rules))


def at(source: str, where: tuple[int, int] | None) -> str:
    """The ``source:line:col: `` prefix of a message (``source: `` when the place is unknown)."""
    return f"{source}: " if where is None else f"{source}:{where[0]}:{where[1]}: "


def line_col(text: str, offset: int) -> tuple[int, int]:
    """The 1-based (line, column) of ``text[offset]``."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
