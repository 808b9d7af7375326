"""The face of the constraint compiler: the one-line conveniences over a default
:class:`~decodekit.constraints.compiler.Compiler` per vocabulary (``compile_regex``), a model's
vocabulary (``as_automaton``), and Anderson-style search's whole automaton; the building is
:func:`decodekit.constraints.build.build`'s."""

from __future__ import annotations

from collections.abc import Sequence

from decodekit.constraints import DEFAULT_MAX_STATES
from decodekit.constraints.automata.pattern import Pattern
from decodekit.constraints.build import Laziness, is_grammar
from decodekit.constraints.compiler import default_compiler, forget_defaults
from decodekit.constraints.syntax.parser import parsed
from decodekit.constraints.tokens.interface import StateTables, TokenConstraint, provides
from decodekit.errors import ConstraintError, ConstraintTooLarge, NoBeamPerState

ANDERSON_HINT = (  # names the library's API only; the CLI says it with its flags
    "Anderson-style constrained beam search keeps one beam per automaton state and needs every "
    "state built, which is impractical at this size: use a masked search, which builds the "
    "automaton lazily: masked beam search (strategy='masked-beam', or "
    "decodekit.beam_search(..., constraint=...)), or greedy / sample"
)


def clear_cache(vocabularies: bool = True) -> None:
    """Forget every constraint the default compilers compiled and every parsed pattern (and, with
    ``vocabularies``, the default compilers themselves, with the trie of their tokens' bytes,
    which several patterns share). A :class:`~decodekit.constraints.Compiler` of one's own keeps
    its cache until it is dropped or cleared."""
    parsed.cache_clear()
    forget_defaults(vocabularies)


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
    """Compile ``pattern`` into a :class:`~decodekit.constraints.TokenConstraint` over
    ``len(token_strings)`` tokens: ``Compiler(Vocabulary(token_strings, eos_id, separator),
    max_states=max_states).compile(pattern, exclude=exclude)`` through a default compiler kept
    per vocabulary (:func:`~decodekit.constraints.compiler.default_compiler`).

    Several constraints: ``pattern`` may be a list of regexes, all of which must fully match the
    text, and ``exclude`` a regex or a list of them, none of which may match anywhere in it
    (``regex.search`` finds nothing). They are compiled as one product automaton
    (:mod:`decodekit.constraints.automata.product`) whose ``pattern`` reads ``(A) & (B) & !(R)``; an empty
    ``pattern`` list with excludes means "any text but". One pattern without excludes is
    compiled exactly as a string. A :class:`~decodekit.constraints.automata.pattern.Pattern`
    expression (regexes combined with ``&``, ``|``, ``~`` at any depth) is compiled by the
    derivative engine (its ``exclude`` becomes ``& ~(.*R.*)``).

    A ``str`` token stands for its UTF-8 encoding, a ``bytes`` token (byte-level BPE) for itself.
    A token sequence is accepted iff the bytes ``separator.join(token_strings[t] for t in
    tokens)`` are valid UTF-8 and their decoding fully matches ``pattern``. None tokens (special
    tokens, a ``str`` with a lone surrogate) and ``eos_id`` get no transitions.

    Cached per vocabulary (the default compilers of the last 4, by its length and a hash of 256
    evenly spaced tokens, confirmed by comparing the tokens; one per EOS, separator and
    ``max_states``): the last 32 automata each; compiling again returns the same object.

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
    compiler = default_compiler(token_strings, eos_id, separator, max_states)
    return compiler.compile(pattern, exclude=exclude, lazy=lazy)


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
