"""``decodekit generate --assistant-model SPEC / --prompt-lookup N`` and the JSON-lines fields:
the same greedy output as without them (decoding/speculative.py; exactness: tests/decoding)."""

import json
import warnings

import pytest
from click.testing import CliRunner

from decodekit.cli import _register, cli

_register()


@pytest.fixture(scope="module")
def arpas(tmp_path_factory):
    d = tmp_path_factory.mktemp("toy")
    lines = ["the cat sat on the mat", "the dog sat on the log", "a cat saw a dog", "the cat ran"] * 3
    (d / "train.txt").write_text("\n".join(lines) + "\n")
    (d / "valid.txt").write_text("the dog ran\na cat sat\n")
    (d / "test.txt").write_text("the cat sat on the log\n")
    out = {}
    for order in (3, 1):
        out[order] = d / f"kn{order}.arpa"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tiny corpus: fallback discounts
            r = CliRunner().invoke(
                cli, ["ngram", "--data", str(d), "--order", str(order), "--out", str(out[order])]
            )
        assert r.exit_code == 0, r.output
    return out


def generate(*args):
    r = CliRunner().invoke(cli, ["generate", *map(str, args), "--max-length", "8", "--json"])
    return r.exit_code, r.output


@pytest.mark.parametrize(
    "extra",
    [
        ("--assistant-model", "ARPA1"),
        ("--assistant-model", "ARPA1", "--num-assistant-tokens", "3"),
        ("--prompt-lookup", "2"),
    ],
)
def test_speculative_options_give_the_plain_greedy_output(arpas, extra):
    extra = [str(arpas[1]) if x == "ARPA1" else x for x in extra]
    code, plain = generate("--model", arpas[3], "the cat sat")
    assert code == 0, plain
    code, out = generate("--model", arpas[3], "the cat sat", *extra)
    assert code == 0, out
    assert json.loads(out)["tokens"] == json.loads(plain)["tokens"] and json.loads(out)["text"]


def test_json_lines_take_prompt_lookup_num_tokens(arpas, tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text(
        json.dumps({"id": 1, "prompt": "the dog sat on the", "prompt_lookup_num_tokens": 3}) + "\n"
    )
    r = CliRunner().invoke(
        cli, ["generate", "--model", str(arpas[3]), "--input", str(inp), "--max-length", "6"]
    )
    assert r.exit_code == 0, r.output
    record = json.loads(next(line for line in r.output.splitlines() if line.startswith("{")))
    code, plain = generate("--model", arpas[3], "the dog sat on the")
    assert record["hypotheses"][0]["tokens"] == json.loads(plain)["tokens"][:6]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--assistant-model", "ARPA1", "--prompt-lookup", "2"), "not both"),
        (("--prompt-lookup", "2", "--strategy", "beam"), "runs greedy or sample"),
        (("--prompt-lookup", "0"), "--prompt-lookup"),
    ],
)
def test_bad_speculative_options_are_one_line_errors(arpas, extra, message, capsys):
    from decodekit.cli import main

    extra = [str(arpas[1]) if x == "ARPA1" else x for x in extra]
    with pytest.raises(SystemExit) as e:
        main(["generate", "the cat", "--model", str(arpas[3]), *extra])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and message in err and "\n" not in err, err
