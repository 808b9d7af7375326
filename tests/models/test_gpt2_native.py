"""decodekit's own GPT-2 forward (decodekit.models.gpt2) against transformers' GPT2LMHeadModel
on tiny random models: the same logits with left padding and a cache, the same greedy and beam
tokens through HuggingFaceLM, load_hf choosing it for a plain GPT-2 directory, and falling back
to transformers for any directory it does not cover."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

import decodekit  # noqa: E402
from decodekit.models import hf  # noqa: E402
from decodekit.models.gpt2 import NativeGPT2, native_model  # noqa: E402
from decodekit.models.hf import HuggingFaceLM, load_hf  # noqa: E402
from tests.support.fakes import byte_bpe  # noqa: E402

TEXTS = ["the cat sat on the mat", "a naïve façade in the rain", "日本語のテキスト", "3 dogs!"] * 4


def _saved(tmp_path, **overrides):
    tok = byte_bpe(TEXTS, 300)
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=2, n_head=4, initializer_range=0.3,
        bos_token_id=0, eos_token_id=0, **overrides,
    )  # fmt: skip
    model = transformers.GPT2LMHeadModel(config).eval()
    path = tmp_path / "gpt2"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return model, tok, path


def test_the_same_logits_with_left_padding_and_a_cache(tmp_path):
    theirs, _, path = _saved(tmp_path)
    ours = native_model(path)
    assert isinstance(ours, NativeGPT2)
    ids = torch.randint(1, theirs.config.vocab_size, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, :3] = 0  # row 1 left-padded
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    with torch.no_grad():
        want = theirs(input_ids=ids, attention_mask=mask, position_ids=pos).logits
        got = ours(input_ids=ids, attention_mask=mask, position_ids=pos).logits
        assert torch.allclose(got[0], want[0], atol=1e-5)
        assert torch.allclose(got[1, 3:], want[1, 3:], atol=1e-5)  # the padding's own outputs are unused
        # the cache: the first 5 tokens, then 2 more, equal to all 7 at once
        first = ours(input_ids=ids[:, :5], attention_mask=mask[:, :5], position_ids=pos[:, :5])
        more = ours(
            input_ids=ids[:, 5:],
            attention_mask=mask,
            position_ids=pos[:, 5:],
            past_key_values=first.past_key_values,
        )
        assert torch.allclose(more.logits, got[:, 5:], atol=1e-5)
        assert not torch.isnan(got).any()


@pytest.mark.parametrize("beams", [1, 3])
def test_the_same_tokens_through_the_step_protocol(tmp_path, beams):
    theirs, tok, path = _saved(tmp_path)
    prompts = [tok.encode("the cat sat"), tok.encode("a naïve dog ran")]  # unequal lengths
    outs = []
    for model in (theirs, native_model(path)):
        lm = HuggingFaceLM(model, tok)
        lm.eos_id = None
        if beams == 1:
            hyps = decodekit.greedy(lm, prompts, 10)
        else:
            hyps = decodekit.beam_search(lm, prompts, beams, 10, length_penalty=0.0)
        outs.append([(h[0].tokens, round(h[0].logprob, 4)) for h in hyps])
    assert outs[0] == outs[1]


def test_load_hf_runs_it_for_a_plain_gpt2_directory(tmp_path, monkeypatch):
    _, _, path = _saved(tmp_path)
    assert isinstance(load_hf(path).model, NativeGPT2)
    monkeypatch.setattr(hf, "NATIVE_GPT2", False)
    assert isinstance(load_hf(path).model, transformers.GPT2LMHeadModel)


@pytest.mark.parametrize(
    "overrides", [{"scale_attn_by_inverse_layer_idx": True}, {"activation_function": "relu"}, {"n_inner": 40}]
)
def test_anything_else_is_left_to_transformers(tmp_path, overrides):
    _, _, path = _saved(tmp_path, **overrides)
    assert native_model(path) is None
    assert isinstance(load_hf(path).model, transformers.GPT2LMHeadModel)


def test_sharded_weights_load_as_the_single_file(tmp_path):
    model, tok, path = _saved(tmp_path)
    sharded = tmp_path / "sharded"
    model.save_pretrained(sharded, max_shard_size="20KB")
    tok.save_pretrained(sharded)
    assert not (sharded / "model.safetensors").exists()
    one, two = native_model(path), native_model(sharded)
    assert isinstance(two, NativeGPT2)
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        assert torch.equal(one(ids).logits, two(ids).logits)
