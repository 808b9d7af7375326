"""Regex front end: an exact parser of Python ``regex``'s (V0) syntax into a small AST.

The parser follows ``regex``'s own (``regex/_regex_core.py``: ``parse_sequence``, ``parse_paren``,
``parse_escape``, ``parse_set`` ...) step by step, so that every construct it accepts means what
``regex.fullmatch`` means, and refuses with a one-line :class:`ConstraintError` what a finite
automaton cannot do (or what it does not model). Differences from a naive reading that it gets
right: ``]`` first in a class is a literal; POSIX classes ``[[:alpha:]]``; ``\\u \\U \\x \\N{...}``,
octal and ``\\0`` escapes; ``\\p{...}``; comments ``(?#...)``; verbose ``(?x)``; inline flags in
mid-pattern apply from there to the end of the enclosing group (``a(?i)b`` matches ``aB``, not
``AB``); ``(?i)`` by ``regex``'s own simple case folding (:mod:`~decodekit.constraints.syntax.casefold`);
``{,n}``, ``{n,}``, ``x{}`` and ``x{foo}`` (literal braces); lazy quantifiers (the same full
matches).

Nothing is expanded while parsing: character ranges stay ranges until their size is known, and
every node carries the number of NFA states it will need (:class:`Node.size`), so that hostile
patterns (``a{4294967294}``, 25 nested ``{2}``, ``[\\x00-\\U0010ffff]``) are refused before any
memory is spent, and before ``regex.compile`` (which itself expands fixed repetitions) runs. The
parser is iterative (no recursion over nesting). See docs/constraints.md ("Supported syntax").

This module is the grammar (groups, alternation, quantifiers, flags, the AST); the scanner
(:mod:`~.scanner`), escapes and class members (:mod:`~.items`), character-set semantics
(:mod:`~.charsets`), the budgets (:mod:`~.budgets`) and the Unicode tables (:mod:`~.unicode`)
are their own modules.
"""

from __future__ import annotations

import functools
import re

import regex

from decodekit.constraints.syntax import casefold
from decodekit.constraints.syntax.budgets import (
    MAX_CLASS_CHARS,
    MAX_DEPTH,
    MAX_NFA_STATES,
    cheap_to_compile,
    check_class_chars,
    size_message,
)
from decodekit.constraints.syntax.charsets import make_set
from decodekit.constraints.syntax.classes import ClassReader
from decodekit.constraints.syntax.flags import (
    ASCII,
    DOTALL,
    ENCODINGS,
    FLAG_LETTERS,
    GLOBAL,
    IGNORECASE,
    UNSUPPORTED_FLAGS,
    VERBOSE,
    VERSION0,
)
from decodekit.constraints.syntax.fuzzy import FuzzyReader
from decodekit.constraints.syntax.items import BACKREF_HINT
from decodekit.constraints.syntax.nodes import (
    BOUNDARIES,
    Anchor,
    Assert,
    Char,
    CharSet,
    Item,
    Kind,
    Node,
    Parsed,
)
from decodekit.constraints.syntax.scanner import DIGITS, Refusal
from decodekit.errors import ConstraintError, ConstraintTooLarge

__all__ = ["MAX_CLASS_CHARS", "MAX_DEPTH", "MAX_NFA_STATES", "PARSES", "Node", "Parsed", "parse", "parsed"]

_UNLIMITED = (1 << 32) - 1  # regex's repeat count limit (a count must be below it)


class _Frame:
    """An open group while parsing: its finished branches, the current sequence (with regex's
    ``None`` markers: a quantifier may not follow one), the flags to restore at ``)``."""

    __slots__ = ("branches", "seq", "saved_flags", "restore", "start", "fold", "core", "bounds", "deep")

    def __init__(self, saved_flags: int, restore: bool, start: int):
        self.branches: list[Node] = []
        self.seq: list = [None]
        self.saved_flags, self.restore, self.start = saved_flags, restore, start
        self.fold = False  # regex's case_flags for plain literals, set when a sequence starts
        self.core = False  # the parse was in the core syntax when the group opened
        self.bounds = 0  # \b \B read before the group opened
        self.deep = 0  # groups nested inside it


