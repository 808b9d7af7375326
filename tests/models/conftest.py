"""Fixtures of the model tests."""

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every model test with one intra-op thread (tests/conftest.py)."""
