"""Names imported on first use (PEP 562): one ``__getattr__`` and ``__dir__`` for every package
whose public names would otherwise import torch at ``import`` time (``decodekit``,
``decodekit.models``, ``decodekit.constraints``); and the former names of modules that moved
(:func:`keep_former_names`)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], table: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``(__getattr__, __dir__)`` of the package whose ``globals()`` is ``namespace``.

    ``table`` maps each lazy name to where it lives: ``"pkg.module"`` (the attribute of the same
    name in it), ``"pkg.module:attr"`` (another attribute) or ``"pkg.module:"`` (the module itself).
    A name is imported once: its value is then stored in ``namespace``, so later look-ups skip
    ``__getattr__``. ``__dir__`` lists ``namespace`` and its ``__all__``.

    A lazy name spelled like a submodule that defines it (``decodekit.training.evaluate``, the
    function of ``decodekit/training/evaluate.py``) keeps naming the function when the submodule
    is imported: the import system's binding of the submodule to the package is skipped (it stays
    in ``sys.modules``), as an eager ``from .evaluate import evaluate`` would have overwritten it."""
    package = namespace["__name__"]
    shadowed = {name for name, where in table.items() if where == f"{package}.{name}"}
    if shadowed:
        _keep_names(sys.modules[package], shadowed)

    def __getattr__(name: str) -> Any:
        try:
            where = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module, colon, attr = where.partition(":")
        value = importlib.import_module(module)
        if not colon or attr:
            value = getattr(value, attr or name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ())})

    return __getattr__, __dir__


def _keep_names(module: types.ModuleType, names: set[str]) -> None:
    """Make ``module`` ignore the binding of its submodules called ``names`` to its attributes."""

    class Package(type(module)):
        def __setattr__(self, name: str, value: Any) -> None:
            if name in names and isinstance(value, types.ModuleType):
                return
            super().__setattr__(name, value)

    module.__class__ = Package


class FormerNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Modules importable by a name they had before they moved: ``import decodekit.decoding.memory``
    gives the module object of ``decodekit.decoding.memory`` itself (not a copy), so an attribute
    set through either name is set for both. Consulted after the regular finders, so only names
    no file answers to reach it. ``table`` maps each former dotted name to the current one."""

    def __init__(self, table: Mapping[str, str]) -> None:
        self.table = dict(table)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.table:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> types.ModuleType:
        return importlib.import_module(self.table[spec.name])

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module was imported under its current name."""


def keep_former_names(table: Mapping[str, str]) -> None:
    """Install a :class:`FormerNames` for ``table`` (once per process)."""
    if not any(isinstance(f, FormerNames) and f.table == dict(table) for f in sys.meta_path):
        sys.meta_path.append(FormerNames(table))
