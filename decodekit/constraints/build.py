"""The build ladder of a constraint: pattern text -> AST -> character DFA -> UTF-8 byte DFA (or the
product of several) -> a token automaton, whole or lazy (how lazily: :class:`Laziness`, decided
here only). :func:`build` is the one entry; :func:`decodekit.constraints.compile.compile_regex`
checks the arguments and caches its results."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from decodekit.constraints.automata.chardfa import CharDFA, build_char_dfa, minimized
from decodekit.constraints.automata.charlevel import CharLevel
from decodekit.constraints.automata.eagerbytes import EagerBytes
from decodekit.constraints.automata.graph import distances_to_accept
from decodekit.constraints.automata.lazybytes import LazyBytes
from decodekit.constraints.automata.pattern import Pattern, intersect, short_label
from decodekit.constraints.automata.product import components, describe, first_char_gate, listed, product
from decodekit.constraints.automata.utf8 import ascii_byte_dfa, byte_dfa, code_point_classes
from decodekit.constraints.syntax.parser import parsed
from decodekit.constraints.syntax.unicode import OCCURRING_BITS
from decodekit.constraints.tokens.automaton import TokenAutomaton
from decodekit.constraints.tokens.derived import DerivedTokenAutomaton
from decodekit.constraints.tokens.horizons import LexemeHorizons
from decodekit.constraints.tokens.interface import TokenConstraint, decides_on_host
from decodekit.constraints.tokens.lazy import LazyTokenAutomaton
from decodekit.constraints.tokens.lift import lift
from decodekit.constraints.tokens.trie import EncodedVocab, as_bytes, encode_vocab
from decodekit.errors import ConstraintError, ConstraintTooLarge
from decodekit.util.collector import while_paused

# Laziness.AUTO builds lazily (decodekit.constraints.tokens.lazy) when, before lifting, the byte
# DFA's states between characters (+ "nothing emitted") x V exceed LAZY_ENTRIES (the lift would
# refuse its [S, V] table) or x the widest level of the vocabulary's trie exceed LAZY_STEP
# (the lift's first round of stepping would)
LAZY_ENTRIES, LAZY_STEP = 2**27, 2**25
# the derivative engine's rung (Laziness.MASKED, where build.exact_lazily holds): a pattern
# whose NFA exceeds DERIVE_NFA states, or whose character DFA exceeds DERIVE_STATES, is built on
# first visit from its derivatives (docs/constraints.md "The derivative engine": measured; past
# 1,000 NFA states the subset construction's attempt at 256 states cost more than the engine)
DERIVE_NFA, DERIVE_STATES = 1_000, 256
# several constraints without excludes, Laziness.MASKED: one intersection through the derivative
# engine (the product of byte DFAs measured 1.4-3.8x slower to the first mask; with excludes the
# engine's liveness searches made it 3x slower: kept as a product)
DERIVE_PRODUCTS = True
DERIVE_ALWAYS = False  # every pattern through the derivative engine where it is exact (tests)
# the byte DFA of an ASCII-only character DFA read off directly for the lazy automaton (no UTF-8
# layering, no trim: utf8.ascii_byte_dfa), and the others' neither forward-trimmed nor with their
# alike columns merged (byte_dfa(minimal=False)); off, the general path (tests compare them)
FAST_ASCII = True
# Laziness.MASKED's exact first-visit automaton over an eager byte DFA: the one first-visit token
# level (DerivedTokenAutomaton) over EagerBytes, else LazyTokenAutomaton (measured alike:
# docs/benchmarks.md, "One token level: eager DFA through the first-visit class")
EAGER_FIRST_VISIT = True
# Laziness.SMALL_WHOLE (the banked search's): whole while its candidate states x V stay within
# WHOLE_ENTRIES (the bank of every token of every state is then one [S, V] table), else as MASKED
WHOLE_ENTRIES = 1 << 24


class Laziness(enum.Enum):
    """How much of a token automaton to build before decoding: the compiler's own choice, no
    longer public (``compile_regex(..., lazy=)`` still accepts the values for a release).

    DEFAULT (``compile_regex``'s default): where the derivative engine's masks are exact
    (:func:`exact_lazily`), a pattern whose character DFA exceeds :data:`DERIVE_STATES` (or whose
    NFA exceeds :data:`DERIVE_NFA`) is built on first visit from its derivatives, as the masked
    searches build it, instead of whole; else as AUTO (a small pattern whole, which every search,
    one beam per state included, can use). AUTO: whole (:class:`TokenAutomaton`), or built on first visit
    (:class:`LazyTokenAutomaton`, masked search only) when the whole automaton would be too large
    (``LAZY_ENTRIES``, ``LAZY_STEP``: decided before lifting, from the byte DFA's size, or when
    the lift refuses for size). LAZY: always on first visit. WHOLE: always whole (the size errors
    instead). MASKED (what the masked searches compile with where the host decides): on first
    visit whenever its masks equal the whole automaton's (:func:`exact_lazily`: every byte the
    tokens contain is a token by itself, no separator; near the length limit the whole automaton
    is built once, on first need), so that compiling costs a parse, two small DFAs and the first
    mask; else as AUTO. SMALL_WHOLE (what the banked search, and the plan choosing between it and
    the per-state grid, compile with where the host decides): as DEFAULT, but whole only while the
    candidate states x V stay within :data:`WHOLE_ENTRIES` (the same automaton WHOLE builds),
    beyond that as MASKED.

    The older spellings stay accepted (:meth:`of`): None = AUTO, True = LAZY, False = WHOLE,
    ``"masked"`` = MASKED.
    """

    DEFAULT = "default"
    AUTO = "auto"
    LAZY = "lazy"
    WHOLE = "whole"
    MASKED = "masked"
    SMALL_WHOLE = "small-whole"

    @classmethod
    def of(cls, value: Laziness | bool | str | None) -> Laziness:
        """``value`` as a Laziness: a member, its value (``"auto"``, ...), or an older spelling;
        ConstraintError for anything else."""
        if isinstance(value, Laziness):
            return value
        if value is None or value is True or value is False:
            return {None: cls.AUTO, True: cls.LAZY, False: cls.WHOLE}[value]
        if isinstance(value, str) and value in cls._value2member_map_:
            return cls(value)
        raise ConstraintError(
            f"lazy must be None, True, False, 'auto', 'lazy', 'whole', 'masked' or 'default', got {value!r}"
        )

    @classmethod
    def for_masks(cls, device) -> Laziness:
        """How a masked search compiles for a model on ``device``: MASKED where the host decides
        (the CPU: the lazy automaton decides on the host as it goes), else AUTO (whole where it
        can be, so that masks never wait for the host)."""
        return cls.MASKED if decides_on_host(device) else cls.AUTO

    @classmethod
    def for_banks(cls, device) -> Laziness:
        """How the banked search compiles for a model on ``device``: SMALL_WHOLE where the host
        decides, else AUTO."""
        return cls.SMALL_WHOLE if decides_on_host(device) else cls.AUTO


@dataclass
class Vocabulary:
    """A prepared vocabulary: its tokens and their byte trie (built on first use, then shared by
    every pattern compiled for it)."""

    tokens: tuple
    encoded: EncodedVocab | None = None
    exact: dict = field(default_factory=dict)  # (separator, eos_id) -> exact_lazily (50 us each)

    def trie(self) -> EncodedVocab:
        """The tokens' byte trie, built on first use."""
        if self.encoded is None:
            self.encoded = encode_vocab(self.tokens)
        return self.encoded

    def exact_lazily(self, separator: str, eos_id: int | None) -> bool:
        """:func:`exact_lazily` of these tokens, kept per (separator, EOS)."""
        key = (separator, eos_id)
        if key not in self.exact:
            self.exact[key] = exact_lazily(self.trie(), self.tokens, separator, eos_id)
        return self.exact[key]


