"""decodekit generate with the searches of issue 39: diverse-beam, stochastic-beam and mbr, their
flags and JSON fields; the CLI is the library's call (same hypotheses)."""

from __future__ import annotations

import json

import pytest
import regex

from decodekit import GenerationConfig, generate, load_model
from tests.support.cli import run, word_checkpoint

WORDS = ["the", "company", "said", "profit", "rose", "market", "fell", "shares"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return word_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny", WORDS)


def lines(result):
    assert result.exit_code == 0, result.output
    return [json.loads(x) for x in result.stdout.strip().splitlines()]


@pytest.mark.parametrize(
    "flags, options",
    [
        (["--strategy", "diverse-beam", "--beam-size", "4", "--num-beam-groups", "2",
          "--diversity-penalty", "1.5", "--n-best", "4"],
         dict(strategy="diverse-beam", beam_size=4, num_beam_groups=2, diversity_penalty=1.5, n_best=4)),
        (["--strategy", "stochastic-beam", "--beam-size", "3", "--seed", "4", "--temperature", "0.8"],
         dict(strategy="stochastic-beam", beam_size=3, seed=4, temperature=0.8)),
        (["--strategy", "mbr", "--num-samples", "6", "--seed", "2", "--mbr-utility", "exact",
          "--n-best", "2"],
         dict(strategy="mbr", num_samples=6, seed=2, mbr_utility="exact", n_best=2)),
    ],
)  # fmt: skip
def test_flags_give_the_library_s_hypotheses(model_dir, flags, options):
    got = lines(run("generate", "the company", "--model", model_dir, "--max-length", "4", "--json", *flags))
    model = load_model(model_dir)
    config = GenerationConfig(max_length=4, allow_unk=False, **options)
    want = generate(model, [model.vocab.encode("the company")], config)[0]
    assert [d["tokens"] for d in got] == [list(h.tokens) for h in want]
    if options["strategy"] == "stochastic-beam":
        assert all(0 < d["inclusion_probability"] <= 1 and "sample_logprob" in d for d in got)
    else:
        assert all("inclusion_probability" not in d for d in got)


def test_constrained_stochastic_and_diverse_outputs_match(model_dir):
    pattern = r".*\bprofit\b.*"
    for flags in (["--strategy", "stochastic-beam", "--beam-size", "3", "--seed", "1"],
                  ["--strategy", "diverse-beam", "--beam-size", "4", "--num-beam-groups", "4",
                   "--diversity-penalty", "2", "--n-best", "4"]):  # fmt: skip
        got = lines(run("generate", "the", "--model", model_dir, "--max-length", "5", "--json",
                        "--constraint", pattern, *flags))  # fmt: skip
        assert got and all(regex.fullmatch(pattern, d["text"]) for d in got)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--strategy", "diverse-beam", "--beam-size", "5", "--num-beam-groups", "2"], "multiple"),
        (["--strategy", "diverse-beam", "--diversity-penalty", "-1"], "diversity-penalty"),
        (["--strategy", "mbr", "--mbr-utility", "bleu"], "mbr-utility"),
    ],
)
def test_bad_flags_are_one_line_exit_2(model_dir, args, message, capfd):
    from decodekit.cli import main

    with pytest.raises(SystemExit) as e:
        main(["generate", "the", "--model", model_dir, *args])
    assert e.value.code == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("Error") and message in err, err


def test_jsonl_records_take_the_new_options(model_dir, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"id": "a", "prompt": "the", "strategy": "stochastic-beam", "beam_size": 2,
                                "seed": 3}) + "\n")  # fmt: skip
    out = tmp_path / "out.jsonl"
    r = run("generate", "--model", model_dir, "--input", str(path), "--output", str(out), "--max-length", "3")
    assert r.exit_code == 0, r.output
    record = json.loads(out.read_text().splitlines()[0])
    assert "inclusion_probability" in json.dumps(record)
