"""One entry point over every strategy: ``generate(model, prompts, GenerationConfig(...))``.

The CLI and batch generation use it; it picks the strategy the config names and passes the
options that strategy takes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from decodekit.decoding import beam_search, constrained_beam_search, greedy, sample
from decodekit.models.base import LanguageModel
from decodekit.outputs import Hypothesis

STRATEGIES = ("greedy", "sample", "beam")


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

    @property
    def resolved_strategy(self) -> str:
        strategy = self.strategy or ("beam" if self.constraint else "greedy")
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
        return strategy

    def replace(self, **changes: Any) -> GenerationConfig:
        """A copy with ``changes``; unknown option names raise ValueError naming them."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ValueError(f"unknown generation option(s) {unknown}; known: {sorted(names)}")
        return dataclasses.replace(self, **changes)


def generate(
    model: LanguageModel, prompts: list[list[int]], config: GenerationConfig
) -> list[list[Hypothesis]]:
    """Run the configured strategy on a batch of prompts (one ``step`` call per time step for
    the whole batch). Returns one list of hypotheses per prompt."""
    if not prompts:
        return []
    if all(isinstance(x, int) for x in prompts):
        raise ValueError("generate() takes a batch of prompts (a list of lists of token ids)")
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
