"""Structured generation side by side: decodekit vs xgrammar, llguidance, outlines-core (issue 15).

One process, CPU, one thread (``torch.set_num_threads(1)``, xgrammar's compiler ``max_threads=1``,
``RAYON_NUM_THREADS=1`` for the Rust engines), contenders alternated within every repeat, medians.
Every engine gets the same vocabulary: the 50,000-token byte-level BPE that
``bench_byte_patterns.byte_bpe`` trains and caches (``--cache``, ``--data``), as the raw bytes of
each token (``HFVocab.surface_bytes()``) with ``<|endoftext|>`` as EOS, the only stop token:

* decodekit: ``compile_regex(pattern, token_bytes, eos_id, lazy="masked")``, what the masked
  searches compile (the first-visit ``DerivedTokenAutomaton`` over the eager byte DFA,
  ``EagerBytes``, or over derivatives, with the whole automaton's masks on this vocabulary;
  ``--engines decodekit-lazy-automaton``: ``LazyTokenAutomaton`` instead); the mask is the
  one masked greedy and beam search compute (``remaining =
  max_length - t``, a length budget larger than the walk), written as the peers write theirs:
  ``fill_bitmask(bitmask, states, remaining)`` into a preallocated int32 [1, ceil(V / 32)]
  bitmask (their layout); ``allowed(states, remaining)``, a new [1, V] bool tensor, is timed
  beside it; mask + apply is ``mask(logits, states, budget, inplace=True)``, in place as the
  peers apply theirs;
* decodekit-whole: the same with the automaton built whole (``lazy=None``, the default of
  ``compile_regex``; what Anderson-style search needs);
* xgrammar: ``TokenizerInfo(bytes, VocabType.RAW, stop_token_ids=[eos])``, ``GrammarCompiler``
  (cache off), ``GrammarMatcher.fill_next_token_bitmask``, ``apply_token_bitmask_inplace``;
* llguidance: ``LLTokenizer(TokenizerWrapper(...))`` over the same bytes, ``LLMatcher`` of
  ``grammar_from_regex``, ``llguidance.torch.fill_next_token_bitmask`` / ``apply_token_bitmask_inplace``;
* outlines-core: ``Vocabulary(eos, {bytes: [id]})``, ``Index``, ``Guide``, and its
  ``kernels.torch`` fill / apply.
(llguidance's and outlines-core's ``apply`` kernels are ``torch.compile``d: compiled once at start.)

Measures, per pattern of the structured set (issue 15) and of the "reach" set:

1. compile: regex -> first mask computed (the vocabulary prepared once beforehand, excluded;
   decodekit's automaton cache cleared, its vocabulary trie kept; xgrammar's cache disabled):
   median wall and minimum CPU time over ``--repeats``;
2. per token along one valid walk (the tokenizer's encoding of a matching text, at most
   ``--walk`` tokens, the same ids for every engine; each engine must allow and accept every
   token): computing the allowed-token mask for one row, and mask + applying it to a [1, V]
   float32 logits tensor; medians over positions and repeats of per-call CPU time, in µs
   (wall medians in the JSON). ``agree`` counts positions where the engine's allowed set
   equals decodekit's;
3. the reach patterns run in a child process per engine (``--reach-timeout``, address space
   capped at ``--reach-memory`` MB above the prepared vocabulary): compile, per-token, and the
   peak RSS increase over the process with its vocabulary prepared (VmHWM after
   ``clear_refs``), or the refusal / error / timeout;
4. end to end: a random GPT-2 (``--layers`` 2, ``--width`` 128, V = 50,000, seeded) through
   ``decodekit.models.hf.HuggingFaceLM`` vs transformers ``model.generate`` with xgrammar's
   ``contrib.hf.LogitsProcessor`` (greedy) or a beam-aware one forking ``GrammarMatcher`` per
   beam prefix (beam 4: the contrib processor assumes row i continues row i), ``--prompts``
   prompts of 8 random tokens, at most ``--new`` new tokens, the ISO-date pattern (generation
   must end), the pattern compiled once beforehand for both; masked greedy
   (``decodekit.greedy(..., constraint=automaton)``) and masked beam 4
   (``decodekit.beam_search(..., constraint=automaton)``), every output checked with
   ``regex.fullmatch``; wall and CPU time, ratio decodekit / transformers+xgrammar.

Markdown tables go to stdout; ``--json FILE`` keeps everything, versions included.

    python benchmarks/bench_structured.py [--repeats 5] [--walk 64] [--json runs/bench_structured.json]
        [--data ../shared/data] [--cache runs/byte-bpe] [--engines decodekit xgrammar ...]
        [--patterns email date ...] [--no-reach] [--no-e2e]
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # before the Rust engines load

import argparse
import contextlib
import gc
import itertools
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from unittest import mock

import numpy as np
import regex
import torch

from decodekit.constraints import clear_cache, compile_regex, json_schema
from decodekit.constraints.tokens.interface import Bitmasks, provides
from decodekit.constraints.tokens.masks import bitmask_words, fill_bitmask

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_automaton import NO_WORD_BOUNDARY, PATTERNS  # noqa: E402
from bench_byte_patterns import STRUCTURED as BYTE_STRUCTURED  # noqa: E402

NEG_INF = float("-inf")
STRUCTURED = {
    "email": PATTERNS["email"],
    "date": PATTERNS["date"],
    "market": PATTERNS["market"],
    "lower40": PATTERNS["lower40"],
    "sentence": PATTERNS["sentence"],
    "number": PATTERNS["number"],
    "json-object": BYTE_STRUCTURED["json-object"],
    "ipv4": BYTE_STRUCTURED["ipv4"],
    "uuid": BYTE_STRUCTURED["uuid"],
}
REACH = {"(a|b)*a(a|b){15}": r"(a|b)*a(a|b){15}", ".{2000}": r".{2000}", "a{10000}": r"a{10000}"}
_WORDS = (
    "the stock market rose sharply today while the bond market fell and traders said the market was calm "
)
# a matching text per pattern; its encoding, cut to --walk tokens, is the walk (a prefix of a match)
WALK_TEXT = {
    "email": "the.quick.brown.fox.jumps.over.the.lazy.dog.and.runs.far.away.from.the.market.square"
    "@mail.research.department.example-university.co.uk",
    "date": "2024-05-17",
    "market": (_WORDS * 4).strip(),
    "lower40": "the cat sat on the mat with a small dog",
    "sentence": "the market "
    + "was very strong and the traders were happy with the results of the day " * 3
    + ".",
    "number": "-1234567.890123 million",
    "json-object": '{"name": "alice", "age": 42}',
    "ipv4": "192.168.100.254",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "(a|b)*a(a|b){15}": "abbabaabbbababbaabab" * 20,
    ".{2000}": (_WORDS * 40)[:2000],
    "a{10000}": "a" * 10000,
}
# JSON Schema and several constraints at once (issue 15): name -> (how each engine compiles it, what)
NESTED_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 1, "maximum": 99999},
        "name": {"type": "string", "maxLength": 40},
        "status": {"enum": ["active", "inactive", "pending"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 5},
        "address": {
            "type": "object",
            "properties": {
                "street": {"type": "string", "maxLength": 40},
                "city": {"type": "string", "maxLength": 30},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
            },
            "required": ["street", "city", "zip"],
            "additionalProperties": False,
        },
    },
    "required": ["id", "name", "status", "tags", "address"],
    "additionalProperties": False,
}
FLAT_SCHEMA = {
    "type": "object",
    "properties": {
        "first_name": {"type": "string", "maxLength": 20},
        "last_name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "is_member": {"type": "boolean"},
        "balance": {"type": "number"},
        "joined": {"type": "string", "format": "date"},
    },
    "required": ["first_name", "last_name", "age", "is_member", "balance", "joined"],
    "additionalProperties": False,
}
SCHEMA_DOCS = {
    "schema-nested": {
        "id": 4217,
        "name": "Ada Lovelace",
        "status": "active",
        "tags": ["math", "engines", "poetry"],
        "address": {"street": "12 St James's Square", "city": "London", "zip": "10001"},
    },
    "schema-flat": {
        "first_name": "Grace",
        "last_name": "Hopper",
        "age": 85,
        "is_member": True,
        "balance": 1234.5,
        "joined": "1952-06-01",
    },
}
THREE_WORDS = ("dog", "park", "ball")


def any_order(words) -> str:
    """One regex for "every word of ``words``, whole, in any order" without word boundaries (the
    peers refuse ``\\b``): the alternation of every order, words separated as in ``NO_WORD_BOUNDARY``."""
    sep = r"[^\w\n](?:.*[^\w\n])?"
    orders = [r"(?:.*[^\w\n])?" + sep.join(o) + r"(?:[^\w\n].*)?" for o in itertools.permutations(words)]
    return "(?:" + "|".join(orders) + ")"


EXTRA = {
    "schema-nested": ("schema", NESTED_SCHEMA),
    "schema-flat": ("schema", FLAT_SCHEMA),
    "three-words": ("all", [rf".*\b{w}\b.*" for w in THREE_WORDS]),
    "three-words-6": ("regex", any_order(THREE_WORDS)),
    "two-words": ("all", [rf".*\b{w}\b.*" for w in THREE_WORDS[:2]]),
    "two-words-2": ("regex", any_order(THREE_WORDS[:2])),
}
WALK_TEXT.update({n: json.dumps(d, separators=(",", ":")) for n, d in SCHEMA_DOCS.items()})
WALK_TEXT["three-words"] = WALK_TEXT["three-words-6"] = WALK_TEXT["two-words"] = WALK_TEXT["two-words-2"] = (
    "the children took the dog to the park in the morning and played with a red ball until lunch"
)
SMALL = "date"  # the small pattern the reach patterns' per-token times are compared with
ENGINES = ("decodekit", "xgrammar", "llguidance", "outlines-core")  # the default contenders
# on request (--engines): decodekit's automaton built whole; its eager DFA through
# LazyTokenAutomaton, not the one first-visit class (docs/benchmarks.md, "One token level: eager
# DFA through the first-visit class")
VARIANTS = ("decodekit-whole", "decodekit-lazy-automaton")
PACKAGES = {"xgrammar": "xgrammar", "llguidance": "llguidance", "outlines-core": "outlines_core"}


def available_engines(wanted=ENGINES) -> list[str]:
    """The engines of ``wanted`` whose package imports (decodekit always)."""
    out = []
    for name in wanted:
        if not name.startswith("decodekit"):
            try:
                __import__(PACKAGES[name])
            except ImportError:
                continue
        out.append(name)
    return out


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "machine": platform.machine()}
    for pkg in (
        "decodekit",
        "torch",
        "xgrammar",
        "llguidance",
        "outlines-core",
        "transformers",
        "tokenizers",
    ):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    import decodekit

    here = Path(decodekit.__file__).resolve().parent  # the decodekit imported (PYTHONPATH, install)
    out["decodekit path"] = str(here)
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10, cwd=here
        )
        out["decodekit commit"] = rev.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        out["decodekit commit"] = "unknown"
    return out


# ---------------------------------------------------------------------------------------------
# the engines: prepare(vocabulary) once; compile(pattern) -> handle with the first mask computed;
# start(handle) -> cursor; mask(cursor); mask_apply(cursor, logits); advance(cursor, token) -> bool;
# allowed(cursor) -> np.bool_ [V] (for the checks)


def _bits_to_bool(bitmask: torch.Tensor, vocab: int) -> np.ndarray:
    return np.unpackbits(bitmask.numpy().view(np.uint8), bitorder="little")[:vocab].astype(bool)


def _cold() -> None:
    """decodekit's compile caches cleared (the vocabulary's trie kept, as the peers keep their
    tokenizer info) and regex's own cache of compiled patterns too: the parser checks each pattern
    with ``regex.compile``, which a repeated compile would otherwise find cached."""
    clear_cache(vocabularies=False)
    regex.purge()


class DecodekitEngine:
    """decodekit as its masked searches compile (``lazy="masked"``: the automaton built on first
    visit, with the whole automaton's masks)."""

    name = "decodekit"
    lazy = "masked"

    def prepare(self, tokens, eos: int) -> None:
        self.tokens, self.eos = tokens, eos
        self.budget = 1 << 20  # max_length - t: larger than any walk, so it never bites
        self.bitmask = torch.zeros(1, bitmask_words(len(tokens)), dtype=torch.int32)  # as the peers'
        compile_regex("x", tokens, eos, "")  # the trie of the vocabulary, kept by clear_cache(False)

    def _first(self, a):
        self._filler(a)(self.bitmask, torch.tensor([a.initial]), self.budget)  # the first mask
        return a

    @staticmethod
    def _filler(a):
        """The automaton's own ``fill_bitmask``, else the generic one packing ``allowed``."""
        return a.fill_bitmask if provides(a, Bitmasks) else lambda *args: fill_bitmask(a, *args)

    def compile(self, pattern: str):
        _cold()
        return self._first(compile_regex(pattern, self.tokens, self.eos, "", lazy=self.lazy))

    def compile_schema(self, schema: dict):
        _cold()
        compiled = compile_regex(json_schema(schema), self.tokens, self.eos, "", lazy=self.lazy)  # compact
        return self._first(compiled)

    def compile_all(self, patterns: list[str]):
        _cold()
        return self._first(compile_regex(patterns, self.tokens, self.eos, "", lazy=self.lazy))  # all match

    def start(self, a):
        return {"a": a, "states": torch.tensor([a.initial]), "fill": self._filler(a)}

    def mask(self, c) -> None:
        c["fill"](self.bitmask, c["states"], self.budget)

    def mask_allowed(self, c) -> None:
        c["a"].allowed(c["states"], self.budget)

    def mask_no_length(self, c) -> None:
        c["a"].allowed(c["states"])

    def mask_apply(self, c, logits: torch.Tensor) -> None:
        c["a"].mask(logits, c["states"], self.budget, inplace=True)  # in place, as the peers apply

    def advance(self, c, token: int) -> bool:
        c["states"] = c["a"].step(c["states"], torch.tensor([token]))
        return int(c["states"][0]) >= 0

    def allowed(self, c) -> np.ndarray:
        self.mask(c)  # the bitmask the benchmark times, checked against allowed() and the peers
        bits = _bits_to_bool(self.bitmask, len(self.tokens))
        if not np.array_equal(bits, c["a"].allowed(c["states"], self.budget)[0].numpy()):
            raise AssertionError("decodekit's fill_bitmask differs from its allowed()")
        return bits

    def describe(self, a) -> str:
        if hasattr(a, "num_states"):
            return f"{a.num_states} states"
        return f"lazy, {a.stats['candidate_states']} byte-level states"  # built on first visit


class DecodekitWholeEngine(DecodekitEngine):
    """decodekit's automaton built whole (``lazy=None``: what Anderson-style search needs; lazy
    only when too large)."""

    name = "decodekit-whole"
    lazy = None


class DecodekitLazyAutomatonEngine(DecodekitEngine):
    """decodekit's masked compile with its exact first-visit automaton over the eager byte DFA
    built as ``LazyTokenAutomaton`` (``build.EAGER_FIRST_VISIT`` off) instead of the one
    first-visit class (``DerivedTokenAutomaton`` over ``EagerBytes``, the default); the patterns
    the compiler sends to the derivative engine are compiled as by "decodekit"."""

    name = "decodekit-lazy-automaton"

    def compile(self, pattern: str):
        from decodekit.constraints import build

        with mock.patch.object(build, "EAGER_FIRST_VISIT", False):
            return super().compile(pattern)


class XgrammarEngine:
    name = "xgrammar"

    def prepare(self, tokens, eos: int) -> None:
        import xgrammar as xgr

        self.xgr, self.vocab = xgr, len(tokens)
        encoded = [t if t is not None else b"" for t in tokens]
        self.info = xgr.TokenizerInfo(
            encoded, xgr.VocabType.RAW, vocab_size=len(tokens), stop_token_ids=[eos]
        )
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.bitmask = xgr.allocate_token_bitmask(1, self.vocab)

    def compile(self, pattern: str):
        g = self.compiler.compile_regex(pattern)
        self.xgr.GrammarMatcher(g).fill_next_token_bitmask(self.bitmask)
        return g

    def compile_schema(self, schema: dict):
        g = self.compiler.compile_json_schema(
            json.dumps(schema), any_whitespace=False, separators=(",", ":"), strict_mode=True
        )
        self.xgr.GrammarMatcher(g).fill_next_token_bitmask(self.bitmask)
        return g

    def start(self, g):
        return self.xgr.GrammarMatcher(g)

    def mask(self, m) -> None:
        m.fill_next_token_bitmask(self.bitmask)

    def mask_apply(self, m, logits: torch.Tensor) -> None:
        m.fill_next_token_bitmask(self.bitmask)
        self.xgr.apply_token_bitmask_inplace(logits, self.bitmask)

    def advance(self, m, token: int) -> bool:
        return m.accept_token(token)

    def allowed(self, m) -> np.ndarray:
        m.fill_next_token_bitmask(self.bitmask)
        return _bits_to_bool(self.bitmask, self.vocab)

    def describe(self, g) -> str:
        return ""


class _Wrapped:
    """What ``llguidance.TokenizerWrapper`` reads: token bytes, EOS, and an encode function."""

    def __init__(self, tokens, eos: int, encode) -> None:
        self.eos_token_id, self.bos_token_id = eos, None
        self.tokens = [t if t is not None else b"<|endoftext|>" for t in tokens]
        self.special_token_ids = [eos]
        self._encode = encode

    def __call__(self, text) -> list[int]:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        return self._encode(text)


class _EagerKernel:
    """The peers' torch apply kernel without ``torch.compile`` (seconds on first use), for quick
    tests: the mask's bits unpacked and -inf written where they are 0."""

    @staticmethod
    def apply_token_bitmask_inplace(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
        bits = (bitmask.unsqueeze(-1) >> torch.arange(32, dtype=torch.int32)) & 1
        logits.masked_fill_(bits.view(bitmask.shape[0], -1)[:, : logits.shape[1]] == 0, NEG_INF)


class LlguidanceEngine:
    name = "llguidance"

    def __init__(self, encode, compiled_kernels: bool = True) -> None:
        self.encode, self.compiled_kernels = encode, compiled_kernels

    def prepare(self, tokens, eos: int) -> None:
        import llguidance
        import llguidance.torch as llt

        self.ll, self.llt, self.vocab = llguidance, llt, len(tokens)
        self.kernels = llt if self.compiled_kernels else _EagerKernel
        wrapper = llguidance.TokenizerWrapper(_Wrapped(tokens, eos, self.encode))
        self.tokenizer = llguidance.LLTokenizer(wrapper, n_vocab=len(tokens), eos_token=eos)
        self.bitmask = llt.allocate_token_bitmask(1, self.vocab)
        self.kernels.apply_token_bitmask_inplace(torch.zeros(1, self.vocab), self.bitmask)  # compiled once

    def compile(self, pattern: str, grammar=None):
        grammar = grammar or self.ll.LLMatcher.grammar_from_regex(pattern)
        m = self.ll.LLMatcher(self.tokenizer, grammar, log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        self.llt.fill_next_token_bitmask(m, self.bitmask)
        return grammar

    def compile_schema(self, schema: dict):
        compact = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
        return self.compile("", self.ll.LLMatcher.grammar_from_json_schema(schema, defaults=compact))

    def start(self, grammar):
        return self.ll.LLMatcher(self.tokenizer, grammar, log_level=0)

    def mask(self, m) -> None:
        self.llt.fill_next_token_bitmask(m, self.bitmask)

    def mask_apply(self, m, logits: torch.Tensor) -> None:
        self.llt.fill_next_token_bitmask(m, self.bitmask)
        self.kernels.apply_token_bitmask_inplace(logits, self.bitmask)

    def advance(self, m, token: int) -> bool:
        return m.consume_token(token)

    def allowed(self, m) -> np.ndarray:
        self.llt.fill_next_token_bitmask(m, self.bitmask)
        return _bits_to_bool(self.bitmask, self.vocab)

    def describe(self, grammar) -> str:
        return "lazy"


class OutlinesEngine:
    name = "outlines-core"

    def __init__(self, compiled_kernels: bool = True) -> None:
        self.compiled_kernels = compiled_kernels

    def prepare(self, tokens, eos: int) -> None:
        import outlines_core
        import outlines_core.kernels.torch as ock

        self.oc, self.ock, self.vocab = outlines_core, ock, len(tokens)
        self.kernels = ock if self.compiled_kernels else _EagerKernel
        mapping = {t: [i] for i, t in enumerate(tokens) if t is not None and i != eos}
        self.vocabulary = outlines_core.Vocabulary(eos, mapping)
        self.bitmask = ock.allocate_token_bitmask(self.vocab)
        self.kernels.apply_token_bitmask_inplace(torch.zeros(1, self.vocab), self.bitmask)  # compiled once

    def compile(self, pattern: str):
        index = self.oc.Index(pattern, self.vocabulary)
        self.ock.fill_next_token_bitmask(self.oc.Guide(index), self.bitmask)
        return index

    def compile_schema(self, schema: dict):
        from outlines_core.json_schema import build_regex_from_schema

        return self.compile(build_regex_from_schema(json.dumps(schema), whitespace_pattern=""))

    def start(self, index):
        return self.oc.Guide(index)

    def mask(self, g) -> None:
        self.ock.fill_next_token_bitmask(g, self.bitmask)

    def mask_apply(self, g, logits: torch.Tensor) -> None:
        self.ock.fill_next_token_bitmask(g, self.bitmask)
        self.kernels.apply_token_bitmask_inplace(logits, self.bitmask)

    def advance(self, g, token: int) -> bool:
        try:
            g.advance(token)
        except BaseException as e:  # ValueError, or a pyo3 PanicException
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            return False
        return True

    def allowed(self, g) -> np.ndarray:
        self.ock.fill_next_token_bitmask(g, self.bitmask)
        return _bits_to_bool(self.bitmask, self.vocab)

    def describe(self, index) -> str:
        return f"{len(index.get_transitions())} states"


def make_engines(names, tokens, eos: int, encode, compiled_kernels: bool = True) -> dict:
    """Prepared engines by name (the vocabulary preparation timed, once); ``compiled_kernels``:
    llguidance's and outlines-core's torch apply kernels, else the same uncompiled."""
    makers = {
        "decodekit": DecodekitEngine,
        "decodekit-whole": DecodekitWholeEngine,
        "decodekit-lazy-automaton": DecodekitLazyAutomatonEngine,
        "xgrammar": XgrammarEngine,
        "llguidance": lambda: LlguidanceEngine(encode, compiled_kernels),
        "outlines-core": lambda: OutlinesEngine(compiled_kernels),
    }
    out = {}
    for name in names:
        engine = makers[name]()
        t0 = clocks()
        engine.prepare(tokens, eos)
        engine.prepare_s = since(t0)
        engine.eos = eos
        out[name] = engine
    return out


# ---------------------------------------------------------------------------------------------
# timing


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    now = clocks()
    return now[0] - start[0], now[1] - start[1]


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"


HOW = {"regex": "compile", "schema": "compile_schema", "all": "compile_all"}


def try_compile(engine, pattern, how: str = "regex"):
    """(wall, CPU) seconds, handle or None, error or None; garbage collector paused. ``how``:
    ``pattern`` is a regex, a JSON Schema (dict) or a list of regexes that must all match."""
    method = getattr(engine, HOW[how], None)
    if method is None:
        return (0.0, 0.0), None, f"no equivalent ({how}: {HOW[how]} not offered)"
    gc.disable()
    t0 = clocks()
    try:
        handle = method(pattern)
    except BaseException as e:  # ValueError, RuntimeError, ConstraintError, a pyo3 PanicException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return since(t0), None, _error(e)
    finally:
        gc.enable()
    return since(t0), handle, None


def bench_compile(
    engines: dict, pattern, repeats: int, slow: float = 2.0, describe: bool = True, how: str = "regex"
) -> dict:
    """name -> {wall, cpu, error, handle, runs, size}: alternating engines in each repeat (fewer
    repeats when the first build of any engine is slower than ``slow`` seconds); ``describe``: the
    state count where the engine tells it (outlines-core's costs a dict of every transition)."""
    names = list(engines)
    runs: dict[str, list] = {n: [] for n in names}
    handles, errors = {}, {}
    r = 0
    while r < repeats:
        for n in names[r % len(names) :] + names[: r % len(names)]:
            if n in errors:
                continue
            t, handle, err = try_compile(engines[n], pattern, how)
            if err is not None:
                errors[n] = err
                continue
            handles[n] = handle
            runs[n].append(t)
        if r == 0 and max((t[0] for v in runs.values() for t in v), default=0.0) > slow:
            repeats = min(repeats, 3)
        r += 1
    out = {}
    for n in names:
        if n in errors:
            out[n] = {"error": errors[n]}
        else:
            out[n] = {
                "wall": statistics.median(w for w, _ in runs[n]),
                "cpu": min(c for _, c in runs[n]),
                "runs": len(runs[n]),
                "handle": handles[n],
                "size": engines[n].describe(handles[n]) if describe else "",
            }
    return out


def check_walk(engines: dict, handles: dict, walk: list[int]) -> dict:
    """Per engine: whether every walk token is allowed and accepted, and at how many positions its
    allowed set equals decodekit's (None without decodekit)."""
    ref = None
    if "decodekit" in handles:
        e = engines["decodekit"]
        c, ref = e.start(handles["decodekit"]), []
        for t in walk:
            ref.append(e.allowed(c))
            e.advance(c, t)
    out = {}
    for n, h in handles.items():
        e, c = engines[n], engines[n].start(h)
        ok, agree, differ, bad = True, 0, 0, None
        for k, t in enumerate(walk):
            allowed = e.allowed(c)
            if ref is not None:
                agree += bool(np.array_equal(allowed, ref[k]))
                differ = max(differ, int(np.count_nonzero(allowed != ref[k])))
            if not allowed[t] or not e.advance(c, t):
                ok, bad = False, k
                break
        out[n] = {
            "ok": ok,
            "agree": agree if ref is not None else None,
            "max_differ": differ,
            "failed_at": bad,
        }
    return out


def bench_tokens(engines: dict, handles: dict, walk: list[int], repeats: int, vocab: int) -> dict:
    """name -> per-call (wall, CPU) seconds lists for 'mask' and 'apply' (and decodekit's
    'mask_allowed', a new bool tensor, and 'mask_no_length'), over every walk position and repeat;
    engines alternate in each repeat."""
    names = list(handles)
    if not names:
        return {}
    times = {n: {"mask": [], "apply": [], "mask_allowed": [], "mask_no_length": []} for n in names}
    logits = torch.randn(1, vocab, generator=torch.Generator().manual_seed(0))
    perf, cpu = time.perf_counter, time.process_time
    for r in range(repeats):
        for n in names[r % len(names) :] + names[: r % len(names)]:
            e = engines[n]
            kinds = ["mask", "apply"] + (["mask_allowed", "mask_no_length"] if n == "decodekit" else [])
            for kind in kinds:
                c = e.start(handles[n])
                fn = None if kind == "apply" else getattr(e, kind)
                out = times[n][kind]
                gc.disable()
                for t in walk:
                    if kind == "apply":
                        x = logits.clone()
                        w0, c0 = perf(), cpu()
                        e.mask_apply(c, x)
                        out.append((perf() - w0, cpu() - c0))
                    else:
                        w0, c0 = perf(), cpu()
                        fn(c)
                        out.append((perf() - w0, cpu() - c0))
                    e.advance(c, t)
                gc.enable()
    result = {}
    for n in names:
        result[n] = {}
        for kind, runs in times[n].items():
            if runs:
                result[n][kind] = {
                    "wall_us": 1e6 * statistics.median(w for w, _ in runs),
                    "cpu_us": 1e6 * statistics.median(c for _, c in runs),
                    "calls": len(runs),
                }
    return result


def bench_paired_masks(engines: dict, handles: dict, walk: list[int], repeats: int) -> dict:
    """name -> {cpu_us, calls}: the mask alone with the engines interleaved at every walk position
    (each engine's call timed right after the others', their order rotating), so that a change of
    load between passes moves every engine alike; CPU medians over positions and repeats."""
    names = list(handles)
    times: dict[str, list[float]] = {n: [] for n in names}
    cpu = time.process_time
    for r in range(repeats):
        cursors = {n: engines[n].start(handles[n]) for n in names}
        gc.disable()
        for k, t in enumerate(walk):
            shift = (r + k) % len(names)
            for n in names[shift:] + names[:shift]:
                c0 = cpu()
                engines[n].mask(cursors[n])
                times[n].append(cpu() - c0)
            for n in names:
                engines[n].advance(cursors[n], t)
        gc.enable()
    return {n: {"cpu_us": 1e6 * statistics.median(v), "calls": len(v)} for n, v in times.items() if v}


def walk_for(raw, name: str, limit: int) -> list[int]:
    """The tokenizer's encoding of the pattern's matching text, cut to ``limit`` tokens."""
    return raw.encode(WALK_TEXT[name], add_special_tokens=False).ids[:limit]


def matches(how: str, pattern, text: str) -> bool:
    """Whether ``text`` is in the language of ``pattern`` (``how`` as in ``try_compile``; a schema
    through decodekit's regex, and the text must parse as JSON)."""
    if how == "schema":
        return regex.fullmatch(json_schema(pattern), text) is not None and json.loads(text) is not None
    if how == "all":
        return all(regex.fullmatch(p, text) for p in pattern)
    return regex.fullmatch(pattern, text) is not None


def bench_pattern(
    engines: dict,
    name: str,
    pattern,
    raw,
    repeats: int,
    walk_len: int,
    vocab: int,
    how: str = "regex",
    paired: int = 0,
) -> dict:
    """Compile, walk check and per-token times for one pattern (an engine refusing the pattern gets
    the equivalent without word boundaries, if there is one, reported as such); ``how`` as in
    ``try_compile``; ``paired``: that many repeats of :func:`bench_paired_masks` too."""
    row = {
        "name": name,
        "how": how,
        "pattern": pattern,
        "compile": bench_compile(engines, pattern, repeats, how=how),
    }
    alt = NO_WORD_BOUNDARY.get(name)
    refused = [n for n, r in row["compile"].items() if "error" in r]
    if alt and refused:
        row["alt_pattern"] = alt
        sub = {n: engines[n] for n in refused}
        for n, r in bench_compile(sub, alt, repeats).items():
            r["refused"] = row["compile"][n]["error"]
            row["compile"][n] = r
    handles = {n: r.pop("handle") for n, r in row["compile"].items() if "handle" in r}
    walk = walk_for(raw, name, walk_len)
    row["walk"] = walk
    assert matches(how, pattern, WALK_TEXT[name]), name
    row["check"] = check_walk(engines, handles, walk)
    good = {n: h for n, h in handles.items() if row["check"][n]["ok"]}
    row["tokens"] = bench_tokens(engines, good, walk, repeats, vocab)
    if paired:
        for n, v in bench_paired_masks(engines, good, walk, paired).items():
            row["tokens"][n]["mask_paired"] = v
    if how == "schema":
        row["forms"] = json_forms(engines, handles, SCHEMA_DOCS[name], _encoder(raw))
    return row


def accepts(engine, handle, ids: list[int]) -> bool:
    """Whether the engine allows every token of ``ids`` and then EOS."""
    c = engine.start(handle)
    for t in ids:
        if not engine.allowed(c)[t] or not engine.advance(c, t):
            return False
    return bool(engine.allowed(c)[engine.eos])


def json_forms(engines: dict, handles: dict, doc: dict, encode) -> dict:
    """Which spellings of the same document each engine's JSON Schema language takes: compact,
    with a space after ``:`` and ``,``, indented, keys in reverse order (compact)."""
    forms = {
        "compact": json.dumps(doc, separators=(",", ":")),
        "spaced": json.dumps(doc),
        "indented": json.dumps(doc, indent=2),
        "reordered": json.dumps(dict(reversed(doc.items())), separators=(",", ":")),
    }
    return {n: {f: accepts(engines[n], h, encode(t)) for f, t in forms.items()} for n, h in handles.items()}


# ---------------------------------------------------------------------------------------------
# the reach patterns, one child process per engine


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


def child_setup(args, memory_mb: int):
    """A child process's one engine (``--child-engine``) over the vocabulary, its memory measured
    from here: returns (raw tokenizer, tokens, engines, engine, RSS kB now, whether VmHWM was
    reset); the address space may grow by ``memory_mb`` more."""
    torch.set_num_threads(1)
    raw, _, tokens, eos = load_vocabulary(args, verbose=False)
    engines = make_engines([args.child_engine], tokens, eos, _encoder(raw))
    gc.collect()
    base = _status_kb("VmRSS")
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        hwm_reset = True
    except OSError:
        hwm_reset = False
    limit = memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (_status_kb("VmSize") * 1024 + limit, resource.RLIM_INFINITY))
    return raw, tokens, engines, engines[args.child_engine], base, hwm_reset


def child(args) -> None:
    """Run one engine on one reach pattern; print one JSON line."""
    raw, tokens, engines, engine, base, hwm_reset = child_setup(args, args.reach_memory)
    name = args.child_pattern
    pattern = REACH[name]
    out = {"engine": engine.name, "pattern": pattern, "hwm_reset": hwm_reset}
    comp = bench_compile(engines, pattern, args.repeats, describe=False)[engine.name]
    if "error" in comp:
        out["error"] = comp["error"]
    else:
        handle = comp.pop("handle")
        out["compile"] = comp
        walk = walk_for(raw, name, args.walk)
        out["check"] = check_walk(engines, {engine.name: handle}, walk)[engine.name]
        if out["check"]["ok"]:
            out["tokens"] = bench_tokens(engines, {engine.name: handle}, walk, args.repeats, len(tokens))[
                engine.name
            ]
    out["peak_mb"] = (_status_kb("VmHWM") - base) / 1024
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(out), flush=True)


def add_child_options(ap: argparse.ArgumentParser) -> None:
    """``--json`` (where the results go) and the hidden options a child process is started with."""
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child-engine", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-pattern", default=None, help=argparse.SUPPRESS)


