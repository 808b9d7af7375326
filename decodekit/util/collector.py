"""Python's cyclic garbage collector held off during a burst of allocations: :func:`paused`.

A compile (a parsed regex, its expressions, a grammar's Earley sets) or a state's first walk over
the vocabulary's trie makes hundreds of thousands of small objects. Every 700 allocations the
collector runs, and every so often a full collection traverses every live object of the process
(the vocabulary, the model, torch's): on the 10,000-word alternation it doubled the compile's CPU
time. Objects without cycles are still freed at once by reference counting; cyclic garbage made
meanwhile waits for the next collection after the pause.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

F = TypeVar("F", bound=Callable)


_lock = threading.Lock()
_depth = 0  # blocks inside paused(), over all threads
_disabled_here = False  # whether the outermost block disabled the collector


@contextmanager
def paused() -> Iterator[None]:
    """The collector disabled inside the block (over all threads: it is enabled again when the
    last block left, and only if the first one found it enabled, so a caller's own
    ``gc.disable()`` before it stays). No collection is forced on leaving: the next one comes
    with the next allocations, as usual."""
    global _depth, _disabled_here
    with _lock:
        if _depth == 0:
            _disabled_here = gc.isenabled()
            if _disabled_here:
                gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _disabled_here:
                gc.enable()


def while_paused(function: F) -> F:
    """``function`` run inside :func:`paused`."""

    @functools.wraps(function)
    def run(*args, **kwargs):
        with paused():
            return function(*args, **kwargs)

    return run  # type: ignore[return-value]
