"""The benchmark scripts print docs/benchmarks.md's tables themselves (``--markdown``): the shared
table writer, and each script's table on a tiny run (no ../shared, no peers)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.support.scripts import load_benchmark


def markdown_lines(text: str) -> list[list[str]]:
    """The cells of each ``| ... |`` line of ``text`` (escaped pipes kept inside their cell)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|"):
            cells = line.strip().strip("|").replace("\\|", "\0").split("|")
            rows.append([c.strip().replace("\0", "|") for c in cells])
    return rows


def test_markdown_table_has_a_header_a_rule_and_one_line_per_row():
    tables = load_benchmark("markdown_tables")
    text = tables.markdown_table(("pattern", "ratio"), [("a|b", "**0.5**"), ("c", 2)])
    assert text.splitlines()[1] == "|---|---|"
    assert markdown_lines(text) == [["pattern", "ratio"], ["---", "---"], ["a|b", "**0.5**"], ["c", "2"]]
    with pytest.raises(ValueError, match="2 cells"):
        tables.markdown_table(("a", "b"), [("only one",)])


def test_bundled_models_table_markdown(tmp_path, capsys):
    run = tmp_path / "lstm-small"
    run.mkdir()
    epochs = [
        {"epoch": i, "valid_ppl": p, "train_tokens_per_s": 1e3, "train_seconds": 1800, "valid_seconds": 0}
        for i, p in enumerate((150.0, 120.5), 1)
    ]
    lines = [*epochs, {"event": "test", "test_ppl": 114.28}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    load_benchmark("bundled_models").main(["table", str(run), "--markdown"])
    rows = markdown_lines(capsys.readouterr().out)
    assert rows[0] == ["run", "epochs", "best valid", "test", "train tok/s", "hours"]
    assert rows[2] == ["lstm-small", "2", "120.50", "114.28", "1000", "1.00"]


@pytest.mark.filterwarnings("ignore:order 2")
def test_bench_ngram_markdown(tmp_path, monkeypatch, capsys):
    ptb = tmp_path / "ptb"
    ptb.mkdir()
    text = "the cat sat on the mat\nthe dog sat on the cat\na cat and a dog\nthe mat and the dog\n" * 3
    for split in ("train", "valid", "test"):
        (ptb / f"ptb.{split}.txt").write_text(text)
    argv = ["bench_ngram.py", "--data", str(tmp_path), "--orders", "2", "--markdown"]
    monkeypatch.setattr(sys, "argv", argv)
    load_benchmark("bench_ngram").main()
    rows = markdown_lines(capsys.readouterr().out)
    assert rows[0] == ["model", "test ppl", "published"] and rows[2][0] == "PTB KN2"
    assert float(rows[2][1].strip("*")) > 1.0


def test_bench_vs_transformers_markdown(monkeypatch, capsys):
    pytest.importorskip("transformers")
    argv = ["bench_vs_transformers.py", "--vocab", "40", "--width", "16", "--layers", "1", "--batch", "2"]
    argv += ["--prompt", "3", "--new", "3", "--beams", "2", "--repeats", "1"]
    argv += ["--skip-constrained", "--markdown"]
    monkeypatch.setattr(sys, "argv", argv)
    load_benchmark("bench_vs_transformers").main()
    rows = markdown_lines(capsys.readouterr().out)
    assert rows[0] == ["strategy", "identical outputs", "decodekit / transformers (CPU)"]
    assert len(rows) >= 4 and all(r[1].endswith("/2") for r in rows[2:])
