"""The plan: every search compiles its constraint once, in the plan, and the loop compiles nothing."""

from __future__ import annotations

import pytest
import regex

import decodekit
import decodekit.constraints.build as builder
import decodekit.constraints.compiler as face
from decodekit.constraints import StateTables, clear_cache
from decodekit.constraints.tokens.interface import provides
from decodekit.decoding import plan
from decodekit.decoding.search import run
from tests.support.fakes import HistoryLM, char_vocab

PATTERN = "(a|b)*ab(a|b)*"


@pytest.fixture
def builds(monkeypatch):
    """The token automata built (each a call of the compiler's one ``build``), counted from a
    cold compile cache."""
    made = []
    real = face.build

    def counting(*args, **kwargs):
        made.append(args[0])
        return real(*args, **kwargs)

    clear_cache(vocabularies=False)
    monkeypatch.setattr(face, "build", counting)
    yield made
    clear_cache(vocabularies=False)


def model_of(letters: str = "ab"):
    vocab = char_vocab(letters)
    return HistoryLM(len(vocab), seed=3, vocab=vocab, bos_id=1, eos_id=1)


@pytest.mark.parametrize("grid", [True, False])
def test_the_default_constrained_generate_compiles_one_automaton(builds, monkeypatch, grid):
    model = model_of()
    if not grid:
        monkeypatch.setattr(plan, "GRID_ENTRIES", 1)
    hyps = decodekit.generate(model, "", constraint=PATTERN, max_length=6, beam_size=2)
    assert len(builds) == 1
    assert hyps and all(regex.fullmatch(PATTERN, h.text) for h in hyps)
    chosen, automaton = plan.choose(model, decodekit.GenerationConfig(constraint=PATTERN, max_length=6))
    assert chosen.resolved_strategy == ("beam" if grid else "banked-beam")
    assert provides(automaton, StateTables)  # small: whole, so the banks are one table
    assert len(builds) == 1  # the compiler's cache answered the second plan


@pytest.mark.parametrize(
    "strategy", ["greedy", "sample", "beam", "masked-beam", "banked-beam", "diverse-beam"]
)
def test_every_named_strategy_compiles_once(builds, strategy):
    model = model_of()
    options = (
        {"num_beam_groups": 2, "diversity_penalty": 0.5, "beam_size": 4} if strategy == "diverse-beam" else {}
    )
    decodekit.generate(model, "", strategy=strategy, constraint=PATTERN, max_length=6, seed=0, **options)
    assert len(builds) == 1


def test_the_loop_compiles_nothing(builds, monkeypatch):
    model = model_of()
    config = decodekit.GenerationConfig(constraint=PATTERN, max_length=6, beam_size=2)
    want = decodekit.generate(model, [[]], config)
    search = plan.plan(model, [[]], config)
    monkeypatch.setattr(builder, "build", None)  # any compile from here on would fail
    monkeypatch.setattr(face, "build", None)
    clear_cache(vocabularies=False)
    out = run(search)
    assert out == want and out[0] and all(regex.fullmatch(PATTERN, h.text) for h in out[0])


def test_a_large_constraint_goes_to_the_banked_search_built_on_first_visit(builds):
    """Past the grid (a character DFA over 256 states: built from its derivatives on first visit),
    the default is the banked search over that one automaton."""
    model = model_of()
    pattern = "(a|b)*a(a|b){9}"  # 2^10 DFA states
    hyps = decodekit.generate(model, "", constraint=pattern, max_length=12, beam_size=2)
    assert len(builds) == 1 and hyps and all(regex.fullmatch(pattern, h.text) for h in hyps)
    chosen, automaton = plan.choose(model, decodekit.GenerationConfig(constraint=pattern, max_length=12))
    assert chosen.resolved_strategy == "banked-beam" and not provides(automaton, StateTables)
