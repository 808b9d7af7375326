"""Data flows one way (docs/decoding.md, ../shared/STYLE.md section 3): the import graph says so.

vocab -> models (protocol + nets) -> decoding (strategies) -> outputs -> cli; constraints sit beside
the models and import neither them nor the decoders; the decoders see models only through the
protocol (models.base) and the generic state operations (models.state)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "decodekit"


def imports(path: Path) -> set[str]:
    """Every decodekit module imported anywhere in the file (including inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("decodekit"):
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("decodekit"))
    return found


def files(sub: str):
    target = PACKAGE / sub
    return [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))


RULES = [
    # (files, forbidden import prefixes, allowed exceptions)
    (
        "decoding",
        (
            "decodekit.models",
            "decodekit.cli",
            "decodekit.training",
            "decodekit.checkpoint",
            "decodekit.loading",
        ),
        (
            "decodekit.models.base",
            "decodekit.models.state",
        ),
    ),
    ("constraints", ("decodekit.models", "decodekit.decoding", "decodekit.cli", "decodekit.training"), ()),
    ("models", ("decodekit.decoding", "decodekit.cli", "decodekit.training"), ()),
    ("outputs.py", ("decodekit.models", "decodekit.decoding", "decodekit.constraints", "decodekit.cli"), ()),
    ("vocab.py", ("decodekit.models", "decodekit.decoding", "decodekit.constraints", "decodekit.cli"), ()),
    ("training", ("decodekit.decoding", "decodekit.cli"), ()),
]


@pytest.mark.parametrize("sub,forbidden,allowed", RULES, ids=[r[0] for r in RULES])
def test_imports_flow_one_way(sub, forbidden, allowed):
    bad = []
    for path in files(sub):
        for name in imports(path):
            if name.startswith(forbidden) and not name.startswith(allowed):
                bad.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    assert not bad, "\n".join(bad)


def test_only_the_cli_uses_click():
    users = [p for p in PACKAGE.rglob("*.py") if "import click" in p.read_text(encoding="utf-8")]
    assert all(p.parent.name == "cli" for p in users), users