def child_result(cmd: list[str], timeout: float) -> dict:
    """Run a benchmark child process and read its last ``RESULT {json}`` line: that dict, or
    ``{"error": ...}`` (a timeout, or the end of what it printed when it failed)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    lines = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    if lines:
        return json.loads(lines[-1][7:])
    tail = " ".join((p.stderr or p.stdout).split()[-40:])
    return {"error": f"child exited {p.returncode}: {tail[-300:]}"}


def run_reach(args, names: list[str], small: dict) -> list[dict]:
    """Each reach pattern in a child process per engine; ``small``: engine -> its mask + apply time
    on a small pattern (µs), for the ratio."""
    rows = []
    for pname in REACH:
        row = {"name": pname, "pattern": REACH[pname], "engines": {}}
        for n in names:
            cmd = [sys.executable, __file__, "--child-engine", n, "--child-pattern", pname]
            cmd += [
                "--repeats",
                str(args.repeats),
                "--walk",
                str(args.walk),
                "--reach-memory",
                str(args.reach_memory),
            ]
            cmd += ["--data", str(args.data), "--cache", str(args.cache)]
            t0 = time.perf_counter()
            row["engines"][n] = child_result(cmd, args.reach_timeout)
            if "error" not in row["engines"][n] or not row["engines"][n]["error"].startswith("timeout"):
                row["engines"][n]["child_s"] = time.perf_counter() - t0
        rows.append(row)
        print_reach_row(row, names, small)
    return rows


# ---------------------------------------------------------------------------------------------
# end to end: a random GPT-2 through HuggingFaceLM vs transformers generate + xgrammar


class BeamGrammarProcessor:
    """An xgrammar logits processor for transformers beam search: one ``GrammarMatcher`` per
    distinct generated prefix, forked from its parent's (rows are reordered between steps)."""

    def __init__(self, compiled, prompt_len: int, vocab: int) -> None:
        import xgrammar as xgr

        self.xgr, self.compiled, self.prompt_len, self.vocab = xgr, compiled, prompt_len, vocab
        self.matchers: dict[tuple, object] = {}
        self.bitmask = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        rows = input_ids[:, self.prompt_len :].tolist()
        if self.bitmask is None or self.bitmask.shape[0] != len(rows):
            self.bitmask = self.xgr.allocate_token_bitmask(len(rows), self.vocab)
        new: dict[tuple, object] = {}
        for i, row in enumerate(rows):
            key = tuple(row)
            if key not in new:
                if not key:
                    m = self.xgr.GrammarMatcher(self.compiled)
                else:
                    parent = self.matchers.get(key[:-1])
                    m = None if parent is None or parent.is_terminated() else parent.fork()
                    if m is not None and not m.accept_token(key[-1]):
                        m = None  # a -inf candidate kept to fill the beam: dead
                new[key] = m
            m = new[key]
            if m is None or m.is_terminated():
                self.bitmask[i] = 0
            else:
                m.fill_next_token_bitmask(self.bitmask, i)
        self.matchers = new
        self.xgr.apply_token_bitmask_inplace(scores, self.bitmask)
        return scores