@while_paused  # a burst of small objects (util/collector.py)
def build(
    pattern: str | tuple | Pattern,
    vocabulary: Vocabulary,
    eos_id: int | None,
    separator: str,
    max_states: int,
    lazy: Laziness,
) -> TokenConstraint:
    """The automaton of ``pattern`` (a str, a :class:`Pattern` expression, or ``("all", patterns,
    excludes)``) for ``vocabulary``."""
    if isinstance(pattern, Pattern) and pattern.op == "re":
        pattern = pattern.args
    if is_grammar(pattern):
        return _build_grammar(pattern, vocabulary, eos_id, separator, lazy)
    if isinstance(pattern, Pattern):
        return _build_expression(pattern, vocabulary, eos_id, separator, max_states, lazy)
    if isinstance(pattern, str):
        return _build(pattern, vocabulary, eos_id, separator, max_states, lazy)
    return _build_all(pattern[1], pattern[2], vocabulary, eos_id, separator, max_states, lazy)


def is_grammar(value) -> bool:
    """Whether ``value`` is a context-free grammar constraint: a
    :class:`~decodekit.constraints.grammar.cfg.CFG`, an object carrying one as ``cfg`` (a
    :class:`~decodekit.constraints.grammar.grammar.Grammar`), or a grammar intersected with a
    pattern (a :class:`~decodekit.constraints.grammar.grammar.GrammarAndPattern`)."""
    from decodekit.constraints.grammar.cfg import CFG
    from decodekit.constraints.grammar.grammar import GrammarAndPattern

    return isinstance(value, (CFG, GrammarAndPattern)) or isinstance(getattr(value, "cfg", None), CFG)


