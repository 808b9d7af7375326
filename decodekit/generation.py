"""One entry point over every strategy: ``generate(model, prompts, GenerationConfig(...))``.

The CLI and batch generation use it; it picks the strategy the config names and passes the
options that strategy takes.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any

from decodekit.decoding import beam_search, constrained_beam_search, greedy, sample
from decodekit.errors import DecodekitError
from decodekit.memory import check as check_memory
from decodekit.models.base import LanguageModel
from decodekit.outputs import Hypothesis

STRATEGIES = ("greedy", "sample", "beam")
SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.Generator.manual_seed accepts


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _integer(name: str, value: Any, minimum: int, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        null = " or null" if optional else ""
        raise DecodekitError(f"{name} must be an integer >= {minimum}{null}, got {_shown(value)}")


def _real(name: str, value: Any, low: float, high: float, closed_low: bool, optional: bool = False) -> None:
    if value is None and optional:
        return
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (low <= value if closed_low else low < value) and value <= high
    if not ok:
        if high != math.inf:
            where = f" in {'[' if closed_low else '('}{low:g}, {high:g}]"
        else:
            where = "" if low == -math.inf else f" > {low:g}"
        null = " or null" if optional else ""
        raise DecodekitError(f"{name} must be a finite number{where}{null}, got {_shown(value)}")


@dataclass(frozen=True)
class GenerationConfig:
    """What to generate. ``strategy=None`` means beam with a constraint (Anderson-style
    search), greedy without. ``constraint`` with beam selects :func:`constrained_beam_search`;
    with greedy / sample it masks. ``seed`` seeds sampling (None: torch's global generator)."""

    strategy: str | None = None
    max_length: int = 30
    constraint: str | None = None
    beam_size: int = 5
    length_penalty: float = 1.0
    n_best: int = 1
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    num_samples: int = 1
    seed: int | None = None

    def __post_init__(self) -> None:
        """Every field is checked here (a JSON line may hold anything): DecodekitError, one line."""
        if self.strategy is not None and self.strategy not in STRATEGIES:
            raise DecodekitError(
                f"unknown strategy {_shown(self.strategy)}; choose one of {', '.join(STRATEGIES)}"
            )
        if self.constraint is not None and not isinstance(self.constraint, str):
            from decodekit.constraints import TokenAutomaton

            if not isinstance(self.constraint, TokenAutomaton):
                raise DecodekitError(
                    f"constraint must be a regex string or null, got {_shown(self.constraint)}"
                )
        _integer("max_length", self.max_length, 0)
        for name in ("beam_size", "n_best", "num_samples"):
            _integer(name, getattr(self, name), 1)
        _integer("top_k", self.top_k, 1, optional=True)
        _real("length_penalty", self.length_penalty, -math.inf, math.inf, True)
        _real("temperature", self.temperature, 0.0, math.inf, False)
        _real("top_p", self.top_p, 0.0, 1.0, False, optional=True)
        _real("min_p", self.min_p, 0.0, 1.0, True, optional=True)
        if self.seed is not None and (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int)
            or not SEED_RANGE[0] <= self.seed <= SEED_RANGE[1]
        ):
            raise DecodekitError(
                f"seed must be an integer in [-2**63, 2**64) or null, got {_shown(self.seed)}"
            )

    @property
    def resolved_strategy(self) -> str:
        return self.strategy or ("beam" if self.constraint is not None else "greedy")

    def replace(self, **changes: Any) -> GenerationConfig:
        """A copy with ``changes``; unknown option names raise ValueError naming them."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ValueError(f"unknown generation option(s) {unknown}; known: {sorted(names)}")
        return dataclasses.replace(self, **changes)


def generate(
    model: LanguageModel,
    prompts: list[list[int]],
    config: GenerationConfig,
    *,
    max_memory: int | str | None = None,
) -> list[list[Hypothesis]]:
    """Run the configured strategy on a batch of prompts (one ``step`` call per time step for
    the whole batch). Returns one list of hypotheses per prompt.

    The memory the search needs is estimated first (:mod:`decodekit.memory`); a search that
    would need more than ``max_memory`` (default: ``DECODEKIT_MAX_MEMORY``, else 90 % of the free
    memory) raises :class:`decodekit.memory.ResourceError` naming the largest setting that fits."""
    if not prompts:
        return []
    if all(isinstance(x, int) for x in prompts):
        raise ValueError("generate() takes a batch of prompts (a list of lists of token ids)")
    check_memory(model, prompts, config, limit=max_memory)
    c, strategy = config, config.resolved_strategy
    if strategy == "greedy":
        return greedy(model, prompts, c.max_length, constraint=c.constraint)
    if strategy == "sample":
        return sample(
            model,
            prompts,
            c.max_length,
            temperature=c.temperature,
            top_k=c.top_k,
            top_p=c.top_p,
            min_p=c.min_p,
            generator=c.seed,
            num_samples=c.num_samples,
            constraint=c.constraint,
        )
    if c.constraint is not None:
        return constrained_beam_search(
            model,
            prompts,
            c.constraint,
            c.beam_size,
            c.max_length,
            length_penalty=c.length_penalty,
            n_best=c.n_best,
        )
    return beam_search(
        model, prompts, c.beam_size, c.max_length, length_penalty=c.length_penalty, n_best=c.n_best
    )
