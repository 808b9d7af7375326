"""Regular parts of a grammar made terminals (:func:`inline_regular`): the same language, fewer and
longer lexemes for the engine.

A nonterminal is *regular* here when each of its rules is a sequence of terminals and regular
nonterminals, except that it may name itself once, first (``X -> X b``) or last (``X -> a X``), in
some rules: then its language is ``(a1|a2..)* (c1|c2..) (b1|b2..)*`` over its other rules ``c``
(the ``x*`` and ``x+`` helper rules of the readers are of this form). Every nonterminal so reached
is regular too, so no recursion is lost. In each remaining rule, every maximal run of regular
symbols becomes one terminal whose pattern is the run's regex; a nullable run ``R`` becomes a
nonterminal ``R -> <R> | ()`` over the terminal of its non-empty texts (a terminal is never
empty). The start symbol stays a nonterminal.

With ignore terminals, the pieces inside a made terminal are joined by ``(?:IGN1|IGN2)*``: Lark's
language allows ignored text between any two terminals, and the text around a lexeme is already
such a gap, so the language is unchanged.

A made terminal's pattern is that regex text; where every piece means inside it what it means
alone (:func:`~decodekit.constraints.automata.pattern.joinable`) and the run is not an alternation
of literals, it also carries the same language as an ``expression``: a
:class:`~decodekit.constraints.automata.pattern.Pattern` over the pieces' own regexes, which the
engine reads instead, so that no regex is read twice (json.lark's five made terminals took 0.4 ms
of reading again).

Bounds: a made pattern is kept under :data:`MAX_PATTERN_CHARS` characters, :data:`MAX_GROUP_DEPTH`
nested groups and :data:`MAX_STATES` automaton states (past them the nonterminal stays a rule); an
alternation of literals alone under :data:`MAX_LITERALS_CHARS` characters and
:data:`MAX_LITERALS_STATES` states.
"""

from __future__ import annotations

from decodekit.constraints.automata.pattern import Pattern, joinable, union
from decodekit.constraints.grammar.cfg import CFG, Rule, Terminal
from decodekit.constraints.grammar.reduce import reduce
from decodekit.errors import ConstraintError

__all__ = ["MAX_GROUP_DEPTH", "MAX_PATTERN_CHARS", "MAX_STATES", "inline_regular"]

MAX_PATTERN_CHARS = 20_000
# an alternation of literals alone (``root ::= "w1" | "w2" | ...``) may be larger: its regex is read
# with its common prefixes factored out (automata/conversion.left_factored), so it costs about its
# length, where 60,000 literals as rules cost a lexeme under way each (59 CPU s, 1.9 GB)
MAX_LITERALS_CHARS = 2_000_000
MAX_LITERALS_STATES = 1_000_000  # the regex reader's own limit
MAX_GROUP_DEPTH = 60  # decodekit's regex reader takes 100
MAX_STATES = 200_000  # Thompson states, repetitions multiplied out (the reader takes 1,000,000)

_SIMPLE = set("|()[]{}*+?^$.\\")
_MAX_NULLABLE_RUN = 32  # the non-empty texts of n nullable pieces in a row take n^2 pieces


class _TooBig(Exception):
    """A made pattern would be too large: keep the part as rules."""


class _Re:
    """A regex over terminals: ``lit`` (a terminal's pattern), ``seq``, ``alt``, ``rep`` (``item``
    ``lo`` to ``hi`` times, ``hi`` None: unbounded), ``eps``; with what bounds its rendering."""

    __slots__ = ("kind", "items", "text", "lo", "hi", "nullable", "chars", "depth", "states", "key")

    def __init__(self, kind, items=(), text="", lo=0, hi=None):
        self.kind, self.items, self.text, self.lo, self.hi = kind, tuple(items), text, lo, hi
        if kind == "lit":
            self.nullable, self.chars, self.depth, self.states = False, len(text) + 4, 1, 2 + len(text)
            self.key = ("lit", text)
        elif kind == "eps":
            self.nullable, self.chars, self.depth, self.states, self.key = True, 0, 0, 1, ("eps",)
        else:
            its = self.items
            self.chars = sum(x.chars for x in its) + 8 * len(its) + 16
            self.depth = max((x.depth for x in its), default=0) + 2
            self.key = (
                (kind, lo, hi, tuple(x.key for x in its)) if len(its) < 64 else (kind, lo, hi, id(self))
            )
            if kind == "seq":
                self.nullable, self.states = all(x.nullable for x in its), sum(x.states for x in its) + 1
            elif kind == "alt":
                self.nullable, self.states = any(x.nullable for x in its), sum(x.states for x in its) + 2
            else:  # rep
                self.nullable = lo == 0 or its[0].nullable
                self.states = 2 + (max(lo, hi or 0) + 1) * its[0].states


