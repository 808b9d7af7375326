"""Argument checks for the whole package (configs' ``__post_init__``, decoding arguments, modules
built from raw arguments): one mistake raises one error type, :class:`~decodekit.errors.ConfigError`
(a ``ValueError``), with a one-line message that names the argument and shows the value. Torch-free.
"""

from __future__ import annotations

import contextlib
import gc
import math
import numbers
from collections.abc import Iterator, Sequence
from typing import Any

from decodekit.errors import ConfigError


def shown(value: Any) -> str:
    """``repr(value)`` cut to 60 characters (a JSON line may hold anything)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a block builds millions of small lists from
    input (a million prompts, an ARPA file's n-grams): they hold no cycles, and each collection
    would rescan the whole heap again (2-3x the time on a large heap). Restored as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def require(ok: bool, message: str) -> None:
    """Raise ``ConfigError(message)`` unless ``ok``."""
    if not ok:
        raise ConfigError(message)


def at_least(name: str, value: Any, minimum: int = 1, *, optional: bool = False, note: str = "") -> None:
    """``value`` must be an int (not a bool) >= ``minimum``, or None when ``optional``; ``note``
    explains (``" or null"``, ``" (or None for unbounded)"``). A wrong type, or any mistake in an
    optional value, is told the whole contract; a required integer below the minimum the bound."""
    if value is None and optional:
        return
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if is_int and value >= minimum:
        return
    contract = "an integer >= " if optional or not is_int else ">= "
    raise ConfigError(f"{name} must be {contract}{minimum}{note}, got {shown(value)}")


def real(
    name: str,
    value: Any,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    open_low: bool = False,
    open_high: bool = False,
    optional: bool = False,
    note: str = "",
) -> None:
    """``value`` must be a finite real number (not a bool) in ``[low, high]`` (``(low, ...`` when
    ``open_low``, ``..., high)`` when ``open_high``), or None when ``optional``."""
    if value is None and optional:
        return
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok and (low < value if open_low else low <= value) and (value < high if open_high else value <= high):
        return
    if high != math.inf:
        where = f" in {'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
    else:
        where = "" if low == -math.inf else f" {'>' if open_low else '>='} {low:g}"
    raise ConfigError(f"{name} must be a finite number{where}{note}, got {shown(value)}")


def positive(name: str, value: Any) -> None:
    """``value`` must be a finite number > 0."""
    real(name, value, 0.0, open_low=True)


def fraction(name: str, value: Any) -> None:
    """``value`` must be a number in [0, 1) (a rate: dropout, an improvement threshold)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    require(number and 0.0 <= value < 1.0, f"{name} must be in [0, 1), got {shown(value)}")


def one_of(name: str, value: Any, choices: Sequence[str]) -> None:
    """``value`` must be one of ``choices``."""
    require(value in choices, f"unknown {name} {shown(value)}; choose one of {', '.join(choices)}")
