"""One entry point over every strategy: ``generate(model, prompts, GenerationConfig(...))``.

The CLI and batch generation use it; the config names a strategy of
:data:`~decodekit.decoding.strategies.STRATEGIES`, which reads the fields it declares.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import queue
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from decodekit.decoding.plan import plan
from decodekit.decoding.prompts import prompt_logprobs, token_ids
from decodekit.decoding.search import Search, run
from decodekit.decoding.strategies import STRATEGIES, Settings
from decodekit.errors import ConfigError
from decodekit.models.base import LanguageModel
from decodekit.outputs import Hypothesis, SearchTree
from decodekit.util.checks import at_least, one_of, real, require, shown

SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.Generator.manual_seed accepts
TRANSFORMERS_KEYWORDS = (
    "max_new_tokens",
    "num_beams",
    "do_sample",
    "num_return_sequences",
    "suppress_tokens",
    "stop_strings",
    "bad_words_ids",
    "grammar",  # not transformers': a grammar's text (JSON lines), read into constraint
)


@dataclass(frozen=True)
class GenerationConfig(Settings):
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
    default; here the default is True, so that ``generate`` is exactly the strategy it picks).

    The fields before ``suppress`` are :class:`~decodekit.decoding.strategies.Settings`', what the
    strategies read (``search``: the strategy that runs), declared once there."""

    suppress: tuple[int | str, ...] = ()
    allow_unk: bool = True
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0
    min_new_tokens: int = 0
    stop: tuple[str, ...] = ()
    # the OpenAI API's / vLLM's controls (models.controls.Controlled); logit_bias is stored as
    # (token, bias) pairs, bad_words as token strings or id tuples (hashable)
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: Any = ()
    bad_words: tuple[str | tuple[int, ...], ...] = ()
    prompt_logprobs: int | None = None  # vLLM's: Hypothesis.prompt_logprobs (``logprobs``: Settings)
    truncation: str | None = None  # "left" / "right": cut prompts to fit the model's window
    # speculative decoding (decoding/speculative.py), transformers' names: a draft model (or an
    # ARPA / model path for the CLI), its draft length (None: adaptive), prompt lookup's length
    assistant_model: Any = None
    num_assistant_tokens: int | None = None
    prompt_lookup_num_tokens: int | None = None
    # transformers' names, folded into ours at construction (not fields: never stored twice)
    max_new_tokens: dataclasses.InitVar[int | None] = None
    num_beams: dataclasses.InitVar[int | None] = None
    do_sample: dataclasses.InitVar[bool | None] = None
    num_return_sequences: dataclasses.InitVar[int | None] = None
    suppress_tokens: dataclasses.InitVar[Any] = None
    stop_strings: dataclasses.InitVar[Any] = None
    bad_words_ids: dataclasses.InitVar[Any] = None
    grammar: dataclasses.InitVar[Any] = None  # Lark or GBNF text (or a Grammar): the constraint

    def __post_init__(  # the InitVars, in order
        self,
        max_new_tokens=None,
        num_beams=None,
        do_sample=None,
        num_return_sequences=None,
        suppress_tokens=None,
        stop_strings=None,
        bad_words_ids=None,
        grammar=None,
    ) -> None:
        """Every field is checked here (a JSON line may hold anything): ConfigError, one line.
        transformers' names are folded into ours first (:func:`fold_transformers_names`)."""
        given = {
            "max_new_tokens": max_new_tokens,
            "num_beams": num_beams,
            "do_sample": do_sample,
            "num_return_sequences": num_return_sequences,
            "suppress_tokens": suppress_tokens,
            "stop_strings": stop_strings,
            "bad_words_ids": bad_words_ids,
            "grammar": grammar,
        }
        given = {k: v for k, v in given.items() if v is not None}
        if given:
            current = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
            explicit = {f.name for f in dataclasses.fields(self) if current[f.name] != f.default}
            for name, value in fold_transformers_names(current, given, explicit).items():
                object.__setattr__(self, name, value)
        if self.strategy is not None:
            one_of("strategy", self.strategy, tuple(STRATEGIES))
        if self.truncation is not None:
            one_of("truncation", self.truncation, ("left", "right"))
        self._check_constraint()
        at_least("max_length", self.max_length, 0)
        for name in ("beam_size", "n_best", "num_samples"):
            at_least(name, getattr(self, name))
        at_least("top_k", self.top_k, optional=True, note=" or null")
        real("length_penalty", self.length_penalty)
        if self.temperature == 0 and not isinstance(self.temperature, bool):
            self._greedy_at_zero()
        real("temperature", self.temperature, 0.0, open_low=True)
        real("top_p", self.top_p, 0.0, 1.0, open_low=True, optional=True, note=" or null")
        real("min_p", self.min_p, 0.0, 1.0, optional=True, note=" or null")
        real("typical_p", self.typical_p, 0.0, 1.0, open_low=True, optional=True, note=" or null")
        for name in ("epsilon_cutoff", "eta_cutoff"):  # 0: off, as transformers' default
            real(name, getattr(self, name), 0.0, 1.0, open_high=True, optional=True, note=" or null")
        at_least("num_beam_groups", self.num_beam_groups)
        real("diversity_penalty", self.diversity_penalty, 0.0)
        require(
            callable(self.mbr_utility) or self.mbr_utility in ("exact", "f1", "chrf"),
            f"unknown mbr_utility {shown(self.mbr_utility)}; choose exact, f1, chrf or pass a function",
        )
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
        real("repetition_penalty", self.repetition_penalty, 0.0, open_low=True)
        at_least("no_repeat_ngram_size", self.no_repeat_ngram_size, 0)
        at_least("min_new_tokens", self.min_new_tokens, 0)
        stop = (self.stop,) if isinstance(self.stop, str) else self.stop
        ok = isinstance(stop, (list, tuple)) and all(isinstance(x, str) and x for x in stop)
        require(ok, f"stop must be a list of non-empty strings, got {shown(self.stop)}")
        object.__setattr__(self, "stop", tuple(stop))
        self._check_openai_controls()
        at_least("logprobs", self.logprobs, 0, optional=True, note=" or null")
        at_least("prompt_logprobs", self.prompt_logprobs, 0, optional=True, note=" or null")
        self._check_speculation()

    def _check_speculation(self) -> None:
        at_least("num_assistant_tokens", self.num_assistant_tokens, optional=True, note=" or null")
        at_least("prompt_lookup_num_tokens", self.prompt_lookup_num_tokens, optional=True, note=" or null")
        require(
            self.assistant_model is None or self.prompt_lookup_num_tokens is None,
            "give assistant_model or prompt_lookup_num_tokens, not both",
        )
        speculative = self.assistant_model is not None or self.prompt_lookup_num_tokens is not None
        require(
            not speculative or self.resolved_strategy in ("greedy", "sample"),
            "speculative decoding (assistant_model, prompt_lookup_num_tokens) runs greedy or sample, "
            f"not {self.resolved_strategy}",
        )
        require(
            not speculative or not self.logprobs,
            "logprobs=N is not reported under speculative decoding: drop assistant_model / "
            "prompt_lookup_num_tokens, or logprobs",
        )

    @property
    def controlled(self) -> bool:
        """Whether a control of :class:`decodekit.models.controls.Controlled` is on."""
        c = self
        return c.repetition_penalty != 1.0 or bool(
            c.no_repeat_ngram_size
            or c.min_new_tokens
            or c.stop
            or c.presence_penalty
            or c.frequency_penalty
            or c.logit_bias
            or c.bad_words
        )

    def _check_openai_controls(self) -> None:
        """``presence_penalty``, ``frequency_penalty`` in [-2, 2]; ``logit_bias`` a mapping (or
        pairs) from token ids or token strings to biases in [-100, 100]; ``bad_words`` a list of
        texts or of non-empty token id lists."""
        real("presence_penalty", self.presence_penalty, -2.0, 2.0)
        real("frequency_penalty", self.frequency_penalty, -2.0, 2.0)
        bias = self.logit_bias
        pairs = list(bias.items()) if isinstance(bias, dict) else bias
        ok = isinstance(pairs, (list, tuple)) and all(
            isinstance(p, (list, tuple)) and len(p) == 2 and _is_token(p[0]) for p in pairs
        )
        require(ok, f"logit_bias must map token ids or token strings to numbers, got {shown(bias)}")
        for token, value in pairs:
            real(f"logit_bias[{token!r}]", value, -100.0, 100.0)
        object.__setattr__(self, "logit_bias", tuple((k, float(v)) for k, v in pairs))
        words = self.bad_words
        ids = (list, tuple)
        ok = isinstance(words, ids) and all(
            (isinstance(w, str) and w)
            or (isinstance(w, ids) and w and all(_is_token(t) and not isinstance(t, str) for t in w))
            for w in words
        )
        require(ok, f"bad_words must be a list of texts or of token id lists, got {shown(words)}")
        object.__setattr__(self, "bad_words", tuple(w if isinstance(w, str) else tuple(w) for w in words))

    def _check_constraint(self) -> None:
        """``constraint``: None, a regex, a non-empty list of regexes (stored as a tuple) or a
        TokenAutomaton; ``exclude``: a list of regexes (a single string is one), not with an
        automaton or a Pattern (a grammar takes it: its sentences containing no match)."""
        c, x = self.constraint, self.exclude
        if isinstance(c, (list, tuple)):
            ok = len(c) > 0 and all(isinstance(p, str) for p in c)
            require(ok, f"constraint must be a regex string or a non-empty list of them, got {shown(c)}")
            object.__setattr__(self, "constraint", c[0] if len(c) == 1 else tuple(c))
        elif c is not None and not isinstance(c, str):
            from decodekit.constraints.automata.pattern import Pattern
            from decodekit.constraints.build import is_grammar
            from decodekit.constraints.tokens.interface import provides

            ok = isinstance(c, Pattern) or provides(c) or is_grammar(c)  # or a compiled TokenConstraint
            require(
                ok,
                f"constraint must be a regex string or null, got {shown(c)} "
                "(or a list of regex strings, a Pattern expression, a Grammar or a compiled automaton)",
            )
        x = (x,) if isinstance(x, str) else x
        ok = isinstance(x, (list, tuple)) and all(isinstance(p, str) for p in x)
        require(ok, f"exclude must be a list of regex strings, got {shown(self.exclude)}")
        object.__setattr__(self, "exclude", tuple(x))
        if x and c is not None:
            from decodekit.constraints.build import is_grammar

            require(
                isinstance(self.constraint, (str, tuple)) or is_grammar(self.constraint),
                "exclude cannot be added to a compiled TokenAutomaton or a Pattern constraint: compile them "
                "together (a Pattern: write it with & ~Pattern(...))",
            )

    def _greedy_at_zero(self) -> None:
        """``temperature=0`` (the OpenAI API's and ``llm``'s way to ask for determinism) means the
        most probable token: sampling becomes greedy (said once, as transformers warns), any other
        strategy runs as it is; the temperature is stored as 1 (it divides the logits)."""
        if self.strategy == "sample":
            warnings.warn(
                "temperature 0 means always the most probable token: running greedy instead of sampling",
                stacklevel=4,
            )
            object.__setattr__(self, "strategy", "greedy")
        elif self.strategy is not None and "temperature" in STRATEGIES[self.strategy].reads:
            require(False, f"temperature must be > 0 for strategy {self.strategy!r} (it samples), got 0")
        object.__setattr__(self, "temperature", 1.0)

    def replace(self, **changes: Any) -> GenerationConfig:
        """A copy with ``changes``; unknown option names raise ValueError naming them."""
        names = {f.name for f in dataclasses.fields(self)}
        given = {k: changes.pop(k) for k in TRANSFORMERS_KEYWORDS if k in changes}
        unknown = sorted(set(changes) - names)
        theirs = transformers_names()
        hints = "".join(f"; transformers' {k} is {theirs[k]} here" for k in unknown if k in theirs)
        require(not unknown, f"unknown generation option(s) {unknown}{hints}; known: {sorted(names)}")
        if given:
            current = {f.name: changes.get(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)}
            changes |= fold_transformers_names(
                current, {k: v for k, v in given.items() if v is not None}, set(changes)
            )
        return dataclasses.replace(self, **changes)


