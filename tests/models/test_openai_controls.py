"""presence_penalty, frequency_penalty, logit_bias and multi-token bad_words
(models.controls.Controlled, issue 39 item 2): equal to hand-computed logits and to
transformers' NoBadWordsLogitsProcessor; the transformers-side controls (repetition_penalty,
no_repeat_ngram_size, bad_words_ids) side by side with transformers' generate() on a random GPT-2."""

from __future__ import annotations

import math

import pytest
import torch

import decodekit
from decodekit.decoding.generation import with_controls
from decodekit.errors import ConfigError
from decodekit.models.controls import Controlled
from tests.support.exhaustive import SparseLM
from tests.support.fakes import TableLM, step_through, word_vocab


def fed(model, prompt: list[int], generated: list[int]) -> torch.Tensor:
    """The wrapped model's log-probabilities after ``prompt`` (prefilled) then ``generated``."""
    lp, state = model.prefill(model.initial_state(1), torch.tensor([prompt]))
    for t in generated:
        lp, state = model.step(state, torch.tensor([t]))
    return lp[0]


def log_softmax(values: list[float]) -> list[float]:
    finite = [v for v in values if v > -math.inf]
    top = max(finite)
    total = top + math.log(sum(math.exp(v - top) for v in finite))
    return [v - total for v in values]


def test_penalties_and_bias_equal_hand_computed_logits():
    """Prompt [0, 2, 3] (0: BOS), generated 4, 4, 2: counts over the generated tokens only are
    c[2] = 1, c[4] = 2 (the prompt's 2 and 3 are not counted); the next distribution is
    log_softmax(lp - f c - a [c > 0] + bias)."""
    table = torch.randn(6, 6, generator=torch.Generator().manual_seed(4))
    model = TableLM(table)
    a, f, bias = 0.7, 0.4, {1: 2.5, 5: -1.0}
    got = fed(
        Controlled(model, presence_penalty=a, frequency_penalty=f, logit_bias=bias), [0, 2, 3], [4, 4, 2]
    )
    lp = torch.log_softmax(table.double(), -1)[2].tolist()  # the bigram model's row after token 2
    counts = [0, 0, 1, 0, 2, 0]
    want = log_softmax(
        [v - f * c - a * (c > 0) + bias.get(i, 0.0) for i, (v, c) in enumerate(zip(lp, counts))]
    )
    assert got.tolist() == pytest.approx(want, abs=1e-5)
    # negative penalties encourage repeats (the OpenAI range [-2, 2] both ways)
    got = fed(Controlled(model, presence_penalty=-2, frequency_penalty=-1), [0, 2, 3], [4, 4, 2])
    want = log_softmax([v + 1 * c + 2 * (c > 0) for v, c in zip(lp, counts)])
    assert got.tolist() == pytest.approx(want, abs=1e-5)


def test_bad_words_equal_transformers_processor_on_the_same_logprobs():
    transformers = pytest.importorskip("transformers", reason="the reference is transformers' processor")
    model = SparseLM(12, seed=3, zeros=0.0, bos_id=None, eos_id=0)
    bad = [[3, 5], [7], [5, 3, 9], [2, 2]]
    processor = transformers.generation.logits_process.NoBadWordsLogitsProcessor(bad, eos_token_id=0)
    history = torch.tensor([[5, 3, 5, 7, 5, 3], [1, 2, 3, 4, 2, 2], [4, 4, 4, 4, 4, 3]])
    wrapped = Controlled(model, bad_words=bad)
    got, state = wrapped.prefill(wrapped.initial_state(3), history)
    inner, inner_state = step_through(model, history)
    want = torch.log_softmax(processor(history, inner.clone()), -1)
    assert torch.equal(torch.isinf(got), torch.isinf(want)) and torch.allclose(got, want, atol=1e-6)
    banned = torch.isinf(got).nonzero().tolist()
    assert banned == [[0, 5], [0, 7], [0, 9], [1, 2], [1, 7], [2, 5], [2, 7]]  # by hand
    nxt = torch.tensor([9, 2, 5])
    got, _ = wrapped.step(state, nxt)
    inner, _ = model.step(inner_state, nxt)
    want = torch.log_softmax(processor(torch.cat([history, nxt[:, None]], 1), inner.clone()), -1)
    assert torch.allclose(got, want, atol=1e-6)


