"""Every ```python block in the user-facing docs runs, and every script in examples/ runs."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import doc_blocks

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    "README.md",
    "docs/decoding.md",
    "docs/constraints.md",
    "docs/stack_rnns.md",
    "docs/training.md",
    "docs/models.md",
]  # docs/external_models.md: tests/models/test_external_models_doc.py


def blocks(path: Path):
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("doc", [d for d in DOCS if (ROOT / d).exists()])
def test_doc_python_blocks_run(doc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for i, code in enumerate(blocks(ROOT / doc)):
        exec(compile(code, f"{doc}[block {i}]", "exec"), namespace)


TUTORIAL = "docs/tutorial.md"


@pytest.mark.slow
def test_tutorial_runs_in_order(tmp_path, monkeypatch):
    """docs/tutorial.md top to bottom, in one directory: its Python blocks in one namespace (as in
    one Python session), its shell lines with bash (tests/support/doc_blocks.py), in page order."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    ran = {"python": 0, "bash": 0}
    for block in doc_blocks.blocks(ROOT / TUTORIAL):
        if block.lang == "python":
            exec(compile("\n" * (block.line - 1) + block.code, TUTORIAL, "exec"), namespace)
        elif block.lang == "bash":
            for command in doc_blocks.commands(block):
                if doc_blocks.why_skipped(command) is None:
                    doc_blocks.check(command, tmp_path, TUTORIAL)
        else:
            assert block.lang in ("text", "json"), f"{TUTORIAL}:{block.line}: ```{block.lang}"
            continue
        ran[block.lang] += 1
    assert ran["python"] >= 8 and ran["bash"] >= 4, ran
    assert (tmp_path / "runs/people/model.safetensors").is_file() and (tmp_path / "search.dot").is_file()


def test_every_python_block_is_run_or_marked_as_a_sketch():
    """A block fenced ```python runs (above, or in its own doc test); one that cannot run as written
    (it needs the reader's own classes or data) is fenced ```python sketch."""
    covered = set(DOCS) | {"docs/external_models.md", TUTORIAL}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        name = str(path.relative_to(ROOT))
        fences = re.findall(r"^```(py\S*)(.*)$", path.read_text(encoding="utf-8"), re.M)
        for lang, rest in fences:
            assert lang == "python" and rest.strip() in ("", "sketch"), f"{name}: ```{lang}{rest}"
        if any(rest.strip() == "" for _, rest in fences):
            assert name in covered, f"{name} has runnable python blocks but no test runs them"


EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_run(script, tmp_path):
    r = subprocess.run(
        [sys.executable, str(script), "--smoke"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]


def test_the_strategies_decoding_md_names_exist_with_their_arguments():
    """Each strategy heading of docs/decoding.md names a function a user can import (a bare name:
    ``decodekit.NAME``; else its dotted path), with the arguments it lists (issue 35, item 11:
    ``decodekit.banked_beam_search`` was documented and did not exist)."""
    import importlib
    import inspect

    import decodekit

    text = (ROOT / "docs/decoding.md").read_text(encoding="utf-8")
    headings = re.findall(r"^### [^`\n]*: `([\w.]+)\(([^)]*)\)`", text, re.M)
    assert len(headings) >= 5
    for name, args in headings:
        if "." in name:
            module, _, attr = name.rpartition(".")
            fn = getattr(importlib.import_module(module), attr)
        else:
            fn = getattr(decodekit, name)
        documented = {a.split("=")[0].strip() for a in args.split(",")} - {"*", ""}
        assert documented <= set(inspect.signature(fn).parameters), (name, documented)


def test_links_and_cited_tests_exist():
    """Every relative link of README.md and docs/*.md names a file that exists, and every test file
    docs/reliability.md cites as performing an attack is in the suite."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" not in target:
                assert (path.parent / target).exists(), f"{path.name}: link to {target}"
    cited = re.findall(r"tests/[\w/]+\.py", (ROOT / "docs/reliability.md").read_text(encoding="utf-8"))
    assert len(set(cited)) >= 10
    for name in cited:
        assert (ROOT / name).is_file(), name
