"""Reading files that may not be what their names claim.

A FIFO named ``model.safetensors`` blocks ``open`` forever, and a ``vocab.txt`` linked to
``/dev/zero`` is read until memory runs out. Every model, vocabulary, checkpoint and n-gram file
decodekit reads goes through :func:`check_regular` first: it must be a regular file (symlinks are
followed) of at most ``max_bytes``. Text is then read through an already opened descriptor
(:func:`read_bytes`), so the size checked is the size read.

Every file decodekit writes goes through :func:`writable_target`: a symlink is followed (its
target is what gets written, and the link stays a link), and a path that exists but is not a
regular file (a device such as ``/dev/null``, a FIFO, a directory, a socket) is refused in one
line, never unlinked or replaced. :func:`atomic_write` then replaces the target through a
temporary file of its own beside it, and unlinks nothing else.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from decodekit.errors import DecodekitError

KiB, MiB, GiB = 2**10, 2**20, 2**30
MAX_LINE_BYTES = 64 * MiB  # one line of text input: generate --input, score FILE, a prompt on stdin


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


def writable_target(path: str | Path, what: str = "output", *, error: type = DecodekitError) -> Path:
    """The file to write for the output ``path``: its real path (symlinks followed, so that the
    target is written and the link stays a link), which must be a regular file or not exist yet.

    Raises ``error`` (one line naming what the path is) for anything else: a device, a FIFO, a
    directory, a socket. The parent directory is not checked (writing there says what is wrong)."""
    path = Path(path)
    target = Path(os.path.realpath(path))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target
    if not stat.S_ISREG(st.st_mode):
        shown = f"{path} (a link to {target})" if target != Path(os.path.abspath(path)) else str(path)
        raise error(f"{shown}: {what} is {_kind(st.st_mode)}, not a regular file; refusing to write to it")
    return target


def open_output(path: str | Path, what: str = "output", *, truncate: bool = False) -> Any:
    """``path`` opened for appending in binary, unbuffered (emptied first when ``truncate``), created
    if missing; :func:`writable_target` rules. The check is made on the opened descriptor
    (``O_NONBLOCK``: opening a FIFO never waits). ``f.name`` is the target's path."""
    target = writable_target(path, what)

    def opener(name: str, flags: int) -> int:
        fd = os.open(name, flags | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # it changed since the check
                raise DecodekitError(f"{path}: {what} is {_kind(st.st_mode)}, not a regular file")
            if truncate:
                os.ftruncate(fd, 0)
            if hasattr(os, "set_blocking"):
                os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    return open(target, "ab", buffering=0, opener=opener)


_OS_ERROR = re.compile(r"\(os error (\d+)\)|Os \{ code: (\d+)")


def os_error(e: BaseException, path: str | Path) -> BaseException:
    """The ``OSError`` a failed write of ``path`` should raise: ``e`` with ``path`` as its file
    name, or the ``OSError`` inside a safetensors ``SafetensorError`` ("No space left on device
    (os error 28)"); ``e`` itself when it is neither."""
    if isinstance(e, OSError) and e.errno is not None:
        return OSError(e.errno, e.strerror or os.strerror(e.errno), str(path))
    if type(e).__name__ == "SafetensorError":  # not imported here: safetensors is not needed to read
        m = _OS_ERROR.search(str(e))
        if m is not None:
            code = int(m.group(1) or m.group(2))
            return OSError(code, os.strerror(code), str(path))
    return e


def temporary_name(path: Path) -> Path:
    """Where :func:`atomic_write` stages ``path``: ``.NAME.tmpPID`` beside it."""
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def remove_file(path: str | Path, *, links: bool = False) -> bool:
    """Unlink ``path`` if it is a regular file (with ``links``, also a symlink, removed as a
    link: its target is left alone); never a device, a FIFO, a socket or a directory someone
    put there. Returns whether something was removed (a missing path: False)."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
        if not (stat.S_ISREG(mode) or (links and stat.S_ISLNK(mode))):
            return False
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def _claim(tmp: Path) -> None:
    """Create ``tmp`` empty and ours (``O_EXCL``, no link followed); a regular file of that name
    is a temporary left by a killed process of the same pid, anything else is refused."""
    for _ in range(2):
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600))
            return
        except FileExistsError:
            if not stat.S_ISREG(os.lstat(tmp).st_mode):
                break
            remove_file(tmp)
    raise DecodekitError(f"{tmp} is in the way of a write and is not a regular file; remove it")


def atomic_write(path: Path, write: Any, what: str = "output") -> None:
    """Call ``write(tmp_path)``, then move the temporary file onto ``path`` (``os.replace``).

    ``path`` goes through :func:`writable_target` first: a symlink's target is replaced (the link
    stays), a non-regular file is refused. An existing target keeps its permissions (and, as
    root, its owner); a new one is 0644. Nothing but the temporary file is ever unlinked, and a
    failed write leaves the target as it was. An ``OSError`` names ``path``; a safetensors write
    that failed in the OS (a full or read-only disk) is raised as that ``OSError``."""
    target = writable_target(path, what)
    tmp = temporary_name(target)
    try:
        _claim(tmp)
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        try:
            st = os.stat(target)
        except FileNotFoundError:
            os.chmod(tmp, 0o644)
        else:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
            if os.name == "posix" and os.geteuid() == 0 and (st.st_uid, st.st_gid) != (0, 0):
                with contextlib.suppress(OSError):  # a file system without owners
                    os.chown(tmp, st.st_uid, st.st_gid)
        os.replace(tmp, target)
    except Exception as e:
        failure = os_error(e, path)
        if failure is e:
            raise
        raise failure from None
    finally:
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(tmp).st_mode):
                os.unlink(tmp)


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
    of more than ``max_line`` bytes yields None once its first ``max_line + 1`` bytes are read (the
    caller names it: it still counts as a line); its rest is read through in pieces, never held
    whole, only when the next line is asked for (a caller that stops there reads no further: a
    stream without a newline, ``/dev/zero``, never ends)."""
    while True:
        line = f.readline(max_line + 1)
        if not line:
            return
        if len(line) > max_line and not line.endswith(b"\n"):
            yield None
            _skip_line(f)
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


def read_at_most(f: BinaryIO, max_bytes: int) -> bytes | None:
    """All of the stream ``f`` if it ends within ``max_bytes`` bytes, else None, once ``max_bytes
    + 1`` bytes have been read: a stream that never ends (``/dev/zero``) is read no further, and
    memory stays within about twice ``max_bytes``. Read in pieces of at most 1 MiB."""
    read = getattr(f, "read1", f.read)
    parts, count = [], 0
    while count <= max_bytes:
        piece = read(min(MiB, max_bytes + 1 - count))
        if not piece:
            return b"".join(parts)
        parts.append(piece)
        count += len(piece)
    return None