def end_to_end(args, raw, tok, tokens, eos: int) -> dict:
    import transformers
    import xgrammar as xgr
    import xgrammar.contrib.hf

    import decodekit
    from decodekit.models.hf import HuggingFaceLM

    pattern = STRUCTURED["date"]
    vocab = len(tokens)
    torch.manual_seed(args.seed)
    config = transformers.GPT2Config(
        vocab_size=vocab, n_positions=256, n_embd=args.width, n_layer=args.layers, n_head=4,
        bos_token_id=eos, eos_token_id=eos,
    )  # fmt: skip
    model = transformers.GPT2LMHeadModel(config).eval()
    lm = HuggingFaceLM(model, tok)
    assert lm.eos_id == eos and lm.vocab.surface_bytes() == tokens
    automaton = decodekit.compile_regex(pattern, lm.vocab.surface_bytes(), lm.eos_id, lazy="masked")
    info = xgr.TokenizerInfo(
        [t if t is not None else b"" for t in tokens],
        xgr.VocabType.RAW,
        vocab_size=vocab,
        stop_token_ids=[eos],
    )
    compiled = xgr.GrammarCompiler(info, max_threads=1).compile_regex(pattern)
    g = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(1, vocab, (args.prompts, 8), generator=g)
    ids[ids == eos] = 1
    prompts = ids.tolist()

    def hf(**kw):
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.new, eos_token_id=eos,
            pad_token_id=eos, do_sample=False, **kw,
        )  # fmt: skip
        rows = []
        for row in out[:, ids.shape[1] :].tolist():
            rows.append(row[: row.index(eos)] if eos in row else row)
        return rows

    def check(rows) -> int:
        ok = 0
        for row in rows:
            with contextlib.suppress(UnicodeDecodeError, TypeError):  # TypeError: EOS (None) inside
                ok += regex.fullmatch(pattern, b"".join(tokens[t] for t in row).decode("utf-8")) is not None
        return ok

    def first(hs) -> list[int]:
        return list(hs[0].tokens) if hs else []

    beam = args.beams
    contenders = {
        "greedy": (
            lambda: [first(h) for h in decodekit.greedy(lm, prompts, args.new, constraint=automaton)],
            lambda: hf(num_beams=1, logits_processor=[xgrammar.contrib.hf.LogitsProcessor(compiled)]),
        ),
        f"beam {beam}": (
            lambda: [
                first(h) for h in decodekit.beam_search(lm, prompts, beam, args.new, constraint=automaton)
            ],
            lambda: hf(
                num_beams=beam, logits_processor=[BeamGrammarProcessor(compiled, ids.shape[1], vocab)]
            ),
        ),
    }
    results = {}
    for name, (ours, theirs) in contenders.items():
        outs = {"decodekit": ours(), "transformers+xgrammar": theirs()}  # warm-up, and the outputs checked
        runs: dict[str, list] = {k: [] for k in outs}
        for r in range(args.e2e_repeats):
            order = [("decodekit", ours), ("transformers+xgrammar", theirs)]
            for who, fn in order if r % 2 == 0 else order[::-1]:
                gc.collect()
                t0 = clocks()
                fn()
                runs[who].append(since(t0))
        row = {"rows": len(prompts)}
        for who, rs in runs.items():
            row[who] = {
                "wall": statistics.median(w for w, _ in rs),
                "cpu": statistics.median(c for _, c in rs),
                "matching": check(outs[who]),
                "mean_tokens": statistics.mean(len(o) for o in outs[who]),
                "outputs": outs[who],
            }
        row["same_tokens"] = sum(a == b for a, b in zip(outs["decodekit"], outs["transformers+xgrammar"]))
        results[name] = row
    return {
        "pattern": pattern,
        "model": f"GPT-2 {args.layers} layers, width {args.width}, V={vocab}, seed {args.seed}",
        "prompts": args.prompts,
        "max_new_tokens": args.new,
        "results": results,
    }


