"""The compiler's three nouns, as a user meets them (xgrammar's shape: ``TokenizerInfo``,
``GrammarCompiler``, ``GrammarMatcher``):

- :class:`Vocabulary`: a prepared vocabulary, the bytes of every token, its EOS and the text
  between tokens; the byte trie of its tokens is built once, on first use;
- :class:`Compiler`: turns a regex, a :class:`~decodekit.constraints.Pattern` expression, a JSON
  Schema or a grammar into a constraint for one vocabulary, keeping the last ``cache_size``
  (thread-safe); forgetting everything is dropping the compiler;
- :class:`~decodekit.constraints.TokenConstraint`: what every search and the logits processor
  read (masks, states, fewest tokens to acceptance).

``compile_regex`` and ``json_schema`` stay one-line conveniences: ``compile_regex`` goes through a
default compiler per vocabulary (:func:`default_compiler`, the last :data:`DEFAULT_COMPILERS`).
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from decodekit.constraints import DEFAULT_MAX_STATES
from decodekit.constraints.automata.pattern import Pattern, excluding
from decodekit.constraints.automata.product import as_patterns
from decodekit.constraints.build import Laziness, build, is_grammar
from decodekit.constraints.build import Vocabulary as _Prepared
from decodekit.constraints.tokens.interface import TokenConstraint
from decodekit.errors import ConstraintError

CACHE_SIZE = 32  # constraints a compiler keeps by default
DEFAULT_COMPILERS = 4  # vocabularies whose default compiler compile_regex keeps
FINGERPRINT_SAMPLE = 256  # tokens hashed into a vocabulary's fingerprint (hashing 10k: 0.3 ms)


class Vocabulary:
    """A prepared vocabulary: ``tokens`` (one ``str``, ``bytes`` or None per token id: a ``str``
    stands for its UTF-8 encoding, ``bytes`` (byte-level BPE) for itself, None (special tokens)
    for no text), ``eos_id`` (the token that ends a match: allowed in accepting states only) and
    ``separator`` (the text between two tokens: ``" "`` for a word vocabulary). A token sequence
    spells ``separator.join(tokens[t] for t in sequence)``.

    The byte trie of the tokens is built on first use and shared by every constraint a
    :class:`Compiler` compiles for this vocabulary."""

    def __init__(
        self, tokens: Sequence[str | bytes | None], eos_id: int | None = None, separator: str = ""
    ) -> None:
        if isinstance(tokens, (str, bytes, bytearray)) or not isinstance(tokens, Iterable):
            raise ConstraintError(
                "token_strings must be a sequence with one str/bytes/None per token id, "
                f"got {type(tokens).__name__}"
            )
        self.tokens = tuple(tokens)
        if not self.tokens:
            raise ConstraintError("cannot compile a constraint for an empty vocabulary")
        if not isinstance(separator, str):
            raise ConstraintError(f"separator must be a string, got {separator!r}")
        eos_id = _optional_index("eos_id", eos_id)
        if eos_id is not None and not 0 <= eos_id < len(self.tokens):
            raise ConstraintError(f"eos_id {eos_id} out of range for {len(self.tokens)} tokens")
        self.eos_id, self.separator = eos_id, separator
        self.prepared = _Prepared(self.tokens)  # the trie, built on first use

    @classmethod
    def of(cls, vocab: Any, eos_id: int | None = None) -> Vocabulary:
        """A :class:`decodekit.vocab.Vocab`'s token bytes, separator and EOS (``eos_id``: another
        EOS, as a model that disables its vocabulary's)."""
        tokens = getattr(vocab, "surface_bytes", vocab.surfaces)()
        return cls(tokens, vocab.eos_id if eos_id is None else eos_id, vocab.separator)

    def __len__(self) -> int:
        return len(self.tokens)

    def __repr__(self) -> str:
        return f"Vocabulary({len(self.tokens)} tokens, eos_id={self.eos_id}, separator={self.separator!r})"


