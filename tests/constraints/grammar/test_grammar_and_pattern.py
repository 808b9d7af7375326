"""``Grammar & Pattern`` (decodekit.constraints.grammar.intersect) against brute force with two
judges nobody here wrote: lark's Earley parser (``dynamic_complete``) for the grammar and
``regex.fullmatch`` for the pattern. Acceptance, liveness, the exact fewest bytes and a witness
of every short text; the token masks at every remaining-length budget; the searches' outputs and
the banked search's guarantee; the refusals."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
import regex
import torch

import decodekit
from decodekit.constraints import Grammar, Pattern, compile_regex
from decodekit.constraints.automata.protocol import ByteAutomaton
from decodekit.constraints.grammar.earley import GrammarBytes
from decodekit.constraints.grammar.intersect import MAX_PATTERN_STATES, GrammarPatternBytes
from decodekit.decoding.banked import banked_beam_search
from decodekit.errors import ConstraintError
from tests.support.exhaustive import ALPHAS, Oracle, SparseLM, assert_n_best, small_vocab
from tests.support.grammars import check_byte_states, check_masks_at_budgets, lark_oracle

lark = pytest.importorskip("lark", reason="lark is the oracle of the grammar tests")

DYCK = 'start: "(" start ")" start | X start |\nX: /x+/\n'
SUMS = 'start: e\ne: e "+" t | t\nt: NUM | "(" e ")"\nNUM: /[0-9]+/\n%ignore / +/\n'
AMBIGUOUS = "start: A B\nA: /a+/\nB: /a*bx/\n"
LIST = "start: l\nl: item l |\nitem: opt W\nopt: | D\nW: /[ab]/\nD: /-/\n"

# (grammar, pattern, alphabet of the brute force): patterns the grammar's shortest sentences miss,
# so that the fewest bytes are neither side's alone
CASES = {
    "dyck, two x in a row": (DYCK, ".*xx.*", "()x"),
    "dyck, no x, ends in )": (DYCK, r"[^x]*\)", "()x"),
    "sums, a space somewhere (ignored text needed)": (SUMS, ".* .*", "1+ ("),
    "sums, exactly two plus signs": (SUMS, r"(?:[^+]*\+){2}[^+]*", "1+ "),
    "ambiguous lexemes, three a first": (AMBIGUOUS, "aaa.*", "abx"),
    "nullable list with a dash": (LIST, ".*-.*", "ab-"),
}


@functools.cache
def _judge(name):
    text, pattern, _ = CASES[name]
    parses = lark_oracle(text, posix=False)
    return functools.cache(lambda s: regex.fullmatch(pattern, s) is not None and parses(s))


@functools.cache
def _product(name):
    """Over the alphabet's bytes only (the brute force's: a terminal they cannot spell never begins)."""
    text, pattern, alphabet = CASES[name]
    available = np.zeros(256, dtype=bool)
    available[list(alphabet.encode())] = True
    grammar = Grammar(text, syntax="lark").regular
    return GrammarPatternBytes(GrammarBytes(grammar, available), Pattern(pattern), available, name)


@pytest.mark.parametrize("name", list(CASES))
def test_acceptance_liveness_and_distance_equal_brute_force(name):
    """Every text up to 5 characters: accepted iff both judges accept it; dead iff no completion
    of at most 3 more characters is accepted, or its fewest bytes exceed 3; else its distance is
    the brute-force fewest, and its witness (that many bytes) is accepted."""
    member, a = _judge(name), _product(name)
    alphabet = CASES[name][2]
    assert isinstance(a, ByteAutomaton) and not a.finite

    check_byte_states(a, member, alphabet, lookahead=3)


@pytest.mark.parametrize(
    "name,pieces",
    [
        ("dyck, two x in a row", ["(", ")", "x", ")(", "xx"]),
        ("sums, a space somewhere (ignored text needed)", ["1", "+", " ", "+ ", "1 "]),
    ],
)
def test_masks_equal_brute_force_at_every_budget(name, pieces):
    """allowed(state, remaining) for every token sequence of up to 3 tokens and every budget
    1..3: a token is allowed iff some continuation within ``remaining - 1`` more tokens is
    accepted by both judges; EOS iff the text is."""
    text, pattern, _ = CASES[name]
    member = _judge(name)
    vocab = small_vocab(pieces)
    tokens, eos = vocab.surface_bytes(), vocab.eos_id
    auto = compile_regex(Grammar(text, syntax="lark") & pattern, tokens, eos)
    check_masks_at_budgets(auto, tokens, eos, member, range(4))


TOKENS = ["(", ")", "x", "()", ")("]
NAME = "dyck, two x in a row"


class _BothOracle(Oracle):
    def __init__(self, model, prompt, max_length):
        super().__init__(model, prompt, max_length, pattern="")

    def matches(self, seq) -> bool:
        if any(self.surfaces[x] is None for x in seq):
            return False
        return _judge(NAME)(self.model.vocab.decode(seq))


def _model(seed, zeros):
    vocab = small_vocab(TOKENS)
    return SparseLM(len(vocab), seed, zeros, bos_id=1, eos_id=1, vocab=vocab)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("width", [1, 2, 3])
def test_banked_search_returns_a_match_whenever_one_fits(seed, width):
    """K = 1..3 over random tiny models (every token of non-zero probability, the guarantee's
    premise): the best hypothesis is in both languages exactly when a match fits in max_length."""
    model, max_length = _model(seed, zeros=0.0), 5
    oracle = _BothOracle(model, [2], max_length)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hyps = banked_beam_search(
            model, [2], Grammar(DYCK, syntax="lark") & ".*xx.*", width, max_length, 0.0, 1
        )
    assert bool(hyps) == bool(oracle.outputs)
    assert not hyps or _judge(NAME)(model.vocab.decode(hyps[0].tokens)), hyps[0]


@pytest.mark.parametrize("alpha", ALPHAS[::2])
def test_wide_banked_search_is_the_exhaustive_n_best(alpha):
    """As wide as the space, with zero-probability tokens: the exhaustive n best matches."""
    model, max_length = _model(3, zeros=0.3), 4
    width = len(model.vocab) ** max_length
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hyps = banked_beam_search(
            model, [2], Grammar(DYCK, syntax="lark") & ".*xx.*", width, max_length, alpha, 4
        )
    assert_n_best(hyps, _BothOracle(model, [2], max_length), alpha, 4)


@pytest.mark.parametrize("strategy", ["greedy", "sample", "masked-beam", "banked-beam"])
def test_every_masked_strategy_ends_in_both_languages(strategy):
    model = _model(1, zeros=0.0)
    both = Grammar(DYCK, syntax="lark") & ".*xx.*"
    for seed in range(4):
        hyps = decodekit.generate(
            model, [2], constraint=both, strategy=strategy, max_length=6, seed=seed, beam_size=3
        )
        assert hyps
        for h in hyps:
            assert _judge(NAME)(h.text), (strategy, h)


def test_refusals_are_one_line():
    dyck = Grammar(DYCK, syntax="lark")
    chain = "".join(f'r{i} ::= "a" r{i + 1} | "b"\n' for i in range(599)) + 'r599 ::= "c"\n'
    many = Grammar("root ::= r0\n" + chain, syntax="gbnf")
    tokens = [None, *(bytes([b]) for b in range(256))]
    cases = [
        (dyck & "y+", "matches no text|no text of this vocabulary"),
        (dyck & r"\(+", "no text of this vocabulary is in both"),
        (dyck & ".{0,60}", f"the pattern has more than {MAX_PATTERN_STATES} reachable byte-level states"),
        # some 600 nonterminals times 121 DFA states squared: refused before their matrices are made
        (many & "[ -~]{0,120}", r"\d{3} nonterminals times 121 pattern states squared exceeds 8,000,000"),
    ]
    for constraint, message in cases:
        with pytest.raises(ConstraintError, match=message) as e:
            compile_regex(constraint, tokens, 0)
        assert "\n" not in str(e.value)


def test_a_pattern_of_a_few_hundred_states_compiles():
    """The fewest bytes of each lexeme over the DFA come from one breadth-first search backwards
    (each entry settled once): a 251-state pattern beside a small grammar compiles in well under
    its old minutes, and its masks keep every sentence within the pattern."""
    import time

    tokens = [None, *(bytes([b]) for b in range(32, 127))]
    start = time.process_time()
    auto = compile_regex(Grammar(SUMS, syntax="lark") & "[ -~]{0,250}", tokens, 0)
    assert time.process_time() - start < 60  # some 0.3 s here; 6 s per 100 states before
    assert auto.bytes.sizes()["pattern_states"] == 251
    state = auto.walk([1 + ord(c) - 32 for c in "1 + (2+3)"])
    assert state >= 0 and auto.is_accepting(torch.tensor([state]))[0]
