"""``decodekit ngram`` trains Kneser-Ney on a corpus and writes ARPA; ``eval`` agrees with it."""

import json
import warnings

import pytest
from click.testing import CliRunner

from decodekit.cli import _register, cli

_register()


@pytest.fixture
def corpus(tmp_path):
    d = tmp_path / "toy"
    d.mkdir()
    lines = ["the cat sat on the mat", "the dog sat on the log", "a cat saw a dog", "the cat ran"] * 3
    (d / "train.txt").write_text("\n".join(lines) + "\n")
    (d / "valid.txt").write_text("the dog ran\na cat sat\n")
    (d / "test.txt").write_text("the cat sat on the log\n")
    return d


def test_ngram_then_eval_and_generate(corpus, tmp_path):
    out = tmp_path / "kn3.arpa"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny corpus: fallback discounts
        r = CliRunner().invoke(
            cli, ["ngram", "--data", str(corpus), "--order", "3", "--out", str(out), "--json"]
        )
    assert r.exit_code == 0, r.output
    trained = json.loads(r.output.strip().splitlines()[-1])
    assert trained["order"] == 3 and len(trained["ngrams"]) == 3 and out.read_text().startswith("\\data\\")
    r = CliRunner().invoke(cli, ["eval", "--model", str(out), "--data", str(corpus), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output.strip().splitlines()[-1])["perplexity"] == pytest.approx(
        trained["test_ppl"], rel=1e-5
    )
    r = CliRunner().invoke(cli, ["generate", "--model", str(out), "the cat", "--max-length", "5"])
    assert r.exit_code == 0, r.output


def test_ngram_bad_order(corpus, tmp_path):
    r = CliRunner().invoke(
        cli, ["ngram", "--data", str(corpus), "--order", "0", "--out", str(tmp_path / "x")]
    )
    assert r.exit_code == 2 and "--order must be >= 1" in r.output