# ---------------------------------------------------------------------------------------------
# tables


def _md(s: str) -> str:
    return s.replace("|", "\\|")


def _ratio(a, b) -> str:
    return f"{a / b:.2f}" if a is not None and b else "-"


def print_compile_table(rows: list[dict], names: list[str]) -> None:
    print("\n### Compile: regex -> first mask, ms (wall median / CPU min)\n")
    columns = ["pattern", *names, *(f"dk/{n} (CPU)" for n in names if n != "decodekit")]
    print(f"| {' | '.join(columns)} |")
    print("|---" * len(columns) + "|")
    for row in rows:
        cells, ours = [], row["compile"].get("decodekit", {}).get("cpu")
        for n in names:
            r = row["compile"].get(n, {})
            if "error" in r:
                cells.append("n/a" if r["error"].startswith("no equivalent") else "refused")
            elif r:
                star = "*" if "refused" in r else ""
                cells.append(f"{1e3 * r['wall']:.1f} / {1e3 * r['cpu']:.1f}{star}")
            else:
                cells.append("-")
        rs = [_ratio(ours, row["compile"].get(n, {}).get("cpu")) for n in names if n != "decodekit"]
        print(f"| {' | '.join([_md(row['name']), *cells, *rs])} |")
    alts = [r for r in rows if "alt_pattern" in r]
    for r in alts:
        who = [n for n, c in r["compile"].items() if "refused" in c]
        print(f"\n\\* {r['name']}: refused by {', '.join(who)}, timed on `{_md(r['alt_pattern'])}` instead:")
        for n in who:
            print(f"  {n}: {r['compile'][n]['refused']}")
    for r in rows:
        for n, c in r["compile"].items():
            if "error" in c:
                print(f"\n{n} refuses {r['name']}: {c['error']}")


