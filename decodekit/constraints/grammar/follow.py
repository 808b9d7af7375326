"""FOLLOW sets of a grammar's terminals: which terminals may begin right after a lexeme of each
(the followers whose bytes bound how far into a token a completed lexeme's origin is read,
:class:`~decodekit.constraints.tokens.horizons.LexemeHorizons`).

Sets are Python ints used as bitsets (bit u: terminal u), solved by worklists over the subset
constraints ``FIRST(A) >= FIRST(B)`` and ``FOLLOW(y) >= FOLLOW(A)``: each symbol is revisited
only when what it depends on grew, so a 5,000-deep left recursion or 10,000 rules cost a pass
each, not one pass per level.
"""

from __future__ import annotations


def _propagate(values: list[int], into: list[list[int]]) -> None:
    """Close ``values`` under ``values[a] |= values[b]`` for every ``a in into[b]`` (worklist)."""
    todo = [b for b, v in enumerate(values) if v and into[b]]
    while todo:
        b = todo.pop()
        v = values[b]
        for a in into[b]:
            grown = values[a] | v
            if grown != values[a]:
                values[a] = grown
                todo.append(a)


def follow_sets(g) -> list[int]:
    """Per terminal t of the grammar tables ``g`` (:class:`~.earley._Tables`): the bitset of
    the terminals that may begin right after a lexeme of t (FOLLOW over terminals, nullable
    terminals and nonterminals passed over), the ignored ones added; an ignored terminal is
    followed by any."""
    n, n_terms = len(g.names), len(g.term_names)
    first, feeds = [0] * n, [[] for _ in range(n)]  # feeds[b]: the A with FIRST(A) >= FIRST(B)
    for r, body in enumerate(g.rhs):
        a = g.lhs[r]
        for y in body:
            if y >= 0:
                feeds[y].append(a)
            elif y != g.end:
                first[a] |= 1 << (-1 - y)
            if not g.sym_nullable(y):
                break
    _propagate(first, feeds)
    # FOLLOW over symbols: nonterminal a at index a, terminal t at index n + t
    follow = [0] * (n + n_terms)
    inherits = [[] for _ in range(n)]  # inherits[A]: the y with FOLLOW(y) >= FOLLOW(A)
    for r, body in enumerate(g.rhs):
        a, after, rest_nullable = g.lhs[r], 0, True  # FIRST and nullability of body[i + 1:]
        for y in reversed(body):
            if y == g.end:
                after, rest_nullable = 0, True  # nothing is read after the end marker
                continue
            at = y if y >= 0 else n + (-1 - y)
            follow[at] |= after
            if rest_nullable:
                inherits[a].append(at)
            mine = first[y] if y >= 0 else 1 << (-1 - y)
            after = (after | mine) if g.sym_nullable(y) else mine
            rest_nullable = rest_nullable and g.sym_nullable(y)
    _propagate(follow, inherits + [[] for _ in range(n_terms)])
    ignored = sum(1 << t for t in g.ignore)
    every = (1 << n_terms) - 1
    return [every if t in g.ignore else follow[n + t] | ignored for t in range(n_terms)]
