"""The plan of a search, made once above its loop: the strategy that runs, the constraint
compiled for the model (once, and only here), and the memory check.

Every entry point plans through :func:`plan` (``generate``, ``stream``, the decoders called
directly and, through ``generate``, the JSON-lines jobs); :func:`~decodekit.decoding.search.run`
takes the plan and compiles nothing. How much of a constraint's automaton to build is asked of
the compiler here only, as the strategy ``needs`` (:func:`compile_for`):

- ``"states"`` (Anderson-style search, one beam per state): every state's tables, built whole;
  where that is refused for size, an exact automaton built on first visit, searched over the
  states it reaches (:func:`_for_states`);
- ``"masks"`` (greedy, sampling, masked beam search, ...): whatever gives exact masks soonest
  (:meth:`Laziness.for_masks <decodekit.constraints.build.Laziness.for_masks>`);
- ``"banks"`` (the banked search): whole where its candidate states x V stay within
  :data:`~decodekit.constraints.build.WHOLE_ENTRIES` (the bank of every token of every state is
  then one table), else as for masks.

Without a named strategy, a constrained search is the per-state grid where its rows x
vocabulary (S·K·V) stay within :data:`GRID_ENTRIES`, else the banked search: the plan compiles
the constraint once as the banked search would and reads S off what it built (a lazy automaton:
too many states for the grid).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from decodekit.constraints import TokenConstraint
from decodekit.constraints.tokens.interface import StateTables, provides
from decodekit.decoding import memory
from decodekit.decoding.prompts import Prompt, as_batch
from decodekit.decoding.search import Search
from decodekit.errors import ConstraintError, ConstraintTooLarge, NoBeamPerState
from decodekit.models.base import LanguageModel, model_device
from decodekit.util.checks import at_least

# The default under a constraint: the per-state grid while its rows x vocabulary stay within
# GRID_ENTRIES (docs/decoding.md, "Choosing between the grid and the banked search").
GRID_ENTRIES = 1 << 21
BANKED_NAME = "banked-beam"


def plan(
    model: LanguageModel,
    prompt: Prompt | Sequence[Prompt],
    settings: Any,
    *,
    max_memory: int | str | None = None,
    probe: bool = False,
) -> Search:
    """The one planned search of ``settings`` (a ``GenerationConfig`` or
    :class:`~decodekit.decoding.strategies.Settings`) over ``prompt`` (one or a batch): the
    settings' checks; the strategy (:func:`choose`: the grid or the banked search where none is
    named under a constraint); the constraint compiled once for the model and its device; the
    memory check (:func:`decodekit.decoding.memory.check`, refusing before anything is allocated;
    without ``probe`` a small search passes without a model call of its own).

    Raises :class:`ConstraintError` when no sequence the masks allow fits in ``max_length``."""
    settings.search.check(settings)
    at_least("max_length", settings.max_length, 0)
    prompts, single = as_batch(prompt)
    with torch.inference_mode():
        settings, automaton = choose(model, settings)
    small = 0.0 if probe else 0.01  # the estimate reads the constraint compiled above
    memory.check(model, prompts, settings, limit=max_memory, small=small, constraint=automaton)
    return Search(model, settings.search, settings, automaton, max_memory, prompts, single)


def choose(model: LanguageModel, settings: Any) -> tuple[Any, TokenConstraint | None]:
    """(``settings`` with the strategy that runs, the constraint compiled for it: None
    unconstrained). A named strategy is kept. None named under a constraint: the per-state grid
    where S·K·V stays within :data:`GRID_ENTRIES` (S: the states of the automaton compiled as
    for the banked search; one built on first visit counts as too many), else the banked search.
    The choice is silent (issue 36: a notice on every constrained run on a BPE model was jargon
    the user had not asked for); a user who names ``beam`` where the grid cannot run gets the
    refusal, which names the banked search."""
    if not settings.constrained:
        return settings, None
    if settings.strategy is not None:
        return settings, compile_for(settings, settings.search.needs, model)
    try:
        automaton = compile_for(settings, "banks", model)
    except ConstraintTooLarge:  # too large even lazily: the grid's own refusal says what can run
        return settings, compile_for(settings, "states", model)
    states = automaton.num_states if provides(automaton, StateTables) else math.inf
    if states * settings.beam_size * model.vocab_size > GRID_ENTRIES:
        return settings.replace(strategy=BANKED_NAME), automaton
    return settings, automaton


def compile_for(settings: Any, needs: str, model: LanguageModel) -> TokenConstraint | None:
    """``settings.constraint`` (a regex, a list of them, a compiled constraint, or None) and
    ``settings.exclude`` compiled once for ``model`` as a strategy ``needs`` (the module
    docstring), on the model's device; None without a constraint.

    Raises :class:`ConstraintError` when no sequence the masks allow fits in ``max_length`` tokens."""
    constraint, exclude, max_length = settings.constraint, settings.exclude, settings.max_length
    if constraint is None and not exclude:
        return None
    from decodekit.constraints import as_automaton
    from decodekit.constraints.build import Laziness

    device = model_device(model)
    if needs == "states":
        automaton = _for_states(constraint, model, exclude, max_length)
    else:
        how = Laziness.for_banks(device) if needs == "banks" else Laziness.for_masks(device)
        automaton = as_automaton(constraint, model, exclude=exclude, lazy=how)
    if automaton.fits(max_length):
        return automaton.to(device)
    shortest = automaton.shortest
    if not automaton.exact:
        raise ConstraintError(
            f"the constraint {automaton.pattern!r} is built lazily (too large to build whole) and its masks "
            f"guarantee a match within {shortest} tokens (the shortest match spelled one byte per token), "
            f"more than max_length={max_length}: raise max_length"
        )
    raise ConstraintError(
        f"the constraint {automaton.pattern!r} needs at least {shortest} tokens, "
        f"more than max_length={max_length}"
    )


def _for_states(constraint: Any, model: LanguageModel, exclude: Any, max_length: int) -> TokenConstraint:
    """What one beam per automaton state runs on: the whole automaton (``anderson_automaton``);
    a lazy automaton given whose masks are the whole automaton's (``exact`` and ``exact_rows``;
    an engine without ``exact_rows``, such as the derivatives', is refused as before); where the
    whole automaton is refused for size, the lazy one (``Laziness.MASKED``, else ``LAZY``: the
    byte-DFA engine, not the derivatives') if its static rows are the whole automaton's
    (``exact_rows``: no separator, every byte a token by itself; near the length limit its bound
    may mask more unless ``exact``) and a match fits in ``max_length``: both searched over the
    states they reach. Otherwise the size refusal, naming the masked searches."""
    from decodekit.constraints import Transitions, anderson_automaton, as_automaton
    from decodekit.constraints.build import Laziness

    given = provides(constraint, TokenConstraint) and not provides(constraint, StateTables)
    if (
        given
        and provides(constraint, Transitions)
        and constraint.exact
        and getattr(constraint, "exact_rows", False)
    ):
        return as_automaton(constraint, model, exclude=exclude)
    try:
        return anderson_automaton(constraint, model, exclude=exclude)
    except NoBeamPerState as refused:
        if given:
            raise
        lazy = None
        for how in (Laziness.MASKED, Laziness.LAZY):  # exact near the limit where it can be; else the bound
            try:
                made = as_automaton(constraint, model, exclude=exclude, lazy=how)
            except ConstraintError:
                continue
            if provides(made, StateTables):
                return made
            if provides(made, Transitions) and getattr(made, "exact_rows", False):
                lazy = made
                break
        if lazy is None:
            raise
        if not lazy.fits(max_length):
            raise ConstraintError(
                f"{refused}; built on first visit, it has no match within max_length={max_length}"
            ) from None
        return lazy
