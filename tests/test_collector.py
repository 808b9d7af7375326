"""decodekit.util.collector: the cyclic collector paused for a burst of allocations and given
back as it was found (nested, across threads, and a caller's own gc.disable() kept)."""

from __future__ import annotations

import gc
import threading

from decodekit.util.collector import paused, while_paused


def test_paused_nests_and_restores():
    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_caller_who_disabled_the_collector_keeps_it_disabled():
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_exception_still_restores():
    try:
        with paused():
            raise ValueError("x")
    except ValueError:
        pass
    assert gc.isenabled()


def test_overlapping_threads_enable_it_when_the_last_leaves():
    inside, leave = threading.Event(), threading.Event()

    def hold():
        with paused():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(10)
    with paused():
        pass
    assert not gc.isenabled()  # the other thread is still inside
    leave.set()
    t.join(10)
    assert gc.isenabled()


def test_while_paused_wraps_a_function():
    @while_paused
    def state():
        return gc.isenabled()

    assert state() is False and gc.isenabled()
