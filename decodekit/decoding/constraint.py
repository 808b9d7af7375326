"""Resolving the ``constraint=`` argument of the strategies into a token automaton."""

from __future__ import annotations

from typing import Any

from decodekit.errors import ConstraintError
from decodekit.models.base import LanguageModel, model_device

Constraint = Any  # a regex pattern (str) or a compiled decodekit.constraints TokenAutomaton


def resolve_constraint(constraint: Constraint | None, model: LanguageModel, max_length: int):
    """Compile (or check) the constraint for ``model`` and move it to the model's device.

    Raises :class:`ConstraintError` when no accepted sequence fits in ``max_length`` tokens."""
    if constraint is None:
        return None
    from decodekit.constraints import as_automaton

    automaton = as_automaton(constraint, model)
    shortest = int(automaton.min_tokens_to_accept[automaton.initial])
    if shortest > max_length:
        raise ConstraintError(
            f"the constraint {automaton.pattern!r} needs at least {shortest} tokens, "
            f"more than max_length={max_length}"
        )
    return automaton.to(model_device(model))
