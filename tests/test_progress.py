"""Progress on every long job, only on a terminal: bars on stderr when it is a TTY, nothing (or
one readable line per epoch, for training) otherwise; the JSON result stays alone on stdout."""

from __future__ import annotations

import io
import json
import sys

import pytest
import torch

from decodekit.cli import main
from decodekit.data import Corpus
from decodekit.models.arpa import read_arpa, write_arpa
from decodekit.models.kneser_ney import train_kneser_ney_on_sentences
from decodekit.models.registry import create_model, make_config
from decodekit.training import TrainConfig, evaluate, train
from decodekit.vocab import WordVocab

VOCAB = WordVocab(["<unk>", "<eos>", "the", "cat", "dog", "sat", "ran"])
IDS = torch.tensor([2, 3, 5, 1, 2, 4, 6, 1] * 12)
CORPUS = Corpus(VOCAB, IDS, IDS[:16], IDS[:16])
CONFIG = TrainConfig(epochs=2, batch_size=2, bptt=4, lr=0.5)


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def tiny_model():
    torch.manual_seed(0)
    return create_model(make_config("lstm", embed=4, hidden=4), VOCAB)


def train_with(stderr, monkeypatch, **kwargs) -> str:
    monkeypatch.setattr(sys, "stderr", stderr)
    train(tiny_model(), CORPUS, CONFIG, **kwargs)
    return stderr.getvalue()


def test_train_on_a_terminal_draws_a_bar_and_one_line_per_epoch(monkeypatch):
    err = train_with(Terminal(), monkeypatch)
    assert "\r" in err and "batch" in err  # tqdm's bar
    assert all(f"epoch {e}: train ppl" in err for e in range(1, CONFIG.epochs + 1)), err


@pytest.mark.parametrize("bar", [True, False])
def test_train_into_a_log_prints_readable_epoch_lines_only(monkeypatch, bar):
    err = train_with(io.StringIO(), monkeypatch, bar=bar)
    assert "\r" not in err
    lines = err.strip().splitlines()
    assert len(lines) == CONFIG.epochs and all(
        line.startswith(f"epoch {i + 1}: ") for i, line in enumerate(lines)
    )
    assert "valid ppl" in lines[0] and "tok/s" in lines[0]


def test_no_bar_on_a_terminal_keeps_the_epoch_lines(monkeypatch):
    err = train_with(Terminal(), monkeypatch, bar=False)
    assert "\r" not in err and len(err.strip().splitlines()) == CONFIG.epochs


def test_progress_false_is_silent(monkeypatch):
    assert train_with(io.StringIO(), monkeypatch, progress=False) == ""


def test_cli_train_no_progress_keeps_stdout_json_and_epoch_lines_on_stderr(tmp_path, capsys):
    d = tmp_path / "data"
    d.mkdir()
    for name in ("train.txt", "valid.txt", "test.txt"):
        (d / name).write_text("the cat sat\nthe dog ran\n" * 5, encoding="utf-8")
    argv = ["train", "--data", str(d), "--out", str(tmp_path / "o"), "--hidden", "4", "--embed", "4"]
    main([*argv, "--epochs", "2", "--bptt", "4", "--batch-size", "2", "--no-progress", "--device", "cpu"])
    out, err = capsys.readouterr()
    assert json.loads(out)["epochs"] == 2  # stdout: the summary alone
    assert [line.split(":")[0] for line in err.strip().splitlines()] == ["epoch 1", "epoch 2"]


@pytest.mark.parametrize("terminal", [True, False])
def test_evaluate_bar_only_on_a_terminal_and_same_result(monkeypatch, terminal):
    model = tiny_model()
    plain = evaluate(model, IDS)
    stderr = Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    shown = evaluate(model, IDS, chunk=16, progress=True)
    assert shown == plain or (shown.tokens == plain.tokens and abs(shown.nll - plain.nll) < 1e-4)
    assert ("scoring" in stderr.getvalue()) == terminal


@pytest.mark.parametrize("terminal", [True, False])
def test_arpa_read_and_write_bars_only_on_a_terminal(tmp_path, monkeypatch, terminal):
    lm = train_kneser_ney_on_sentences([["the", "cat"], ["the", "dog"]], 2, discounts=[(0.5, 1.0, 1.5)] * 2)
    stderr = Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    write_arpa(lm, tmp_path / "m.arpa")
    read_arpa(tmp_path / "m.arpa")
    err = stderr.getvalue()
    assert ("writing m.arpa" in err and "reading m.arpa" in err) == terminal
    assert terminal or err == ""