def fold_transformers_names(
    options: dict[str, Any], given: dict[str, Any], explicit: set[str]
) -> dict[str, Any]:
    """The changes to ``options`` (our names, with their current values) that transformers'
    ``given`` options mean (``explicit``: our options set in the same call):

    ``max_new_tokens`` -> ``max_length``; ``num_beams=K`` (K > 1) -> beam search of width K;
    ``do_sample=True`` -> sampling; ``num_return_sequences`` -> ``n_best`` or ``num_samples``;
    ``suppress_tokens`` -> ``suppress``; ``bad_words_ids`` -> ``bad_words``. ConfigError for
    contradictions (``max_length`` and ``max_new_tokens`` apart, a named strategy they contradict)
    and for beam sampling (``num_beams > 1`` with ``do_sample``), which decodekit does not have."""
    changes: dict[str, Any] = {}
    new_tokens = given.get("max_new_tokens")
    if new_tokens is not None:
        require(
            "max_length" not in explicit or options["max_length"] == new_tokens,
            f"give max_length or max_new_tokens (the same option), not both ({options['max_length']} "
            f"and {new_tokens})",
        )
        changes["max_length"] = new_tokens
    by_option = {s.transformers[0]: s for s in STRATEGIES.values() if s.transformers is not None}
    beams, sample = given.get("num_beams"), given.get("do_sample")
    require(
        not (sample and beams is not None and beams > 1),
        "num_beams > 1 with do_sample is beam sampling, which decodekit does not have: choose beam "
        "search (num_beams) or sampling (do_sample)",
    )
    chosen = by_option["do_sample"] if sample else by_option["num_beams"] if beams and beams > 1 else None
    if chosen is not None:
        named = options.get("strategy")
        require(named in (None, chosen.name), f"strategy {named!r} contradicts {chosen.transformers[0]}")
        changes["strategy"] = chosen.name
    if beams is not None:
        changes[by_option["num_beams"].transformers[1]] = beams
    returned = given.get("num_return_sequences")
    if returned is not None:
        settings = {**options, **changes}
        strategy = STRATEGIES[STRATEGIES.resolve(settings.get("strategy"), _constrained(settings))]
        require(
            strategy.returns is not None or returned == 1,
            f"{strategy.what} returns one sequence: num_return_sequences needs num_beams or do_sample",
        )
        if strategy.returns is not None:
            changes[strategy.returns] = returned
    if given.get("suppress_tokens") is not None:
        changes["suppress"] = tuple(given["suppress_tokens"])
    if given.get("grammar") is not None:
        grammar = read_grammar(given["grammar"])
        other = options.get("constraint") if "constraint" in explicit else None
        if other is not None:  # the grammar's sentences that also match: grammar & pattern
            from decodekit.constraints.automata.pattern import Pattern
            from decodekit.constraints.grammar.grammar import GrammarAndPattern

            require(
                isinstance(other, (str, Pattern)),
                f"constraint beside grammar must be a regex or a Pattern (their intersection), "
                f"got {shown(other)}",
            )
            grammar = grammar & other if hasattr(grammar, "__and__") else GrammarAndPattern.of(grammar, other)
        changes["constraint"] = grammar
    if given.get("bad_words_ids") is not None:
        changes["bad_words"] = tuple(given["bad_words_ids"])
    if given.get("stop_strings") is not None:
        stops = given["stop_strings"]
        changes["stop"] = (stops,) if isinstance(stops, str) else tuple(stops)
    return changes


