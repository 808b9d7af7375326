"""The README's shell blocks run as written, in order, in an empty directory (issue 36, item 5):
every line but those tagged [data], [long] or [install] (tests/support/doc_blocks.py), with the
bundled model. About 12 commands of 2-4 CPU seconds each (an interpreter, torch, the model)."""

import pytest

from tests.support.doc_blocks import ROOT, blocks, check, commands, why_skipped

README = ROOT / "README.md"


def readme_commands():
    return [c for b in blocks(README) if b.lang in ("bash", "sh", "shell") for c in commands(b)]


def test_tagged_lines_are_the_ones_that_need_data_or_time():
    """A line that reads ../shared/data says so with [data] (tests never need it), and the lines
    that are run are most of them."""
    cmds = readme_commands()
    for c in cmds:
        assert "../shared" not in c.text or "data" in c.tags, f"README.md:{c.line}: {c.text}"
        why_skipped(c)  # no unknown tag
    assert sum(not c.tags for c in cmds) >= 10


@pytest.mark.slow
def test_readme_commands_run_in_order(tmp_path):
    ran, skipped = [], []
    for c in readme_commands():
        reason = why_skipped(c)
        if reason:
            skipped.append((c.line, reason))
            continue
        check(c, tmp_path, "README.md")
        ran.append(c.line)
    assert len(ran) >= 10, (ran, skipped)
    # what the commands were there to make
    for name in ("results.jsonl", "search.dot", "runs/lstm/model.safetensors", "runs/rnn/metrics.jsonl"):
        assert (tmp_path / name).is_file(), name
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 2