def _build_grammar(grammar, entry: Vocabulary, eos_id, separator: str, lazy: Laziness) -> TokenConstraint:
    """A grammar's token automaton: its parser configurations as byte states on first visit
    (:class:`~decodekit.constraints.grammar.earley.GrammarBytes`) under the one first-visit token
    level. Exact only where every byte the tokens contain is a token by itself (no separator),
    as the derivative engine; a grammar's states are unbounded, so never whole."""
    from decodekit.constraints.grammar.cfg import CFG
    from decodekit.constraints.grammar.earley import GrammarBytes
    from decodekit.constraints.grammar.grammar import GrammarAndPattern
    from decodekit.constraints.grammar.intersect import GrammarPatternBytes

    pattern = None
    if isinstance(grammar, GrammarAndPattern):
        grammar, pattern = grammar.grammar, grammar.pattern
    # a Grammar's regular parts read as terminals (fewer, longer lexemes: the same language)
    cfg = grammar if isinstance(grammar, CFG) else getattr(grammar, "regular", grammar.cfg)
    label = f"grammar {cfg.source}" if cfg.source != "<grammar>" else f"grammar (start {cfg.start!r})"
    if lazy is Laziness.WHOLE:
        raise ConstraintError(
            f"{label}: a context-free grammar has unboundedly many states, so it cannot be built whole "
            "for one beam per state: use the banked search (strategy='banked-beam') or a masked search"
        )
    if not entry.exact_lazily(separator, eos_id):
        raise ConstraintError(
            f"{label}: grammars need a vocabulary in which every byte a token contains is also a token by "
            "itself and no separator (byte-level BPE such as GPT-2's, or characters); this one "
            f"({len(entry.tokens)} tokens, separator {separator!r}) is not"
        )
    enc = entry.trie()
    automaton = GrammarBytes(cfg, enc.available(b""))
    automaton.horizons = LexemeHorizons(
        automaton.lexer, automaton.live_lexemes, automaton.g.starts, automaton.follows, enc
    )
    stats = {"engine": "grammar", "rules": len(cfg.rules), "terminals": len(cfg.terminals)}
    if pattern is not None:
        label = f"{label} & {short_label(str(pattern))}"
        automaton = GrammarPatternBytes(automaton, pattern, enc.available(b""), label)
        stats["engine"] = "grammar & pattern"
    return DerivedTokenAutomaton(automaton, enc, entry.tokens, eos_id, label, stats)


def _derivable(entry: Vocabulary, eos_id, separator: str, lazy: Laziness, modes=(Laziness.MASKED,)) -> bool:
    """Whether the derivative engine's masks are exact here and ``lazy`` is one of ``modes``
    (a regex: only what the masked searches compile, MASKED; AUTO keeps the eager ladder and
    its size errors)."""
    return lazy in modes and entry.exact_lazily(separator, eos_id)


