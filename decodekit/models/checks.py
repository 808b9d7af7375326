"""Argument checks for model configs: every config's ``__post_init__`` (and every module built from
raw arguments) validates through these, so one mistake raises one error type,
:class:`~decodekit.errors.ConfigError` (a ``ValueError``), with a message that names the field and
shows the value."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from decodekit.errors import ConfigError


def require(ok: bool, message: str) -> None:
    """Raise ``ConfigError(message)`` unless ``ok``."""
    if not ok:
        raise ConfigError(message)


def at_least(name: str, value: Any, minimum: int = 1, *, optional: bool = False, note: str = "") -> None:
    """``value`` must be an integer >= ``minimum`` (or None when ``optional``); ``note`` explains."""
    if value is None and optional:
        return
    kind = "an integer or None" if optional else "an integer"
    require(isinstance(value, int) and not isinstance(value, bool), f"{name} must be {kind}, got {value!r}")
    require(value >= minimum, f"{name} must be >= {minimum}{note}, got {value!r}")


def positive(name: str, value: Any) -> None:
    """``value`` must be a number > 0."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    require(number and value > 0, f"{name} must be > 0, got {value!r}")


def one_of(name: str, value: Any, choices: Sequence[str]) -> None:
    """``value`` must be one of ``choices``."""
    require(value in choices, f"unknown {name} {value!r}; choose one of {', '.join(choices)}")


def fraction(name: str, value: Any) -> None:
    """``value`` must be a number in [0, 1) (a dropout rate)."""
    require(
        isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value < 1.0,
        f"{name} must be in [0, 1), got {value!r}",
    )