class Compiler:
    """Compiles constraints for one :class:`Vocabulary` into
    :class:`~decodekit.constraints.TokenConstraint`\\ s, keeping the last ``cache_size`` (compiling
    the same constraint again returns the same object). Thread-safe. ``max_states``: the state
    guard of every compile (:class:`~decodekit.errors.ConstraintTooLarge` past it).

    How much of each automaton is built before decoding is the compiler's own choice (a small
    pattern whole, a larger one on first visit where the vocabulary spells every text one byte
    per token; docs/constraints.md)."""

    def __init__(
        self, vocabulary: Vocabulary, *, cache_size: int = CACHE_SIZE, max_states: int = DEFAULT_MAX_STATES
    ) -> None:
        if not isinstance(vocabulary, Vocabulary):
            raise ConstraintError(f"Compiler takes a Vocabulary, got {type(vocabulary).__name__}")
        self.vocabulary = vocabulary
        self.cache_size = _positive("cache_size", cache_size)
        self.max_states = _positive("max_states", max_states)
        self._kept: OrderedDict[tuple, TokenConstraint] = OrderedDict()
        self._lock = threading.Lock()

    def regex(self, pattern: str | Sequence[str], *, exclude: str | Sequence[str] = ()) -> TokenConstraint:
        """A regex (Python ``regex`` syntax), or a list of them that must all fully match; with
        ``exclude`` regexes none of which may match anywhere in the text."""
        if isinstance(pattern, Pattern) or is_grammar(pattern):
            raise ConstraintError(
                f"Compiler.regex takes regex text, got {type(pattern).__name__}: use .expression or .grammar"
            )
        return self.compile(pattern, exclude=exclude)

    def expression(self, pattern: Pattern, *, exclude: str | Sequence[str] = ()) -> TokenConstraint:
        """A :class:`~decodekit.constraints.Pattern` expression (regexes combined with ``&``,
        ``|``, ``~``, concatenation and repetition)."""
        if not isinstance(pattern, Pattern):
            raise ConstraintError(f"Compiler.expression takes a Pattern, got {type(pattern).__name__}")
        return self.compile(pattern, exclude=exclude)

    def json_schema(self, schema: dict | bool | str, **options: Any) -> TokenConstraint:
        """A JSON Schema (a dict, or its JSON text): every match is JSON valid against it
        (``options``: :func:`~decodekit.constraints.json_schema`'s ``whitespace``, ``key_order``)."""
        from decodekit.constraints.frontends.schema import json_schema

        return self.compile(json_schema(schema, **options))

    def grammar(self, grammar: Any, syntax: str | None = None) -> TokenConstraint:
        """A context-free grammar: a :class:`~decodekit.constraints.Grammar`, or Lark / GBNF text
        (``syntax``: ``"lark"`` or ``"gbnf"``, else told by the text)."""
        from decodekit.constraints.grammar.grammar import Grammar

        if isinstance(grammar, str):
            grammar = Grammar(grammar, syntax=syntax) if syntax else Grammar(grammar)
        if not is_grammar(grammar):
            raise ConstraintError(
                f"Compiler.grammar takes a Grammar or its text, got {type(grammar).__name__}"
            )
        return self.compile(grammar)

    def compile(self, constraint: Any, *, exclude: str | Sequence[str] = (), lazy: Any = Laziness.DEFAULT):
        """Any constraint :func:`~decodekit.constraints.compile_regex` takes (a regex, a list of
        them, a Pattern, a grammar), with ``exclude``; ``lazy``: the deprecated keyword of
        ``compile_regex`` (the plan of a search names its own laziness here)."""
        kept, built = _normalised(constraint, exclude)
        key = (kept, Laziness.of(lazy))
        with self._lock:
            automaton = self._kept.get(key)
            if automaton is not None:
                self._kept.move_to_end(key)
                return automaton
        v = self.vocabulary
        automaton = build(built, v.prepared, v.eos_id, v.separator, self.max_states, key[1])
        with self._lock:
            self._kept[key] = automaton
            while len(self._kept) > self.cache_size:
                self._kept.popitem(last=False)
        return automaton

    def clear(self) -> None:
        """Forget every compiled constraint (the vocabulary's trie stays)."""
        with self._lock:
            self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)

    def __repr__(self) -> str:
        return f"Compiler({self.vocabulary!r}, {len(self._kept)} of {self.cache_size} kept)"


