"""What a built wheel ships: the type marker pyproject declares, and the licence."""

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

ROOT = Path(__file__).resolve().parents[1]


def test_declared_package_data_exists():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["decodekit"]
    assert (ROOT / "decodekit" / "py.typed").is_file()


def test_licence_is_an_spdx_string_with_its_file():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "MIT"  # the table form is deprecated by setuptools
    for name in project["license-files"]:
        assert "MIT License" in (ROOT / name).read_text(encoding="utf-8")


def test_readme_installs_the_cpu_build_of_pytorch_first():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme[readme.index("## Set-up") :]
    assert setup.index("download.pytorch.org/whl/cpu") < setup.index('pip install -e ".[dev]"')