def _seq(items) -> _Re:
    flat = []
    for x in items:
        if x.kind == "seq":
            flat.extend(x.items)
        elif x.kind != "eps":
            flat.append(x)
    # x x{a,b} -> x{a+1,b+1}: collapses the readers' chains of optionals into one counted repeat
    out: list[_Re] = []
    for x in reversed(flat):
        if out and out[-1].kind == "rep" and out[-1].items[0].key == x.key:
            r = out.pop()
            x = _Re("rep", (x,), lo=r.lo + 1, hi=None if r.hi is None else r.hi + 1)
        elif out and x.kind == "rep" and out[-1].key == x.items[0].key and x.hi is None:
            y = out.pop()  # x* x -> x+
            x = _Re("rep", (y,), lo=x.lo + 1, hi=None)
        out.append(x)
    out.reverse()
    if not out:
        return _Re("eps")
    return out[0] if len(out) == 1 else _Re("seq", out)


def _alt(items) -> _Re:
    flat, seen, has_eps = [], set(), False
    for x in items:
        for y in x.items if x.kind == "alt" else (x,):
            if y.kind == "eps":
                has_eps = True
            elif y.key not in seen:
                seen.add(y.key)
                flat.append(y)
    if not flat:
        return _Re("eps")
    body = flat[0] if len(flat) == 1 else _Re("alt", flat)
    if not has_eps or body.nullable:
        return body
    if body.kind == "rep" and body.lo == 1:  # (x{1,b})? -> x{0,b}
        return _Re("rep", body.items, lo=0, hi=body.hi)
    return _Re("rep", (body,), lo=0, hi=1)


def _nonempty(r: _Re) -> _Re | None:
    """The texts of ``r`` but the empty one (None: no such text)."""
    if not r.nullable:
        return r
    if r.kind == "eps":
        return None
    if r.kind == "alt":
        parts = [p for p in (_nonempty(x) for x in r.items) if p is not None]
        return _alt(parts) if parts else None
    if r.kind == "rep":
        x = r.items[0]
        if r.hi == 0:
            return None
        if not x.nullable:
            return _Re("rep", (x,), lo=max(r.lo, 1), hi=r.hi)
        head = _nonempty(x)
        if head is None:
            return None
        return _seq([head, _Re("rep", (x,), lo=0, hi=None if r.hi is None else r.hi - 1)])
    # seq of nullable items: the first non-empty item, then the rest as they are (quadratic)
    if len(r.items) > _MAX_NULLABLE_RUN:
        raise _TooBig
    parts = []
    for i, x in enumerate(r.items):
        head = _nonempty(x)
        if head is not None:
            parts.append(_seq([head, *r.items[i + 1 :]]))
    return _alt(parts) if parts else None


def _render(r: _Re, join: str) -> str:
    """The regex text of ``r``, pieces joined by ``join`` (the ignore gap, or nothing)."""
    if r.kind == "lit":
        t = r.text
        return t if not _SIMPLE & set(t) else f"(?:{t})"
    if r.kind == "eps" or r.kind == "rep" and r.hi == 0:
        return ""
    if r.kind == "seq":
        return join.join(_render(x, join) for x in r.items)
    if r.kind == "alt":
        return "(?:" + "|".join(_render(x, join) for x in r.items) + ")"
    x, lo, hi = _render(r.items[0], join), r.lo, r.hi
    if not join:
        count = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
        if count is None:
            count = f"{{{lo}}}" if lo == hi else f"{{{lo},{'' if hi is None else hi}}}"
        return f"(?:{x}){count}"
    # with gaps: x (gap x){lo-1,hi-1}, optional as a whole when lo == 0
    more = "*" if hi is None else f"{{{max(lo - 1, 0)},{hi - 1}}}"
    if hi is not None and hi - 1 == max(lo - 1, 0):
        more = f"{{{hi - 1}}}"
    body = f"(?:{x}(?:{join}{x}){more})"
    return body + "?" if lo == 0 else body


_EMPTY = Pattern("")


def _expression(r: _Re, gap: Pattern | None) -> Pattern:
    """What :func:`_render` writes of ``r``, as a Pattern over the pieces' regexes (``gap``: the
    ignore gap's, or None). Raw nodes: :func:`~decodekit.constraints.automata.pattern.concat`
    would join joinable texts into one regex, to be read again."""
    if r.kind == "lit":
        return Pattern(r.text)
    if r.kind == "eps" or r.kind == "rep" and r.hi == 0:
        return _EMPTY
    if r.kind == "alt":
        return union(*(_expression(x, gap) for x in r.items))
    if r.kind == "seq":
        parts = [_expression(x, gap) for x in r.items]
        if gap is not None:
            parts = [y for x in parts for y in (gap, x)][1:]
        return Pattern("", "cat", tuple(parts))
    x, lo, hi = _expression(r.items[0], gap), r.lo, r.hi
    if gap is None:
        return Pattern("", "rep", (x, lo, hi))
    # with gaps: x (gap x){lo-1,hi-1}, optional as a whole when lo == 0
    more = Pattern("", "rep", (Pattern("", "cat", (gap, x)), max(lo - 1, 0), None if hi is None else hi - 1))
    body = Pattern("", "cat", (x, more))
    return union(body, _EMPTY) if lo == 0 else body