def test_the_options_resolve_token_strings_and_refuse_what_is_not_one_token():
    vocab = word_vocab(["the", "cat", "sat"])
    ids = {w: vocab.index[w] for w in ("the", "cat", "sat")}
    model = TableLM(
        torch.zeros(len(vocab), len(vocab)), bos_id=vocab.eos_id, eos_id=vocab.eos_id, vocab=vocab
    )
    config = decodekit.GenerationConfig(logit_bias={"cat": 100, str(ids["sat"]): -100.0}, max_length=4)
    assert decodekit.generate(model, "the", config)[0].text == "cat cat cat cat"  # +100 dominates
    wrapped = with_controls(model, config.replace(bad_words=["cat cat"]))
    lp = fed(wrapped, [vocab.eos_id, ids["the"]], [ids["cat"]])
    assert lp[ids["cat"]] == -math.inf and lp[ids["the"]] > -math.inf
    with pytest.raises(ConfigError, match="cannot bias 'the cat'"):
        decodekit.generate(model, "the", config.replace(logit_bias={"the cat": 1}))
    with pytest.raises(ConfigError, match="bad word 'dog' is not spelled"):
        decodekit.generate(model, "the", config.replace(bad_words=["dog"]))


@pytest.mark.parametrize(
    "options,name",
    [
        (dict(presence_penalty=2.5), "presence_penalty"),
        (dict(frequency_penalty=float("nan")), "frequency_penalty"),
        (dict(logit_bias={"a": 101}), "logit_bias"),
        (dict(logit_bias={-1: 1}), "logit_bias"),
        (dict(logit_bias=[1, 2]), "logit_bias"),
        (dict(bad_words=[[]]), "bad_words"),
        (dict(bad_words=[["a", 1]]), "bad_words"),
        (dict(bad_words="cat"), "bad_words"),
    ],
)
def test_out_of_range_controls_are_one_line_errors(options, name):
    with pytest.raises(ConfigError, match=name) as e:
        decodekit.GenerationConfig(**options)
    assert "\n" not in str(e.value)


def test_ids_outside_the_vocabulary_are_refused():
    model = TableLM(torch.zeros(4, 4))
    with pytest.raises(ConfigError, match=r"ids in \[0, 4\)"):
        decodekit.generate(model, [1], logit_bias={9: 1.0})
    with pytest.raises(ConfigError, match=r"ids in \[0, 4\)"):
        decodekit.generate(model, [1], bad_words_ids=[[1, 4]])


TEXTS = ["the cat sat on the mat", "a dog ran in the park", "the cat ran and the dog sat"]


@pytest.mark.parametrize(
    "options",
    [
        dict(repetition_penalty=1.7),
        dict(no_repeat_ngram_size=2),
        dict(bad_words_ids="the words of the prompt"),
        dict(repetition_penalty=0.8, no_repeat_ngram_size=1),
    ],
)
def test_next_token_distributions_equal_transformers_generate(options):
    """transformers applies these processors to log-probabilities in beam search, so the
    processed scores of its first beam after one step of generate(num_beams=2, output_scores=True)
    are the distribution decodekit's controlled model gives."""
    pytest.importorskip("transformers", reason="the reference implementation is transformers'")
    from decodekit.models.hf import HuggingFaceLM
    from tests.support.fakes import tiny_gpt2

    model, tok = tiny_gpt2(TEXTS)
    ids = tok(["the cat and the cat and the"], return_tensors="pt")
    prompt = ids["input_ids"][0].tolist()
    if "bad_words_ids" in options:  # the prompt's bigrams and one token
        options = {"bad_words_ids": [prompt[i : i + 2] for i in range(len(prompt) - 1)] + [[prompt[0]]]}
    out = model.generate(
        **ids,
        num_beams=2,
        max_new_tokens=1,
        output_scores=True,
        return_dict_in_generate=True,
        pad_token_id=0,
        **options,
    )
    want = torch.log_softmax(out.scores[0][0].double(), -1)
    lm = with_controls(HuggingFaceLM(model, tok), decodekit.GenerationConfig(**options))
    got = fed(lm, prompt, []).double()
    assert int(torch.isinf(want).sum()) > 0 or "repetition_penalty" in options and len(options) == 1
    assert torch.equal(torch.isinf(want), torch.isinf(got))
    assert torch.allclose(want.exp(), got.exp(), atol=1e-6)
