"""The face of the constraint compiler: its public entry points check their arguments, cache the
automata by vocabulary, and leave the building to :func:`decodekit.constraints.build.build`."""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from decodekit.constraints import DEFAULT_MAX_STATES
from decodekit.constraints.automata.derivatives import Pattern, excluding
from decodekit.constraints.automata.product import as_patterns
from decodekit.constraints.build import Laziness, Vocabulary, build, is_grammar, parsed
from decodekit.constraints.tokens.interface import StateTables, TokenConstraint, provides
from decodekit.errors import ConstraintError, ConstraintTooLarge, NoBeamPerState

CACHE_VOCABS, CACHE_PATTERNS = 4, 32  # vocabularies kept, and automata kept per vocabulary
FINGERPRINT_SAMPLE = 256  # tokens hashed into a vocabulary's fingerprint (hashing 10k: 0.3 ms)
ANDERSON_HINT = (  # names the library's API only; the CLI says it with its flags
    "Anderson-style constrained beam search keeps one beam per automaton state and needs every "
    "state built, which is impractical at this size: use a masked search, which builds the "
    "automaton lazily: masked beam search (strategy='masked-beam', or "
    "decodekit.beam_search(..., constraint=...)), or greedy / sample"
)


@dataclass
class _Cached(Vocabulary):
    """A cached vocabulary: its tokens (to confirm a hit), trie and automata."""

    automata: OrderedDict[tuple, TokenConstraint] = field(default_factory=OrderedDict)


_cache: OrderedDict[tuple[int, int], _Cached] = OrderedDict()  # fingerprint -> vocabulary
_lock = threading.Lock()


def clear_cache(vocabularies: bool = True) -> None:
    """Forget every compiled automaton and parsed pattern (and, with ``vocabularies``, every
    prepared vocabulary: the trie of its tokens' bytes, which several patterns share)."""
    parsed.cache_clear()
    with _lock:
        if vocabularies:
            _cache.clear()
        for entry in _cache.values():
            entry.automata.clear()


def check_pattern(pattern: str) -> None:
    """Raise :class:`ConstraintError` (with the position, or what is unsupported and how to
    rewrite it) unless ``pattern`` is a regex the compiler accepts; compiles nothing (the parse
    is kept for the compile that usually follows)."""
    if not isinstance(pattern, str):  # the parser's own message, without hashing the value
        parsed.__wrapped__(pattern)
    parsed(pattern)


