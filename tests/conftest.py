"""Fixtures shared by several test directories."""

import signal

import pytest
import torch


@pytest.fixture
def one_thread():
    """One intra-op thread while a test runs (restored afterwards): tiny tensors are fastest so on
    shared cores, and bitwise comparisons do not depend on the machine's thread count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def blocking_alarm():
    """A regression would block reading a FIFO: fail after 20 s instead of hanging the suite."""

    def fail(*_):
        raise TimeoutError("blocked reading a file")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)
