"""The model shipped inside the package: present, small, loadable, a working step-protocol model."""

from __future__ import annotations

import json

import torch

from decodekit.loading import default_model_path, load_model


def test_default_model_is_shipped_small_and_documented():
    path = default_model_path()
    size = sum(p.stat().st_size for p in path.iterdir())
    assert size < 12 * 2**20, size
    info = json.loads((path / "config.json").read_text())
    assert info["model"]["kind"] == "lstm" and info["vocab_size"] == 10_000
    assert info["test_ppl_fp32"] <= 125  # the measured PTB test perplexity (README, "The default model")


def test_default_model_loads_and_steps():
    model = load_model(None)
    assert not model.training and model.head.weight.dtype == torch.float32
    prompt = torch.tensor([model.vocab.encode("the company said")])
    logprobs, state = model.prefill(model.initial_state(1), prompt)
    assert torch.isfinite(logprobs).all()
    assert abs(logprobs.exp().sum().item() - 1) < 1e-4
    assert model.vocab.decode(logprobs.topk(50).indices[0].tolist())  # plausible words, not specials only