@functools.lru_cache(maxsize=16)
def _read_grammar(text: str) -> Any:
    from decodekit.constraints import Grammar

    return Grammar(text)


def read_grammar(value: Any) -> Any:
    """``grammar=``: a :class:`~decodekit.Grammar`, or the text of a Lark or GBNF grammar (told
    apart by ``::=``; each text read once), as the constraint."""
    if isinstance(value, str):
        return _read_grammar(value)
    from decodekit.constraints.build import is_grammar

    require(is_grammar(value), f"grammar must be a Grammar or a grammar's text, got {shown(value)}")
    return value


def _constrained(options: dict[str, Any]) -> bool:
    return options.get("constraint") is not None or bool(options.get("exclude"))


def transformers_names() -> dict[str, str]:
    """transformers' ``generate()`` options -> ours, from the strategies' declarations
    (docs/decoding.md has the table)."""
    names = {
        "max_new_tokens": "max_length",
        "suppress_tokens": "suppress",
        "stop_strings": "stop",
        "bad_words_ids": "bad_words",
    }
    returns: dict[str, str] = {}  # the setting -> the first strategy counting its results with it
    for s in STRATEGIES.values():
        if s.transformers is not None:
            option, setting = s.transformers
            names[option] = f"{setting} with strategy='{s.name}'" if setting else f"strategy='{s.name}'"
        if s.returns is not None:
            returns.setdefault(s.returns, s.name)
    names["num_return_sequences"] = " or ".join(f"{k} ({v})" for k, v in sorted(returns.items()))
    return names


