"""Checkpoints: exact round trip, fp16, and clear errors for damaged or mismatched files."""

from __future__ import annotations

import json

import pytest
import torch

from decodekit import checkpoint, loading
from decodekit.checkpoint import load_checkpoint, save_checkpoint
from decodekit.errors import CheckpointError
from decodekit.loading import load_model
from decodekit.models.registry import create_model, make_config
from decodekit.vocab import WordVocab

VOCAB = WordVocab(["<unk>", "<eos>", "a", "b", "c"])
SIZES = {
    "lstm": {"embed": 6, "hidden": 6},
    "rnn": {"embed": 6, "hidden": 6, "tie": True},
    "mlp": {"order": 3},
}


def model(kind: str = "lstm", vocab=VOCAB):
    torch.manual_seed(0)
    return create_model(make_config(kind, **SIZES[kind]), vocab)


@pytest.mark.parametrize("kind", ["lstm", "rnn", "mlp"])
def test_round_trip_is_exact(kind, tmp_path):
    m = model(kind)
    save_checkpoint(m, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors", "vocab.txt"]
    loaded = load_model(str(tmp_path))
    assert not loaded.training and loaded.vocab == VOCAB and loaded.config == m.config
    for k, v in m.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    if kind == "rnn":
        assert loaded.head.weight is loaded.embedding.weight  # tying survives the round trip


def test_fp16_halves_size_and_stays_close(tmp_path):
    torch.manual_seed(0)
    m = create_model(make_config("lstm", embed=32, hidden=32), VOCAB)
    save_checkpoint(m, tmp_path / "f32")
    save_checkpoint(m, tmp_path / "f16", dtype=torch.float16)
    s32, s16 = (tmp_path / d / "model.safetensors" for d in ("f32", "f16"))
    assert s16.stat().st_size < 0.6 * s32.stat().st_size
    loaded = load_checkpoint(tmp_path / "f16")
    assert loaded.head.weight.dtype == torch.float32
    x = torch.tensor([[2, 3, 4, 1]])
    torch.testing.assert_close(loaded(x)[0], m.eval()(x)[0], rtol=0, atol=1e-3)


def test_tampered_and_truncated_weights(tmp_path):
    save_checkpoint(model(), tmp_path)
    path = tmp_path / "model.safetensors"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01  # one bit of one weight
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        load_checkpoint(tmp_path)
    path.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(tmp_path)
    path.write_bytes(b"")
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(tmp_path)


def test_config_and_vocab_mismatches(tmp_path):
    save_checkpoint(model(), tmp_path / "a")
    with pytest.raises(CheckpointError, match="holds a 'lstm' model, expected 'mlp'"):
        load_checkpoint(tmp_path / "a", kind="mlp")
    cfg = json.loads((tmp_path / "a" / "config.json").read_text())
    cfg["model"]["hidden"] = 7
    (tmp_path / "a" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="does not match the config stored with the weights"):
        load_checkpoint(tmp_path / "a")
    save_checkpoint(model(), tmp_path / "b")
    WordVocab(["<unk>", "<eos>", "a", "b", "z"]).save(tmp_path / "b" / "vocab.txt")
    with pytest.raises(CheckpointError, match="not the vocabulary the model was trained with"):
        load_checkpoint(tmp_path / "b")
    (tmp_path / "b" / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="unreadable"):
        load_checkpoint(tmp_path / "b")


def test_weights_of_another_kind(tmp_path):
    save_checkpoint(model("lstm"), tmp_path / "lstm")
    save_checkpoint(model("rnn"), tmp_path / "rnn")
    (tmp_path / "rnn" / "model.safetensors").write_bytes(
        (tmp_path / "lstm" / "model.safetensors").read_bytes()
    )
    with pytest.raises(CheckpointError, match="does not match the config"):
        load_checkpoint(tmp_path / "rnn")


def test_load_model_specs(tmp_path, monkeypatch):
    monkeypatch.setattr(loading, "PRETRAINED_DIR", tmp_path / "pretrained")
    with pytest.raises(CheckpointError, match="no default model is installed.*--model"):
        load_model(None)
    with pytest.raises(CheckpointError, match="model not found"):
        load_model(str(tmp_path / "nope"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match="is a file"):
        load_model(str(tmp_path / "file"))
    with pytest.raises(CheckpointError, match="config.json is missing"):
        load_model(str(tmp_path))
    save_checkpoint(model("mlp"), tmp_path / "pretrained" / "ptb-lstm")
    assert load_model(None).config.kind == "mlp"
    assert load_model("ptb-lstm").config.kind == "mlp"  # a name under decodekit/pretrained/


def test_atomic_write_leaves_no_temporaries(tmp_path):
    save_checkpoint(model(), tmp_path)
    save_checkpoint(model(), tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert checkpoint.VERSION == 1
