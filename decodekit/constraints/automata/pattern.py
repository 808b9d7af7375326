"""Constraint expressions users write: :class:`Pattern`.

``Pattern(regex)`` (a regex, fully matched), combined with ``a & b`` (both match), ``a | b``
(either), ``~a`` (the text does not match ``a``; over valid UTF-8 texts), ``a + b``
(concatenation), at any depth; :func:`intersect`, :func:`union`, :func:`complement`,
:func:`concat`, :func:`repeat` and :func:`excluding` are the same as functions.
``compile_regex`` and ``generate(constraint=...)`` accept them. A :class:`Pattern` is immutable
and hashable (the compile cache's key) and its ``str`` reads like ``(A) & ~(B)``. How one is
compiled: :mod:`~decodekit.constraints.automata.algebra` (the derivatives),
:mod:`~decodekit.constraints.automata.charlevel` (the character level).
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Iterable

from decodekit.constraints.automata.product import first_char_gate, refuse_anchors, refuse_first_char_test
from decodekit.constraints.syntax.nodes import Kind
from decodekit.constraints.syntax.parser import parse, parsed
from decodekit.errors import ConstraintError

ANY_TEXT = r"(?s:.*)"


class Pattern:
    """A constraint expression: ``Pattern(regex)`` fully matches ``regex`` (Python ``regex``
    syntax, as :func:`~decodekit.constraints.compile.compile_regex`); ``a & b``: both match;
    ``a | b``: either matches; ``~a``: the text does not fully match ``a``; ``a + b``: the text
    is ``u v`` with ``u`` matching ``a`` and ``v`` matching ``b`` (:func:`concat`). Operands may be
    :class:`Pattern` objects or regex strings (``Pattern("[a-z]+") & "...."`` is a 4-letter
    word). Immutable and hashable; ``str()`` reads ``(A) & ~(B)`` (cut after
    :data:`LABEL_CHARS` characters).

    Patterns are hash-consed: equal ones are one object, so an expression is a DAG (a part used
    twice is one node, compiled once) and its size is :meth:`size`, not its expanded text.

    Attributes:
        op: ``"re"`` (``args``: the regex text), ``"and"``, ``"or"``, ``"cat"`` (``args``: a tuple of
            Patterns), ``"not"`` (``args``: a 1-tuple), ``"rep"`` (``args``: ``(part, lo, hi)``),
            ``"search"`` (``args``: a regex matched anywhere in the text, ``(?s:.*)(?:R)(?s:.*)``
            with R's flags kept inside R).
    """

    __slots__ = ("op", "args", "_hash", "_combined", "_bounds", "__weakref__")

    def __new__(cls, regex: str | Pattern = "", _op: str = "re", _args: tuple = ()):
        if isinstance(regex, Pattern):
            return regex
        if _op == "re":
            if not isinstance(regex, str):
                raise ConstraintError(f"Pattern takes a regex string, got {type(regex).__name__} {regex!r}")
            _args = regex
        key = (_op, _args)
        got = _INTERNED.get(key)
        if got is not None:
            return got
        self = object.__new__(cls)
        self.op, self.args, self._hash, self._bounds = _op, _args, hash(key), None
        kids = _args[:1] if _op == "rep" else _args if isinstance(_args, tuple) else ()
        self._combined = _op in ("and", "not") or any(a._combined for a in kids)
        _INTERNED[key] = self
        return self

    def __reduce__(self):
        return (Pattern, ("", self.op, self.args) if self.op != "re" else (self.args,))

    def __copy__(self) -> Pattern:
        return self

    def __deepcopy__(self, memo) -> Pattern:
        return self

    def __and__(self, other) -> Pattern:
        if getattr(type(other), "_takes_pattern_and", False):  # a Grammar: its __rand__ answers
            return NotImplemented
        return intersect(self, other)

    def __rand__(self, other) -> Pattern:
        return intersect(other, self)

    def __or__(self, other) -> Pattern:
        return union(self, other)

    def __ror__(self, other) -> Pattern:
        return union(other, self)

    def __invert__(self) -> Pattern:
        return complement(self)

    def __add__(self, other) -> Pattern:
        return concat(self, other)

    def __radd__(self, other) -> Pattern:
        return concat(other, self)

    def repeat(self, lo: int, hi: int | None = None) -> Pattern:
        """``lo`` to ``hi`` (None: any number of) texts of this one in a row (:func:`repeat`)."""
        return repeat(self, lo, hi)

    @staticmethod
    def concat(*parts) -> Pattern:
        """``parts[0] + parts[1] + ...`` (:func:`concat`)."""
        return concat(*parts)

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        return (
            isinstance(other, Pattern)
            and self._hash == other._hash
            and self.op == other.op
            and self.args == other.args
        )

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        """The expression's text, each shared part written where it is used, cut after
        :data:`LABEL_CHARS` characters (``...`` at the end): a label, not a regex."""
        out, length, stack = [], 0, [self]
        while stack:
            p = stack.pop()
            if isinstance(p, str):
                piece = p
            elif p.op == "re":
                piece = p.args
            elif p.op == "search":
                piece = f"...{p.args}..."
            else:
                stack.extend(reversed(_label_parts(p)))
                continue
            out.append(piece)
            length += len(piece)
            if length > LABEL_CHARS:
                return "".join(out)[:LABEL_CHARS] + "..."
        return "".join(out)

    def __repr__(self) -> str:
        return f"Pattern({str(self)!r})"

    def nodes(self) -> list[Pattern]:
        """Every distinct node of the DAG, each once, children before parents."""
        order, seen, stack = [], set(), [(self, False)]
        while stack:
            p, done = stack.pop()
            if done:
                order.append(p)
                continue
            if id(p) in seen:
                continue
            seen.add(id(p))
            stack.append((p, True))
            stack.extend((k, False) for k in reversed(pattern_parts(p)) if id(k) not in seen)
        return order

    @property
    def children(self) -> tuple:
        """The Patterns this one is made of (none for a regex leaf)."""
        return pattern_parts(self)

    def text_length(self) -> int:
        """The length of the text ``str()`` would write uncut (a shared part counted at each use),
        computed once per node."""
        memo: dict[Pattern, int] = {}
        for p in self.nodes():
            if p.op in ("re", "search"):
                memo[p] = len(p.args) + (6 if p.op == "search" else 0)
            else:
                memo[p] = sum(len(x) if isinstance(x, str) else memo[x] for x in _label_parts(p))
        return memo[self]

    def size(self) -> int:
        """The DAG's size: the characters of its distinct regex texts plus one per distinct node
        and operand (a part used many times counted once)."""
        return sum(
            len(p.args) + 1 if p.op in ("re", "search") else len(pattern_parts(p)) + 1 for p in self.nodes()
        )

    def regexes(self) -> list[str]:
        """Every regex text in the expression, each once, in order of first use."""
        out: dict[str, None] = {}
        for p in self.nodes():
            if p.op == "re":
                out[p.args] = None
                gate = first_char_gate(p.args)
                if gate is not None:
                    out[gate] = None
            elif p.op == "search":
                out[p.args] = None
                out[ANY_TEXT] = None
        return list(out)

    @property
    def combined(self) -> bool:
        """Whether it holds an intersection or a complement (not just regexes and unions)."""
        return self._combined


_INTERNED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # (op, args) -> the Pattern
FLAT_CAT = 16  # concat() splices a concatenation of at most this many parts into its own
LABEL_CHARS = 20_000  # str() of a Pattern stops here: a DAG's expanded text may be far longer
MESSAGE_CHARS = 200  # of a label, what an error message shows


def short_label(label: str) -> str:
    """``label`` for a one-line error message: cut after :data:`MESSAGE_CHARS` characters."""
    return label if len(label) <= MESSAGE_CHARS else label[:MESSAGE_CHARS] + "..."


def pattern_parts(p: Pattern) -> tuple:
    """The Patterns ``p`` is made of (none for a regex leaf)."""
    if p.op in ("re", "search"):
        return ()
    return p.args[:1] if p.op == "rep" else p.args


def _label_parts(p: Pattern) -> list:
    """``p``'s text as strings and child Patterns, for :meth:`Pattern.__str__`."""
    if p.op == "not":
        return ["~(", p.args[0], ")"]
    if p.op == "rep":
        a, lo, hi = p.args
        return ["(", a, f"){{{lo},{'' if hi is None else hi}}}"]
    sep = {"cat": " + ", "and": " & ", "or": " | "}[p.op]
    parts: list = []
    for i, a in enumerate(p.args):
        parts += [sep + "(" if i else "(", a, ")"]
    return parts


def _as_pattern(x) -> Pattern:
    if isinstance(x, Pattern):
        return x
    if isinstance(x, str):
        return Pattern(x)
    raise ConstraintError(
        f"a constraint expression takes regex strings or Patterns, got {type(x).__name__} {x!r}"
    )


def intersect(*parts) -> Pattern:
    """The texts every part fully matches (``a & b & ...``)."""
    if not parts:
        raise ConstraintError("intersect needs at least one pattern")
    items = tuple(_as_pattern(p) for p in parts)
    return items[0] if len(items) == 1 else Pattern("", "and", items)


def union(*parts) -> Pattern:
    """The texts some part fully matches (``a | b | ...``)."""
    if not parts:
        raise ConstraintError("union needs at least one pattern")
    items = tuple(_as_pattern(p) for p in parts)
    return items[0] if len(items) == 1 else Pattern("", "or", items)


_GLOBAL_FLAGS = re.compile(r"\(\?[a-zA-Z^-]+\)")


def joinable(r: str) -> bool:
    """Whether ``(?:r)`` inside a longer regex means what ``r`` alone fully matches: no anchor,
    word boundary, global inline flag or first-character test that would see past its ends.
    Reads the kept parse (:func:`~decodekit.constraints.syntax.parser.parsed`)."""
    if _GLOBAL_FLAGS.search(r) or first_char_gate(r) is not None:
        return False
    ast, boundaries = parsed(r)
    if boundaries:
        return False
    stack = [ast]
    while stack:
        n = stack.pop()
        if n.kind is Kind.ASSERT:
            return False
        if n.kind is not Kind.SET:
            stack.extend(n.items)
    return True


_joinable = functools.lru_cache(maxsize=4096)(joinable)

_MAYBE_BOUNDARY = re.compile(r"(?<!\\)(?:\\\\)*\\[bB]")  # an escape \b or \B (or [\b]): parse to know


@functools.lru_cache(maxsize=4096)
def _regex_boundaries(r: str) -> bool:
    return _MAYBE_BOUNDARY.search(r) is not None and parse(r)[1]


def _boundaries(p: Pattern) -> bool:
    """Whether ``p`` holds ``\\b`` or ``\\B`` (each node and regex read once: the answer is kept
    on the node; iterative, as DAGs nest thousands deep)."""
    stack = [p]
    while stack:
        x = stack[-1]
        if x._bounds is not None:
            stack.pop()
        elif x.op in ("re", "search"):
            x._bounds = bool(_regex_boundaries(x.args))
            stack.pop()
        else:
            missing = [k for k in pattern_parts(x) if k._bounds is None]
            if missing:
                stack.extend(missing)
            else:
                x._bounds = any(k._bounds for k in pattern_parts(x))
                stack.pop()
    return p._bounds


def concat(*parts) -> Pattern:
    """The texts ``u1 u2 ...`` where each ``ui`` fully matches ``parts[i]`` (``a + b + ...``):
    concatenation of the languages. Regexes whose joined text ``(?:a)(?:b)`` means exactly that
    are joined into one regex (a plain ``Pattern``, compiled as before); word boundaries inside
    a concatenation are refused (``\\b`` at a part's end would see the next part's text)."""
    if not parts:
        raise ConstraintError("concat needs at least one pattern")
    items: list[Pattern] = []
    for p in map(_as_pattern, parts):  # a long concatenation stays one node: shared, not copied
        items.extend(p.args if p.op == "cat" and len(p.args) <= FLAT_CAT else (p,))
    if len(items) == 1:
        return items[0]
    if all(p.op == "re" for p in items) and all(_joinable(p.args) for p in items):
        joined = "".join(f"(?:{p.args})" for p in items)
        if first_char_gate(joined) is None:
            return Pattern(joined)
    for p in items:
        if _boundaries(p):
            raise ConstraintError(
                f"a concatenation cannot hold word boundaries (\\b, \\B): rewrite {str(p)!r} without them"
            )
    return Pattern("", "cat", tuple(items))


def repeat(part, lo: int, hi: int | None = None) -> Pattern:
    """The texts ``u1 ... un`` with ``lo <= n <= hi`` (None: unbounded), each ``ui`` fully matching
    ``part``; a joinable regex (as in :func:`concat`) becomes the one regex ``(?:R){lo,hi}``."""
    p = _as_pattern(part)
    if not (isinstance(lo, int) and lo >= 0 and (hi is None or isinstance(hi, int) and hi >= lo)):
        raise ConstraintError(f"repeat needs 0 <= lo <= hi, got lo={lo!r}, hi={hi!r}")
    if p.op == "re" and _joinable(p.args):
        joined = f"(?:{p.args}){{{lo},{'' if hi is None else hi}}}"
        if first_char_gate(joined) is None:
            return Pattern(joined)
    if _boundaries(p):
        raise ConstraintError(
            f"a repetition cannot hold word boundaries (\\b, \\B): rewrite {str(p)!r} without them"
        )
    return Pattern("", "rep", (p, lo, hi))


def complement(part) -> Pattern:
    """The valid UTF-8 texts ``part`` does not fully match (``~a``)."""
    return Pattern("", "not", (_as_pattern(part),))


def excluding(positive, excluded: Iterable[str]) -> Pattern:
    """``positive`` and no match of any of ``excluded`` anywhere in the text: what
    ``compile_regex(..., exclude=...)`` means, as ``positive & ~(.*R.*) & ...``. An exclude's
    anchors and the first-character test ``regex.search`` would apply are refused, as there."""
    parts = [_as_pattern(positive)]
    for r in excluded:
        ast, _ = parse(r)
        refuse_anchors(ast, r)
        refuse_first_char_test(r)
        parts.append(complement(Pattern("", "search", r)))
    return intersect(*parts)
