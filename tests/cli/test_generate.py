import json

import pytest
import regex
import torch

from tests.support.cli import run, word_checkpoint
from tests.support.fakes import save_tiny_gpt2

WORDS = ["the", "company", "said", "profit", "rose", "market", "fell", "shares"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return word_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny", WORDS)


def test_generate_greedy_prints_text(model_dir):
    r = run("generate", "the company", "--model", model_dir, "--max-length", "5")
    assert r.exit_code == 0, r.output
    assert all(w in WORDS or w == "<unk>" for w in r.output.split())


@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_generate_json_with_constraint_matches(model_dir, strategy):
    pattern = r".*\bprofit\b.*"
    r = run(
        "generate",
        "the company said",
        "--model",
        model_dir,
        "--constraint",
        pattern,
        "--strategy",
        strategy,
        "--max-length",
        "6",
        "--json",
        "--seed",
        "3",
        "--n-best",
        "2",
        "--beam-size",
        "3",
    )
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in r.stdout.strip().splitlines()]
    assert lines and all(regex.fullmatch(pattern, d["text"]) for d in lines)
    assert set(lines[0]) >= {"text", "tokens", "logprob", "score", "finished"}


@pytest.mark.parametrize(
    "args,msg",
    [
        (["--beam-size", "0"], "beam-size"),
        (["--max-length", "-1"], "max-length"),
        (["--strategy", "sample", "--temperature", "-1"], "temperature"),
        (["--strategy", "sample", "--top-p", "1.5"], "top_p"),
        (["--constraint", "(a"], "regex"),
        (["--constraint", "(?=a)b"], "unsupported"),
        (["--constraint", "zzz", "--max-length", "3"], "no token sequence"),
        (["--device", "cuda:0"] if not torch.cuda.is_available() else ["--device", "nonsense"], "device"),
        (["--device", "meta"], "--device meta"),
        (["--length-penalty", "nan"], "length-penalty"),
        (["--strategy", "beam", "--length-penalty", "-inf"], "finite"),
    ],
)
def test_bad_input_is_one_line_exit_2(model_dir, args, msg, capfd):
    from decodekit.cli import main

    with pytest.raises(SystemExit) as e:
        main(["generate", "the", "--model", model_dir, *args])
    assert e.value.code == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("Error") and msg.lower() in err.lower(), err


def test_missing_model_is_one_line_exit_2(tmp_path, capfd):
    from decodekit.cli import main

    with pytest.raises(SystemExit) as e:
        main(["generate", "the", "--model", str(tmp_path / "nope")])
    assert e.value.code == 2
    assert "not found" in capfd.readouterr().err


def test_unknown_words_warn(model_dir):
    r = run("generate", "the zebra", "--model", model_dir, "--max-length", "2")
    assert r.exit_code == 0 and "unknown" in r.output.lower()


def test_generate_with_a_local_transformers_model(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    save_tiny_gpt2(tmp_path, ["the cat sat on the mat", "the dog ran to the café"] * 5, 300)
    pattern = r" [a-z ]*\bcat\b[a-z ]*"
    r = run(
        "generate",
        "the dog",
        "--hf-model",
        str(tmp_path),
        "--constraint",
        pattern,
        "--max-length",
        "8",
        "--json",
    )
    assert r.exit_code == 0, r.output
    text = json.loads(r.stdout.strip().splitlines()[-1])["text"]
    assert regex.fullmatch(pattern, text), text
