"""Every model from every command: ``--model SPEC`` recognises a checkpoint, an ARPA file, a local
transformers directory or a bundled name; ``--hf-model DIR`` is the explicit flag; ``--device``
defaults to auto; warnings print as one ``Warning: ...`` line."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from decodekit import load_model
from decodekit.checkpoint import save_checkpoint
from decodekit.cli import main
from decodekit.errors import DecodekitError
from decodekit.models.arpa import write_arpa
from decodekit.models.kneser_ney import train_kneser_ney_on_sentences
from decodekit.models.lstm import LSTMLM, LSTMConfig
from decodekit.vocab import WordVocab
from tests.support.fakes import save_tiny_gpt2

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran"]
COMMANDS = {
    "generate": ["generate", "the cat", "--max-length", "3"],
    "eval": ["eval", "--data", "DATA"],
    "constraint": ["constraint", "the.*"],
}


def run(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(argv)
        raise SystemExit(0)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A checkpoint, an ARPA file and a text file to score, in one directory."""
    d = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    save_checkpoint(
        LSTMLM(LSTMConfig(embed=8, hidden=8, layers=1), WordVocab(["<unk>", "<eos>", *WORDS])), d / "ckpt"
    )
    sentences = [s.split() for s in ["the cat sat on the mat", "the dog ran", "the cat ran"]]
    write_arpa(train_kneser_ney_on_sentences(sentences, 2, discounts=[(0.5, 1.0, 1.5)] * 2), d / "kn2.arpa")
    (d / "test.txt").write_text("the cat sat\nthe dog ran on the mat\n", encoding="utf-8")
    return d


def args(command: str, d) -> list[str]:
    return [str(d / "test.txt") if a == "DATA" else a for a in COMMANDS[command]]


@pytest.mark.parametrize("command", ["generate", "eval", "constraint"])
@pytest.mark.parametrize("kind", ["ckpt", "kn2.arpa"])
def test_model_option_takes_checkpoints_and_arpa_files(models, command, kind, capsys):
    code, out, err = run([*args(command, models), "--model", str(models / kind)], capsys)
    assert code == 0, err
    assert out.strip()


@pytest.mark.parametrize("command", ["generate", "eval", "constraint"])
def test_hf_model_that_does_not_exist_is_one_decodekit_line(models, command, capsys):
    code, _, err = run([*args(command, models), "--hf-model", "/nonexistent/model"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "no such directory" in err and "/nonexistent/model" in err and "local files only" in err
    assert "repo" not in err.lower()  # not transformers' repo-id error


@pytest.mark.parametrize("command", ["generate", "eval", "constraint"])
def test_model_and_hf_model_are_exclusive(models, command, capsys):
    code, _, err = run([*args(command, models), "--model", str(models / "ckpt"), "--hf-model", "x"], capsys)
    assert code == 2 and "either --model or --hf-model" in err


def test_directory_without_a_model_names_what_is_accepted(tmp_path, capsys):
    code, _, err = run(["generate", "the", "--model", str(tmp_path)], capsys)
    assert code == 2 and "config.json is missing" in err and "transformers" in err and "ARPA" in err


@pytest.mark.parametrize("command", ["generate", "eval"])
def test_device_defaults_to_auto_and_is_checked(models, command, capsys):
    code, out, _ = run([command, "--help"], capsys)
    assert code == 0 and "[default: auto]" in " ".join(out.split())
    code, _, err = run([*args(command, models), "--model", str(models / "ckpt"), "--device", "meta"], capsys)
    assert code == 2 and "--device meta" in err and len(err.strip().splitlines()) == 1


def test_eval_warning_is_one_line_without_a_source_path(models, capsys):
    (models / "odd.txt").write_text("the zebra sat\n", encoding="utf-8")
    code, out, err = run(["eval", "--model", str(models / "ckpt"), "--data", str(models / "odd.txt")], capsys)
    assert code == 0, err
    lines = err.strip().splitlines()
    assert lines and all(line.startswith("Warning: ") for line in lines), err
    assert "UserWarning" not in err and ".py:" not in err and "mapped to <unk>" in err


def test_warnings_style_is_restored_after_the_command(models, capsys):
    import warnings

    before = warnings.showwarning
    run(["eval", "--model", str(models / "ckpt"), "--data", str(models / "test.txt")], capsys)
    assert warnings.showwarning is before


# ---- transformers directories --------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    path = save_tiny_gpt2(
        tmp_path_factory.mktemp("hf") / "gpt2-tiny", ["the cat sat on the mat", "the dog ran"] * 5, 280
    )
    return path


@pytest.mark.parametrize("command", ["generate", "eval", "constraint"])
@pytest.mark.parametrize("flag", ["--model", "--hf-model"])
def test_transformers_directory_from_either_flag(models, hf_dir, command, flag, capsys):
    device = [] if command == "constraint" else ["--device", "cpu"]  # constraint runs no model
    code, out, err = run([*args(command, models), flag, str(hf_dir), *device], capsys)
    assert code == 0, err
    assert "not a decodekit checkpoint" not in err and out.strip()


def test_eval_of_a_transformers_model_scores_its_own_tokens(models, hf_dir, capsys):
    code, out, err = run(
        ["eval", "--model", str(hf_dir), "--data", str(models / "test.txt"), "--json"], capsys
    )
    assert code == 0, err
    result = json.loads(out)
    lm = load_model(hf_dir)
    lines = (models / "test.txt").read_text().splitlines()
    ids = sum(len(lm.encode(line)) + 1 for line in lines)  # each line and its eos
    assert result["tokens"] == ids - (lm.bos_id is None)  # without a bos the first is context only
    assert "Loading weights" not in err  # transformers' bars: only on a terminal
    assert result["unknown"] == 0 and result["perplexity"] > 1


def test_missing_transformers_is_one_line_with_the_install_command(hf_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    with pytest.raises(DecodekitError, match=r"pip install 'decodekit\[hf\]'"):
        load_model(hf_dir)


def test_load_model_kind_insists(models, hf_dir):
    with pytest.raises(DecodekitError, match="holds a transformers model, not a decodekit checkpoint"):
        load_model(hf_dir, kind="checkpoint")
    with pytest.raises(DecodekitError, match="no such directory"):
        load_model(models / "nope", kind="hf")
