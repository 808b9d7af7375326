"""``decodekit --help``, ``decodekit CMD --help`` and a mistyped option answer without importing
torch (issue 14: they took 5-7 s when every invocation imported it first)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import decodekit

ROOT = Path(decodekit.__file__).resolve().parents[1]  # the fresh interpreters import this decodekit
PROBE = """
import json, sys
from decodekit.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
else:
    code = 0
heavy = sorted(m for m in ("torch", "numpy", "transformers", "tqdm") if m in sys.modules)
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


def python(*args: str) -> subprocess.CompletedProcess:
    """``python -c ...`` in a fresh interpreter."""
    command = [sys.executable, "-c", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)


def run_cli(*args: str) -> tuple[dict, str]:
    """Run the CLI in a fresh interpreter: (what the probe saw, the rest of stderr)."""
    done = python(PROBE, *args)
    *rest, last = done.stderr.strip().splitlines()
    return json.loads(last), "\n".join(rest)


@pytest.mark.parametrize(
    "args,code",
    [
        (["--help"], 0),
        (["--version"], 0),
        (["generate", "--help"], 0),
        (["constraint", "--help"], 0),
        (["train", "--help"], 0),
        (["eval", "--help"], 0),
        (["ngram", "--help"], 0),
        (["plot", "--help"], 0),
        (["generate", "--bogus"], 2),
        (["generate", "the", "--beam-size", "zero"], 2),
        (["bogus-command"], 2),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else f"exit{v}",
)
def test_help_and_usage_errors_do_not_import_torch(args, code):
    seen, err = run_cli(*args)
    assert seen["heavy"] == [], f"decodekit {' '.join(args)} imported {seen['heavy']}"
    assert seen["code"] == code, err
    if code == 2:
        assert len(err.splitlines()) == 1 and err.startswith("Error: ")


def test_import_decodekit_is_lazy():
    probe = "import sys, decodekit, decodekit.cli; print('torch' in sys.modules)"
    done = python(probe)
    assert done.stdout.strip() == "False", done.stderr


def test_every_public_name_resolves():
    assert set(decodekit.__all__) == set(decodekit._LAZY)  # _KEPT: former public names, not listed
    assert set(decodekit.__all__) <= set(dir(decodekit))
    for name in decodekit.__all__:
        assert getattr(decodekit, name) is not None, name
    with pytest.raises(AttributeError, match="no_such_name"):
        decodekit.no_such_name  # noqa: B018
