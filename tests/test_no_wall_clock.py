"""No test reads the wall clock (issue 36): a budget in wall seconds fails on a loaded machine
(15 such budgets in tests/constraints/test_hostile.py failed at load 20-40 for refusals taking
0.6 CPU s). Budgets are CPU seconds of the process (``time.process_time()``) or of a child
(``resource.getrusage``); a hang is guarded by a timeout (``join(timeout=)``, ``communicate(
timeout=)``), never by comparing clock readings.

The scan parses every file under tests/ and fails on any read of ``time.perf_counter``,
``time.time``, ``time.monotonic`` (or their ``_ns`` forms), however imported, outside
:data:`ALLOWED`, which names a file and why its reading asserts nothing about time."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
WALL = {"perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns"}
ALLOWED: dict[str, str] = {}  # "tests/path.py": why its clock reading is not a timing assertion


def wall_clock_reads(source: str) -> list[int]:
    """The lines of ``source`` reading a wall clock of the ``time`` module."""
    tree = ast.parse(source)
    modules, names = set(), set()  # what `time` and its clocks are bound to in this file
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "time"}
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            names |= {a.asname or a.name for a in node.names if a.name in WALL}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in WALL:
            if isinstance(node.value, ast.Name) and node.value.id in modules:
                lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_test_reads_the_wall_clock():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        name = path.relative_to(TESTS.parent).as_posix()
        if name in ALLOWED:
            continue
        found += [f"{name}:{line}" for line in wall_clock_reads(path.read_text(encoding="utf-8"))]
    assert not found, (
        "tests read the wall clock (use time.process_time() with a generous margin, or no timing): "
        + ", ".join(found)
    )


def test_the_scan_finds_each_spelling():
    hits = {
        "import time\nt = time.perf_counter()\n": [2],
        "import time as clock\nassert clock.monotonic() - 1 < 2\n": [2],
        "from time import time as now\nx = now()\n": [2],
        "from time import perf_counter_ns\nx = perf_counter_ns()\n": [2],
        "import time\nx = time.process_time()\ntime.sleep(0)\n": [],
        "import datetime\nx = datetime.time()\n": [],
    }
    for source, want in hits.items():
        assert wall_clock_reads(source) == want, source
