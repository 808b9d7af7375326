"""The model registry: configs round-trip through JSON, impossible configs fail, bos/eos, tying,
init range and dropout. (The step protocol of every entry: tests/models/test_conformance.py.)"""

from __future__ import annotations

import json

import pytest
import torch

from decodekit.models.registry import MODELS, config_from_dict, config_to_dict, create_model, make_config
from decodekit.vocab import WordVocab

VOCAB = WordVocab(["<unk>", "<eos>", "a", "b", "c", "d", "e"])
TINY = {
    "lstm": {"embed": 6, "hidden": 5, "layers": 2},
    "rnn": {"embed": 6, "hidden": 5, "layers": 2},
    "mlp": {"order": 3, "embed": 4, "hidden": 5},
}
CASES = [(kind, {}) for kind in sorted(MODELS)] + [
    ("lstm", {"embed": 5, "hidden": 5, "tie": True, "layers": 1}),
    ("rnn", {"embed": 5, "hidden": 5, "tie": True}),
    ("mlp", {"order": 4, "embed": 3, "hidden": 0}),
    ("mlp", {"order": 2, "embed": 3, "hidden": 4, "direct": False}),
]


def build(kind: str, overrides: dict) -> torch.nn.Module:
    torch.manual_seed(0)
    config = make_config(kind, **{**TINY.get(kind, {}), **overrides})
    model = create_model(config, VOCAB).double().eval()
    return model


def tokens(n: int, t: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, len(VOCAB), (n, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_config_json_round_trip(kind):
    config = make_config(kind, **TINY.get(kind, {}))
    d = json.loads(json.dumps(config_to_dict(config)))
    assert config_from_dict(d) == config
    with pytest.raises(ValueError, match="unknown"):
        config_from_dict({**d, "no_such_field": 1})


def test_config_errors():
    with pytest.raises(ValueError, match="unknown model kind 'gpt'"):
        config_from_dict({"kind": "gpt"})
    with pytest.raises(ValueError, match="embed == hidden"):
        create_model(make_config("lstm", embed=4, hidden=5, tie=True), VOCAB)
    with pytest.raises(ValueError, match="hidden=0 needs direct"):
        create_model(make_config("mlp", hidden=0, direct=False), VOCAB)
    with pytest.raises(ValueError, match="order must be >= 2"):
        create_model(make_config("mlp", order=1), VOCAB)


@pytest.mark.parametrize("kind", ["lstm", "rnn", "mlp"])
def test_bos_eos_and_tied_weights(kind):
    model = build(kind, {})
    assert model.bos_id == model.eos_id == VOCAB.eos_id
    assert model.vocab is VOCAB and model.vocab_size == len(VOCAB)
    if kind != "mlp":
        tied = build(kind, {"embed": 5, "hidden": 5, "tie": True, "layers": 1})
        assert tied.head.weight is tied.embedding.weight


@pytest.mark.parametrize("kind", ["lstm", "rnn"])
def test_init_range_and_dropout_only_in_training(kind):
    model = build(kind, {"init_range": 0.05, "dropout": 0.5})
    assert max(p.abs().max().item() for p in model.parameters()) <= 0.05
    x = tokens(2, 4)
    model.eval()
    assert torch.equal(model(x)[0], model(x)[0])
    model.train()
    assert not torch.equal(model(x)[0], model(x)[0])


def test_create_model_with_a_seed_is_reproducible_and_leaves_the_global_generator():
    from decodekit import model_config

    vocab = WordVocab(["<unk>", "<eos>", "a", "b"])
    config = model_config("lstm", layers=1, hidden=8, embed=8)
    torch.manual_seed(5)
    expected_next = torch.rand(3)
    torch.manual_seed(5)
    one = create_model(config, vocab, seed=0)
    assert torch.equal(torch.rand(3), expected_next)  # the global generator was not consumed
    two = create_model(config, vocab, seed=0)
    other = create_model(config, vocab, seed=1)
    for a, b in zip(one.state_dict().values(), two.state_dict().values()):
        assert torch.equal(a, b)
    assert any(not torch.equal(a, c) for a, c in zip(one.state_dict().values(), other.state_dict().values()))
