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


def test_logprobs_in_the_openai_layout(model_dir):
    r = run(
        "generate", "the company", "--model", model_dir, "--max-length", "4", "--json",
        "--strategy", "beam", "--logprobs", "3", "--prompt-logprobs", "2",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    line = json.loads(r.stdout)
    content = line["logprobs"]["content"]
    assert [c["token"] for c in content] == line["token_texts"]
    assert [c["logprob"] for c in content] == line["token_logprobs"]
    for c in content:
        assert set(c) == {"token", "token_id", "logprob", "bytes", "top_logprobs"}
        top = c["top_logprobs"]
        assert len(top) == 3 and [t["logprob"] for t in top] == sorted(
            (t["logprob"] for t in top), reverse=True
        )
        assert c["logprob"] <= top[0]["logprob"] + 1e-5 and set(top[0]) == {
            "token",
            "token_id",
            "logprob",
            "bytes",
        }
        assert all(t["bytes"] == list(t["token"].encode()) for t in top if t["bytes"] is not None)
    prompt = line["prompt_logprobs"]  # the model has a BOS: every prompt token has an entry
    assert [p["token"] for p in prompt] == ["the", "company"] and all(
        len(p["top_logprobs"]) == 2 for p in prompt
    )
    plain = json.loads(
        run("generate", "the company", "--model", model_dir, "--max-length", "4", "--json").stdout
    )
    assert "logprobs" not in plain and "prompt_logprobs" not in plain


def test_json_lines_fields(model_dir, tmp_path):
    lines = [
        {"id": 1, "prompt": "the", "logprobs": 2, "logit_bias": {"profit": 100}, "min_new_tokens": 3},
        {
            "id": 2,
            "prompt": "the",
            "strategy": "sample",
            "typical_p": 0.5,
            "bad_words": ["profit"],
            "seed": 1,
        },
        {"id": 3, "prompt": "the", "presence_penalty": 9},
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "out.jsonl"
    r = run(
        "generate", "--model", model_dir, "--input", str(source), "--output", str(out), "--max-length", "3"
    )
    records = {x["id"]: x for x in map(json.loads, out.read_text().splitlines())}
    best = records[1]["hypotheses"][0]
    assert best["text"] == "profit profit profit" and len(best["logprobs"]["content"][0]["top_logprobs"]) == 2
    assert "profit" not in records[2]["hypotheses"][0]["text"].split()
    assert "presence_penalty" in records[3]["error"], r.output
