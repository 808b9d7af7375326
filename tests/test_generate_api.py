"""generate() as a transformers user calls it: text (one or a list), token ids, tensors,
transformers' names as keywords; hypotheses carry their text."""

from __future__ import annotations

import pytest
import torch

import decodekit
from decodekit import GenerationConfig, generate, load_model
from decodekit.errors import ConfigError
from tests.support.cli import word_checkpoint
from tests.support.exhaustive import SparseLM

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


def test_stream_yields_the_tokens_generate_returns(model):
    for options in (dict(max_new_tokens=8), dict(max_new_tokens=8, do_sample=True, seed=4)):
        want = generate(model, "the company", **options)[0]
        assert list(decodekit.stream(model, "the company", **options)) == list(want.tokens)
    pattern = r"the (market|company) .*"
    options = dict(max_length=7, constraint=pattern, strategy="greedy")
    got = list(decodekit.stream(model, "shares", **options))
    assert got == list(generate(model, "shares", **options)[0].tokens)
    with pytest.raises(ConfigError, match="only at the end"):
        list(decodekit.stream(model, "the", strategy="beam"))
    with pytest.raises(ConfigError, match="one prompt"):
        list(decodekit.stream(model, ["the", "a"]))
    with pytest.raises(ConfigError, match="max_length"):  # errors of the search reach the caller
        list(decodekit.stream(model, "the", max_length=-1))


def test_cli_stream_prints_what_generate_prints_with_split_characters(tmp_path):
    """A byte-level BPE splits "é" across tokens: the stream holds a half character back."""
    pytest.importorskip("transformers")
    from tests.support.cli import run
    from tests.support.fakes import save_tiny_gpt2

    texts = ["déjà vu au café", "naïve œuvre, été à la crème"] * 10
    directory = str(save_tiny_gpt2(tmp_path / "gpt", texts, 280))
    args = ["generate", "le", "--model", directory, "--max-length", "12"]
    plain = run(*args)
    streamed = run(*args, "--stream")
    assert plain.exit_code == streamed.exit_code == 0, streamed.output
    assert streamed.stdout == plain.stdout


def test_a_stream_left_early_ends_its_search(model):
    import threading

    tokens = decodekit.stream(model, "the", max_length=10**6, suppress=(model.eos_id,))  # minutes
    first = [next(tokens) for _ in range(3)]
    tokens.close()
    for t in threading.enumerate():  # the search left runs for minutes: a hang guard, not a budget
        if t.name == "decodekit-stream":
            t.join(timeout=120)
    assert len(first) == 3 and not any(t.name == "decodekit-stream" for t in threading.enumerate())