def truncated(model: LanguageModel, prompts: list[list[int]], config: GenerationConfig) -> list[list[int]]:
    """``prompts`` cut to fit the model's window (``max_positions``) with ``max_length`` new tokens
    as ``config.truncation`` says: ``"left"`` keeps each prompt's last tokens (transformers'
    ``truncation_side="left"``, the usual choice for generation), ``"right"`` its first; None:
    unchanged (:func:`check_positions` refuses what does not fit)."""
    limit = getattr(model, "max_positions", None)
    if config.truncation is None or limit is None:
        return prompts
    room = limit - config.max_length - (model.bos_id is not None)
    require(
        room >= 1,
        f"max_length {config.max_length:,} leaves no room for a prompt in the model's window of "
        f"{limit:,} positions: lower max_length",
    )
    if config.truncation == "left":
        return [p[-room:] if len(p) > room else p for p in prompts]
    return [p[:room] for p in prompts]


def check_positions(model: LanguageModel, prompts: list[list[int]], max_length: int) -> None:
    """ConfigError when the longest prompt (with the model's ``bos_id``) plus ``max_length`` does not
    fit in the model's position limit (``max_positions``: a transformers model's; None: no limit)."""
    limit = getattr(model, "max_positions", None)
    if limit is None:
        return
    longest = max((len(p) for p in prompts), default=0) + (model.bos_id is not None)
    if longest + max_length <= limit:
        return
    keep = limit - max_length - (model.bos_id is not None)
    cut = (
        f"or truncate it (truncation='left', --truncate left: keeps its last {keep:,} tokens)"
        if keep >= 1
        else "and lower max_length"
    )
    fix = "shorten it " if longest >= limit else f"lower max_length to {limit - longest:,}, shorten it "
    require(
        False,
        f"prompt + max_length = {longest:,} + {max_length:,} = {longest + max_length:,} tokens, the model's "
        f"limit is {limit:,}; {fix}{cut}",
    )