def _normalised(constraint: Any, exclude: Any) -> tuple[Any, Any]:
    """(the cache key of ``constraint`` with ``exclude``, what :func:`build` takes): a str, the
    tuple ``("all", patterns, excludes)``, a Pattern (excludes folded in as ``& ~(.*R.*)``), or a
    grammar (keyed by its text, or a bare CFG by identity: the automaton holds it, so the id stays
    its own while kept)."""
    plain = isinstance(exclude, tuple) and not exclude
    if is_grammar(constraint):
        from decodekit.constraints.grammar.grammar import GrammarAndPattern

        grammar, pattern = constraint, None
        if isinstance(constraint, GrammarAndPattern):
            grammar, pattern = constraint.grammar, constraint.pattern
        if not plain:  # the grammar & (the pattern, if any, and no exclude anywhere)
            pattern = excluding(
                Pattern(r"(?s:.*)") if pattern is None else pattern, as_patterns(exclude, "exclude")
            )
            constraint = GrammarAndPattern(grammar, pattern)
        # a Grammar by its text; a bare CFG by identity (the automaton holds it, so the id stays
        # its own while kept)
        return ("grammar", grammar if hasattr(grammar, "text") else id(grammar), pattern), constraint
    if isinstance(constraint, Pattern):
        pattern = constraint if plain else excluding(constraint, as_patterns(exclude, "exclude"))
        return pattern, pattern
    if isinstance(constraint, str) and plain:
        return constraint, constraint
    patterns, excludes = as_patterns(constraint, "pattern"), as_patterns(exclude, "exclude")
    if not patterns and not excludes:
        raise ConstraintError("no constraint given: pattern is an empty list and there is no exclude")
    pattern = patterns[0] if len(patterns) == 1 and not excludes else ("all", patterns, excludes)
    return pattern, pattern


_defaults: OrderedDict[tuple, Compiler] = OrderedDict()  # (fingerprint, eos, separator, max_states)
_tries: OrderedDict[tuple[int, int], _Prepared] = OrderedDict()  # fingerprint -> the tokens' trie
_defaults_lock = threading.Lock()


def default_compiler(
    tokens: Sequence, eos_id: int | None, separator: str, max_states: int = DEFAULT_MAX_STATES
) -> Compiler:
    """The compiler :func:`~decodekit.constraints.compile_regex` uses for these tokens, EOS,
    separator and state guard: one per vocabulary, the last :data:`DEFAULT_COMPILERS` vocabularies
    kept (by their length and a hash of 256 evenly spaced tokens, confirmed by comparing the
    tokens), those of one vocabulary sharing its trie."""
    vocabulary = Vocabulary(tokens, eos_id, separator)
    tokens = vocabulary.tokens
    fingerprint = (len(tokens), hash(tokens[:: max(1, len(tokens) // FINGERPRINT_SAMPLE)]))
    key = (fingerprint, vocabulary.eos_id, separator, _positive("max_states", max_states))
    with _defaults_lock:
        trie = _tries.get(fingerprint)
        if trie is None or (trie.tokens is not tokens and trie.tokens != tokens):
            trie = _tries[fingerprint] = vocabulary.prepared
            for stale in [k for k in _defaults if k[0] == fingerprint]:
                del _defaults[stale]
        vocabulary.prepared = trie
        _tries.move_to_end(fingerprint)
        compiler = _defaults.get(key)
        if compiler is None:
            compiler = _defaults[key] = Compiler(vocabulary, max_states=key[3])
        _defaults.move_to_end(key)
        while len(_tries) > DEFAULT_COMPILERS:
            gone, _ = _tries.popitem(last=False)
            for stale in [k for k in _defaults if k[0] == gone]:
                del _defaults[stale]
    return compiler


def forget_defaults(vocabularies: bool = True) -> None:
    """Forget what the default compilers compiled (and, with ``vocabularies``, the compilers and
    their tries)."""
    with _defaults_lock:
        if vocabularies:
            _defaults.clear()
            _tries.clear()
        compilers = list(_defaults.values())
    for compiler in compilers:
        compiler.clear()


def _optional_index(name: str, value) -> int | None:
    """``value`` as an int (numpy integers too), None as None, else ConstraintError."""
    if value is None:
        return None
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ConstraintError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    return operator.index(value)


def _positive(name: str, value) -> int:
    value = _optional_index(name, value)
    if value is None or value < 1:
        raise ConstraintError(f"{name} must be a positive integer, got {value!r}")
    return value
