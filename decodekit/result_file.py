"""The result file of a generation job (:mod:`decodekit.jobs`), on disk: one JSON object per line,
each id's result at most once (public as ``decodekit.results``). The in-memory results of one
search, :class:`~decodekit.outputs.Hypothesis` and its tree, are :mod:`decodekit.outputs`.

* :func:`target` is the file a run writes: the results path with symlinks followed, which must be
  a regular file or not exist (a device, a FIFO, ... is refused:
  :func:`decodekit.util.files.writable_target`).
* :func:`prepare` starts a run: without resume it empties the file (in place: it is never unlinked,
  so a link to it stays a link); with resume it rewrites it
  (atomically) keeping the first result record of every id and dropping error records, records
  without an id and a partial last line (an interrupted write), so that the lines that failed are
  tried again and nothing is ever written twice. It returns the ids done.
* :func:`open_results` opens it for appending; :func:`append` writes records and flushes them to
  disk (``fsync``) before returning; a failed write (a full disk) raises an ``OSError`` naming the
  file, and the records before it stay intact.
* :func:`merge` joins the part files of a distributed run into the results file.

Ids are compared by their canonical JSON (:func:`id_key`), so ``1`` and ``"1"`` differ.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from decodekit.util.files import atomic_write, open_output, os_error, read_bytes, remove_file, writable_target

WHAT = "the results file"


def target(output: str | Path) -> Path:
    """The file a run writing ``output`` writes (and locks): see the module docstring."""
    return writable_target(output, WHAT)


def open_results(output: str | Path) -> Any:
    """``output`` opened for appending (binary), created if missing."""
    return open_output(output, WHAT)


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
    data = read_bytes(path, WHAT) if path.exists() else b""  # a FIFO is refused, not waited on
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
    output, parts = target(output), [p for p in parts if p.exists()]
    stale = re.compile(rf"^\.{re.escape(output.name)}\.tmp\d+$")  # left by a kill inside a rewrite
    for path in output.parent.iterdir():
        if stale.match(path.name):
            remove_file(path)
    done: set[str] = set()
    if resume:
        lines, done = _kept([output, *parts])
        data = b"".join(lines)
        if not output.exists() or data != read_bytes(output, WHAT):
            atomic_write(output, lambda p: p.write_bytes(data), WHAT)
    else:
        open_output(output, WHAT, truncate=True).close()
    for p in parts:
        remove_file(p)
    return done


def done_ids(output: str | Path) -> set[str]:
    """The ids with a result in ``output`` (read only)."""
    return _kept([Path(output)])[1]


def append(handle, records: list[dict]) -> None:
    """Write ``records`` to the binary file ``handle`` and make them durable. An ``OSError`` (a
    full disk) names the file."""
    data = memoryview(b"".join(dumps(r) for r in records))
    try:
        while data:  # an unbuffered file may take part of it: nothing is left in a buffer to retry
            data = data[handle.write(data) :]
        handle.flush()
        if getattr(handle, "durable", True):  # a pipe (standard output) has nothing to sync
            os.fsync(handle.fileno())
    except OSError as e:
        name = getattr(handle, "name", None)
        raise (os_error(e, name) if isinstance(name, str | Path) else e) from None


def merge(output: str | Path, parts: list[Path]) -> dict[str, int]:
    """Append the part files' records to ``output`` (atomically: one rename), keeping the first
    result of each id; remove the parts. Returns counts of the merged records by kind."""
    output = target(output)
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
    atomic_write(output, lambda p: p.write_bytes(data), WHAT)
    for path in parts:
        remove_file(path)
    return counts