def generate(
    model: LanguageModel,
    prompts,
    config: GenerationConfig | None = None,
    *,
    max_memory: int | str | None = None,
    record: SearchTree | None = None,
    observe: Any = None,
    **options: Any,
) -> list[Hypothesis] | list[list[Hypothesis]]:
    """Run the configured strategy on one prompt or a batch (one ``step`` call per time step for
    the whole batch; ``observe(selection)`` after each step, as :func:`~.decoding.search.run`).

    ``prompts``: text (encoded by ``model.vocab``), token ids, a 1-D tensor (one prompt), or a
    list of texts / of id lists, or a 2-D tensor (a batch). ``config`` (default
    ``GenerationConfig()``) with ``options`` as :meth:`GenerationConfig.replace` takes them
    (transformers' names too: ``generate(lm, "Hello", max_new_tokens=5)``). Returns the list of
    hypotheses of one prompt, or one list per prompt for a batch; each hypothesis has its
    ``text`` when the model has a vocabulary.

    The memory the search needs is estimated first (:mod:`decodekit.decoding.memory`); a search that
    would need more than ``max_memory`` (default: ``DECODEKIT_MAX_MEMORY``, else 90 % of the free
    memory) raises :class:`decodekit.decoding.memory.ResourceError` naming the largest setting that fits.
    ``record``: a :class:`~decodekit.outputs.SearchTree` to fill (``record.to_dot(vocab)`` draws
    the search)."""
    config = _config(config, options)
    prompts, single = as_prompts(model, prompts)
    prompts = truncated(model, prompts, config)
    if not prompts:
        return []
    from decodekit.decoding.speculative import drafts_forced

    if (
        config.assistant_model is not None
        or config.prompt_lookup_num_tokens is not None
        or (record is None and drafts_forced(config, model))
    ):
        return _speculative(model, prompts, config, single, record)
    out = run(_planned(model, prompts, config, max_memory), record=record, observe=observe)
    if config.prompt_logprobs:  # the model's own (the controls are about the generated tokens)
        with torch.inference_mode():
            scored = prompt_logprobs(model, prompts, config.prompt_logprobs)
        out = [[dataclasses.replace(h, prompt_logprobs=p) for h in hyps] for hyps, p in zip(out, scored)]
    return out[0] if single else out


