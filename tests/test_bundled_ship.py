"""benchmarks/bundled_models.py ship: never replaces the packaged model by accident, one-line errors."""

import json

import pytest
import torch
from safetensors import safe_open

from decodekit.checkpoint import WEIGHTS, load_checkpoint, save_checkpoint
from decodekit.models.lstm import LSTMLM, LSTMConfig
from decodekit.vocab import WordVocab
from tests.support.scripts import load_benchmark


@pytest.fixture(scope="module")
def bundled():
    return load_benchmark("bundled_models")


@pytest.fixture
def run_dir(tmp_path):
    torch.manual_seed(0)
    model = LSTMLM(LSTMConfig(embed=4, hidden=4, layers=1), WordVocab(["<unk>", "<eos>", "a", "b"]))
    save_checkpoint(model.eval(), tmp_path / "run")
    (tmp_path / "run" / "metrics.jsonl").write_text(json.dumps({"event": "test", "test_ppl": 3.5}) + "\n")
    return tmp_path / "run"


def test_ship_refuses_to_replace_without_force(bundled, run_dir, tmp_path, capsys):
    dest = tmp_path / "pretrained"
    bundled.main(["ship", str(run_dir), "--dest", str(dest)])
    before = sorted(p.read_bytes() for p in dest.iterdir())
    with pytest.raises(SystemExit) as e:
        bundled.main(["ship", str(run_dir), "--dest", str(dest)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--force" in err
    assert sorted(p.read_bytes() for p in dest.iterdir()) == before
    bundled.main(["ship", str(run_dir), "--dest", str(dest), "--force"])
    load_checkpoint(dest)
    with safe_open(str(dest / WEIGHTS), framework="pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F16"}  # noqa: SIM118 (safe_open is not iterable)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pretrained", "run"]  # no .new/.old left


def test_ship_from_a_directory_that_is_not_a_run_is_one_line(bundled, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        bundled.main(["ship", str(tmp_path / "missing"), "--dest", str(tmp_path / "out")])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    assert not (tmp_path / "out").exists()


def test_unknown_recipe_is_a_usage_error(bundled, capsys):
    with pytest.raises(SystemExit) as e:
        bundled.main(["command", "lstm-huge"])
    assert e.value.code == 2
    assert "lstm-small" in capsys.readouterr().err
