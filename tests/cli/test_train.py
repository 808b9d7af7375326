"""``decodekit train`` and ``decodekit eval`` on a tiny corpus."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from decodekit.cli import _register, cli
from tests.support.cli import run_main

_register()


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture
def corpus(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    lines = ["the cat sat on the mat", "the dog ran", "a cat ran on a mat"] * 20
    for name, n in (("train.txt", 60), ("valid.txt", 9), ("test.txt", 6)):
        (d / name).write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
    return d


TRAIN = [
    "train",
    "--hidden",
    "8",
    "--embed",
    "8",
    "--epochs",
    "2",
    "--bptt",
    "5",
    "--batch-size",
    "4",
    "--no-progress",
]


@pytest.mark.parametrize("kind", ["lstm", "rnn", "mlp"])
def test_train_then_eval(corpus, tmp_path, kind):
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, [*TRAIN, "--data", str(corpus), "--model", kind, "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["event"] == "test" and summary["epochs"] == 2 and 1 < summary["test_ppl"] < 20
    result = CliRunner().invoke(
        cli, ["eval", "--model", str(out), "--data", str(corpus / "test.txt"), "--json"]
    )
    assert result.exit_code == 0, result.output
    ev = json.loads(result.output)
    assert ev["perplexity"] == pytest.approx(summary["test_ppl"], rel=1e-9)
    assert ev["tokens"] == 6 * 1 + sum(len(x.split()) for x in (corpus / "test.txt").read_text().splitlines())
    result = CliRunner().invoke(
        cli, ["eval", "--model", str(out), "--data", str(corpus)]
    )  # a directory: its test file
    assert result.exit_code == 0 and result.output.startswith("perplexity ")


def test_resume_continues_and_refuses_overwrite(corpus, tmp_path, capsys):
    out = str(tmp_path / "out")
    code, _, _ = run_main([*TRAIN, "--data", str(corpus), "--out", out], capsys)
    assert code == 0
    code, _, err = run_main([*TRAIN, "--data", str(corpus), "--out", out], capsys)
    assert code == 2 and "already holds a training run (" in err and "pass --resume" in err
    code, stdout, _ = run_main(
        [*TRAIN[:5], "--epochs", "3", *TRAIN[7:], "--data", str(corpus), "--out", out, "--resume"], capsys
    )
    assert code == 0 and json.loads(stdout)["epochs"] == 3


def test_bad_input_is_one_line_exit_2(corpus, tmp_path, capsys):
    (corpus / "valid.txt").write_bytes(b"ok\n\xc3\x28 bad\n")
    code, _, err = run_main([*TRAIN, "--data", str(corpus), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "valid.txt: line 2: invalid UTF-8" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_main(["eval", "--model", str(tmp_path), "--data", str(corpus / "test.txt")], capsys)
    assert code == 2 and "config.json is missing" in err
    (corpus / "valid.txt").write_text("the cat\n")
    code, _, err = run_main(
        [*TRAIN, "--data", str(corpus), "--tie", "--embed", "4", "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2 and "embed == hidden" in err
    code, _, err = run_main(
        [*TRAIN, "--data", str(corpus), "--context", "3", "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2 and "--context applies to --model mlp only" in err
    code, _, err = run_main(
        [*TRAIN, "--data", str(corpus), "--threshold", "1.5", "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2 and "threshold must be in [0, 1)" in err and len(err.strip().splitlines()) == 1


def test_eval_without_model_uses_the_shipped_model(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the company said it expects profit to rise\nshares fell N N\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["eval", "--data", str(text), "--json"])
    assert result.exit_code == 0, result.output
    ev = json.loads(result.output)
    assert ev["model"] == "default" and ev["tokens"] == 14 and 1 < ev["perplexity"] < 10_000


@pytest.mark.parametrize(
    "model, option, message",
    [
        ("mlp", ["--layers", "3"], "--layers applies to --model lstm/rnn"),
        ("mlp", ["--tie"], "--tie applies to --model lstm/rnn"),
        ("lstm", ["--no-direct"], "--direct applies to --model mlp only"),
    ],
)
def test_options_the_model_does_not_have_are_refused(tmp_path, capsys, model, option, message):
    """As transformers warns about unused generation options, train refuses settings the chosen
    model has no use for (they would be silently ignored)."""
    corpus = tmp_path / "c"
    corpus.mkdir()
    for split in ("train", "valid", "test"):
        (corpus / f"{split}.txt").write_text("the cat sat\n")
    code, _, err = run_main(
        ["train", "--data", str(corpus), "--model", model, *option, "--out", str(tmp_path / "o")], capsys
    )
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_the_options_are_the_configs_fields():
    """Every field of every model config (but those train cannot use) and of TrainConfig is an
    option, of the field's type; the model choices are the registry's kinds."""
    import dataclasses

    import click

    from decodekit.cli.train import train_command
    from decodekit.cli.train_options import NEGATED, NOT_OPTIONS, SPELLED
    from decodekit.models import CONFIGS, MODELS
    from decodekit.training import TrainConfig

    params = {p.name: p for p in train_command.params}
    assert list(params["kind"].type.choices) == list(CONFIGS) and set(CONFIGS) == set(MODELS)
    for cls in [*CONFIGS.values(), TrainConfig]:
        for f in dataclasses.fields(cls):
            if f.name in NOT_OPTIONS:
                continue
            name = NEGATED.get(f.name) or SPELLED.get(f.name, (f.name,))[0]
            assert name in params, f"{cls.__name__}.{f.name}"
            if "choices" in f.metadata:
                assert list(params[name].type.choices) == list(f.metadata["choices"])
            elif isinstance(f.default, int | float) and not isinstance(f.default, bool):
                assert isinstance(params[name].type, click.types.IntParamType | click.types.FloatParamType)
    assert params["epochs"].default == TrainConfig.epochs and params["lr"].default == TrainConfig.lr


def test_train_defaults_threads_like_the_other_commands(corpus, tmp_path, monkeypatch):
    """Issue 36 item 10: a tiny LSTM trained with torch's thread default burned 164 s of CPU at
    load 36; like eval / score / generate, train now takes one thread for a small model."""
    import torch

    torch.set_num_threads(2)  # what torch would choose here (restored by the one_thread fixture)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, [*TRAIN, "--epochs", "1", "--data", str(corpus), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert torch.get_num_threads() == 1