def _speculative(model: LanguageModel, prompts, config: GenerationConfig, single: bool, record):
    """:func:`generate` through :func:`~decodekit.decoding.speculative.speculative_generate`."""
    from decodekit.decoding import speculative

    require(record is None, "record= draws a search tree; speculative decoding has none")
    encode = speculative.text_encoder(model) if speculative.drafts_forced(config, model) else None
    model = with_controls(with_suppression(model, config), config)
    check_positions(model, prompts, config.max_length)
    draft = None
    if config.assistant_model is not None or config.prompt_lookup_num_tokens is not None:
        draft = speculative.draft_for(model, config.assistant_model)
    if encode is not None and not isinstance(draft, speculative.ModelDraft):
        draft = speculative.ForcedDraft(encode, draft)  # a model draft keeps its own state: not wrapped
    out, _ = speculative.speculative_generate(model, prompts, config, draft)
    vocab = getattr(model, "vocab", None)
    if vocab is not None:
        out = [[dataclasses.replace(h, text=vocab.decode(h.tokens)) for h in hyps] for hyps in out]
    return out[0] if single else out


def _config(config: GenerationConfig | None, options: dict[str, Any]) -> GenerationConfig:
    """``config`` (default ``GenerationConfig()``) with ``options``."""
    config = GenerationConfig() if config is None else config
    return config.replace(**options) if options else config


def _planned(model: LanguageModel, prompts, config: GenerationConfig, max_memory) -> Search:
    """The plan of what :func:`generate` and :func:`stream` decode (:func:`~.decoding.plan.plan`:
    the strategy, the constraint compiled once, the memory check with a probe of the model), the
    model's position limit checked, and the model seen through the config's suppression and
    controls."""
    search = plan(model, prompts, config, max_memory=max_memory, probe=True)
    check_positions(model, prompts, config.max_length)
    return dataclasses.replace(search, model=with_controls(with_suppression(model, config), config))


