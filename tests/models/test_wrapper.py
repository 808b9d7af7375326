"""The optional protocol methods have one default each (models.base.prefill, models.state.select
and concat), and the wrappers (Suppressed, Controlled) go through them: a wrapper always has
prefill / reorder_state / concat_states, forwards only the facts it names, and agrees with
stepping itself token by token on a model that has none of the optional methods."""

import pytest
import torch

from decodekit.models import state as st
from decodekit.models.base import prefill
from decodekit.models.controls import Controlled
from decodekit.models.suppress import Suppressed
from tests.support.fakes import HistoryLM, word_vocab

WRAPPERS = {
    "suppressed": lambda m: Suppressed(m, [2, 3]),
    "controlled": lambda m: Controlled(m, repetition_penalty=1.5, no_repeat_ngram_size=2),
}
TOKENS = torch.tensor([[0, 4, 5, 4], [0, 6, 4, 5]])  # [N, T]


def stepped(model, tokens):
    state = model.initial_state(tokens.shape[0])
    for t in range(tokens.shape[1]):
        logprobs, state = model.step(state, tokens[:, t])
    return logprobs, state


def test_the_prefill_default_steps_and_a_models_own_prefill_wins():
    model = HistoryLM(7, seed=1)
    got, _ = prefill(model, model.initial_state(2), TOKENS)
    torch.testing.assert_close(got, stepped(model, TOKENS)[0], rtol=0, atol=0)
    model.prefill = lambda state, tokens: ("own", state)
    assert prefill(model, model.initial_state(2), TOKENS)[0] == "own"


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_a_wrapper_of_a_bare_model_prefills_reorders_and_joins_like_stepping(name):
    wrapped = WRAPPERS[name](HistoryLM(7, seed=2))  # HistoryLM: step only
    want, _ = stepped(wrapped, TOKENS)
    got, state = wrapped.prefill(wrapped.initial_state(2), TOKENS)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    rows = torch.tensor([1, 1, 0])
    picked = st.select(state, rows, wrapped)
    joined = st.concat([st.select(state, rows[:1], wrapped), st.select(state, rows[1:], wrapped)], wrapped)
    nxt = torch.tensor([5, 6, 4])
    for s in (picked, joined):  # each row goes on as the row it was taken from
        lp, _ = wrapped.step(s, nxt)
        again, _ = stepped(wrapped, torch.cat([TOKENS[rows], nxt[:, None]], 1))
        torch.testing.assert_close(lp, again, rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_a_wrapper_forwards_what_it_names_and_nothing_else(name):
    vocab = word_vocab(["a", "b", "c", "d", "e"])
    plain, spoken = HistoryLM(7), HistoryLM(7, vocab=vocab)
    assert WRAPPERS[name](spoken).vocab is vocab
    assert WRAPPERS[name](plain).vocab is None
    assert not hasattr(WRAPPERS[name](plain), "parameters")  # the fake has none: not an nn.Module
    spoken.target_logprobs = spoken.initial_logprobs = lambda *a: None  # a stream scorer's shortcuts
    wrapped = WRAPPERS[name](spoken)
    assert not hasattr(wrapped, "target_logprobs") and not hasattr(wrapped, "initial_logprobs")
    assert wrapped.device == torch.device("cpu")