def _pieces(r: _Re) -> list[str]:
    """The regex texts of ``r``'s pieces."""
    out, stack = [], [r]
    while stack:
        x = stack.pop()
        if x.kind == "lit":
            out.append(x.text)
        else:
            stack.extend(x.items)
    return out


def _sccs(nodes: list[str], edges: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively, callees before callers."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on.add(v)
            succ = edges.get(v, [])
            recurse = False
            while i < len(succ):
                w = succ[i]
                i += 1
                if w not in index:
                    work.append((v, i))
                    work.append((w, 0))
                    recurse = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp)
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
    return out


def _regular(cfg: CFG, refused: set[str]) -> dict[str, _Re]:
    """The regular nonterminals (module docstring) within the bounds and not ``refused``, with
    their regexes."""
    by_lhs: dict[str, list[tuple[str, ...]]] = {}
    for r in cfg.rules:
        by_lhs.setdefault(r.lhs, []).append(r.rhs)
    edges = {
        x: list(dict.fromkeys(s for rhs in alts for s in rhs if s in by_lhs)) for x, alts in by_lhs.items()
    }
    lits = {name: _Re("lit", text=t.pattern) for name, t in cfg.terminals.items()}
    regex_of: dict[str, _Re] = {}
    for comp in _sccs(list(by_lhs), edges):
        if len(comp) != 1 or comp[0] in refused:
            continue
        x = comp[0]
        left, right, base, ok = [], [], [], True
        for rhs in by_lhs[x]:
            n = rhs.count(x)
            if n == 0:
                target = base
            elif n == 1 and rhs[0] == x and len(rhs) > 1:
                target, rhs = left, rhs[1:]
            elif n == 1 and rhs[-1] == x:
                target, rhs = right, rhs[:-1]
            else:
                ok = False
                break
            parts = [lits.get(s) or regex_of.get(s) for s in rhs]
            if any(p is None for p in parts):
                ok = False
                break
            target.append(_seq(parts))
        if not ok or not base:
            continue
        r = _alt(base)
        if left or right:
            r = _seq(
                ([_Re("rep", (_alt(right),), lo=0, hi=None)] if right else [])
                + [r]
                + ([_Re("rep", (_alt(left),), lo=0, hi=None)] if left else [])
            )
        if _fits(r):
            regex_of[x] = r
    return regex_of


def _literals(r: _Re) -> bool:
    """Whether ``r`` is an alternation of literals (:data:`MAX_LITERALS_CHARS`)."""
    return r.kind == "alt" and all(x.kind == "lit" for x in r.items)


def _fits(r: _Re) -> bool:
    """Whether a made pattern of ``r`` stays within the bounds (module docstring)."""
    if _literals(r):
        return r.chars <= MAX_LITERALS_CHARS and r.states <= MAX_LITERALS_STATES
    return r.chars <= MAX_PATTERN_CHARS and r.depth <= MAX_GROUP_DEPTH and r.states <= MAX_STATES


