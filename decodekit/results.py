"""The results file of batch generation: one JSON object per line, each id's result at most once.

* :func:`prepare` starts a run: without resume it empties the file; with resume it rewrites it
  (atomically) keeping the first result record of every id and dropping error records, records
  without an id and a partial last line (an interrupted write), so that the lines that failed are
  tried again and nothing is ever written twice. It returns the ids done.
* :func:`append` writes records and flushes them to disk (``fsync``) before returning.
* :func:`merge` joins the part files of a distributed run into the results file.

Ids are compared by their canonical JSON (:func:`id_key`), so ``1`` and ``"1"`` differ.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from decodekit.files import atomic_write


def id_key(value: object) -> str:
    """The canonical form of an id: ``json.dumps(value, sort_keys=True)`` (ASCII)."""
    return json.dumps(value, sort_keys=True)


def dumps(record: dict) -> bytes:
    """One output line as UTF-8; text that has no UTF-8 form (a lone surrogate) is \\u-escaped."""
    text = json.dumps(record, ensure_ascii=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(record).encode("ascii") + b"\n"


def _records(path: Path) -> Iterable[tuple[bytes, dict | None]]:
    """(raw line, parsed object or None) of every complete line of ``path``."""
    data = path.read_bytes() if path.exists() else b""
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]  # a partial last line: a write cut short
    for raw in data.splitlines():
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            obj = None
        yield raw, obj if isinstance(obj, dict) else None


def is_result(record: dict | None) -> bool:
    """A result record (not an error record) with an id."""
    return record is not None and record.get("id") is not None and "error" not in record


def _kept(paths: Iterable[Path]) -> tuple[list[bytes], set[str]]:
    lines, done = [], set()
    for path in paths:
        for raw, record in _records(path):
            if not is_result(record):
                continue
            key = id_key(record["id"])
            if key not in done:
                done.add(key)
                lines.append(raw + b"\n")
    return lines, done


def prepare(output: str | Path, *, resume: bool, parts: Iterable[Path] = ()) -> set[str]:
    """Start a run writing ``output`` (the caller holds its lock). Returns the ids already done.

    ``parts``: part files of an interrupted distributed run; with resume their results are
    kept too. They are removed either way."""
    output, parts = Path(output), [p for p in parts if p.exists()]
    stale = re.compile(rf"^\.{re.escape(output.name)}\.tmp\d+$")  # left by a kill inside a rewrite
    for path in output.parent.iterdir():
        if stale.match(path.name):
            path.unlink(missing_ok=True)
    done: set[str] = set()
    if resume:
        lines, done = _kept([output, *parts])
        data = b"".join(lines)
        if not output.exists() or data != output.read_bytes():
            atomic_write(output, lambda p: p.write_bytes(data))
    else:
        output.unlink(missing_ok=True)
    for p in parts:
        p.unlink()
    return done


def done_ids(output: str | Path) -> set[str]:
    """The ids with a result in ``output`` (read only)."""
    return _kept([Path(output)])[1]


def append(handle, records: list[dict]) -> None:
    """Write ``records`` to the binary file ``handle`` and make them durable."""
    handle.write(b"".join(dumps(r) for r in records))
    handle.flush()
    os.fsync(handle.fileno())


def merge(output: str | Path, parts: list[Path]) -> dict[str, int]:
    """Append the part files' records to ``output`` (atomically: one rename), keeping the first
    result of each id; remove the parts. Returns counts of the merged records by kind."""
    output = Path(output)
    lines, done = _kept([output])
    counts = {"written": 0, "errors": 0}
    for path in parts:
        for raw, record in _records(path):
            if is_result(record):
                key = id_key(record["id"])
                if key in done:
                    continue
                done.add(key)
                counts["written"] += 1
            else:
                counts["errors"] += 1
            lines.append(raw + b"\n")
    data = b"".join(lines)
    atomic_write(output, lambda p: p.write_bytes(data))
    for path in parts:
        path.unlink(missing_ok=True)
    return counts
