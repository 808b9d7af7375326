"""Regex front end: syntax check, anchors and word boundaries, parsing with ``interegular``.

``interegular`` rejects ``^``, ``$``, ``\\A``, ``\\Z``, ``\\b`` and ``\\B``. Before parsing, each of
them (outside character classes) is replaced by a private-use *marker* character, which
``interegular`` parses as an ordinary literal. Afterwards:

* anchor markers (``^ \\A $ \\Z``) are checked to sit trivially at the start / end of the full
  match (then they are no-ops) and are otherwise rejected;
* word-boundary markers (``\\b``, ``\\B``) become zero-width assertion edges of the NFA
  (:mod:`decodekit.constraints.chardfa`), resolved against the word class of the characters on
  either side.
"""

from __future__ import annotations

import regex
from interegular import InvalidSyntax, Unsupported, parse_pattern
from interegular.patterns import Pattern as IPattern
from interegular.patterns import REFlags, _CharGroup, _Concatenation, _NonCapturing, _Repeated
from interegular.utils.simple_parser import NoMatch

from decodekit.errors import ConstraintError

START = "\U0010fff0"  # ^ and \A
END = "\U0010fff1"  # $ and \Z
WORD_BOUNDARY = "\U0010fff2"  # \b
NOT_WORD_BOUNDARY = "\U0010fff3"  # \B
# \w \W \d \D \s \S with Python's Unicode meaning (interegular's are ASCII-only): character
# predicates, (name, negated); bit of the name in `chardfa.char_bits`
PREDICATES = {
    "\U0010fff4": ("w", False),
    "\U0010fff5": ("w", True),
    "\U0010fff6": ("d", False),
    "\U0010fff7": ("d", True),
    "\U0010fff8": ("s", False),
    "\U0010fff9": ("s", True),
}
_PREDICATE_ESCAPES = dict(zip("wWdDsS", PREDICATES))
MARKERS = frozenset({START, END, WORD_BOUNDARY, NOT_WORD_BOUNDARY, *PREDICATES})
_ESCAPE_MARKERS = {"b": WORD_BOUNDARY, "B": NOT_WORD_BOUNDARY, "A": START, "Z": END}


def substitute_markers(pattern: str) -> str:
    """Replace ``^ $ \\A \\Z \\b \\B`` outside character classes by marker characters, ``\\b``
    inside a class by ``\\x08`` (backspace, as in Python) and ``\\w \\W \\d \\D \\s \\S`` anywhere by
    predicate markers. Escapes are respected."""
    out: list[str] = []
    i, n, in_class, class_start = 0, len(pattern), False, -1
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            d = pattern[i + 1]
            if d in _PREDICATE_ESCAPES:
                out.append(_PREDICATE_ESCAPES[d])
            elif not in_class and d in _ESCAPE_MARKERS:
                out.append(_ESCAPE_MARKERS[d])
            elif in_class and d == "b":
                out.append("\\x08")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            # ']' right after '[' or '[^' is a literal
            if c == "]" and i != class_start:
                in_class = False
        elif c == "[":
            in_class = True
            class_start = i + 1
            if i + 1 < n and pattern[i + 1] == "^":
                out.append("[^")
                i += 2
                class_start = i
                continue
        elif c == "^":
            c = START
        elif c == "$":
            c = END
        elif c == "+" and _after_quantifier(pattern, i):
            raise ConstraintError(
                f"unsupported regex feature in {pattern!r}: possessive quantifier at position {i}"
            )
        out.append(c)
        i += 1
    return "".join(out)


_QUANTIFIER_END = regex.compile(r"(?:(?<!\\)(?:\\\\)*[*+?]|\{\d*,?\d*\})$")


def _after_quantifier(pattern: str, i: int) -> bool:
    """Whether position i directly follows a quantifier (so a '+' there is possessive)."""
    head = pattern[:i]
    return bool(_QUANTIFIER_END.search(head)) and not head.endswith("(?")


