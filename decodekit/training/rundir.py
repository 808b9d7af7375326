"""The bookkeeping of a training directory: which files belong to a run, the metrics log, and
putting things right after a kill.

``metrics.jsonl`` is never appended to: it is rewritten (atomically) from the epoch history kept
in the resume state, after that state is saved, and once more with the test line at the end. A
kill at any moment therefore loses no line and leaves no line twice: on the next start the file
is rewritten from the state again (:func:`reconcile`).

A run file may be a symlink: its target is what gets written (the link stays a link). A run file
that is not a regular file (a FIFO, a device, also as a link's target) is refused before anything
is written (:func:`check_run_files`), never replaced; ``--overwrite`` removes only regular files
and links (a link's target is left alone).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from decodekit.checkpoint import (
    CONFIG,
    MAX_CONFIG_BYTES,
    VOCAB,
    WEIGHTS,
    atomic_write,
    header_info,
    read_header,
    write_config,
)
from decodekit.errors import CheckpointError, ConfigError, LockedError
from decodekit.training.resume import RESUME
from decodekit.util.files import read_bytes, remove_file, writable_target
from decodekit.util.locking import exclusive

METRICS = "metrics.jsonl"
RUN_FILES = (CONFIG, WEIGHTS, VOCAB, RESUME, METRICS)


def run_files(out: Path) -> list[str]:
    """The files of a training run present in ``out``."""
    return [name for name in RUN_FILES if (Path(out) / name).exists()]


def check_run_files(out: Path) -> None:
    """Raise :class:`~decodekit.errors.DecodekitError` (one line) if a run file of ``out`` exists
    and is not a regular file (nor a link to one): a FIFO or a device would be replaced by the
    first write."""
    for name in RUN_FILES:
        writable_target(Path(out) / name, f"the run file {name}")


def remove_run_files(out: Path) -> None:
    """Delete a previous run's files (``--overwrite``); the caller holds the directory's lock and
    has called :func:`check_run_files`. A symlink is removed as a link: its target is left alone."""
    for name in RUN_FILES:
        remove_file(Path(out) / name, links=True)


def clean_temporaries(out: Path) -> list[str]:
    """Remove the ``.NAME.tmpPID`` files a killed writer left (the caller holds the lock, so no
    live decodekit process is writing them). Returns the names removed."""
    pattern = re.compile(r"^\.(" + "|".join(re.escape(n) for n in RUN_FILES) + r")\.tmp\d+$")
    removed = []
    for path in Path(out).iterdir():
        if pattern.match(path.name) and remove_file(path):
            removed.append(path.name)
    return removed


def write_metrics(out: Path, history: Sequence[dict], test: dict | None = None) -> None:
    """Rewrite ``metrics.jsonl``: one line per epoch of ``history``, then ``test`` if given."""
    lines = [json.dumps(record) for record in history] + ([json.dumps(test)] if test is not None else [])
    text = "".join(line + "\n" for line in lines)
    atomic_write(Path(out) / METRICS, lambda p: p.write_text(text, encoding="utf-8"))


def reconcile(out: Path) -> None:
    """After a kill: remove temporary files, and rewrite ``config.json`` from the copy in the
    weights' header when the kill fell between the weights and the config write. First of all,
    :func:`check_run_files` (raises for a FIFO or device among them)."""
    out = Path(out)
    check_run_files(out)
    clean_temporaries(out)
    if not (out / WEIGHTS).exists():
        return
    try:
        _, meta = read_header(out / WEIGHTS)
        info = header_info(meta)
        current = None
        if (out / CONFIG).exists():
            current = json.loads(
                read_bytes(out / CONFIG, CONFIG, max_bytes=MAX_CONFIG_BYTES, error=CheckpointError)
            )
    except (CheckpointError, OSError, ValueError):
        return  # a damaged checkpoint is reported when it is loaded, not repaired here
    if info is not None and info != current:
        write_config(out, info)


def take_directory(stack: contextlib.ExitStack, out: Path, par: Any, resume: bool, overwrite: bool) -> None:
    """Rank 0 locks ``out``, puts it right after a kill and checks it may be written; all ranks
    learn the outcome (so that none waits in a collective for a rank that gave up)."""
    error: Exception | None = None
    if par.is_main:
        try:
            out.mkdir(parents=True, exist_ok=True)
            stack.enter_context(exclusive(out, "training run directory"))
            reconcile(out)
            existing = run_files(out)
            if not resume and existing:
                if not overwrite:
                    raise ConfigError(
                        f"{out} already holds a training run ({', '.join(existing)}); resume it, "
                        "overwrite it, or use another directory"
                    )
                remove_run_files(out)
        except (ValueError, OSError) as e:
            error = e
    if par.broadcast(0.0 if error is None else 1.0):
        raise error or LockedError(f"rank 0 could not take {out} (see its error)")
