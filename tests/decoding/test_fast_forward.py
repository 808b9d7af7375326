"""Fast-forward (``fast_forward=True``): under a constraint, the tokens every live row is forced to
take are fed to the model in one ``step_many`` call with the chosen ones. Every strategy gives the
same hypotheses (tokens, finished, log-probabilities) as without it, on every conformance model,
with fewer model calls where the constraint forces tokens."""

from __future__ import annotations

import math

import pytest
import regex
import torch

from decodekit import STRATEGIES, GenerationConfig, compile_regex, generate
from decodekit.models import base
from tests.models.test_conformance import NAMES, VOCAB, model_of

FORCED = r"a b(?: [cd])? c d(?: e)? b"  # over VOCAB's words: stretches with one way on
PROMPTS = [[2, 3], [4]]


class Counted:
    """A model whose ``step`` and ``step_many`` calls are counted (everything else delegated)."""

    def __init__(self, model):
        self.inner, self.calls = model, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def step(self, state, tokens):
        self.calls += 1
        return self.inner.step(state, tokens)

    def step_many(self, state, tokens):
        self.calls += 1
        return base.step_many(self.inner, state, tokens)


def configs(eos: int | None):
    automaton = compile_regex(FORCED, VOCAB.surfaces(), eos, VOCAB.separator)
    for name in STRATEGIES:
        yield name, dict(
            strategy=name, max_length=9, beam_size=3, n_best=2, num_samples=2, seed=3,
            num_beam_groups=3, diversity_penalty=0.5, constraint=automaton,
        )  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_fast_forward_changes_no_hypothesis_and_saves_calls(name):
    saved, matched = 0, 0
    for label, options in configs(model_of(name).eos_id):
        plain, fast = Counted(model_of(name)), Counted(model_of(name))
        want = generate(plain, PROMPTS, GenerationConfig(**options))
        got = generate(fast, PROMPTS, GenerationConfig(**options, fast_forward=True))
        for a_hyps, b_hyps in zip(want, got):
            assert [(h.tokens, h.finished) for h in a_hyps] == [(h.tokens, h.finished) for h in b_hyps], label
            for a, b in zip(a_hyps, b_hyps):
                assert math.isclose(a.logprob, b.logprob, rel_tol=1e-5, abs_tol=1e-5), (label, a, b)
                assert regex.fullmatch(FORCED, VOCAB.decode(b.tokens)), (label, b.tokens)
                matched += 1
        assert fast.calls <= plain.calls, label
        saved += plain.calls - fast.calls
    assert saved > 0 or not matched  # forced stretches read in fewer calls (none: "a" suppressed)


def test_forced_chain_stops_where_a_row_has_a_choice():
    from decodekit.decoding.ahead import forced_chain
    from decodekit.decoding.search import Selection

    automaton = compile_regex(FORCED, VOCAB.surfaces(), 1, VOCAB.separator)
    start = torch.tensor([automaton.initial])
    after_a = automaton.step(start, torch.tensor([2]))  # "a": then "b" is forced, then a choice
    sel = Selection(logprob=torch.zeros(1), states=after_a, tokens=torch.tensor([2]))
    chain = forced_chain(automaton, sel, remaining=8, eos=1)
    assert [int(t) for t in chain] == [3]  # "b", then "c" or "c d": two ways on
    dead = Selection(logprob=torch.tensor([0.0, float("-inf")]), states=torch.cat([after_a, after_a]))
    assert [int(t[0]) for t in forced_chain(automaton, dead, remaining=8, eos=1)] == [3]
    assert forced_chain(automaton, sel, remaining=1, eos=1) == []  # nothing left to feed
