"""``decodekit score``: per-line log-probabilities and perplexities, as KenLM's ``query``, equal to
stepping the model by hand from a sentence boundary."""

from __future__ import annotations

import json
import math

import pytest
import torch

from decodekit import load_model
from tests.support.cli import run, word_checkpoint

WORDS = ["the", "company", "said", "profit", "rose"]


def by_hand(model, words) -> float:
    """log p(words, <eos> | <eos>) by stepping the model one token at a time."""
    ids = [model.vocab.index.get(w, model.vocab.unk_id) for w in words] + [model.eos_id]
    state, previous, total = model.initial_state(1), model.eos_id, 0.0
    with torch.no_grad():
        for i in ids:
            logprobs, state = model.step(state, torch.tensor([previous]))
            total, previous = total + float(logprobs[0, i]), i
    return total


def test_each_line_is_scored_from_a_sentence_boundary(tmp_path):
    ckpt = word_checkpoint(tmp_path / "m", WORDS)
    model = load_model(ckpt)
    lines = ["the company said profit rose", "profit rose", "", "the zebra said"]
    (tmp_path / "s.txt").write_text("\ufeff" + "\n".join(lines) + "\n", encoding="utf-8")  # a BOM too
    out = run("score", str(tmp_path / "s.txt"), "--model", ckpt, "--json")
    assert out.exit_code == 0, out.output
    records = [json.loads(x) for x in out.stdout.splitlines()]
    assert [r["text"] for r in records[:-1]] == lines
    for r, text in zip(records, lines):
        words = text.split()
        assert r["tokens"] == len(words) + 1 and r["unknown"] == ("zebra" in words)
        assert math.isclose(r["logprob"], by_hand(model, words), abs_tol=1e-4)
        assert math.isclose(r["perplexity"], math.exp(-r["logprob"] / r["tokens"]))
        assert math.isclose(r["log10prob"], r["logprob"] / math.log(10))
    total = records[-1]["total"]
    assert total["tokens"] == sum(r["tokens"] for r in records[:-1]) and total["unknown"] == 1
    assert math.isclose(total["logprob"], sum(r["logprob"] for r in records[:-1]), abs_tol=1e-6)
    plain = run("score", "-", "--model", ckpt, input="profit rose\n")
    first = plain.stdout.splitlines()[0].split("\t")
    assert first[2:] == ["3", "0", "profit rose"]
    assert math.isclose(float(first[0]), records[1]["log10prob"], abs_tol=1e-3)
    assert "Total: log10" in plain.stderr


def test_a_missing_or_binary_file_is_one_line(tmp_path, capfd):
    from decodekit.cli import main

    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00bad")
    for name, message in (("none.txt", "none.txt: no such file"), ("bin.txt", "bin.txt: not UTF-8 text")):
        with pytest.raises(SystemExit) as e:
            main(["score", str(tmp_path / name)])
        err = capfd.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and message in err[0]


def test_small_models_run_on_one_thread_by_default(tmp_path):
    """eval, score (and generate) default to one torch thread for models under 20M parameters:
    the bundled PTB LSTM evaluated faster on 1 thread than on 2 (6.0 s vs 9.7 s, 2 loaded cores)."""
    from decodekit.cli.common import set_threads

    model = load_model(word_checkpoint(tmp_path / "m", WORDS))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        set_threads(None, model)
        assert torch.get_num_threads() == 1
        set_threads(2, model)
        assert torch.get_num_threads() == 2

        class Big:  # a wrapped net over the threshold keeps torch's choice
            model = torch.nn.Linear(5000, 5000)

        set_threads(None, Big())
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
