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


class CheckpointError(DecodekitError):
    """A checkpoint is missing, truncated, tampered with, or belongs to another model kind."""


class ResourceError(DecodekitError):
    """A search would need more memory than it may use (see :mod:`decodekit.decoding.memory`)."""


class LockedError(DecodekitError):
    """Another process is writing to the same output (see :mod:`decodekit.util.locking`)."""
