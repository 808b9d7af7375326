"""compile_regex's default builds what the searches would (issue 37 item 2): a pattern whose
character DFA is large is built on first visit from its derivatives, never whole, where the
vocabulary spells every text one byte per token; a small one stays whole."""

import pytest
import regex
import torch

import decodekit
from decodekit.constraints import (
    DerivedTokenAutomaton,
    StateTables,
    TokenAutomaton,
    clear_cache,
    compile_regex,
)
from decodekit.constraints import build as build_module
from decodekit.constraints.tokens import fewest
from decodekit.constraints.tokens.interface import provides
from tests.support.fakes import TableLM

TOKENS = ["a", "b", "ab", "ba", "<eos>"]  # every byte a token by itself: the derivatives' masks are exact
EOS = 4
PATTERN = r"(a|b)*a(a|b){15}"  # 2^16 character states whole: tens of CPU seconds


class _Vocab:
    """What the decoders need of a vocabulary to decode text (the surfaces, no separator)."""

    separator = ""
    eos_id = EOS

    def __len__(self):
        return len(TOKENS)

    def surfaces(self):
        return list(TOKENS)

    def decode(self, ids):
        return "".join(TOKENS[i] for i in ids if i != EOS)


def _refuse_whole(*args, **kwargs):
    raise AssertionError("the whole automaton was built")


def test_the_default_builds_no_whole_automaton_for_a_large_pattern(monkeypatch):
    clear_cache()
    monkeypatch.setattr(build_module, "lift", _refuse_whole)  # the whole token automaton
    monkeypatch.setattr(fewest, "lift", _refuse_whole)  # the fewest-tokens fallback's
    automaton = compile_regex(PATTERN, TOKENS, EOS)
    assert isinstance(automaton, DerivedTokenAutomaton) and not provides(automaton, StateTables)
    g = torch.Generator().manual_seed(0)
    model = TableLM(
        torch.randn(len(TOKENS), len(TOKENS), generator=g), bos_id=None, eos_id=EOS, vocab=_Vocab()
    )
    out = decodekit.greedy(model, [0], 40, constraint=automaton)
    text = "".join(TOKENS[t] for t in out[0].tokens if t != EOS)
    assert out[0].finished and regex.fullmatch(PATTERN, text), text
    # the masked searches' own compile gives the same search
    masked = compile_regex(PATTERN, TOKENS, EOS, lazy="masked")
    assert decodekit.greedy(model, [0], 40, constraint=masked)[0].tokens == out[0].tokens


@pytest.mark.parametrize("pattern", ["(a|b)*a(a|b){3}", "a{2,5}b?"])
def test_a_small_pattern_is_still_built_whole(pattern):
    made = compile_regex(pattern, TOKENS, EOS)
    assert isinstance(made, TokenAutomaton)
    assert made is compile_regex(pattern, TOKENS, EOS, lazy="default")


def test_a_vocabulary_that_cannot_spell_bytewise_keeps_the_eager_ladder():
    tokens = ["ab", "ba", "<eos>"]  # "a" alone is no token: the derivatives' masks would not be exact
    made = compile_regex("(ab|ba)*ab(ab|ba){3}", tokens, 2)
    assert isinstance(made, TokenAutomaton)
