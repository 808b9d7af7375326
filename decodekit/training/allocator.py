"""Keep freed CPU memory in the process for reuse while training (glibc's malloc).

Every training update allocates the same large buffers again: logits, log-softmax and their
gradients, [B*T, V] each (16 MB for batch 20 x bptt 20 x 10k words). glibc's malloc serves
blocks this large with fresh ``mmap`` pages or trims them off the top of the heap when they are
freed, so each update pays for thousands of page faults (measured on the PTB LSTM: ~8,000 minor
faults and ~15 ms of system time per 80 ms update; see docs/changelog.md). Raising the mmap
threshold to its maximum and the trim threshold to 1 GiB makes malloc reuse those blocks; the
price is that up to that much freed memory stays with the process instead of going back to the
system, which for a training process (that needs the same peak again at the next update) is
no price at all. PyTorch's CPU performance guide suggests a caching allocator (jemalloc,
tcmalloc) for the same reason; this needs nothing installed.

Nothing is changed when the process is not on glibc, when another allocator is preloaded
(``LD_PRELOAD``), when the user tunes malloc through its own environment variables, or when
``DECODEKIT_MALLOC=system`` is set.
"""

from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's ceiling on 64-bit systems: 4 MiB * sizeof(long)
TRIM_THRESHOLD = 1 << 30

_USER_SETTINGS = ("LD_PRELOAD", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")
_done: bool | None = None


def reuse_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed blocks of up to 32 MiB (and up to 1 GiB of free heap) for
    reuse. Idempotent; returns whether the setting is in force."""
    global _done
    if _done is None:
        _done = _apply()
    return _done


def _apply() -> bool:
    if os.environ.get("DECODEKIT_MALLOC", "").lower() == "system":
        return False
    if any(os.environ.get(name) for name in _USER_SETTINGS):
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