def print_token_table(rows: list[dict], names: list[str]) -> None:
    kinds = [
        ("mask", "computing the allowed-token mask (decodekit: fill_bitmask, as the peers fill theirs)"),
        ("apply", "mask + applying it to [1, V] logits"),
    ]
    if any("mask_paired" in t for row in rows for t in row["tokens"].values()):
        kinds.append(("mask_paired", "the mask with the engines interleaved at every position (--paired)"))
    for kind, title in kinds:
        print(f"\n### Per token, {title}: µs per call (CPU median over the walk and repeats)\n")
        extra = ["decodekit allowed() (a new bool tensor)", "decodekit allowed() without length check"]
        extra = extra if kind == "mask" else []
        ratios = [f"dk/{n}" for n in names if n != "decodekit"]
        columns = ["pattern", "walk tokens", *names, *extra, *ratios]
        print(f"| {' | '.join(columns)} |")
        print("|---" * len(columns) + "|")
        for row in rows:
            t = row["tokens"]
            ours = t.get("decodekit", {}).get(kind, {}).get("cpu_us")
            cells = []
            for n in names:
                v = t.get(n, {}).get(kind, {}).get("cpu_us")
                ck = row["check"].get(n)
                cells.append(
                    f"{v:.1f}" if v is not None else ("walk refused" if ck and not ck["ok"] else "-")
                )
            for other in ("mask_allowed", "mask_no_length") if extra else ():
                v = t.get("decodekit", {}).get(other, {}).get("cpu_us")
                cells.append(f"{v:.1f}" if v is not None else "-")
            rs = [_ratio(ours, t.get(n, {}).get(kind, {}).get("cpu_us")) for n in names if n != "decodekit"]
            print(f"| {' | '.join([_md(row['name']), str(len(row['walk'])), *cells, *rs])} |")
    print("\nAllowed sets equal to decodekit's (EOS included) at each walk position (agree / positions):")
    for row in rows:
        if "decodekit" not in row["check"]:
            continue
        parts = [
            f"{n} {c['agree']}/{len(row['walk'])} (at most {c['max_differ']} tokens differ)"
            + ("" if c["ok"] else f" (walk refused at {c['failed_at']})")
            for n, c in row["check"].items()
            if n != "decodekit"
        ]
        print(f"  {row['name']}: {', '.join(parts)}")


