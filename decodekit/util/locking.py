"""One writer per output: an exclusive lock on a training directory or a results file.

``with exclusive(path):`` takes an ``flock`` on a lock file beside ``path`` (``DIR/.lock`` for a
directory, ``.NAME.lock`` beside a file) and writes who holds it (pid, host, start time, command)
into it. A second process fails at once with :class:`LockedError`, whose one-line message names
the holder. The kernel releases the lock when the holder exits, however it exits (a SIGKILL
included), so a stale lock file never blocks anyone: it is simply locked again.

The lock goes by the file, not by the name it was given: ``path`` is resolved first (symlinks
followed, ``os.path.realpath``), so ``out.jsonl`` and a link to it share one lock, which lives
beside the real file. (Two hard links of one file are two names of equal standing and are not
recognised as one.)

Nested ``exclusive`` calls on the same path in one process are allowed (the CLI locks ``--out``
before the training loop, which locks it again). Where ``fcntl`` is missing (Windows) no lock is
taken. ``flock`` on network file systems is only as good as the server's lock support.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from decodekit.errors import LockedError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_HELD: dict[tuple[int, str], int] = {}  # (pid, lock file) -> nesting depth; a forked child holds nothing


def lock_path(path: str | Path) -> Path:
    """The lock file of ``path`` (an existing directory, or a file that may not exist yet), beside
    (or in) the real path: the same for every symlink to it."""
    path = Path(os.path.realpath(path))
    return path / ".lock" if path.is_dir() else path.with_name(f".{path.name}.lock")


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        command = info.get("command", "")
        command = command if len(command) <= 120 else command[:117] + "..."
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["started"]))
        return f"pid {info['pid']} on {info['host']}, since {since}: {command}"
    except (OSError, ValueError, KeyError, TypeError):
        return "its pid could not be read"


@contextlib.contextmanager
def exclusive(path: str | Path, what: str = "output") -> Iterator[None]:
    """Hold the lock of ``path`` for the duration of the block.

    Raises:
        LockedError: another process holds it (the message names it and what to do).
    """
    if fcntl is None:
        yield
        return
    lock = lock_path(path)
    key = (os.getpid(), str(lock))
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    fd = _acquire(lock, Path(path), what)
    _HELD[key] = 1
    try:
        yield
    finally:
        del _HELD[key]
        with contextlib.suppress(OSError):
            os.unlink(lock)  # while still holding it: a waiting opener re-checks the inode
        os.close(fd)


def _acquire(lock: Path, path: Path, what: str) -> int:
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)  # a FIFO or device: no wait
    while True:
        try:
            fd = os.open(lock, flags, 0o644)
        except OSError as e:  # a read-only or full disk: say what was being written
            raise OSError(e.errno, f"{e.strerror} (creating its lock file {lock.name})", str(path)) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # never lock (or, later, unlink) a FIFO or device
            os.close(fd)
            raise LockedError(f"{lock}, the lock file of {path}, is not a regular file; remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            time.sleep(0.05)  # the holder may be writing its details right now
            raise LockedError(
                f"{path} is in use by another decodekit process ({_holder(lock)}); wait for it to "
                f"finish or choose another {what}"
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the previous holder removed that file as we opened it: lock the new one
    info = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.time(),
        "command": " ".join(["decodekit" if i == 0 else a for i, a in enumerate(sys.argv)]),
    }
    with contextlib.suppress(OSError):  # who holds it is for the message only; a full disk still locks
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(info) + "\n").encode())
    return fd