# A pattern at least this long has its groups and classes cached by their text: the JSON Schema
# front end repeats the same few (a string's characters, an integer) thousands of times.
_CACHE_FROM = 256
# What a group's extent is read from: escapes, brackets (a class's parentheses are literals) and
# parentheses. Only a guess where the parse may disagree (verbose comments, POSIX classes): a
# cached group is reused only where the text from "(" is exactly the text parsed before.
_GROUP_TOKENS = re.compile(r"\\.|[][()]", re.S)
_SPECIAL = frozenset(["", *"|)\\(.[^$?*+{"])  # "": the end
# a class of plain characters and ranges only: no escape, no "[" (nested or POSIX), no "]" first,
# no "^" first after the optional negation (so that "[^]" and "[^^]" go to the general reader)
_LITERALS = re.compile(r"[^|)\\(.\[^$?*+{]+")  # a run of characters outside _SPECIAL (no verbose space)
# a whole pattern of plain literals (characters outside _SPECIAL, escaped ASCII punctuation) of at
# most _PLAIN_CHARS: read as the parser's literal runs read it, without the parser
_PLAIN = re.compile(r"(?:[^|)\\(.\[^$?*+{]|\\[ -/:-@\[-`{-~])+")
_PLAIN_CHARS = 4096
_UNESCAPE = re.compile(r"\\(.)", re.S)


def parse(pattern: str) -> tuple[Node, bool]:
    """Check and parse ``pattern``: (AST, whether it has ``\\b``/``\\B``). Raises ConstraintError
    with a one-line message (invalid syntax with ``regex``'s message and position, unsupported
    construct and how to rewrite it, or over a budget)."""
    if not isinstance(pattern, str):
        raise ConstraintError(f"a regex constraint must be a string, got {type(pattern).__name__}")
    if len(pattern) <= _PLAIN_CHARS and _PLAIN.fullmatch(pattern):
        return _literal(_UNESCAPE.sub(r"\1", pattern) if "\\" in pattern else pattern), False
    try:
        parser = _Parser(pattern)
        parsed = parser.run()
    except Refusal as r:
        if r.kind != "budget" and cheap_to_compile(pattern):
            _check_valid(pattern)  # an invalid pattern is reported as such first
        if r.kind == "syntax":
            where = f" at position {r.pos}" if r.pos is not None else ""
            raise ConstraintError(f"invalid regex {pattern!r}: {r.message}{where}") from None
        if r.kind == "unsupported":
            raise ConstraintError(f"unsupported regex feature in {pattern!r}: {r.message}") from None
        if r.kind == "budget":  # complete messages
            raise ConstraintTooLarge(r.message, bound="pattern") from None
        raise ConstraintError(r.message) from None  # anchor: a complete message
    if not parser.core:  # the parser's own checks were incomplete (bounded: the expansion of every
        _check_valid(pattern)  # repetition fits MAX_NFA_STATES)
    return parsed.root, parsed.boundaries


def _literal(text: str) -> Node:
    """The AST of the literal ``text`` (one or more characters, no flags), as the parser makes it:
    a set node per character (one per distinct character), in a sequence when more than one."""
    nodes = {c: Node.leaf(CharSet(frozenset((c,)), (), False)) for c in set(text)}
    items = [nodes[c] for c in text]
    return items[0] if len(items) == 1 else Node.seq(items)


PARSES = 256  # parsed patterns kept by parsed() (cleared with the compiled automata)


@functools.lru_cache(maxsize=PARSES)
def parsed(pattern: str) -> tuple[Node, bool]:
    """:func:`parse`, kept for the last :data:`PARSES` patterns: a pattern is read once however
    many passes read it (``check_pattern`` then ``compile_regex``; a grammar's terminals checked
    on reading, then made regular, then stepped). The AST is never modified; refusals are raised
    again, not kept."""
    return parse(pattern)


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


