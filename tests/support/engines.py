"""The token-level engines a constraint can be compiled into, for the engine axis of the
tests: the whole automaton (:class:`~decodekit.constraints.TokenAutomaton`), the first-visit
automaton over an eager byte DFA (:class:`~decodekit.constraints.LazyTokenAutomaton`, and the one
first-visit class ``DerivedTokenAutomaton`` over the same DFA read as a byte automaton,
``EagerBytes``) and the first-visit automaton over derivatives (``DerivedTokenAutomaton``),
each with exact masks on a byte-level vocabulary (every byte a token contains is a token by
itself, no separator)."""

from __future__ import annotations

from unittest import mock

from decodekit.constraints import LazyTokenAutomaton, TokenAutomaton, clear_cache, compile_regex
from decodekit.constraints import build as _build
from decodekit.constraints.automata.eagerbytes import EagerBytes
from decodekit.constraints.build import Laziness
from decodekit.constraints.tokens.derived import DerivedTokenAutomaton

# <unk> and <eos> (ids 0, 1) have no text; the others are byte-level: every byte is a token
BYTE_TOKENS = (None, None, b"a", b"b", b"c", b"ab", b"bc")
EOS = 1
ENGINES = ("whole", "first-visit", "eager-bytes", "derivatives")
CLASSES = {
    "whole": TokenAutomaton,
    "first-visit": LazyTokenAutomaton,
    "eager-bytes": DerivedTokenAutomaton,
    "derivatives": DerivedTokenAutomaton,
}


def compile_on(engine: str, pattern: str, tokens=BYTE_TOKENS, eos_id: int | None = EOS):
    """``pattern`` compiled by ``engine`` (one of :data:`ENGINES`), checked to be that class."""
    clear_cache(vocabularies=False)  # the derivative rung is chosen under a switch the cache ignores
    try:
        if engine == "whole":
            made = compile_regex(pattern, tokens, eos_id, lazy=Laziness.WHOLE)
        else:
            with (
                mock.patch.object(_build, "DERIVE_ALWAYS", engine == "derivatives"),
                mock.patch.object(_build, "EAGER_FIRST_VISIT", engine == "eager-bytes"),
            ):
                made = compile_regex(pattern, tokens, eos_id, lazy=Laziness.MASKED)
    finally:
        clear_cache(vocabularies=False)
    assert type(made) is CLASSES[engine], (engine, type(made))
    if engine == "eager-bytes":
        assert type(made.bytes) is EagerBytes, type(made.bytes)
    return made


def text_of(tokens, vocabulary=BYTE_TOKENS) -> str:
    """The text of a token sequence over ``vocabulary`` (a trailing EOS dropped)."""
    return b"".join(vocabulary[t] or b"" for t in tokens).decode("utf-8")


def masked_by_lazy_token_automaton():
    """For a module's autouse fixture (a generator: ``yield from``): the masked compile's exact
    first-visit automaton over an eager byte DFA is :class:`LazyTokenAutomaton` again
    (``build.EAGER_FIRST_VISIT`` off; its default is the one first-visit class over
    ``EagerBytes``), the compile cache cleared around, for the tests of that class's own paths."""
    clear_cache(vocabularies=False)
    with mock.patch.object(_build, "EAGER_FIRST_VISIT", False):
        yield
    clear_cache(vocabularies=False)
