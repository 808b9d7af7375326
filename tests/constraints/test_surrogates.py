"""Surrogates (U+D800-U+DFFF) have no UTF-8 form: a character class is stored without them, so a
class naming all 2,048 (JSON's string class does) costs nothing downstream, and the automata are
the same as for the class without them, over token bytes that split characters."""

import itertools

import regex

from decodekit.constraints import compile_regex
from decodekit.constraints.syntax.charsets import make_set
from decodekit.constraints.syntax.nodes import Range

# '"', 'a', é split and whole, U+D7FF and U+E000 byte by byte, NUL, EOS
TOKENS = [b'"', b"a", b"\xc3", b"\xa9", "é".encode(), b"\xed", b"\x9f", b"\xbf", b"\xee", b"\x80", b"\x00"]
TOKENS.append(None)
EOS = len(TOKENS) - 1


class _Reader:
    s, pos, flags, ascii, inline_fold = "", 0, 0, False, False


def test_a_class_is_stored_without_surrogates_either_way():
    named = make_set([Range(0xD000, 0xE0FF)], False, _Reader())  # names 4,352 of which 2,048 surrogates
    assert len(named.chars) == 4352 - 2048 and not any("\ud800" <= c <= "\udfff" for c in named.chars)
    everything_but = make_set([Range(0x22, 0x22), Range(0xD800, 0xDFFF)], True, _Reader())
    assert everything_but.chars == frozenset('"') and everything_but.negated


def _accepted(pattern: str, length: int) -> set[tuple[int, ...]]:
    a = compile_regex(pattern, TOKENS, eos_id=EOS)
    sequences = (seq for n in range(length + 1) for seq in itertools.product(range(EOS), repeat=n))
    return {seq for seq in sequences if a.accepts(seq)}


def test_the_language_is_that_of_the_class_without_surrogates():
    """Every token sequence up to 4 tokens (bytes of U+D7FF, U+E000, é split or whole, a NUL)."""
    for with_, without in [
        (r'"[^"\\\x00-\x1f\ud800-\udfff]*"', r'"[^"\\\x00-\x1f]*"'),
        (r"[\ud000-\ue0ff]+", r"[\ud000-\ud7ff\ue000-\ue0ff]+"),
    ]:
        got = _accepted(with_, 4)
        assert got == _accepted(without, 4)
        for seq in got:  # and what regex says of the decoded text
            assert regex.fullmatch(with_, b"".join(TOKENS[t] for t in seq).decode("utf-8"))
