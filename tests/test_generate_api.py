"""generate() as a transformers user calls it: text (one or a list), token ids, tensors,
transformers' names as keywords; hypotheses carry their text."""

from __future__ import annotations

import pytest
import torch

import decodekit
from decodekit import GenerationConfig, generate, load_model
from decodekit.errors import ConfigError
from tests.cli import word_checkpoint
from tests.decoding.exhaustive import SparseLM

WORDS = ["the", "company", "said", "profit", "rose", "market", "fell", "shares"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return load_model(word_checkpoint(tmp_path_factory.mktemp("m"), WORDS))


def test_every_prompt_form_gives_the_same_hypotheses(model):
    ids = model.vocab.encode("the company")
    config = GenerationConfig(max_length=6, strategy="beam", beam_size=3, n_best=2)
    want = generate(model, [ids], config)[0]
    assert len(want) == 2 and all(h.text == model.vocab.decode(h.tokens) for h in want)
    for prompt in ("the company", ids, torch.tensor(ids)):
        assert generate(model, prompt, config) == want
        assert [h.text for h in generate(model, prompt, config)] == [h.text for h in want]
    batch = generate(model, ["the company", "shares"], config)
    assert batch[0] == want and batch[1] == generate(model, "shares", config)
    assert generate(model, torch.tensor([ids, ids]), config) == [want, want]
    assert generate(model, "the company", max_new_tokens=6, num_beams=3, num_return_sequences=2) == want


def test_text_needs_a_vocabulary_and_hypotheses_without_one_have_no_text():
    bare = SparseLM(6, seed=0, bos_id=None, eos_id=0)
    with pytest.raises(ConfigError, match="needs the model's vocabulary"):
        generate(bare, "hello")
    (h,) = generate(bare, [1, 2], max_length=3)
    assert h.text is None and h.tokens
    assert decodekit.greedy(bare, [1, 2], 3)[0].text is None


def test_the_decoders_give_text_too(model):
    ids = model.vocab.encode("the market")
    for h in (decodekit.greedy(model, ids, 5)[0], decodekit.beam_search(model, ids, 2, 5)[0]):
        assert h.text == h.decode(model.vocab) == model.vocab.decode(h.tokens)
    d = h.to_dict(model.vocab)
    assert list(d)[0] == "text" and "text" not in h.to_dict()