def print_forms(rows: list[dict]) -> None:
    """Which spellings of each schema's document each engine accepts (``json_forms``)."""
    for row in rows:
        if "forms" in row:
            print(f"\n{row['name']}, spellings of the walk's document accepted (then EOS):")
            for n, forms in row["forms"].items():
                print(f"  {n}: " + ", ".join(f"{f} {'yes' if ok else 'no'}" for f, ok in forms.items()))


def print_reach_header(names: list[str], small: str) -> None:
    print("\n### Reach patterns (one child process per engine): compile ms (CPU min) / mask µs / ")
    print(f"mask + apply µs (CPU medians; x its own on {small}) / peak RSS increase MB\n")
    print(f"| pattern | {' | '.join(names)} |")
    print("|---" * (1 + len(names)) + "|")


def print_reach_row(row: dict, names: list[str], small: dict) -> None:
    cells = []
    for n in names:
        r = row["engines"].get(n, {})
        if "error" in r:
            mb = f", peak +{r['peak_mb']:.0f} MB" if "peak_mb" in r else ""
            cells.append(f"refused/error: {_md(r['error'][:120])}{mb}")
        elif "compile" in r:
            tk = r.get("tokens", {})
            mask = tk.get("mask", {}).get("cpu_us")
            apply = tk.get("apply", {}).get("cpu_us")
            times = f"{mask:.1f} / {apply:.1f}" if mask is not None else "walk refused"
            if mask is not None and small.get(n):
                times += f" ({apply / small[n]:.1f}x)"
            cells.append(f"{1e3 * r['compile']['cpu']:.1f} / {times} / {r['peak_mb']:.0f}")
        else:
            cells.append("-")
    print(f"| `{_md(row['pattern'])}` | {' | '.join(cells)} |", flush=True)