def _derived(
    expr: Pattern, entry: Vocabulary, eos_id, label: str, stats: dict, known=None
) -> DerivedTokenAutomaton:
    enc = entry.trie()
    char = CharLevel(expr, enc.available(b""), known)
    return DerivedTokenAutomaton(char, enc, entry.tokens, eos_id, label, {**stats, "engine": "derivatives"})


def _build_expression(
    expr: Pattern, entry: Vocabulary, eos_id, separator: str, max_states: int, lazy: Laziness
) -> TokenConstraint:
    """An expression with ``&`` / ``~``: on first visit from its derivatives where that is exact
    (:func:`_derivable`), else its byte DFA explored whole from them and built as any other."""
    label = str(expr)
    if _derivable(entry, eos_id, separator, lazy, _DERIVED_EXPRESSIONS):
        return _derived(expr, entry, eos_id, label, {})
    shown = short_label(label)
    enc, sep = entry.trie(), separator.encode("utf-8")
    available = enc.available(sep)
    head = f"no token sequence of this vocabulary ({enc.size} tokens, separator {separator!r})"
    head += f" matches {shown}"
    char = CharLevel(expr, available)
    dfa = None if char.initial < 0 else LazyBytes(char).whole(available, max_states, shown)
    if dfa is None:
        raise ConstraintError(f"{head}: no text of the bytes its tokens contain matches")
    stats = {"byte_states": int(dfa.table.shape[0])}
    masked_lazily = lazy is Laziness.MASKED and entry.exact_lazily(separator, eos_id)
    target = _Target(entry, eos_id, separator, max_states, lazy, label)
    why = f"{head}: whole tokens joined by {separator!r} cannot form a matching text"
    return _ladder(dfa, target, {"byte_states": stats["byte_states"]}, masked_lazily, lambda: why)


# how lazily an expression is built from its derivatives (where exact), and a large regex
_DERIVED_EXPRESSIONS = (Laziness.AUTO, Laziness.MASKED, Laziness.DEFAULT, Laziness.SMALL_WHOLE)
_DERIVED_PATTERNS = (Laziness.MASKED, Laziness.DEFAULT, Laziness.SMALL_WHOLE)
_LAZY = object()  # what _lift returns when the lift refused for size and AUTO may go lazy


def _lift(dfa, enc: EncodedVocab, sep: bytes, eos_id, max_states: int, lazy: Laziness):
    """:func:`lift`, or ``_LAZY`` when it refused for size although :func:`_too_large` let it try
    (the in-character rounds of a product of constraints can hold many more states than its
    character boundaries) and ``dfa`` is large (all its states x V over :data:`LAZY_ENTRIES`)."""
    try:
        return lift(dfa, enc, sep, eos_id, max_states)
    except ConstraintTooLarge:
        large = len(dfa.table) * enc.size > LAZY_ENTRIES
        if lazy in _DERIVED_EXPRESSIONS and large:
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
    """The exact first-visit automaton over the byte DFA ``dfa``: the one first-visit class over
    it (:class:`DerivedTokenAutomaton` over :class:`EagerBytes`, with :data:`EAGER_FIRST_VISIT`),
    else a :class:`LazyTokenAutomaton` that builds the whole automaton (:func:`lift`) the first
    time a mask needs the exact fewest tokens to acceptance (near the length limit), or keeps the
    one-byte-per-token bound if that build refuses for size; None if nothing matches."""

    def whole():
        try:
            return lift(dfa, enc, separator.encode("utf-8"), eos_id, max_states)
        except ConstraintError:
            return None

    try:
        if EAGER_FIRST_VISIT:
            return DerivedTokenAutomaton(
                EagerBytes(dfa), enc, tokens, eos_id, pattern, {**stats, "engine": "eager"}
            )
        return LazyTokenAutomaton(dfa, enc, tokens, separator, eos_id, pattern, stats, exact=whole)
    except ConstraintError:  # nothing matches: the whole build says why, as without lazy
        return None