class _Rewrite:
    """One rewriting of ``cfg``'s rules with the regular nonterminals ``regex_of`` (module
    docstring): :attr:`rules`, :attr:`terminals`, and :attr:`made` (terminal -> (pattern, run,
    whether it is an alternation of literals, its expression or None))."""

    def __init__(
        self,
        cfg: CFG,
        regex_of: dict[str, _Re],
        join: str,
        gap: Pattern | None,
        unmerged: set[tuple[str, ...]],
    ):
        self.regex_of, self.join, self.gap, self.unmerged = regex_of, join, gap, unmerged
        self.lits = {name: _Re("lit", text=t.pattern) for name, t in cfg.terminals.items()}
        self.terminals = dict(cfg.terminals)
        self.made: dict[str, tuple[str, tuple[str, ...], bool, Pattern | None]] = {}
        self._joinable: dict[str, bool] = {}
        self.holders: dict[str, list[Rule]] = {}  # nullable runs: R -> <R> | ()
        self.too_big: list[tuple[str, ...]] = []
        rules = []
        for rule in cfg.rules:
            if rule.lhs not in regex_of:  # a regular one is reached only through runs (or is the start)
                rules.append(Rule(rule.lhs, self.replace(rule.rhs)))
        if cfg.start in regex_of:
            r = regex_of[cfg.start]
            try:
                ne = _nonempty(r)
            except _TooBig:
                self.too_big.append((cfg.start,))
                ne = None
            if ne is not None:
                rules.append(Rule(cfg.start, (self.terminal((cfg.start,), ne),)))
            if r.nullable:
                rules.append(Rule(cfg.start, ()))
        for holder, more in self.holders.items():
            if holder != cfg.start:
                rules.extend(more)
        self.rules = tuple(rules)

    def terminal(self, run: tuple[str, ...], r: _Re) -> str:
        name = "<" + " ".join(run) + ">"
        if name not in self.made:
            text, literals, expression = _render(r, self.join), _literals(r), None
            fits = len(text) <= 2 * MAX_PATTERN_CHARS  # past it the text is refused (inline_regular)
            if fits and not literals and (not self.join or self.gap is not None) and self.joinable(r):
                expression = _expression(r, self.gap)
            self.made[name] = (text, run, literals, expression)
            self.terminals[name] = Terminal(name, text, expression=expression)
        return name

    def joinable(self, r: _Re) -> bool:
        """Whether each piece of ``r`` means inside a longer regex what it means alone."""
        known = self._joinable
        for text in _pieces(r):
            if text not in known:
                known[text] = joinable(text)
            if not known[text]:
                return False
        return True

    def replace(self, rhs: tuple[str, ...]) -> tuple[str, ...]:
        """``rhs`` with each maximal run of regular symbols made one symbol."""
        regex_of, lits = self.regex_of, self.lits
        out, i = [], 0
        while i < len(rhs):
            j = i
            while j < len(rhs) and (rhs[j] in regex_of or rhs[j] in lits):
                j += 1
            if j == i:
                out.append(rhs[i])
                i += 1
                continue
            run, i = rhs[i:j], j
            if len(run) == 1 and run[0] in lits:
                out.append(run[0])
            elif run in self.unmerged:
                out.extend(s if s in lits else self.replace((s,))[0] for s in run)
            else:
                out.append(self.run_symbol(run))
        return tuple(out)

    def run_symbol(self, run: tuple[str, ...]) -> str:
        """The one symbol for a run of regular symbols: a made terminal, or a nonterminal over it
        and the empty text (:class:`_TooBig` if the run's non-empty texts are too large)."""
        r = _seq([self.lits.get(s) or self.regex_of[s] for s in run])
        if not r.nullable:
            return self.terminal(run, r)
        holder = run[0] if len(run) == 1 else "{" + " ".join(run) + "}"
        if holder not in self.holders:
            try:
                ne = _nonempty(r)
            except _TooBig:
                self.too_big.append(run)
                return holder
            self.holders[holder] = [Rule(holder, (self.terminal(run, ne),))] if ne is not None else []
            self.holders[holder].append(Rule(holder, ()))
        return holder


def inline_regular(cfg: CFG, reduced: bool = False) -> CFG:
    """``cfg`` (reduced first, unless ``reduced`` says it is) with its regular parts made terminals
    (module docstring): the same language, every made terminal non-empty and read by decodekit's
    regex reader, from its text or its pieces'."""
    from decodekit.constraints.syntax.parser import parsed as check_pattern  # no torch import

    if not reduced:
        cfg = reduce(cfg)
    join, gap = "", None
    if cfg.ignore:
        ignored = [cfg.terminals[n].pattern for n in cfg.ignore]
        join = "(?:" + "|".join(f"(?:{p})" for p in ignored) + ")*"
        if all(joinable(p) for p in ignored):
            gap = Pattern("", "rep", (union(*ignored), 0, None))
    refused: set[str] = set()  # nonterminals, and runs, whose made pattern the regex reader refused
    unmerged: set[tuple[str, ...]] = set()
    while True:
        regex_of = _regular(cfg, refused)
        done = _Rewrite(cfg, regex_of, join, gap, unmerged)
        progress = False
        for run in done.too_big:
            if len(run) > 1:
                unmerged.add(run)
            else:
                refused.add(run[0])
            progress = True
        for pattern, run, literals, expression in done.made.values():
            if expression is not None:  # its pieces were read, each alone
                continue
            try:
                if len(pattern) > 2 * (MAX_LITERALS_CHARS if literals else MAX_PATTERN_CHARS):
                    raise ConstraintError("too long")
                check_pattern(pattern)
            except ConstraintError:
                mine = {s for s in run if s in regex_of}
                if mine:
                    refused.update(mine)
                elif run not in unmerged:
                    unmerged.add(run)
                else:
                    continue
                progress = True
        if not progress:
            break
    return reduce(CFG(cfg.start, done.rules, done.terminals, cfg.ignore, cfg.source, cfg.where))
