"""The fenced code blocks of a Markdown page, and a runner for their shell lines.

A shell line (a ```bash block) runs as written, in the page's order, in one working directory,
``decodekit`` and ``python`` being this interpreter and this checkout. A line that cannot run in
a test ends with one or more tags, which the page explains to its reader:

* ``[data]``: it needs a corpus under ``../shared/data`` (tests never do);
* ``[long]``: minutes or hours;
* ``[install]``: it installs packages;
* ``[graphviz]``: it needs Graphviz's ``dot`` (run when ``dot`` is on PATH).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TAGS = ("data", "long", "install", "graphviz")
_TAIL = re.compile(r"((?:\s*\[[a-z]+\])+)\s*$")
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int  # the line of the page where the code starts


@dataclass(frozen=True)
class Command:
    text: str
    line: int
    tags: tuple[str, ...]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, in order."""
    text = path.read_text(encoding="utf-8")
    return [Block(m[1], m[2], text.count("\n", 0, m.start(2)) + 1) for m in _FENCE.finditer(text)]


def commands(block: Block) -> list[Command]:
    """The commands of a shell block: continuation lines joined, comments and blank lines left out,
    each with the tags its line ends with."""
    out: list[Command] = []
    pending, start = "", 0
    for i, raw in enumerate(block.code.splitlines()):
        if not pending:
            start = block.line + i
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        line, pending = pending + raw, ""
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        tail = _TAIL.search(line)
        tags = tuple(re.findall(r"\[([a-z]+)\]", tail[1])) if tail else ()
        out.append(Command(line, start, tags))
    return out


def why_skipped(command: Command) -> str | None:
    """None when the command runs here, else the reason it does not."""
    unknown = [t for t in command.tags if t not in TAGS]
    assert not unknown, f"line {command.line}: unknown tag(s) {unknown} (known: {TAGS})"
    for tag in ("data", "long", "install"):
        if tag in command.tags:
            return f"[{tag}]"
    if "graphviz" in command.tags and shutil.which("dot") is None:
        return "Graphviz's dot is not installed"
    if "decodekit plot" in command.text and importlib.util.find_spec("matplotlib") is None:
        return "decodekit plot needs the optional matplotlib extra"
    return None


PRELUDE = """set -eo pipefail
decodekit() { "$DOC_PYTHON" -m decodekit "$@"; }
python() { "$DOC_PYTHON" "$@"; }
"""


def run(command: Command, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run one command with bash in ``cwd``; this checkout first on PYTHONPATH, one torch thread."""
    env = dict(os.environ, DOC_PYTHON=sys.executable, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        ["bash", "-c", PRELUDE + command.text],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def check(command: Command, cwd: Path, page: str) -> subprocess.CompletedProcess:
    """Run a command and fail, naming the page's line, unless it succeeds without a traceback."""
    r = run(command, cwd)
    where = f"{page}:{command.line}: {command.text.strip()}"
    assert r.returncode == 0, f"{where}\nexit {r.returncode}\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr, f"{where}\n{r.stderr[-3000:]}"
    return r
