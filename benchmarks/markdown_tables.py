"""Markdown tables for the benchmark scripts' ``--markdown`` output: the columns of the script's
section in docs/benchmarks.md, so a run's table can be pasted there as it is printed."""

from __future__ import annotations

from collections.abc import Sequence


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """``header`` and each row as one ``| a | b |`` line, a ``|---|`` rule after the header.

    A ``|`` inside a cell is escaped (``\\|``) so a regex or an alternation stays one cell."""
    if any(len(row) != len(header) for row in rows):
        raise ValueError(f"every row needs {len(header)} cells")

    def line(cells: Sequence[object]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *(line(r) for r in rows)])
