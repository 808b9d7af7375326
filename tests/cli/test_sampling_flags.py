"""The flags of issue 39 (samplers, controls, --logprobs) on `decodekit generate`: they reach
the library, and a bad value is one line, exit 2."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import run, word_checkpoint

WORDS = ["the", "company", "said", "profit", "rose", "market", "fell", "shares"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return word_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny", WORDS)


def test_the_flags_reach_the_search(model_dir):
    base = ["generate", "the company", "--model", model_dir, "--max-length", "6", "--json"]
    biased = run(*base, "--logit-bias", "profit=100", "--min-new-tokens", "6")
    assert biased.exit_code == 0, biased.output
    assert json.loads(biased.stdout)["text"] == "profit profit profit profit profit profit"
    banned = run(*base, "--logit-bias", "profit=100", "--bad-words", "profit profit", "--min-new-tokens", "6")
    words = json.loads(banned.stdout)["text"].split()
    assert all(a != b for a, b in zip(words, words[1:]) if a == "profit"), words
    sampled = run(*base, "--strategy", "sample", "--seed", "1", "--typical-p", "0.5", "--eta-cutoff", "0.1")
    assert sampled.exit_code == 0, sampled.output
    penalised = run(*base, "--presence-penalty", "2", "--frequency-penalty", "2")
    assert penalised.exit_code == 0, penalised.output


@pytest.mark.parametrize(
    "args,msg",
    [
        (["--strategy", "sample", "--typical-p", "1.5"], "typical_p"),
        (["--strategy", "sample", "--epsilon-cutoff", "1"], "epsilon_cutoff"),
        (["--presence-penalty", "3"], "presence-penalty"),
        (["--logit-bias", "profit"], "TOKEN=BIAS"),
        (["--logit-bias", "profit=x"], "TOKEN=BIAS"),
        (["--logit-bias", "profit=500"], "logit_bias"),
        (["--logit-bias", "the company=1"], "cannot bias 'the company'"),
        (["--bad-words", "zebra"], "bad word 'zebra'"),
    ],
)
def test_bad_values_are_one_line_exit_2(model_dir, args, msg, capfd):
    from decodekit.cli import main

    with pytest.raises(SystemExit) as e:
        main(["generate", "the", "--model", model_dir, *args])
    assert e.value.code == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("Error") and msg.lower() in err.lower(), err
