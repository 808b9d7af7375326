"""Every ```python block of docs/external_models.md runs (in order, one namespace)."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "external_models.md"


def test_external_models_doc_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 4
    for i, code in enumerate(blocks):
        exec(compile(code, f"external_models.md[block {i}]", "exec"), namespace)
