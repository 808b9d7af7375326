"""Fixtures shared by several test directories."""

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
