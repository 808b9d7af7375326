"""The syntax stage's named types: the AST (:class:`Node` of a :class:`Kind`), the character sets
at its leaves (:class:`CharSet`), the anchors (:class:`Anchor`) and the items the parser reads
inside and outside a class (:data:`Item`: :class:`Char`, :class:`Range`, :class:`Pred`,
:class:`Scan`, :class:`Assert`).

Each node carries ``size``, the exact number of Thompson NFA states that
:class:`decodekit.constraints.automata.chardfa._NFA` makes for it, so that a pattern's automaton
is known to fit before anything is allocated; the formula is written once, in the constructors
below (:meth:`Node.seq`, :meth:`Node.alt`, :meth:`Node.rep`, :meth:`Node.leaf`), next to what
``_NFA._fragment`` makes for each kind.
"""

from __future__ import annotations

import enum
from typing import NamedTuple


class Kind(enum.Enum):
    """What a :class:`Node` is."""

    SET = "set"  # one character of ``cset``: 2 states, one character edge
    ASSERT = "assert"  # zero-width ``anchor``: 2 states, one (assertion) edge
    SEQ = "seq"  # ``items`` one after another (none: the empty text, 1 state)
    ALT = "alt"  # one of ``items``: an entry and an exit state around them
    REP = "rep"  # ``items[0]`` repeated ``lo`` to ``hi`` times (``hi`` None: unbounded)


class Anchor(enum.Enum):
    """A zero-width assertion."""

    START = "start"  # ^ \A \G: a no-op at the start of a full match (checked to stand there)
    END = "end"  # $ \Z \z
    WORD_BOUNDARY = "wb"  # \b
    NOT_WORD_BOUNDARY = "nwb"  # \B


BOUNDARIES = (Anchor.WORD_BOUNDARY, Anchor.NOT_WORD_BOUNDARY)


class CharSet(NamedTuple):
    """What one character position matches: ``(c in chars or any predicate holds) != negated``.

    ``preds`` are ``(name, negated)`` with name ``w``, ``d`` or ``s`` (Python ``regex``'s Unicode
    ``\\w \\d \\s``). Case folding and flags are already applied."""

    chars: frozenset
    preds: tuple
    negated: bool


class Node:
    """An AST node of a :class:`Kind`: ``cset`` (SET), ``anchor`` (ASSERT), ``items`` (SEQ, ALT;
    REP: ``items[0]`` repeated ``lo`` to ``hi`` times). ``size``: its Thompson NFA states."""

    __slots__ = ("kind", "items", "lo", "hi", "size", "cset", "anchor")

    def __init__(
        self,
        kind: Kind,
        items: tuple | list = (),
        lo: int = 0,
        hi: int | None = None,
        size: int = 2,
        cset: CharSet | None = None,
        anchor: Anchor | None = None,
    ):
        self.kind, self.items, self.lo, self.hi, self.size = kind, items, lo, hi, size
        self.cset, self.anchor = cset, anchor

    @classmethod
    def leaf(cls, cset: CharSet | None = None, anchor: Anchor | None = None) -> Node:
        """A character set or an assertion: 2 states."""
        return cls(Kind.SET if anchor is None else Kind.ASSERT, size=2, cset=cset, anchor=anchor)

    @classmethod
    def seq(cls, items: tuple | list) -> Node:
        """A sequence: its parts' states (they are chained), at least 1 (the empty text)."""
        return cls(Kind.SEQ, items, size=max(1, sum(x.size for x in items)))

    @classmethod
    def alt(cls, branches: tuple | list) -> Node:
        """An alternation: an entry and an exit state around the branches."""
        return cls(Kind.ALT, branches, size=2 + sum(b.size for b in branches))

    @staticmethod
    def rep_size(base: Node, lo: int, hi: int | None) -> int:
        """A repetition's states: an entry (and with ``hi``, an exit) around ``lo + 1`` copies of
        ``base`` (unbounded: the last one loops) or ``hi`` copies."""
        return 1 + (lo + 1) * base.size if hi is None else 2 + hi * base.size

    @classmethod
    def rep(cls, base: Node, lo: int, hi: int | None) -> Node:
        return cls(Kind.REP, (base,), lo, hi, size=cls.rep_size(base, lo, hi))

    def __repr__(self) -> str:
        if self.kind is Kind.SET:
            return f"Node(set {self.cset})"
        if self.kind is Kind.ASSERT:
            return f"Node(assert {self.anchor.value})"
        if self.kind is Kind.REP:
            return f"Node(rep {self.lo},{self.hi} {self.items[0]!r})"
        return f"Node({self.kind.value} {list(self.items)!r})"


class Parsed(NamedTuple):
    """What the parser returns: the AST and whether it has ``\\b``/``\\B``."""

    root: Node
    boundaries: bool


# The items an escape or a class member reads, before they become nodes or a CharSet.
class Char(NamedTuple):
    """One code point."""

    cp: int


class Range(NamedTuple):
    """The code points ``lo`` to ``hi`` (inclusive) of a class range ``[a-z]``."""

    lo: int
    hi: int


class Pred(NamedTuple):
    """A Unicode ``\\w \\d \\s`` (``name`` ``w``, ``d`` or ``s``), or its complement."""

    name: str
    negated: bool


class Scan(NamedTuple):
    """An item whose members are read from ``regex`` over all code points (``\\p{...}``,
    ``[[:alpha:]]``, ``(?a)\\w``): its regex text."""

    text: str


class Assert(NamedTuple):
    """A zero-width escape outside a class (``\\A \\Z \\b \\B \\G``)."""

    anchor: Anchor


Item = Char | Range | Pred | Scan | Assert
