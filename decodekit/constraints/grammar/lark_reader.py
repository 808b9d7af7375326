"""Lark grammars, read by decodekit's own reader, into a
:class:`~decodekit.constraints.grammar.cfg.CFG`.

The syntax is lark's own (its grammar of grammars, ``lark/load_grammar.py``): rules
``name: expansions`` and terminals ``NAME: expansions``, each on one line but for alternatives
continued on the next lines with ``|`` (or a line ending in ``\\``); ``|``, groups ``( )``,
optionals ``[ ]`` and ``?``, ``*``, ``+``, ``~ n`` and ``~ n..m``; string literals ``"..."`` (the
flag ``i``), regexes ``/.../`` (the flags ``imslux``), ranges ``"a".."z"``; templates
``name{a, b}: ...`` used as ``name{x, y}``; ``%ignore``, ``%import`` of lark's own grammars
(``common``, ``unicode``, ``python``, ``lark``: read from the installed lark package, nothing else
from the file system; ``%import common.WS``, ``-> ALIAS``, ``%import common (A, B)``),
``%override`` and ``%extend``; comments ``//`` and ``#``. What the tree shaping options mean
(``?rule``, ``!rule``, ``_rule``, ``-> alias``, priorities ``.n``) does not change the language and
is dropped.

What it makes, as lark's ``compile`` does: every terminal a regex (a terminal made of others has
their patterns inlined); every literal inside a rule an anonymous terminal named by its spelling
(``"select"i``); ``*`` and ``+`` left-recursive helper rules. Unlike lark it never distributes: an
optional or a group of alternatives inside a sequence is one helper rule (lark makes 2^n
alternatives of n optionals in a row). The terminals of lark's ``common`` grammar that it writes
with lazy quantifiers and look-behind (``ESCAPED_STRING``, ``C_COMMENT``), which lark's Earley reads
as "the shortest match", are read as plain regexes with that meaning (the engine reads a terminal as
any full match); a user's own lazy quantifier (``/".*?"/``) is read as any full match, as
everywhere in decodekit.

The reader is linear in the text: lark's own loader took 10-20 ms for a ten-line grammar (most of
it reading ``common.lark`` again for every ``%import``), more than the rest of a compile.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import cache

from decodekit.constraints.grammar.builder import MAX_REPEAT, RuleBuilder, regex_char, regex_literal
from decodekit.constraints.grammar.cfg import CFG
from decodekit.errors import ConstraintError

__all__ = ["LIBRARY_GRAMMARS", "MAX_NESTING", "read_lark"]

MAX_NESTING = 100  # open ( [ at once: the reader recurses over the nesting
LIBRARY_GRAMMARS = ("common", "unicode", "python", "lark")  # %import reads these, from lark itself

# common.lark's shortest-match terminals -> the same languages as plain regexes
# (tests/constraints/grammar/test_lark.py checks them against lark by brute force)
_SHORTEST_MATCH = {
    ("common", "ESCAPED_STRING"): '"(?:[^"\\\\\\n]|\\\\.)*"',
    ("common", "C_COMMENT"): "/\\*(?:[^*]|\\*+[^*/])*\\*+/",
    # only ever used between quotes (ESCAPED_STRING, lark.lark's STRING): what it matches there
    ("common", "_STRING_ESC_INNER"): '(?:[^"\\\\\\n]|\\\\.)*',
}
_TOKEN = re.compile(
    r"""(?P<skip>[ \t\f\r]+|\\[ \t]*\r?\n|//[^\n]*|\#[^\n]*)
      | (?P<nl>\n)
      | (?P<string>"(?:\\"|\\\\|[^"\n])*?"i?)
      | (?P<regexp>/(?!/)(?:\\/|\\\\|[^/])*?/[imslux]*)
      | (?P<arrow>->)
      | (?P<dotdot>\.\.)
      | (?P<dot>\.)
      | (?P<op>[+*]|\?(?![a-z_]))
      | (?P<mods>(?:!\??|\?!?)(?=[_a-z]))
      | (?P<name>_?[A-Za-z][_A-Za-z0-9]*)
      | (?P<number>[+-]?\d+)
      | (?P<directive>%[a-z]+)
      | (?P<punct>[()\[\]{},:|~])""",
    re.VERBOSE,
)
_DIRECTIVES = ("%ignore", "%import", "%override", "%extend", "%declare")
_STRING_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", '"': '"', "\\": "\\"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_CLASS_META = set("\\]^-[")
_EOF = ("eof", "", -1)
ATOM, SEQUENCE, ALTERNATION = 0, 1, 2  # how a regex may be joined: quantified, concatenated, grouped
_REFUSED = "%import of {} refused: only lark's grammars (" + ", ".join(LIBRARY_GRAMMARS) + ") are read"


@dataclass
class _Definition:
    """A rule (lower case) or terminal (upper case) as written: ``alts`` is a list of sequences of
    nodes (tuples, :meth:`_Parser.atom`); ``ns`` the library grammar it comes from (None: the
    user's); ``offset`` into the text it was read from (None for a library's)."""

    kind: str  # "rule" or "term"
    params: tuple[str, ...]
    alts: list
    offset: int | None
    ns: str | None = None


class _Parser:
    """Lark text -> definitions, ignores and imports (nothing resolved yet)."""

    def __init__(self, text: str, source: str):
        self.text, self.source = text, source
        self.lines = [0] + [m.end() for m in re.finditer("\n", text)]
        self.tokens = self._lex()
        self.i = 0
        self.defs: dict[str, _Definition] = {}
        self.ignores: list[tuple[list, int]] = []
        self.imports: dict[str, tuple[str, str, int]] = {}  # local name -> (grammar, name, offset)

    # -- messages ---------------------------------------------------------------------------
    def place(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.lines, offset)
        return line, offset - self.lines[line - 1] + 1

    def error(self, offset: int, message: str) -> ConstraintError:
        if offset < 0:
            return ConstraintError(f"{self.source}: {message} (at the end of the grammar)")
        line, col = self.place(offset)
        return ConstraintError(f"{self.source}:{line}:{col}: {message}")

    # -- lexing -----------------------------------------------------------------------------
    def _lex(self) -> list[tuple[str, str, int]]:
        text, pos, out = self.text, 0, []
        for m in _TOKEN.finditer(text):
            if m.start() != pos:  # nothing matches at pos
                break
            kind, pos = m.lastgroup, m.end()
            if kind == "skip":
                continue
            value = m.group()
            if kind == "punct":
                kind = value
            elif kind == "name":  # ASCII: a letter after at most one "_"
                bare = value.lstrip("_")
                if bare.lower() == bare:
                    kind = "rule"
                elif bare[0].isupper() and bare.upper() == bare:
                    kind = "term"
                else:
                    raise self.error(
                        m.start(), f"name {value!r} mixes cases (a rule is lower case, a terminal upper case)"
                    )
            elif kind == "directive" and value not in _DIRECTIVES:
                raise self.error(m.start(), f"unknown directive {value!r} (known: {', '.join(_DIRECTIVES)})")
            out.append((kind, value, m.start()))
        if pos < len(text):
            c = text[pos]
            if c == '"':
                raise self.error(pos, "unterminated string literal")
            if c == "/":
                raise self.error(pos, "unterminated regex literal")
            raise self.error(pos, f"unexpected {c!r}")
        return out

    def peek(self, k: int = 0) -> tuple[str, str, int]:
        j = self.i + k
        return self.tokens[j] if j < len(self.tokens) else _EOF

    def take(self, kind: str, what: str) -> tuple[str, str, int]:
        tok = self.peek()
        if tok[0] != kind:
            raise self.unexpected(tok, what)
        self.i += 1
        return tok

    def unexpected(self, tok, what: str) -> ConstraintError:
        if tok[0] == "eof":
            return self.error(-1, f"the grammar ends where {what} was expected")
        shown = "the end of the line" if tok[0] == "nl" else repr(tok[1])
        return self.error(tok[2], f"unexpected {shown} (expected {what})")

    def bar_next(self) -> bool:
        """Whether an alternative follows: ``|`` here, or on a later line after line breaks."""
        k = 0
        while self.peek(k)[0] == "nl":
            k += 1
        if self.peek(k)[0] == "|":
            self.i += k + 1
            return True
        return False

    def end_of_statement(self, what: str) -> None:
        tok = self.peek()
        if tok[0] not in ("nl", "eof"):
            raise self.unexpected(tok, what)

    # -- parsing ----------------------------------------------------------------------------
    def run(self) -> _Parser:
        while True:
            kind, value, offset = self.peek()
            if kind == "eof":
                return self
            if kind == "nl":
                self.i += 1
            elif kind == "directive":
                self.i += 1
                self.directive(value, offset)
            else:
                self.definition(None)

    def definition(self, how: str | None) -> None:
        """``[mods] name [{params}] [.priority] : expansions`` (``how``: ``%override`` / ``%extend``)."""
        if self.peek()[0] == "mods":
            self.i += 1
        kind, name, offset = self.peek()
        if kind not in ("rule", "term"):
            raise self.unexpected(self.peek(), "a rule or a terminal definition")
        self.i += 1
        params: list[str] = []
        if self.peek()[0] == "{":
            if kind == "term":
                raise self.error(offset, f"terminal '{name}' has parameters (only rules are templates)")
            self.i += 1
            params.append(self.take("rule", "a parameter name")[1])
            while self.peek()[0] == ",":
                self.i += 1
                params.append(self.take("rule", "a parameter name")[1])
            self.take("}", "'}'")
        if self.peek()[0] == "dot":
            self.i += 1
            self.take("number", "a priority")
        self.take(":", "':'")
        alts = self.expansions(0, kind == "rule")
        self.end_of_statement("the end of the definition")
        new = _Definition(kind, tuple(params), alts, offset)
        old = self.defs.get(name)
        what = "rule" if kind == "rule" else "terminal"
        if how is None:
            if name in self.imports:
                raise self.error(offset, f"'{name}' is imported and defined")
            if old is not None:
                line, col = self.place(old.offset) if old.offset is not None else (0, 0)
                first = f" (first at {line}:{col})" if old.offset is not None else " (imported)"
                raise self.error(offset, f"{what} '{name}' is defined twice{first}")
            self.defs[name] = new
        elif old is None and name not in self.imports:
            raise self.error(offset, f"{how} of {what} '{name}', which is not defined")
        elif old is None and how == "%extend":
            raise self.error(offset, f"%extend of the imported '{name}' (define it, or %override it)")
        elif how == "%override" or old is None:
            self.imports.pop(name, None)
            self.defs[name] = new
        else:  # %extend
            if old.params != new.params:
                raise self.error(offset, f"%extend of '{name}' with other parameters")
            self.defs[name] = _Definition(kind, old.params, old.alts + alts, old.offset, old.ns)

    def directive(self, name: str, offset: int) -> None:
        if name in ("%override", "%extend"):
            self.definition(name)
        elif name == "%ignore":
            self.ignores.append((self.expansions(0, False), offset))
            self.end_of_statement("the end of %ignore")
        elif name == "%declare":
            tok = self.peek()
            raise self.error(
                tok[2] if tok[0] in ("rule", "term") else offset,
                f"terminal '{tok[1]}' has no pattern (%declare'd terminals are not supported)",
            )
        else:
            self.import_()

    def import_(self) -> None:
        tok = self.peek()
        if tok[0] == "dot":
            raise self.error(tok[2], _REFUSED.format("a relative path"))
        path = [self.take_name("a grammar's name")]
        while self.peek()[0] == "dot":
            self.i += 1
            path.append(self.take_name("a name"))
        if self.peek()[0] == "(":
            self.i += 1
            grammar, names = path, [self.take_name("a name")]
            while self.peek()[0] == ",":
                self.i += 1
                names.append(self.take_name("a name"))
            self.take(")", "')'")
            pairs = [(n, n) for n in names]
        else:
            if len(path) < 2:
                raise self.error(tok[2], "%import needs grammar.NAME or grammar (NAME, ...)")
            grammar, alias = path[:-1], path[-1]
            if self.peek()[0] == "arrow":
                self.i += 1
                alias = self.take_name("a name")
            pairs = [(path[-1], alias)]
        module = ".".join(grammar)
        if module not in LIBRARY_GRAMMARS:
            raise self.error(
                tok[2],
                _REFUSED.format(repr(module)),
            )
        self.end_of_statement("the end of %import")
        for name, alias in pairs:
            if alias in self.defs:
                raise self.error(tok[2], f"'{alias}' is imported and defined")
            self.imports[alias] = (module, name, tok[2])

    def take_name(self, what: str) -> str:
        tok = self.peek()
        if tok[0] not in ("rule", "term"):
            raise self.unexpected(tok, what)
        self.i += 1
        return tok[1]

    def expansions(self, depth: int, in_rule: bool) -> list:
        alts = [self.expansion(depth, in_rule)]
        while self.bar_next():
            alts.append(self.expansion(depth, in_rule))
        return alts

    def expansion(self, depth: int, in_rule: bool) -> list:
        seq = []
        while self.peek()[0] in ("string", "regexp", "rule", "term", "(", "["):
            seq.append(self.expr(depth, in_rule))
        if self.peek()[0] == "arrow":  # an alias: tree shaping only
            self.i += 1
            if not in_rule:
                raise self.error(self.peek(-1)[2], "an alias (->) in a terminal")
            self.take("rule", "an alias name")
        return seq

    def expr(self, depth: int, in_rule: bool):
        atom = self.atom(depth, in_rule)
        kind, value, offset = self.peek()
        if kind == "op":
            self.i += 1
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[value]
        elif kind == "~":
            self.i += 1
            lo = hi = self.count()
            if self.peek()[0] == "dotdot":
                self.i += 1
                hi = self.count()
                if hi < lo:
                    raise self.error(offset, f"~ {lo}..{hi}: the maximum is below the minimum")
        else:
            return atom
        return ("rep", atom, lo, hi, offset)

    def count(self) -> int:
        _, value, offset = self.take("number", "a count")
        n = int(value)
        if not 0 <= n <= MAX_REPEAT:
            raise self.error(offset, f"the count {n} is not in 0..{MAX_REPEAT:,} (the limit)")
        return n

    def atom(self, depth: int, in_rule: bool):
        """A node: ``("group" | "maybe", alts, offset)``, ``("name", name, offset)``,
        ``("lit", pattern, spelling, offset, how)`` (``how`` it may be joined: :data:`ATOM`,
        :data:`SEQUENCE`, :data:`ALTERNATION`), ``("tmpl", name, args, offset)``, or ``("rep",
        node, lo, hi, offset)`` from :meth:`expr`."""
        kind, value, offset = self.peek()
        self.i += 1
        if kind in ("(", "["):
            if depth >= MAX_NESTING:
                raise self.error(offset, f"groups nest more than {MAX_NESTING} deep (the limit)")
            alts = self.expansions(depth + 1, in_rule)
            close = ")" if kind == "(" else "]"
            if self.peek()[0] != close:
                if self.peek()[0] in ("nl", "eof"):
                    raise self.error(offset, f"{kind!r} is never closed")
                raise self.unexpected(self.peek(), f"{close!r}")
            self.i += 1
            return ("group" if kind == "(" else "maybe", alts, offset)
        if kind == "string":
            if self.peek()[0] == "dotdot":
                self.i += 1
                _, end, _ = self.take("string", "a string after '..'")
                return ("lit", self.range(value, end, offset), f"{value}..{end}", offset, ATOM)
            pattern = self.string(value, offset)
            one = value.endswith("i") or len(self.chars(value[1:-1], offset)) == 1
            return ("lit", pattern, value, offset, ATOM if one else SEQUENCE)
        if kind == "regexp":
            flagged = not value.endswith("/")  # read as (?flags:...)
            return ("lit", self.regexp(value, offset), value, offset, ATOM if flagged else ALTERNATION)
        if kind == "rule" and self.peek()[0] == "{":
            self.i += 1
            args = [self.atom(depth, in_rule)]
            while self.peek()[0] == ",":
                self.i += 1
                args.append(self.atom(depth, in_rule))
            self.take("}", "'}'")
            return ("tmpl", value, args, offset)
        return ("name", value, offset)

    # -- literals ---------------------------------------------------------------------------
    def chars(self, body: str, offset: int) -> str:
        """A string literal's text: ``\\" \\\\ \\n \\t \\r \\f \\xHH \\uHHHH \\UHHHHHHHH`` read,
        any other backslash kept (as lark reads them)."""
        out, i = [], 0
        while i < len(body):
            c = body[i]
            if c != "\\" or i + 1 >= len(body):
                out.append(c)
                i += 1
                continue
            e = body[i + 1]
            if e in _STRING_ESCAPES:
                out.append(_STRING_ESCAPES[e])
                i += 2
            elif e in _HEX_ESCAPES:
                n = _HEX_ESCAPES[e]
                digits = body[i + 2 : i + 2 + n]
                if len(digits) != n or not all(d in "0123456789abcdefABCDEF" for d in digits):
                    raise self.error(offset, f"\\{e} needs {n} hex digits")
                if int(digits, 16) > 0x10FFFF:
                    raise self.error(offset, f"\\{e}{digits} is beyond the last code point U+10FFFF")
                out.append(chr(int(digits, 16)))
                i += 2 + n
            else:
                out.append(c + e)
                i += 2
        return "".join(out)

    def string(self, spelling: str, offset: int) -> str:
        flags = spelling.endswith("i")
        text = self.chars(spelling[1 : -1 - flags], offset)
        if not text:
            raise self.error(offset, "an empty string literal (lark allows no empty terminals)")
        return f"(?i:{regex_literal(text)})" if flags else regex_literal(text)

    def regexp(self, spelling: str, offset: int) -> str:
        end = spelling.rindex("/")
        body, flags = spelling[1:end], spelling[end + 1 :]
        if "\n" in body and "x" not in flags:
            raise self.error(offset, "a line break in a regex without the x flag")
        return f"(?{flags}:{body})" if flags else body

    def range(self, first: str, last: str, offset: int) -> str:
        lo, hi = self.chars(first[1:-1], offset), self.chars(last[1:-1], offset)
        if len(lo) != 1 or len(hi) != 1 or first.endswith("i") or last.endswith("i"):
            raise self.error(offset, f"a range {first}..{last} takes two one-character strings")
        if hi < lo:
            raise self.error(offset, f"the range {first}..{last} is reversed")
        return f"[{regex_char(lo, _CLASS_META)}-{regex_char(hi, _CLASS_META)}]"


@cache
def _library(name: str) -> _Parser:
    """One of lark's own grammars (:data:`LIBRARY_GRAMMARS`), parsed once per process."""
    from importlib.resources import files

    text = (files("lark") / "grammars" / f"{name}.lark").read_text(encoding="utf-8")
    parsed = _Parser(text, f"<lark>/{name}.lark").run()
    for term, d in parsed.defs.items():
        d.offset, d.ns = None, name
        if (name, term) in _SHORTEST_MATCH:
            d.alts = [[("lit", _SHORTEST_MATCH[name, term], term, -1, ALTERNATION)]]
    return parsed


class _Lowering(RuleBuilder):
    """Definitions -> BNF rules and terminal regexes (module docstring)."""

    def __init__(self, parsed: _Parser):
        super().__init__(parsed.source)
        self.parsed = parsed
        self.defs = dict(parsed.defs)  # final name -> definition (library ones added when used)
        self.patterns: dict[str, tuple[str, int]] = {}  # terminal -> (regex, how it may be joined)
        self.queued: set[str] = set()
        self.work: list[tuple[str, _Definition, dict]] = []

    def error(self, offset, message: str) -> ConstraintError:
        if offset is None:
            return ConstraintError(f"{self.source}: {message}")
        return self.parsed.error(offset, message)

    def resolve(self, ns: str | None, name: str, offset, owner: str) -> str:
        """The final name of ``name`` used in grammar ``ns`` (None: the user's); raises if undefined.
        A library's names are ``grammar__name`` unless imported under an alias."""
        seen = 0
        while True:
            imports = self.parsed.imports if ns is None else _library(ns).imports
            if name in imports:
                ns, name, _ = imports[name]
                seen += 1
                if seen > 100:
                    raise self.error(offset, f"'{name}' is imported in a cycle")
                continue
            break
        final = name
        if ns is not None:
            alias = next((a for a, (m, n, _) in self.parsed.imports.items() if (m, n) == (ns, name)), None)
            final = alias or f"{ns}__{name}"
            if final not in self.defs and name in _library(ns).defs:
                self.defs[final] = _library(ns).defs[name]
            if final not in self.defs:
                raise self.error(offset, f"'{name}' is not defined in lark's {ns}.lark")
        if final not in self.defs:
            what = "rule" if name.lstrip("_")[:1].islower() else "terminal"
            in_what = "rule" if owner.lstrip("_")[:1].islower() else "terminal"
            raise self.error(offset, f"undefined {what} '{name}' (in {in_what} '{owner}')")
        return final

    # -- terminals --------------------------------------------------------------------------
    def pattern(self, name: str) -> str:
        """The regex of terminal ``name``, the terminals it uses inlined (depth first, without
        recursion over the chain of uses; a cycle is refused)."""
        if name in self.patterns:
            return self.patterns[name][0]
        stack, entered = [name], set()
        while stack:
            top = stack[-1]
            if top in self.patterns:
                stack.pop()
                continue
            d = self.defs[top]
            if d.kind != "term":
                raise self.error(d.offset, f"'{top}' is a rule, used in a terminal")
            uses = [u for u in self.uses_of(top, d) if u not in self.patterns]
            if uses and top not in entered:
                entered.add(top)
                for u in uses:
                    if u in entered:
                        raise self.error(self.defs[u].offset, f"terminal '{u}' uses itself")
                stack.extend(uses)
                continue
            self.patterns[top] = self.alts_pattern(d.alts, d.ns, top)
            stack.pop()
        return self.patterns[name][0]

    def uses_of(self, owner: str, d: _Definition) -> list[str]:
        out, todo = [], [node for seq in d.alts for node in seq]
        while todo:
            node = todo.pop()
            if node[0] == "name":
                if node[1].lstrip("_")[:1].islower():
                    raise self.error(
                        node[2], f"terminal '{owner}' uses rule '{node[1]}' (terminals are made of terminals)"
                    )
                out.append(self.resolve(d.ns, node[1], node[2], owner))
            elif node[0] == "tmpl":
                raise self.error(node[3], f"terminal '{owner}' uses the template '{node[1]}'")
            elif node[0] in ("group", "maybe"):
                todo.extend(n for seq in node[1] for n in seq)
            elif node[0] == "rep":
                todo.append(node[1])
        return out

    def alts_pattern(self, alts: list, ns, owner: str) -> tuple[str, int]:
        """(regex, how it may be joined) of alternatives: each a sequence of nodes, parts grouped
        only where precedence needs it (lark's own spelling groups every part)."""
        parts = [self.seq_pattern(seq, ns, owner) for seq in alts]
        if len(parts) == 1:
            return parts[0]
        return "|".join(p for p, _ in parts), ALTERNATION

    def seq_pattern(self, seq: list, ns, owner: str) -> tuple[str, int]:
        parts = [self.node_pattern(n, ns, owner) for n in seq]
        if len(parts) == 1:
            return parts[0]
        return "".join(p if how != ALTERNATION else f"(?:{p})" for p, how in parts), SEQUENCE

    def node_pattern(self, node, ns, owner: str) -> tuple[str, int]:
        kind = node[0]
        if kind == "lit":
            return node[1], node[4]
        if kind == "name":
            return self.patterns[self.resolve(ns, node[1], node[2], owner)]
        if kind == "group":
            return self.alts_pattern(node[1], ns, owner)
        if kind == "maybe":
            inner, lo, hi = self.alts_pattern(node[1], ns, owner), 0, 1
        else:
            inner, lo, hi = self.node_pattern(node[1], ns, owner), node[2], node[3]
        count = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi)) or (
            f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"
        )
        pattern, how = inner
        return (pattern if how == ATOM else f"(?:{pattern})") + count, SEQUENCE

    def terminal_symbol(self, name: str) -> str:
        d = self.defs[name]
        where = self.parsed.place(d.offset) if d.offset is not None else None
        return self.terminal(name, self.pattern(name), where)

    # -- rules ------------------------------------------------------------------------------
    def queue(self, name: str, d: _Definition, env: dict) -> None:
        if name not in self.queued:
            self.queued.add(name)
            self.work.append((name, d, env))

    def lower(self, start: str) -> CFG:
        user_rules = {n: None for n, d in self.defs.items() if d.kind == "rule" and not d.params}
        if start not in user_rules:
            raise ConstraintError(f"{self.source}: no rule '{start}' (the start symbol)")
        for name in dict.fromkeys([start, *user_rules]):
            self.queue(name, self.defs[name], {})
        while self.work:
            name, d, env = self.work.pop()
            for seq in d.alts:
                self.add_rule(name, tuple(self.sequence(seq, d.ns, env, name)))
        ignore = []
        for k, (alts, offset) in enumerate(self.parsed.ignores):
            if len(alts) == 1 and len(alts[0]) == 1 and alts[0][0][0] == "name":
                node = alts[0][0]
                if node[1].lstrip("_")[:1].islower():
                    raise self.error(node[2], f"%ignore of rule '{node[1]}' (only terminals are ignored)")
                ignore.append(self.terminal_symbol(self.resolve(None, node[1], node[2], "%ignore")))
                continue
            name = f"__IGNORE_{k}"
            self.defs[name] = _Definition("term", (), alts, offset)
            ignore.append(self.terminal_symbol(name))
        made = dict.fromkeys(r.lhs for r in self.rules)
        where = {n: self.parsed.place(self.defs[n].offset) for n in made if n in user_rules}
        return CFG(start, tuple(self.rules), self.terminals, tuple(dict.fromkeys(ignore)), self.source, where)

    def sequence(self, seq: list, ns, env: dict, owner: str) -> list[str]:
        out: list[str] = []
        for node in seq:
            kind = node[0]
            if kind == "group" and len(node[1]) == 1:
                out.extend(self.sequence(node[1][0], ns, env, owner))
                continue
            symbol = self.symbol(node, ns, env, owner)
            if symbol is not None:
                out.append(symbol)
        return out

    def symbol(self, node, ns, env: dict, owner: str) -> str | None:
        """The one symbol of ``node`` (None: the empty text), helper rules made as needed."""
        kind = node[0]
        if kind == "lit":
            return self.terminal(node[2], node[1], self.parsed.place(node[3]) if ns is None else None)
        if kind == "name":
            name = node[1]
            if name in env:
                return env[name]
            final = self.resolve(ns, name, node[2], owner)
            d = self.defs[final]
            if d.kind == "term":
                return self.terminal_symbol(final)
            if d.params:
                raise self.error(node[2], f"template '{name}' used without its {len(d.params)} argument(s)")
            self.queue(final, d, {})
            return final
        if kind == "tmpl":
            final = self.resolve(ns, node[1], node[3], owner)
            d = self.defs[final]
            if len(d.params) != len(node[2]):
                raise self.error(
                    node[3], f"template '{node[1]}' takes {len(d.params)} argument(s), given {len(node[2])}"
                )
            args = [self.symbol(a, ns, env, owner) for a in node[2]]
            if None in args:
                raise self.error(node[3], f"an argument of template '{node[1]}' is the empty text")
            instance = f"{final}{{{','.join(args)}}}"
            self.queue(instance, d, dict(zip(d.params, args)))
            return instance
        if kind in ("group", "maybe"):
            alts = [self.sequence(seq, ns, env, owner) for seq in node[1]]
            return self.group_symbol(owner, alts + [[]] if kind == "maybe" else alts)
        _, inner, lo, hi, _ = node
        symbol = self.symbol(inner, ns, env, owner)
        return None if symbol is None else self.repeat(owner, symbol, lo, hi)


def read_lark(text: str, source: str = "<grammar>", start: str = "start") -> CFG:
    """Read a Lark grammar (module docstring) into a :class:`CFG` whose start is ``start``.

    Every rule the text defines (templates aside) is kept, reachable or not, with its place in
    :attr:`CFG.where`, so that :func:`~decodekit.constraints.grammar.reduce.reduce` (``strict``)
    can name an unused one. Raises :class:`ConstraintError` as ``source:line:col: message``."""
    if not isinstance(text, str):
        raise ConstraintError(f"{source}: a Lark grammar is text, not {type(text).__name__}")
    return _Lowering(_Parser(text, source).run()).lower(start)
