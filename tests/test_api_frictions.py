"""A transformers / OpenAI-API user's first calls (issue 36, items 3 and 10): temperature 0 is
greedy, transformers' stop_strings is accepted, and an unknown option lists the known ones."""

from __future__ import annotations

import warnings

import pytest

import decodekit
from decodekit import GenerationConfig
from decodekit.errors import ConfigError
from tests.support.exhaustive import SparseLM, small_vocab


def _model():
    vocab = small_vocab(["a", "b", "ab", " is", "c"])
    return SparseLM(len(vocab), 3, 0.0, bos_id=1, eos_id=1, vocab=vocab)


def test_temperature_zero_is_greedy_without_a_warning():
    model = _model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zero = decodekit.generate(model, [2], temperature=0, max_new_tokens=6)
    assert [h.tokens for h in zero] == [h.tokens for h in decodekit.generate(model, [2], max_new_tokens=6)]


def test_sampling_at_temperature_zero_runs_greedy_and_says_so():
    model = _model()
    with pytest.warns(UserWarning, match="greedy"):
        out = decodekit.generate(model, [2], strategy="sample", temperature=0, max_new_tokens=6, seed=1)
    assert [h.tokens for h in out] == [h.tokens for h in decodekit.greedy(model, [2], 6)]


def test_stop_strings_is_transformers_name_for_stop():
    assert GenerationConfig(stop_strings=[" is"]).stop == (" is",)
    assert GenerationConfig(stop_strings=" is").stop == (" is",)


def test_an_unknown_option_lists_the_known_ones_and_names_max_new_tokens():
    with pytest.raises(ConfigError, match="max_new_tokens") as e:
        GenerationConfig(max_tokens=5)
    assert "known:" in str(e.value) and "temperature" in str(e.value)


def test_hypothesis_tokens_equal_a_list_of_the_same_ids():
    """Issue 36 item 10: ``hf_ids == h.tokens`` was False (a tuple); tokens stay hashable."""
    h = decodekit.generate(_model(), [2], max_new_tokens=4)[0]
    ids = list(h.tokens)
    assert ids == h.tokens and h.tokens == ids and h.tokens != ids[:-1]
    assert hash(h) == hash(decodekit.Hypothesis(ids, h.logprob, h.score, h.finished, h.token_logprobs))


def test_the_sample_function_at_temperature_zero_draws_the_most_probable_token():
    """decodekit.sample(temperature=0): the limit of softmax(logp / T) as T -> 0 (greedy when
    the argmax is unique), not a refusal."""
    model = _model()
    drawn = decodekit.sample(model, [2], 6, temperature=0, generator=5)[0]
    assert drawn.tokens == decodekit.greedy(model, [2], 6)[0].tokens