def parse(pattern: str) -> tuple[IPattern, bool]:
    """Check and parse ``pattern``. Returns (interegular AST with marker literals, whether it
    contains word-boundary assertions). Raises ConstraintError with a one-line message."""
    if not isinstance(pattern, str):
        raise ConstraintError(f"a regex constraint must be a string, got {type(pattern).__name__}")
    bad = sorted(MARKERS & set(pattern))
    if bad:
        raise ConstraintError(f"regex {pattern!r} contains reserved private-use characters {bad!r}")
    try:
        regex.compile(pattern)
    except regex.error as e:
        where = f" at position {e.pos}" if e.pos is not None else ""
        raise ConstraintError(f"invalid regex {pattern!r}: {e.msg}{where}") from None
    try:
        ast = parse_pattern(substitute_markers(pattern))
    except Unsupported as e:
        raise ConstraintError(f"unsupported regex feature in {pattern!r}: {_describe(e)}") from None
    except (InvalidSyntax, NoMatch) as e:
        where = f" near position {e.index}" if isinstance(e, NoMatch) else ""
        raise ConstraintError(
            f"unsupported regex feature in {pattern!r}{where} (only regular constructs compile to an "
            "automaton: no back-references, look-around, possessive or atomic groups)"
        ) from None
    flags = [False]
    _check(ast, pattern, True, True, REFlags(0), flags)
    return ast, flags[0]


def _describe(e: Exception) -> str:
    text = str(e)
    if "reference" in text:
        return "back-references"
    if "lookback" in text or "lookahead" in text:
        return "look-around"
    return text or type(e).__name__


_KIND_ORDER = (
    ("pattern", IPattern),
    ("concat", _Concatenation),
    ("repeat", _Repeated),
    ("lookaround", _NonCapturing),
    ("chars", _CharGroup),
)
_KINDS: dict[type, str] = {}


def node_kind(node) -> str:
    """'pattern', 'concat', 'repeat', 'lookaround', 'chars' or 'other': ``isinstance`` against
    interegular's abstract classes is slow, so the answer is remembered per node type."""
    kind = _KINDS.get(type(node))
    if kind is None:
        kind = next((name for name, cls in _KIND_ORDER if isinstance(node, cls)), "other")
        _KINDS[type(node)] = kind
    return kind


def _zero_width(node, marker: str) -> bool:
    return node_kind(node) == "chars" and not node.negated and node.chars == frozenset({marker})


def _is_empty(node) -> bool:
    return node_kind(node) == "concat" and not node.parts


def _trivial_runs(parts, marker: str) -> list[bool]:
    """[n] whether every part before part i is ``marker`` or empty (linear, not quadratic)."""
    out, ok = [], True
    for part in parts:
        out.append(ok)
        ok = ok and (_zero_width(part, marker) or _is_empty(part))
    return out


def _check(node, pattern: str, at_start: bool, at_end: bool, flags: REFlags, found: list[bool]) -> None:
    """Walk the AST: anchors only where trivially at the start/end; no look-around; no (?m)."""
    kind = node_kind(node)
    if kind == "pattern":
        flags = (flags | node.added_flags) & ~node.removed_flags
        if flags & REFlags.MULTILINE:
            raise ConstraintError(f"unsupported regex feature in {pattern!r}: the multiline flag (?m)")
        for option in node.options:
            _check(option, pattern, at_start, at_end, flags, found)
    elif kind == "concat":
        parts = node.parts
        before = _trivial_runs(parts, START)
        after = _trivial_runs(parts[::-1], END)[::-1]
        for part, b, a in zip(parts, before, after):
            _check(part, pattern, at_start and b, at_end and a, flags, found)
    elif kind == "repeat":
        once = node.max is not None and node.max <= 1
        _check(node.base, pattern, at_start and once, at_end and once, flags, found)
    elif kind == "lookaround":
        raise ConstraintError(f"unsupported regex feature in {pattern!r}: look-around")
    elif kind == "chars":
        if _zero_width(node, START) and not at_start or _zero_width(node, END) and not at_end:
            raise ConstraintError(
                f"anchor in {pattern!r} is only supported at the start/end of the pattern "
                "(the constraint is a full match: '^' and '$' there are no-ops)"
            )
        if _zero_width(node, WORD_BOUNDARY) or _zero_width(node, NOT_WORD_BOUNDARY):
            found[0] = True
        elif len(node.chars) > 1 and node.chars & (MARKERS - set(PREDICATES)):
            raise ConstraintError(f"anchors and \\b cannot be combined with other items in {pattern!r}")
