"""The cached masks of ``TokenAutomaton`` (allowed, mask, is_accepting, min_tokens) against the
definition, on random tables and compiled regexes, with the cache carried across calls."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decodekit.constraints import compile_regex
from decodekit.constraints.tokens import masks as automaton_module
from decodekit.constraints.tokens.automaton import TokenAutomaton
from decodekit.constraints.tokens.masks import _Tables
from tests.support.regex_strategies import regexes

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VOCAB = ["a", "b", " ", "ab", "ba", "a ", "bb", None, "<eos>"]


def reference(a: TokenAutomaton, states, remaining) -> torch.Tensor:
    """The definition: t (not EOS) iff next >= 0 and min_tokens_to_accept[next] <= remaining - 1."""
    nxt = a.next_state[states.clamp(min=0)]
    ok = nxt >= 0
    if remaining is not None:
        ok &= a.min_tokens_to_accept[nxt.clamp(min=0)] <= torch.as_tensor(remaining).reshape(-1, 1) - 1
    if a.eos_id is not None:
        ok[:, a.eos_id] = a.accepting[states.clamp(min=0)]
    return ok & (states >= 0)[:, None]


@st.composite
def tables(draw) -> TokenAutomaton:
    """Arbitrary tables (min_tokens_to_accept need not be consistent: the identity is generic)."""
    n, v = draw(st.integers(1, 6)), draw(st.integers(1, 8))
    cells = st.lists(st.integers(-1, n - 1), min_size=n * v, max_size=n * v)
    next_state = torch.tensor(draw(cells)).view(n, v)
    eos = draw(st.one_of(st.none(), st.integers(0, v - 1)))
    if eos is not None:
        next_state[:, eos] = -1
    accepting = torch.tensor(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    need = torch.tensor(draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)))
    return TokenAutomaton(next_state, accepting, need, eos, "<tables>", "")


def queries(n: int):
    """Batches of states (with -1) and a remaining: None, an int or an [N] tensor, near max_need."""
    rem = st.integers(-1, 9)
    return st.integers(1, 5).flatmap(
        lambda rows: st.tuples(
            st.lists(st.integers(-1, n - 1), min_size=rows, max_size=rows).map(torch.tensor),
            st.one_of(
                st.none(),
                rem,
                st.lists(rem, min_size=rows, max_size=rows).map(torch.tensor),
                st.lists(rem, min_size=1, max_size=1).map(torch.tensor),
            ),
        )
    )


def check(a: TokenAutomaton, batches) -> None:
    for states, remaining in batches:
        want = reference(a, states, remaining)
        assert torch.equal(a.allowed(states, remaining), want)
        for dtype in (torch.float32, torch.float64, torch.bfloat16):
            logprobs = torch.randn(states.shape[0], a.vocab_size).to(dtype)
            logprobs[:, 0] = float("-inf")
            masked = a.mask(logprobs, states, remaining)
            assert masked.dtype == dtype
            assert torch.equal(masked, logprobs.masked_fill(~want, float("-inf")))
            into = logprobs.clone()
            assert a.mask(into, states, remaining, inplace=True) is into and torch.equal(into, masked)
        assert torch.equal(a.is_accepting(states), (states >= 0) & a.accepting[states.clamp(min=0)])
        need = a.min_tokens_to_accept[states.clamp(min=0)].masked_fill(states < 0, 0)
        assert torch.equal(a.min_tokens(states), need)


@SETTINGS
@given(st.data())
def test_cached_masks_equal_definition_on_random_tables(data) -> None:
    a = data.draw(tables())
    check(a, data.draw(st.lists(queries(a.num_states), min_size=1, max_size=6)))


@SETTINGS
@given(st.data())
def test_eager_tables_equal_definition(data) -> None:
    """The path other devices take (every state filled at once, the length check on every row
    without a host decision), run on CPU."""
    a = data.draw(tables())
    a._masks._tables = _Tables(a, lazy=False)
    check(a, data.draw(st.lists(queries(a.num_states), min_size=1, max_size=6)))


@SETTINGS
@given(st.data(), st.sampled_from([1, 2, 3]))
def test_sparse_masks_equal_definition(data, sparse) -> None:
    """With V / SPARSE large enough, masks go through the O(allowed) and O(forbidden) paths."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(automaton_module, "SPARSE", sparse)
        a = data.draw(tables())
        check(a, data.draw(st.lists(queries(a.num_states), min_size=1, max_size=6)))


