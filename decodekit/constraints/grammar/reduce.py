"""Checks and reduction of a :class:`~decodekit.constraints.grammar.cfg.CFG`.

:func:`check_terminals` reads every terminal pattern with decodekit's own regex reader and
refuses one that matches the empty text (Lark's Earley refuses them too: a lexeme is never
empty). :func:`reduce` keeps only symbols that are productive (derive some finite text) and
reachable from the start through productive rules, so that every prefix of a sentential form the
engine may follow can be completed. All passes are iterative and linear in the grammar's size.
"""

from __future__ import annotations

import regex

from decodekit.constraints.grammar.cfg import CFG, Rule, at
from decodekit.errors import ConstraintError

__all__ = ["check_symbols", "check_terminals", "nullable_node", "productive", "reachable", "reduce"]


def _rule_place(cfg: CFG, lhs: str) -> str:
    return at(cfg.source, cfg.where.get(lhs))


def check_symbols(cfg: CFG) -> None:
    """Refuse a symbol used on a right-hand side that is neither a terminal nor has rules, a name
    that is both, and a start symbol without rules (one line each, naming the rule)."""
    heads = set(cfg.nonterminals)
    for name in heads & set(cfg.terminals):
        raise ConstraintError(f"{_rule_place(cfg, name)}'{name}' is both a rule and a terminal")
    if cfg.start not in heads:
        raise ConstraintError(f"{cfg.source}: no rule '{cfg.start}' (the start symbol)")
    for name in cfg.ignore:
        if name not in cfg.terminals:
            raise ConstraintError(f"{cfg.source}: the ignored terminal '{name}' is not defined")
    for rule in cfg.rules:
        for i, sym in enumerate(rule.rhs):
            if sym not in heads and sym not in cfg.terminals:
                raise ConstraintError(
                    f"{_rule_place(cfg, rule.lhs)}undefined symbol '{sym}' "
                    f"(in rule '{rule.lhs}', item {i + 1})"
                )


# a literal as the readers spell it (escaped metacharacters, \xHH \uHHHH \UHHHHHHHH \n \t \r):
# valid and never empty, so the regex reader need not see it
_PLAIN_LITERAL = regex.compile(
    r"(?:[^\\.^$*+?{}\[\]|()]|\\[^0-9A-Za-z]|\\[ntr]|\\x[0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8})+"
)


def nullable_node(root) -> bool:
    """Whether the regex AST ``root`` (:mod:`decodekit.constraints.syntax.nodes`) matches the
    empty text (iteratively: post-order over the nodes)."""
    from decodekit.constraints.syntax.nodes import Kind

    memo: dict[int, bool] = {}
    stack = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if id(node) in memo:
            continue
        kids = node.items if node.kind in (Kind.SEQ, Kind.ALT, Kind.REP) else ()
        if not ready and kids:
            stack.append((node, True))
            stack.extend((k, False) for k in kids)
            continue
        if node.kind is Kind.SET:
            memo[id(node)] = False
        elif node.kind is Kind.ASSERT:
            memo[id(node)] = True
        elif node.kind is Kind.SEQ:
            memo[id(node)] = all(memo[id(k)] for k in kids)
        elif node.kind is Kind.ALT:
            memo[id(node)] = any(memo[id(k)] for k in kids)
        else:
            memo[id(node)] = node.lo == 0 or memo[id(kids[0])]
    return memo[id(root)]


def check_terminals(cfg: CFG) -> None:
    """Refuse a terminal whose pattern decodekit's regex reader does not accept, or that matches
    the empty text: ``source:line:col: terminal 'NAME': ...``."""
    from decodekit.constraints.syntax.parser import parsed  # check_pattern's reader, without torch

    seen: set[str] = set()
    for term in cfg.terminals.values():
        if term.pattern in seen or _PLAIN_LITERAL.fullmatch(term.pattern):
            continue
        seen.add(term.pattern)
        where = at(cfg.source, term.where)
        try:
            root, _ = parsed(term.pattern)
        except ConstraintError as e:
            raise ConstraintError(f"{where}terminal '{term.name}': {e}") from None
        if nullable_node(root):
            raise ConstraintError(
                f"{where}terminal '{term.name}' matches the empty text ({term.pattern!r}): "
                "a terminal must be at least one character (make it optional in the rules instead)"
            )


def productive(cfg: CFG) -> set[str]:
    """The nonterminals that derive some finite text (terminals are productive)."""
    terminals, rules = cfg.terminals, cfg.rules
    missing = [0] * len(rules)  # per rule: how many of its symbols are not yet productive
    waiting: dict[str, list[int]] = {}
    done: set[str] = set()
    queue: list[str] = []
    for i, rule in enumerate(rules):
        n = 0
        for sym in rule.rhs:
            if sym not in terminals:
                n += 1
                waiting.setdefault(sym, []).append(i)
        missing[i] = n
        if not n and rule.lhs not in done:
            done.add(rule.lhs)
            queue.append(rule.lhs)
    while queue:
        for i in waiting.pop(queue.pop(), ()):
            missing[i] -= 1
            if not missing[i]:
                lhs = rules[i].lhs
                if lhs not in done:
                    done.add(lhs)
                    queue.append(lhs)
    return done


def reachable(cfg: CFG, rules: tuple[Rule, ...] | None = None) -> set[str]:
    """The symbols (nonterminals and terminals) reachable from the start through ``rules``."""
    by_lhs: dict[str, list[Rule]] = {}
    for rule in cfg.rules if rules is None else rules:
        by_lhs.setdefault(rule.lhs, []).append(rule)
    seen, stack = {cfg.start}, [cfg.start]
    while stack:
        for rule in by_lhs.get(stack.pop(), ()):
            for sym in rule.rhs:
                if sym not in seen:
                    seen.add(sym)
                    stack.append(sym)
    return seen


def reduce(cfg: CFG, *, strict: bool = False) -> CFG:
    """``cfg`` with every symbol productive and reachable (and duplicate rules and ``A -> A``
    dropped); the ignore terminals kept.

    Raises :class:`ConstraintError` if a symbol is undefined (:func:`check_symbols`) or the start
    symbol's language is empty. With ``strict``, a rule the user wrote (a name in ``cfg.where``)
    that derives no finite text or that the start symbol never reaches is an error too (the
    readers' helper rules are removed silently)."""
    check_symbols(cfg)
    good = productive(cfg)
    if cfg.start not in good:
        raise ConstraintError(
            f"{_rule_place(cfg, cfg.start)}the grammar's language is empty: "
            f"'{cfg.start}' derives no finite text (each of its alternatives needs a rule that never ends)"
        )
    kept = tuple(
        dict.fromkeys(
            r
            for r in cfg.rules
            if r.lhs in good and r.rhs != (r.lhs,) and all(s in good or s in cfg.terminals for s in r.rhs)
        )
    )
    seen = reachable(cfg, kept)
    if strict:
        for name in cfg.where:
            if name not in good:
                raise ConstraintError(
                    f"{_rule_place(cfg, name)}rule '{name}' derives no finite text "
                    "(each of its alternatives needs a rule that never ends)"
                )
        for name in cfg.where:
            if name not in seen:
                raise ConstraintError(
                    f"{_rule_place(cfg, name)}rule '{name}' is never used (from '{cfg.start}')"
                )
    rules = tuple(r for r in kept if r.lhs in seen)
    ignore = set(cfg.ignore)
    terminals = {n: t for n, t in cfg.terminals.items() if n in seen or n in ignore}
    where = {n: w for n, w in cfg.where.items() if n in seen}
    return CFG(cfg.start, rules, terminals, cfg.ignore, cfg.source, where)
