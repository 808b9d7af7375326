"""One entry point over every strategy: ``generate(model, prompts, GenerationConfig(...))``.

The CLI and batch generation use it; it picks the strategy the config names and passes the
options that strategy takes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from decodekit.checks import at_least, one_of, real, require, shown
from decodekit.decoding import beam_search, constrained_beam_search, greedy, sample
from decodekit.memory import check as check_memory
from decodekit.models.base import LanguageModel, model_device
from decodekit.outputs import Hypothesis, SearchTree

STRATEGIES = ("greedy", "sample", "beam", "masked-beam")
TRANSFORMERS_NAMES = {  # transformers' generate() option -> ours (docs/decoding.md has the table)
    "max_new_tokens": "max_length",
    "num_beams": "beam_size with strategy='beam'",
    "do_sample": "strategy='sample'",
    "num_return_sequences": "n_best (beam) or num_samples (sample)",
    "suppress_tokens": "suppress",
}
SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.Generator.manual_seed accepts


@dataclass(frozen=True)
class GenerationConfig:
    """What to generate. ``strategy=None`` means beam with a constraint (Anderson-style
    search), greedy without. ``constraint`` with beam selects :func:`constrained_beam_search`;
    with ``masked-beam`` (beam search whose every step is masked by the constraint: one beam,
    the automaton built lazily when it is huge), greedy or sample it masks. ``seed`` seeds
    sampling (None: torch's global generator).

    ``constraint`` may also be a list of regexes, all of which must fully match, and
    ``exclude`` lists regexes that must match nowhere in the text (with no ``constraint``: any
    text without them); together they are compiled as one automaton
    (:func:`decodekit.compile_regex`). A list is stored as a tuple (hashable: batch generation
    groups records by their config).

    ``suppress``: tokens never generated (ids, or token strings of the model's vocabulary), as
    transformers' ``suppress_tokens``: the model's distribution renormalised without them
    (:class:`decodekit.models.suppress.Suppressed`). ``allow_unk=False`` also suppresses the
    vocabulary's ``<unk>``, so that generated text never holds an unknown word (the CLI's
    default; here the default is True, so that ``generate`` is exactly the strategy it picks)."""

    strategy: str | None = None
    max_length: int = 30
    constraint: str | tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    beam_size: int = 5
    length_penalty: float = 1.0
    n_best: int = 1
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    num_samples: int = 1
    seed: int | None = None
    suppress: tuple[int | str, ...] = ()
    allow_unk: bool = True

    def __post_init__(self) -> None:
        """Every field is checked here (a JSON line may hold anything): ConfigError, one line."""
        if self.strategy is not None:
            one_of("strategy", self.strategy, STRATEGIES)
        self._check_constraint()
        at_least("max_length", self.max_length, 0)
        for name in ("beam_size", "n_best", "num_samples"):
            at_least(name, getattr(self, name))
        at_least("top_k", self.top_k, optional=True, note=" or null")
        real("length_penalty", self.length_penalty)
        real("temperature", self.temperature, 0.0, open_low=True)
        real("top_p", self.top_p, 0.0, 1.0, open_low=True, optional=True, note=" or null")
        real("min_p", self.min_p, 0.0, 1.0, optional=True, note=" or null")
        seed = self.seed
        ok = seed is None or (
            isinstance(seed, int) and not isinstance(seed, bool) and SEED_RANGE[0] <= seed <= SEED_RANGE[1]
        )
        require(ok, f"seed must be an integer in [-2**63, 2**64) or null, got {shown(seed)}")
        items = self.suppress
        ok = isinstance(items, (list, tuple)) and all(
            isinstance(t, str) or (isinstance(t, int) and not isinstance(t, bool) and t >= 0) for t in items
        )
        require(ok, f"suppress must be a list of token ids or token strings, got {shown(items)}")
        object.__setattr__(self, "suppress", tuple(items))
        require(
            isinstance(self.allow_unk, bool), f"allow_unk must be true or false, got {shown(self.allow_unk)}"
        )

    def _check_constraint(self) -> None:
        """``constraint``: None, a regex, a non-empty list of regexes (stored as a tuple) or a
        TokenAutomaton; ``exclude``: a list of regexes (a single string is one), not with an
        automaton."""
        c, x = self.constraint, self.exclude
        if isinstance(c, (list, tuple)):
            ok = len(c) > 0 and all(isinstance(p, str) for p in c)
            require(ok, f"constraint must be a regex string or a non-empty list of them, got {shown(c)}")
            object.__setattr__(self, "constraint", c[0] if len(c) == 1 else tuple(c))
        elif c is not None and not isinstance(c, str):
            from decodekit.constraints import LazyTokenAutomaton, TokenAutomaton

            ok = isinstance(c, (TokenAutomaton, LazyTokenAutomaton))
            require(
                ok, f"constraint must be a regex string or null, got {shown(c)} (or a list of regex strings)"
            )
        x = (x,) if isinstance(x, str) else x
        ok = isinstance(x, (list, tuple)) and all(isinstance(p, str) for p in x)
        require(ok, f"exclude must be a list of regex strings, got {shown(self.exclude)}")
        object.__setattr__(self, "exclude", tuple(x))
        if x and c is not None:
            require(
                isinstance(self.constraint, (str, tuple)),
                "exclude cannot be added to a compiled TokenAutomaton constraint: compile them together",
            )

    @property
    def constrained(self) -> bool:
        """Whether the output is constrained (a ``constraint`` or an ``exclude``)."""
        return self.constraint is not None or bool(self.exclude)

    @property
    def resolved_strategy(self) -> str:
        return self.strategy or ("beam" if self.constrained else "greedy")

    def replace(self, **changes: Any) -> GenerationConfig:
        """A copy with ``changes``; unknown option names raise ValueError naming them."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        hints = "".join(
            f"; transformers' {k} is {TRANSFORMERS_NAMES[k]} here" for k in unknown if k in TRANSFORMERS_NAMES
        )
        require(not unknown, f"unknown generation option(s) {unknown}{hints}; known: {sorted(names)}")
        return dataclasses.replace(self, **changes)


