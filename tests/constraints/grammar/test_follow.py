"""FOLLOW sets (decodekit.constraints.grammar.follow): every pair of adjacent terminals in a
sentence of random small grammars (found by expanding sentential forms) is in them, ignored
terminals follow and are followed by every terminal, and deep or long grammars cost one
worklist pass (CPU time, with a wide margin)."""

from __future__ import annotations

import time

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from decodekit.constraints.grammar.cfg import CFG, Rule, Terminal
from decodekit.constraints.grammar.earley import GrammarBytes
from decodekit.constraints.grammar.follow import follow_sets
from decodekit.errors import ConstraintError

TERMINALS = {"A": "a", "B": "b+", "C": "c?", "D": "d"}  # C is nullable


def _cfg(rules, ignore=()):
    return CFG(
        start="s",
        rules=tuple(Rule(a, tuple(b)) for a, b in rules),
        terminals={n: Terminal(n, p) for n, p in TERMINALS.items()},
        ignore=tuple(ignore),
    )


def _adjacent_pairs(cfg: CFG, rounds: int = 6, width: int = 400) -> set[tuple[str, str]]:
    """Adjacent terminals in the sentential forms reached by expanding every nonterminal, up to
    ``rounds`` expansions and ``width`` forms per round, keeping forms whose nonterminals can all
    vanish or be expanded later (pairs across a nonterminal are found once it is expanded)."""
    by_lhs: dict[str, list[tuple[str, ...]]] = {}
    for r in cfg.rules:
        by_lhs.setdefault(r.lhs, []).append(r.rhs)
    forms, pairs = {("s",)}, set()
    for _ in range(rounds):
        nxt = set()
        for form in forms:
            i = next((k for k, x in enumerate(form) if x in by_lhs), None)
            if i is None:
                continue
            for body in by_lhs[form[i]]:
                nxt.add(form[:i] + body + form[i + 1 :])
        forms = set(sorted(nxt, key=len)[:width])
        for form in forms:
            terms = [x for x in form if x in cfg.terminals]
            if len(terms) == len(form):
                pairs.update(zip(terms, terms[1:]))
    return pairs


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from("stu"),
            st.lists(st.sampled_from(["s", "t", "u", "A", "B", "C", "D"]), max_size=3),
        ),
        min_size=2,
        max_size=8,
    )
)
def test_follow_sets_hold_every_adjacent_pair(rules):
    cfg = _cfg(rules)
    try:
        states = GrammarBytes(cfg)
    except (ConstraintError, KeyError):
        assume(False)
    g = states.g
    follows = follow_sets(g)
    for t, u in _adjacent_pairs(cfg):
        assert follows[g.t_index[t]] >> g.t_index[u] & 1, (t, u, rules)


def test_ignored_terminals_follow_and_are_followed_by_every_terminal():
    cfg = _cfg([("s", ["A", "s"]), ("s", ["D"])], ignore=["B"])
    g = GrammarBytes(cfg).g
    follows, b = follow_sets(g), g.t_index["B"]
    assert follows[b] == (1 << len(g.term_names)) - 1
    assert all(f >> b & 1 for f in follows)


def test_deep_and_long_grammars_cost_one_pass():
    deep = [("s", ["s", "A"]), ("s", ["r0"])] + [(f"r{i}", [f"r{i + 1}", "B"]) for i in range(5000)]
    deep += [("r5000", ["D"])]
    cfg = CFG(
        start="s",
        rules=tuple(Rule(a, tuple(b)) for a, b in deep),
        terminals={n: Terminal(n, p) for n, p in TERMINALS.items()},
    )
    g = GrammarBytes(cfg).g
    start = time.process_time()
    follows = follow_sets(g)
    assert time.process_time() - start < 5.0  # a pass over each rule: some 10 ms here
    d, b, a = g.t_index["D"], g.t_index["B"], g.t_index["A"]
    assert follows[d] >> b & 1 and follows[b] >> a & 1 and follows[b] >> b & 1
