"""Files that are not what they claim (issue 16): FIFOs, links to /dev/zero, crafted configs,
impossible ARPA probabilities, pickled transformers weights. Each is refused with one line,
quickly, before anything large is read or allocated."""

from __future__ import annotations

import json
import os
import time

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from decodekit.checkpoint import WEIGHTS, load_checkpoint, read_config, save_checkpoint
from decodekit.errors import CheckpointError, DecodekitError
from decodekit.models.arpa import ArpaError, read_arpa
from decodekit.models.registry import create_model, make_config
from decodekit.vocab import WordVocab

VOCAB = WordVocab(["<unk>", "<eos>", "a", "b", "c"])


pytestmark = pytest.mark.usefixtures("blocking_alarm")  # tests/conftest.py


@pytest.fixture
def ckpt(tmp_path):
    torch.manual_seed(0)
    model = create_model(make_config("lstm", embed=4, hidden=4, layers=1), VOCAB)
    save_checkpoint(model, tmp_path / "m")
    return tmp_path / "m"


@pytest.mark.parametrize("name", ["model.safetensors", "vocab.txt", "config.json"])
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_fifos_and_devices_are_refused(ckpt, name, kind):
    (ckpt / name).unlink()
    if kind == "fifo":
        os.mkfifo(ckpt / name)
    else:
        os.symlink("/dev/zero", ckpt / name)
    with pytest.raises(CheckpointError, match="not a regular file") as e:
        load_checkpoint(ckpt)
    assert name in str(e.value) and "\n" not in str(e.value)


def craft(directory, **changes):
    """A consistent forgery: config.json and the header's copies of it both changed."""
    info = json.loads((directory / "config.json").read_text())
    info["model"].update(changes)
    (directory / "config.json").write_text(json.dumps(info))
    with safe_open(str(directory / WEIGHTS), "pt") as f:
        meta, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    meta["model"] = json.dumps(info["model"], sort_keys=True)
    meta["info"] = json.dumps(info, sort_keys=True)
    save_file(tensors, str(directory / WEIGHTS), metadata=meta)


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"hidden": 12000}, "instead of"),
        ({"layers": 10**6}, "layers=1000000, but model.safetensors holds only 7 tensors"),
        ({"layers": 3}, "missing"),
        ({"embed": -5}, "not a valid lstm config"),
    ],
)
def test_crafted_config_fails_before_allocating(ckpt, changes, message):
    with torch.device("meta"):  # the first meta build imports torch machinery: not what is timed
        create_model(make_config("lstm", embed=4, hidden=4), VOCAB)
    craft(ckpt, **changes)
    start = time.process_time()
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(ckpt)
    assert time.process_time() - start < 1.0


def test_huge_vocabulary_is_refused_before_parsing(ckpt):
    header = json.dumps({"kind": "word", "eos": "<eos>", "unk": "<unk>"}).encode()
    (ckpt / "vocab.txt").write_bytes(header + b"\n" + b'"w"\n' * 3_000_000)
    start = time.process_time()
    with pytest.raises(CheckpointError, match="lists 3,000,000 tokens, a size no tensor of the model has"):
        load_checkpoint(ckpt)
    assert time.process_time() - start < 1.0


def test_stale_config_after_a_kill_is_reconciled_from_the_weights(ckpt):
    torch.manual_seed(1)
    model = create_model(make_config("lstm", embed=4, hidden=4, layers=1), VOCAB)
    old = (ckpt / "config.json").read_text()
    save_checkpoint(model, ckpt, extra={"epoch": 2})
    (ckpt / "config.json").write_text(old)  # as if killed between the weights and the config write
    assert read_config(ckpt)["epoch"] == 2
    loaded = load_checkpoint(ckpt)
    assert torch.equal(loaded.head.weight, model.head.weight)


ARPA = """\\data\\
ngram 1=4
ngram 2=2

\\1-grams:
-99\t<s>\t-0.3
-0.5\t</s>
-0.4\ta\t-0.2
{p}\tb

\\2-grams:
-0.1\t<s> a
-0.2\ta b

\\end\\
"""


def test_arpa_positive_log_probability_names_its_line(tmp_path):
    path = tmp_path / "lm.arpa"
    path.write_text(ARPA.format(p="0.25"))
    with pytest.raises(ArpaError, match=r"lm.arpa:9: log10 probability 0.25 is positive"):
        read_arpa(path)
    path.write_text(ARPA.format(p="-0.7"))
    assert read_arpa(path).vocab_size == 3
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(ArpaError, match="FIFO"):
        read_arpa(path)


def test_pickled_transformers_weights_are_one_line(tmp_path, capfd):
    transformers = pytest.importorskip("transformers")
    from decodekit.cli import main
    from decodekit.models.hf import load_hf

    config = transformers.GPT2Config(vocab_size=40, n_positions=16, n_embd=8, n_layer=1, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    model.config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(DecodekitError, match=r"only pickled weights \(pytorch_model.bin\)"):
        load_hf(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["generate", "a", "--hf-model", str(tmp_path)])
    err = capfd.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and err[-1].startswith("Error: ") and "pickled" in err[-1]
    assert not any("Traceback" in line for line in err)