def print_e2e(e2e: dict) -> None:
    print(
        f"\n### End to end: {e2e['model']}, {e2e['prompts']} prompts, at most {e2e['max_new_tokens']} new "
        f"tokens, `{e2e['pattern']}`\n"
    )
    print(
        "| search | decodekit s (wall / CPU) | transformers+xgrammar s (wall / CPU) "
        "| ratio dk/hf (wall / CPU) | outputs matching (dk / hf) | mean tokens (dk / hf) | same tokens |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in e2e["results"].items():
        a, b = r["decodekit"], r["transformers+xgrammar"]
        print(
            f"| {name} | {a['wall']:.3f} / {a['cpu']:.3f} | {b['wall']:.3f} / {b['cpu']:.3f} "
            f"| {a['wall'] / b['wall']:.2f} / {a['cpu'] / b['cpu']:.2f} | {a['matching']}/{r['rows']} / "
            f"{b['matching']}/{r['rows']} | {a['mean_tokens']:.1f} / {b['mean_tokens']:.1f} "
            f"| {r['same_tokens']}/{r['rows']} |"
        )


# ---------------------------------------------------------------------------------------------


def load_vocabulary(args, verbose: bool = True):
    """(tokenizers.Tokenizer, transformers tokenizer, token bytes, eos): ``bench_byte_patterns``' BPE."""
    from bench_byte_patterns import byte_bpe

    return byte_bpe(args.data, 50_000, cache=args.cache, verbose=verbose)


def _encoder(raw):
    return lambda text: raw.encode(text, add_special_tokens=False).ids


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--cache", type=Path, default=Path("runs/byte-bpe"), help="trained tokenizers")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--walk", type=int, default=64, help="most tokens of a walk")
    ap.add_argument(
        "--max-length", type=int, default=None,
        help="decodekit's remaining-length budget for every mask, the first included (default: none bites)",
    )  # fmt: skip
    ap.add_argument("--engines", nargs="+", choices=ENGINES + VARIANTS, default=list(ENGINES))
    ap.add_argument(
        "--patterns", nargs="+", choices=list(STRUCTURED) + list(EXTRA), default=None, help="default: all"
    )
    ap.add_argument(
        "--paired",
        type=int,
        default=0,
        help="repeats of the mask timed with the engines interleaved per position",
    )
    ap.add_argument("--no-reach", action="store_true")
    ap.add_argument("--reach-timeout", type=float, default=300.0, help="seconds per child process")
    ap.add_argument("--reach-memory", type=int, default=4096, help="MB of address space a child may add")
    ap.add_argument("--no-e2e", action="store_true")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--new", type=int, default=64, help="most new tokens (end to end)")
    ap.add_argument("--beams", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--e2e-repeats", type=int, default=5)
    add_child_options(ap)
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.child_engine:
        return child(args)
    torch.set_num_threads(1)
    names = available_engines(args.engines)
    missing = [n for n in args.engines if n not in names]
    info = {
        "versions": versions(),
        "argv": sys.argv,
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    info["load_start"], info["cpus"] = load(), os.cpu_count()
    print(f"{info['started']}, load average {info['load_start']} ({info['cpus']} CPUs)")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    if missing:
        print(f"not installed, skipped: {missing} (pip install -e '.[bench]')")
    raw, tok, tokens, eos = load_vocabulary(args)
    engines = make_engines(names, tokens, eos, _encoder(raw))
    for e in engines.values():
        if args.max_length is not None and hasattr(e, "budget"):
            e.budget = args.max_length
    info["prepare_s"] = {n: e.prepare_s for n, e in engines.items()}
    print(
        "vocabulary preparation (once, excluded), ms wall / CPU: "
        + ", ".join(f"{n} {1e3 * w:.0f} / {1e3 * c:.0f}" for n, (w, c) in info["prepare_s"].items())
    )
    rows, extra = [], []
    for name in args.patterns or [*STRUCTURED, *EXTRA]:
        how, pattern = EXTRA.get(name, ("regex", STRUCTURED.get(name)))
        row = bench_pattern(
            engines, name, pattern, raw, args.repeats, args.walk, len(tokens), how, args.paired
        )
        (extra if name in EXTRA else rows).append(row)
        print(f"  {name} done (load {load()})", flush=True)
    if rows:
        print_compile_table(rows, names)
        print_token_table(rows, names)
    if extra:
        print("\n## JSON Schema and several constraints at once\n")
        print_compile_table(extra, names)
        print_token_table(extra, names)
        print_forms(extra)
    reach = []
    if not args.no_reach:
        ref = next((r for r in rows if r["name"] == SMALL), None)
        small = {n: t["apply"]["cpu_us"] for n, t in ref["tokens"].items()} if ref else {}
        print_reach_header(names, SMALL)
        reach = run_reach(args, names, small)
    e2e = None
    if not args.no_e2e and "xgrammar" in names:
        e2e = end_to_end(args, raw, tok, tokens, eos)
        print_e2e(e2e)
    info["load_end"] = load()
    print(f"\nload average at the end: {info['load_end']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {**info, "structured": rows, "extra": extra, "reach": reach, "end_to_end": e2e}, indent=1
            )
        )


if __name__ == "__main__":
    main()
