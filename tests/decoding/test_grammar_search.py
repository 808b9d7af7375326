"""Searches under a context-free grammar against exhaustive enumeration: the banked search's
guarantee (a complete sentence whenever one of non-zero probability fits, for every width), the
true n best when it is as wide as the space, and masked greedy / beam / sampling ending in
sentences of the grammar (lark, which nobody here wrote, is the judge)."""

from __future__ import annotations

import functools
import warnings

import pytest

import decodekit
from decodekit.constraints.grammar.cfg import CFG, Rule, Terminal
from decodekit.decoding.banked import banked_beam_search
from tests.support.exhaustive import ALPHAS, Oracle, SparseLM, assert_n_best, small_vocab

lark = pytest.importorskip("lark", reason="lark is the oracle of the grammar tests")

# balanced brackets around runs of x, "()" and ")(" also single tokens
DYCK = CFG(
    start="s",
    rules=(Rule("s", ("LP", "s", "RP", "s")), Rule("s", ()), Rule("s", ("X", "s"))),
    terminals={"LP": Terminal("LP", r"\("), "RP": Terminal("RP", r"\)"), "X": Terminal("X", "x+")},
)
DYCK_LARK = 'start: "(" start ")" start | X start |\nX: /x+/\n'
TOKENS = ["(", ")", "x", "()", ")("]


@functools.cache
def _parser():
    return lark.Lark(DYCK_LARK, parser="earley", lexer="dynamic_complete")


@functools.cache
def member(text: str) -> bool:
    try:
        _parser().parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


class GrammarOracle(Oracle):
    """:class:`Oracle` whose matches are the grammar's sentences."""

    def __init__(self, model, prompt, max_length):
        super().__init__(model, prompt, max_length, pattern="")

    def matches(self, seq) -> bool:
        if any(self.surfaces[x] is None for x in seq):
            return False
        return member(self.model.vocab.decode(seq))


def _model(seed, zeros, eos=True):
    vocab = small_vocab(TOKENS)
    return SparseLM(len(vocab), seed, zeros, bos_id=1, eos_id=1 if eos else None, vocab=vocab)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("width", [1, 2, 3])
def test_banked_search_returns_a_sentence_whenever_one_fits(seed, width):
    """K = 1..3 over random tiny models with zero-probability tokens: the best hypothesis is a
    complete sentence exactly when the exhaustive search finds one of non-zero probability."""
    model, max_length = _model(seed, zeros=0.4), 4
    oracle = GrammarOracle(model, [2], max_length)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hyps = banked_beam_search(model, [2], DYCK, width, max_length, 0.0, 1)
    if not oracle.outputs:
        assert hyps == [] or all(not member(h.text) for h in hyps if h.finished) and not hyps
        return
    assert hyps, "a sentence of non-zero probability fits but the search found none"
    assert member(model.vocab.decode(hyps[0].tokens)), hyps[0]


@pytest.mark.parametrize("alpha", ALPHAS[::2])
@pytest.mark.parametrize("eos", [True, False])
def test_wide_banked_search_is_the_exhaustive_n_best(alpha, eos):
    model, max_length = _model(3, zeros=0.3, eos=eos), 3
    width = len(model.vocab) ** max_length
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hyps = banked_beam_search(model, [2], DYCK, width, max_length, alpha, 4)
    assert_n_best(hyps, GrammarOracle(model, [2], max_length), alpha, 4)


@pytest.mark.parametrize("strategy", ["greedy", "sample", "masked-beam", "banked-beam"])
def test_every_masked_strategy_ends_in_a_sentence(strategy):
    """Through the public generate(): a Grammar-like constraint (the CFG itself), every output a
    complete sentence within max_length, the default strategy choosing the banked search."""
    model = _model(1, zeros=0.0)
    for seed in range(5):
        hyps = decodekit.generate(
            model, [2], constraint=DYCK, strategy=strategy, max_length=7, seed=seed, beam_size=3
        )
        assert hyps
        for h in hyps:
            assert member(h.text), (strategy, h)


def test_the_default_strategy_is_the_banked_search():
    model = _model(2, zeros=0.0)
    hyps = decodekit.generate(model, [2], constraint=DYCK, max_length=6)
    assert hyps and all(member(h.text) for h in hyps)


def test_one_beam_per_state_is_refused_naming_the_banked_search():
    model = _model(2, zeros=0.0)
    with pytest.raises(decodekit.errors.ConstraintError, match="banked") as e:
        decodekit.generate(model, [2], constraint=DYCK, strategy="beam", max_length=6)
    assert "\n" not in str(e.value)
