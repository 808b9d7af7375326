"""``--grammar`` in the CLI and ``"grammar"`` in JSON lines: outputs are sentences of the grammar
(lark is the judge), a bad grammar is one line before any model loads, and ``constraint --grammar``
draws the rules."""

from __future__ import annotations

import json

import pytest
import torch

from decodekit.checkpoint import save_checkpoint
from decodekit.models.lstm import LSTMLM, LSTMConfig
from decodekit.vocab import CharVocab
from tests.support.cli import exit_and_stderr, run

lark = pytest.importorskip("lark", reason="lark is the grammars' reader and this test's judge")

LIST = 'start: "[" [item ("," item)*] "]"\nitem: /[ab]+/ | start\n'


def _member(text: str) -> bool:
    try:
        lark.Lark(LIST, parser="earley", lexer="dynamic_complete").parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


@pytest.fixture(scope="module")
def char_model(tmp_path_factory):
    torch.manual_seed(0)
    vocab = CharVocab(["<unk>", "<eos>", *"[],ab"])
    model = LSTMLM(LSTMConfig(embed=8, hidden=8, layers=1), vocab)
    path = tmp_path_factory.mktemp("ckpt") / "chars"
    save_checkpoint(model.eval(), path)
    return str(path)


@pytest.fixture
def grammar_file(tmp_path):
    path = tmp_path / "list.lark"
    path.write_text(LIST)
    return str(path)


@pytest.mark.parametrize("strategy", [[], ["--strategy", "sample", "--seed", "3", "--num-samples", "3"]])
def test_generate_with_a_grammar_gives_sentences(char_model, grammar_file, strategy):
    r = run(
        "generate",
        "[",
        "--model",
        char_model,
        "--grammar",
        grammar_file,
        "--max-new-tokens",
        "9",
        "--json",
        *strategy,
    )
    assert r.exit_code == 0, r.output
    hyps = [json.loads(line) for line in r.output.strip().splitlines()]
    assert hyps
    for h in hyps:
        assert _member(h["text"]), h


def test_grammar_with_constraint_and_exclude_gives_sentences_that_match(char_model, grammar_file):
    """--grammar with --constraint and --exclude: sentences of the grammar that match the regex
    and contain no match of the excluded one (Grammar & Pattern)."""
    import regex

    r = run(
        "generate",
        "[",
        "--model",
        char_model,
        "--grammar",
        grammar_file,
        "--constraint",
        r".*b.*",
        "--exclude",
        "aa",
        "--max-new-tokens",
        "9",
        "--strategy",
        "sample",
        "--seed",
        "1",
        "--num-samples",
        "4",
        "--json",
    )
    assert r.exit_code == 0, r.output
    hyps = [json.loads(line) for line in r.output.strip().splitlines()]
    assert hyps
    for h in hyps:
        assert _member(h["text"]) and regex.fullmatch(".*b.*", h["text"]) and "aa" not in h["text"], h


def test_a_bad_grammar_is_one_line_before_the_model_loads(tmp_path, capfd, monkeypatch):
    bad = tmp_path / "bad.lark"
    bad.write_text('start: "[" itm "]"\nitem: /a/\n')
    import decodekit.cli.common as common

    monkeypatch.setattr(common, "load_model_option", lambda *a, **k: pytest.fail("the model was loaded"))
    code, err = exit_and_stderr(capfd, "generate", "x", "--grammar", str(bad))
    assert code == 2 and len(err) == 1 and "bad.lark:1:" in err[0] and "itm" in err[0], err


def test_json_lines_take_a_grammar(char_model, tmp_path):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [{"id": i, "prompt": "[", "grammar": LIST, "max_length": 7} for i in range(3)]
    lines.append({"id": 9, "prompt": "[", "grammar": "start: itm"})
    lines.append({"id": 5, "prompt": "[", "grammar": LIST, "constraint": ".*b.*", "max_length": 9})
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = run("generate", "--model", char_model, "--input", str(src), "--output", str(out))
    assert r.exit_code == 1, r.output  # a line failed: its error record says why
    records = {x["id"]: x for x in map(json.loads, out.read_text().splitlines())}
    for i in range(3):
        assert records[i]["hypotheses"] and all(_member(h["text"]) for h in records[i]["hypotheses"])
        assert records[i]["prompt"] == "["  # the record echoes its prompt (issue 36 item 10)
    assert "itm" in records[9]["error"]
    both = records[5]["hypotheses"]  # grammar and constraint: their intersection
    assert both and all(_member(h["text"]) and "b" in h["text"] for h in both)