def _too_large(dfa, enc: EncodedVocab) -> bool:
    """Whether lifting ``dfa`` whole would exceed :data:`LAZY_ENTRIES` or :data:`LAZY_STEP`."""
    starts = 1 + int(np.count_nonzero(dfa.boundary))
    widest = max((len(p) for p in enc.parent), default=0)
    return starts * enc.size > LAZY_ENTRIES or starts * widest > LAZY_STEP


def _build(
    pattern: str, entry: Vocabulary, eos_id, separator: str, max_states: int, lazy: Laziness
) -> TokenConstraint:
    """Parse, character DFA, UTF-8 byte DFA, lift, dense tables (or the lazy automaton)."""
    ast, boundaries = parsed(pattern)
    derivable = _derivable(entry, eos_id, separator, lazy, _DERIVED_PATTERNS)
    if derivable and (ast.size > DERIVE_NFA or DERIVE_ALWAYS):
        known = {pattern: (ast, boundaries)}
        return _derived(Pattern(pattern), entry, eos_id, pattern, {"nfa_states": ast.size}, known)
    if first_char_gate(pattern) is not None:  # regex's first-character test narrows the pattern
        return _build_all((pattern,), (), entry, eos_id, separator, max_states, lazy, pattern)  # & gate
    enc = entry.trie()
    masked_lazily = lazy is Laziness.MASKED and entry.exact_lazily(separator, eos_id)
    if derivable and max_states > DERIVE_STATES:
        try:
            dfa = build_char_dfa(ast, boundaries, DERIVE_STATES, minimal=not masked_lazily)
        except ConstraintTooLarge:
            known = {pattern: (ast, boundaries)}
            return _derived(Pattern(pattern), entry, eos_id, pattern, {"nfa_states": ast.size}, known)
    else:
        dfa = build_char_dfa(ast, boundaries, max_states, minimal=not masked_lazily)
    if dfa.initial < 0:
        raise ConstraintError(f"regex {pattern!r} matches no text at all")
    sep = separator.encode("utf-8")
    classes = code_point_classes(dfa.other, dfa.explicit)
    if masked_lazily and enc.available(sep)[0x80:].any() and (dfa.table[:, classes.beyond_ascii] >= 0).any():
        dfa = minimized(dfa)  # the UTF-8 layer's cost grows with the character states
    bytes_dfa, fast = None, masked_lazily and FAST_ASCII
    if fast:
        bytes_dfa = ascii_byte_dfa(dfa.table, dfa.accepting, dfa.distances, classes, enc.available(sep))
    if bytes_dfa is None:
        bytes_dfa = byte_dfa(dfa.table, dfa.accepting, classes, enc.available(sep), minimal=not fast)
    if derivable and lazy is not Laziness.DEFAULT and (len(bytes_dfa.table) + 1) * enc.size > WHOLE_ENTRIES:
        # built on first visit, the byte-DFA engine's exact masks near the length limit need the
        # whole automaton (over WHOLE_ENTRIES: hundreds of MB); the derivatives' need none
        known = {pattern: (ast, boundaries)}
        return _derived(Pattern(pattern), entry, eos_id, pattern, {"nfa_states": ast.size}, known)
    stats = {"char_states": dfa.table.shape[0], "byte_states": bytes_dfa.table.shape[0]}
    target = _Target(entry, eos_id, separator, max_states, lazy, pattern)
    return _ladder(
        bytes_dfa, target, stats, masked_lazily, lambda: _unspellable(pattern, dfa, enc, separator)
    )


@dataclass(frozen=True)
class _Target:
    """What a byte DFA is built into: the vocabulary, its EOS and separator, the state guard, how
    lazily, and the automaton's ``pattern`` label."""

    entry: Vocabulary
    eos_id: int | None
    separator: str
    max_states: int
    lazy: Laziness
    label: str


