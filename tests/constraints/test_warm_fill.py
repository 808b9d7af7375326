"""The warm ``fill_bitmask`` shortcuts against the definition, ``pack_bits(allowed(...))``:

- a walk alternating dense and one-token rows in one buffer, cold and warm, at several budgets;
- the states ``step`` returned are read off the array it made them from, so a change of that
  tensor in place (through torch or through numpy), a swap of its memory, or another tensor of
  the same value must each give the mask of the states the tensor holds at the call.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import regex
import torch

from decodekit.constraints import DerivedTokenAutomaton, LazyTokenAutomaton, compile_regex, intersect
from decodekit.constraints.tokens.masks import bitmask_words, pack_bits
from tests.support.engines import masked_by_lazy_token_automaton


@pytest.fixture(autouse=True, scope="module")
def _lazy_token_automaton():
    """The masked compiles here build LazyTokenAutomaton, whose own paths these tests exercise
    (the default, the first-visit class over EagerBytes: test_eager_bytes.py, the engine axis)."""
    yield from masked_by_lazy_token_automaton()


LETTERS = "abcdefghijklm"
# 13 letters, every two- and three-letter word of them (2,366 tokens: 74 words a row), "." and
# EOS: a row of a letter class is dense, a row after "x" allows one token
TOKENS = (
    list(LETTERS)
    + ["".join(p) for n in (2, 3) for p in itertools.product(LETTERS, repeat=n)]
    + [".", "x", None]
)


EOS = len(TOKENS) - 1
PATTERN = r"(?:[a-m]+x\.)+"  # dense rows in the letters, one-token rows after "x"


def _automata():
    yield compile_regex(PATTERN, TOKENS, EOS, lazy="masked")
    yield compile_regex(intersect(PATTERN, ".{0,40}"), TOKENS, EOS, lazy="masked")


def _expected(a, states: torch.Tensor, remaining) -> np.ndarray:
    return pack_bits(a.allowed(states, remaining).numpy())


def test_both_engines_and_dense_and_sparse_rows_are_exercised():
    kinds = [type(a) for a in _automata()]
    assert kinds == [LazyTokenAutomaton, DerivedTokenAutomaton]
    a = next(_automata())
    bitmask = torch.zeros(1, bitmask_words(len(TOKENS)), dtype=torch.int32)
    dense = a.fill_bitmask(bitmask, torch.tensor([a.initial])).clone()
    sparse = a.fill_bitmask(bitmask, a.step(torch.tensor([a.walk([0])]), torch.tensor([TOKENS.index("x")])))
    assert np.count_nonzero(dense.numpy()) > 16 and np.count_nonzero(sparse.numpy()) == 1


@pytest.mark.parametrize("which", [0, 1])
def test_a_walk_alternating_dense_and_sparse_rows_fills_what_allowed_says(which):
    a = list(_automata())[which]
    text_tokens = [TOKENS.index(t) for t in ["abc", "x", ".", "m", "x", ".", "dd", "ee", "x", "."]]
    bitmask = torch.full((1, bitmask_words(len(TOKENS))), -1, dtype=torch.int32)  # every bit set
    for budget in [None, 12, 4, None]:
        states = torch.tensor([a.initial])
        for k, t in enumerate(text_tokens):
            remaining = None if budget is None else budget - k
            for _ in range(2):  # cold, then warm
                got = a.fill_bitmask(bitmask, states, remaining)
                assert np.array_equal(got.numpy(), _expected(a, states, remaining))
            states = a.step(states, torch.tensor([t]))
        decoded = "".join(TOKENS[t] for t in text_tokens)
        assert regex.fullmatch(PATTERN, decoded)
        assert bool(a.is_accepting(states)[0])


@pytest.mark.parametrize("which", [0, 1])
def test_stepped_states_changed_after_step_give_the_mask_of_what_they_hold(which):
    a = list(_automata())[which]
    bitmask = torch.zeros(1, bitmask_words(len(TOKENS)), dtype=torch.int32)
    start = torch.tensor([a.initial])
    after_x = a.step(torch.tensor([a.walk([0])]), torch.tensor([TOKENS.index("x")]))
    x_state = int(after_x[0])
    for change in ["torch", "numpy", "set_", "none"]:
        states = a.step(start, torch.tensor([0]))  # in the letters: a dense row
        letters_state = int(states[0])
        a.fill_bitmask(bitmask, states)  # warm it
        if change == "torch":
            states.fill_(x_state)
        elif change == "numpy":
            states.numpy()[0] = x_state
        elif change == "set_":
            states.set_(torch.tensor([x_state]))
        held = int(states[0])
        assert held == (letters_state if change == "none" else x_state)
        got = a.fill_bitmask(bitmask, states)
        assert np.array_equal(got.numpy(), _expected(a, torch.tensor([held]), None)), change
        nxt = a.step(states, torch.tensor([TOKENS.index(".")]))
        assert int(nxt[0]) == int(a.step(torch.tensor([held]), torch.tensor([TOKENS.index(".")]))[0]), change
    # another tensor of the same value, and a 2-D one, take the general reading
    same = torch.tensor([x_state])
    assert np.array_equal(a.fill_bitmask(bitmask, same).numpy(), _expected(a, same, None))
    assert np.array_equal(a.fill_bitmask(bitmask, same.reshape(1, 1)).numpy(), _expected(a, same, None))


def test_steps_inside_inference_mode_are_read_right():
    a = next(_automata())
    bitmask = torch.zeros(1, bitmask_words(len(TOKENS)), dtype=torch.int32)
    with torch.inference_mode():
        states = a.step(torch.tensor([a.initial]), torch.tensor([0]))
        states.fill_(int(a.step(torch.tensor([a.walk([0])]), torch.tensor([TOKENS.index("x")]))[0]))
        got = a.fill_bitmask(bitmask, states)
        assert np.array_equal(got.numpy(), _expected(a, states.clone(), None))
