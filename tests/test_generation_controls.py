"""GenerationConfig's controls (repetition penalty, no repeated n-grams, a minimum length, stop
strings) through generate(), batch lines and the CLI; --suppress by text or id."""

from __future__ import annotations

import json

import pytest

from decodekit import GenerationConfig, generate, load_model
from decodekit.errors import ConfigError
from tests.support.cli import run, word_checkpoint

WORDS = ["the", "company", "said", "profit", "rose", "market", "fell", "shares"]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return word_checkpoint(tmp_path_factory.mktemp("m"), WORDS)


@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_generate_honours_the_controls(ckpt, strategy):
    model = load_model(ckpt)
    prompt = model.vocab.encode("the company")
    config = GenerationConfig(
        strategy=strategy, max_length=14, no_repeat_ngram_size=2, min_new_tokens=4, seed=0
    )
    for h in generate(model, [prompt], config)[0]:
        seq = prompt + list(h.tokens)
        assert len(h.tokens) >= 4 or not h.finished
        assert len(set(zip(seq, seq[1:]))) == len(seq) - 1, seq
    stopped = generate(model, [prompt], GenerationConfig(max_length=14, stop=("rose",)))[0]
    free = generate(model, [prompt], GenerationConfig(max_length=14))[0]
    text, cut = model.vocab.decode(free[0].tokens), model.vocab.decode(stopped[0].tokens)
    assert (cut == text[: text.index("rose") + 4]) if "rose" in text else cut == text


def test_bad_controls_and_suppress_by_text_or_id(ckpt):
    for options, message in (
        (dict(repetition_penalty=-1.0), "repetition_penalty"),
        (dict(no_repeat_ngram_size=-1), "no_repeat_ngram_size"),
        (dict(stop=[""]), "stop"),
    ):
        with pytest.raises(ConfigError, match=message):
            GenerationConfig(**options)
    model = load_model(ckpt)
    said = model.vocab.index["said"]
    for token in ("said", str(said), said):
        hyps = generate(
            model, [model.vocab.encode("the company")], GenerationConfig(max_length=20, suppress=(token,))
        )
        assert said not in hyps[0][0].tokens
    with pytest.raises(ConfigError, match="neither a token"):
        generate(model, [[2]], GenerationConfig(suppress=("zebra",)))


def test_cli_options_and_batch_lines(ckpt, tmp_path):
    out = run(
        "generate",
        "the company",
        "--model",
        ckpt,
        "--stop",
        "rose",
        "--no-repeat-ngram-size",
        "2",
        "--min-new-tokens",
        "2",
        "--repetition-penalty",
        "1.3",
        "--threads",
        "1",
        "--json",
    )
    assert out.exit_code == 0, out.output
    text = json.loads(out.stdout.splitlines()[0])["text"]
    assert "rose" not in text or text.endswith("rose")
    lines = tmp_path / "in.jsonl"
    lines.write_text(
        json.dumps({"id": 1, "prompt": "the", "no_repeat_ngram_size": 1, "max_length": 12}) + "\n"
    )
    out = run("generate", "--model", ckpt, "--input", str(lines), "--output", str(tmp_path / "o.jsonl"))
    assert out.exit_code == 0, out.output
    record = json.loads((tmp_path / "o.jsonl").read_text())
    tokens = record["hypotheses"][0]["tokens"]
    assert len(tokens) == len(set(tokens)), tokens  # no unigram twice (the prompt's "the" included)


def test_beam_sampling_and_a_negative_temperature_are_one_error_each(ckpt, capfd):
    """(temperature 0 was refused here too; it now means greedy: tests/test_api_frictions.py)"""
    from decodekit.cli import main

    for args, message in (
        (["--num-beams", "4", "--do-sample"], "beam sampling"),
        (["--temperature", "-0.5"], "temperature must be a finite number > 0"),
    ):
        with pytest.raises(SystemExit) as e:
            main(["generate", "the", "--model", ckpt, *args])
        err = capfd.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and message in err[0], err


def test_stdin_inline_schema_and_a_missing_input(ckpt, tmp_path):
    import subprocess
    import sys

    line = json.dumps({"id": 1, "prompt": "the", "max_length": 3}) + "\n"
    cmd = [sys.executable, "-m", "decodekit", "generate", "--model", ckpt]
    piped = subprocess.run(
        [*cmd, "--input", "-", "--output", str(tmp_path / "p.jsonl")],
        input=line,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0, piped.stderr
    assert json.loads((tmp_path / "p.jsonl").read_text())["id"] == 1
    ignored = subprocess.run(
        [*cmd, "the", "--max-length", "2"], input="company\n", capture_output=True, text=True, timeout=120
    )
    assert ignored.returncode == 0 and "standard input is not read" in ignored.stderr
    schema = '{"type": "string", "enum": ["the company", "profit"]}'
    vocab_ckpt = word_checkpoint(tmp_path / "q", [*WORDS, '"the', 'company"', '"profit"'])
    out = run("generate", "", "--model", vocab_ckpt, "--json-schema", schema, "--strategy", "greedy")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout.strip()) in ("the company", "profit")
    missing = run("generate", "--model", ckpt, "--input", str(tmp_path / "none.jsonl"), "--output", "o")
    assert missing.exit_code == 2 and "--input" in missing.output and "no such file" in missing.output
