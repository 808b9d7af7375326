"""Regex front end: an exact parser of Python ``regex``'s (V0) syntax into a small AST.

The parser follows ``regex``'s own (``regex/_regex_core.py``: ``parse_sequence``, ``parse_paren``,
``parse_escape``, ``parse_set`` ...) step by step, so that every construct it accepts means what
``regex.fullmatch`` means, and refuses with a one-line :class:`ConstraintError` what a finite
automaton cannot do (or what it does not model). Differences from a naive reading that it gets
right: ``]`` first in a class is a literal; POSIX classes ``[[:alpha:]]``; ``\\u \\U \\x \\N{...}``,
octal and ``\\0`` escapes; ``\\p{...}``; comments ``(?#...)``; verbose ``(?x)``; inline flags in
mid-pattern apply from there to the end of the enclosing group (``a(?i)b`` matches ``aB``, not
``AB``); ``(?i)`` by ``regex``'s own simple case folding (:mod:`decodekit.constraints.syntax.casefold`);
``{,n}``, ``{n,}``, ``x{}`` and ``x{foo}`` (literal braces); lazy quantifiers (the same full
matches).

Nothing is expanded while parsing: character ranges stay ranges until their size is known, and
every node carries the number of NFA states it will need (:class:`Node.size`), so that hostile
patterns (``a{4294967294}``, 25 nested ``{2}``, ``[\\x00-\\U0010ffff]``) are refused before any
memory is spent, and before ``regex.compile`` (which itself expands fixed repetitions) runs. The
parser is iterative (no recursion over nesting). See docs/constraints.md ("Supported syntax").
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import NamedTuple

import numpy as np
import regex

from decodekit.constraints.syntax import casefold
from decodekit.errors import ConstraintError

# Budgets (docs/constraints.md, "Time and memory budget")
MAX_NFA_STATES = 1_000_000  # Thompson NFA states of the whole pattern (repetitions multiplied out)
MAX_CLASS_CHARS = 300_000  # characters named by the pattern's classes (each: its members or its complement)
MAX_DEPTH = 100  # nested groups
CODE_POINTS = 0x110000

# regex's flags, as ints
_I = int(regex.IGNORECASE)
_M = int(regex.MULTILINE)
_S = int(regex.DOTALL)
_X = int(regex.VERBOSE)
_A = int(regex.ASCII)
_U = int(regex.UNICODE)
_L = int(regex.LOCALE)
_F = int(regex.FULLCASE)
_W = int(regex.WORD)
_V0 = int(regex.VERSION0)
_V1 = int(regex.VERSION1)
_ENCODINGS = _A | _L | _U
_GLOBAL = _V0 | _V1 | int(regex.BESTMATCH) | int(regex.ENHANCEMATCH) | int(regex.POSIX) | int(regex.REVERSE)
_FLAG_LETTERS = {
    "a": _A,
    "b": int(regex.BESTMATCH),
    "e": int(regex.ENHANCEMATCH),
    "f": _F,
    "i": _I,
    "L": _L,
    "m": _M,
    "p": int(regex.POSIX),
    "r": int(regex.REVERSE),
    "s": _S,
    "u": _U,
    "V0": _V0,
    "V1": _V1,
    "w": _W,
    "x": _X,
}
_UNSUPPORTED_FLAGS = {
    int(regex.BESTMATCH): "the BESTMATCH flag (?b)",
    int(regex.ENHANCEMATCH): "the ENHANCEMATCH flag (?e)",
    int(regex.POSIX): "the POSIX flag (?p)",
    int(regex.REVERSE): "the REVERSE flag (?r)",
    _V1: "VERSION1 (?V1) (set operations and full case folding)",
    _F: "full case folding (?f) (a character may match several)",
    _L: "the LOCALE flag (?L)",
    _W: "the WORD flag (?w) (Unicode default word boundaries)",
    _M: "the multiline flag (?m) (^ and $ are no-ops at the ends of a full match: drop the flag)",
}
_UNLIMITED = (1 << 32) - 1  # regex's repeat count limit (a count must be below it)
_DIGITS = frozenset("0123456789")
_OCT = frozenset("01234567")
_HEX = frozenset("0123456789abcdefABCDEF")
_ALPHA = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ALNUM = _ALPHA | _DIGITS
_NAMED_CHAR_PART = _ALNUM | frozenset(" -")
_PROPERTY_NAME_PART = _ALNUM | frozenset(" &_-.")
_PROPERTY_VALUE_PART = _ALNUM | frozenset(" &_-./")
_CHARACTER_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_PREDICATE_ESCAPES = {"w": ("w", False), "W": ("w", True), "d": ("d", False), "D": ("d", True)}
_PREDICATE_ESCAPES |= {"s": ("s", False), "S": ("s", True)}
_HEX_LENGTHS = {"x": 2, "u": 4, "U": 8}
_HINTS = {
    "K": "the whole text must match: remove it",
    "m": "start of a word: write \\b",
    "M": "end of a word: write \\b",
}
_BACKREF = "(a finite automaton cannot remember text: repeat the group's pattern instead)"

# assertion codes of "assert" nodes
START, END, WORD_BOUNDARY, NOT_WORD_BOUNDARY = "start", "end", "wb", "nwb"


class CharSet(NamedTuple):
    """What one character position matches: ``(c in chars or any predicate holds) != negated``.

    ``preds`` are ``(name, negated)`` with name ``w``, ``d`` or ``s`` (Python ``regex``'s Unicode
    ``\\w \\d \\s``). Case folding and flags are already applied."""

    chars: frozenset
    preds: tuple
    negated: bool


class Node:
    """An AST node. ``kind``: ``set`` (``cset``), ``seq`` / ``alt`` (``items``), ``rep`` (``items[0]``
    repeated ``lo`` to ``hi`` times, ``hi`` None = unbounded) or ``assert`` (``lo`` one of ``START
    END WORD_BOUNDARY NOT_WORD_BOUNDARY``). ``size`` is the exact number of Thompson NFA states
    :class:`decodekit.constraints.automata.chardfa._NFA` makes for it."""

    __slots__ = ("kind", "items", "lo", "hi", "size", "cset")

    def __init__(self, kind: str, items=(), lo=0, hi=None, size: int = 2, cset: CharSet | None = None):
        self.kind, self.items, self.lo, self.hi, self.size, self.cset = kind, items, lo, hi, size, cset

    def __repr__(self) -> str:
        if self.kind == "set":
            return f"Node(set {self.cset})"
        if self.kind == "assert":
            return f"Node(assert {self.lo})"
        if self.kind == "rep":
            return f"Node(rep {self.lo},{self.hi} {self.items[0]!r})"
        return f"Node({self.kind} {list(self.items)!r})"


class Parsed(NamedTuple):
    """What the parser returns: the AST and whether it has ``\\b``/``\\B``."""

    root: Node
    boundaries: bool


class _Refusal(Exception):
    """Internal: the pattern is refused. ``kind``: syntax / unsupported / budget / anchor."""

    def __init__(self, kind: str, message: str, pos: int | None = None):
        super().__init__(message)
        self.kind, self.message, self.pos = kind, message, pos


class _NotFuzzy(Exception):
    """Internal: a ``{`` is not a fuzzy constraint (regex's ParseError)."""


class _Frame:
    """An open group while parsing: its finished branches, the current sequence (with regex's
    ``None`` markers: a quantifier may not follow one), the flags to restore at ``)``."""

    __slots__ = ("branches", "seq", "saved_flags", "restore", "start", "fold")

    def __init__(self, saved_flags: int, restore: bool, start: int):
        self.branches: list[Node] = []
        self.seq: list = [None]
        self.saved_flags, self.restore, self.start = saved_flags, restore, start
        self.fold = False  # regex's case_flags for plain literals, set when a sequence starts


def parse(pattern: str) -> tuple[Node, bool]:
    """Check and parse ``pattern``: (AST, whether it has ``\\b``/``\\B``). Raises ConstraintError
    with a one-line message (invalid syntax with ``regex``'s message and position, unsupported
    construct and how to rewrite it, or over a budget)."""
    if not isinstance(pattern, str):
        raise ConstraintError(f"a regex constraint must be a string, got {type(pattern).__name__}")
    try:
        parsed = _Parser(pattern).run()
    except _Refusal as r:
        if r.kind != "budget" and _cheap_to_compile(pattern):
            _check_valid(pattern)  # an invalid pattern is reported as such first
        if r.kind == "syntax":
            where = f" at position {r.pos}" if r.pos is not None else ""
            raise ConstraintError(f"invalid regex {pattern!r}: {r.message}{where}") from None
        if r.kind == "unsupported":
            raise ConstraintError(f"unsupported regex feature in {pattern!r}: {r.message}") from None
        raise ConstraintError(r.message) from None  # budget, anchor: complete messages
    _check_valid(pattern)  # bounded: the expansion of every repetition fits MAX_NFA_STATES
    return parsed.root, parsed.boundaries


def _check_valid(pattern: str) -> None:
    try:
        regex.compile(pattern)
    except regex.error as e:
        where = f" at position {e.pos}" if e.pos is not None else ""
        raise ConstraintError(f"invalid regex {pattern!r}: {e.msg}{where}") from None
    except RecursionError:
        raise ConstraintError(
            f"regex {pattern!r} is nested too deeply for the regex module (at most {MAX_DEPTH} groups)"
        ) from None
    except (ValueError, OverflowError) as e:
        raise ConstraintError(f"invalid regex {pattern!r}: {e}") from None


_BRACES = re.compile(r"\{([0-9\s,#]*)\}")


def _cheap_to_compile(pattern: str) -> bool:
    """Whether ``regex.compile`` surely runs quickly: the product of the pattern's repetition
    counts is small (it expands fixed repetitions; ``a{4294967294}`` takes 9 GB)."""
    product = 1
    for m in _BRACES.finditer(pattern):
        for part in re.sub(r"\s", "", m.group(1)).split(","):
            if part.isdigit():
                product *= min(int(part[:12]), 10**12) + 1
                if product > 100_000:
                    return False
    return True


def _size_message(what: str, needed: int, limit: int, pattern: str) -> str:
    shown = repr(pattern[:60]) + ("..." if len(pattern) > 60 else "")
    return f"regex too large: {shown} {what} {needed:,} ({limit:,} allowed)"


@functools.lru_cache(maxsize=1)
def _all_code_points() -> str:
    """Every code point U+0000..U+10FFFF once, surrogates included (for scanning with regex)."""
    return np.arange(CODE_POINTS, dtype=np.uint32).tobytes().decode("utf-32-le", "surrogatepass")


@functools.lru_cache(maxsize=64)
def _scan_codes(item: str) -> tuple[bool, np.ndarray | None, int]:
    """The characters one set item (``\\p{...}``, ``[[:alpha:]]``, ``(?a)\\w`` ...) matches, read from
    ``regex`` itself over all code points: (True, excluded code points) when it matches all but
    those, else (False, member code points); the smaller side, None if both exceed
    MAX_CLASS_CHARS; and the member count. ~10-130 ms; cached compactly (4 bytes a character)."""
    text = _all_code_points()
    compiled = regex.compile(item)
    rest = compiled.sub("", text)
    matched = len(text) - len(rest)

    def codes(chars: str) -> np.ndarray:
        return np.frombuffer(chars.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()

    if len(rest) <= MAX_CLASS_CHARS and len(rest) <= matched:
        return True, codes(rest), matched
    if matched <= MAX_CLASS_CHARS:
        return False, codes("".join(compiled.findall(text))), matched
    return False, None, matched


def _scan(item: str) -> tuple[bool, frozenset | None, int]:
    """:func:`_scan_codes` with the characters as a frozenset."""
    is_excluded, codes, matched = _scan_codes(item)
    if codes is None:
        return is_excluded, None, matched
    return is_excluded, frozenset(codes.tobytes().decode("utf-32-le", "surrogatepass")), matched


def _case_closed(is_excluded: bool, chars: frozenset, ascii_only: bool) -> bool:
    """Whether a scanned item holds every case variant of each character it holds (then ``(?i)``
    does not change it: ``\\p{Han}``, ``[[:alpha:]]``; not ``\\p{Lu}``)."""
    for c, variants in casefold.cased(ascii_only).items():
        inside = (c in chars) != is_excluded
        if any(((v in chars) != is_excluded) != inside for v in variants):
            return False
    return True


PREDICATE_BITS = {"w": 4, "d": 2, "s": 1}
OCCURRING_BITS = (0, 4, 6, 1)  # the combinations of bits that occur: none, \w, \w and \d, \s


@functools.lru_cache(maxsize=1)
def predicate_bits() -> np.ndarray:
    """[0x110000] uint8: 4 if the code point is ``\\w``, 2 if ``\\d``, 1 if ``\\s`` (Python
    ``regex``'s Unicode definitions, read from ``regex`` over all code points: ~0.1 s, once)."""
    text = _all_code_points()
    bits = np.zeros(CODE_POINTS, dtype=np.uint8)
    for name, bit in PREDICATE_BITS.items():
        for m in regex.finditer(f"\\{name}+", text):
            bits[m.start() : m.end()] |= bit
    return bits


def _without_predicates(chars: frozenset, preds) -> frozenset:
    """The characters of ``chars`` for which none of the predicates ``(name, negated)`` holds."""
    if not chars:
        return chars
    ordered = list(chars)
    bits = predicate_bits()[np.fromiter(map(ord, ordered), dtype=np.int64, count=len(ordered))]
    holds = np.zeros(len(ordered), dtype=bool)
    for name, neg in preds:
        holds |= ((bits & PREDICATE_BITS[name]) > 0) != neg
    return frozenset(c for c, h in zip(ordered, holds.tolist()) if not h)


class _Parser:
    def __init__(self, pattern: str):
        self.s = pattern
        self.n = len(pattern)
        self.pos = 0
        self.flags = 0  # regex's info.flags (scoped): I M S X and the encodings
        self.ignore_space = False
        self.ascii = False  # a leading (?a): ASCII \w \d \s and case folding everywhere
        self.boundaries = False
        self.sets: dict[CharSet, Node] = {}
        self.named = 0  # characters named by distinct classes
        # an inline (?i) anywhere: regex may apply it to properties that stand before it in the
        # same group ((?:\P{Ll}|(?i)a) rejects "I"), so those are checked as if under (?i)
        self.inline_fold = bool(re.search(r"\(\?[a-zA-Z^]*i", pattern))

    # ----- regex's Source, with verbose whitespace and comments -----------------------------
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
            raise _Refusal("syntax", f"missing {sub}", self.pos)

    def get_while(self, allowed, keep_spaces: bool = False) -> str:
        s, n = self.s, self.n
        pos = self.pos
        out = []
        while pos < n:
            c = s[pos]
            if self.ignore_space and not keep_spaces and (c.isspace() or c == "#"):
                pos = self._skip(pos)
                continue
            if c not in allowed:
                break
            out.append(c)
            pos += 1
        self.pos = pos
        return "".join(out)

    def get_until(self, stop) -> str:
        s, n = self.s, self.n
        pos = self.pos
        out = []
        while pos < n:
            c = s[pos]
            if self.ignore_space and (c.isspace() or c == "#"):
                pos = self._skip(pos)
                continue
            if c in stop:
                break
            out.append(c)
            pos += 1
        self.pos = pos
        return "".join(out)

    # ----- nodes -------------------------------------------------------------------------------
    def _set_node(self, cset: CharSet) -> Node:
        node = self.sets.get(cset)
        if node is None:
            self.named += len(cset.chars)
            if self.named > MAX_CLASS_CHARS:
                shown = repr(self.s[:60]) + ("..." if len(self.s) > 60 else "")
                raise _Refusal(
                    "budget",
                    f"regex too large: {shown} names {self.named:,} characters in its classes "
                    f"({MAX_CLASS_CHARS:,} allowed): use \\w \\d \\s, '.', or negated classes",
                )
            node = self.sets[cset] = Node("set", cset=cset)
        return node

    def _char(self, cp: int, fold: bool | None = None) -> Node:
        """A literal; ``fold``: case-insensitive (default: the current flags)."""
        c = chr(cp)
        fold = bool(self.flags & _I) if fold is None else fold
        chars = casefold.variants(c, self.ascii) if fold else frozenset((c,))
        return self._set_node(CharSet(chars, (), False))

    def _seq(self, items: list) -> Node:
        items = [x for x in items if x is not None]
        if len(items) == 1:
            return items[0]
        return Node("seq", items, size=max(1, sum(x.size for x in items)))

    def _alt(self, branches: list[Node]) -> Node:
        if len(branches) == 1:
            return branches[0]
        single = [b for b in branches if b.kind == "set" and not b.cset.negated]
        if len(single) > 1:  # a|b|c -> [abc]: one NFA edge, one set (20,000 alternatives stay cheap)
            merged = self._set_node(
                CharSet(
                    frozenset().union(*(b.cset.chars for b in single)),
                    tuple(sorted({p for b in single for p in b.cset.preds})),
                    False,
                )
            )
            rest = [b for b in branches if b.kind != "set" or b.cset.negated]
            branches = [merged, *rest]
            if len(branches) == 1:
                return merged
        return Node("alt", branches, size=2 + sum(b.size for b in branches))

    def _rep(self, base: Node, lo: int, hi: int | None) -> Node:
        size = 1 + (lo + 1) * base.size if hi is None else 2 + hi * base.size
        if size > MAX_NFA_STATES:
            raise _Refusal(
                "budget",
                _size_message("needs an automaton of at least", size, MAX_NFA_STATES, self.s)
                + " NFA states (repetition counts multiply: a{n} needs 2n)",
            )
        return Node("rep", (base,), lo, hi, size=size)

    # ----- the main loop: regex's _parse_pattern / parse_sequence / parse_paren, iteratively ----
    def run(self) -> Parsed:
        self.ignore_space = False
        top = _Frame(0, False, 0)
        frames = [top]
        cur = top
        while True:
            saved_pos = self.pos
            ch = self.get()
            if ch == "":
                if len(frames) > 1:
                    raise _Refusal("syntax", "missing )", self.pos)
                break
            if ch == "|":
                cur.branches.append(self._seq(cur.seq))
                cur.seq = [None]
                cur.fold = bool(self.flags & _I)
            elif ch == ")":
                if cur is top:
                    raise _Refusal("syntax", "unbalanced parenthesis", saved_pos)
                node = self._alt([*cur.branches, self._seq(cur.seq)])
                if cur.restore:
                    self.flags = cur.saved_flags
                    self.ignore_space = bool(self.flags & _X)
                frames.pop()
                cur = frames[-1]
                cur.seq.append(node)
            elif ch == "\\":
                cur.seq.append(self._node_of(self._escape(False)))
            elif ch == "(":
                frame = self._paren(cur is top and not cur.branches and not any(cur.seq), saved_pos)
                if frame is None:  # inline flags (or a comment): plain literals follow them
                    cur.fold = bool(self.flags & _I)
                else:
                    frame.fold = bool(self.flags & _I)
                    frames.append(frame)
                    cur = frame
                    if len(frames) > MAX_DEPTH + 1:
                        raise _Refusal(
                            "budget",
                            f"regex {self.s[:60]!r} nests groups more than {MAX_DEPTH} deep (the limit)",
                        )
            elif ch == ".":
                chars = frozenset() if self.flags & _S else frozenset("\n")
                cur.seq.append(self._set_node(CharSet(chars, (), True)))
            elif ch == "[":
                cur.seq.append(self._set())
            elif ch == "^":
                cur.seq.append(Node("assert", lo=START))
            elif ch == "$":
                cur.seq.append(Node("assert", lo=END))
            elif ch in "?*+{":
                counts = {"?": (0, 1), "*": (0, None), "+": (1, None)}.get(ch)
                if counts is None:
                    counts = self._limited_quantifier()
                if counts is not None:
                    self._apply_quantifier(cur.seq, counts, saved_pos)
                    cur.seq.append(None)
                else:
                    self._fuzzy()  # refuses a fuzzy constraint; else '{' is a literal
                    cur.seq.append(self._char(ord("{"), cur.fold))
            else:
                # regex folds a plain literal by the flags its sequence started with (or the last
                # inline flags): they differ from the current ones only after a (?|...) group,
                # which does not restore the flags set inside it
                cur.seq.append(self._char(ord(ch), cur.fold))
        root = self._alt([*top.branches, self._seq(top.seq)])
        if root.size > MAX_NFA_STATES:
            needed = _size_message("needs an automaton of", root.size, MAX_NFA_STATES, self.s)
            raise _Refusal("budget", needed + " NFA states")
        _check_anchors(root, self.s)
        return Parsed(root, self.boundaries)

    def _apply_quantifier(self, seq: list, counts, saved_pos: int) -> None:
        element = seq.pop()
        if element is None:
            raise _Refusal("syntax", "multiple repeat" if seq else "nothing to repeat", saved_pos)
        lo, hi = counts
        here = self.pos
        suffix = self.get()
        if suffix == "+":
            raise _Refusal(
                "unsupported",
                f"possessive quantifier at position {here} (drop the '+' if giving back does not matter)",
            )
        if suffix != "?":  # '?': lazy, which accepts the same full matches
            self.pos = here
        seq.append(element if (lo, hi) == (1, 1) else self._rep(element, lo, hi))

    def _limited_quantifier(self):
        saved = self.pos
        low = self.get_while(_DIGITS)
        if self.match(","):
            high = self.get_while(_DIGITS)
            lo = _count(low or "0")
            hi = _count(high) if high else None
        else:
            if not low:
                self.pos = saved
                return None
            lo = hi = _count(low)
        if not self.match("}"):
            self.pos = saved
            return None
        if lo >= _UNLIMITED or (hi is not None and hi >= _UNLIMITED):
            raise _Refusal("syntax", "repeat count too big", saved)
        if hi is not None and lo > hi:
            raise _Refusal("syntax", "min repeat greater than max repeat", saved)
        return lo, hi

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
        raise _Refusal("unsupported", f"fuzzy matching at position {saved - 1} (write \\{{ for a brace)")

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
        if ch and ch in _ALPHA:
            self._constraint(ch, seen)
            if self._fuzzy_compare() is not None:
                self._cost_limit()
        elif ch and ch in _DIGITS:
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
        if not self.get_while(_DIGITS):
            raise _Refusal("syntax", "bad fuzzy cost limit", self.pos)

    def _fuzzy_compare(self) -> bool | None:
        if self.match("<="):
            return True
        if self.match("<"):
            return False
        return None

    def _fuzzy_equation(self, seen: set) -> None:
        if "cost" in seen:
            raise _Refusal("syntax", "more than one cost equation", self.pos)
        while True:
            self.get_while(_DIGITS)
            if self.get() not in "dis":
                raise _NotFuzzy
            if not self.match("+"):
                break
        if self._fuzzy_compare() is None:
            raise _NotFuzzy
        seen.add("cost")

    def _paren(self, leading: bool, open_pos: int) -> _Frame | None:
        """After ``(``: a new group frame to push, or None (inline flags, a comment)."""
        saved_pos = self.pos
        ch = self.get(True)
        if ch == "?":
            saved_pos_2 = self.pos
            ch = self.get(True)
            if ch == "<":
                saved_pos_3 = self.pos
                ch = self.get()
                if ch in ("=", "!") and ch:
                    raise _Refusal(
                        "unsupported", f"look-around at position {open_pos} (spell the text out instead)"
                    )
                self.pos = saved_pos_3
                self._name()
                self.expect(">")
                return _Frame(self.flags, True, open_pos)
            if ch in ("=", "!") and ch:
                raise _Refusal(
                    "unsupported", f"look-around at position {open_pos} (spell the text out instead)"
                )
            if ch == "P":
                saved = self.pos
                ch = self.get()
                if ch == "<":
                    self._name()
                    self.expect(">")
                    return _Frame(self.flags, True, open_pos)
                if ch == "=":
                    raise _Refusal("unsupported", f"back-references at position {open_pos} " + _BACKREF)
                if ch in (">", "&") and ch:
                    raise _Refusal(
                        "unsupported",
                        f"group calls at position {open_pos} (repeat the group's pattern instead)",
                    )
                raise _Refusal("syntax", "unknown extension", saved)
            if ch == "#":
                while True:
                    saved = self.pos
                    c = self.get(True)
                    if not c or c == ")":
                        break
                    if c == "\\":
                        self.get(True)
                self.pos = saved
                self.expect(")")
                return None
            if ch == "(":
                raise _Refusal(
                    "unsupported", f"conditional groups at position {open_pos} (write an alternation)"
                )
            if ch == ">":
                raise _Refusal(
                    "unsupported",
                    f"atomic groups at position {open_pos} (write (?:...) if backtracking into it is fine)",
                )
            if ch == "|":
                # branch reset: an alternation (group numbers do not matter here); regex does
                # not restore the flags at its end
                return _Frame(self.flags, False, open_pos)
            calls = ch == "R" or ch == "&" or ch and ch in _DIGITS
            if calls or ch and ch in "+-" and self.peek() in _DIGITS:
                raise _Refusal(
                    "unsupported",
                    f"group calls / recursion at position {open_pos} (repeat the pattern; no recursion)",
                )
            self.pos = saved_pos_2
            return self._flags(leading, open_pos)
        if ch == "*":
            word = self.get_until(set(")>"))
            if word[:1].isalpha():
                raise _Refusal(
                    "unsupported", f"backtracking verbs like (*{word}) at position {open_pos} (remove them)"
                )
        self.pos = saved_pos
        return _Frame(self.flags, True, open_pos)

    def _flag_set(self) -> int:
        flags = 0
        while True:
            saved = self.pos
            ch = self.get()
            if ch == "V":
                ch += self.get()
            f = _FLAG_LETTERS.get(ch)
            if f is None:
                self.pos = saved
                return flags
            flags |= f

    def _flags(self, leading: bool, open_pos: int) -> _Frame | None:
        on = self._flag_set()
        off = 0
        if self.match("-"):
            off = self._flag_set()
            if not off:
                raise _Refusal("syntax", "bad inline flags: no flags after '-'", self.pos)
        if off & _GLOBAL:
            raise _Refusal("syntax", "bad inline flags: cannot turn off global flag", self.pos)
        if on & off:
            raise _Refusal("syntax", "bad inline flags: flag turned on and off", self.pos)
        for flag, what in _UNSUPPORTED_FLAGS.items():
            if (on | off) & flag:
                raise _Refusal("unsupported", what)
        on &= ~_V0  # the default version
        scoped = self.match(":")
        if not scoped and not self.match(")"):
            raise _Refusal("syntax", "unknown extension", self.pos)
        if (on | off) & _ENCODINGS:
            # (?u) is the default for a str pattern: a no-op unless (?a) is in play; (?a) counts
            # only at the very start (regex applies it to the whole pattern, even before it)
            harmless = on == on & ~_A and not off & _ENCODINGS and not self.ascii
            if not harmless and (scoped or not leading or off & _ENCODINGS):
                raise _Refusal(
                    "unsupported",
                    f"the ASCII flag (?a) (or (?u) after it) other than at the very start, at position "
                    f"{open_pos} (regex applies it to the whole pattern, even before it)",
                )
            if not harmless:
                self.ascii = bool(on & _A)
        if scoped:
            frame = _Frame(self.flags, True, open_pos)
            self.flags = (self.flags | on) & ~off
            if self.flags & _ENCODINGS:
                self.flags = (self.flags & ~_ENCODINGS) | on
            self.ignore_space = bool(self.flags & _X)
            return frame
        self.flags = (self.flags | on) & ~off
        self.ignore_space = bool(self.flags & _X)
        return None

    def _name(self, allow_numeric: bool = False) -> str:
        name = self.get_until(set(")>"))
        if not name:
            raise _Refusal("syntax", "missing group name", self.pos)
        if name.isdigit() and not allow_numeric or not name.isdigit() and not name.isidentifier():
            raise _Refusal("syntax", "bad character in group name", self.pos)
        return name

    # ----- escapes -----------------------------------------------------------------------------
    def _escape(self, in_set: bool):
        """regex's parse_escape. Returns an item: ("char", cp), ("pred", name, negated),
        ("scan", item text), ("assert", code)."""
        saved_ignore = self.ignore_space
        self.ignore_space = False
        at = self.pos - 1
        ch = self.get()
        self.ignore_space = saved_ignore
        if not ch:
            raise _Refusal("syntax", "bad escape (end of pattern)", self.pos)
        if ch in _HEX_LENGTHS:
            return self._hex(ch, _HEX_LENGTHS[ch])
        if ch == "g" and not in_set:
            saved = self.pos
            try:
                self.expect("<")
                self._name(allow_numeric=True)
                self.expect(">")
            except _Refusal:
                self.pos = saved
                return ("char", ord("g"))
            raise _Refusal("unsupported", f"back-references at position {at} " + _BACKREF)
        if ch == "G" and not in_set:
            return ("assert", START)  # the search anchor: position 0 of a full match
        if ch == "L" and not in_set:
            raise _Refusal(
                "unsupported", f"named lists \\L<...> at position {at} (write the alternation out)"
            )
        if ch == "N":
            saved = self.pos
            if self.match("{"):
                name = self.get_while(_NAMED_CHAR_PART, keep_spaces=True)
                if self.match("}"):
                    try:
                        return ("char", ord(unicodedata.lookup(name)))
                    except KeyError:
                        raise _Refusal("syntax", "undefined character name", self.pos) from None
            self.pos = saved
            return ("char", ord("N"))
        if ch in "pP":
            return self._property(ch == "p", in_set)
        if ch == "R" and not in_set:
            raise _Refusal(
                "unsupported",
                f"\\R at position {at} (it is an atomic group)",
            )
        if ch == "X" and not in_set:
            raise _Refusal("unsupported", f"grapheme clusters \\X at position {at} (use . or a class)")
        if ch in _ALPHA:
            if not in_set:
                if ch == "A":
                    return ("assert", START)
                if ch in "Zz":
                    return ("assert", END)
                if ch in "bB":
                    if self.ascii:
                        raise _Refusal(
                            "unsupported",
                            "\\b and \\B with the ASCII flag (?a) (drop (?a), or spell ASCII classes out)",
                        )
                    return ("assert", WORD_BOUNDARY if ch == "b" else NOT_WORD_BOUNDARY)
                if ch in "KmM":
                    raise _Refusal("unsupported", f"\\{ch} at position {at} ({_HINTS[ch]})")
            if ch in _PREDICATE_ESCAPES:
                if self.ascii:  # ASCII \w \d \s: the characters themselves
                    return ("scan", f"\\{ch}")
                return ("pred", *_PREDICATE_ESCAPES[ch])
            if ch == "h":
                return ("scan", "\\h")
            if ch in _CHARACTER_ESCAPES:
                return ("char", ord(_CHARACTER_ESCAPES[ch]))
            raise _Refusal("syntax", f"bad escape \\{ch}", self.pos)
        if ch in _DIGITS:
            return self._numeric_escape(ch, in_set, at)
        return ("char", ord(ch))

    def _hex(self, esc: str, length: int):
        saved = self.pos
        digits = []
        for _ in range(length):
            c = self.get()
            if not c or c not in _HEX:
                raise _Refusal("syntax", f"incomplete escape \\{esc}{''.join(digits)}", saved)
            digits.append(c)
        value = int("".join(digits), 16)
        if value >= CODE_POINTS:
            raise _Refusal("syntax", f"bad hex escape \\{esc}{''.join(digits)}", saved)
        return ("char", value)

    def _numeric_escape(self, ch: str, in_set: bool, at: int):
        if in_set or ch == "0":
            digits = [ch]
            saved = self.pos
            c = self.get()
            while len(digits) < 3 and c and c in _OCT:
                digits.append(c)
                saved = self.pos
                c = self.get()
            self.pos = saved
            if digits[0] not in _OCT:
                raise _Refusal("syntax", f"bad escape \\{digits[0]}", self.pos)
            return ("char", int("".join(digits), 8))
        digits = ch
        saved = self.pos
        c = self.get()
        if c and c in _DIGITS:
            digits += c
            saved = self.pos
            c = self.get()
            if all(d in _OCT for d in digits) and c and c in _OCT:
                mask = 0xFF if self.flags & (_A | _L) else 0x1FF
                return ("char", int(digits + c, 8) & mask)
        self.pos = saved
        raise _Refusal("unsupported", f"back-references at position {at} " + _BACKREF)

    def _property(self, positive: bool, in_set: bool):
        saved = self.pos
        ch = self.get()
        letter = "p" if positive else "P"
        if ch == "{":
            negate = self.match("^")
            prop, name = self._property_name()
            if self.match("}"):
                body = ("^" if negate else "") + (f"{prop}={name}" if prop is not None else name)
                return ("scan", f"[\\{letter}{{{body}}}]" if in_set else f"\\{letter}{{{body}}}")
        elif ch and ch in "CLMNPSZ":
            return ("scan", f"[\\{letter}{ch}]" if in_set else f"\\{letter}{ch}")
        self.pos = saved
        return ("char", ord(letter))

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

    def _node_of(self, item) -> Node:
        """A node for an escape outside a class."""
        kind = item[0]
        if kind == "char":
            return self._char(item[1])
        if kind == "assert":
            if item[1] in (WORD_BOUNDARY, NOT_WORD_BOUNDARY):
                self.boundaries = True
            return Node("assert", lo=item[1])
        return self._set_node(self._make_set([item], False))

    # ----- character classes -------------------------------------------------------------------
    def _set(self) -> Node:
        start = self.pos - 1
        saved_ignore = self.ignore_space
        self.ignore_space = False
        try:
            negate = self.match("^")
            items = self._set_member()
            while True:
                saved = self.pos
                if self.match("]"):
                    self.pos = saved
                    break
                items += self._set_member()
            if not self.match("]"):
                raise _Refusal("syntax", "missing ]", start)
        finally:
            self.ignore_space = saved_ignore
        return self._set_node(self._make_set(items, negate))

    def _set_member(self) -> list:
        first = self._set_item()
        if first[0] != "char" or not self.match("-"):
            return [first]
        saved = self.pos
        if self.match("]"):
            self.pos = saved
            return [first, ("char", ord("-"))]
        last = self._set_item()
        if last[0] != "char":
            return [first, ("char", ord("-")), last]
        if first[1] > last[1]:
            raise _Refusal("syntax", "bad character range", self.pos)
        return [first] if first[1] == last[1] else [("range", first[1], last[1])]

    def _set_item(self):
        if self.match("\\"):
            return self._escape(True)
        saved = self.pos
        if self.match("[:"):
            negate = self.match("^")
            prop, name = self._property_name()
            if self.match(":]"):
                body = ("^" if negate else "") + (f"{prop}={name}" if prop is not None else name)
                return ("scan", f"[[:{body}:]]")
            self.pos = saved
        ch = self.get()
        if not ch:
            raise _Refusal("syntax", "unterminated character set", self.pos)
        return ("char", ord(ch))

    def _make_set(self, items: list, negate: bool) -> CharSet:
        """The CharSet of a class's items (union), case-folded under (?i), then negated. A class
        is stored by the characters it names, or as the negation of those it excludes, whichever
        is small; neither fits MAX_CLASS_CHARS -> refused."""
        fold = bool(self.flags & _I)
        intervals = [(x[1], x[1] if x[0] == "char" else x[2]) for x in items if x[0] in ("char", "range")]
        preds = tuple(sorted({(x[1], x[2]) for x in items if x[0] == "pred"}))
        positive: list[frozenset] = []  # the class matches these ...
        excluded: list[frozenset] = []  # ... and everything except each of these
        if intervals:
            merged = _merge(intervals)
            count = sum(hi - lo + 1 for lo, hi in merged)
            if count <= MAX_CLASS_CHARS:
                chars = frozenset(chr(c) for lo, hi in merged for c in range(lo, hi + 1))
                positive.append(frozenset(casefold.fold(chars, self.ascii)) if fold else chars)
            elif CODE_POINTS - count <= MAX_CLASS_CHARS:
                rest = frozenset(chr(c) for lo, hi in _gaps(merged) for c in range(lo, hi + 1))
                excluded.append(frozenset(casefold.fold_complement(rest, self.ascii)) if fold else rest)
            else:
                raise self._too_many(count)
        for x in items:
            if x[0] == "scan":
                try:
                    is_excluded, chars, matched = _scan(("(?a)" if self.ascii else "") + x[1])
                except regex.error as e:
                    raise _Refusal("syntax", e.msg, self.pos) from None
                if chars is None:
                    raise self._too_many(matched, x[1])
                if (fold or self.inline_fold) and not _case_closed(is_excluded, chars, self.ascii):
                    # regex's (?i)\p{Lu} matches U+0138 at the start of a pattern but not after
                    # (?:a)*: no single meaning to compile
                    raise _Refusal(
                        "unsupported",
                        f"{x[1]} with (?i) in the pattern: it does not contain every case of its letters, "
                        "and regex's result then depends on where it and the flag stand (list the cases "
                        "instead)",
                    )
                (excluded if is_excluded else positive).append(chars)
        if not excluded:
            return CharSet(frozenset().union(*positive), preds, negate)
        rest = frozenset.intersection(*excluded)
        if positive:
            rest -= frozenset().union(*positive)
        if preds:
            rest = _without_predicates(rest, preds)
        return CharSet(rest, (), not negate)

    def _too_many(self, count: int, item: str | None = None) -> _Refusal:
        what = f"{item!r} matches" if item else "a character class names"
        return _Refusal(
            "budget",
            f"regex {self.s[:60]!r}: {what} {count:,} characters and excludes {CODE_POINTS - count:,} "
            f"(at most {MAX_CLASS_CHARS:,} either way): use \\w \\d \\s, '.', or a smaller range",
        )


def _count(digits: str) -> int:
    return _UNLIMITED if len(digits) > 10 else int(digits)


def _merge(intervals):
    out = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def _gaps(merged):
    out, prev = [], 0
    for lo, hi in merged:
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev < CODE_POINTS:
        out.append((prev, CODE_POINTS - 1))
    return out


def _check_anchors(root: Node, pattern: str) -> None:
    """``^ $ \\A \\Z \\z \\G`` must sit trivially at the start / end of the full match (then they are
    no-ops): only other such anchors or empty groups before / after them, in alternatives, and
    in groups repeated at most once. Iterative walk."""
    stack = [(root, True, True)]
    while stack:
        node, at_start, at_end = stack.pop()
        kind = node.kind
        if kind == "seq":
            parts = node.items
            before = _trivial_runs(parts, START)
            after = _trivial_runs(parts[::-1], END)[::-1]
            stack.extend((p, at_start and b, at_end and a) for p, b, a in zip(parts, before, after))
        elif kind == "alt":
            stack.extend((b, at_start, at_end) for b in node.items)
        elif kind == "rep":
            once = node.hi is not None and node.hi <= 1
            stack.append((node.items[0], at_start and once, at_end and once))
        elif kind == "assert" and (node.lo == START and not at_start or node.lo == END and not at_end):
            raise _Refusal(
                "anchor",
                f"anchor in {pattern!r} is only supported at the start/end of the pattern "
                "(the constraint is a full match: '^' and '$' there are no-ops)",
            )


def _trivial_runs(parts, code: str) -> list[bool]:
    """[n] whether every part before part i is the anchor ``code`` or empty."""
    out, ok = [], True
    for part in parts:
        out.append(ok)
        ok = ok and (part.kind == "assert" and part.lo == code or part.kind == "seq" and not part.items)
    return out
