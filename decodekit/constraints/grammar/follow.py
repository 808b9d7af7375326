"""FOLLOW sets of a grammar's terminals: which terminals may begin right after a lexeme of each
(the followers whose bytes bound how far into a token a completed lexeme's origin is read,
:class:`~decodekit.constraints.tokens.horizons.LexemeHorizons`)."""

from __future__ import annotations


def follow_sets(g) -> list[frozenset[int]]:
    """Per terminal t of the grammar tables ``g`` (:class:`~.earley._Tables`): the terminals
    that may begin right after a lexeme of t (FOLLOW over terminals, nullable terminals and
    nonterminals passed over), the ignored ones added; an ignored terminal is followed by any."""
    n_terms = len(g.term_names)
    first: list[set[int]] = [set() for _ in g.names]

    def first_of(body) -> tuple[set[int], bool]:
        out: set[int] = set()
        for y in body:
            if y >= 0:
                out |= first[y]
            elif y != g.end:
                out.add(-1 - y)
            if not g.sym_nullable(y):
                return out, False
        return out, True

    changed = True
    while changed:  # FIRST of each nonterminal, to a fixpoint
        changed = False
        for r, body in enumerate(g.rhs):
            got, _ = first_of(body)
            if not got <= first[g.lhs[r]]:
                first[g.lhs[r]] |= got
                changed = True
    after_nt: list[set[int]] = [set() for _ in g.names]
    after_t: list[set[int]] = [set() for _ in range(n_terms)]
    changed = True
    while changed:  # FOLLOW of each symbol, to a fixpoint
        changed = False
        for r, body in enumerate(g.rhs):
            for i, y in enumerate(body):
                if y == g.end:
                    continue
                got, nullable = first_of(body[i + 1 :])
                if nullable:
                    got = got | after_nt[g.lhs[r]]
                into = after_nt[y] if y >= 0 else after_t[-1 - y]
                if not got <= into:
                    into |= got
                    changed = True
    every = frozenset(range(n_terms))
    return [every if t in g.ignore else frozenset(after_t[t] | g.ignore) for t in range(n_terms)]