def test_constraint_draws_a_grammar(char_model, grammar_file):
    r = run("constraint", "--grammar", grammar_file, "--model", char_model)
    assert r.exit_code == 0, r.output
    assert "start ::=" in r.output and "shortest sentence" in r.output
    r = run("constraint", "--grammar", grammar_file, "--model", char_model, "--json")
    info = json.loads(r.output)
    assert info["shortest"] == 2 and info["syntax"] == "lark"


def test_constraint_takes_a_json_schema_inline(tmp_path):
    """``decodekit constraint --json-schema`` (issue 36 item 9): inline JSON, like generate's."""
    torch.manual_seed(0)
    model = LSTMLM(LSTMConfig(embed=8, hidden=8, layers=1), CharVocab(["<unk>", "<eos>", *"0123456789-"]))
    save_checkpoint(model.eval(), tmp_path / "digits")
    r = run(
        "constraint",
        "--json-schema",
        '{"type": "integer", "maximum": 99}',
        "--model",
        str(tmp_path / "digits"),
    )
    assert r.exit_code == 0, r.output
    assert "shortest match     1 token(s)" in r.output


def test_a_bad_regex_is_one_line_before_the_model_loads(capfd, monkeypatch):
    """Issue 36 item 6: ``--constraint 'a(b'`` was reported after the model loaded (11 s of CPU)."""
    import decodekit.cli.common as common
    import decodekit.cli.generate as generate_cli

    monkeypatch.setattr(common, "load_model_option", lambda *a, **k: pytest.fail("the model was loaded"))
    monkeypatch.setattr(
        generate_cli, "load_model_option", lambda *a, **k: pytest.fail("the model was loaded")
    )
    code, err = exit_and_stderr(capfd, "generate", "x", "--constraint", "a(b")
    assert code == 2 and err[-1].startswith("Error: invalid regex 'a(b'"), err


def test_input_without_output_writes_json_lines_to_stdout(char_model, tmp_path, capfd):
    """Issue 36 item 10: ``--input -`` required ``--output``; JSON lines now go to standard output
    (as `llm` and jq pipelines expect), and only ``--resume`` asks for a file."""
    import subprocess
    import sys

    lines = "".join(json.dumps({"id": i, "prompt": "[", "max_length": 4}) + "\n" for i in range(3))
    cmd = [sys.executable, "-m", "decodekit", "generate", "--model", char_model, "--input", "-"]
    done = subprocess.run(cmd, input=lines, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    records = [json.loads(x) for x in done.stdout.splitlines()]
    assert [r["id"] for r in records] == [0, 1, 2] and all(r["prompt"] == "[" for r in records)
    refused = subprocess.run([*cmd, "--resume"], input=lines, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and "--resume needs --output" in refused.stderr


def test_ctrl_c_during_a_beam_search_prints_the_best_so_far(monkeypatch, capsys):
    """Issue 36 item 10: Ctrl-C during a beam search returned nothing; now the search ends after
    its step, the best hypotheses so far are printed, and the status is 130."""
    import os
    import signal

    import decodekit.cli.generate as generate_cli
    from decodekit.cli import main
    from tests.support.fakes import HistoryLM, word_vocab

    vocab = word_vocab(["the", "cat", "sat", "on", "mat"])

    class Interrupted(HistoryLM):  # the user presses Ctrl-C during the fourth step
        def step(self, state, tokens):
            if self.calls == 3:
                os.kill(os.getpid(), signal.SIGINT)
            return super().step(state, tokens)

    model = Interrupted(len(vocab), seed=1, bos_id=1, eos_id=None, vocab=vocab)
    monkeypatch.setattr(generate_cli, "load_model_option", lambda *a, **k: model)
    with pytest.raises(SystemExit) as e:
        main(
            ["generate", "the cat", "--strategy", "beam", "--beam-size", "3", "--max-length", "50", "--json"]
        )
    out, err = capsys.readouterr()
    assert e.value.code == 130 and "best found so far" in err
    hyps = [json.loads(line) for line in out.splitlines()]
    assert hyps and all(len(h["tokens"]) <= 5 and not h["finished"] for h in hyps)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
