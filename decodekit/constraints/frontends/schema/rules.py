"""A recursive JSON Schema as a context-free grammar: :func:`to_cfg`.

The JSON Schema front end writes each recursive definition (a ``$ref`` target that encloses
itself, directly or through others) once, as a fragment in which every reference to a recursive
definition is a *rule placeholder* (:func:`placeholder`, a Pattern leaf of its own). This module
lowers those fragments to a :class:`~decodekit.constraints.grammar.cfg.CFG`: every part of a
fragment that holds no placeholder stays one regular terminal (the regex text or Pattern the
front end wrote, compiled by the derivative engine as before), each placeholder becomes its
definition's nonterminal, and only the concatenations, unions and repetitions *around*
placeholders become rules:

* ``cat(a, b, ...)``: the symbols of each part in a row (adjacent parts without placeholders
  joined into one terminal);
* ``or(a, b, ...)``: a nonterminal with one rule per part;
* ``rep(p, lo, hi)``: ``p`` lo times, then a chain of ``hi - lo`` optional copies (``hi`` None:
  a right-recursive list, ``L -> () | p L``).

A placeholder under an intersection or a complement (``and``, ``not``) has no context-free
equivalent: refused with :class:`RecursionNotLowered`, and the front end falls back to unrolling.
"""

from __future__ import annotations

from decodekit.constraints.automata.pattern import Pattern, concat
from decodekit.constraints.grammar.cfg import CFG, Rule, Terminal
from decodekit.constraints.grammar.reduce import reduce
from decodekit.errors import ConstraintError

__all__ = ["RecursionNotLowered", "placeholder", "to_cfg"]

START = "value"
MAX_RULES = 100_000  # rules of one schema's grammar (a maxItems of 10**6 around a recursion)


class RecursionNotLowered(ConstraintError):
    """A recursive definition is used where a grammar cannot say it (inside an intersection or a
    complement, beside keywords that restrict it): the schema is written unrolled instead."""


def placeholder(name: str) -> Pattern:
    """The Pattern standing for nonterminal ``name`` inside a fragment: a regex leaf no writer
    produces, wrapped (a union of one) so that :func:`concat` and :func:`repeat` never join it
    into a longer regex text."""
    return Pattern("", "or", (Pattern(f"(?#rule {name})"),))


def _rule_name(p: Pattern) -> str | None:
    """The nonterminal a placeholder stands for (None: not a placeholder)."""
    if p.op == "or" and len(p.args) == 1:
        p = p.args[0]
    if p.op == "re" and p.args.startswith("(?#rule ") and p.args.endswith(")"):
        return p.args[len("(?#rule ") : -1]
    return None


class _Lowering:
    def __init__(self, names: set[str]):
        self.names = names
        self.rules: list[Rule] = []
        self.terminals: dict[str, Terminal] = {}
        self.term_of: dict[object, str] = {}  # regex text or Pattern -> terminal name
        self.sym_of: dict[Pattern, tuple[str, ...]] = {}
        self.holds: dict[Pattern, bool] = {}
        self.made = 0  # nonterminals made for unions and repetitions

    def holds_rule(self, p: Pattern) -> bool:
        """Whether a placeholder is inside ``p`` (iterative post-order, memoised over the DAG)."""
        stack = [(p, False)]
        while stack:
            node, ready = stack.pop()
            if node in self.holds:
                continue
            kids = node.children
            if _rule_name(node) is not None:
                self.holds[node] = True
            elif not kids:
                self.holds[node] = False
            elif ready:
                self.holds[node] = any(self.holds[k] for k in kids)
            else:
                stack.append((node, True))
                stack.extend((k, False) for k in kids if k not in self.holds)
        return self.holds[p]

    def terminal(self, text) -> tuple[str, ...]:
        if text == "" or isinstance(text, Pattern) and text.op == "re" and text.args == "":
            return ()  # the empty text: no symbol
        name = self.term_of.get(text)
        if name is None:
            name = f"t{len(self.terminals)}"
            self.term_of[text] = name
            # a Pattern, so that each terminal reads as compile_regex reads the same Pattern
            self.terminals[name] = Terminal(name, Pattern(text))
        return (name,)

    def fresh(self, what: str) -> str:
        """A new nonterminal's name (numbered: no two alike, however nested the parts)."""
        self.made += 1
        return f"{what}{self.made}"

    def add(self, lhs: str, rhs: tuple[str, ...]) -> None:
        if len(self.rules) >= MAX_RULES:
            raise RecursionNotLowered(f"a recursive JSON Schema's grammar would exceed {MAX_RULES:,} rules")
        self.rules.append(Rule(lhs, rhs))

    def symbols(self, frag) -> tuple[str, ...]:
        """The symbols of a fragment's text (a regex str or a Pattern)."""
        if isinstance(frag, str) or not self.holds_rule(frag):
            return self.terminal(frag)
        got = self.sym_of.get(frag)
        if got is not None:
            return got
        name = _rule_name(frag)
        if name is not None:
            if name not in self.names:
                raise RecursionNotLowered(f"a recursive definition {name!r} was never written")
            out: tuple[str, ...] = (name,)
        elif frag.op == "cat":
            out, run = (), []
            for part in frag.args:
                if self.holds_rule(part):
                    if run:
                        out += self.terminal(concat(*run) if len(run) > 1 else run[0])
                        run = []
                    out += self.symbols(part)
                else:
                    run.append(part)
            if run:
                out += self.terminal(concat(*run) if len(run) > 1 else run[0])
        elif frag.op == "or":
            lhs = self.fresh("alt")
            out = (lhs,)
            for part in frag.args:
                self.add(lhs, self.symbols(part))
        elif frag.op == "rep":
            part, lo, hi = frag.args
            body = self.symbols(part)
            tail = ()
            if hi is None:
                tail = (self.fresh("more"),)
                self.add(tail[0], ())
                self.add(tail[0], body + tail)
            elif hi > lo:
                for _ in range(hi - lo):  # tail_k -> () | body tail_{k-1}
                    lhs = self.fresh("upto")
                    self.add(lhs, ())
                    self.add(lhs, body + tail)
                    tail = (lhs,)
            out = body * lo + tail
        else:  # "and", "not", "search"
            raise RecursionNotLowered(
                "a recursive $ref inside an intersection or complement (a oneOf, not, or a "
                "string's several keywords) has no grammar"
            )
        self.sym_of[frag] = out
        return out


def to_cfg(root, definitions: dict[str, object]) -> CFG:
    """The grammar of a recursive schema: start ``value`` -> ``root``'s symbols, each
    ``definitions`` name -> its fragment's text (None: the definition allows no value, so the
    nonterminal has no rule and the places that need it are removed by :func:`reduce`).

    Raises:
        RecursionNotLowered: a placeholder under ``and``/``not`` (see the module docstring).
        ConstraintError: the grammar derives no finite text (every value needs a recursion).
    """
    low = _Lowering(set(definitions))
    if root is None:
        raise ConstraintError("/: the JSON Schema allows no value (its recursion never ends)")
    low.add(START, low.symbols(root))
    for name, frag in definitions.items():
        if frag is not None:
            low.add(name, low.symbols(frag))
    defined = {r.lhs for r in low.rules}
    rules = tuple(r for r in low.rules if all(s in defined or s in low.terminals for s in r.rhs))
    cfg = CFG(START, rules, low.terminals, source="<JSON Schema>")
    try:
        return reduce(cfg, strict=False)
    except ConstraintError:
        raise ConstraintError(
            "/: the JSON Schema allows no value (every value needs its recursion once more)"
        ) from None