def _ladder(dfa, target: _Target, stats: dict, masked_lazily: bool, unmatched) -> TokenConstraint:
    """The one build ladder from a byte DFA, where :class:`Laziness` is decided: lazily when asked
    (LAZY) or, unless WHOLE, when the whole automaton would be too large (:func:`_too_large`);
    lazily with exact masks for MASKED where :func:`exact_lazily`; else lifted whole, falling
    back to lazily when the lift refuses for size (:func:`_lift`, AUTO and MASKED).
    ``unmatched()``: the message when no token sequence matches."""
    enc, tokens, lazy = target.entry.encoded, target.entry.tokens, target.lazy
    eos_id, separator, label = target.eos_id, target.separator, target.label

    def lazily() -> LazyTokenAutomaton:
        return LazyTokenAutomaton(dfa, enc, tokens, separator, eos_id, label, stats)

    if lazy is Laziness.LAZY or (lazy is not Laziness.WHOLE and _too_large(dfa, enc)):
        return lazily()
    if lazy is Laziness.SMALL_WHOLE and target.entry.exact_lazily(separator, eos_id):
        masked_lazily = (len(dfa.table) + 1) * enc.size > WHOLE_ENTRIES  # the lazy one's candidates
    if masked_lazily:
        made = _exact_lazy(dfa, enc, tokens, separator, eos_id, label, stats, target.max_states)
        if made is not None:
            return made
    out = _lift(dfa, enc, separator.encode("utf-8"), eos_id, target.max_states, lazy)
    if out is _LAZY:
        return lazily()
    if out is None:
        raise ConstraintError(unmatched())
    return _automaton(out, enc, eos_id, label, separator, stats)


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
    entry: Vocabulary,
    eos_id,
    separator: str,
    max_states: int,
    lazy: Laziness,
    label: str | None = None,
) -> TokenConstraint:
    """Several constraints: the product byte DFA (:mod:`decodekit.constraints.automata.product`), lifted
    (or the lazy automaton); ``label``: the automaton's ``pattern`` (default: the product's); without
    excludes, with :data:`DERIVE_PRODUCTS` and where :func:`_derivable`, their intersection through
    the derivative engine instead."""
    if DERIVE_PRODUCTS and not excludes and _derivable(entry, eos_id, separator, lazy):
        expr = intersect(*patterns)
        stats = {"constraints": len(patterns)}
        return _derived(expr, entry, eos_id, label or describe(patterns, excludes), stats)
    parts = components(patterns, excludes, max_states)
    enc, sep = entry.trie(), separator.encode("utf-8")
    what = f"the {len(patterns) + len(excludes)} constraints"
    made = product(parts, enc.available(sep), max_states, what)
    wanted = listed(patterns, excludes)
    head = (
        f"no token sequence of this vocabulary ({enc.size} tokens, separator {separator!r}) matches {wanted}"
    )
    if made.dfa is None:
        try:
            anywhere = product(parts, None, max_states, what).dfa is not None
        except ConstraintError:  # too large without the vocabulary's restriction: say the likelier
            anywhere = True
        if not anywhere:
            raise ConstraintError(f"no text matches {wanted}: the constraints contradict each other")
        raise ConstraintError(f"{head}: the matching texts need bytes that no token contains")
    stats = {**made.stats, "constraints": len(patterns), "excludes": len(excludes)}
    masked_lazily = lazy is Laziness.MASKED and entry.exact_lazily(separator, eos_id)
    label = describe(patterns, excludes) if label is None else label
    target = _Target(entry, eos_id, separator, max_states, lazy, label)
    why = f"{head}: whole tokens joined by {separator!r} cannot form a matching text"
    return _ladder(made.dfa, target, stats, masked_lazily, lambda: why)


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
    dist = np.append(distances_to_accept(dfa.table, dfa.accepting), -1)
    text, q = [], dfa.initial  # a shortest matching text: each step one class closer to acceptance
    while dist[q] > 0:
        k = int(np.flatnonzero(dist[dfa.table[q]] == dist[q] - 1)[0])  # dead (-1) reads the -1
        text.append(dfa.examples[k])
        q = int(dfa.table[q, k])
    return f"{head}: whole tokens joined by {separator!r} cannot form a matching text, e.g. {''.join(text)!r}"
