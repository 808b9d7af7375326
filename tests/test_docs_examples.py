"""Every ```python block in the user-facing docs runs, and every script in examples/ runs."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

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
        if code.lstrip().startswith("class LanguageModel(typing.Protocol)"):
            continue  # the protocol's signature, shown for reading
        exec(compile(code, f"{doc}[block {i}]", "exec"), namespace)


def test_every_python_block_is_run_or_marked_as_a_sketch():
    """A block fenced ```python runs (above, or in its own doc test); one that cannot run as written
    (it needs the reader's own classes or data) is fenced ```python sketch."""
    covered = set(DOCS) | {"docs/external_models.md"}
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
