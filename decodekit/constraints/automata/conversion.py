"""A parsed regex and a :class:`~decodekit.constraints.automata.pattern.Pattern` as expressions of the
:class:`~decodekit.constraints.automata.algebra.Algebra`: the character sets collected (for the
partition into classes), each AST converted, and a Pattern's nodes combined."""

from __future__ import annotations

from decodekit.constraints.automata.algebra import Algebra, Expr, post_order
from decodekit.constraints.automata.pattern import ANY_TEXT, Pattern, pattern_parts
from decodekit.constraints.automata.product import first_char_gate
from decodekit.constraints.syntax.nodes import Anchor, Kind, Node

FACTOR_FROM = 16  # branches of an alternation from which common prefixes are factored out


def collect_sets(root: Node, sets: dict) -> None:
    """The character sets of the AST ``root`` into ``sets`` (set -> its number, first seen first);
    a subtree the parser shares is walked once."""
    stack, seen = [root], set()
    while stack:
        n = stack.pop()
        if n.kind is Kind.SET:
            sets.setdefault(n.cset, len(sets))
        elif id(n) not in seen:
            seen.add(id(n))
            stack.extend(n.items)


def convert(root: Node, alg: Algebra, set_of: dict, set_mask: list[int]) -> Expr:
    """The parsed AST as an :class:`Expr` (iterative over the nesting; a node the parser shares
    is converted once)."""
    done: dict[int, Expr] = {}
    stack = [root]
    set_kind, assert_kind, seq_kind, alt_kind = Kind.SET, Kind.ASSERT, Kind.SEQ, Kind.ALT
    while stack:
        node = stack[-1]
        key = id(node)
        if key in done:
            stack.pop()
            continue
        kind = node.kind
        if kind is set_kind:
            stack.pop()
            done[key] = alg.chars(set_mask[set_of[node.cset]])
            continue
        if kind is assert_kind:
            stack.pop()
            a = node.anchor
            done[key] = (
                alg.wb if a is Anchor.WORD_BOUNDARY else alg.nwb if a is Anchor.NOT_WORD_BOUNDARY else alg.eps
            )
            continue
        items = node.items
        factor = kind is alt_kind and len(items) >= FACTOR_FROM
        if factor:  # its sequences' parts, not the sequences: they are made once, factored
            parts = [c.items if c.kind is seq_kind else (c,) for c in items]
            missing = [x for branch in parts for x in branch if id(x) not in done]
        else:
            missing = [c for c in items if id(c) not in done]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        if factor:
            out = left_factored(alg, [[done[id(x)] for x in branch] for branch in parts])
        elif kind is seq_kind:
            out = alg.eps
            for c in reversed(items):
                out = alg.cat(done[id(c)], out)
        elif kind is alt_kind:
            out = alg.union([done[id(c)] for c in items])
        else:
            out = alg.rep(done[id(items[0])], node.lo, node.hi)
        done[key] = out
    return done[id(root)]


def left_factored(alg: Algebra, sequences: list[list[Expr]]) -> Expr:
    """The union of the concatenations ``sequences``, their common prefixes factored out
    (``xa|xb`` as ``x(a|b)``, over a trie of the parts; the same language): an alternation of
    10,000 words is then a union of the first characters, each before the union of what follows
    it, so a derivative picks one member instead of making a union of hundreds of suffixes.
    Iterative over the trie's depth."""
    root: dict = {}  # part -> the trie below it; the key None: a sequence ends here
    for parts in sequences:
        node = root
        for e in parts:
            node = node.setdefault(e, {})
        node[None] = None
    value: dict[int, Expr] = {}
    stack = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if not ready:
            stack.append((node, True))
            stack.extend((child, False) for e, child in node.items() if e is not None)
            continue
        members = [alg.eps] if None in node else []
        members += [alg.cat(e, value[id(child)]) for e, child in node.items() if e is not None]
        value[id(node)] = members[0] if len(members) == 1 else alg.union(members)
    return value[id(root)]


def combine(p: Pattern, alg: Algebra, converted: dict[str, Expr]) -> Expr:
    """The expression of ``p``: a regex leaf gated by ``regex``'s first-character test
    (:func:`~decodekit.constraints.automata.product.first_char_gate`) as a single pattern's
    compile does; an exclude's search leaf ``.*R.*``. Each node of the DAG is converted once,
    without recursion (a shared part is one expression)."""

    def value(x: Pattern, parts: list[Expr]) -> Expr:
        if x.op == "re":
            gate = first_char_gate(x.args)
            e = converted[x.args]
            return e if gate is None else alg.intersection((e, converted[gate]))
        if x.op == "search":
            anything = converted[ANY_TEXT]
            return alg.cat(anything, alg.cat(converted[x.args], anything))
        if x.op == "rep":
            return alg.rep(parts[0], x.args[1], x.args[2])
        if x.op == "and":
            return alg.intersection(parts)
        if x.op == "or":
            return alg.union(parts)
        if x.op == "cat":
            out = alg.eps
            for e in reversed(parts):
                out = alg.cat(e, out)
            return out
        return alg.complement(parts[0])

    return post_order(p, {}, pattern_parts, value)
