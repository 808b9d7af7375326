"""Modules that moved keep their former names: the same module objects, so that code written
against the old layout (``import decodekit.memory``, ``monkeypatch.setattr("decodekit.generation.x", ...)``)
keeps working and reaches the real module."""

import importlib
import subprocess
import sys

import pytest

from decodekit import _FORMER_NAMES

# the layout before the move: every one of these names must keep working
MOVED = ["batch", "checks", "files", "generation", "lazy", "locking", "memory"]


def test_every_moved_module_has_its_former_name():
    assert sorted(_FORMER_NAMES) == [f"decodekit.{name}" for name in MOVED]


@pytest.mark.parametrize("former,current", sorted(_FORMER_NAMES.items()))
def test_a_former_name_is_the_module_itself(former, current):
    old, new = importlib.import_module(former), importlib.import_module(current)
    assert old is new and old.__name__ == current


def test_from_import_and_attribute_setting_reach_the_module(monkeypatch):
    from decodekit import generation  # the former name, through the package
    from decodekit.decoding import generation as current

    assert generation is current
    monkeypatch.setattr("decodekit.generation.plan", "patched")
    assert current.plan == "patched"


def test_an_unknown_name_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("decodekit.no_such_module")


def test_former_names_work_in_a_fresh_process_without_torch():
    """The finder is installed by ``import decodekit`` and imports nothing heavy itself."""
    code = "import sys, decodekit.checks, decodekit.files; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