def compile_regex(
    pattern: str | Sequence[str] | Pattern,
    token_strings: Sequence[str | bytes | None],
    eos_id: int | None = None,
    separator: str = "",
    *,
    exclude: str | Sequence[str] = (),
    max_states: int = DEFAULT_MAX_STATES,
    lazy: bool | str | None = Laziness.DEFAULT,
) -> TokenConstraint:
    """Compile ``pattern`` into a :class:`TokenAutomaton` over ``len(token_strings)`` tokens (or,
    as ``lazy`` says, a :class:`LazyTokenAutomaton`: both are
    :class:`~decodekit.constraints.tokens.interface.TokenConstraint`).

    Several constraints: ``pattern`` may be a list of regexes, all of which must fully match the
    text, and ``exclude`` a regex or a list of them, none of which may match anywhere in it
    (``regex.search`` finds nothing). They are compiled as one product automaton
    (:mod:`decodekit.constraints.automata.product`) whose ``pattern`` reads ``(A) & (B) & !(R)``; an empty
    ``pattern`` list with excludes means "any text but". One pattern without excludes is
    compiled exactly as a string. A :class:`~decodekit.constraints.automata.derivatives.Pattern`
    expression (regexes combined with ``&``, ``|``, ``~`` at any depth) is compiled by the
    derivative engine (its ``exclude`` becomes ``& ~(.*R.*)``).

    A ``str`` token stands for its UTF-8 encoding, a ``bytes`` token (byte-level BPE) for itself.
    A token sequence is accepted iff the bytes ``separator.join(token_strings[t] for t in
    tokens)`` are valid UTF-8 and their decoding fully matches ``pattern``. None tokens (special
    tokens, a ``str`` with a lone surrogate) and ``eos_id`` get no transitions.

    Cached per vocabulary (the last 4, by its length and a hash of 256 evenly spaced tokens,
    confirmed by comparing the tokens) and (pattern, separator, eos_id, max_states): the last
    32 automata each; compiling again returns the same object.

    By default the compiler decides how much to build, as the searches would: a pattern small
    enough (its character DFA within 256 states) whole, a larger one, where the vocabulary spells
    every text one byte per token (byte-level BPE, characters) and has no separator, on first
    visit from its derivatives (a :class:`~decodekit.constraints.tokens.derived.DerivedTokenAutomaton`:
    masks equal to the whole automaton's, compiled in milliseconds where the whole one takes
    seconds), else whole, or built on first visit when too large to build whole.

    ``lazy`` (deprecated, accepted for one more release; docs/constraints.md): ``"auto"`` (or
    None) the eager ladder, whole unless too large, ``"lazy"`` (or True) always on first visit,
    ``"whole"`` (or False) always whole (the size errors instead), ``"masked"`` on first visit
    wherever the masks are exact.

    Raises:
        ConstraintError: invalid regex (with the position), unsupported feature (back-references,
            look-around), anchors not at the start/end (or in an exclude), more than
            ``max_states`` states, or no token sequence of this vocabulary can match (``no text
            matches all of ...`` when the constraints contradict each other).
    """
    grammar = is_grammar(pattern)
    if grammar:
        if not (isinstance(exclude, tuple) and not exclude):
            raise ConstraintError(
                "exclude cannot be added to a grammar constraint (a grammar's excludes are not supported)"
            )
    elif isinstance(pattern, Pattern):
        if not (isinstance(exclude, tuple) and not exclude):
            pattern = excluding(pattern, as_patterns(exclude, "exclude"))
    elif not isinstance(pattern, str) or not (isinstance(exclude, tuple) and not exclude):
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
    lazy = Laziness.of(lazy)
    # pattern: a str, ("all", patterns, excludes), a Pattern, or a grammar: a Grammar by its text, a
    # bare CFG (unhashable) by identity (the automaton holds it, so the id stays its own while cached)
    kept = pattern if not grammar else ("grammar", pattern if hasattr(pattern, "text") else id(pattern))
    key = (kept, separator, eos_id, max_states, lazy)
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
    automaton = build(pattern, entry, eos_id, separator, max_states, lazy)
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


def compile_for_vocab(
    pattern: str | Sequence[str],
    vocab,
    *,
    exclude: str | Sequence[str] = (),
    max_states: int = DEFAULT_MAX_STATES,
) -> TokenConstraint:
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
    lazy: bool | str | None = Laziness.DEFAULT,
) -> TokenConstraint:
    """A compiled automaton for ``model``: a pattern string, or a list of them (all must match),
    with optional ``exclude`` patterns (none may match anywhere), is compiled against
    ``model.vocab``; a compiled :class:`~decodekit.constraints.tokens.interface.TokenConstraint`
    is checked against ``model.vocab_size`` (and its EOS). ``constraint=None`` with excludes: any
    text without them. ``lazy``: as :func:`compile_regex`'s (``WHOLE``: a constraint given
    without every state's tables, a lazy automaton, is refused)."""
    lazy = Laziness.of(lazy)
    if constraint is None and not (isinstance(exclude, tuple) and not exclude):
        constraint = ()
    compiled = provides(constraint, TokenConstraint)
    if compiled and lazy is Laziness.WHOLE and not provides(constraint, StateTables):
        raise NoBeamPerState(
            f"the constraint {constraint.pattern!r} is a {type(constraint).__name__} (built on first visit, "
            f"{constraint.stats.get('candidate_states')} candidate states). {ANDERSON_HINT}"
        )
    if compiled:
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
    if isinstance(constraint, (str, list, tuple, Pattern)) or is_grammar(constraint):
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


def anderson_automaton(constraint, model, *, exclude: str | Sequence[str] = ()) -> StateTables:
    """:func:`as_automaton` built whole (:class:`~decodekit.constraints.tokens.interface.StateTables`),
    for Anderson-style search (one beam per state). Raises :class:`~decodekit.errors.NoBeamPerState`
    (naming the masked searches) where the whole automaton is refused for size
    (:class:`~decodekit.errors.ConstraintTooLarge`, kept as its ``cause``) or a constraint built
    on first visit is given."""
    try:
        return as_automaton(constraint, model, exclude=exclude, lazy=Laziness.WHOLE)
    except ConstraintTooLarge as e:
        raise NoBeamPerState(f"{e}. {ANDERSON_HINT}", cause=e) from e
