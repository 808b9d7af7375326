"""Fixtures of the model tests."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: one intra-op thread is fastest on a shared machine (restored afterwards)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
