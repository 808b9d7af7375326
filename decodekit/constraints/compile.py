"""Public entry points: compile a regex constraint for a vocabulary, with caching."""

from __future__ import annotations

import dataclasses
import operator
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from decodekit.constraints import DEFAULT_MAX_STATES
from decodekit.constraints.automata.chardfa import CharDFA, build_char_dfa, minimized
from decodekit.constraints.automata.graph import reverse_distances
from decodekit.constraints.automata.product import (
    as_patterns,
    components,
    describe,
    first_char_gate,
    listed,
    product,
)
from decodekit.constraints.automata.utf8 import byte_dfa, code_point_classes
from decodekit.constraints.syntax.parser import parse
from decodekit.constraints.syntax.unicode import OCCURRING_BITS
from decodekit.constraints.tokens.automaton import TokenAutomaton
from decodekit.constraints.tokens.lazy import LazyTokenAutomaton
from decodekit.constraints.tokens.lift import lift
from decodekit.constraints.tokens.trie import EncodedVocab, as_bytes, encode_vocab
from decodekit.errors import ConstraintError

CACHE_VOCABS, CACHE_PATTERNS = 4, 32  # vocabularies kept, and automata kept per vocabulary
FINGERPRINT_SAMPLE = 256  # tokens hashed into a vocabulary's fingerprint (hashing 10k: 0.3 ms)
# lazy=None builds lazily (decodekit.constraints.tokens.lazy) when, before lifting, the byte DFA's
# states between characters (+ "nothing emitted") x V exceed LAZY_ENTRIES (the lift would
# refuse its [S, V] table) or x the widest level of the vocabulary's trie exceed LAZY_STEP
# (the lift's first round of stepping would)
LAZY_ENTRIES, LAZY_STEP = 2**27, 2**25
ANDERSON_HINT = (
    "Anderson-style constrained beam search keeps one beam per automaton state and needs every "
    "state built, which is impractical at this size: use a masked search, which builds the "
    "automaton lazily: masked beam search (--strategy masked-beam, GenerationConfig(strategy="
    "'masked-beam'), decodekit.beam_search(..., constraint=...)), or greedy / sample"
)


@dataclass
class _Cached:
    """A cached vocabulary: its tokens (to confirm a hit), trie (built on first use) and automata."""

    tokens: tuple
    encoded: EncodedVocab | None = None
    automata: OrderedDict[tuple, TokenAutomaton] = field(default_factory=OrderedDict)


_cache: OrderedDict[tuple[int, int], _Cached] = OrderedDict()  # fingerprint -> vocabulary
_lock = threading.Lock()


def clear_cache(vocabularies: bool = True) -> None:
    """Forget every compiled automaton (and, with ``vocabularies``, every prepared vocabulary:
    the trie of its tokens' bytes, which several patterns share)."""
    with _lock:
        if vocabularies:
            _cache.clear()
        for entry in _cache.values():
            entry.automata.clear()


def check_pattern(pattern: str) -> None:
    """Raise :class:`ConstraintError` (with the position, or what is unsupported and how to
    rewrite it) unless ``pattern`` is a regex the compiler accepts; compiles nothing."""
    parse(pattern)