def stream(
    model: LanguageModel,
    prompt,
    config: GenerationConfig | None = None,
    *,
    max_memory: int | str | None = None,
    **options: Any,
) -> Iterator[int]:
    """The tokens of one greedy or sampled continuation of ``prompt``, yielded as each is chosen
    (``generate``'s arguments; one prompt, ``num_samples=1``). The search runs in a background
    thread and its errors are raised here. EOS is not yielded. Under a constraint the tokens are
    those chosen at each step; a row that then cannot go on (every allowed token of probability
    0) ends unmatched, and :func:`generate` would have returned nothing for it.

    Beam searches are refused: their best hypothesis is known only at the end."""
    config = _config(config, options)
    ids, single = as_prompts(model, prompt)
    require(single, "stream() takes one prompt (generate() takes a batch)")
    ids = truncated(model, ids, config)
    strategy = config.search
    require(
        not strategy.ranked and config.num_samples == 1,
        f"streaming follows one greedy or sampled row; the {config.resolved_strategy} strategy (or "
        "num_samples > 1) gives its result only at the end: use generate()",
    )
    search = _planned(model, ids, config, max_memory)
    eos = model.eos_id
    chosen: queue.Queue = queue.Queue()
    done, closed = object(), threading.Event()

    def observe(selection) -> None:
        if closed.is_set():  # the caller stopped iterating: end the search, not only the output
            raise _StreamClosed
        for token in selection.tokens.tolist():  # one row (none once it ended)
            if token != eos:
                chosen.put(token)

    def work() -> None:
        try:
            run(search, observe=observe)
            chosen.put(done)
        except _StreamClosed:
            pass
        except BaseException as e:  # raised in the caller's thread
            chosen.put(e)
        finally:
            _RUNNING.pop(threading.current_thread(), None)

    worker = threading.Thread(target=work, name="decodekit-stream", daemon=True)
    _RUNNING[worker] = closed
    worker.start()
    try:
        while (item := chosen.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        closed.set()
        worker.join()  # ends at its next step: a search left running aborts the interpreter's exit


def stream_text(
    model: LanguageModel,
    prompt,
    config: GenerationConfig | None = None,
    *,
    max_memory: int | str | None = None,
    **options: Any,
) -> Iterator[str]:
    """:func:`stream` as text: each time a token is chosen, the part of the continuation's text
    not yielded yet, a character whose bytes are split across tokens held back until it is whole
    (``model.vocab`` decodes; joined, the pieces are the continuation's text)."""
    vocab = getattr(model, "vocab", None)
    require(vocab is not None, "stream_text() needs a model with a vocab (stream() yields token ids)")
    tokens: list[int] = []
    shown = ""
    ids = stream(model, prompt, config, max_memory=max_memory, **options)
    try:
        for token in ids:
            tokens.append(token)
            text = vocab.decode(tokens).rstrip("\ufffd")  # U+FFFD: a character's bytes not all here
            if text.startswith(shown) and len(text) > len(shown):
                yield text[len(shown) :]
                shown = text
        rest = vocab.decode(tokens)
        if rest.startswith(shown) and len(rest) > len(shown):
            yield rest[len(shown) :]
    finally:
        ids.close()  # the search stops with the caller


class _StreamClosed(Exception):
    """Raised inside a stream's search when its caller stopped iterating."""


# the searches of streams not finished, each with its stop event: a search still running when the
# interpreter exits (a stream left unfinished) would abort it ("terminate called"), so they are
# stopped, each at its next step, and waited for first
_RUNNING: dict[threading.Thread, threading.Event] = {}


@atexit.register
def _stop_streams() -> None:
    for worker, closed in list(_RUNNING.items()):
        closed.set()
        worker.join()


def as_prompts(model: LanguageModel, prompts) -> tuple[list[list[int]], bool]:
    """(token id lists, whether one prompt was given) of what :func:`generate` takes."""
    if hasattr(prompts, "tolist") and hasattr(prompts, "dim"):  # a tensor: [T] one prompt, [B, T] a batch
        require(prompts.dim() in (1, 2), f"a prompt tensor is [T] or [B, T], got {tuple(prompts.shape)}")
        ids = prompts.tolist()
        return ([ids], True) if prompts.dim() == 1 else (ids, False)
    if isinstance(prompts, str):
        return [_encode(model, prompts)], True
    require(
        isinstance(prompts, (list, tuple)),
        f"prompts must be text, token ids or a list of them, got {type(prompts).__name__}",
    )
    if prompts and all(isinstance(x, int) and not isinstance(x, bool) for x in prompts):
        return [list(prompts)], True
    out = []
    for i, p in enumerate(prompts):
        if isinstance(p, str):
            out.append(_encode(model, p))
        elif hasattr(p, "tolist"):
            out.append(token_ids(p, i))
        else:
            require(
                isinstance(p, (list, tuple)), f"prompt {i} must be text or token ids, got {type(p).__name__}"
            )
            out.append(list(p))
    return out, False


def _encode(model: LanguageModel, text: str) -> list[int]:
    vocab = getattr(model, "vocab", None)
    if vocab is None:
        why = getattr(model, "missing_tokenizer", None) or "the model has no vocabulary"
        raise ConfigError(f"a text prompt needs the model's vocabulary to be encoded, but {why}")
    return vocab.encode(text)


def suppressed_ids(model: LanguageModel, config: GenerationConfig) -> list[int]:
    """The ids ``config.suppress`` names (strings through ``model.vocab``), plus ``<unk>`` unless
    ``config.allow_unk``. ConfigError for a string the vocabulary does not hold."""
    vocab = getattr(model, "vocab", None)
    ids = []
    for token in config.suppress:
        if isinstance(token, str):
            ids += _token_ids(vocab, token)
        else:
            ids.append(token)
    unk = getattr(vocab, "unk_id", None)
    if not config.allow_unk and unk is not None and unk != getattr(model, "eos_id", None):
        ids.append(unk)
    return ids


def _is_token(t: Any) -> bool:
    """A token id (an int >= 0, not a bool) or a token string."""
    return isinstance(t, str) or (isinstance(t, int) and not isinstance(t, bool) and t >= 0)


def _token_ids(vocab, token: str, what: str = "suppress") -> list[int]:
    """The ids a token string names: a vocabulary entry (``Ġis``), else every token whose text is
    that string (`` is``: what a user sees generated), else, for digits, the id itself."""
    index = getattr(vocab, "index", {})
    if token in index:
        return [index[token]]
    surfaces = vocab.surfaces() if vocab is not None else ()
    same = [i for i, s in enumerate(surfaces) if s == token]
    if same:
        return same
    if token.isdigit():
        return [int(token)]
    raise ConfigError(
        f"cannot {what} {token!r}: it is neither a token of the model's vocabulary, nor the text of "
        "one, nor a token id"
    )


def with_suppression(model: LanguageModel, config: GenerationConfig) -> LanguageModel:
    """``model``, or :class:`~decodekit.models.suppress.Suppressed` when tokens are suppressed."""
    ids = suppressed_ids(model, config)
    if not ids:
        return model
    from decodekit.models.suppress import Suppressed

    return Suppressed(model, ids)


def with_controls(model: LanguageModel, config: GenerationConfig) -> LanguageModel:
    """``model``, or :class:`~decodekit.models.controls.Controlled` when a control is on
    (repetition, presence and frequency penalties, logit bias, bad words, no repeated n-grams, a
    minimum length, stop strings); token strings resolved through ``model.vocab``."""
    if not config.controlled:
        return model
    from decodekit.models.controls import Controlled

    return Controlled(
        model,
        repetition_penalty=config.repetition_penalty,
        no_repeat_ngram_size=config.no_repeat_ngram_size,
        min_new_tokens=config.min_new_tokens,
        stop=config.stop,
        presence_penalty=config.presence_penalty,
        frequency_penalty=config.frequency_penalty,
        logit_bias=logit_bias_ids(model, config),
        bad_words=bad_word_ids(model, config),
    )


def logit_bias_ids(model: LanguageModel, config: GenerationConfig) -> dict[int, float]:
    """``config.logit_bias`` by token id: a string key is a vocabulary entry, the text of tokens
    (all of them) or an id in digits (JSON's keys are strings: the OpenAI API's ``{"50256": -100}``);
    ConfigError naming a string that is none of these (a text of several tokens, say)."""
    vocab = getattr(model, "vocab", None)
    out: dict[int, float] = {}
    for key, bias in config.logit_bias:
        for i in _token_ids(vocab, key, "bias") if isinstance(key, str) else [key]:
            out[i] = out.get(i, 0.0) + bias
    return out


def bad_word_ids(model: LanguageModel, config: GenerationConfig) -> list[tuple[int, ...]]:
    """``config.bad_words`` as id sequences: a text encoded by ``model.vocab`` (as it would be
    generated after the prompt: ``" word"`` and ``"word"`` may differ), id lists as given.
    ConfigError for a text the vocabulary cannot spell (an ``<unk>`` in its encoding)."""
    vocab = getattr(model, "vocab", None)
    out = []
    for word in config.bad_words:
        if isinstance(word, str):
            require(vocab is not None, f"bad word {word!r} is text: the model has no vocabulary to encode it")
            with warnings.catch_warnings():  # an unknown word is refused below, not warned about
                warnings.simplefilter("ignore")
                ids = tuple(vocab.encode(word))
            unk = getattr(vocab, "unk_id", None)
            require(
                bool(ids) and (unk is None or unk not in ids),
                f"bad word {word!r} is not spelled by the model's vocabulary (it encodes to {list(ids)})",
            )
            out.append(ids)
        else:
            out.append(tuple(word))
    return out


def _checked_init(init):
    """``GenerationConfig(...)`` with an unknown keyword: a ConfigError listing the known options
    (transformers' names included, with a hint for ``max_tokens``), not the dataclass's bare TypeError."""

    @functools.wraps(init)
    def checked(self, *args, **kwargs):
        known = {f.name for f in dataclasses.fields(GenerationConfig)} | set(TRANSFORMERS_KEYWORDS)
        unknown = sorted(set(kwargs) - known)
        if unknown:
            hint = "; max_tokens (the OpenAI API's) is max_new_tokens here" if "max_tokens" in unknown else ""
            require(False, f"unknown generation option(s) {unknown}{hint}; known: {sorted(known)}")
        init(self, *args, **kwargs)

    return checked


GenerationConfig.__init__ = _checked_init(GenerationConfig.__init__)
