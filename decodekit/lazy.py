"""Names imported on first use (PEP 562): one ``__getattr__`` and ``__dir__`` for every package
whose public names would otherwise import torch at ``import`` time (``decodekit``,
``decodekit.models``, ``decodekit.constraints``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], table: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``(__getattr__, __dir__)`` of the package whose ``globals()`` is ``namespace``.

    ``table`` maps each lazy name to where it lives: ``"pkg.module"`` (the attribute of the same
    name in it), ``"pkg.module:attr"`` (another attribute) or ``"pkg.module:"`` (the module itself).
    A name is imported once: its value is then stored in ``namespace``, so later look-ups skip
    ``__getattr__``. ``__dir__`` lists ``namespace`` and its ``__all__``."""
    package = namespace["__name__"]

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
