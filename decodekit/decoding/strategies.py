"""The strategies: one frozen :class:`Strategy` value each, all of them in :data:`STRATEGIES`.

A strategy declares everything the rest of the package needs to know about it: what it reads
of the settings, the constraint it needs, how its pool ranks, its rows per prompt and working
set (what :mod:`decodekit.decoding.memory` sums), its transformers names, and how it starts (its
selection, run by the one loop of :mod:`~decodekit.decoding.search`). ``GenerationConfig``,
the memory estimate, batch generation and the CLI's choices, warnings and transformers names
all read this table; none of them names a strategy.

This module imports neither torch nor the strategies' own modules: the registry knows where
each strategy lives and imports it on first use, so that ``decodekit generate --help`` lists
the choices without importing torch. Adding a strategy is one module that defines its
:class:`Strategy` and one line in :data:`STRATEGIES` (docs/architecture.md, "Adding a strategy").
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from decodekit.decoding.search import Search, Select, Selection

    Start = Callable[[Search, int], tuple[Select, Selection]]


def _nothing(settings: Any) -> None:
    """The argument check of a strategy that reads no setting of its own."""


def _unchanged(out: Any, settings: Any) -> Any:
    return out


def _n_best(settings: Any) -> int:
    return settings.n_best


@dataclass(frozen=True)
class Strategy:
    """One decoding strategy, as every part of the package sees it.

    ``settings`` below is what a search reads: a :class:`~decodekit.GenerationConfig`, or
    :class:`Settings` from the decoders called directly (the same field names).

    Attributes:
        name: its name in ``GenerationConfig.strategy`` and ``--strategy``.
        what: the search in messages (``"beam search"``); ``{states}`` is the automaton's states.
        start: ``start(search, B) -> (select, the rows of step -1)``, W rows per prompt, rows
            ``b * W + j``; ``select(logprobs [N, V], rows, remaining) -> Selection``.
        rows: ``rows(settings, S) -> W``, its rows per prompt (S: automaton states, 0 without
            a constraint that needs them).
        working_set: ``working_set(settings) -> units``: the ``[N, V]`` float32 tensors alive at
            the peak of a step, unconstrained (masking adds its own; measured, see each strategy).
        reads: the settings it reads besides ``max_length``, ``constraint`` and ``exclude``
            (the CLI warns about the others; ``seed``: batch generation seeds each record).
        needs: the constraint it needs (:mod:`decodekit.decoding.plan` compiles it): ``"masks"``
            (any automaton, built lazily where huge), ``"banks"`` (masks, and every state's tables
            where they are small: the banked search's bank of every token) or ``"states"`` (every
            state's transitions, built whole: one beam per state).
        ranked: True: the pool ranks each prompt's rows by ``logprob / len ** length_penalty``
            and keeps ``n_best``; False: each row is its own result, ending when the row ends.
        knob: the setting that scales its rows (the memory refusal's advice), or None.
        returns: the setting counting its hypotheses per prompt (transformers'
            ``num_return_sequences``), or None: one.
        transformers: (transformers' ``generate()`` option that selects it, the setting the
            option's value sets, or None for a flag), or None.
        constrained: the strategy that runs instead under a constraint (None: this one).
        keeps: ``keeps(settings) -> n``: the hypotheses a ranked pool keeps per prompt (``n_best``).
        check: ``check(settings)`` raises ConfigError for the settings it reads.
        finish: ``finish(results, settings) -> results`` (e.g. a warning), after the search.
    """

    name: str
    what: str
    start: Start
    rows: Callable[[Any, int], int]
    working_set: Callable[[Any], float]
    reads: tuple[str, ...] = ()
    needs: str = "masks"
    ranked: bool = False
    knob: str | None = None
    returns: str | None = None
    transformers: tuple[str, str | None] | None = None
    constrained: Strategy | None = None
    check: Callable[[Any], None] = _nothing
    keeps: Callable[[Any], int] = _n_best
    finish: Callable[[Any, Any], Any] = _unchanged

    def under(self, constrained: bool) -> Strategy:
        """The strategy that runs: under a constraint, :attr:`constrained` where it is set."""
        return self.constrained if constrained and self.constrained is not None else self

    def describe(self, states: int = 0) -> str:
        return self.what.format(states=states)


@dataclass(frozen=True)
class Settings:
    """What the strategies read, by these names. :class:`~decodekit.GenerationConfig` is these
    fields (their defaults are its defaults) with its checks, ``suppress`` and ``allow_unk``; the
    decoders called directly pass Settings whose ``strategy`` is the :class:`Strategy` itself
    and whose ``seed`` may be a ``torch.Generator``."""

    strategy: str | Strategy | None = None
    max_length: int = 30
    constraint: Any = None
    exclude: tuple[str, ...] = ()
    beam_size: int = 5
    length_penalty: float = 1.0
    n_best: int = 1
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    typical_p: float | None = None
    epsilon_cutoff: float | None = None
    eta_cutoff: float | None = None
    num_samples: int = 1
    seed: Any = None
    logprobs: int | None = None  # the loop's, every strategy: Hypothesis.top_logprobs
    # diverse beam search (transformers' names), minimum Bayes risk
    num_beam_groups: int = 1
    diversity_penalty: float = 0.0
    mbr_utility: Any = "f1"
    # under a constraint, feed the tokens every row is forced to take with the chosen ones, in one
    # model call (search.forced_chain): the same selections, fewer calls
    fast_forward: bool = False
    # under a constraint: draft the text the constraint forces next and verify it in one model call
    # (greedy, sampling: speculative.ForcedDraft; the other strategies: ahead.drafted_chain): the
    # same outputs, fewer calls, more positions fed
    draft_forced_text: bool = False

    @property
    def constrained(self) -> bool:
        """Whether the output is constrained (a ``constraint`` or an ``exclude``)."""
        return self.constraint is not None or bool(self.exclude)

    @property
    def resolved_strategy(self) -> str:
        """The strategy's name: ``strategy``, else beam under a constraint, else greedy."""
        if isinstance(self.strategy, Strategy):
            return self.strategy.name
        return STRATEGIES.resolve(self.strategy, self.constrained)

    @property
    def search(self) -> Strategy:
        """The strategy that runs (beam under a constraint: Anderson-style search)."""
        if isinstance(self.strategy, Strategy):
            return self.strategy
        return STRATEGIES[self.resolved_strategy].under(self.constrained)

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)


class Registry(Mapping[str, Strategy]):
    """Strategy names -> :class:`Strategy`, each imported from ``"module:NAME"`` on first use.

    ``default`` runs when no strategy is named, ``default_constrained`` when none is named and
    the output is constrained."""

    def __init__(self, where: dict[str, str], default: str, default_constrained: str) -> None:
        self._where, self._loaded = dict(where), {}
        self.default, self.default_constrained = default, default_constrained

    def __getitem__(self, name: str) -> Strategy:
        if name not in self._loaded:
            module, attr = self._where[name].split(":")
            self._loaded[name] = getattr(importlib.import_module(module), attr)
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def resolve(self, name: str | None, constrained: bool) -> str:
        """The name of the strategy a run uses: ``name``, else the default for ``constrained``."""
        return name or (self.default_constrained if constrained else self.default)


STRATEGIES = Registry(
    {
        "greedy": "decodekit.decoding.rowwise:GREEDY",
        "sample": "decodekit.decoding.rowwise:SAMPLE",
        "beam": "decodekit.decoding.beam:BEAM",  # under a constraint: beam.ANDERSON
        "masked-beam": "decodekit.decoding.beam:MASKED_BEAM",
        "banked-beam": "decodekit.decoding.banked:BANKED",
        "diverse-beam": "decodekit.decoding.diverse:DIVERSE_BEAM",
        "stochastic-beam": "decodekit.decoding.stochastic:STOCHASTIC_BEAM",
        "mbr": "decodekit.decoding.mbr:MBR",
    },
    default="greedy",
    default_constrained="beam",
)
