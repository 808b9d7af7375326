"""Repetition penalty, no repeated n-grams, a minimum length and stop strings as a step-protocol
wrapper (models.controls.Controlled): equal to transformers' processors on the same
log-probabilities (renormalised), honoured by every strategy, rows reordered by beam search."""

from __future__ import annotations

import pytest
import torch

import decodekit
from decodekit.errors import ConfigError
from decodekit.models.controls import Controlled
from tests.support.exhaustive import SparseLM
from tests.support.fakes import char_vocab


def feed(model, tokens):
    """Step ``model`` through ``tokens`` [N, T]: (the last log-probabilities, the state)."""
    state = model.initial_state(tokens.shape[0])
    for t in range(tokens.shape[1]):
        logprobs, state = model.step(state, tokens[:, t])
    return logprobs, state


def test_each_control_equals_transformers_processor_on_the_same_logprobs():
    transformers = pytest.importorskip("transformers")
    lp_module = transformers.generation.logits_process
    model = SparseLM(12, seed=3, zeros=0.0, bos_id=None, eos_id=0)
    history = torch.tensor([[5, 3, 5, 7, 5, 3], [1, 2, 3, 4, 5, 6]])
    cases = [
        (dict(repetition_penalty=1.7), lp_module.RepetitionPenaltyLogitsProcessor(1.7)),
        (dict(repetition_penalty=0.6), lp_module.RepetitionPenaltyLogitsProcessor(0.6)),
        (dict(no_repeat_ngram_size=2), lp_module.NoRepeatNGramLogitsProcessor(2)),
        (dict(no_repeat_ngram_size=3), lp_module.NoRepeatNGramLogitsProcessor(3)),
        (dict(min_new_tokens=2), lp_module.MinNewTokensLengthLogitsProcessor(6, 2, 0)),
    ]
    for options, processor in cases:
        wrapped = Controlled(model, **options)
        got, state = wrapped.prefill(wrapped.initial_state(2), history)  # the prompt: 6 tokens
        inner, _ = feed(model, history)
        want = torch.log_softmax(processor(history, inner.clone()), -1)
        assert torch.allclose(got, want, atol=1e-6), options
        nxt = torch.tensor([5, 9])
        got, _ = wrapped.step(state, nxt)
        inner, _ = model.step(feed(model, history)[1], nxt)
        ids = torch.cat([history, nxt[:, None]], 1)
        want = torch.log_softmax(processor(ids, inner.clone()), -1)
        assert torch.allclose(got, want, atol=1e-6), options


@pytest.mark.parametrize("search", ["greedy", "sample", "beam"])
def test_every_strategy_honours_the_controls(search):
    vocab = char_vocab("abc")  # <unk> <eos> a b c
    model = SparseLM(len(vocab), seed=1, zeros=0.0, bos_id=1, eos_id=1, vocab=vocab)
    wrapped = Controlled(model, no_repeat_ngram_size=2, min_new_tokens=4)
    run = {
        "greedy": lambda m: decodekit.greedy(m, [[2], [3]], 12),
        "sample": lambda m: decodekit.sample(m, [[2], [3]], 12, num_samples=6, generator=0),
        "beam": lambda m: decodekit.beam_search(m, [[2], [3]], 4, 12, n_best=3),
    }[search]
    for prompt, hyps in zip([[2], [3]], run(wrapped)):
        for h in hyps:
            tokens = [t for t in h.tokens if t != 1]
            assert len(tokens) >= 4 or not h.finished, h  # EOS only after 4 new tokens
            seq = prompt + tokens
            pairs = list(zip(seq, seq[1:]))
            assert len(pairs) == len(set(pairs)), (search, seq)  # no bigram twice, the prompt's included


def test_a_stop_string_ends_the_hypothesis_where_it_appears():
    vocab = char_vocab("ab.")
    model = SparseLM(len(vocab), seed=2, zeros=0.0, bos_id=1, eos_id=1, vocab=vocab)
    free = decodekit.greedy(model, [2], 30)[0]
    text = vocab.decode(free.tokens)
    stop = next(s for s in ("ab", "ba", "a.", ".a", "b.", ".b", "aa", "bb") if s in text)
    got = decodekit.greedy(Controlled(model, stop=[stop, "never"]), [2], 30)[0]
    out = vocab.decode(got.tokens)
    assert out == text[: text.index(stop) + len(stop)] and got.finished, (text, stop, out)
    beams = decodekit.beam_search(Controlled(model, stop=stop), [2], 3, 30, n_best=3)
    for h in beams:  # each ends at its first stop string (kept in the text), or never meets one
        t = vocab.decode(h.tokens)
        assert stop not in t[:-1] or t.index(stop) + len(stop) == len(t), t


def test_bad_controls_are_one_line_errors():
    model = SparseLM(5, seed=0, bos_id=None, eos_id=0)
    for options, message in (
        (dict(repetition_penalty=0), "repetition_penalty"),
        (dict(no_repeat_ngram_size=-1), "no_repeat_ngram_size"),
        (dict(min_new_tokens=1.5), "min_new_tokens"),
        (dict(stop=[""]), "non-empty strings"),
        (dict(stop=["x"]), "vocabulary and an EOS"),
    ):
        with pytest.raises(ConfigError, match=message):
            Controlled(model, **options)
