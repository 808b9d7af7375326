"""Exceptions raised by decodekit. All derive from ``ValueError`` so that callers who catch
``ValueError`` for bad input keep working; the CLI prints them as one line (exit 2)."""


class DecodekitError(ValueError):
    """Base class of decodekit's own errors."""


class ConfigError(DecodekitError):
    """A model's configuration or constructor arguments are impossible (a size below its minimum,
    an unknown choice, fields that contradict each other); the message names the field and value."""


class ModelOutputError(DecodekitError):
    """A model's ``step`` returned the wrong shape, NaN/inf or non-normalised log-probabilities."""


class ConstraintError(DecodekitError):
    """A regex constraint is invalid, unsupported, too large, or unsatisfiable with this vocabulary."""


class ConstraintTooLarge(ConstraintError):
    """A constraint would exceed one of the compiler's size bounds (states, characters, steps).

    Code that tries a smaller or lazier form on refusal catches this class, never a message's
    text. ``bound`` names what was counted (``"states"``, ``"characters"``, ``"steps"``, ...),
    ``limit`` is the bound and ``size`` the count reached when known (else ``None``).
    """

    def __init__(self, message: str, *, bound: str = "", limit: int | None = None, size: int | None = None):
        super().__init__(message)
        self.bound = bound
        self.limit = limit
        self.size = size


class NoBeamPerState(ConstraintError):
    """Anderson-style search (one beam per automaton state) is refused for this constraint: its
    automaton cannot be built whole (``cause``: the :class:`ConstraintTooLarge` underneath), or
    the constraint given was built on first visit (``cause`` None). A masked or banked search
    can still run it; code that falls back to one catches this class."""

    def __init__(self, message: str, *, cause: ConstraintTooLarge | None = None):
        super().__init__(message)
        self.cause = cause


class CheckpointError(DecodekitError):
    """A checkpoint is missing, truncated, tampered with, or belongs to another model kind."""


class ResourceError(DecodekitError):
    """A search would need more memory than it may use (see :mod:`decodekit.decoding.memory`)."""


class LockedError(DecodekitError):
    """Another process is writing to the same output (see :mod:`decodekit.util.locking`)."""
