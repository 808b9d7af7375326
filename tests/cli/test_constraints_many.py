"""``decodekit generate`` with several constraints: ``--constraint`` repeated (all must match),
``--exclude`` (must match nowhere), from the command line and from JSON lines."""

import json

import pytest
import regex

from tests.support.cli import run, word_checkpoint

WORDS = ["the", "dog", "park", "ball", "in", "a", "with", "ran", "played"]
THREE = [r".*\bdog\b.*", r".*\bpark\b.*", r".*\bball\b.*"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return word_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny", WORDS)


def texts(result):
    assert result.exit_code == 0, result.output
    return [json.loads(x)["text"] for x in result.stdout.strip().splitlines()]


@pytest.mark.parametrize("strategy", [None, "greedy", "sample", "beam"])
def test_three_words_in_any_order(model_dir, strategy):
    """Anderson et al.'s captions: every output holds the three words (the default strategy
    with constraints is Anderson-style search)."""
    args = [x for p in THREE for x in ("--constraint", p)]
    if strategy is not None:
        args += ["--strategy", strategy]
    out = texts(run("generate", "the", "--model", model_dir, *args, "--max-length", "8", "--json",
                    "--seed", "1", "--n-best", "2", "--beam-size", "2"))  # fmt: skip
    assert out
    for text in out:
        assert all(regex.fullmatch(p, text) for p in THREE), text


def test_exclude(model_dir):
    args = ["--constraint", r".*\bdog\b.*", "--exclude", "park", "--exclude", r"\bthe\b"]
    out = texts(
        run("generate", "a", "--model", model_dir, *args, "--max-length", "6", "--json", "--n-best", "3")
    )
    assert out
    for text in out:
        assert "dog" in text.split() and "park" not in text and "the" not in text.split(), text
    only = texts(
        run("generate", "a", "--model", model_dir, "--exclude", "dog", "--max-length", "4", "--json")
    )
    assert only and all("dog" not in t for t in only)


def test_json_lines_may_give_a_list(model_dir, tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        {"id": "a", "prompt": "the", "constraint": THREE, "max_length": 8},
        {"id": "b", "prompt": "a", "constraint": r".*\bball\b.*", "exclude": ["dog"], "max_length": 6},
    ]
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = run("generate", "--model", model_dir, "--input", str(src), "--output", str(dst))
    assert r.exit_code == 0, r.output
    records = {d["id"]: d for d in map(json.loads, dst.read_text().splitlines())}
    for h in records["a"]["hypotheses"]:
        assert all(regex.fullmatch(p, h["text"]) for p in THREE), h
    assert records["b"]["hypotheses"]
    for h in records["b"]["hypotheses"]:
        assert "ball" in h["text"].split() and "dog" not in h["text"], h


@pytest.mark.parametrize(
    "args,msg",
    [
        (["--constraint", ".*dog.*", "--constraint", "park"], "no text matches all of"),
        (["--constraint", "ball", "--exclude", "^b"], "anchors"),
        (["--constraint", "(a", "--constraint", "b"], "regex"),
    ],
)
def test_bad_combinations_are_one_line_exit_2(model_dir, args, msg, capfd):
    from decodekit.cli import main

    with pytest.raises(SystemExit) as e:
        main(["generate", "the", "--model", model_dir, *args])
    assert e.value.code == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and msg in err, err