def compile_regex(
    pattern: str | Sequence[str],
    token_strings: Sequence[str | bytes | None],
    eos_id: int | None = None,
    separator: str = "",
    *,
    exclude: str | Sequence[str] = (),
    max_states: int = DEFAULT_MAX_STATES,
    lazy: bool | str | None = None,
) -> TokenAutomaton | LazyTokenAutomaton:
    """Compile ``pattern`` into a :class:`TokenAutomaton` over ``len(token_strings)`` tokens.

    Several constraints: ``pattern`` may be a list of regexes, all of which must fully match the
    text, and ``exclude`` a regex or a list of them, none of which may match anywhere in it
    (``regex.search`` finds nothing). They are compiled as one product automaton
    (:mod:`decodekit.constraints.automata.product`) whose ``pattern`` reads ``(A) & (B) & !(R)``; an empty
    ``pattern`` list with excludes means "any text but". One pattern without excludes is
    compiled exactly as a string.

    A ``str`` token stands for its UTF-8 encoding, a ``bytes`` token (byte-level BPE) for itself.
    A token sequence is accepted iff the bytes ``separator.join(token_strings[t] for t in
    tokens)`` are valid UTF-8 and their decoding fully matches ``pattern``. None tokens (special
    tokens, a ``str`` with a lone surrogate) and ``eos_id`` get no transitions.

    Cached per vocabulary (the last 4, by its length and a hash of 256 evenly spaced tokens,
    confirmed by comparing the tokens) and (pattern, separator, eos_id, max_states): the last
    32 automata each; compiling again returns the same object.

    ``lazy``: None (default) returns a :class:`~decodekit.constraints.tokens.lazy.LazyTokenAutomaton`
    (masked search only; built on first visit) when the automaton would be too large to build
    whole (:data:`LAZY_ENTRIES`, :data:`LAZY_STEP`: decided before lifting, from the byte DFA's
    size), True always, False never (the size errors below instead). ``"masked"`` (what the
    masked searches compile with): lazily whenever the lazy automaton's masks equal the whole
    one's (:func:`exact_lazily`: every byte the tokens contain is a token by itself, no
    separator; near the length limit the whole automaton is built once, on first need), so
    that compiling costs a parse, two small DFAs and the first mask; else as None.

    Raises:
        ConstraintError: invalid regex (with the position), unsupported feature (back-references,
            look-around), anchors not at the start/end (or in an exclude), more than
            ``max_states`` states, or no token sequence of this vocabulary can match (``no text
            matches all of ...`` when the constraints contradict each other).
    """
    if not isinstance(pattern, str) or not (isinstance(exclude, tuple) and not exclude):
        patterns, excludes = as_patterns(pattern, "pattern"), as_patterns(exclude, "exclude")
        if not patterns and not excludes:
            raise ConstraintError("no constraint given: pattern is an empty list and there is no exclude")
        pattern = patterns[0] if len(patterns) == 1 and not excludes else ("all", patterns, excludes)
    if not isinstance(separator, str):
        raise ConstraintError(f"separator must be a string, got {separator!r}")
    if isinstance(token_strings, (str, bytes, bytearray)) or not isinstance(token_strings, Iterable):
        raise ConstraintError(
            "token_strings must be a sequence with one str/bytes/None per token id, "
            f"got {type(token_strings).__name__}"
        )
    tokens = tuple(token_strings)
    if not tokens:
        raise ConstraintError("cannot compile a constraint for an empty vocabulary")
    eos_id = _optional_index("eos_id", eos_id)
    if eos_id is not None and not 0 <= eos_id < len(tokens):
        raise ConstraintError(f"eos_id {eos_id} out of range for {len(tokens)} tokens")
    max_states = _optional_index("max_states", max_states)
    if max_states is None or max_states < 1:
        raise ConstraintError(f"max_states must be a positive integer, got {max_states!r}")
    fingerprint = (len(tokens), hash(tokens[:: max(1, len(tokens) // FINGERPRINT_SAMPLE)]))
    if lazy not in (None, True, False, "masked"):
        raise ConstraintError(f"lazy must be None, True, False or 'masked', got {lazy!r}")
    key = (pattern, separator, eos_id, max_states, lazy)  # pattern: a str, or ("all", patterns, excludes)
    with _lock:
        entry = _cache.get(fingerprint)
        if entry is None or (entry.tokens is not tokens and entry.tokens != tokens):
            entry = _cache[fingerprint] = _Cached(tokens)
        _cache.move_to_end(fingerprint)
        while len(_cache) > CACHE_VOCABS:
            _cache.popitem(last=False)
        automaton = entry.automata.get(key)
        if automaton is not None:
            entry.automata.move_to_end(key)
            return automaton
    if isinstance(pattern, str):
        automaton = _build(pattern, entry, eos_id, separator, max_states, lazy)
    else:
        automaton = _build_all(pattern[1], pattern[2], entry, eos_id, separator, max_states, lazy)
    with _lock:
        entry.automata[key] = automaton
        while len(entry.automata) > CACHE_PATTERNS:
            entry.automata.popitem(last=False)
    return automaton


def _optional_index(name: str, value) -> int | None:
    """``value`` as an int (numpy integers too), None as None, else ConstraintError."""
    if value is None:
        return None
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ConstraintError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    return operator.index(value)


_LAZY = object()  # what _lift returns when the lift refused for size and lazy=None may go lazy


def _lift(dfa, enc: EncodedVocab, sep: bytes, eos_id, max_states: int, lazy: bool | None):
    """:func:`lift`, or ``_LAZY`` when it refused for size although :func:`_too_large` let it try
    (the in-character rounds of a product of constraints can hold many more states than its
    character boundaries) and ``dfa`` is large (all its states x V over :data:`LAZY_ENTRIES`)."""
    try:
        return lift(dfa, enc, sep, eos_id, max_states)
    except ConstraintError as e:
        large = len(dfa.table) * enc.size > LAZY_ENTRIES
        if lazy in (None, "masked") and large and str(e).startswith("constraint too large"):
            return _LAZY
        raise


def exact_lazily(enc: EncodedVocab, tokens: Sequence, separator: str, eos_id: int | None) -> bool:
    """Whether a lazy automaton over ``enc`` can have the whole automaton's masks: with no
    separator, every byte some token other than EOS contains is also a token by itself, so a
    state can still reach acceptance with tokens iff it can one byte per token (byte-level BPE
    and character vocabularies)."""
    if separator or len(enc.by_depth) < 2:
        return False
    ids, nodes = enc.by_depth[1]
    ok = ids != (-1 if eos_id is None else eos_id)
    single = np.zeros(256, dtype=bool)
    single[enc.byte[0][nodes[ok]]] = True
    counts = enc.byte_counts.copy()
    if eos_id is not None and (eos := as_bytes(tokens[eos_id])):
        np.subtract.at(counts, np.frombuffer(eos, dtype=np.uint8), 1)
    return bool(single[counts > 0].all())


def _exact_lazy(dfa, enc: EncodedVocab, tokens, separator: str, eos_id, pattern: str, stats, max_states):
    """A :class:`LazyTokenAutomaton` that builds the whole automaton (:func:`lift`) the first time
    a mask needs the exact fewest tokens to acceptance (near the length limit), or keeps the
    one-byte-per-token bound if that build refuses for size; None if nothing matches."""

    def whole():
        try:
            return lift(dfa, enc, separator.encode("utf-8"), eos_id, max_states)
        except ConstraintError:
            return None

    try:
        return LazyTokenAutomaton(dfa, enc, tokens, separator, eos_id, pattern, stats, exact=whole)
    except ConstraintError:  # nothing matches: the whole build says why, as without lazy
        return None


def _too_large(dfa, enc: EncodedVocab) -> bool:
    """Whether lifting ``dfa`` whole would exceed :data:`LAZY_ENTRIES` or :data:`LAZY_STEP`."""
    starts = 1 + int(np.count_nonzero(dfa.boundary))
    widest = max((len(p) for p in enc.parent), default=0)
    return starts * enc.size > LAZY_ENTRIES or starts * widest > LAZY_STEP


def _build(
    pattern: str, entry: _Cached, eos_id, separator: str, max_states: int, lazy: bool | None = False
) -> TokenAutomaton | LazyTokenAutomaton:
    """Parse, character DFA, UTF-8 byte DFA, lift, dense tables (or the lazy automaton)."""
    ast, boundaries = parse(pattern)
    if first_char_gate(pattern) is not None:  # regex's first-character test narrows the pattern
        both = _build_all((pattern,), (), entry, eos_id, separator, max_states, lazy)  # pattern & gate
        if isinstance(both, LazyTokenAutomaton):
            both.pattern = pattern
            return both
        return dataclasses.replace(both, pattern=pattern)
    if entry.encoded is None:
        entry.encoded = encode_vocab(entry.tokens)
    enc = entry.encoded
    masked_lazily = lazy == "masked" and exact_lazily(enc, entry.tokens, separator, eos_id)
    dfa = build_char_dfa(ast, boundaries, max_states, minimal=not masked_lazily)
    if dfa.initial < 0:
        raise ConstraintError(f"regex {pattern!r} matches no text at all")
    sep = separator.encode("utf-8")
    classes = code_point_classes(dfa.other, dfa.explicit)
    if masked_lazily and enc.available(sep)[0x80:].any() and (dfa.table[:, classes.beyond_ascii] >= 0).any():
        dfa = minimized(dfa)  # the UTF-8 layer's cost grows with the character states
    bytes_dfa = byte_dfa(dfa.table, dfa.accepting, classes, enc.available(sep))
    stats = {"char_states": dfa.table.shape[0], "byte_states": bytes_dfa.table.shape[0]}
    if lazy is True or (lazy is not False and _too_large(bytes_dfa, enc)):
        return LazyTokenAutomaton(bytes_dfa, enc, entry.tokens, separator, eos_id, pattern, stats)
    if masked_lazily:
        made = _exact_lazy(bytes_dfa, enc, entry.tokens, separator, eos_id, pattern, stats, max_states)
        if made is not None:
            return made
    out = _lift(bytes_dfa, enc, sep, eos_id, max_states, lazy)
    if out is _LAZY:
        return LazyTokenAutomaton(bytes_dfa, enc, entry.tokens, separator, eos_id, pattern, stats)
    if out is None:
        raise ConstraintError(_unspellable(pattern, dfa, enc, separator))
    return _automaton(out, enc, eos_id, pattern, separator, stats)


def _automaton(out, enc: EncodedVocab, eos_id, pattern: str, separator: str, stats: dict) -> TokenAutomaton:
    """The dense tables of a lifted automaton."""
    next_state = np.full((len(out.table), enc.size), -1, dtype=np.int64)
    next_state[:, out.tokens] = out.table[:, out.which]
    return TokenAutomaton(
        next_state=torch.from_numpy(next_state),
        accepting=torch.from_numpy(out.accepting.astype(bool)),
        min_tokens_to_accept=torch.from_numpy(out.min_tokens.astype(np.int64)),
        eos_id=eos_id,
        pattern=pattern,
        separator=separator,
        stats={**stats, "candidate_states": out.candidates, "live_states": out.live},
    )


def _build_all(
    patterns: tuple[str, ...],
    excludes: tuple[str, ...],
    entry: _Cached,
    eos_id,
    separator: str,
    max_states: int,
    lazy: bool | None = False,
) -> TokenAutomaton | LazyTokenAutomaton:
    """Several constraints: the product byte DFA (:mod:`decodekit.constraints.automata.product`), lifted
    (or the lazy automaton)."""
    parts = components(patterns, excludes, max_states)
    if entry.encoded is None:
        entry.encoded = encode_vocab(entry.tokens)
    enc, sep = entry.encoded, separator.encode("utf-8")
    label = f"the {len(patterns) + len(excludes)} constraints"
    made = product(parts, enc.available(sep), max_states, label)
    wanted = listed(patterns, excludes)
    head = (
        f"no token sequence of this vocabulary ({enc.size} tokens, separator {separator!r}) matches {wanted}"
    )
    if made.dfa is None:
        try:
            anywhere = product(parts, None, max_states, label).dfa is not None
        except ConstraintError:  # too large without the vocabulary's restriction: say the likelier
            anywhere = True
        if not anywhere:
            raise ConstraintError(f"no text matches {wanted}: the constraints contradict each other")
        raise ConstraintError(f"{head}: the matching texts need bytes that no token contains")
    stats = {**made.stats, "constraints": len(patterns), "excludes": len(excludes)}
    if lazy is True or (lazy is not False and _too_large(made.dfa, enc)):
        return LazyTokenAutomaton(
            made.dfa, enc, entry.tokens, separator, eos_id, describe(patterns, excludes), stats
        )
    if lazy == "masked" and exact_lazily(enc, entry.tokens, separator, eos_id):
        label = describe(patterns, excludes)
        out = _exact_lazy(made.dfa, enc, entry.tokens, separator, eos_id, label, stats, max_states)
        if out is not None:
            return out
    out = _lift(made.dfa, enc, sep, eos_id, max_states, lazy)
    if out is _LAZY:
        return LazyTokenAutomaton(
            made.dfa, enc, entry.tokens, separator, eos_id, describe(patterns, excludes), stats
        )
    if out is None:
        raise ConstraintError(f"{head}: whole tokens joined by {separator!r} cannot form a matching text")
    return _automaton(out, enc, eos_id, describe(patterns, excludes), separator, stats)


def compile_for_vocab(
    pattern: str | Sequence[str],
    vocab,
    *,
    exclude: str | Sequence[str] = (),
    max_states: int = DEFAULT_MAX_STATES,
) -> TokenAutomaton:
    """:func:`compile_regex` with a :class:`decodekit.vocab.Vocab`'s token bytes
    (:meth:`~decodekit.vocab.Vocab.surface_bytes`), separator and EOS."""
    tokens = getattr(vocab, "surface_bytes", vocab.surfaces)()  # surfaces(): a vocabulary-like object
    return compile_regex(
        pattern, tokens, vocab.eos_id, vocab.separator, exclude=exclude, max_states=max_states
    )


def as_automaton(
    constraint,
    model,
    *,
    exclude: str | Sequence[str] = (),
    max_states: int = DEFAULT_MAX_STATES,
    lazy: bool | str | None = None,
) -> TokenAutomaton | LazyTokenAutomaton:
    """A compiled automaton for ``model``: a pattern string, or a list of them (all must match),
    with optional ``exclude`` patterns (none may match anywhere), is compiled against
    ``model.vocab``; a :class:`TokenAutomaton` (or :class:`LazyTokenAutomaton`) is checked against
    ``model.vocab_size`` (and its EOS). ``constraint=None`` with excludes: any text without them.
    ``lazy``: as :func:`compile_regex`'s (False: a lazy automaton given is refused)."""
    if constraint is None and not (isinstance(exclude, tuple) and not exclude):
        constraint = ()
    if isinstance(constraint, LazyTokenAutomaton) and lazy is False:
        raise ConstraintError(
            f"the constraint {constraint.pattern!r} is a LazyTokenAutomaton (built on first visit, "
            f"{constraint.stats.get('candidate_states')} candidate states). {ANDERSON_HINT}"
        )
    if isinstance(constraint, (TokenAutomaton, LazyTokenAutomaton)):
        if not (isinstance(exclude, tuple) and not exclude):
            raise ConstraintError(
                "exclude cannot be added to a compiled TokenAutomaton: compile the patterns and the "
                "excludes together (compile_regex(patterns, ..., exclude=...))"
            )
        if constraint.vocab_size != model.vocab_size:
            raise ConstraintError(
                f"the constraint was compiled for {constraint.vocab_size} tokens but the model has "
                f"{model.vocab_size}"
            )
        eos = getattr(model, "eos_id", None)
        if constraint.eos_id != eos:  # the automaton allows its EOS column in accepting states only
            raise ConstraintError(
                f"the constraint was compiled with eos_id={constraint.eos_id} but the model's eos_id is "
                f"{eos}: compile it with the model's"
            )
        return constraint
    if isinstance(constraint, (str, list, tuple)):
        vocab = getattr(model, "vocab", None)
        if vocab is None:
            raise ConstraintError(
                "a regex constraint given as a string needs a model with a `vocab`; this model has none: "
                "compile it with decodekit.compile_regex(pattern, token_strings, eos_id, separator)"
            )
        if len(vocab) != model.vocab_size:
            raise ConstraintError(
                f"model.vocab has {len(vocab)} tokens but model.vocab_size is {model.vocab_size}"
            )
        # The model's eos_id decides (a model may disable the vocabulary's EOS).
        tokens = getattr(vocab, "surface_bytes", vocab.surfaces)()
        eos_id = getattr(model, "eos_id", None)
        return compile_regex(
            constraint, tokens, eos_id, vocab.separator, exclude=exclude, max_states=max_states, lazy=lazy
        )
    raise ConstraintError(
        "a constraint must be a regex string or a TokenAutomaton (or a list of regex strings), "
        f"got {type(constraint).__name__}"
    )


def anderson_automaton(constraint, model, *, exclude: str | Sequence[str] = ()) -> TokenAutomaton:
    """:func:`as_automaton` built whole, for Anderson-style search (one beam per state): a size
    refusal (``constraint too large``, ``exceeds max_states``) or a lazy automaton given says
    that one beam per state is impractical and names the masked searches."""
    try:
        return as_automaton(constraint, model, exclude=exclude, lazy=False)
    except ConstraintError as e:
        text = str(e)
        if ANDERSON_HINT not in text and ("too large" in text or "exceeds max_states" in text):
            raise ConstraintError(f"{text}. {ANDERSON_HINT}") from e
        raise


def _unspellable(pattern: str, dfa: CharDFA, enc: EncodedVocab, separator: str) -> str:
    """Why no token sequence matches: characters the regex uses that no token contains, or else
    the shortest matching text, which whole tokens cannot form."""
    head = f"no token sequence of this vocabulary ({enc.size} tokens, separator {separator!r})"
    head += f" matches {pattern!r}"
    available = enc.available(separator.encode("utf-8"))
    present = np.zeros(dfa.table.shape[1], dtype=bool)  # a class with a character the tokens have
    present[dfa.other[list(OCCURRING_BITS)]] = True  # not only named characters: assume present
    for c, k in dfa.explicit.items():
        present[k] |= available[list(c.encode("utf-8", "surrogatepass"))].all()
    missing = (dfa.table >= 0).any(axis=0) & ~present
    if wanted := sorted(c for c, k in dfa.explicit.items() if missing[k])[:12]:
        return f"{head}: it needs characters that no token contains, e.g. {', '.join(map(repr, wanted))}"
    src, cls = np.nonzero(dfa.table >= 0)
    dist = np.append(reverse_distances(src, dfa.table[src, cls], dfa.accepting, len(dfa.accepting)), -1)
    text, q = [], dfa.initial  # a shortest matching text: each step one class closer to acceptance
    while dist[q] > 0:
        k = int(np.flatnonzero(dist[dfa.table[q]] == dist[q] - 1)[0])  # dead (-1) reads the -1
        text.append(dfa.examples[k])
        q = int(dfa.table[q, k])
    return f"{head}: whole tokens joined by {separator!r} cannot form a matching text, e.g. {''.join(text)!r}"
