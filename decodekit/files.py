"""Reading files that may not be what their names claim.

A FIFO named ``model.safetensors`` blocks ``open`` forever, and a ``vocab.txt`` linked to
``/dev/zero`` is read until memory runs out. Every model, vocabulary, checkpoint and n-gram file
decodekit reads goes through :func:`check_regular` first: it must be a regular file (symlinks are
followed) of at most ``max_bytes``. Text is then read through an already opened descriptor
(:func:`read_bytes`), so the size checked is the size read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from decodekit.errors import DecodekitError

KiB, MiB, GiB = 2**10, 2**20, 2**30


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _size(n: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _check(st: os.stat_result, path: Path, what: str, max_bytes: int | None, error: type) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{path}: {what} is {_kind(st.st_mode)}, not a regular file; refusing to read it")
    if max_bytes is not None and st.st_size > max_bytes:
        raise error(
            f"{path}: {what} is {_size(st.st_size)}, more than the {_size(max_bytes)} such a file can "
            "plausibly need; refusing to read it"
        )


def check_regular(
    path: str | Path, what: str, *, max_bytes: int | None = None, error: type = DecodekitError
) -> os.stat_result:
    """Raise ``error`` unless ``path`` is a regular file of at most ``max_bytes`` bytes.

    A missing file raises ``FileNotFoundError`` (callers word that case themselves)."""
    path = Path(path)
    st = os.stat(path)
    _check(st, path, what, max_bytes, error)
    return st


def read_bytes(
    path: str | Path, what: str, *, max_bytes: int | None = None, error: type = DecodekitError
) -> bytes:
    """The contents of a regular file of at most ``max_bytes``; the check is made on the opened
    descriptor (``O_NONBLOCK``: opening a FIFO does not wait for a writer)."""
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        _check(st, path, what, max_bytes, error)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    finally:
        os.close(fd)
    if max_bytes is not None and len(data) > max_bytes:  # it grew after the check
        raise error(f"{path}: {what} is larger than {_size(max_bytes)}; refusing to read it")
    return data


def temporary_name(path: Path) -> Path:
    """Where :func:`atomic_write` stages ``path``: ``.NAME.tmpPID`` beside it."""
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def atomic_write(path: Path, write: Any) -> None:
    """Call ``write(tmp_path)``, then move the temporary file onto ``path`` (``os.replace``)."""
    tmp = temporary_name(path)
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def open_regular(
    path: str | Path, what: str, *, max_bytes: int | None = None, error: type = DecodekitError
) -> BinaryIO:
    """``path`` opened for binary reading once it is known to be a regular file of at most
    ``max_bytes``: the check is made on the opened descriptor (opened ``O_NONBLOCK``, so a FIFO
    does not wait for a writer). For files read in pieces (headers, lines) rather than whole.
    A missing file raises ``FileNotFoundError``."""
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        _check(os.fstat(fd), path, what, max_bytes, error)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def bounded_lines(f: BinaryIO, max_line: int) -> Iterator[bytes | None]:
    """The lines of ``f``, one at a time, without their line end (``\\n`` or ``\\r\\n``). A line
    of more than ``max_line`` bytes is read through in pieces, never held whole, and yields None
    (the caller names it: it still counts as a line)."""
    while True:
        line = f.readline(max_line + 1)
        if not line:
            return
        if len(line) > max_line and not line.endswith(b"\n"):
            _skip_line(f)
            yield None
            continue
        yield line[:-2] if line.endswith(b"\r\n") else line[:-1] if line.endswith(b"\n") else line


def _skip_line(f: BinaryIO) -> None:
    """Read up to and including the next ``\n`` (or to the end), holding one buffer at a time."""
    peek = getattr(f, "peek", None)
    while True:
        if peek is None:  # not buffered: readline in pieces
            piece = f.readline(MiB)
            if not piece or piece.endswith(b"\n"):
                return
            continue
        piece = peek(MiB)
        if not piece:
            return
        end = piece.find(b"\n")
        f.read(len(piece) if end < 0 else end + 1)
        if end >= 0:
            return