def check_positions(model: LanguageModel, prompts: list[list[int]], max_length: int) -> None:
    """ConfigError when the longest prompt (with the model's ``bos_id``) plus ``max_length`` does not
    fit in the model's position limit (``max_positions``: a transformers model's; None: no limit)."""
    limit = getattr(model, "max_positions", None)
    if limit is None:
        return
    longest = max((len(p) for p in prompts), default=0) + (model.bos_id is not None)
    require(
        longest + max_length <= limit,
        f"prompt + max_length = {longest:,} + {max_length:,} = {longest + max_length:,} tokens, the model's "
        f"limit is {limit:,}; lower max_length to {max(limit - longest, 0):,} or shorten the prompt",
    )


def generate(
    model: LanguageModel,
    prompts: list[list[int]],
    config: GenerationConfig,
    *,
    max_memory: int | str | None = None,
    record: SearchTree | None = None,
) -> list[list[Hypothesis]]:
    """Run the configured strategy on a batch of prompts (one ``step`` call per time step for
    the whole batch). Returns one list of hypotheses per prompt.

    The memory the search needs is estimated first (:mod:`decodekit.memory`); a search that
    would need more than ``max_memory`` (default: ``DECODEKIT_MAX_MEMORY``, else 90 % of the free
    memory) raises :class:`decodekit.memory.ResourceError` naming the largest setting that fits.
    ``record``: a :class:`~decodekit.outputs.SearchTree` to fill (``record.to_dot(vocab)`` draws
    the search)."""
    if not prompts:
        return []
    if all(isinstance(x, int) for x in prompts):
        raise ValueError("generate() takes a batch of prompts (a list of lists of token ids)")
    check_memory(model, prompts, config, limit=max_memory)
    check_positions(model, prompts, config.max_length)
    model = with_suppression(model, config)
    c, strategy = config, config.resolved_strategy
    constraint = combined_constraint(model, config)
    if strategy == "greedy":
        return greedy(
            model, prompts, c.max_length, constraint=constraint, record=record, max_memory=max_memory
        )
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
            constraint=constraint,
            record=record,
            max_memory=max_memory,
        )
    if constraint is not None and strategy == "beam":
        return constrained_beam_search(
            model,
            prompts,
            constraint,
            c.beam_size,
            c.max_length,
            length_penalty=c.length_penalty,
            n_best=c.n_best,
            record=record,
            max_memory=max_memory,
        )
    return beam_search(
        model,
        prompts,
        c.beam_size,
        c.max_length,
        length_penalty=c.length_penalty,
        n_best=c.n_best,
        constraint=constraint,
        record=record,
        max_memory=max_memory,
    )


def combined_constraint(model: LanguageModel, config: GenerationConfig):
    """What the decoders get as ``constraint=``: the config's own (None, a regex, a
    TokenAutomaton), or, for several regexes or excludes, their product automaton compiled here
    for ``model`` (:func:`decodekit.constraints.as_automaton`)."""
    if isinstance(config.constraint, tuple) or config.exclude:
        from decodekit.constraints import as_automaton

        lazy = False if config.resolved_strategy == "beam" else None  # Anderson-style: built whole
        if lazy is None and model_device(model).type == "cpu":  # masked search on CPU: lazily, exact
            lazy = "masked"
        return as_automaton(config.constraint, model, exclude=config.exclude, lazy=lazy)
    return config.constraint


def suppressed_ids(model: LanguageModel, config: GenerationConfig) -> list[int]:
    """The ids ``config.suppress`` names (strings through ``model.vocab``), plus ``<unk>`` unless
    ``config.allow_unk``. ConfigError for a string the vocabulary does not hold."""
    vocab = getattr(model, "vocab", None)
    ids = []
    for token in config.suppress:
        if isinstance(token, str):
            index = getattr(vocab, "index", {})
            require(token in index, f"cannot suppress {token!r}: it is not a token of the model's vocabulary")
            token = index[token]
        ids.append(token)
    unk = getattr(vocab, "unk_id", None)
    if not config.allow_unk and unk is not None and unk != getattr(model, "eos_id", None):
        ids.append(unk)
    return ids


def with_suppression(model: LanguageModel, config: GenerationConfig) -> LanguageModel:
    """``model``, or :class:`~decodekit.models.suppress.Suppressed` when tokens are suppressed."""
    ids = suppressed_ids(model, config)
    if not ids:
        return model
    from decodekit.models.suppress import Suppressed

    return Suppressed(model, ids)
