"""Really failing writes for the tests of issue 23: a small or read-only file system, a process
that may not write, and nodes (devices, FIFOs) that an output path may name.

* :func:`small_disk` mounts a tmpfs of a few pages (root with mount permission); None otherwise.
* :func:`read_only` makes a populated directory unwritable: a read-only bind mount (EROFS) where
  mounting is permitted, else ``chmod 555`` and, as root (who ignores modes), the uid of
  ``nobody`` for :func:`in_child` to write as (EACCES).
* :func:`in_child` runs a function in a forked child (optionally as another uid), with its
  stderr captured and a time limit: a write that would hang (a FIFO) fails instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

NOBODY = 65534


def _mount(*args: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextlib.contextmanager
def small_disk(path: Path, size: str = "64k") -> Iterator[Path | None]:
    """A tmpfs of ``size`` mounted at ``path`` (made here), or None where mounting is not permitted."""
    path.mkdir()
    if not _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)):
        yield None
        return
    try:
        yield path
    finally:
        _umount(path)


def fill(directory: Path, leave: int = 0) -> Path:
    """Fill the file system of ``directory`` with a file until a write fails, then give back
    ``leave`` bytes. Returns the file (remove it to free the space)."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 4096)
        f.truncate(max(0, f.tell() - leave))
    return filler


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[int | None]:
    """Make the directory ``path`` unwritable while the block runs. Yields the uid that writes must
    run as (:func:`in_child`), or None: this process cannot write there either."""
    if _mount("--bind", str(path), str(path)):
        try:
            if not _mount("-o", "remount,bind,ro", str(path)):
                raise RuntimeError("a bind mount that cannot be made read-only")
            yield None
        finally:
            _umount(path)
        return
    mode = stat.S_IMODE(os.stat(path).st_mode)
    os.chmod(path, 0o555)
    try:
        yield NOBODY if os.geteuid() == 0 else None
    finally:
        os.chmod(path, mode)


@contextlib.contextmanager
def public_dir() -> Iterator[Path]:
    """A temporary directory every user may read (pytest's tmp_path is private to its owner), for
    the files a child running as ``nobody`` reads."""
    path = Path(tempfile.mkdtemp(prefix="decodekit-test-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        for p in [path, *path.rglob("*")]:
            with contextlib.suppress(OSError):
                if p.is_dir() and not p.is_symlink():
                    os.chmod(p, 0o755)
        shutil.rmtree(path, ignore_errors=True)


def in_child(fn: Callable[[], int | None], uid: int | None = None, timeout: int = 30) -> tuple[int, str]:
    """Run ``fn()`` in a forked child (as ``uid`` if given). Returns (exit code, its stderr): the
    code is what ``fn`` returns or exits with, 70 for an exception (its traceback is in stderr),
    -SIGALRM when it ran past ``timeout`` seconds (a write blocked on a FIFO, say)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 70
        try:
            os.close(r)
            os.dup2(w, 2)
            sys.stderr = os.fdopen(w, "w", buffering=1)
            signal.alarm(timeout)
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            code = fn() or 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 70
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os._exit(code)
    os.close(w)
    with os.fdopen(r, encoding="utf-8", errors="replace") as f:
        err = f.read()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return code, err


def cli_in_child(args: list[str], uid: int | None = None) -> tuple[int, list[str]]:
    """``decodekit ARGS`` in a forked child: (exit code, stderr lines)."""
    from decodekit.cli import main

    code, err = in_child(lambda: main(args), uid)
    return code, err.strip().splitlines()


def char_device(path: Path) -> Path:
    """A character device like /dev/null (1, 3) at ``path``; skips where mknod is not permitted."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, AttributeError):
        pytest.skip("creating a device node needs root (CAP_MKNOD)")
    return path


def fifo(path: Path) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(path)
    return path


def node(path: Path, kind: str) -> Path:
    """``kind``: "chr" (a /dev/null-like device), "fifo", or "link" (a symlink to such a device)."""
    if kind == "chr":
        return char_device(path)
    if kind == "fifo":
        return fifo(path)
    char_device(path.with_name(path.name + ".dev"))
    path.symlink_to(path.name + ".dev")
    return path


def same_node(path: Path, before: os.stat_result) -> bool:
    """``path`` is still the node it was (type, device number, inode)."""
    st = os.lstat(path)
    return (st.st_mode, st.st_rdev, st.st_ino) == (before.st_mode, before.st_rdev, before.st_ino)
