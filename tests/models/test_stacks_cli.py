"""``decodekit train --model stack-lstm``: the stack options reach the model, bad combinations fail."""

from __future__ import annotations

import json

import pytest

from decodekit.cli import main


def run(argv, capsys) -> tuple[int, str]:
    """Run ``decodekit`` as the script does; returns (exit code, stderr + stdout): the progress
    lines (stderr) come before the JSON summary (stdout), as a terminal shows them."""
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = e.code or 0
    captured = capsys.readouterr()
    return code, captured.err + captured.out


@pytest.fixture()
def corpus(tmp_path):
    words = ["a", "b", "c", "d"]
    for name, lines in (("train", 40), ("valid", 5), ("test", 5)):
        text = "\n".join(" ".join(words[(i * 7 + j) % 4] for j in range(6)) for i in range(lines))
        (tmp_path / f"{name}.txt").write_text(text + "\n")
    return tmp_path


def test_train_stack_lstm_end_to_end(corpus, tmp_path, capsys):
    out = tmp_path / "ckpt"
    args = ["train", "--data", str(corpus), "--out", str(out), "--model", "stack-lstm", "--stack", "rns"]
    args += ["--window", "4", "--stack-states", "2", "--stack-symbols", "2", "--hidden", "6", "--embed", "5"]
    args += ["--epochs", "1", "--bptt", "6", "--batch-size", "2", "--threads", "1", "--no-progress"]
    code, output = run(args, capsys)
    assert code == 0, output
    summary = json.loads(output.strip().splitlines()[-1])
    assert summary["event"] == "test" and summary["test_ppl"] > 1
    config = json.loads((out / "config.json").read_text())
    assert "stack-lstm" in json.dumps(config) and "rns" in json.dumps(config)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "stack-lstm", "--stack", "ns"], "--window"),
        (["--model", "stack-lstm", "--stack", "stratification"], "--stack-depth"),
        (["--model", "stack-lstm", "--stack", "rns", "--window", "0"], "window"),
        (["--model", "stack-lstm", "--stack", "rns", "--window", "3", "--stack-states", "0"], "stack_states"),
        (["--model", "lstm", "--window", "3"], "stack-lstm only"),
        (["--model", "stack-lstm", "--window", "3", "--layers", "2"], "--layers"),
    ],
)
def test_train_stack_options_errors(corpus, tmp_path, extra, message, capsys):
    code, output = run(["train", "--data", str(corpus), "--out", str(tmp_path / "x"), *extra], capsys)
    assert code == 2, output
    assert message in output
