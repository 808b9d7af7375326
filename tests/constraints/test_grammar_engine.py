"""The grammar engine (decodekit.constraints.grammar.earley) against lark's Earley parser with the
dynamic_complete lexer (the semantics docs/constraints.md states), which nobody here wrote:
acceptance of every short text, liveness of every prefix, fewest bytes and their witness, and
the token masks at every remaining-length budget against brute force over token sequences."""

from __future__ import annotations

import functools

import pytest

from decodekit.constraints.grammar.cfg import CFG, Rule, Terminal
from decodekit.constraints.grammar.earley import GrammarBytes
from tests.support.grammars import check_byte_states, check_masks_at_budgets, lark_oracle, run_text

lark = pytest.importorskip("lark", reason="lark is the oracle of the grammar tests")


def _cfg(start, rules, terminals, ignore=()):
    return CFG(
        start=start,
        rules=tuple(Rule(a, tuple(b)) for a, b in rules),
        terminals={n: Terminal(n, p) for n, p in terminals.items()},
        ignore=tuple(ignore),
    )


# (CFG, the same grammar in Lark syntax, alphabet of the brute force)
GRAMMARS = {
    "dyck": (
        _cfg(
            "s",
            [("s", ["LP", "s", "RP", "s"]), ("s", []), ("s", ["X", "s"])],
            {"LP": r"\(", "RP": r"\)", "X": "x+"},
        ),
        'start: "(" start ")" start | X start |\nX: /x+/\n',
        "()x",
    ),
    "sums with spaces ignored": (
        _cfg(
            "e",
            [("e", ["e", "PLUS", "t"]), ("e", ["t"]), ("t", ["NUM"]), ("t", ["LP", "e", "RP"])],
            {"PLUS": r"\+", "NUM": "[0-9]+", "LP": r"\(", "RP": r"\)", "WS": " +"},
            ignore=["WS"],
        ),
        'start: e\ne: e "+" t | t\nt: NUM | "(" e ")"\nNUM: /[0-9]+/\n%ignore / +/\n',
        "1+() ",
    ),
    "ambiguous lexemes (llguidance#57)": (
        _cfg("s", [("s", ["A", "B"])], {"A": "a+", "B": "a*bx"}),
        "start: A B\nA: /a+/\nB: /a*bx/\n",
        "abx",
    ),
    "nullable and right recursion": (
        _cfg(
            "l",
            [("l", ["item", "l"]), ("l", []), ("item", ["opt", "W"]), ("opt", []), ("opt", ["D"])],
            {"W": "[ab]", "D": "-"},
        ),
        "start: l\nl: item l |\nitem: opt W\nopt: | D\nW: /[ab]/\nD: /-/\n",
        "ab-",
    ),
}


def _oracle(lark_text):
    return functools.lru_cache(maxsize=None)(lark_oracle(lark_text, posix=False))


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_acceptance_liveness_and_distance_equal_brute_force(name):
    """Every text up to 5 characters: accepted iff lark parses it; dead only if no completion of
    at most 2 more characters parses; alive with a witness of the state's fewest bytes that
    parses, and no completion shorter than that (searched up to 2 characters)."""
    cfg, text, alphabet = GRAMMARS[name]
    member, gb = _oracle(text), GrammarBytes(cfg)

    check_byte_states(gb, member, alphabet, lookahead=2)


def _vocab_model(tokens):
    from tests.support.exhaustive import small_vocab

    return small_vocab(tokens)


@pytest.mark.parametrize("name", ["dyck", "sums with spaces ignored"])
def test_masks_equal_brute_force_at_every_budget(name):
    """allowed(state, remaining) of the token automaton, for every token sequence of up to 3
    tokens and every budget 1..3: a token is allowed iff some continuation of at most
    ``remaining - 1`` more tokens makes the text a sentence (lark); EOS iff the text is one."""
    from decodekit.constraints import compile_regex

    cfg, text, _ = GRAMMARS[name]
    member = _oracle(text)
    pieces = {"dyck": ["(", ")", "x", ")("], "sums with spaces ignored": ["1", "+", "(", ")", " ", "+ "]}
    vocab = _vocab_model(pieces[name])
    tokens = vocab.surface_bytes()
    eos = vocab.eos_id
    auto = compile_regex(cfg, tokens, eos)
    content = [v for v in range(len(tokens)) if v != eos and tokens[v] is not None]
    lengths = range(3 if len(content) < 6 else 2 + (name == "dyck"))
    check_masks_at_budgets(auto, tokens, eos, member, lengths, min_tokens=True)


def test_deep_nesting_costs_no_recursion():
    """10,000 nested brackets: stepped, measured and witnessed without Python recursion."""
    cfg, _, _ = GRAMMARS["dyck"]
    gb = GrammarBytes(cfg)
    s = run_text(gb, "(" * 10_000 + "x")
    assert gb.distance(s) == 10_000
    assert gb.witness(s) == b")" * 10_000
    s = run_text(gb, "(" * 10_000 + ")" * 10_000)
    assert gb.accepting(s)


def test_a_terminal_no_token_can_begin_never_begins():
    """A vocabulary without "(" or ")": their terminals never begin. (Their start state was -1,
    read as the lexer's last state, so "1 1" was a live prefix of the sums grammar.)"""
    import numpy as np

    cfg, _, _ = GRAMMARS["sums with spaces ignored"]
    available = np.zeros(256, dtype=bool)
    available[[ord(c) for c in "1+ "]] = True
    gb = GrammarBytes(cfg, available)
    assert run_text(gb, "1 1") == -1 and run_text(gb, "1 +1") >= 0
    assert gb.accepting(run_text(gb, "1 + 1 "))