class _Parser(ClassReader, FuzzyReader):
    """regex's _parse_pattern / parse_sequence / parse_paren, iteratively, building the AST."""

    def __init__(self, pattern: str):
        super().__init__(pattern)
        self.flags = 0  # regex's info.flags (scoped): I M S X and the encodings
        self.ascii = False  # a leading (?a): ASCII \w \d \s and case folding everywhere
        self.boundaries = False
        # Whether every construct read so far is in the core syntax, where this parser raises on
        # every text that regex rejects (tests/constraints/test_parse_core.py checks it against
        # regex.compile): literals, escapes of punctuation, \d \w \s and their negations, \a \f
        # \n \r \t \v \x \u \U \A \Z \z \b \B, classes of those and ranges, '.', '^', '$', groups
        # (...) and (?:...), '|', quantifiers (greedy or lazy), inline and scoped (?i) (?s). A
        # parse that leaves it is checked by regex.compile as well.
        self.core = True
        self.sets: dict[CharSet, Node] = {}
        self.made: dict[tuple, CharSet] = {}  # a class's items and flags -> its CharSet (this parse)
        self.named = 0  # characters named by distinct classes
        self.bounds = 0  # \b \B read
        self.anchored = False  # ^ $ \A \Z \z \G read (then the AST's anchors are checked)
        self.chars: dict[tuple, Node] = {}  # (code point, folded) -> its node
        # long patterns: a class's text and flags -> its node; a group's -> (node, its nesting
        # depth, whether it has \b \B)
        self.class_cache: dict[tuple, Node] | None = {} if self.n >= _CACHE_FROM else None
        self.group_cache: dict[tuple, tuple] = {}
        self.group_end = _group_ends(pattern) if self.n >= _CACHE_FROM else {}
        # an inline (?i) anywhere: regex may apply it to properties that stand before it in the
        # same group ((?:\P{Ll}|(?i)a) rejects "I"), so those are checked as if under (?i)
        self.inline_fold = bool(re.search(r"\(\?[a-zA-Z^]*i", pattern))

    def _set_node(self, cset: CharSet) -> Node:
        node = self.sets.get(cset)
        if node is None:
            self.named += len(cset.chars)
            check_class_chars(self.named, self.s)
            node = self.sets[cset] = Node.leaf(cset)
        return node

    def _char(self, cp: int, fold: bool | None = None) -> Node:
        """A literal; ``fold``: case-insensitive (default: the current flags)."""
        fold = bool(self.flags & IGNORECASE) if fold is None else fold
        key = (cp, fold, self.ascii)
        node = self.chars.get(key)
        if node is None:
            c = chr(cp)
            chars = casefold.variants(c, self.ascii) if fold else frozenset((c,))
            node = self.chars[key] = self._set_node(CharSet(chars, (), False))
        return node

    def _seq(self, items: list) -> Node:
        items = [x for x in items if x is not None]
        if len(items) == 1:
            return items[0]
        return Node.seq(items)

    def _alt(self, branches: list[Node]) -> Node:
        if len(branches) == 1:
            return branches[0]
        single = [b for b in branches if b.kind is Kind.SET and not b.cset.negated]
        if len(single) > 1:  # a|b|c -> [abc]: one NFA edge, one set (20,000 alternatives stay cheap)
            merged = self._set_node(
                CharSet(
                    frozenset().union(*(b.cset.chars for b in single)),
                    tuple(sorted({p for b in single for p in b.cset.preds})),
                    False,
                )
            )
            rest = [b for b in branches if b.kind is not Kind.SET or b.cset.negated]
            branches = [merged, *rest]
            if len(branches) == 1:
                return merged
        return Node.alt(branches)

    def _rep(self, base: Node, lo: int, hi: int | None) -> Node:
        size = Node.rep_size(base, lo, hi)
        if size > MAX_NFA_STATES:
            raise Refusal(
                "budget",
                size_message("needs an automaton of at least", size, MAX_NFA_STATES, self.s)
                + " NFA states (repetition counts multiply: a{n} needs 2n)",
            )
        return Node.rep(base, lo, hi)

    # ----- the main loop: regex's _parse_pattern / parse_sequence / parse_paren, iteratively ----
    def run(self) -> Parsed:
        self.ignore_space = False
        top = _Frame(0, False, 0)
        frames = [top]
        cur = top
        while True:
            saved_pos = self.pos
            ch = self.get()
            if ch not in _SPECIAL:
                # regex folds a plain literal by the flags its sequence started with (or the last
                # inline flags): they differ from the current ones only after a (?|...) group,
                # which does not restore the flags set inside it
                if self.ignore_space:
                    cur.seq.append(self._char(ord(ch), cur.fold))
                    continue
                end = _LITERALS.match(self.s, saved_pos).end()  # the whole run of plain literals
                seq, char, fold = cur.seq, self._char, cur.fold
                for c in self.s[saved_pos:end]:
                    seq.append(char(ord(c), fold))
                self.pos = end
                continue
            if ch == "":
                if len(frames) > 1:
                    raise Refusal("syntax", "missing )", self.pos)
                break
            if ch == "|":
                cur.branches.append(self._seq(cur.seq))
                cur.seq = [None]
                cur.fold = bool(self.flags & IGNORECASE)
            elif ch == ")":
                if cur is top:
                    raise Refusal("syntax", "unbalanced parenthesis", saved_pos)
                node = self._alt([*cur.branches, self._seq(cur.seq)])
                if cur.restore:
                    self.flags = cur.saved_flags
                    self.ignore_space = bool(self.flags & VERBOSE)
                if cur.core and self.core and cur.restore and self.group_end:
                    key = (self.s[cur.start : self.pos], cur.saved_flags, self.ascii)
                    self.group_cache[key] = (node, cur.deep, self.bounds > cur.bounds)
                frames.pop()
                frames[-1].deep = max(frames[-1].deep, cur.deep + 1)
                cur = frames[-1]
                cur.seq.append(node)
            elif ch == "\\":
                cur.seq.append(self._node_of(self._escape(False)))
            elif ch == "(":
                if self._cached_group(cur, len(frames), saved_pos):
                    continue
                frame = self._paren(cur is top and not cur.branches and not any(cur.seq), saved_pos)
                if frame is None:  # inline flags (or a comment): plain literals follow them
                    cur.fold = bool(self.flags & IGNORECASE)
                else:
                    frame.fold = bool(self.flags & IGNORECASE)
                    frame.core, frame.bounds = self.core, self.bounds
                    frames.append(frame)
                    cur = frame
                    if len(frames) > MAX_DEPTH + 1:
                        raise Refusal(
                            "budget",
                            f"regex {self.s[:60]!r} nests groups more than {MAX_DEPTH} deep (the limit)",
                        )
            elif ch == ".":
                chars = frozenset() if self.flags & DOTALL else frozenset("\n")
                cur.seq.append(self._set_node(CharSet(chars, (), True)))
            elif ch == "[":
                cur.seq.append(self._set())
            elif ch == "^":
                self.anchored = True
                cur.seq.append(Node.leaf(anchor=Anchor.START))
            elif ch == "$":
                self.anchored = True
                cur.seq.append(Node.leaf(anchor=Anchor.END))
            elif ch in "?*+{":
                counts = {"?": (0, 1), "*": (0, None), "+": (1, None)}.get(ch)
                if counts is None:
                    counts = self._limited_quantifier()
                if counts is not None:
                    self._apply_quantifier(cur.seq, counts, saved_pos)
                    cur.seq.append(None)
                else:
                    self._fuzzy()  # refuses a fuzzy constraint; else '{' is a literal
                    self.core = False
                    cur.seq.append(self._char(ord("{"), cur.fold))
        root = self._alt([*top.branches, self._seq(top.seq)])
        if root.size > MAX_NFA_STATES:
            needed = size_message("needs an automaton of", root.size, MAX_NFA_STATES, self.s)
            raise Refusal("budget", needed + " NFA states")
        if self.anchored:
            _check_anchors(root, self.s)
        return Parsed(root, self.boundaries)

    def _cached_group(self, cur: _Frame, depth: int, at: int) -> bool:
        """At the ``(`` at ``at``: append the node of the same group text parsed before under the
        same flags (parsing is deterministic: it would read the same text to the same node), if
        any and it stays within the depth limit."""
        end = self.group_end.get(at)
        if end is None or not self.core:
            return False
        hit = self.group_cache.get((self.s[at : end + 1], self.flags, self.ascii))
        if hit is None or depth + hit[1] > MAX_DEPTH:
            return False
        node, deep, bounds = hit
        self.pos = end + 1
        cur.seq.append(node)
        cur.deep = max(cur.deep, deep + 1)
        if bounds:
            self.bounds += 1
            self.boundaries = True
        return True

    def _apply_quantifier(self, seq: list, counts, saved_pos: int) -> None:
        element = seq.pop()
        if element is None:
            raise Refusal("syntax", "multiple repeat" if seq else "nothing to repeat", saved_pos)
        lo, hi = counts
        here = self.pos
        suffix = self.get()
        if suffix == "+":
            raise Refusal(
                "unsupported",
                f"possessive quantifier at position {here} (drop the '+' if giving back does not matter)",
            )
        if suffix != "?":  # '?': lazy, which accepts the same full matches
            self.pos = here
        seq.append(element if (lo, hi) == (1, 1) else self._rep(element, lo, hi))

    def _limited_quantifier(self):
        saved = self.pos
        low = self.get_while(DIGITS)
        if self.match(","):
            high = self.get_while(DIGITS)
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
            raise Refusal("syntax", "repeat count too big", saved)
        if hi is not None and lo > hi:
            raise Refusal("syntax", "min repeat greater than max repeat", saved)
        return lo, hi

    def _paren(self, leading: bool, open_pos: int) -> _Frame | None:
        """After ``(``: a new group frame to push, or None (inline flags, a comment)."""
        if not self.ignore_space and self.s.startswith("?:", self.pos):  # what _flags does with no flags
            self.pos += 2
            return self._scoped(open_pos, 0, 0)
        saved_pos = self.pos
        ch = self.get(True)
        if ch == "?":
            saved_pos_2 = self.pos
            ch = self.get(True)
            if ch in "<P#|" or not ch:
                self.core = False
            if ch == "<":
                saved_pos_3 = self.pos
                ch = self.get()
                if ch in ("=", "!") and ch:
                    raise Refusal(
                        "unsupported", f"look-around at position {open_pos} (spell the text out instead)"
                    )
                self.pos = saved_pos_3
                self._name()
                self.expect(">")
                return _Frame(self.flags, True, open_pos)
            if ch in ("=", "!") and ch:
                raise Refusal(
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
                    raise Refusal("unsupported", f"back-references at position {open_pos} " + BACKREF_HINT)
                if ch in (">", "&") and ch:
                    raise Refusal(
                        "unsupported",
                        f"group calls at position {open_pos} (repeat the group's pattern instead)",
                    )
                raise Refusal("syntax", "unknown extension", saved)
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
                raise Refusal(
                    "unsupported", f"conditional groups at position {open_pos} (write an alternation)"
                )
            if ch == ">":
                raise Refusal(
                    "unsupported",
                    f"atomic groups at position {open_pos} (write (?:...) if backtracking into it is fine)",
                )
            if ch == "|":
                # branch reset: an alternation (group numbers do not matter here); regex does
                # not restore the flags at its end
                return _Frame(self.flags, False, open_pos)
            calls = ch == "R" or ch == "&" or ch and ch in DIGITS
            if calls or ch and ch in "+-" and self.peek() in DIGITS:
                raise Refusal(
                    "unsupported",
                    f"group calls / recursion at position {open_pos} (repeat the pattern; no recursion)",
                )
            self.pos = saved_pos_2
            return self._flags(leading, open_pos)
        if ch == "*":
            self.core = False
            word = self.get_until(set(")>"))
            if word[:1].isalpha():
                raise Refusal(
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
            f = FLAG_LETTERS.get(ch)
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
                raise Refusal("syntax", "bad inline flags: no flags after '-'", self.pos)
        if off & GLOBAL:
            raise Refusal("syntax", "bad inline flags: cannot turn off global flag", self.pos)
        if on & off:
            raise Refusal("syntax", "bad inline flags: flag turned on and off", self.pos)
        for flag, what in UNSUPPORTED_FLAGS.items():
            if (on | off) & flag:
                raise Refusal("unsupported", what)
        if (on | off) & ~(IGNORECASE | DOTALL):
            self.core = False
        on &= ~VERSION0  # the default version
        scoped = self.match(":")
        if not scoped and not self.match(")"):
            raise Refusal("syntax", "unknown extension", self.pos)
        if (on | off) & ENCODINGS:
            # (?u) is the default for a str pattern: a no-op unless (?a) is in play; (?a) counts
            # only at the very start (regex applies it to the whole pattern, even before it)
            harmless = on == on & ~ASCII and not off & ENCODINGS and not self.ascii
            if not harmless and (scoped or not leading or off & ENCODINGS):
                raise Refusal(
                    "unsupported",
                    f"the ASCII flag (?a) (or (?u) after it) other than at the very start, at position "
                    f"{open_pos} (regex applies it to the whole pattern, even before it)",
                )
            if not harmless:
                self.ascii = bool(on & ASCII)
        if scoped:
            return self._scoped(open_pos, on, off)
        self.flags = (self.flags | on) & ~off
        self.ignore_space = bool(self.flags & VERBOSE)
        return None

    def _scoped(self, open_pos: int, on: int, off: int) -> _Frame:
        """The frame of a group ``(?on-off:...)`` opened at ``open_pos``, the flags set for inside
        it (an encoding flag turned on replaces the others)."""
        frame = _Frame(self.flags, True, open_pos)
        self.flags = (self.flags | on) & ~off
        if self.flags & ENCODINGS:
            self.flags = (self.flags & ~ENCODINGS) | on
        self.ignore_space = bool(self.flags & VERBOSE)
        return frame

    def _node_of(self, item: Item) -> Node:
        """A node for an escape outside a class."""
        if isinstance(item, Char):
            return self._char(item.cp)
        if isinstance(item, Assert):
            if item.anchor in BOUNDARIES:
                self.boundaries = True
                self.bounds += 1
            else:
                self.anchored = True
            return Node.leaf(anchor=item.anchor)
        return self._set_node(make_set([item], False, self))


def _group_ends(pattern: str) -> dict[int, int]:
    """Where each ``(`` of ``pattern`` is closed, as far as its escapes, classes (``]`` first in
    one is a literal) and parentheses say (one pass)."""
    ends, opened = {}, []
    first = -1  # inside a class: where a "]" would be a literal; outside: -1
    for m in _GROUP_TOKENS.finditer(pattern):
        t, at = m.group(), m.start()
        if first >= 0:
            if t == "]" and at != first:
                first = -1
        elif t == "[":
            first = at + 1 + pattern.startswith("^", at + 1)
        elif t == "(":
            opened.append(at)
        elif t == ")" and opened:
            ends[opened.pop()] = at
    return ends


def _count(digits: str) -> int:
    return _UNLIMITED if len(digits) > 10 else int(digits)


def _check_anchors(root: Node, pattern: str) -> None:
    """``^ $ \\A \\Z \\z \\G`` must sit trivially at the start / end of the full match (then they are
    no-ops): only other such anchors or empty groups before / after them, in alternatives, and
    in groups repeated at most once. Iterative walk."""
    stack = [(root, True, True)]
    while stack:
        node, at_start, at_end = stack.pop()
        kind = node.kind
        if kind is Kind.SEQ:
            parts = node.items
            before = _trivial_runs(parts, Anchor.START)
            after = _trivial_runs(parts[::-1], Anchor.END)[::-1]
            stack.extend((p, at_start and b, at_end and a) for p, b, a in zip(parts, before, after))
        elif kind is Kind.ALT:
            stack.extend((b, at_start, at_end) for b in node.items)
        elif kind is Kind.REP:
            once = node.hi is not None and node.hi <= 1
            stack.append((node.items[0], at_start and once, at_end and once))
        elif kind is Kind.ASSERT and (
            node.anchor is Anchor.START and not at_start or node.anchor is Anchor.END and not at_end
        ):
            raise Refusal(
                "anchor",
                f"anchor in {pattern!r} is only supported at the start/end of the pattern "
                "(the constraint is a full match: '^' and '$' there are no-ops)",
            )


def _trivial_runs(parts, code: Anchor) -> list[bool]:
    """[n] whether every part before part i is the anchor ``code`` or empty."""
    out, ok = [], True
    for part in parts:
        out.append(ok)
        ok = ok and (
            part.kind is Kind.ASSERT and part.anchor is code or part.kind is Kind.SEQ and not part.items
        )
    return out