@SETTINGS
@given(st.data(), st.booleans())
def test_cached_masks_equal_definition_on_regexes(data, with_eos) -> None:
    pattern = data.draw(regexes())
    try:
        a = compile_regex(pattern, VOCAB, len(VOCAB) - 1 if with_eos else None)
    except Exception:  # unspellable over this vocabulary: nothing to mask
        return
    check(a, data.draw(st.lists(queries(a.num_states), min_size=1, max_size=6)))


@pytest.mark.parametrize("rows", [0, 3])
def test_over_budget_caches_the_visited_states_then_computes_the_definition(monkeypatch, rows) -> None:
    """Over TABLE_BUDGET, CPU tables hold rows for the states visited first (slot 0: dead);
    once those are taken, the definition is computed for the queries that need more."""
    a = compile_regex("(?:ab| a)+b?", VOCAB, len(VOCAB) - 1)
    monkeypatch.setattr(automaton_module, "TABLE_BUDGET", rows * a.vocab_size)
    a = dataclasses.replace(a)  # a fresh cache under the patched budget
    states = torch.tensor([0, 1, -1, a.num_states - 1])
    check(a, [(states[:1], None), (states[:2], 2), (states, None), (states, torch.tensor([1, 3, 0, 2]))])
    tables = a._masks.tables(a)
    assert tables.slot is not None and len(tables.slot) <= max(rows - 1, 1)


def test_masks_survive_to_and_replace() -> None:
    a = compile_regex("ab*", VOCAB, len(VOCAB) - 1)
    assert a.to("cpu") is a
    a.allowed(torch.tensor([0]))
    assert a._masks.tables(a).built[0]
    b = TokenAutomaton(a.next_state.clone(), a.accepting, a.min_tokens_to_accept, a.eos_id, a.pattern, "")
    assert b._masks is not a._masks
    check(b, [(torch.tensor([1, 0]), 2)])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cached_masks_on_cuda() -> None:
    a = compile_regex("(?:ab| a)+b?", VOCAB, len(VOCAB) - 1)
    g = a.to("cuda")
    assert a.to("cuda") is g
    states = torch.tensor([0, 1, -1, a.num_states - 1])
    for remaining in (None, 1, 2, 100, torch.tensor([1, 3, 0, 2])):
        want = reference(a, states, remaining)
        assert torch.equal(g.allowed(states.cuda(), remaining).cpu(), want)
        logprobs = torch.randn(4, a.vocab_size)
        got = g.mask(logprobs.cuda(), states.cuda(), remaining).cpu()
        assert torch.equal(got, logprobs.masked_fill(~want, float("-inf")))


@pytest.mark.parametrize("lazy", [None, False, True, "masked"])
def test_tables_filled_in_inference_mode_stay_usable_outside_it(lazy):
    """A search fills the mask tables inside ``torch.inference_mode``; the same (cached) automaton
    must then answer for states the search never visited, outside it, and inside it again."""
    vocab = ["a", "b", "c", "ab", "<eos>"]
    a = compile_regex("(a|b)+c?", vocab, 4, lazy=lazy)
    first = torch.tensor([a.initial])
    with torch.inference_mode():
        a.mask(torch.zeros(1, 5), first, 10, inplace=True)
    states = [a.step(first, torch.tensor([t])) for t in range(3)]
    for mode in (torch.inference_mode(False), torch.inference_mode()):
        with mode:
            for s in states:
                for remaining in (None, 10, 1):
                    want = torch.zeros(1, 5).masked_fill(~a.allowed(s, remaining), float("-inf"))
                    assert torch.equal(a.mask(torch.zeros(1, 5), s, remaining), want)
                    assert torch.equal(a.mask(torch.zeros(1, 5), s, remaining, inplace=True), want)
    assert compile_regex("(a|b)+c?", vocab, 4, lazy=lazy).allowed(states[2], 1).shape == (1, 5)
